// The prompt of an asked request (broker/prompt.h): the `permission` event's
// data packed from the verdict struct is byte for byte the data the broker
// built before as JSON from the verdict's JSON (gate_verdict_info, the
// agent's params; prompt_data_json) and packed with jsonpack, and what the
// pending entry keeps (prompt_keep, prompt_remember_rules) holds what the JSON
// it kept before held (the audit lines of its answers byte for byte, the
// approval's fields, the rules to remember), for every request of the policy
// conformance sets that the gate asks about (through gate_decide and through
// the flat view's gate_decide_tc), and for requests with no title or kind,
// paths that are not UTF-8, rules that suggest nothing and several atoms. One
// prompt is also compared with its data written out in full.

#include <jansson.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acp/reqview.h"
#include "broker/audit.h"
#include "broker/pending.h"
#include "broker/prompt.h"
#include "broker/verdict.h"
#include "check.h"
#include "codec/jsonpack.h"
#include "fixtures.h"
#include "policy/gate.h"

#include "audit_lines.h"

static char proj[300], audit_file[400];
static size_t asked, compared_view;
// The prompt's token: each comparison takes the next of these (each size
// of msgpack integer); the prompt written out is 42.
static uint64_t token = 42;
static const uint64_t tokens[] = {
    1,     127,   128,         255,         256,
    65535, 65536, 4294967295u, 4294967296u, 9007199254740993u};
static size_t ntoken;

static void pack_to(msgpack_sbuffer *sb, const json_t *data) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  jsonpack_pack(&pk, data);
}

// The packed data of v's prompt, the way the broker sends it now.
static void pack_new_token(msgpack_sbuffer *sb, const json_t *params,
                           const struct gate_verdict *v, uint64_t t) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  prompt_pack(&pk, t, "demo",
              json_string_value(json_object_get(params, "sessionId")),
              json_object_get(params, "toolCall"),
              json_object_get(params, "options"), v);
}

static void pack_new(msgpack_sbuffer *sb, const json_t *params,
                     const struct gate_verdict *v) {
  pack_new_token(sb, params, v, token);
}

static char *dump(const json_t *j) {
  return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

// The packed bytes decoded and written as JSON, for a message.
static char *as_json(const msgpack_sbuffer *sb) {
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  char *s = NULL;
  if (msgpack_unpack_next(&u, sb->data, sb->size, NULL) ==
      MSGPACK_UNPACK_SUCCESS) {
    json_t *j = jsonpack_unpack(&u.data);
    s = dump(j);
    json_decref(j);
  }
  msgpack_unpacked_destroy(&u);
  return s;
}

// The lines of the audit file after the flush, without their timestamps.
static json_t *audit_lines(void) {
  return audit_lines_of(audit_file);
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

// What the pending entry keeps of v (the struct and the rules' JSON) holds
// what the JSON it kept before (info, trimmed) held: the audit line of
// each kind of answer is the same byte for byte, the approval has the
// same fields, gate_remember reads the same rules.
static void kept_same(const struct gate_verdict *v, bool raw, json_t *info,
                      const char *what) {
  struct prompt_kept *k = prompt_keep(v, raw);
  static const char *const answers[][2] = {
      {"person", "yes"}, {"cancel", NULL}, {"error", NULL}};
  for (size_t i = 0; i < sizeof(answers) / sizeof(*answers); i++) {
    struct audit_entry a;
    prompt_kept_audit(k, "ask", answers[i][0], answers[i][1], 12, &a);
    audit_write(audit_file, &a);
    verdict_audit_info(info, "ask", answers[i][0], answers[i][1], 12, &a);
    audit_write(audit_file, &a);
    json_t *l = audit_lines();
    const char *l1 = json_string_value(json_array_get(l, 0));
    const char *l2 = json_string_value(json_array_get(l, 1));
    bool eq = json_array_size(l) == 2 && l1 && l2 && !strcmp(l1, l2);
    if (!eq)
      printf("# kept: %s# json: %s", l1 ? l1 : "(none)\n",
             l2 ? l2 : "(none)\n");
    ok(eq, "%s: the audit line of an answer by %s", what, answers[i][0]);
    json_decref(l);
  }
  // client_approved's fields (the command only when it is the agent's).
  const char *cmd = json_is_true(json_object_get(info, "rawCommand"))
                        ? json_string_value(json_object_get(info, "command"))
                        : NULL;
  const json_t *paths = json_object_get(info, "paths");
  bool same =
      same_str(k->raw_command ? k->command : NULL, cmd) &&
      same_str(k->session,
               json_string_value(json_object_get(info, "session"))) &&
      same_str(k->kind, json_string_value(json_object_get(info, "kind"))) &&
      k->npaths == json_array_size(paths);
  for (size_t i = 0; same && i < k->npaths; i++)
    same = same_str(k->paths[i], json_string_value(json_array_get(paths, i)));
  ok(same, "%s: the approval's fields", what);
  // gate_remember's rules: from the struct as from the JSON, in order.
  bool rules_same = true;
  for (int broad = 0; broad < 2; broad++) {
    size_t n, m;
    const char **got = prompt_remember_rules(k, NULL, broad, &n);
    const char **want = prompt_remember_rules(NULL, info, broad, &m);
    rules_same =
        rules_same && n == m && !got == !want &&
        n == json_array_size(json_object_get(info, broad ? "broad" : "narrow"));
    for (size_t i = 0; rules_same && i < n; i++)
      rules_same = got[i] && want[i] && !strcmp(got[i], want[i]);
    free(got);
    free(want);
  }
  ok(rules_same, "%s: the rules to remember", what);
  free(k);
}

// Compares v's prompt both ways; returns the new data as JSON (free it).
static char *compare(const json_t *params, struct gate_verdict *v, bool raw,
                     const char *what) {
  msgpack_sbuffer a, b;
  msgpack_sbuffer_init(&a);
  msgpack_sbuffer_init(&b);
  token = tokens[ntoken++ % (sizeof(tokens) / sizeof(*tokens))];
  pack_new(&a, params, v);
  // Before: the verdict's JSON with rawCommand, the data built from it and
  // packed, then the keys only the event needed deleted.
  json_t *info = json_deep_copy(gate_verdict_info(v));
  json_object_set_new(info, "rawCommand", json_boolean(raw));
  json_t *data = prompt_data_json(token, "demo", params, info);
  pack_to(&b, data);
  bool same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  char *got = as_json(&a);
  if (!same) {
    char *want = as_json(&b);
    printf("# new: %s\n# old: %s\n", got ? got : "(none)",
           want ? want : "(none)");
    free(want);
  }
  ok(same, "%s: the permission event's data, byte for byte", what);
  prompt_info_trim(info);
  kept_same(v, raw, info, what);
  json_decref(info);
  json_decref(data);
  msgpack_sbuffer_destroy(&a);
  msgpack_sbuffer_destroy(&b);
  return got;
}

// Decides params both ways (the tree, the flat view's options) and compares
// each asked prompt; returns the decision.
static enum policy_decision check_params(struct gate *g, const json_t *params,
                                         const char *what) {
  struct gate_verdict v;
  gate_decide(g, "demo",
              json_string_value(json_object_get(params, "sessionId")), proj,
              (json_t *)(uintptr_t)params, &v);
  enum policy_decision d = v.decision;
  if (d == POLICY_ASK) {
    asked++;
    free(compare(params, &v, true, what));
    free(compare(params, &v, false, what));
  }
  gate_verdict_clear(&v);
  // The flat view gives the gate the options as arrays (acp/reqview.h).
  const json_t *opts = json_object_get(params, "options");
  size_t n = json_array_size(opts);
  const char **ids = calloc(n + 1, sizeof(*ids));
  const char **kinds = calloc(n + 1, sizeof(*kinds));
  for (size_t i = 0; i < n; i++) {
    ids[i] =
        json_string_value(json_object_get(json_array_get(opts, i), "optionId"));
    kinds[i] =
        json_string_value(json_object_get(json_array_get(opts, i), "kind"));
  }
  struct gate_options o = {ids, kinds, n};
  json_t *tc = json_object_get(params, "toolCall");
  gate_decide_tc(g, "demo",
                 json_string_value(json_object_get(params, "sessionId")), proj,
                 tc, &o, &v);
  ok(v.decision == d, "%s: the same decision through the view", what);
  if (v.decision == POLICY_ASK && json_is_object(tc)) {
    compared_view++;
    free(compare(params, &v, true, what));
  }
  gate_verdict_clear(&v);
  free(ids);
  free(kinds);
  return d;
}

static size_t viewed, view_asked;

// The options the pending entry keeps, from the tree and from the view.
static void same_options(const json_t *options, const struct reqview *rv,
                         const char *what) {
  struct pending p;
  pending_init(&p, 4);
  uint64_t t1 = pending_add(&p, NULL, json_integer(1), strdup("s"), strdup("t"),
                            json_incref((json_t *)(uintptr_t)options), 0);
  uint64_t t2 =
      pending_add_of(&p, NULL, json_integer(2), strdup("s"), strdup("t"),
                     (const char *const *)rv->option_id_z,
                     (const char *const *)rv->option_kind_z, rv->noptions, 0);
  struct pending_entry *a = pending_find(&p, t1), *b = pending_find(&p, t2);
  bool same = a && b && a->noptions == b->noptions;
  for (size_t i = 0; same && i < a->noptions; i++)
    same = !strcmp(a->options[i].id, b->options[i].id) &&
           !strcmp(a->options[i].kind, b->options[i].kind);
  ok(same, "%s: the options kept, from the view", what);
  pending_free(&p);
}

// The request's line read into a flat view, as acp.c reads it: when the
// view takes it and the gate asks, the prompt packed from the view is the
// prompt packed from the tree of the same line, byte for byte.
static void check_line(struct gate *g, const char *line, const char *what) {
  struct reqview rv;
  if (reqview_parse(line, strlen(line), &rv) != 0)
    return;
  viewed++;
  struct gate_options o = {(const char *const *)rv.option_id_z,
                           (const char *const *)rv.option_kind_z, rv.noptions};
  struct gate_verdict v;
  gate_decide_tc(g, "demo", rv.sid_z, proj, rv.tc, &o, &v);
  json_t *msg = json_loads(line, 0, NULL);
  json_t *params = json_object_get(msg, "params");
  if (v.decision == POLICY_ASK) {
    view_asked++;
    msgpack_sbuffer a, b;
    msgpack_sbuffer_init(&a);
    msgpack_sbuffer_init(&b);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &a, msgpack_sbuffer_write);
    prompt_pack_view(&pk, 77, "demo", &rv, &v);
    pack_new_token(&b, params, &v, 77);
    bool same = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
    if (!same) {
      char *x = as_json(&a), *y = as_json(&b);
      printf("# view: %s\n# tree: %s\n", x ? x : "(none)", y ? y : "(none)");
      free(x);
      free(y);
    }
    ok(same, "%s: the prompt from the view, byte for byte", what);
    same_options(json_object_get(params, "options"), &rv, what);
    msgpack_sbuffer_destroy(&a);
    msgpack_sbuffer_destroy(&b);
  }
  gate_verdict_clear(&v);
  json_decref(msg);
  reqview_clear(&rv);
}

static void check_view(struct gate *g, const json_t *params, const char *what) {
  json_t *msg =
      json_pack("{s:s,s:i,s:s,s:O}", "jsonrpc", "2.0", "id", 7, "method",
                "session/request_permission", "params", params);
  char *line = json_dumps(msg, JSON_COMPACT);
  if (line)
    check_line(g, line, what);
  free(line);
  json_decref(msg);
}

static void each_case(const json_t *c, const char *what, void *ud) {
  const json_t *params = json_object_get(c, "request");
  const json_t *tc = json_object_get(params, "toolCall");
  // As the broker sees them: acp.c answers malformed requests itself.
  if (!json_is_string(json_object_get(params, "sessionId")) ||
      !json_is_object(tc) ||
      !json_is_string(json_object_get(tc, "toolCallId")) ||
      !json_is_array(json_object_get(params, "options")))
    return;
  check_params(ud, params, what);
  check_view(ud, params, what);
}

// The option picker as it was written first (two passes over a table of
// the kinds wanted), against which policy_pick_option and
// policy_pick_option_of are checked.
static const char *pick_ref(const char *const *ids, const char *const *kinds,
                            size_t n, enum policy_decision *decision) {
  static const char *const want[][2] = {
      [POLICY_ALLOW] = {"allow_once", NULL},
      [POLICY_ASK] = {NULL, NULL},
      [POLICY_DENY] = {"reject_once", "reject_always"}};
  if ((unsigned)*decision > POLICY_DENY)
    *decision = POLICY_ASK;
  for (int pass = 0; pass < 2; pass++) {
    const char *kind = want[*decision][pass];
    for (size_t i = 0; kind && i < n; i++)
      if (ids[i] && kinds[i] && strcmp(kinds[i], kind) == 0)
        return ids[i];
  }
  if (*decision == POLICY_ALLOW)
    *decision = POLICY_ASK;
  return NULL;
}

// Every list of up to four options of these kinds (a missing optionId or
// kind among them; other members named like them), for each decision: the
// same option and decision.
static void check_pick(void) {
  static const char *const kinds[] = {
      "allow_once",  "allow_always", "reject_once", "reject_always", "reject_",
      "allow_oncex", "_x",           NULL,          "reject_once"};
  const size_t nk = sizeof(kinds) / sizeof(*kinds);
  size_t lists = 0, bad = 0;
  for (size_t len = 0; len <= 4; len++) {
    size_t combos = 1;
    for (size_t i = 0; i < len; i++)
      combos *= nk;
    for (size_t c = 0; c < combos; c++) {
      const char *ids[4], *ks[4];
      static const char *const names[] = {"o0", "o1", "o2", "o3"};
      json_t *arr = json_array();
      for (size_t i = 0, x = c; i < len; i++, x /= nk) {
        ks[i] = kinds[x % nk];
        // The last kind of the table is offered without an optionId.
        ids[i] = x % nk == nk - 1 ? NULL : names[i];
        json_t *o = json_object();
        // Members whose names start as the two read do (never read).
        json_object_set_new(o, "kinds", json_string("allow_once"));
        json_object_set_new(o, "optionIdx", json_string("decoy"));
        json_object_set_new(o, "o", json_string("decoy"));
        json_object_set_new(o, "k", json_string("reject_once"));
        // And of the same lengths (a key of 4 or 8 bytes is compared in
        // place).
        json_object_set_new(o, "kine", json_string("allow_once"));
        json_object_set_new(o, "optionIe", json_string("decoy"));
        json_object_set_new(o, "jind", json_string("allow_once"));
        json_object_set_new(o, "kin", json_string("allow_once"));
        if (ids[i])
          json_object_set_new(o, "optionId", json_string(ids[i]));
        if (ks[i])
          json_object_set_new(o, "kind", json_string(ks[i]));
        json_array_append_new(arr, o);
      }
      for (int d = 0; d < 4; d++) {
        enum policy_decision want = (enum policy_decision)d,
                             got = (enum policy_decision)d,
                             got_of = (enum policy_decision)d;
        const char *w = pick_ref(ids, ks, len, &want);
        const char *g = policy_pick_option(arr, &got);
        const char *g_of = policy_pick_option_of(ids, ks, len, &got_of);
        lists++;
        if (!same_str(w, g) || !same_str(w, g_of) || want != got ||
            want != got_of)
          bad++;
      }
      // Both a prompt offers, in one walk: as picked for ALLOW and DENY.
      enum policy_decision da = POLICY_ALLOW, dd = POLICY_DENY;
      const char *wa = pick_ref(ids, ks, len, &da);
      const char *wd = pick_ref(ids, ks, len, &dd);
      const char *ga, *gd;
      policy_pick_options(arr, &ga, &gd);
      lists++;
      if (!same_str(wa, ga) || !same_str(wd, gd))
        bad++;
      json_decref(arr);
    }
  }
  ok(bad == 0, "the option picked, %zu lists and decisions: %zu differ", lists,
     bad);
  // A key holding a NUL byte is read up to it, as strcmp reads it (and
  // always was): "kind\0x" is a kind, "optionId\0y" an optionId.
  json_t *o = json_object(), *arr = json_array();
  json_object_setn_new(o, "kind\0x", 6, json_string("allow_once"));
  json_object_setn_new(o, "optionId\0y", 10, json_string("nul"));
  json_array_append_new(arr, o);
  enum policy_decision d = POLICY_ALLOW;
  const char *id = policy_pick_option(arr, &d);
  ok(same_str(id, "nul") && d == POLICY_ALLOW,
     "keys with a NUL byte read up to it");
  json_decref(arr);
}

// The `permission_resolved` event packed directly is the one json_pack
// built and jsonpack packed, byte for byte.
static void check_resolved(void) {
  static const char *const opts[] = {"allow", NULL,
                                     "a long optionId of more "
                                     "than thirty-one bytes"};
  static const char *const bys[] = {"person", "cancel", "agent_exit"};
  size_t bad = 0, n = 0;
  for (size_t t = 0; t < sizeof(tokens) / sizeof(*tokens); t++)
    for (size_t i = 0; i < 3; i++) {
      json_t *want = json_pack("{s:I,s:s,s:s,s:s,s:s,s:s?,s:s}", "id",
                               (json_int_t)tokens[t], "agent", "demo",
                               "session", "s-1", "toolCallId", "call_1",
                               "outcome", opts[i] ? "selected" : "cancelled",
                               "optionId", opts[i], "by", bys[i]);
      msgpack_sbuffer a, b;
      msgpack_sbuffer_init(&a);
      msgpack_sbuffer_init(&b);
      msgpack_packer pk;
      msgpack_packer_init(&pk, &a, msgpack_sbuffer_write);
      prompt_pack_resolved(&pk, tokens[t], "demo", "s-1", "call_1", opts[i],
                           bys[i]);
      pack_to(&b, want);
      bad += a.size != b.size || memcmp(a.data, b.data, a.size) != 0;
      n++;
      msgpack_sbuffer_destroy(&a);
      msgpack_sbuffer_destroy(&b);
      json_decref(want);
    }
  ok(bad == 0, "the permission_resolved event, %zu of %zu byte for byte",
     n - bad, n);
}

static json_t *options(void) {
  return json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}]", "optionId",
                   "always", "name", "Always", "kind", "allow_always",
                   "optionId", "yes", "name", "Allow", "kind", "allow_once",
                   "optionId", "no", "name", "Reject", "kind", "reject_once");
}

int main(void) {
  char base[256];
  snprintf(base, sizeof(base), "%s/acp-prompt-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(base))
    return 2;
  char home[300], p[700];
  snprintf(home, sizeof(home), "%s/home", base);
  snprintf(proj, sizeof(proj), "%s/proj", base);
  snprintf(audit_file, sizeof(audit_file), "%s/audit.jsonl", base);
  mkdir(home, 0700);
  mkdir(proj, 0700);
  setenv("HOME", home, 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");
  snprintf(p, sizeof(p), "%s/.git", proj);
  mkdir(p, 0700);

  check_pick();
  check_resolved();

  struct gate *g = gate_new();
  gate_configure(g, json_pack("{s:{s:[s,s,s],s:[s,s],s:[s]}}", "permissions",
                              "allow", "Bash(ls *)", "Edit(/src/**)",
                              "Read(/docs/**)", "ask", "Bash(git push *)",
                              "Edit(/Makefile)", "deny", "Bash(rm *)"));
  size_t cases = each_fixture(each_case, g);
  ok(cases > 1000, "%zu conformance cases read", cases);
  ok(asked > 300, "%zu of them asked, each compared", asked);
  ok(compared_view > 300, "%zu compared through the view", compared_view);
  ok(view_asked > 300,
     "%zu of %zu lines read into a flat view asked, each "
     "compared",
     view_asked, viewed);
  // Options whose members come in other orders, with spaces.
  size_t before = view_asked;
  check_line(g,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session/"
             "request_permission\",\"params\":{\"sessionId\":\"s1\","
             "\"toolCall\":{\"toolCallId\":\"t\",\"title\":\"git push\","
             "\"kind\":\"execute\",\"rawInput\":{\"command\":\"git push\"}},"
             "\"options\":[{\"kind\":\"allow_once\", \"name\":\"Allow\","
             "\"optionId\":\"a\"},{ \"name\" : \"No\" , \"optionId\":\"r\","
             "\"kind\":\"reject_once\"},{\"optionId\":\"x\",\"kind\":"
             "\"reject_always\",\"name\":\"Never\"}]}}",
             "members in other orders");
  ok(view_asked == before + 1,
     "the line with members in other orders was read and asked");
  // Strings of every msgpack width: an optionId of 40 bytes (str8), a name
  // of 300 (str16).
  char longline[2048], name[301], oid[41];
  memset(name, 'n', 300);
  name[300] = '\0';
  memset(oid, 'i', 40);
  oid[40] = '\0';
  snprintf(longline, sizeof(longline),
           "{\"jsonrpc\":\"2.0\",\"id\":\"x-1\",\"method\":\"session/"
           "request_permission\",\"params\":{\"sessionId\":\"s1\","
           "\"toolCall\":{\"toolCallId\":\"t\",\"title\":\"git push\","
           "\"kind\":\"execute\",\"rawInput\":{\"command\":\"git push\"}},"
           "\"options\":[{\"optionId\":\"%s\",\"name\":\"%s\",\"kind\":"
           "\"allow_once\"},{\"optionId\":\"r\",\"name\":\"No\",\"kind\":"
           "\"reject_once\"}]}}",
           oid, name);
  check_line(g, longline, "long strings in the options");
  ok(view_asked == before + 2, "the line with long strings was read and asked");

  // By hand: no title and no kind (nil in the event, absent in the entry),
  // a path that is not UTF-8 (left out), several atoms (one inner), a
  // command nothing can be suggested for, an ask rule.
  static const char *const cmds[] = {
      "git push origin main",
      "echo $(whoami) > /tmp/x",
      "cat README.md | grep -n x && make -j2 && git push -f",
      "eval \"$X\"",
      "ls src && cat /etc/hostname",
  };
  for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
    json_t *r = json_pack("{s:s,s:{s:s,s:s,s:{s:s}},s:o}", "sessionId", "s1",
                          "toolCall", "toolCallId", "tc1", "kind", "execute",
                          "rawInput", "command", cmds[i], "options", options());
    ok(check_params(g, r, cmds[i]) == POLICY_ASK, "command %zu asked", i);
    json_decref(r);
  }
  // A directory whose name is not UTF-8, and a link to it: the resolved
  // path is not UTF-8.
  char path[700];
  snprintf(path, sizeof(path), "%s/\xff\xfe", proj);
  mkdir(path, 0700);
  snprintf(p, sizeof(p), "%s/latin", proj);
  if (symlink(path, p) != 0)
    printf("# symlink failed\n");
  snprintf(path, sizeof(path), "%s/latin/x.c", proj);
  json_t *r =
      json_pack("{s:s,s:{s:s,s:s,s:s,s:[{s:s}],s:{s:s}},s:o}", "sessionId",
                "s1", "toolCall", "toolCallId", "tc2", "title", "Write", "kind",
                "edit", "locations", "path", path, "rawInput", "file_path",
                path, "options", options());
  enum policy_decision d = check_params(g, r, "a path that is not UTF-8");
  ok(d == POLICY_ASK, "the edit asked (%d)", (int)d);
  json_decref(r);
  // Only a reject option: no allowOption.
  r = json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:[{s:s,s:s,s:s}]}", "sessionId",
                "s1", "toolCall", "toolCallId", "tc3", "title", "make", "kind",
                "execute", "rawInput", "command", "make", "options", "optionId",
                "no", "name", "No", "kind", "reject_once");
  ok(check_params(g, r, "no allow option") == POLICY_ASK, "asked");
  json_decref(r);

  // One prompt written out in full.
  r = json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:o}", "sessionId", "s1",
                "toolCall", "toolCallId", "tc9", "title",
                "git push origin main && ls -la", "kind", "execute", "rawInput",
                "command", "git push origin main && ls -la", "options",
                options());
  check_params(g, r, "the prompt written out");
  struct gate_verdict v;
  gate_decide(g, "demo", "s1", proj, r, &v);
  token = 42;
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  pack_new(&sb, r, &v);
  char *got = as_json(&sb);
  static const char want[] =
      "{\"id\":42,\"agent\":\"demo\",\"session\":\"s1\",\"toolCallId\":"
      "\"tc9\",\"title\":\"git push origin main && ls -la\",\"kind\":"
      "\"execute\",\"options\":[{"
      "\"optionId\":\"always\",\"name\":\"Always\",\"kind\":\"allow_always\"},"
      "{\"optionId\":\"yes\",\"name\":\"Allow\",\"kind\":\"allow_once\"},{"
      "\"optionId\":\"no\",\"name\":\"Reject\",\"kind\":\"reject_once\"}],"
      "\"toolCall\":{\"toolCallId\":\"tc9\",\"title\":\"git push origin "
      "main && ls -la\",\"kind\":"
      "\"execute\",\"rawInput\":{\"command\":\"git push origin main && ls "
      "-la\"}},\"reason\":\"ask rule Bash(git push *): git push origin main "
      "(setup)\",\"rule\":"
      "\"Bash(git push *)\",\"source\":\"setup\",\"narrow\":[\"Bash(git push "
      "origin main)\",\"Bash(ls -la)\"],\"broad\":[\"Bash(git push *)\","
      "\"Bash(ls *)\"],\"command\":\"git push origin main && ls -la\","
      "\"atoms\":[{\"kind\":\"command\",\"text\":\"git push origin main\"},{"
      "\"kind\":\"command\",\"text\":\"ls -la\"}],\"paths\":[],"
      "\"allowOption\":\"yes\",\"rejectOption\":\"no\"}";
  bool eq = got && strcmp(got, want) == 0;
  if (!eq)
    printf("# got:  %s\n# want: %s\n", got ? got : "(none)", want);
  ok(eq, "the prompt's data, written out");
  free(got);
  msgpack_sbuffer_destroy(&sb);
  gate_verdict_clear(&v);
  json_decref(r);

  gate_free(g);
  audit_close();
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", base);
  return done_testing();
}
