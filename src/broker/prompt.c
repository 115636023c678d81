#include "prompt.h"

#include <string.h>

#include "codec/jsonpack.h"

// The JSON of a string member of tc (a string), or NULL.
static const json_t *tc_str(const json_t *tc, const char *key) {
  const json_t *s = json_object_get(tc, key);
  return json_is_string(s) ? s : NULL;
}

static void pack_rules(msgpack_packer *pk, char *const *v, size_t n) {
  msgpack_pack_array(pk, n);
  for (size_t i = 0; i < n; i++)
    jsonpack_str(pk, v[i]);
}

static void pack_kv(msgpack_packer *pk, const char *key, const char *s) {
  if (s) {
    jsonpack_str(pk, key);
    jsonpack_str(pk, s);
  }
}

void prompt_pack(msgpack_packer *pk, uint64_t token, const char *agent,
                 const char *session, const json_t *tc, const json_t *options,
                 const struct gate_verdict *v) {
  const char *opt[] = {v->reason,  v->rule,         v->source,
                       v->command, v->allow_option, v->reject_option};
  size_t n = 12; // id ... toolCall (8), narrow, broad, atoms, paths
  for (size_t i = 0; i < sizeof(opt) / sizeof(*opt); i++)
    n += opt[i] != NULL;
  msgpack_pack_map(pk, n);
  jsonpack_str(pk, "id");
  msgpack_pack_uint64(pk, token);
  jsonpack_str(pk, "agent");
  jsonpack_str(pk, agent);
  jsonpack_str(pk, "session");
  jsonpack_str(pk, session);
  jsonpack_str(pk, "toolCallId");
  jsonpack_pack(pk, json_object_get(tc, "toolCallId"));
  jsonpack_str(pk, "title");
  jsonpack_pack(pk, tc_str(tc, "title")); // NULL packs nil
  jsonpack_str(pk, "kind");
  jsonpack_pack(pk, tc_str(tc, "kind"));
  jsonpack_str(pk, "options");
  jsonpack_pack(pk, options);
  jsonpack_str(pk, "toolCall");
  jsonpack_pack(pk, tc);
  // From the verdict: why the person is asked, what the policy judged (the
  // analysed command and its atoms, the paths it names) and the options it
  // would answer allow or reject with: Lua shows and uses these, it
  // rebuilds nothing from rawInput.
  pack_kv(pk, "reason", v->reason);
  pack_kv(pk, "rule", v->rule);
  pack_kv(pk, "source", v->source);
  jsonpack_str(pk, "narrow");
  pack_rules(pk, v->narrow, v->nnarrow);
  jsonpack_str(pk, "broad");
  pack_rules(pk, v->broad, v->nbroad);
  pack_kv(pk, "command", v->command);
  jsonpack_str(pk, "atoms");
  size_t na = gate_verdict_natoms(v);
  msgpack_pack_array(pk, na);
  for (size_t i = 0; i < na; i++) {
    struct policy_atom_view a;
    gate_verdict_atom(v, i, &a);
    msgpack_pack_map(pk, a.inner ? 3 : 2);
    jsonpack_str(pk, "kind");
    jsonpack_str(pk, a.kind);
    jsonpack_str(pk, "text");
    jsonpack_str(pk, a.text);
    if (a.inner) {
      jsonpack_str(pk, "inner");
      msgpack_pack_true(pk);
    }
  }
  jsonpack_str(pk, "paths");
  msgpack_pack_array(pk, v->npaths);
  for (size_t i = 0; i < v->npaths; i++)
    jsonpack_str(pk, v->paths[i]);
  pack_kv(pk, "allowOption", v->allow_option);
  pack_kv(pk, "rejectOption", v->reject_option);
}

// obj[key] = s (already UTF-8: the verdict's strings), unless s is NULL.
static void set_valid(json_t *obj, const char *key, const char *s) {
  if (s)
    json_object_set_new_nocheck(obj, key, json_string_nocheck(s));
}

static json_t *rules_json(char *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string_nocheck(v[i]));
  return a;
}

json_t *prompt_kept(const struct gate_verdict *v, bool raw_command) {
  // The keys gate_verdict_info writes, in its order, less those the event
  // alone needed (prompt_info_trim).
  json_t *info = json_object();
  set_valid(info, "root", v->root);
  set_valid(info, "agent", v->agent);
  set_valid(info, "session", v->session);
  const json_t *id = json_object_get(v->tc, "toolCallId");
  if (id)
    json_object_set_nocheck(info, "toolCallId", (json_t *)(uintptr_t)id);
  const json_t *kind = tc_str(v->tc, "kind"), *title = tc_str(v->tc, "title");
  if (kind)
    json_object_set_nocheck(info, "kind", (json_t *)(uintptr_t)kind);
  if (title)
    json_object_set_nocheck(info, "title", (json_t *)(uintptr_t)title);
  set_valid(info, "command", v->command);
  json_t *paths = json_array();
  for (size_t i = 0; i < v->npaths; i++)
    json_array_append_new(paths, json_string_nocheck(v->paths[i]));
  json_object_set_new_nocheck(info, "paths", paths);
  set_valid(info, "rule", v->rule);
  set_valid(info, "source", v->source);
  json_object_set_new_nocheck(info, "narrow",
                              rules_json(v->narrow, v->nnarrow));
  json_object_set_new_nocheck(info, "broad", rules_json(v->broad, v->nbroad));
  json_object_set_new_nocheck(info, "rawCommand", json_boolean(raw_command));
  return info;
}

json_t *prompt_data_json(uint64_t token, const char *agent,
                         const json_t *params, const json_t *info) {
  const json_t *tc = json_object_get(params, "toolCall");
  const json_t *options = json_object_get(params, "options");
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *tcid = json_string_value(json_object_get(tc, "toolCallId"));
  const json_t *title = tc_str(tc, "title"), *kind = tc_str(tc, "kind");
  json_t *data =
      json_pack("{s:I,s:s,s:s,s:s,s:O?,s:O?,s:O,s:O}", "id", (json_int_t)token,
                "agent", agent, "session", sid, "toolCallId", tcid, "title",
                title, "kind", kind, "options", options, "toolCall", tc);
  static const char *const judged[] = {
      "reason",  "rule",  "source", "narrow",      "broad",
      "command", "atoms", "paths",  "allowOption", "rejectOption"};
  for (size_t i = 0; data && i < sizeof(judged) / sizeof(*judged); i++) {
    json_t *val = json_object_get(info, judged[i]);
    if (val)
      json_object_set_nocheck(data, judged[i], val);
  }
  return data;
}

void prompt_info_trim(json_t *info) {
  // While the prompt waits, the entry keeps only what its answer reads (the
  // audit line, the approval, the rules to remember): the rest went to Lua
  // and held about 1.6 KiB per waiting prompt.
  static const char *const shown_only[] = {
      "atoms", "reason", "decision", "by", "allowOption", "rejectOption"};
  for (size_t i = 0; i < sizeof(shown_only) / sizeof(*shown_only); i++)
    json_object_del(info, shown_only[i]);
}
