// gate: the cached settings and policy decide exactly as a fresh gate after
// every kind of change to the files they come from: created, rewritten
// (also with the same size in the same clock tick), replaced by rename,
// deleted, trusted by the gate or by another writer, a symlinked file
// retargeted or its target rewritten, an environment change; a file that
// breaks (malformed, a directory, a dangling symlink where there was no
// file, a symlink loop, a FIFO, a dangling directory) and is fixed. And a
// broken file fails closed: :AcpYolo on, :AcpMode acceptEdits and trust
// are refused naming it, runtime and per-agent yolo are suspended.

#include "policy/gate.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/files.h"
#include "check.h"
#include "fixtures.h"
#include "policy/settings.h"

static const char *root;
static json_t *setup_opts; // the setup() options of the cached gate

static json_t *request(const char *cmd) {
  return json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:[{s:s,s:s,s:s},"
                   "{s:s,s:s,s:s}]}",
                   "sessionId", "s", "toolCall", "toolCallId", "t", "title",
                   cmd, "kind", "execute", "rawInput", "command", cmd,
                   "options", "optionId", "allow", "name", "A", "kind",
                   "allow_once", "optionId", "reject", "name", "R", "kind",
                   "reject_once");
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

// The cached gate and a fresh one agree on a handful of commands.
static void same(struct gate *cached, const char *what) {
  static const char *const cmds[] = {"git status", "rm -rf x", "npm test",
                                     "curl x",     "ls",       "make test"};
  struct gate *fresh = gate_new();
  if (setup_opts)
    gate_configure(fresh, json_incref(setup_opts));
  bool all = true;
  for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
    json_t *r = request(cmds[i]);
    struct gate_verdict a, b;
    gate_decide(cached, "ag", "s", root, r, &a);
    gate_decide(fresh, "ag", "s", root, r, &b);
    char *ja = json_dumps(gate_verdict_info(&a), JSON_SORT_KEYS);
    char *jb = json_dumps(gate_verdict_info(&b), JSON_SORT_KEYS);
    if (a.decision != b.decision || strcmp(ja, jb) != 0) {
      all = false;
      printf("# %s: %s\n#   cached %s\n#   fresh  %s\n", what, cmds[i], ja, jb);
    }
    free(ja);
    free(jb);
    gate_verdict_clear(&a);
    gate_verdict_clear(&b);
    json_decref(r);
  }
  gate_free(fresh);
  ok(all, "cached == fresh after: %s", what);
}

static enum policy_decision decide(struct gate *g, const char *cmd) {
  json_t *r = request(cmd);
  struct gate_verdict v;
  gate_decide(g, "ag", "s", root, r, &v);
  enum policy_decision d = v.decision;
  gate_verdict_clear(&v);
  json_decref(r);
  return d;
}

// The cache watches every file settings_files names, and settings_load
// reads each of them: made malformed in turn, each one takes away the
// allow of a trusted project rule (a broken settings file fails closed; a
// broken trust store trusts nothing) at once, and fixing it brings the
// allow back. A source added to settings.c joins that list, so it cannot
// leave the cache stale.
static void test_every_file(const char *base) {
  char home[300], proj[300], p[700], err[256];
  snprintf(home, sizeof(home), "%s/home2", base);
  snprintf(proj, sizeof(proj), "%s/proj2", base);
  snprintf(p, sizeof(p), "%s/.acp", proj);
  files_mkdirs(home);
  files_mkdirs(p);
  setenv("HOME", home, 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");
  root = proj;
  snprintf(p, sizeof(p), "%s/.acp/settings.json", proj);
  put(p, "{\"permissions\":{\"allow\":[\"Bash(make test)\"]}}");
  ok(settings_trust(proj, err, sizeof(err)) == 0, "every file: trusted");
  struct gate *g = gate_new();
  ok(decide(g, "make test") == POLICY_ALLOW, "every file: allowed");
  char *files[SETTINGS_FILES_MAX];
  size_t n = settings_files(proj, files);
  ok(n == SETTINGS_FILES_MAX, "every file: %zu files (7 sources, trust)", n);
  bool all = true;
  for (size_t i = 0; i < n; i++) {
    char *old = NULL, *dir = strdup(files[i]);
    size_t len;
    files_slurp(files[i], 1 << 20, &old, &len);
    *strrchr(dir, '/') = '\0';
    files_mkdirs(dir);
    put(files[i], "{");
    enum policy_decision broken = decide(g, "make test");
    if (old)
      put(files[i], old);
    else
      unlink(files[i]);
    enum policy_decision fixed = decide(g, "make test");
    if (broken != POLICY_ASK || fixed != POLICY_ALLOW) {
      printf("# %s: malformed %s, fixed %s\n", files[i],
             policy_decision_name(broken), policy_decision_name(fixed));
      all = false;
    }
    free(old);
    free(dir);
    free(files[i]);
  }
  ok(all, "every file: malformed asks at once, fixed allows again");
  gate_free(g);
}

// Per-agent yolo (agents.<name>.yolo in the user settings) allows what
// nothing denies for that agent only; with no agent trusted, none is.
static void test_agent_yolo(const char *base) {
  char home[300], proj[300], p[700], err[256];
  snprintf(home, sizeof(home), "%s/home3", base);
  snprintf(proj, sizeof(proj), "%s/proj3", base);
  snprintf(p, sizeof(p), "%s/.git", proj);
  files_mkdirs(home);
  files_mkdirs(p);
  setenv("HOME", home, 1);
  root = proj;
  struct gate *g = gate_new();
  ok(decide(g, "make lint") == POLICY_ASK, "agent yolo: no agent trusted");
  ok(settings_set_agent_yolo("other", true, err, sizeof(err)) == 0,
     "agent yolo: another agent trusted");
  ok(decide(g, "make lint") == POLICY_ASK, "agent yolo: not this one");
  ok(settings_set_agent_yolo("ag", true, err, sizeof(err)) == 0,
     "agent yolo: this agent trusted");
  ok(decide(g, "make lint") == POLICY_ALLOW, "agent yolo: allowed");
  settings_set_agent_yolo("ag", false, err, sizeof(err));
  settings_set_agent_yolo("other", false, err, sizeof(err));
  ok(decide(g, "make lint") == POLICY_ASK, "agent yolo: off again");
  gate_free(g);
}

// The rules a prompt suggests, kept with the result the policy keeps for
// a request's atoms, are those a fresh gate suggests: the same commands in
// two cwds of one project (one policy, one place for each command), in
// another project and in home, in turn, each decided three times (a
// result is kept the second time), in a session with a memory of rules
// (no result kept or looked up: the place keeps another cwd's atoms) and
// in one without.
static void test_kept_suggestions(const char *base) {
  char home[300], pa[300], pb[300], sub[400], p[700], file[300], err[256];
  snprintf(home, sizeof(home), "%s/home4", base);
  snprintf(pa, sizeof(pa), "%s/proj4", base);
  snprintf(pb, sizeof(pb), "%s/proj5", base);
  snprintf(sub, sizeof(sub), "%s/sub", pa);
  files_mkdirs(home);
  files_mkdirs(sub);
  snprintf(p, sizeof(p), "%s/.git", pa);
  files_mkdirs(p);
  snprintf(p, sizeof(p), "%s/.git", pb);
  files_mkdirs(p);
  setenv("HOME", home, 1);
  struct gate *g = gate_new();
  ok(gate_add_rule(g, "session", "allow", "Bash(true)", "ag", "mem", pa, file,
                   sizeof(file), err, sizeof(err)) == 0,
     "kept suggestions: a session memory with a rule");
  const char *cwds[] = {pa, sub, pb, home};
  const char *cmds[] = {"echo hi > out.txt", "cat notes.md | sort"};
  size_t n = 0, bad = 0, offered = 0;
  uint64_t epoch = 0;
  struct gate *fresh_gates[96];
  for (int pass = 0; pass < 4; pass++)
    for (size_t c = 0; c < 2; c++)
      for (size_t w = 0; w < 4; w++) {
        json_t *r = request(cmds[c]);
        const char *session = (w + (size_t)pass) % 2 ? "mem" : "s";
        for (int i = 0; i < 3; i++) {
          gate_epoch(g, ++epoch);
          // One decision each (none keeps anything), freed at the end
          // (gate_free empties the shell cache).
          struct gate *fresh = fresh_gates[n] = gate_new();
          struct gate_verdict a, b;
          gate_decide(g, "ag", session, cwds[w], r, &a);
          gate_decide(fresh, "ag", session, cwds[w], r, &b);
          char *ja = json_dumps(gate_verdict_info(&a), JSON_SORT_KEYS);
          char *jb = json_dumps(gate_verdict_info(&b), JSON_SORT_KEYS);
          n++;
          offered += a.nnarrow > 0;
          if (a.decision != b.decision || strcmp(ja, jb) != 0) {
            bad++;
            printf("# %s in %s (%s)\n#   kept  %s\n#   fresh %s\n", cmds[c],
                   cwds[w], session, ja, jb);
          }
          free(ja);
          free(jb);
          gate_verdict_clear(&a);
          gate_verdict_clear(&b);
        }
        json_decref(r);
      }
  ok(bad == 0 && n == 96 && offered == n,
     "kept suggestions: %zu prompts, %zu differ from a fresh gate's", n, bad);
  for (size_t i = 0; i < n; i++)
    gate_free(fresh_gates[i]);
  gate_free(g);
}

// The verdict's toolCallId, kind and title are the toolCall's strings as
// sent (json_string_value of each member: NULL when absent or not a
// string), the very bytes of the tree: for every conformance request and
// for toolCalls whose members are missing, of other types, named alike,
// hold a NUL byte, or that are not objects.
struct tc_check {
  struct gate *g;
  size_t n, bad;
  size_t pn, pbad; // paths_same
};

// The verdict's paths are the request's (policy_request_paths: UTF-8
// only, in order), in the verdict's own buffer when twice the request's
// atoms fit there, else in an array of their own.
static bool paths_same(const struct gate_verdict *v) {
  json_t *want = policy_request_paths(v->req);
  bool same = v->npaths == json_array_size(want);
  for (size_t i = 0; same && i < v->npaths; i++)
    same = strcmp(v->paths[i], json_string_value(json_array_get(want, i))) == 0;
  size_t cap = sizeof(v->path_buf) / sizeof(*v->path_buf);
  if (v->paths &&
      (v->paths == v->path_buf) != (2 * policy_request_natoms(v->req) <= cap))
    same = false;
  json_decref(want);
  return same;
}

static void tc_strings_check(struct tc_check *k, json_t *params,
                             const char *what) {
  static const char *const keys[] = {"toolCallId", "kind", "title"};
  struct gate_verdict v;
  gate_decide(k->g, "ag", "s", root, params, &v);
  const char *got[] = {v.tool_call_id, v.kind, v.title};
  json_t *tc = json_object_get(params, "toolCall");
  k->pn++;
  if (!paths_same(&v)) {
    k->pbad++;
    printf("# %s: other paths\n", what);
  }
  for (size_t i = 0; i < 3; i++) {
    const char *want = json_string_value(json_object_get(tc, keys[i]));
    k->n++;
    if (got[i] != want) {
      k->bad++;
      if (k->bad <= 5)
        printf("# %s: %s %s, want %s\n", what, keys[i],
               got[i] ? got[i] : "(null)", want ? want : "(null)");
    }
  }
  gate_verdict_clear(&v);
}

static void tc_fixture(const json_t *c, const char *what, void *ud) {
  json_t *rq = json_object_get(c, "request");
  if (json_is_object(rq))
    tc_strings_check(ud, (json_t *)rq, what);
}

static void test_tc_strings(const char *cwd) {
  root = cwd; // (a test before left it at one of its own buffers)
  struct tc_check k = {gate_new(), 0, 0, 0, 0};
  size_t cases = each_fixture(tc_fixture, &k);
  static const char *const odd[] = {
      "{}",
      "{\"toolCall\":null}",
      "{\"toolCall\":\"x\"}",
      "{\"toolCall\":[1,2]}",
      "{\"toolCall\":{}}",
      "{\"toolCall\":{\"toolCallId\":1,\"kind\":null,\"title\":[\"t\"]}}",
      "{\"toolCall\":{\"toolCallId\":\"\",\"kind\":\"\",\"title\":\"\"}}",
      "{\"toolCall\":{\"toolCallID\":\"a\",\"kinds\":\"execute\",\"titl\":"
      "\"b\","
      "\"Title\":\"c\",\"toolCallId \":\"d\",\"kin\":\"e\"}}",
      "{\"toolCall\":{\"title\":\"ls\",\"rawInput\":{\"command\":\"ls\"}}}",
      "{\"toolCall\":{\"kind\":\"execute\",\"rawInput\":\"ls\"}}",
      "{\"toolCall\":{\"toolCallId\":\"i\",\"kind\":{\"k\":1},"
      "\"rawInput\":{\"command\":\"git status\"},\"title\":\"git status\"}}",
      "{\"toolCall\":{\"toolCallId\":\"a\\u0000b\",\"kind\":\"execute\","
      "\"title\":\"ls\\u0000x\",\"rawInput\":{\"command\":\"ls\"}}}",
      "{\"toolCall\":{\"toolCallId\":\"c1\",\"kind\":\"read\",\"title\":"
      "\"Read f\",\"rawInput\":{\"file_path\":\"f\\u0000\"}}}",
      "{\"toolCall\":{\"kind\":\"custom_kind\",\"title\":\"\\u00e9t\\u00e9\","
      "\"toolCallId\":\"\\ud83d\\ude00\"}}",
  };
  for (size_t i = 0; i < sizeof(odd) / sizeof(*odd); i++) {
    json_error_t err;
    json_t *params = json_loads(odd[i], JSON_ALLOW_NUL, &err);
    ok(params != NULL, "tc strings: %s parsed", odd[i]);
    if (params) {
      tc_strings_check(&k, params, odd[i]);
      // The same toolCall decided again (the request's block is reused).
      tc_strings_check(&k, params, odd[i]);
    }
    json_decref(params);
  }
  gate_free(k.g);
  ok(cases == 1015, "tc strings: %zu conformance requests", cases);
  ok(k.bad == 0, "tc strings: %zu of %zu as the tree's strings", k.n - k.bad,
     k.n);
  ok(k.pbad == 0, "paths: %zu of %zu verdicts list the request's",
     k.pn - k.pbad, k.pn);
  // Up to 9 files read through a symlinked directory (two paths each:
  // as written and resolved) and not: the verdict's buffer, full, and
  // arrays of their own.
  char dir[600], ln[600], cmd[300];
  snprintf(dir, sizeof(dir), "%s/real", cwd);
  snprintf(ln, sizeof(ln), "%s/ln", cwd);
  mkdir(dir, 0700);
  if (symlink("real", ln) != 0)
    ok(false, "a symlink");
  size_t pn = 0, pbad = 0, own = 0;
  struct gate *g = gate_new();
  for (int through = 0; through < 2; through++)
    for (int files = 1; files <= 9; files++) {
      size_t at = (size_t)snprintf(cmd, sizeof(cmd), "cat");
      for (int f = 0; f < files; f++)
        at += (size_t)snprintf(cmd + at, sizeof(cmd) - at, " %sf%d",
                               through ? "ln/" : "", f);
      json_t *params = request(cmd);
      struct gate_verdict v;
      gate_decide(g, "ag", "s", cwd, params, &v);
      pn++;
      own += v.paths && v.paths != v.path_buf;
      if (!paths_same(&v) || v.npaths != (size_t)(through + 1) * files) {
        pbad++;
        printf("# %s: %zu paths\n", cmd, v.npaths);
      }
      gate_verdict_clear(&v);
      json_decref(params);
    }
  gate_free(g);
  unlink(ln);
  rmdir(dir);
  ok(pbad == 0 && own > 0 && own < pn,
     "paths of 1 to 9 files, through a symlink and not: %zu of %zu (%zu in "
     "arrays of their own)",
     pn - pbad, pn, own);
}

// gate_decide finds params' toolCall and options as json_object_get finds
// them (a walk of a small object, a lookup in a large one): for params of
// other types, members missing, named alike (holding another toolCall and
// other options), keys with a NUL byte, and up to 12 more members, the
// verdict reads the same toolCall and options, and is the one of params
// holding just those two.
static json_t *tc_of(const char *cmd, const char *id) {
  return json_pack("{s:s,s:s,s:s,s:{s:s}}", "toolCallId", id, "title", cmd,
                   "kind", "execute", "rawInput", "command", cmd);
}

static json_t *options_of(const char *allow, const char *reject) {
  return json_pack("[{s:s,s:s},{s:s,s:s}]", "optionId", allow, "kind",
                   "allow_once", "optionId", reject, "kind", "reject_once");
}

static bool same_s(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static void test_params_walk(const char *cwd) {
  root = cwd;
  struct gate *g = gate_new();
  static const char *const cmds[] = {"git status", "rm -rf x", "ls"};
  static const char *const alike[] = {
      "toolcall", "toolCalls", "toolCal",  "ToolCall",  "options_", "Options",
      "option",   "optionz",   "toolCalm", "sessionId", "_meta",    "optionsX"};
  size_t n = 0, bad = 0;
  for (size_t shape = 0; shape < 64; shape++)
    for (size_t extra = 0; extra <= 12; extra++) {
      const char *cmd = cmds[(shape + extra) % 3];
      json_t *params = json_object();
      // Decoys first, after, or both (the walk keeps the last match).
      for (size_t i = 0; i < extra; i++) {
        const char *k = alike[i];
        json_t *val = k[0] == 't' || k[0] == 'T' ? tc_of("rm -rf /", "decoy")
                                                 : options_of("da", "dr");
        json_object_set_new(params, k, val);
      }
      if (!(shape & 1))
        json_object_set_new(params, "toolCall", tc_of(cmd, "real"));
      if (!(shape & 2))
        json_object_set_new(params, "options", options_of("ra", "rr"));
      if (shape & 4)
        json_object_setn_new(params, "toolCall\0x", 10,
                             tc_of("rm -rf /", "nul"));
      if (shape & 8)
        json_object_setn_new(params, "options\0y", 9, options_of("na", "nr"));
      if (shape & 16)
        json_object_set_new(params, "toolCal", tc_of("curl x", "short"));
      if (shape & 32)
        json_object_set_new(params, "sessionId", json_string("s"));
      json_t *tc = json_object_get(params, "toolCall");
      json_t *opts = json_object_get(params, "options");
      json_t *ref = json_object();
      if (tc)
        json_object_set(ref, "toolCall", tc);
      if (opts)
        json_object_set(ref, "options", opts);
      // (A verdict's info is built before the gate's next call.)
      struct gate_verdict a, b;
      gate_decide(g, "ag", "s", root, params, &a);
      char *ja = json_dumps(gate_verdict_info(&a), JSON_SORT_KEYS);
      gate_decide(g, "ag", "s", root, ref, &b);
      char *jb = json_dumps(gate_verdict_info(&b), JSON_SORT_KEYS);
      bool same = a.tc == tc && b.tc == tc && a.decision == b.decision &&
                  a.option_id == b.option_id &&
                  a.allow_option == b.allow_option &&
                  a.reject_option == b.reject_option && same_s(ja, jb);
      n++;
      if (!same && ++bad <= 5)
        printf("# params shape %zu, %zu more: %s\n#  want %s\n", shape, extra,
               ja, jb);
      free(ja);
      free(jb);
      gate_verdict_clear(&a);
      gate_verdict_clear(&b);
      json_decref(ref);
      json_decref(params);
    }
  // Not an object: nothing read.
  json_t *not_obj[] = {json_null(), json_string("toolCall"), json_array(),
                       NULL};
  for (size_t i = 0; i < 4; i++) {
    struct gate_verdict v;
    gate_decide(g, "ag", "s", root, not_obj[i], &v);
    n++;
    if (v.tc || v.decision != POLICY_ASK || v.allow_option || v.reject_option)
      bad++;
    gate_verdict_clear(&v);
    json_decref(not_obj[i]);
  }
  gate_free(g);
  ok(bad == 0, "params' toolCall and options as looked up: %zu of %zu", n - bad,
     n);
}

// Makes project `dir` = base/name<i> (a .git, and .acp/settings.json
// denying Bash(tool<i> *)).
static void deny_project(char *dir, size_t size, const char *base,
                         const char *name, int i) {
  char p[4096], text[100];
  snprintf(dir, size, "%s/%s%d", base, name, i);
  snprintf(p, sizeof(p), "%s/.acp", dir);
  files_mkdirs(p);
  snprintf(p, sizeof(p), "%s/.git", dir);
  files_mkdirs(p);
  snprintf(p, sizeof(p), "%s/.acp/settings.json", dir);
  snprintf(text, sizeof(text),
           "{\"permissions\":{\"deny\":[\"Bash(tool%d *)\"]}}", i);
  put(p, text);
}

// More projects than the gate keeps the settings of (8), decided in turn
// and in other orders: each request is judged by its own project's rules,
// never by those of the project whose place its settings took.
static void test_many_projects(const char *base) {
  enum { N = 11 };
  char dirs[N][300];
  for (int i = 0; i < N; i++)
    deny_project(dirs[i], sizeof(dirs[i]), base, "many", i);
  struct gate *g = gate_new();
  size_t n = 0, bad = 0;
  for (int round = 0; round < 200; round++) {
    int j = round < N ? round : (round * 7 + round / 3) % N;
    int i = round % 3 == 0 ? j : (j + round) % N;
    char cmd[40];
    snprintf(cmd, sizeof(cmd), "tool%d x", i);
    root = dirs[j];
    enum policy_decision d = decide(g, cmd);
    n++;
    if (d != (i == j ? POLICY_DENY : POLICY_ASK)) {
      bad++;
      printf("# %s in many%d: %s\n", cmd, j, policy_decision_name(d));
    }
  }
  gate_free(g);
  ok(bad == 0, "more projects than kept: %zu of %zu by their own rules",
     n - bad, n);
}

// The gate finds the snapshot and runtime state of the root root_of found
// (in one epoch) without comparing names: when :AcpYolo and :AcpMode of
// other projects (their own root strings) take its snapshot's place, or
// move the runtime states (more projects than kept), a request of the
// first project is still judged by its own rules and state. Each other
// project has its own deny rule and yolo on; the first has a deny rule.
static void test_root_places(const char *base) {
  enum { N = 10, MORE = 260 };
  char dirs[N][300], p[4096], err[256];
  for (int i = 0; i < N; i++)
    deny_project(dirs[i], sizeof(dirs[i]), base, "places", i);
  struct gate *g = gate_new();
  gate_epoch(g, 1); // root_of's answer kept within the epoch
  size_t n = 0, bad = 0;
  for (int round = 0; round < 3; round++) {
    root = dirs[0];
    // tool0 denied, curl asked (no rule; yolo is the others')
    n += 2;
    bad += (decide(g, "tool0 x") != POLICY_DENY) +
           (decide(g, "curl x") != POLICY_ASK);
    if (round == 0) // every snapshot's place taken by another project
      for (int i = 1; i < N; i++)
        n++, bad += gate_yolo(g, dirs[i], "on", "ag", err, sizeof(err)) != 0;
    if (round == 1) // more projects than runtime states are kept
      for (int i = 0; i < MORE; i++) {
        snprintf(p, sizeof(p), "%s/more%d", base, i); // its own root
        n++, bad += gate_yolo(g, p, "on", "ag", err, sizeof(err)) != 0;
      }
    n += 2;
    bad += (decide(g, "tool0 x") != POLICY_DENY) +
           (decide(g, "curl x") != POLICY_ASK);
  }
  gate_free(g);
  ok(bad == 0, "root's places taken by other projects: %zu of %zu right",
     n - bad, n);
}

// The verdict's reason, rule and source are the policy's result, decided
// in the verdict itself (struct gate_verdict's res): a deny by a project
// rule, an allow the agent offered no allow-once option for (the reason
// the gate writes over the policy's), and an ask, each decided into a
// verdict holding garbage and into one holding the last verdict, give the
// texts expected, pointing into the verdict, and gate_verdict_info
// shows them.
static bool texts_are(const struct gate_verdict *v, const char *reason,
                      const char *rule, const char *source) {
  const char *lo = (const char *)v, *hi = (const char *)(v + 1);
  bool in = v->reason && v->rule && v->source && v->reason >= lo &&
            v->reason < hi && v->rule >= lo && v->rule < hi &&
            v->source >= lo && v->source < hi;
  json_t *info = gate_verdict_info((struct gate_verdict *)(uintptr_t)v);
  const char *ir = json_string_value(json_object_get(info, "reason"));
  const char *iu = json_string_value(json_object_get(info, "rule"));
  const char *is = json_string_value(json_object_get(info, "source"));
  return in && strstr(v->reason, reason) && strcmp(v->rule, rule) == 0 &&
         strstr(v->source, source) && (source[0] || !v->source[0]) && ir &&
         strcmp(ir, v->reason) == 0 && iu && strcmp(iu, v->rule) == 0 && is &&
         strcmp(is, v->source) == 0;
}

static void test_verdict_texts(const char *base) {
  char dir[300], p[600];
  snprintf(dir, sizeof(dir), "%s/texts", base);
  snprintf(p, sizeof(p), "%s/.acp", dir);
  files_mkdirs(p);
  snprintf(p, sizeof(p), "%s/.git", dir);
  files_mkdirs(p);
  snprintf(p, sizeof(p), "%s/.acp/settings.json", dir);
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]}}");
  struct gate *g = gate_new();
  gate_configure(
      g, json_pack("{s:{s:[s]}}", "permissions", "allow", "Bash(make test)"));
  json_t *deny = request("rm -rf x"), *ask = request("curl x");
  json_t *allow = json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:[{s:s,s:s,s:s}]}",
                            "sessionId", "s", "toolCall", "toolCallId", "t",
                            "title", "make test", "kind", "execute", "rawInput",
                            "command", "make test", "options", "optionId",
                            "reject", "name", "R", "kind", "reject_once");
  size_t good = 0, n = 0;
  for (int round = 0; round < 4; round++) {
    struct gate_verdict v;
    if (round % 2 == 0)
      memset(&v, 0xa5, sizeof(v));
    gate_decide(g, "ag", "s", dir, deny, &v);
    n++;
    good += v.decision == POLICY_DENY &&
            texts_are(&v, "Bash(rm *)", "Bash(rm *)", "settings.json");
    gate_verdict_clear(&v);
    gate_decide(g, "ag", "s", dir, allow, &v);
    n++;
    good += v.decision == POLICY_ASK &&
            texts_are(&v, "allowed, but the agent offered no allow-once option",
                      "Bash(make test)", "setup");
    gate_verdict_clear(&v);
    gate_decide(g, "ag", "s", dir, ask, &v);
    n++;
    good += v.decision == POLICY_ASK &&
            texts_are(&v, "no rule matched: curl x", "", "");
    gate_verdict_clear(&v);
  }
  json_decref(deny);
  json_decref(ask);
  json_decref(allow);
  gate_free(g);
  ok(good == n, "verdict texts: %zu of %zu as decided", good, n);
}

int main(void) {
  char base[256];
  snprintf(base, sizeof(base), "%s/acp-gate-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(base))
    return 2;
  char p[1024], home[300], proj[300], tmp[1100], err[256];
  snprintf(home, sizeof(home), "%s/home", base);
  snprintf(proj, sizeof(proj), "%s/proj", base);
  mkdir(home, 0700);
  mkdir(proj, 0700);
  setenv("HOME", home, 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");
  root = proj;
  snprintf(p, sizeof(p), "%s/.git", proj);
  mkdir(p, 0700);

  struct gate *g = gate_new();
  same(g, "no settings");
  snprintf(p, sizeof(p), "%s/.acp", proj);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/.acp/settings.json", proj);
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]}}");
  same(g, "a project deny rule created");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(cu *)\"]}}");
  same(g, "rewritten with the same size in the same tick");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(curl *)\"]}}");
  same(g, "rewritten");
  put(p, "{\"permissions\":{\"allow\":[\"Bash(git *)\"]}}");
  same(g, "an allow rule, untrusted");
  json_t *enabled = NULL;
  ok(gate_trust(g, proj, &enabled, err, sizeof(err)) == 0, "gate_trust");
  json_decref(enabled);
  same(g, "trusted through the gate");
  put(p, "{\"permissions\":{\"allow\":[\"Bash(npm *)\"]}}");
  same(g, "the allow rule changed (untrusted again)");
  ok(settings_trust(proj, err, sizeof(err)) == 0, "trusted by another writer");
  same(g, "trusted by another writer");
  snprintf(tmp, sizeof(tmp), "%s.tmp", p);
  put(tmp, "{\"permissions\":{\"allow\":[\"Bash(ls *)\"]}}");
  rename(tmp, p);
  same(g, "replaced by rename");
  unlink(p);
  same(g, "deleted");
  snprintf(p, sizeof(p), "%s/.claude", home);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/.claude/settings.json", home);
  put(p, "{\"permissions\":{\"deny\":[\"Bash(git *)\"]}}");
  same(g, "a user Claude file created");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(npm *)\"]}}");
  same(g, "the user Claude file rewritten with the same size");
  char xdg[300];
  snprintf(xdg, sizeof(xdg), "%s/xdg", base);
  setenv("XDG_CONFIG_HOME", xdg, 1);
  same(g, "XDG_CONFIG_HOME changed");
  mkdir(xdg, 0700);
  snprintf(p, sizeof(p), "%s/acp-broker", xdg);
  mkdir(p, 0700);
  snprintf(p, sizeof(p), "%s/acp-broker/settings.json", xdg);
  put(p, "{\"permissions\":{\"deny\":[\"Bash(ls *)\"]}}");
  same(g, "the user acp file created");

  char t1[400], t2[400], link[600];
  snprintf(p, sizeof(p), "%s/.gemini", proj);
  mkdir(p, 0700);
  snprintf(t1, sizeof(t1), "%s/t1.json", base);
  snprintf(t2, sizeof(t2), "%s/t2.json", base);
  snprintf(link, sizeof(link), "%s/.gemini/settings.json", proj);
  put(t1, "{\"security\":{\"disableYoloMode\":true}}");
  put(t2, "{\"tools\":{\"exclude\":[\"run_shell_command(ls)\"]}}");
  symlink(t1, link);
  same(g, "a symlinked Gemini file");
  unlink(link);
  symlink(t2, link);
  same(g, "the symlink retargeted");
  put(t2, "{\"tools\":{\"exclude\":[\"run_shell_command(rm)\"]}}");
  same(g, "the symlink's target rewritten");
  unlink(link);

  // Breaking and fixing, under yolo from setup() with an allow rule (what
  // failing closed takes away shows in every decision).
  setup_opts =
      json_pack("{s:b, s:{s:[s], s:[s]}}", "yolo", 1, "permissions", "allow",
                "Bash(make test)", "deny", "Bash(git push *)");
  gate_configure(g, json_incref(setup_opts));
  snprintf(p, sizeof(p), "%s/.acp/settings.json", proj);
  same(g, "yolo from setup()");
  symlink("nowhere.json", p);
  same(g, "no file, then a dangling symlink");
  snprintf(tmp, sizeof(tmp), "%s/.acp/nowhere.json", proj);
  put(tmp, "{}");
  same(g, "the dangling symlink's target created");
  unlink(tmp);
  same(g, "dangling again");
  unlink(p);
  mkdir(p, 0700);
  same(g, "a directory in its place");
  rmdir(p);
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]}}");
  same(g, "a file again");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"],}");
  same(g, "malformed, same size, same tick");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]}}");
  same(g, "fixed");
  unlink(p);
  symlink(p, p);
  same(g, "a symlink loop");
  unlink(p);
  mkfifo(p, 0600);
  same(g, "a FIFO (never blocks)");
  unlink(p);
  snprintf(tmp, sizeof(tmp), "%s/.acp", proj);
  rmdir(tmp);
  symlink("acp-dir", tmp);
  same(g, ".acp a dangling symlink");
  snprintf(tmp, sizeof(tmp), "%s/acp-dir", proj);
  mkdir(tmp, 0700);
  same(g, ".acp's target created");
  // More than a clock tick later, an absent file is looked at through its
  // deepest existing directory alone: what appears there is still seen.
  nanosleep(&(struct timespec){2, 100000000}, NULL);
  same(g, "settled");
  same(g, "settled, looked at through the directory");
  snprintf(tmp, sizeof(tmp), "%s/.claude", proj);
  symlink("gone", tmp);
  same(g, "then .claude a dangling symlink");
  unlink(tmp);
  same(g, "and gone again");

  // What a broken file refuses and suspends.
  json_t *r = request("make test");
  struct gate_verdict v;
  ok(gate_yolo(g, proj, "on", "ag", err, sizeof(err)) == 0 &&
         settings_set_agent_yolo("ag", true, err, sizeof(err)) == 0,
     ":AcpYolo on and per-agent yolo while nothing is broken");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]},}");
  char want[1100];
  snprintf(want, sizeof(want), "%s:1:", p);
  ok(gate_yolo(g, proj, "on", "ag", err, sizeof(err)) == -1 &&
         strstr(err, want) && strstr(err, "yolo is suspended"),
     ":AcpYolo on refused, naming the file: %s", err);
  ok(gate_mode(g, proj, "acceptEdits", err, sizeof(err)) == -1 &&
         strstr(err, want),
     ":AcpMode acceptEdits refused, naming the file");
  ok(gate_mode(g, proj, "yolo", err, sizeof(err)) == -1,
     ":AcpMode yolo refused");
  ok(gate_trust(g, proj, &enabled, err, sizeof(err)) == -1 && !enabled &&
         strstr(err, want),
     "trust refused, naming the file");
  gate_decide(g, "ag", "s", proj, r, &v);
  ok(v.decision == POLICY_ASK && v.reason && strstr(v.reason, p),
     "runtime, per-agent and setup() yolo and the allow rule suspended: "
     "asked, naming the file");
  gate_verdict_clear(&v);
  json_t *push = request("git push --force origin main");
  gate_decide(g, "ag", "s", proj, push, &v);
  ok(v.decision == POLICY_DENY, "a deny rule of another source still denies");
  gate_verdict_clear(&v);
  json_decref(push);
  json_t *st = gate_settings(g, proj, "ag");
  json_t *fc = json_object_get(st, "failClosed");
  ok(json_is_false(json_object_get(st, "yolo")) && json_is_object(fc) &&
         strstr(json_string_value(json_object_get(fc, "message")), want),
     "the settings event: yolo off, failClosed names the file");
  json_decref(st);
  st = gate_rules(g, proj, NULL);
  ok(json_is_object(json_object_get(st, "failClosed")),
     "the rules event has failClosed");
  json_decref(st);
  ok(gate_mode(g, proj, "plan", err, sizeof(err)) == 0, "plan is not refused");
  ok(gate_mode(g, proj, "default", err, sizeof(err)) == 0, "nor default");
  put(p, "{\"permissions\":{\"deny\":[\"Bash(rm *)\"]}}");
  gate_decide(g, "ag", "s", proj, r, &v);
  ok(v.decision == POLICY_ALLOW, "fixed: yolo is back");
  gate_verdict_clear(&v);
  settings_set_agent_yolo("ag", false, err, sizeof(err));
  json_decref(r);
  json_decref(setup_opts);

  gate_free(g);
  test_every_file(base);
  test_agent_yolo(base);
  test_kept_suggestions(base);
  test_tc_strings(proj);
  test_params_walk(proj);
  test_many_projects(base);
  test_verdict_texts(base);
  test_root_places(base);
  snprintf(tmp, sizeof(tmp), "rm -rf '%s'", base);
  if (system(tmp) != 0)
    return 2;
  return done_testing();
}
