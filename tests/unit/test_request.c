// request: the atoms of one permission request, read from every field that
// could act (permission-rules §5.5, doc/threat-model.md). Each case gives a
// toolCall and the atoms expected, written one per atom as
//   <class><flags>:<what>
// class B (bash), R (read), E (edit), F (fetch), S (search), M (MCP),
// K (kind); flags d (deny/ask only: another atom carries the allow) and
// g (guessed: plan mode asks); what is the command's words, the normal
// path, the host or the name. "!" first means opaque. The session cwd is
// /p and home /h; neither exists, so paths resolve to themselves.

#include "policy/path.h"
#include "policy/request.h"
#include "policy/shcache.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fixtures.h"
#include "request_ref.c"

static void describe(const struct request *r, char *buf, size_t n) {
  static const char cls[] = "BREFSMK";
  size_t o = (size_t)snprintf(buf, n, "%s", r->opaque ? "!" : "");
  for (size_t i = 0; i < r->natoms && o < n; i++) {
    const struct request_atom *a = &r->atoms[i];
    o +=
        (size_t)snprintf(buf + o, n - o, "%s%c%s%s:", i ? " " : "", cls[a->cls],
                         a->deny_only ? "d" : "", a->guessed ? "g" : "");
    if (a->cls == REQUEST_BASH) {
      for (size_t w = 0; w < a->cmd->nwords && o < n; w++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", w ? "_" : "",
                              a->cmd->words[w].text);
    } else if (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) {
      o += (size_t)snprintf(buf + o, n - o, "%s",
                            a->where == REQUEST_KNOWN ? a->lex : "?");
    } else if (a->cls == REQUEST_KIND) {
      o += (size_t)snprintf(buf + o, n - o, "%s", a->kind);
    } else if (o < n) {
      o += (size_t)snprintf(buf + o, n - o, "%s", a->name ? a->name : "");
    }
  }
}

static void compare(const json_t *params, const char *cwd, const char *home,
                    const char *what);

static void test_atoms(void) {
  static const struct {
    const char *tc, *want;
  } rows[] = {
      // The Claude adapter's own shapes are read as before.
      {"{\"rawInput\":{\"command\":\"npm test\"},\"title\":\"npm test\","
       "\"kind\":\"execute\"}",
       "B:npm_test"},
      {"{\"rawInput\":{\"command\":\"ls\"},\"title\":\"`ls`\"}", "B:ls"},
      {"{\"rawInput\":{\"file_path\":\"/p/a\",\"content\":\"x\"},"
       "\"kind\":\"edit\",\"locations\":[{\"path\":\"/p/a\"}]}",
       "E:/p/a"},
      {"{\"rawInput\":{\"url\":\"https://GitHub.com./x\"},"
       "\"title\":\"Fetch https://GitHub.com./x\",\"kind\":\"fetch\"}",
       "F:github.com"},
      // A title showing another command is a second reading.
      {"{\"rawInput\":{\"command\":\"ls\"},\"title\":\"rm x\","
       "\"kind\":\"execute\"}",
       "B:ls B:rm_x Ed:/p/x"},
      // codex labels an argv command by what it reads: the label is no
      // command, the location is checked beside it.
      {"{\"rawInput\":{\"command\":[\"/bin/bash\",\"-lc\",\"cat a\"]},"
       "\"title\":\"Read a\",\"kind\":\"read\","
       "\"locations\":[{\"path\":\"/p/a\"}]}",
       "B:cat_a Rd:/p/a"},
      // A shell tool whatever its kind; a write whatever its kind.
      {"{\"toolCallId\":\"run_shell_command__1\",\"title\":\"rm x\","
       "\"kind\":\"search\"}",
       "B:rm_x Ed:/p/x"},
      {"{\"rawInput\":{\"file_path\":\"/p/a\",\"content\":\"x\"},"
       "\"kind\":\"think\"}",
       "E:/p/a"},
      {"{\"kind\":\"read\",\"content\":[{\"type\":\"diff\",\"path\":\"/p/"
       "a\"}]}",
       "E:/p/a"},
      {"{\"kind\":\"move\",\"locations\":[{\"path\":\"/p/a\"}],"
       "\"rawInput\":{\"destination\":\"~/.bashrc\"}}",
       "E:/h/.bashrc E:/p/a"},
      {"{\"kind\":\"think\",\"rawInput\":{\"changes\":{\"/p/a\":"
       "{\"move_path\":\"/p/b\"}}}}",
       "E:/p/a E:/p/b"},
      {"{\"kind\":\"edit\",\"rawInput\":{\"changes\":7}}", "!E:?"},
      {"{\"kind\":\"fetch\",\"rawInput\":{\"url\":\"https://a.com/\","
       "\"command\":\"ls\"}}",
       "B:ls F:a.com"},
      {"{\"kind\":\"think\",\"locations\":[{\"path\":\"/p/a\"}]}",
       "Rd:/p/a Edg:/p/a K:think"},
      {"{\"kind\":\"switch_mode\",\"rawInput\":{\"file_path\":\"/p/a\","
       "\"content\":\"x\"}}",
       "E:/p/a K:switch_mode"},
      {"{\"rawInput\":\"rm -rf /\",\"kind\":\"execute\"}", "!"},
      // MCP tools: their paths, at any depth, as reads and writes that the
      // tool's rule carries; their commands likewise.
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"a\":{\"b\":[\"~/.ssh/x\"]},\"content\":\"/etc/passwd\"}}",
       "M:mcp__fs__w Ed:/h/.ssh/x"},
      {"{\"_meta\":{\"claudeCode\":{\"toolName\":\"mcp__fs__r\"}},"
       "\"kind\":\"read\",\"rawInput\":"
       "{\"uri\":\"file:///p/%61\"}}",
       "M:mcp__fs__r Rd:/p/a"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"path\":\"/p/a\",\"content\":\"x\"}}",
       "M:mcp__fs__w Ed:/p/a"},
      {"{\"title\":\"mcp__t__run\",\"kind\":\"other\",\"rawInput\":"
       "{\"command\":\"rm x\",\"cwd\":\"/p\"}}",
       "M:mcp__t__run B:rm_x Ed:/p/x"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"path\":\"~root/.bashrc\"}}",
       "M:mcp__fs__w Rd:? Edg:?"},
      {"{\"toolCallId\":\"mcp_fs_w__1\",\"kind\":\"other\",\"content\":"
       "[{\"type\":\"content\",\"content\":{\"type\":\"text\","
       "\"text\":\"{\\\"path\\\":\\\"/p/a\\\"}\"}}]}",
       "M:mcp_fs_w Rd:/p/a Edg:/p/a"},
      {"{\"toolCallId\":\"mcp_fs_w__1\",\"kind\":\"other\",\"content\":"
       "[{\"type\":\"content\",\"content\":{\"type\":\"text\","
       "\"text\":\"[Payload omitted due to length]\"}}]}",
       "!M:mcp_fs_w"},
      // URLs: the field the tool fetches, and every URL shown.
      {"{\"rawInput\":{\"url\":\"https://a.com/\"},"
       "\"title\":\"Fetch https://b.com/\",\"kind\":\"fetch\"}",
       "F:a.com F:b.com"},
      {"{\"toolCallId\":\"web_fetch__1\",\"kind\":\"fetch\",\"title\":"
       "\"Processing URLs and instructions from prompt: \\\"https://a.com/ "
       "and https://b.com/\\\"\"}",
       "F:a.com F:b.com"},
      {"{\"toolCallId\":\"web_fetch__1\",\"kind\":\"fetch\",\"title\":"
       "\"Processing URLs and instructions from prompt: \\\"https://a.com/ "
       "and https://b...\\\"\"}",
       "!F:a.com"},
      {"{\"kind\":\"fetch\",\"rawInput\":{\"url\":\"wss://a.com/\"}}",
       "!F:a.com"},
      {"{\"kind\":\"fetch\",\"title\":\"get xhttps://a.com/\"}", "!"},
      {"{\"toolCallId\":\"google_web_search__1\",\"kind\":\"search\","
       "\"title\":\"acp\"}",
       "S:"},
      {"{\"kind\":\"search\",\"title\":\"grep\"}", "R:/p"},
      {"{\"kind\":\"Execute\",\"title\":\"rm -rf ~\"}", "!"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"a\":[[[[[[[[[[\"/h/.bashrc\"]]]]]]]]]]}}",
       "!M:mcp__fs__w"},

      {"{\"kind\":\"fetch\",\"title\":\"Fetch https://a.com/\","
       "\"rawInput\":{\"urls\":[\"https://b.com/\"]}}",
       "F:b.com F:a.com"},
      {"{\"kind\":\"SWITCH_MODE\",\"title\":\"x\"}", "K:switch_mode"},
      {"{\"kind\":\"execute\",\"rawInput\":{\"command\":\"\"}}", "!"},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    json_error_t err;
    json_t *tc = json_loads(rows[i].tc, 0, &err);
    if (!ok(tc != NULL, "row %zu parses", i)) {
      printf("#   %s\n", err.text);
      continue;
    }
    json_t *params = json_pack("{s:o}", "toolCall", tc);
    struct request r;
    request_init(&r, params, "/p", "/h");
    char got[1024];
    describe(&r, got, sizeof(got));
    is_str(got, rows[i].want, rows[i].tc);
    request_clear(&r);
    compare(params, "/p", "/h", rows[i].tc);
    json_decref(params);
  }
}

// The broker's JSON readers refuse \u0000, but a NUL byte in a string
// would end it early for C while the agent reads on: opaque.
static void test_nul(void) {
  static const char title[] =
      "Processing URLs and instructions from prompt: \"https://a.com/\0 "
      "https://b.com/\"";
  json_t *params =
      json_pack("{s:{s:s,s:s,s:s%}}", "toolCall", "toolCallId", "web_fetch__1",
                "kind", "fetch", "title", title, sizeof(title) - 1);
  struct request r;
  request_init(&r, params, "/p", "/h");
  ok(r.opaque && strstr(r.reason, "NUL"), "a NUL byte in a string: opaque");
  request_clear(&r);
  json_decref(params);
}

// The shell analysis cache: the same script and home give the same (shared)
// result, home is a part of the key, the result equals a fresh analysis,
// and the cache stays within its bounds.
static void words_of(const struct shell_result *r, char *buf, size_t n) {
  size_t o = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < r->natoms && o < n; i++)
    for (size_t w = 0; w < r->atoms[i].nwords && o < n; w++)
      o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "_" : "",
                            r->atoms[i].words[w].text);
}

static void test_shcache(void) {
  shcache_clear();
  struct shcache_stats st0, st;
  shcache_stats(&st0);
  const struct shell_result *a = shcache_analyse("ls ~/x && cat $HOME/y", "/h");
  const struct shell_result *b = shcache_analyse("ls ~/x && cat $HOME/y", "/h");
  shcache_stats(&st);
  ok(a == b && st.hits == st0.hits + 1 && st.misses == st0.misses + 1,
     "the same script and home: one analysis, shared");
  const struct shell_result *c = shcache_analyse("ls ~/x && cat $HOME/y", "/g");
  char wa[256], wc[256], wf[256];
  words_of(a, wa, sizeof(wa));
  words_of(c, wc, sizeof(wc));
  ok(a != c && strcmp(wa, "ls_/h/x_cat_/h/y") == 0 &&
         strcmp(wc, "ls_/g/x_cat_/g/y") == 0,
     "home is a part of the key (%s, %s)", wa, wc);
  const struct shell_result *n = shcache_analyse("ls ~/x && cat $HOME/y", NULL);
  ok(n != a && n != c, "no home is another key");
  struct shell_result fresh;
  shell_analyse("ls ~/x && cat $HOME/y", "/h", &fresh);
  words_of(&fresh, wf, sizeof(wf));
  ok(strcmp(wa, wf) == 0 && fresh.natoms == a->natoms &&
         fresh.opaque == a->opaque,
     "a cached result is a fresh analysis");
  shell_result_free(&fresh);
  // Evicted while referenced: valid until released (ASan checks).
  for (int i = 0; i < SHCACHE_ENTRIES + 50; i++) {
    char s[64];
    snprintf(s, sizeof(s), "echo %d", i);
    shcache_release(shcache_analyse(s, "/h"));
  }
  shcache_stats(&st);
  ok(st.entries <= SHCACHE_ENTRIES, "at most %d entries (%zu)", SHCACHE_ENTRIES,
     st.entries);
  words_of(a, wa, sizeof(wa));
  is_str(wa, "ls_/h/x_cat_/h/y", "an evicted result still referenced");
  size_t big = SHCACHE_SCRIPT_MAX + 10;
  char *s = malloc(big + 1);
  memset(s, 'a', big);
  s[0] = 'l';
  s[1] = 's';
  s[2] = ' ';
  s[big] = '\0';
  size_t before = st.entries;
  const struct shell_result *l = shcache_analyse(s, "/h");
  shcache_stats(&st);
  ok(l && st.entries <= before && l->natoms == 1, "a long script is not kept");
  shcache_release(l);
  free(s);
  shcache_release(a);
  shcache_release(b);
  shcache_release(c);
  shcache_release(n);
  shcache_clear();
  shcache_stats(&st);
  is_size(st.entries, 0, "cleared");
}

// The reading of every request of the conformance, extra, adversarial and
// fail-closed sets (tests/fixtures/policy*.jsonl), of the fuzz corpus and of
// the rows above equals the one the extractor gave before its arena
// (request_ref.c): every atom, path, target, flag and reason. {P} and {H}
// are a project and home that exist; with home and without, cache on and
// off (the analyser's atoms then are copies of their own).
static char *subst_str(const char *s, const char *p, const char *h) {
  size_t n = strlen(s), pn = strlen(p), hn = strlen(h), cap = n + 1;
  for (const char *q = s; (q = strchr(q, '{')) != NULL; q++)
    cap += pn + hn;
  char *o = malloc(cap), *w = o;
  for (; *s; s++) {
    if (strncmp(s, "{P}", 3) == 0 || strncmp(s, "{H}", 3) == 0) {
      const char *v = s[1] == 'P' ? p : h;
      memcpy(w, v, strlen(v));
      w += strlen(v);
      s += 2;
    } else {
      *w++ = *s;
    }
  }
  *w = '\0';
  return o;
}

static json_t *subst(const json_t *v, const char *p, const char *h) {
  if (json_is_string(v)) {
    // Strings with a NUL byte stay as they are (subst_str stops at it).
    if (strlen(json_string_value(v)) != json_string_length(v))
      return json_deep_copy(v);
    char *s = subst_str(json_string_value(v), p, h);
    json_t *r = json_string(s);
    free(s);
    return r ? r : json_deep_copy(v);
  }
  if (json_is_array(v)) {
    json_t *a = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) json_array_append_new(a, subst(e, p, h));
    return a;
  }
  if (json_is_object(v)) {
    json_t *o = json_object();
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)(uintptr_t)v, k, e) {
      char *key = subst_str(k, p, h);
      json_object_set_new(o, key, subst(e, p, h));
      free(key);
    }
    return o;
  }
  return json_deep_copy(v);
}

static size_t compared, differ;
static char plink[300]; // a link to the project (test_same_as_before)

static void compare(const json_t *params, const char *cwd, const char *home,
                    const char *what) {
  struct request a, b;
  // Every other reading with a first chunk of the caller's (as
  // policy_request_new reads), small enough that larger requests go on in
  // chunks of their own.
  static max_align_t lent[320 / sizeof(max_align_t)];
  if (compared % 2)
    request_init_in(&a, request_tool_call(params), cwd, home, lent,
                    sizeof(lent));
  else
    request_init(&a, params, cwd, home);
  request_ref_init(&b, params, cwd, home);
  char why[1024];
  compared++;
  if (!request_same(&a, &b, why, sizeof(why))) {
    if (differ++ < 20)
      ok(false, "%s: %s", what, why);
  }
  request_clear(&a);
  request_ref_clear(&b);
}

static void compare_all(const json_t *params, const char *p, const char *h,
                        const char *what) {
  json_t *s = subst(params, p, h);
  compare(s, p, h, what);
  compare(s, NULL, h, what);
  compare(s, p, NULL, what);
  // A session cwd that is not normal, or too long to be one.
  static char odd[5][PATH_LEN_MAX + 16];
  if (!odd[0][0]) {
    snprintf(odd[0], sizeof(odd[0]), "%s/./x/..//", p);
    snprintf(odd[1], sizeof(odd[1]), "%s/.git/../.", p);
    snprintf(odd[2], sizeof(odd[2]), "/");
    for (int k = 3; k < 5; k++) {
      size_t n = (size_t)PATH_LEN_MAX - 1 + (size_t)(k - 3) * 2;
      odd[k][0] = '/';
      memset(odd[k] + 1, 'a', n - 1);
      odd[k][n] = '\0';
    }
  }
  for (int k = 0; k < 5; k++)
    compare(s, odd[k], h, what);
  // The last normal cwd is remembered (request.c: normal_last): the same
  // length with other bytes, right after it, is not that cwd.
  static char same_len[PATH_LEN_MAX + 16];
  size_t pn = strlen(p);
  if (pn >= 3 && pn < sizeof(same_len)) {
    memcpy(same_len, p, pn + 1);
    memcpy(same_len + pn - 2, "/.", 2);
    compare(s, p, h, what);
    compare(s, same_len, h, what);
    memcpy(same_len + pn - 2, "//", 2);
    compare(s, same_len, h, what);
    compare(s, p, h, what);
  }
  shcache_enable(0);
  compare(s, p, h, what);
  shcache_enable(1);
  // Within an epoch: the walk over the cwd and home is remembered
  // (path.c's prefixes), also for a cwd reached through a link (plink,
  // set by test_same_as_before) and for odd cwds. A new epoch per request,
  // and a second request in the same epoch.
  static uint64_t epoch = 1000;
  path_cache_epoch(++epoch);
  compare(s, p, h, what);
  compare(s, p, h, what);
  if (plink[0]) {
    compare(s, plink, h, what);
    compare(s, plink, plink, what);
  }
  compare(s, odd[0], h, what);
  path_cache_epoch(0);
  json_decref(s);
}

struct same_ctx {
  const char *p, *h;
  size_t cases;
};

static void same_fixture(const json_t *c, const char *what, void *ud) {
  struct same_ctx *x = ud;
  const json_t *params = json_object_get(c, "request");
  if (params) {
    compare_all(params, x->p, x->h, what);
    x->cases++;
  }
}

static void test_same_as_before(void) {
  char tmpl[] = "/tmp/test_request.XXXXXX";
  char *t = mkdtemp(tmpl);
  ok(t != NULL, "a temp dir");
  if (!t)
    return;
  char p[256], h[256];
  snprintf(p, sizeof(p), "%s/p", t);
  snprintf(h, sizeof(h), "%s/h", t);
  mkdir(p, 0700);
  mkdir(h, 0700);
  // A link to the project, and one inside it back to its parent.
  snprintf(plink, sizeof(plink), "%s/l", t);
  if (symlink(p, plink) != 0)
    plink[0] = '\0';
  char up[300];
  snprintf(up, sizeof(up), "%s/up", p);
  if (symlink("..", up) != 0)
    up[0] = '\0';
  struct same_ctx x = {p, h, 0};
  each_fixture(same_fixture, &x);
  size_t cases = x.cases;
  ok(cases == 1015, "%zu conformance requests", cases);
  // The fuzz corpus of request (params as JSON), as it is.
  DIR *d = opendir("tests/fuzz/corpus/request");
  struct dirent *e;
  size_t corpus = 0;
  while (d && (e = readdir(d)) != NULL) {
    char path[512];
    snprintf(path, sizeof(path), "tests/fuzz/corpus/request/%s", e->d_name);
    json_t *params = e->d_name[0] == '.' ? NULL : json_load_file(path, 0, NULL);
    if (params) {
      compare_all(params, p, h, path);
      corpus++;
    }
    json_decref(params);
  }
  if (d)
    closedir(d);
  ok(corpus > 0, "%zu requests of the fuzz corpus", corpus);
  // Every rawInput key request.c knows (found by a perfect hash there), and
  // names next to them, in the shapes that show what it makes of each: a
  // path, a destination, a list, a URL, text an MCP tool's scan skips; and
  // as the 17th key.
  static const char *const keys[] = {"absolute_path",
                                     "body",
                                     "changes",
                                     "cmd",
                                     "code",
                                     "command",
                                     "comment",
                                     "content",
                                     "cwd",
                                     "data",
                                     "description",
                                     "dest",
                                     "destination",
                                     "destination_path",
                                     "diff",
                                     "dir",
                                     "dir_path",
                                     "directory",
                                     "dst",
                                     "edits",
                                     "endpoint",
                                     "explanation",
                                     "file",
                                     "filePath",
                                     "filePaths",
                                     "file_path",
                                     "file_paths",
                                     "filename",
                                     "filepath",
                                     "files",
                                     "folder",
                                     "from",
                                     "from_path",
                                     "glob",
                                     "href",
                                     "input_path",
                                     "links",
                                     "location",
                                     "message",
                                     "move_path",
                                     "newPath",
                                     "newText",
                                     "new_file_path",
                                     "new_path",
                                     "new_source",
                                     "new_string",
                                     "notebook_path",
                                     "oldPath",
                                     "oldText",
                                     "old_path",
                                     "old_string",
                                     "out",
                                     "outfile",
                                     "output",
                                     "output_file",
                                     "output_path",
                                     "patch",
                                     "path",
                                     "paths",
                                     "pattern",
                                     "plan",
                                     "prompt",
                                     "query",
                                     "reason",
                                     "regex",
                                     "save_path",
                                     "script",
                                     "source",
                                     "source_path",
                                     "src",
                                     "src_path",
                                     "summary",
                                     "target",
                                     "target_file",
                                     "target_path",
                                     "text",
                                     "title",
                                     "to",
                                     "to_path",
                                     "uri",
                                     "uris",
                                     "url",
                                     "urls",
                                     "Path",
                                     "paths_",
                                     "ur",
                                     "urlx",
                                     "x",
                                     "command ",
                                     "file_path2",
                                     "abcdefghijklmnop",
                                     "notebook_pat",
                                     "_"};
  static const char *const shapes[] = {
      "{\"kind\":\"edit\",\"rawInput\":{\"@\":\"{P}/k\"}}",
      "{\"kind\":\"read\",\"rawInput\":{\"@\":\"x/y\",\"q\":1}}",
      "{\"kind\":\"other\",\"rawInput\":{\"@\":\"./y\"}}",
      "{\"kind\":\"read\",\"rawInput\":{\"@\":[\"{P}/a\",\"b\"]}}",
      "{\"kind\":\"fetch\",\"rawInput\":{\"@\":\"https://a.com/\"}}",
      "{\"kind\":\"execute\",\"rawInput\":{\"@\":\"rm -rf x\"}}",
      "{\"title\":\"mcp__a__b\",\"kind\":\"other\",\"rawInput\":{\"o\":"
      "{\"@\":\"x/y\"}}}",
      "{\"title\":\"mcp__a__b\",\"kind\":\"other\",\"rawInput\":"
      "{\"@\":\"/etc/x\"}}",
      // after more keys than read_ri keeps for collect_paths
      "{\"kind\":\"edit\",\"rawInput\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1,"
      "\"e\":1,\"f\":1,\"g\":1,\"h\":1,\"i\":1,\"j\":1,\"k\":1,\"l\":1,"
      "\"m\":1,\"n\":1,\"o\":1,\"p\":\"/x\",\"@\":\"./y\",\"q\":\"z\"}}"};
  size_t keyed = 0;
  for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
    for (size_t j = 0; j < sizeof(shapes) / sizeof(*shapes); j++) {
      char tc[512], what[64];
      const char *at = strchr(shapes[j], '@');
      snprintf(tc, sizeof(tc), "%.*s%s%s", (int)(at - shapes[j]), shapes[j],
               keys[i], at + 1);
      snprintf(what, sizeof(what), "key %s, shape %zu", keys[i], j);
      json_t *params = json_pack("{s:o}", "toolCall", json_loads(tc, 0, NULL));
      if (params) {
        compare_all(params, p, h, what);
        keyed++;
      }
      json_decref(params);
    }
  ok(keyed == sizeof(keys) / sizeof(*keys) * (sizeof(shapes) / sizeof(*shapes)),
     "%zu requests by key", keyed);
  if (up[0])
    unlink(up);
  if (plink[0])
    unlink(plink);
  plink[0] = '\0';
  rmdir(p);
  rmdir(h);
  rmdir(t);
  ok(differ == 0, "%zu readings equal the reference's (%zu differ)", compared,
     differ);
}

// A plain command (commands only, no operand for the breaker) is read from
// the atoms kept with its cached analysis: two readings share them, and a
// reading with more atoms (a title that is another command) has its own,
// which leaves the kept ones as they were. A command with operands (rm)
// has its own atoms each time (they depend on the cwd).
static json_t *command_params(const char *cmd, const char *title) {
  return json_pack("{s:{s:s,s:s,s:s,s:{s:s}}}", "toolCall", "toolCallId",
                   "call-1", "kind", "execute", "title", title, "rawInput",
                   "command", cmd);
}

static void test_shared_atoms(void) {
  shcache_clear();
  json_t *p1 =
      command_params("git status && make -j2", "git status && make -j2");
  json_t *p2 = command_params("git status && make -j2", "make clean");
  json_t *p3 = command_params("rm -rf build", "rm -rf build");
  struct request a, b, c, d, e;
  request_init(&a, p1, "/p", "/h");
  request_init(&b, p1, "/p", "/h");
  ok(a.natoms == 2 && a.atoms == b.atoms && a.sh == b.sh &&
         a.atoms[0].cmd == &a.sh->atoms[0] && a.atoms[1].cmd == &a.sh->atoms[1],
     "two readings of a plain command share its kept atoms");
  request_init(&c, p2, "/p", "/h");
  ok(c.natoms == 3 && c.atoms != a.atoms && c.atoms[0].cmd == a.atoms[0].cmd &&
         c.atoms[1].cmd == a.atoms[1].cmd && c.atoms[2].cmd != NULL &&
         strcmp(c.atoms[2].cmd->words[0].text, "make") == 0,
     "a reading with more atoms copies them first");
  ok(a.natoms == 2 && a.atoms[0].cls == REQUEST_BASH &&
         strcmp(a.atoms[0].kind, "execute") == 0 && a.atoms[0].read_only &&
         !a.atoms[1].read_only && a.atoms[1].cmd == &a.sh->atoms[1] &&
         a.atoms[1].ntargets == 0,
     "the kept atoms are left as they were");
  request_init(&d, p3, "/p", "/h");
  request_init(&e, p3, "/q", "/h");
  ok(d.natoms >= 1 && e.natoms == d.natoms && d.atoms != e.atoms &&
         d.atoms[0].ntargets == 1 && e.atoms[0].ntargets == 1 &&
         strcmp(d.atoms[0].targets[0].lex, "/p/build") == 0 &&
         strcmp(e.atoms[0].targets[0].lex, "/q/build") == 0,
     "a command with operands has atoms of its own (by cwd)");
  request_clear(&a);
  request_clear(&b);
  request_clear(&c);
  request_clear(&d);
  request_clear(&e);
  json_decref(p1);
  json_decref(p2);
  json_decref(p3);
}

// Tool names from toolCallIds: the last one looked up is remembered
// (request.c: known_last), so names of the same length in a row, known and
// not, are each read as the reference reads them.
static void test_tool_names(void) {
  static const char *const ids[] = {
      "Read-1", "Rxad-2",     "Read-3",     "read-4",  "Bash__5", "Bxsh__6",
      "Bash-7", "WebFetch-8", "WebFetcx-9", "call-10", "Edit-11"};
  static const char *const tools[] = {"Read", NULL, "Read", NULL,
                                      "Bash", NULL, "Bash", "WebFetch",
                                      NULL,   NULL, "Edit"};
  size_t before = differ, right = 0;
  for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++) {
    json_t *params = json_pack("{s:{s:s,s:s}}", "toolCall", "toolCallId",
                               ids[i], "title", "x");
    compare(params, "/p", "/h", ids[i]);
    struct request r;
    request_init(&r, params, "/p", "/h");
    right += tools[i] ? r.tool && strcmp(r.tool, tools[i]) == 0 : !r.tool;
    request_clear(&r);
    json_decref(params);
  }
  ok(differ == before && right == sizeof(ids) / sizeof(*ids),
     "tool names from ids in a row: %zu of %zu as expected", right,
     sizeof(ids) / sizeof(*ids));
}

// rawInput keys of a name's length, with its first 8 bytes and its hash
// slot (found by trying names): request.c compares a key's first and last 8
// bytes with the name's, so these are no such keys and are read as the
// reference reads them.
static void test_key_collisions(void) {
  static const char *const keys[] = {"absolute_pagj", "descriptdbp",
                                     "destinathff"};
  static const char *const kinds[] = {"read", "edit", "other"};
  size_t before = differ;
  for (size_t i = 0; i < sizeof(keys) / sizeof(*keys); i++)
    for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++) {
      json_t *params =
          json_pack("{s:{s:s,s:s,s:{s:s}}}", "toolCall", "toolCallId", "call-1",
                    "kind", kinds[k], "rawInput", keys[i], "/etc/passwd");
      compare(params, "/p", "/h", keys[i]);
      json_decref(params);
    }
  ok(differ == before, "keys that share a name's slot and first 8 bytes");
}

// The words request.c looks up in its lists of names (removers, find's
// actions and tests, cd and the like), each in lower and upper case, with
// only its second byte upper case, cut short, made longer and with a
// second byte of another kind, in the commands that read them: read as the
// reference reads them (in_list compares two bytes before strcasecmp).
static void test_list_words(void) {
  static const char *const words[] = {
      "rm",         "rmdir",       "unlink", "chmod",   "chown", "chgrp",
      "mv",         "find",        "cd",     "pushd",   "popd",  "-delete",
      "-exec",      "-execdir",    "-ok",    "-okdir",  "-name", "-iname",
      "-path",      "-ipath",      "-regex", "-iregex", "-type", "-newer",
      "-mtime",     "-mmin",       "-size",  "-empty",  "-user", "-perm",
      "-wholename", "-iwholename", "-o",     "-or",     "!",     "-not",
      ",",          "(",           "-",      "r",       "f",     "-\xc3\xa9"};
  static const char *const shapes[][2] = {// before and after the word
                                          {"find . ", " 'a*' -delete"},
                                          {"find . -delete ", " x"},
                                          {"find . ", " x -exec rm {} ;"},
                                          {"", " -rf x y"},
                                          {"", " -R 777 x"},
                                          {"", " x && rm -rf y"},
                                          {"find . -name 'a*' ", " -delete"},
                                          {"", " . -delete"},
                                          {"xargs ", " -delete"}};
  size_t before = differ, n = 0;
  for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++) {
    const char *w = words[i];
    size_t wn = strlen(w);
    char v[6][32];
    snprintf(v[0], sizeof(v[0]), "%s", w);
    for (size_t k = 0; k <= wn; k++) // upper case
      v[1][k] = w[k] >= 'a' && w[k] <= 'z' ? (char)(w[k] - 32) : w[k];
    snprintf(v[2], sizeof(v[2]), "%s", w);
    if (wn > 1 && w[1] >= 'a' && w[1] <= 'z')
      v[2][1] = (char)(w[1] - 32); // the second byte only
    snprintf(v[3], sizeof(v[3]), "%.*s", (int)(wn > 1 ? wn - 1 : wn), w);
    snprintf(v[4], sizeof(v[4]), "%sX", w);
    snprintf(v[5], sizeof(v[5]), "%s", w);
    if (wn > 1)
      v[5][1] = w[1] == '_' ? '-' : '_';
    for (size_t k = 0; k < 6; k++)
      for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "%s%s%s", shapes[s][0], v[k], shapes[s][1]);
        json_t *params = command_params(cmd, cmd);
        compare(params, "/p", "/h", cmd);
        json_decref(params);
        n++;
      }
  }
  ok(differ == before,
     "%zu commands with the words of the lists read as "
     "the reference reads them",
     n);
}

int main(void) {
  test_atoms();
  test_list_words();
  test_same_as_before();
  test_nul();
  test_shared_atoms();
  test_tool_names();
  test_key_collisions();
  test_shcache();
  shcache_clear();
  return done_testing();
}
