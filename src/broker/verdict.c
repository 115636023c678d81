#include "verdict.h"

#include <string.h>

#include "codec/jsonpack.h"

static const char *outcome(const char *by, const char *option_id) {
  return strcmp(by, "agent") == 0 ? "unasked"
         : option_id              ? "selected"
                                  : "cancelled";
}

void verdict_audit(const struct gate_verdict *v, const char *decision,
                   const char *by, const char *option_id, long long wait_ms,
                   struct audit_entry *a) {
  *a = (struct audit_entry){
      .root = v->root,
      .agent = v->agent,
      .session = v->session,
      .tool_call_id = v->tool_call_id,
      .kind = v->kind,
      .title = v->title,
      .command = v->command,
      .path_list = v->paths,
      .npaths = v->npaths,
      .decision = decision,
      .by = by,
      .rule = v->rule,
      .source = v->source,
      .outcome = outcome(by, option_id),
      .option_id = option_id,
      .wait_ms = wait_ms,
  };
  if (a->rule && !a->rule[0])
    a->rule = a->source = NULL;
}

static const char *str(const json_t *info, const char *key) {
  return json_string_value(json_object_get(info, key));
}

void verdict_audit_info(const json_t *info, const char *decision,
                        const char *by, const char *option_id,
                        long long wait_ms, struct audit_entry *a) {
  *a = (struct audit_entry){
      .root = str(info, "root"),
      .agent = str(info, "agent"),
      .session = str(info, "session"),
      .tool_call_id = str(info, "toolCallId"),
      .kind = str(info, "kind"),
      .title = str(info, "title"),
      .command = str(info, "command"),
      .paths = json_object_get(info, "paths"),
      .decision = decision,
      .by = by,
      .rule = str(info, "rule"),
      .source = str(info, "source"),
      .outcome = outcome(by, option_id),
      .option_id = option_id,
      .wait_ms = wait_ms,
  };
  if (a->rule && !a->rule[0])
    a->rule = a->source = NULL;
}

static void pack_key(msgpack_packer *pk, const char *key, size_t n) {
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, key, n);
}

#define KEY(pk, lit) pack_key(pk, lit, sizeof(lit) - 1)

// Packs key: s when s is a non-empty string (counted in *n when pk is
// NULL).
static void field(msgpack_packer *pk, size_t *n, const char *key, size_t keylen,
                  const char *s) {
  if (!s || !s[0])
    return;
  if (!pk) {
    (*n)++;
    return;
  }
  pack_key(pk, key, keylen);
  jsonpack_str(pk, s);
}

#define FIELD(pk, n, lit, s) field(pk, n, lit, sizeof(lit) - 1, s)

// Whether the atoms say no more than the command: one `command` atom,
// not inner, whose text is the command as sent.
static bool atoms_plain(const struct gate_verdict *v) {
  size_t n = gate_verdict_natoms(v);
  if (n == 0)
    return !v->command;
  if (n != 1 || !v->command)
    return false;
  struct policy_atom_view a;
  gate_verdict_atom(v, 0, &a);
  return !a.inner && strcmp(a.kind, "command") == 0 &&
         strcmp(a.text, v->command) == 0;
}

// The fields of the event, packed (pk) or counted (pk NULL, into *n).
static void fields(msgpack_packer *pk, size_t *n, const struct gate_verdict *v,
                   bool atoms, bool with_paths, const json_t *snapshots) {
  FIELD(pk, n, "agent", v->agent);
  FIELD(pk, n, "session", v->session);
  FIELD(pk, n, "toolCallId", v->tool_call_id);
  FIELD(pk, n, "kind", v->kind);
  FIELD(pk, n, "title", v->title);
  FIELD(pk, n, "command", v->command);
  if (atoms && !pk) {
    (*n)++;
  } else if (atoms) {
    KEY(pk, "atoms");
    size_t na = gate_verdict_natoms(v);
    msgpack_pack_array(pk, na);
    struct policy_atom_view a;
    for (size_t i = 0; i < na; i++) {
      gate_verdict_atom(v, i, &a);
      msgpack_pack_map(pk, a.inner ? 3 : 2);
      KEY(pk, "kind");
      jsonpack_str(pk, a.kind);
      KEY(pk, "text");
      jsonpack_str(pk, a.text);
      if (a.inner) {
        KEY(pk, "inner");
        msgpack_pack_true(pk);
      }
    }
  }
  if (with_paths && !pk) {
    (*n)++;
  } else if (with_paths) {
    KEY(pk, "paths");
    msgpack_pack_array(pk, v->npaths);
    for (size_t i = 0; i < v->npaths; i++)
      jsonpack_str(pk, v->paths[i]);
  }
  FIELD(pk, n, "decision", v->decision_name);
  FIELD(pk, n, "by", v->by);
  FIELD(pk, n, "reason", v->reason);
  FIELD(pk, n, "rule", v->rule);
  FIELD(pk, n, "source", v->source);
  FIELD(pk, n, "optionId", v->option_id);
  if (snapshots && !pk) {
    (*n)++;
  } else if (snapshots) {
    KEY(pk, "snapshots");
    jsonpack_pack(pk, snapshots);
  }
}

void verdict_pack_decided(msgpack_packer *pk, const struct gate_verdict *v,
                          bool with_paths, const json_t *snapshots) {
  bool atoms = !atoms_plain(v);
  size_t n = 0;
  fields(NULL, &n, v, atoms, with_paths, snapshots);
  msgpack_pack_map(pk, n);
  fields(pk, &n, v, atoms, with_paths, snapshots);
}
