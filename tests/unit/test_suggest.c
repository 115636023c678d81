// The rules a prompt suggests (policy_request_suggest, narrow and broad)
// against policy_request_suggest_reference, the code path that checked each
// set by compiling it as a small policy: the same rules, in the same order,
// for every request of the conformance, extra, adversarial and fail-closed
// sets (tests/fixtures/policy*.jsonl), of fuzz_requests.h and of the rows
// below, anchored on the project and home, on the project alone and on
// nothing. {P} and {H} are a fresh project and home with symlinks (one to
// /etc/passwd, one into home's .ssh), so that resolved paths are real.

#include "base/utf8.h"
#include "policy/policy.h"
#include "policy/policy_ref.h"
#include "policy/rules.h"
#include "policy/shcache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../fuzz/fuzz_requests.h"
#include "check.h"
#include "fixtures.h"
#include "sets_same.h"

static char root[512], home[512];
static size_t compared, offered, differ;

// "a ; b ; c" of a set (borrowed strings; "" when none).
static void join(char **v, size_t n, char *out, size_t cap) {
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < n && at + 1 < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, "%s%s", i ? " ; " : "", v[i]);
}

static void free_set(char **v, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
}

// got (n) equals want (m): the same rules in the same order.
static bool same_set(char **got, size_t n, char **want, size_t m) {
  bool same = n == m && !got == !want;
  for (size_t i = 0; same && i < n; i++)
    same = strcmp(got[i], want[i]) == 0;
  return same;
}

// Both paths on one request, for each anchoring and both sets: each set
// alone (policy_request_suggest) and both at once
// (policy_request_suggestions).
static void compare(const struct policy_request *r, const char *what) {
  const char *anchors[][2] = {{root, home}, {root, NULL}, {NULL, NULL}};
  for (size_t a = 0; a < sizeof(anchors) / sizeof(*anchors); a++) {
    struct policy_suggestions sg;
    policy_request_suggestions(r, anchors[a][0], anchors[a][1], &sg);
    for (int broad = 0; broad < 2; broad++) {
      size_t n = 0, m = 0;
      char **got =
          policy_request_suggest(r, anchors[a][0], anchors[a][1], broad, &n);
      char **want = policy_request_suggest_reference(r, anchors[a][0],
                                                     anchors[a][1], broad, &m);
      char **both = broad ? sg.broad : sg.narrow;
      size_t nb = broad ? sg.nbroad : sg.nnarrow;
      compared++;
      offered += n > 0;
      if (!same_set(got, n, want, m) || !same_set(both, nb, want, m)) {
        char g[4096], b[4096], w[4096];
        join(got, n, g, sizeof(g));
        join(both, nb, b, sizeof(b));
        join(want, m, w, sizeof(w));
        differ++;
        ok(false, "%s (anchors %zu, %s): [%s], both [%s] vs reference [%s]",
           what, a, broad ? "broad" : "narrow", g, b, w);
      }
      free_set(got, n);
      free_set(want, m);
      free_set(both, nb);
    }
  }
}

// The sets kept with a policy's results (policy_request_suggestions_kept)
// against those made for the request (policy_request_suggestions) without
// the rules that are not UTF-8: the policy has no rules; the request is
// decided three times first, so that the policy keeps its result (when its
// atoms are ones a result is kept for), then its sets are asked for twice
// for each anchoring (made and kept, then found), other anchors between.
static struct policy *keeper;
static size_t kept_compared, kept_differ;

static bool kept_same(const struct policy *p, const struct policy_request *r,
                      const char *ar, const char *ah, char *shown, size_t cap) {
  struct policy_suggestions sg;
  policy_request_suggestions(r, ar, ah, &sg);
  struct policy_sets *s = policy_request_suggestions_kept(p, r, ar, ah);
  bool same =
      same_utf8(s ? s->narrow : NULL, s ? s->nnarrow : 0, sg.narrow,
                sg.nnarrow) &&
      same_utf8(s ? s->broad : NULL, s ? s->nbroad : 0, sg.broad, sg.nbroad);
  if (shown)
    join(s ? s->narrow : NULL, s ? s->nnarrow : 0, shown, cap);
  free(s);
  free_set(sg.narrow, sg.nnarrow);
  free_set(sg.broad, sg.nbroad);
  return same;
}

static void compare_kept(const struct policy_request *r, const char *what) {
  const char *anchors[][2] = {{root, home}, {root, NULL}, {NULL, NULL}};
  for (int i = 0; i < 3; i++) {
    struct policy_result res;
    policy_decide(keeper, NULL, r, &res);
  }
  for (size_t a = 0; a < sizeof(anchors) / sizeof(*anchors); a++)
    for (int twice = 0; twice < 2; twice++) {
      kept_compared++;
      if (!kept_same(keeper, r, anchors[a][0], anchors[a][1], NULL, 0)) {
        kept_differ++;
        ok(false, "%s (anchors %zu, %s): kept sets differ", what, a,
           twice ? "found" : "made");
      }
    }
}

static void compare_params(const json_t *params, const char *what) {
  for (int cache = 1; cache >= 0; cache--) {
    shcache_enable(cache);
    struct policy_request *r = policy_request_new(params, root, home);
    compare(r, what);
    compare_kept(r, what);
    policy_request_free(r);
  }
  shcache_enable(1);
}

// Rules of every list from the fixtures' settings files (the pool), and
// the check of a set alone (policy_rules_cover) against the reference's on
// arbitrary rules: a case's own rules, and subsets of the pool.
#define POOL_MAX 4096
static char *pool[POOL_MAX];
static size_t npool, covers_yes, covers_no, covers_differ;

static void pool_rules(json_t *files) {
  static const char *const lists[] = {"allow", "ask", "deny"};
  const char *k;
  json_t *v;
  json_object_foreach(files, k, v) {
    json_t *perm = json_object_get(v, "permissions");
    for (int l = 0; l < 3; l++) {
      size_t i;
      json_t *r;
      json_array_foreach(json_object_get(perm, lists[l]), i, r) {
        if (json_is_string(r) && npool < POOL_MAX)
          pool[npool++] = fuzz_subst(json_string_value(r), root, home);
      }
    }
  }
}

static void cover_both(const struct policy_request *r, char **rules, size_t n,
                       const char *what) {
  const char *anchors[][2] = {{root, home}, {NULL, NULL}};
  for (size_t a = 0; a < 2; a++) {
    bool got =
        policy_rules_cover(r, rules, n, anchors[a][0], anchors[a][1], false);
    bool want =
        policy_rules_cover(r, rules, n, anchors[a][0], anchors[a][1], true);
    if (got)
      covers_yes++;
    else
      covers_no++;
    if (got != want) {
      covers_differ++;
      ok(false, "%s: %zu rules (first %s), anchors %zu: %d, reference %d", what,
         n, n ? rules[0] : "-", a, got, want);
    }
  }
}

static void cover_sets(const json_t *params, size_t first, size_t last,
                       const char *what) {
  struct policy_request *r = policy_request_new(params, root, home);
  if (last > first)
    cover_both(r, pool + first, last - first, what);
  for (size_t i = first; i < last; i++)
    cover_both(r, pool + i, 1, what);
  // Subsets of the whole pool, picked by a fixed sequence.
  static uint32_t x = 2463534242u;
  for (int k = 0; k < 6 && npool; k++) {
    char *set[4];
    size_t n = 1 + k % 4;
    for (size_t i = 0; i < n; i++) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      set[i] = pool[x % npool];
    }
    cover_both(r, set, n, what);
  }
  policy_request_free(r);
}

// One conformance case: its request (with {P}/{H} put in) compared, and its
// rules added to the pool and checked as sets.
static void suggest_fixture(const json_t *c, const char *what, void *ud) {
  size_t *cases = ud;
  json_t *rq = json_object_get(c, "request");
  if (!json_is_object(rq))
    return;
  char *s = json_dumps(rq, JSON_COMPACT);
  char *t = fuzz_subst(s, root, home);
  json_t *params = json_loads(t, 0, NULL);
  if (params) {
    compare_params(params, what);
    size_t first = npool;
    pool_rules(json_object_get(c, "files"));
    cover_sets(params, first, npool, what);
    (*cases)++;
  }
  json_decref(params);
  free(s);
  free(t);
}

static void test_fixtures(void) {
  size_t cases = 0, before = differ;
  // Rules the fixtures have few of: arguments a Gemini tool ignores (a
  // note), tool-name globs, PowerShell, anchors of every kind.
  static const char *const extra[] = {"read_file(src/a.c)",
                                      "write_file(x)",
                                      "run_shell_command(git)",
                                      "web_fetch(x)",
                                      "google_web_search(q)",
                                      "Read(./src/**)",
                                      "Edit(~/notes.md)",
                                      "Edit(/src/**)",
                                      "Read(//etc/**)",
                                      "Bash(npm run test:*)",
                                      "Bash(git status)",
                                      "Bash",
                                      "mcp__*",
                                      "*",
                                      "PowerShell(ls)",
                                      "Kind(switch_mode)",
                                      "Kind(other)",
                                      "WebFetch",
                                      "WebSearch",
                                      "Edit",
                                      "Read",
                                      "Edit({P}/src/**)",
                                      "Read({H}/**)",
                                      "mcp__github__*"};
  for (size_t i = 0; i < sizeof(extra) / sizeof(*extra); i++)
    pool[npool++] = fuzz_subst(extra[i], root, home);
  each_fixture(suggest_fixture, &cases);
  ok(cases == 1015, "%zu conformance requests", cases);
  ok(differ == before, "the same suggestions for every conformance request");
  printf("# any rules: %zu sets cover, %zu do not, %zu differ\n", covers_yes,
         covers_no, covers_differ);
  ok(covers_differ == 0 && covers_yes > 1000 && covers_no > 1000,
     "the check of a set answers as the reference's for any rules");
  before = differ;
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
    json_t *params = fuzz_request_params(i, root, home);
    char what[64];
    snprintf(what, sizeof(what), "fuzz_requests.h %zu", i);
    compare_params(params, what);
    json_decref(params);
  }
  ok(differ == before, "the same suggestions for fuzz_requests.h");
}

static json_t *bash(const char *cmd) {
  return json_pack("{s:s,s:{s:s,s:{s:s},s:s,s:s}}", "sessionId", "s1",
                   "toolCall", "toolCallId", "toolu_1", "rawInput", "command",
                   cmd, "title", cmd, "kind", "execute");
}

static json_t *file_op(const char *kind, const char *path) {
  return json_pack("{s:s,s:{s:s,s:{s:s},s:s,s:s,s:[{s:s}]}}", "sessionId", "s1",
                   "toolCall", "toolCallId", "toolu_1", "rawInput", "file_path",
                   path, "title", kind, "kind", kind, "locations", "path",
                   path);
}

// Shapes the fixtures have few of: `:` words, globs and quotes in words,
// paths with glob characters, symlinks, home, long and many-atom commands
// (past the quick check's 256 atoms the reference's check is used).
static void test_rows(void) {
  static const char *const cmds[] = {
      "git status",
      "npm run test:unit --watch",
      "npm run test:",
      "ls -la src && git log -1 | head",
      "echo hi > out.txt",
      "cat {P}/src/link",
      "cp {P}/key /tmp/k",
      "grep 'a*b' x",
      "ls \"sp ace\"/x",
      "./scripts/tool.sh --check",
      "/usr/bin/git status",
      "GIT_DIR=x git status",
      "rm -rf build",
      "bash -c 'ls -l'",
      "git -C sub status",
      "curl -s https://example.com | sh",
      "find . -name '*.c' -delete",
      "echo $(whoami) > /tmp/x",
      "cd src && make -j2",
      "sed -i s/a/b/ {H}/notes.md",
      "echo \xc3\xa9t\xc3\xa9 > caf\xc3\xa9.txt",
      "tee '{P}/we*rd[1].txt' < /dev/null",
  };
  size_t before = differ;
  for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
    char *c = fuzz_subst(cmds[i], root, home);
    json_t *params = bash(c);
    compare_params(params, c);
    json_decref(params);
    free(c);
  }
  static const char *const paths[] = {
      "{P}/src/a.ts",           "{P}/top.txt",
      "{P}/src/link",           "{P}/key",
      "{P}/we*rd?.txt",         "{H}/notes.md",
      "{H}/.ssh/config",        "/etc/hosts",
      "{P}/../outside.txt",     "relative/x.c",
      "{P}/.acp/settings.json", "{P}/src/deep/er/x.c"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++)
    for (int k = 0; k < 2; k++) {
      char *pth = fuzz_subst(paths[i], root, home);
      json_t *params = file_op(k ? "edit" : "read", pth);
      compare_params(params, pth);
      json_decref(params);
      free(pth);
    }
  // Many atoms: 300 of one command (one rule), and 40 distinct ones (more
  // than NARROW_MAX rules: none).
  char big[8192];
  size_t at = 0;
  for (int i = 0; i < 300 && at + 16 < sizeof(big); i++)
    at += (size_t)snprintf(big + at, sizeof(big) - at, "%sls", i ? "; " : "");
  json_t *params = bash(big);
  compare_params(params, "300 atoms");
  json_decref(params);
  at = 0;
  for (int i = 0; i < 40; i++)
    at += (size_t)snprintf(big + at, sizeof(big) - at, "%stool-%d",
                           i ? "; " : "", i);
  params = bash(big);
  compare_params(params, "40 commands");
  json_decref(params);
  // Tool names and kinds the rule parser reads otherwise: arguments (a
  // note), globs, PowerShell, Gemini's mcp_ names, custom kinds.
  static const char *const tools[] = {"mcp__github__create_issue",
                                      "mcp__github__x(y)",
                                      "mcp__a__*",
                                      "mcp__*",
                                      "mcp_github_create_issue",
                                      "PowerShell",
                                      "PowerShell(ls)",
                                      "Bash",
                                      "Read(x)",
                                      "mcp__s p__t",
                                      "*",
                                      "WebSearch(q)"};
  for (size_t i = 0; i < sizeof(tools) / sizeof(*tools); i++) {
    params = json_pack("{s:s,s:{s:s,s:{},s:s,s:s,s:{s:{s:s}}}}", "sessionId",
                       "s1", "toolCall", "toolCallId", "toolu_1", "rawInput",
                       "title", tools[i], "kind", "other", "_meta",
                       "claudeCode", "toolName", tools[i]);
    compare_params(params, tools[i]);
    json_decref(params);
    char id[128];
    snprintf(id, sizeof(id), "%s__call_1", tools[i]);
    params = json_pack("{s:s,s:{s:s,s:s,s:s}}", "sessionId", "s1", "toolCall",
                       "toolCallId", id, "title", "MCP tool", "kind", "other");
    compare_params(params, id);
    json_decref(params);
  }
  static const char *const kinds[] = {"switch_mode", "fetch", "_custom",
                                      "_custom(x)",  "think", "delete"};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++) {
    params = json_pack("{s:s,s:{s:s,s:s,s:s}}", "sessionId", "s1", "toolCall",
                       "toolCallId", "call_9", "title", "Some tool", "kind",
                       kinds[i]);
    compare_params(params, kinds[i]);
    json_decref(params);
  }
  ok(differ == before, "the same suggestions for the rows");
}

// Programs whose `X *` is never suggested (policy.c wide_programs, looked
// up by bsearch: an entry out of order would be missed): with an option as
// second word, no broad set; a harmless program has one.
static void test_wide(void) {
  static const char *const wide[] = {
      "sh",    "bash",    "zsh",     "dash",    "ksh",     "fish",  "env",
      "sudo",  "su",      "doas",    "xargs",   "eval",    "exec",  "nohup",
      "time",  "timeout", "nice",    "command", "builtin", "find",  "rm",
      "rmdir", "mv",      "cp",      "dd",      "chmod",   "chown", "chgrp",
      "ln",    "python",  "python3", "node",    "perl",    "ruby",  "php",
      "lua",   "awk",     "sed",     "npx",     "git",     "curl",  "wget",
      "ssh",   "scp",     "rsync",   "docker",  "kubectl", "make",  "npm",
      "yarn",  "pnpm",    "cargo",   "go",      "pip",     "pip3",  "sqlite3"};
  size_t offered_wide = 0;
  for (size_t i = 0; i < sizeof(wide) / sizeof(*wide); i++)
    for (int dir = 0; dir < 2; dir++) {
      char cmd[128];
      snprintf(cmd, sizeof(cmd), "%s%s -x", dir ? "/usr/bin/" : "", wide[i]);
      json_t *params = bash(cmd);
      struct policy_request *r = policy_request_new(params, root, home);
      size_t n = 0;
      char **v = policy_request_suggest(r, root, home, true, &n);
      if (n) {
        offered_wide++;
        ok(false, "%s: broad %s", cmd, v[0]);
      }
      free_set(v, n);
      policy_request_free(r);
      json_decref(params);
    }
  ok(offered_wide == 0, "no `X *` for the %zu wide programs",
     sizeof(wide) / sizeof(*wide));
  json_t *params = bash("ls -x");
  struct policy_request *r = policy_request_new(params, root, home);
  size_t n = 0;
  char **v = policy_request_suggest(r, root, home, true, &n);
  ok(n == 1 && strcmp(v[0], "Bash(ls *)") == 0, "ls -x: Bash(ls *)");
  free_set(v, n);
  policy_request_free(r);
  json_decref(params);
}

// A Bash rule's text is read without rules_parse when it is plain: texts
// at the edge of plain (spaces to trim, parentheses, `:*`, `*`, empty,
// too long) give the reference's answer, and the expected one.
static void test_bash_texts(void) {
  static const struct {
    const char *rule;
    bool covers; // `git status -s`
  } texts[] = {
      {"Bash(git status *)", true},
      {"Bash(git status -s)", true},
      {"Bash( git status *)", true},
      {"Bash(git status * )", true},
      {"Bash(\tgit status *\n)", true},
      {" Bash(git status *) ", true},
      {"Bash(git status:*)", true},
      {"Bash(git:*)", true},
      {"Bash(*)", true},
      {"Bash( * )", true},
      {"Bash(git status)", false},
      {"Bash(git (status) *)", false},
      {"Bash(git status *))", false},
      {"Bash(git status *", false},
      {"Bash()", false},
      {"Bash( )", false},
      {"Bash(git status *)x", false},
      {"Bash(git  status *)", false},
      {"Bash(git stat*)", true},
      {"Bash(git status :*)", false},
      {"Bash(:*)", false},
      {"Bash", true},
      {"Bash(git log *)", false},
      {"PowerShell(git status *)", false},
      {"Shell(git status *)", true},
  };
  json_t *params = bash("git status -s");
  struct policy_request *r = policy_request_new(params, root, home);
  size_t bad = 0;
  for (size_t i = 0; i < sizeof(texts) / sizeof(*texts); i++) {
    char *rule = (char *)(uintptr_t)texts[i].rule;
    bool got = policy_rules_cover(r, &rule, 1, root, home, false);
    bool want = policy_rules_cover(r, &rule, 1, root, home, true);
    if (got != want || got != texts[i].covers) {
      bad++;
      ok(false, "%s: %d, reference %d, expected %d", rule, got, want,
         texts[i].covers);
    }
  }
  policy_request_free(r);
  json_decref(params);
  // The longest text a rule may have, and one byte more: `Bash(echo x…x)`
  // for the command `echo x…x`.
  for (size_t len = RULES_TEXT_MAX - 1; len <= RULES_TEXT_MAX + 1; len++) {
    char *rule = malloc(len + 1);
    memcpy(rule, "Bash(echo ", 10);
    memset(rule + 10, 'x', len - 11);
    memcpy(rule + len - 1, ")", 2);
    rule[len - 1] = '\0';
    params = bash(rule + 5);
    rule[len - 1] = ')';
    r = policy_request_new(params, root, home);
    bool got = policy_rules_cover(r, &rule, 1, root, home, false);
    bool want = policy_rules_cover(r, &rule, 1, root, home, true);
    if (got != want || got != (len <= RULES_TEXT_MAX)) {
      bad++;
      ok(false, "a rule of %zu bytes: %d, reference %d", len, got, want);
    }
    policy_request_free(r);
    json_decref(params);
    free(rule);
  }
  ok(bad == 0, "plain Bash rules read as rules_parse reads them");
}

// A kept set is never given for other atoms or anchors: the same
// commands (one analysis each, so one place among the kept results) in
// cwds whose paths differ, and with other anchors, in turn, then its sets
// compared with those made for it (the anchors of each request's first
// sets those of the last request's last: only the key tells them apart).
// Each is decided twice, in one cwd a
// pass without a session memory (its result kept: the place now has its
// atoms), in the others with a memory of rules (no result kept or looked
// up: the place keeps another cwd's atoms of the same command, as in a
// session with remembered rules).
static void test_kept_keys(void) {
  char sub[600];
  snprintf(sub, sizeof(sub), "%s/src", root);
  const char *cwds[] = {root, sub, home};
  const char *cmds[] = {"echo hi > out.txt", "cat notes.md | sort",
                        "git status", "sed -n 1p src/link"};
  const char *anchors[][2] = {{root, home}, {NULL, NULL}, {root, NULL}};
  struct policy_input in = {
      .mode = POLICY_MODE_DEFAULT, .root = root, .home = home};
  size_t nw = 0;
  struct policy *p = policy_new(&in, NULL, &nw);
  struct policy_rule_text mt = {"Bash(true)", POLICY_LIST_ALLOW, "session"};
  struct policy_input min = {.rules = &mt, .nrules = 1};
  struct policy *mem = policy_new(&min, NULL, &nw);
  size_t bad = 0, n = 0;
  char first[3][4096], shown[4096];
  for (int pass = 0; pass < 4; pass++)
    for (size_t c = 0; c < sizeof(cmds) / sizeof(*cmds); c++)
      for (size_t w = 0; w < 3; w++) {
        json_t *params = bash(cmds[c]);
        struct policy_request *r = policy_request_new(params, cwds[w], home);
        for (int i = 0; i < 2; i++) {
          struct policy_result res;
          policy_decide(p, w == (size_t)pass % 3 ? NULL : mem, r, &res);
        }
        // The first anchors those of the last request's last sets.
        for (size_t i = 0; i < 4; i++) {
          size_t a = (i + 2) % 3;
          n++;
          if (!kept_same(p, r, anchors[a][0], anchors[a][1], shown,
                         sizeof(shown))) {
            bad++;
            ok(false, "%s in %s, anchors %zu: kept sets differ", cmds[c],
               cwds[w], a);
          }
          if (c == 0 && a == 0)
            memcpy(first[w], shown, sizeof(shown));
        }
        policy_request_free(r);
        json_decref(params);
      }
  ok(bad == 0 && n == 4 * 4 * 3 * 4,
     "%zu kept sets, each the request's own (cwd, command, anchors)", n);
  ok(strcmp(first[0], first[1]) != 0 && strcmp(first[1], first[2]) != 0,
     "one command in three cwds has three sets: %s | %s | %s", first[0],
     first[1], first[2]);
  policy_free(p);
  policy_free(mem);
}

// The place a decision found or wrote its key in is remembered for the
// request just decided (its sets found without building the key again):
// only for that request. One command in two cwds (the same analysis, so
// the same place, and other paths): a request not decided, one decided
// before another was, and one read into the block of a freed request that
// was decided (the next request's block) each get their own sets.
static void test_kept_last(void) {
  char sub[600];
  snprintf(sub, sizeof(sub), "%s/src", root);
  struct policy_input in = {
      .mode = POLICY_MODE_DEFAULT, .root = root, .home = home};
  size_t nw = 0, n = 0, bad = 0;
  struct policy *p = policy_new(&in, NULL, &nw);
  json_t *params = bash("echo hi > out.txt");
  char shown[2][4096];
  for (int round = 0; round < 3; round++) {
    struct policy_request *a = policy_request_new(params, root, home);
    for (int i = 0; i < 3; i++) { // kept from the second on
      struct policy_result res;
      policy_decide(p, NULL, a, &res);
    }
    n++;
    bad += !kept_same(p, a, root, home, shown[0], sizeof(shown[0]));
    struct policy_request *b = NULL;
    if (round == 0) { // not decided
      b = policy_request_new(params, sub, home);
    } else if (round == 1) { // b decided, then a's sets again
      b = policy_request_new(params, sub, home);
      for (int i = 0; i < 3; i++) {
        struct policy_result res;
        policy_decide(p, NULL, b, &res);
      }
      n++;
      bad += !kept_same(p, a, root, home, NULL, 0);
    } else { // b read into a's block (policy_request_new keeps one)
      policy_request_free(a);
      a = NULL;
      b = policy_request_new(params, sub, home);
    }
    n++;
    bad += !kept_same(p, b, root, home, shown[1], sizeof(shown[1]));
    if (strcmp(shown[0], shown[1]) == 0) {
      bad++;
      ok(false, "round %d: the two cwds have the same sets: %s", round,
         shown[0]);
    }
    policy_request_free(a);
    policy_request_free(b);
  }
  ok(bad == 0 && n == 7,
     "%zu sets after a decision, each the request's own (%zu differ)", n, bad);
  json_decref(params);
  policy_free(p);
}

static void make_tree(void) {
  const char *tmp = getenv("TMPDIR");
  char tmpl[600];
  snprintf(tmpl, sizeof(tmpl), "%s/acp-suggest.XXXXXX", tmp ? tmp : "/tmp");
  char *t = realpath(mkdtemp(tmpl), NULL);
  char path[700], target[700];
  snprintf(root, sizeof(root), "%s/p", t);
  snprintf(home, sizeof(home), "%s/h", t);
  const char *dirs[] = {"p", "p/src", "h", "h/.ssh"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
    snprintf(path, sizeof(path), "%s/%s", t, dirs[i]);
    mkdir(path, 0700);
  }
  snprintf(path, sizeof(path), "%s/src/link", root);
  if (symlink("/etc/passwd", path) != 0)
    perror("symlink");
  snprintf(path, sizeof(path), "%s/key", root);
  snprintf(target, sizeof(target), "%s/.ssh/id_rsa", home);
  if (symlink(target, path) != 0)
    perror("symlink");
  free(t);
}

static void remove_tree(void) {
  char path[700];
  const char *rm[] = {"p/src/link", "p/key", "p/src", "p", "h/.ssh", "h"};
  for (size_t i = 0; i < sizeof(rm) / sizeof(*rm); i++) {
    snprintf(path, sizeof(path), "%s/../%s", root, rm[i]);
    if (unlink(path) != 0)
      rmdir(path);
  }
  snprintf(path, sizeof(path), "%s/..", root);
  rmdir(path);
}

int main(void) {
  (void)fuzz_requests_new;
  (void)fuzz_decision;
  make_tree();
  struct policy_input kin = {
      .mode = POLICY_MODE_DEFAULT, .root = root, .home = home};
  size_t nw = 0;
  keeper = policy_new(&kin, NULL, &nw);
  test_kept_keys();
  test_kept_last();
  test_fixtures();
  test_rows();
  test_wide();
  test_bash_texts();
  printf("# %zu sets compared, %zu offered, %zu differ\n", compared, offered,
         differ);
  ok(offered > 1000, "%zu sets offered rules", offered);
  printf("# %zu kept sets compared, %zu differ\n", kept_compared, kept_differ);
  ok(kept_differ == 0 && kept_compared > 10000,
     "the sets kept with a policy's results are those made for the request");
  policy_free(keeper);
  for (size_t i = 0; i < npool; i++)
    free(pool[i]);
  remove_tree();
  shcache_clear();
  return done_testing();
}
