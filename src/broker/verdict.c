#include "verdict.h"

#include <string.h>

#include "codec/jsonpack.h"
#include "codec/mpbuf.h"

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

// The event is encoded into a buffer (codec/mpbuf.h) and handed to the
// packer in one write.

// Whether s is a non-empty string (what the event carries).
static bool has(const char *s) {
  return s && s[0];
}

// One string field: nil when absent or empty (Lua's compat.str takes both
// as nil).
static void field(struct mpbuf *m, const char *s) {
  static const unsigned char nil = 0xc0;
  if (has(s))
    mpbuf_str(m, s, strlen(s));
  else
    mpbuf_put(m, &nil, 1);
}

// The words sent as integers (verdict.h verdict_decided_word; the same
// lists, in the same order, in lua/acp/decided.lua).
static const char *const decided_kinds[] = {
    "read",  "edit",  "delete", "move",        "search", "execute",
    "think", "fetch", "other",  "switch_mode", NULL};
static const char *const decided_decisions[] = {"allow", "deny", NULL};
static const char *const decided_bys[] = {"rule", "memory", "mode", "yolo",
                                          NULL};

static const char *const *decided_words(enum decided_item item) {
  switch (item) {
  case DECIDED_KIND:
    return decided_kinds;
  case DECIDED_DECISION:
    return decided_decisions;
  case DECIDED_BY:
    return decided_bys;
  default:
    return NULL;
  }
}

const char *verdict_decided_word(enum decided_item item, unsigned n) {
  const char *const *w = decided_words(item);
  for (unsigned i = 1; w && *w; i++, w++)
    if (i == n)
      return *w;
  return NULL;
}

// A string field with a list of words (decided_words): the word's number
// (a positive fixint), else as field().
static void word_field(struct mpbuf *m, const char *s, enum decided_item item) {
  const char *const *w = decided_words(item);
  if (w && has(s)) {
    for (unsigned char i = 1; *w; i++, w++)
      if (strcmp(s, *w) == 0) {
        mpbuf_put(m, &i, 1);
        return;
      }
  }
  field(m, s);
}

// Whether the atoms say no more than the command: one `command` atom,
// not inner, whose text is the command as sent (*first: that atom).
static bool atoms_plain(const struct gate_verdict *v,
                        struct policy_atom_view *first) {
  size_t n = gate_verdict_natoms(v);
  if (n == 0)
    return !v->command;
  gate_verdict_atom(v, 0, first);
  return n == 1 && v->command && !first->inner &&
         strcmp(first->kind, "command") == 0 &&
         strcmp(first->text, v->command) == 0;
}

// An atom as three items of the flat atoms array: kind, text, inner.
static void pack_atom(struct mpbuf *m, const struct policy_atom_view *a) {
  const unsigned char inner = a->inner ? 0xc3 : 0xc2;
  mpbuf_str(m, a->kind, strlen(a->kind));
  mpbuf_str(m, a->text, strlen(a->text));
  mpbuf_put(m, &inner, 1);
}

void verdict_pack_decided(msgpack_packer *pk, const struct gate_verdict *v,
                          bool with_paths, const json_t *snapshots) {
  static const unsigned char yes = 0xc3;
  struct policy_atom_view first;
  bool atoms = !atoms_plain(v, &first);
  struct mpbuf m;
  m.pk = pk;
  m.len = 0;
  // The items after the last one present are left out.
  // No paths: nil (Lua does the same for none and an empty list).
  with_paths = with_paths && v->npaths > 0;
  size_t n = snapshots           ? DECIDED_SNAPSHOTS
             : with_paths        ? DECIDED_PATHS
             : atoms             ? DECIDED_ATOMS
             : has(v->source)    ? DECIDED_SOURCE
             : has(v->rule)      ? DECIDED_RULE
             : has(v->reason)    ? DECIDED_REASON
             : has(v->option_id) ? DECIDED_OPTION_ID
                                 : DECIDED_BY;
  mpbuf_array(&m, n);
  field(&m, v->agent);
  field(&m, v->session);
  field(&m, v->tool_call_id);
  word_field(&m, v->kind, DECIDED_KIND);
  if (has(v->title) && has(v->command) && strcmp(v->title, v->command) == 0)
    mpbuf_put(&m, &yes, 1); // the title is the command
  else
    field(&m, v->title);
  field(&m, v->command);
  word_field(&m, v->decision_name, DECIDED_DECISION);
  word_field(&m, v->by, DECIDED_BY);
  if (n >= DECIDED_OPTION_ID)
    field(&m, v->option_id);
  if (n >= DECIDED_REASON)
    field(&m, v->reason);
  if (n >= DECIDED_RULE)
    field(&m, v->rule);
  if (n >= DECIDED_SOURCE)
    field(&m, v->source);
  if (n >= DECIDED_ATOMS) {
    if (atoms) {
      size_t na = gate_verdict_natoms(v);
      mpbuf_array(&m, 3 * na);
      struct policy_atom_view a;
      for (size_t i = 0; i < na; i++) {
        if (i)
          gate_verdict_atom(v, i, &a);
        pack_atom(&m, i ? &a : &first);
      }
    } else {
      field(&m, NULL);
    }
  }
  if (n >= DECIDED_PATHS) {
    if (with_paths) {
      mpbuf_array(&m, v->npaths);
      for (size_t i = 0; i < v->npaths; i++)
        mpbuf_str(&m, v->paths[i], strlen(v->paths[i]));
    } else {
      field(&m, NULL);
    }
  }
  if (snapshots) {
    mpbuf_flush(&m);
    jsonpack_pack(pk, snapshots);
  }
  mpbuf_flush(&m);
}
