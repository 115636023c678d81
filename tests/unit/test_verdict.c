// The gate's verdict as a C struct (policy/gate.h) and what the broker
// makes of it (broker/verdict.h): the audit line written from the struct
// is byte for byte the line written from the verdict's JSON, and the
// `decided` event packed from the struct holds, once Lua fills in what it
// leaves out (its atoms when they are the command), what the event built
// from the JSON held, for allows, denials, asks, edits, several atoms and
// paths that are not UTF-8. The JSON of a verdict has the keys it always
// had, in the same order.

#include <jansson.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/verdict.h"
#include "check.h"
#include "codec/jsonpack.h"
#include "policy/gate.h"

#include "audit_lines.h"

static char proj[300], audit_file[400];

static json_t *options(void) {
  return json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s}]", "optionId", "yes", "name",
                   "Allow", "kind", "allow_once", "optionId", "no", "name",
                   "Reject", "kind", "reject_once");
}

static json_t *execute(const char *cmd) {
  return json_pack("{s:s,s:{s:s,s:s,s:s,s:{s:s}},s:o}", "sessionId", "s1",
                   "toolCall", "toolCallId", "tc1", "title", cmd, "kind",
                   "execute", "rawInput", "command", cmd, "options", options());
}

static json_t *edit(const char *path) {
  return json_pack("{s:s,s:{s:s,s:s,s:s,s:[{s:s}],s:{s:s}},s:o}", "sessionId",
                   "s1", "toolCall", "toolCallId", "tc2", "title", "Write",
                   "kind", "edit", "locations", "path", path, "rawInput",
                   "file_path", path, "options", options());
}

// The lines of the audit file after the flush, without their timestamps.
static json_t *audit_lines(void) {
  return audit_lines_of(audit_file);
}

// The event as the broker built it from the verdict's JSON before, as Lua
// reads it: no null values, no empty strings (compat.str takes both as
// nil).
static json_t *event_from_info(json_t *info, const char *option_id,
                               bool with_paths, json_t *snaps) {
  json_t *e = json_deep_copy(info);
  json_object_del(e, "root");
  // No paths and an empty list read the same in Lua (the ledger).
  if (!with_paths || json_array_size(json_object_get(e, "paths")) == 0)
    json_object_del(e, "paths");
  json_object_set_new(e, "optionId",
                      option_id ? json_string(option_id) : json_null());
  if (snaps)
    json_object_set(e, "snapshots", snaps);
  json_t *out = json_object();
  const char *k;
  json_t *val;
  json_object_foreach(e, k, val) {
    if (json_is_null(val) ||
        (json_is_string(val) && json_string_length(val) == 0))
      continue;
    json_object_set(out, k, val);
  }
  json_decref(e);
  return out;
}

// The names of the `decided` event's items, by position (verdict.h
// enum decided_item, lua/acp/decided.lua).
static const char *const item_names[] = {
    "agent",   "session",  "toolCallId", "kind",     "title",
    "command", "decision", "by",         "optionId", "reason",
    "rule",    "source",   "atoms",      "paths",    "snapshots"};

// The event packed from the struct, as Lua reads it through acp.decided
// (by name; a nil item left out) and events.lua's atoms: an array of at
// most 15 items, the last one present, no empty string.
static json_t *event_from_struct(const struct gate_verdict *v, bool with_paths,
                                 json_t *snaps) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  verdict_pack_decided(&pk, v, with_paths, snaps);
  msgpack_unpacked u;
  msgpack_unpacked_init(&u);
  json_t *a = NULL;
  size_t off = 0;
  if (msgpack_unpack_next(&u, sb.data, sb.size, &off) ==
          MSGPACK_UNPACK_SUCCESS &&
      off == sb.size)
    a = jsonpack_unpack(&u.data);
  msgpack_unpacked_destroy(&u);
  msgpack_sbuffer_destroy(&sb);
  size_t n = json_array_size(a);
  if (!json_is_array(a) || n < DECIDED_BY || n > DECIDED_SNAPSHOTS ||
      json_is_null(json_array_get(a, n - 1))) {
    ok(0, "the event is an array of %d to %d items, the last not nil",
       DECIDED_BY, DECIDED_SNAPSHOTS);
    json_decref(a);
    return NULL;
  }
  json_t *e = json_object();
  for (size_t i = 0; i < n; i++) {
    json_t *val = json_array_get(a, i);
    if (json_is_string(val) && json_string_length(val) == 0)
      ok(0, "item %s: nil, not an empty string", item_names[i]);
    if (json_is_string(val) &&
        verdict_decided_word((enum decided_item)(i + 1), 1)) {
      // A word of the item's list goes as its number.
      for (unsigned k = 1; verdict_decided_word((enum decided_item)(i + 1), k);
           k++)
        if (strcmp(json_string_value(val),
                   verdict_decided_word((enum decided_item)(i + 1), k)) == 0)
          ok(0, "item %s: %s sent as a string, not as %u", item_names[i],
             json_string_value(val), k);
    }
    if (json_is_integer(val) && i + 1 != DECIDED_TITLE) {
      // The kind, the decision, by: the n-th word of the item's list.
      const char *w = verdict_decided_word((enum decided_item)(i + 1),
                                           (unsigned)json_integer_value(val));
      if (!w) {
        ok(0, "item %s: %lld is no word", item_names[i],
           (long long)json_integer_value(val));
        continue;
      }
      json_object_set_new(e, item_names[i], json_string(w));
    } else if (!json_is_null(val))
      json_object_set(e, item_names[i], val);
  }
  json_decref(a);
  // A title that is the command is `true` (acp.decided reads it so).
  json_t *title = json_object_get(e, "title");
  if (json_is_true(title) && json_is_string(json_object_get(e, "command")))
    json_object_set(e, "title", json_object_get(e, "command"));
  else if (title && !json_is_string(title))
    ok(0, "the title: a string, or true with a command");
  json_t *flat = json_object_get(e, "atoms");
  json_t *atoms = json_array();
  if (flat) {
    if (json_array_size(flat) % 3 != 0)
      ok(0, "the atoms: kind, text, inner for each");
    for (size_t i = 0; i + 2 < json_array_size(flat); i += 3) {
      json_t *at = json_pack("{s:O,s:O}", "kind", json_array_get(flat, i),
                             "text", json_array_get(flat, i + 1));
      if (json_is_true(json_array_get(flat, i + 2)))
        json_object_set_new(at, "inner", json_true());
      else if (!json_is_false(json_array_get(flat, i + 2)))
        ok(0, "inner is a boolean");
      json_array_append_new(atoms, at);
    }
  } else {
    const char *cmd = json_string_value(json_object_get(e, "command"));
    if (cmd)
      json_array_append_new(
          atoms, json_pack("{s:s,s:s}", "kind", "command", "text", cmd));
  }
  json_object_set_new(e, "atoms", atoms);
  return e;
}

static void same_json(json_t *a, json_t *b, const char *what) {
  bool eq = json_equal(a, b);
  if (!eq) {
    char *ja = json_dumps(a, JSON_SORT_KEYS),
         *jb = json_dumps(b, JSON_SORT_KEYS);
    printf("# struct: %s\n# json:   %s\n", ja, jb);
    free(ja);
    free(jb);
  }
  ok(eq, "%s", what);
}

// Decides params and checks the audit line and the event against the JSON
// verdict; returns the decision.
static enum policy_decision check(struct gate *g, json_t *params,
                                  const char *what) {
  struct gate_verdict v;
  gate_decide(g, "demo", "s1", proj, params, &v);
  enum policy_decision d = v.decision;
  bool with_paths = d == POLICY_ALLOW && v.kind && !strcmp(v.kind, "edit");
  struct audit_entry a;
  verdict_audit(&v, v.decision_name, v.by, v.option_id, 0, &a);
  audit_write(audit_file, &a);
  // The JSON as gate_decide built it before the struct: its paths from
  // policy_request_paths.
  json_t *info = json_copy(gate_verdict_info(&v));
  json_object_set_new(info, "paths", policy_request_paths(v.req));
  verdict_audit_info(info, json_string_value(json_object_get(info, "decision")),
                     json_string_value(json_object_get(info, "by")),
                     v.option_id, 0, &a);
  audit_write(audit_file, &a);
  json_t *l = audit_lines();
  const char *l1 = json_string_value(json_array_get(l, 0));
  const char *l2 = json_string_value(json_array_get(l, 1));
  bool eq = json_array_size(l) == 2 && l1 && l2 && !strcmp(l1, l2);
  if (!eq)
    printf("# struct: %s# json:   %s", l1 ? l1 : "(none)\n",
           l2 ? l2 : "(none)\n");
  ok(eq, "%s: the audit line, byte for byte", what);
  json_decref(l);
  // The unasked watch audits the verdict's JSON (gate_verdict_info), by
  // "agent": as the JSON before did.
  verdict_audit_info(gate_verdict_info(&v), v.decision_name, "agent", NULL, 0,
                     &a);
  audit_write(audit_file, &a);
  verdict_audit_info(info, v.decision_name, "agent", NULL, 0, &a);
  audit_write(audit_file, &a);
  l = audit_lines();
  l1 = json_string_value(json_array_get(l, 0));
  l2 = json_string_value(json_array_get(l, 1));
  ok(json_array_size(l) == 2 && l1 && l2 && !strcmp(l1, l2) &&
         strstr(l1, "\"outcome\":\"unasked\""),
     "%s: the unasked line, byte for byte", what);
  json_decref(l);
  if (d != POLICY_ASK) { // a prompt, not a `decided` event
    // An edit during a turn carries the files the broker read first.
    json_t *snaps = with_paths ? json_pack("{s:{s:b,s:I}}", v.paths[0],
                                           "missing", 1, "at", (json_int_t)7)
                               : NULL;
    json_t *from_struct = event_from_struct(&v, with_paths, snaps);
    json_t *from_info = event_from_info(info, v.option_id, with_paths, snaps);
    json_decref(snaps);
    same_json(from_struct, from_info, "the decided event");
    json_decref(from_struct);
    json_decref(from_info);
  }
  gate_verdict_clear(&v);
  json_decref(info);
  return d;
}

// The keys of a verdict's JSON, in order, joined by spaces.
static void keys(json_t *info, char *buf, size_t n) {
  const char *k;
  json_t *val;
  buf[0] = '\0';
  json_object_foreach(info, k, val) {
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? " " : "", k);
  }
}

int main(void) {
  char base[256];
  snprintf(base, sizeof(base), "%s/acp-verdict-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(base))
    return 2;
  char home[300], p[700], q[700];
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
  // A directory whose name is not UTF-8, and a link to it.
  snprintf(p, sizeof(p), "%s/\xff\xfe", proj);
  mkdir(p, 0700);
  snprintf(q, sizeof(q), "%s/latin", proj);
  if (symlink(p, q) != 0)
    printf("# symlink failed\n");

  struct gate *g = gate_new();
  gate_configure(g, json_pack("{s:{s:[s,s,s],s:[s]}}", "permissions", "allow",
                              "Bash(ls *)", "Edit(/src/**)", "Edit(/**)",
                              "deny", "Bash(rm *)"));
  json_t *r = execute("ls -la");
  ok(check(g, r, "allowed by a rule") == POLICY_ALLOW, "allowed");
  // The array, item for item (doc/protocol.md): the title that is the
  // command is true, the atoms and paths after the source left out.
  {
    struct gate_verdict v;
    gate_decide(g, "demo", "s1", proj, r, &v);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    verdict_pack_decided(&pk, &v, true, NULL);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    json_t *got = NULL;
    if (msgpack_unpack_next(&u, sb.data, sb.size, NULL) ==
        MSGPACK_UNPACK_SUCCESS)
      got = jsonpack_unpack(&u.data);
    // The kind, the decision and by as numbers (execute 6, allow 1, rule
    // 1: lua/acp/decided.lua's lists).
    json_t *want = json_pack(
        "[s,s,s,i,b,s,i,i,s,s,s,s]", "demo", "s1", "tc1", 6, 1, "ls -la", 1, 1,
        "yes", "allowed by Bash(ls *) (setup)", "Bash(ls *)", "setup");
    same_json(got, want, "the decided event, item for item");
    json_decref(got);
    json_decref(want);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    gate_verdict_clear(&v);
  }
  json_decref(r);
  // The lists as Lua has them (lua/acp/decided.lua), and a word of none.
  ok(strcmp(verdict_decided_word(DECIDED_KIND, 1), "read") == 0 &&
         strcmp(verdict_decided_word(DECIDED_KIND, 10), "switch_mode") == 0 &&
         !verdict_decided_word(DECIDED_KIND, 11) &&
         !verdict_decided_word(DECIDED_KIND, 0) &&
         strcmp(verdict_decided_word(DECIDED_DECISION, 2), "deny") == 0 &&
         strcmp(verdict_decided_word(DECIDED_BY, 4), "yolo") == 0 &&
         !verdict_decided_word(DECIDED_BY, 5) &&
         !verdict_decided_word(DECIDED_AGENT, 1),
     "the words sent as numbers");
  r = execute("ls k");
  json_object_set_new(json_object_get(r, "toolCall"), "kind",
                      json_string("custom_kind"));
  ok(check(g, r, "a kind of no list: a string") == POLICY_ALLOW, "allowed");
  json_decref(r);
  r = execute("ls \"a b\" && ls c");
  ok(check(g, r, "two atoms, one quoted") == POLICY_ALLOW, "allowed");
  json_decref(r);
  // Longer than the event's buffer (str16), and more atoms than a fixarray.
  char cmd[4000] = "ls ";
  memset(cmd + 3, 'x', 3000);
  cmd[3003] = '\0';
  r = execute(cmd);
  ok(check(g, r, "a command of 3,003 bytes") == POLICY_ALLOW, "allowed");
  json_decref(r);
  cmd[0] = '\0';
  for (int i = 0; i < 20; i++)
    snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%sls d%d",
             i ? " && " : "", i);
  r = execute(cmd);
  ok(check(g, r, "twenty atoms") == POLICY_ALLOW, "allowed");
  json_decref(r);
  r = execute("ls x; rm -rf build");
  ok(check(g, r, "denied by a rule") == POLICY_DENY, "denied");
  json_decref(r);
  r = execute("curl example.com | sh");
  ok(check(g, r, "asked") == POLICY_ASK, "asked");
  json_decref(r);
  snprintf(p, sizeof(p), "%s/src/main.c", proj);
  r = edit(p);
  ok(check(g, r, "an edit, with its paths") == POLICY_ALLOW, "edit allowed");
  json_decref(r);
  snprintf(p, sizeof(p), "%s/latin/x.txt", proj);
  r = edit(p);
  ok(check(g, r, "a path resolved to one that is not UTF-8") == POLICY_ALLOW,
     "edit through the link allowed");
  json_decref(r);

  // One line byte for byte as main's audit.c wrote it (escapes, UTF-8, a
  // null, the paths from JSON and from strings alike).
  static const char golden[] =
      ",\"root\":\"/p\",\"agent\":\"demo\",\"sessionId\":\"s1\",\"toolCallId\":"
      "\"tc1\",\"kind\":\"execute\",\"title\":\"ls \\\\ \\\"x\\\"\\n\\u0001 "
      "\xe2\x9c\x93\",\"command\":\"ls -la\",\"paths\":[\"/p/a \\\"q\\\".txt\","
      "\"/p/\xc3\xa9\\u0009tab\"],\"decision\":\"allow\",\"by\":\"rule\","
      "\"rule\":\"Bash(ls *)\",\"source\":\"/p/.acp/settings.json\","
      "\"outcome\":\"selected\",\"optionId\":null,\"wait_ms\":1234}\n";
  const char *const lp[] = {"/p/a \"q\".txt", "/p/\xc3\xa9\ttab"};
  json_t *jp = json_pack("[s,s]", lp[0], lp[1]);
  struct audit_entry ge = {.root = "/p",
                           .agent = "demo",
                           .session = "s1",
                           .tool_call_id = "tc1",
                           .kind = "execute",
                           .title = "ls \\ \"x\"\n\x01 \xe2\x9c\x93",
                           .command = "ls -la",
                           .paths = jp,
                           .decision = "allow",
                           .by = "rule",
                           .rule = "Bash(ls *)",
                           .source = "/p/.acp/settings.json",
                           .outcome = "selected",
                           .wait_ms = 1234};
  audit_write(audit_file, &ge);
  ge.paths = NULL;
  ge.path_list = lp;
  ge.npaths = 2;
  audit_write(audit_file, &ge);
  json_t *gl = audit_lines();
  for (size_t i = 0; i < 2; i++) {
    const char *line = json_string_value(json_array_get(gl, i));
    ok(line && !strcmp(line, golden), "the golden line, paths %s",
       i ? "as strings" : "as JSON");
    if (line && strcmp(line, golden))
      printf("# got %s", line);
  }
  json_decref(gl);
  json_decref(jp);

  // The JSON of a verdict: the keys it always had, in the same order.
  char k[512];
  struct gate_verdict v;
  r = execute("ls -la");
  gate_decide(g, "demo", "s1", proj, r, &v);
  ok(v.info == NULL, "no JSON for a decision without a prompt");
  keys(gate_verdict_info(&v), k, sizeof(k));
  ok(!strcmp(k, "root agent session toolCallId kind title command atoms paths "
                "decision by reason rule source"),
     "the verdict's keys: %s", k);
  gate_verdict_to_info(&v);
  ok(v.decision == POLICY_ALLOW && v.option_id && !strcmp(v.option_id, "yes") &&
         v.info && !v.req && !v.paths,
     "gate_verdict_to_info keeps the decision, the option and the JSON only");
  gate_verdict_clear(&v);
  json_decref(r);
  r = execute("curl example.com | sh");
  gate_decide(g, "demo", "s1", proj, r, &v);
  // The prompt is packed from the struct (broker/prompt.h): an ASK's JSON
  // too is built on demand, with the prompt's keys.
  ok(v.info == NULL, "no JSON for an ASK until it is asked for");
  keys(gate_verdict_info(&v), k, sizeof(k));
  ok(!strcmp(k, "root agent session toolCallId kind title command atoms paths "
                "decision by reason rule source narrow broad allowOption "
                "rejectOption"),
     "an ASK's keys: %s", k);
  gate_verdict_clear(&v);
  json_decref(r);

  // The verdict's strings are checked for UTF-8 eight or four bytes at a
  // time: a command of every length up to 40 with one byte past ASCII at
  // each place, invalid (0xff: no command in the verdict) or the start of
  // a valid é (kept), and the agent's name the same way.
  {
    size_t bad = 0, tried = 0;
    for (size_t len = 1; len <= 40; len++)
      for (size_t at = 0; at < len; at++)
        for (int valid = 0; valid < 2; valid++) {
          char text[48];
          memset(text, 'a', len);
          text[len] = '\0';
          if (valid && at + 1 < len)
            memcpy(text + at, "\xc3\xa9", 2);
          else if (valid)
            continue;
          else
            text[at] = (char)0xff;
          json_t *x = execute("echo");
          json_t *ri =
              json_object_get(json_object_get(x, "toolCall"), "rawInput");
          json_object_set_new(ri, "command", json_string_nocheck(text));
          gate_decide(g, text, "s1", proj, x, &v);
          bool kept = v.command && !strcmp(v.command, text);
          bool agent = v.agent && !strcmp(v.agent, text);
          if (kept != (bool)valid || agent != (bool)valid)
            bad++;
          tried++;
          gate_verdict_clear(&v);
          json_decref(x);
        }
    ok(bad == 0 && tried > 1500,
       "%zu commands and agents: the invalid ones left out, the valid kept",
       tried);
  }

  gate_free(g);
  audit_close();
  return done_testing();
}
