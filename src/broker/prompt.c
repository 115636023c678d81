#include "prompt.h"

#include <stdint.h>
#include <string.h>

#include "base/mem.h"
#include "codec/jsonpack.h"
#include "codec/mpbuf.h"

// The JSON of a string member of tc (a string), or NULL.
static const json_t *tc_str(const json_t *tc, const char *key) {
  const json_t *s = json_object_get(tc, key);
  return json_is_string(s) ? s : NULL;
}

// The data is encoded into a buffer (codec/mpbuf.h) and handed to the
// packer in a few writes, as verdict.c does for the `decided` event; the
// agent's toolCall and options go through jsonpack, which buffers too.
static void mp_str(struct mpbuf *m, const char *s) {
  mpbuf_str(m, s, strlen(s));
}

// A JSON string, or nil for NULL.
static void mp_json_str(struct mpbuf *m, const json_t *s) {
  static const unsigned char nil = 0xc0;
  if (s)
    mpbuf_str(m, json_string_value(s), json_string_length(s));
  else
    mpbuf_put(m, &nil, 1);
}

// A key (a literal) and its string value, when there is one.
#define MP_KV(m, key, s)                                                       \
  do {                                                                         \
    if (s) {                                                                   \
      mpbuf_str(m, key, sizeof(key) - 1);                                      \
      mp_str(m, s);                                                            \
    }                                                                          \
  } while (0)
#define MP_KEY(m, key) mpbuf_str(m, key, sizeof(key) - 1)

// An unsigned integer, as small as it fits (positive fixint, uint8 ...).
static void mp_uint(struct mpbuf *m, uint64_t u) {
  unsigned char h[9];
  size_t k;
  if (u < 128) {
    h[0] = (unsigned char)u;
    k = 1;
  } else {
    unsigned char tag = u <= 0xff          ? 0xcc
                        : u <= 0xffff      ? 0xcd
                        : u <= 0xffffffffu ? 0xce
                                           : 0xcf;
    size_t bytes = (size_t)1 << (tag - 0xcc);
    h[0] = tag;
    for (size_t i = 0; i < bytes; i++)
      h[1 + i] = (unsigned char)(u >> (8 * (bytes - 1 - i)));
    k = 1 + bytes;
  }
  mpbuf_put(m, h, k);
}

static void mp_rules(struct mpbuf *m, char *const *v, size_t n) {
  mpbuf_head(m, 0x90, 15, 0xdc, 0xdd, n);
  for (size_t i = 0; i < n; i++)
    mp_str(m, v[i]);
}

struct member {
  const char *key;
  size_t klen;
  const struct reqview_str *val;
};

// The options as the flat view read them: each {optionId, name, kind} with
// its members in the order of the line (as the tree keeps them), their
// strings as they are there (no escapes: the view reads only those).
static void mp_view_options(struct mpbuf *m, const struct reqview *rv) {
  mpbuf_head(m, 0x90, 15, 0xdc, 0xdd, rv->noptions);
  for (size_t i = 0; i < rv->noptions; i++) {
    const struct reqview_option *o = &rv->options[i];
    struct member mem[3] = {
        {"optionId", 8, &o->id}, {"name", 4, &o->name}, {"kind", 4, &o->kind}};
    // Three members: sorted by where their values are in the line.
    for (int a = 1; a < 3; a++)
      for (int b = a; b > 0 && mem[b].val->s < mem[b - 1].val->s; b--) {
        struct member t = mem[b];
        mem[b] = mem[b - 1];
        mem[b - 1] = t;
      }
    mpbuf_head(m, 0x80, 15, 0xde, 0xdf, 3);
    for (int j = 0; j < 3; j++) {
      mpbuf_str(m, mem[j].key, mem[j].klen);
      mpbuf_str(m, mem[j].val->s, mem[j].val->n);
    }
  }
}

// The data; the options from the tree (options) or the flat view (rv).
static void pack(msgpack_packer *pk, uint64_t token, const char *agent,
                 const char *session, const json_t *tc, const json_t *options,
                 const struct reqview *rv, const struct gate_verdict *v) {
  static const unsigned char yes = 0xc3;
  const char *opt[] = {v->reason,  v->rule,         v->source,
                       v->command, v->allow_option, v->reject_option};
  size_t n = 12; // id ... toolCall (8), narrow, broad, atoms, paths
  for (size_t i = 0; i < sizeof(opt) / sizeof(*opt); i++)
    n += opt[i] != NULL;
  struct mpbuf m;
  m.pk = pk;
  m.len = 0;
  mpbuf_head(&m, 0x80, 15, 0xde, 0xdf, n);
  MP_KEY(&m, "id");
  mp_uint(&m, token);
  MP_KEY(&m, "agent");
  mp_str(&m, agent);
  MP_KEY(&m, "session");
  mp_str(&m, session);
  MP_KEY(&m, "toolCallId");
  mp_json_str(&m, json_object_get(tc, "toolCallId"));
  MP_KEY(&m, "title");
  mp_json_str(&m, tc_str(tc, "title"));
  MP_KEY(&m, "kind");
  mp_json_str(&m, tc_str(tc, "kind"));
  MP_KEY(&m, "options");
  if (rv) {
    mp_view_options(&m, rv);
  } else {
    mpbuf_flush(&m);
    jsonpack_pack(pk, options);
  }
  MP_KEY(&m, "toolCall");
  mpbuf_flush(&m);
  jsonpack_pack(pk, tc);
  // From the verdict: why the person is asked, what the policy judged (the
  // analysed command and its atoms, the paths it names) and the options it
  // would answer allow or reject with: Lua shows and uses these, it
  // rebuilds nothing from rawInput.
  MP_KV(&m, "reason", v->reason);
  MP_KV(&m, "rule", v->rule);
  MP_KV(&m, "source", v->source);
  MP_KEY(&m, "narrow");
  mp_rules(&m, v->narrow, v->nnarrow);
  MP_KEY(&m, "broad");
  mp_rules(&m, v->broad, v->nbroad);
  MP_KV(&m, "command", v->command);
  MP_KEY(&m, "atoms");
  size_t na = gate_verdict_natoms(v);
  mpbuf_head(&m, 0x90, 15, 0xdc, 0xdd, na);
  for (size_t i = 0; i < na; i++) {
    struct policy_atom_view a;
    gate_verdict_atom(v, i, &a);
    mpbuf_head(&m, 0x80, 15, 0xde, 0xdf, a.inner ? 3 : 2);
    MP_KEY(&m, "kind");
    mp_str(&m, a.kind);
    MP_KEY(&m, "text");
    mp_str(&m, a.text);
    if (a.inner) {
      MP_KEY(&m, "inner");
      mpbuf_put(&m, &yes, 1);
    }
  }
  MP_KEY(&m, "paths");
  mp_rules(&m, (char *const *)(uintptr_t)v->paths, v->npaths);
  MP_KV(&m, "allowOption", v->allow_option);
  MP_KV(&m, "rejectOption", v->reject_option);
  mpbuf_flush(&m);
}

void prompt_pack(msgpack_packer *pk, uint64_t token, const char *agent,
                 const char *session, const json_t *tc, const json_t *options,
                 const struct gate_verdict *v) {
  pack(pk, token, agent, session, tc, options, NULL, v);
}

void prompt_pack_view(msgpack_packer *pk, uint64_t token, const char *agent,
                      const struct reqview *rv, const struct gate_verdict *v) {
  pack(pk, token, agent, rv->sid_z, rv->tc, NULL, rv, v);
}

void prompt_pack_resolved(msgpack_packer *pk, uint64_t token, const char *agent,
                          const char *session, const char *tool_call_id,
                          const char *option_id, const char *by) {
  static const unsigned char nil = 0xc0;
  struct mpbuf m;
  m.pk = pk;
  m.len = 0;
  mpbuf_head(&m, 0x80, 15, 0xde, 0xdf, 7);
  MP_KEY(&m, "id");
  mp_uint(&m, token);
  MP_KEY(&m, "agent");
  mp_str(&m, agent);
  MP_KEY(&m, "session");
  mp_str(&m, session);
  MP_KEY(&m, "toolCallId");
  mp_str(&m, tool_call_id);
  MP_KEY(&m, "outcome");
  mp_str(&m, option_id ? "selected" : "cancelled");
  MP_KEY(&m, "optionId");
  if (option_id)
    mp_str(&m, option_id);
  else
    mpbuf_put(&m, &nil, 1);
  MP_KEY(&m, "by");
  mp_str(&m, by);
  mpbuf_flush(&m);
}

const char **prompt_remember_rules(const struct prompt_kept *k,
                                   const json_t *info, bool broad, size_t *n) {
  const json_t *a =
      k ? NULL : json_object_get(info, broad ? "broad" : "narrow");
  *n = k ? (broad ? k->nbroad : k->nnarrow) : json_array_size(a);
  if (!*n)
    return NULL;
  const char **v = xcalloc(*n, sizeof(*v));
  for (size_t i = 0; i < *n; i++)
    v[i] = k ? (broad ? k->broad : k->narrow)[i]
             : json_string_value(json_array_get(a, i));
  return v;
}

// Copies s (NULL stays NULL) to *at.
static const char *keep_str(char **at, const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *d = memcpy(*at, s, n);
  *at += n;
  return d;
}

struct prompt_kept *prompt_keep(const struct gate_verdict *v,
                                bool raw_command) {
  const char *s[] = {v->root,  v->agent,   v->session, v->tool_call_id, v->kind,
                     v->title, v->command, v->rule,    v->source};
  size_t bytes = 0;
  for (size_t i = 0; i < sizeof(s) / sizeof(*s); i++)
    bytes += s[i] ? strlen(s[i]) + 1 : 0;
  for (size_t i = 0; i < v->npaths; i++)
    bytes += strlen(v->paths[i]) + 1;
  for (size_t i = 0; i < v->nnarrow; i++)
    bytes += strlen(v->narrow[i]) + 1;
  for (size_t i = 0; i < v->nbroad; i++)
    bytes += strlen(v->broad[i]) + 1;
  size_t nptr = v->npaths + v->nnarrow + v->nbroad;
  struct prompt_kept *k = xmalloc(sizeof(*k) + nptr * sizeof(char *) + bytes);
  k->paths = (const char **)(k + 1);
  k->narrow = k->paths + v->npaths;
  k->broad = k->narrow + v->nnarrow;
  char *at = (char *)(k->paths + nptr);
  k->root = keep_str(&at, v->root);
  k->agent = keep_str(&at, v->agent);
  k->session = keep_str(&at, v->session);
  k->tool_call_id = keep_str(&at, v->tool_call_id);
  k->kind = keep_str(&at, v->kind);
  k->title = keep_str(&at, v->title);
  k->command = keep_str(&at, v->command);
  k->rule = keep_str(&at, v->rule);
  k->source = keep_str(&at, v->source);
  for (size_t i = 0; i < v->npaths; i++)
    k->paths[i] = keep_str(&at, v->paths[i]);
  for (size_t i = 0; i < v->nnarrow; i++)
    k->narrow[i] = keep_str(&at, v->narrow[i]);
  for (size_t i = 0; i < v->nbroad; i++)
    k->broad[i] = keep_str(&at, v->broad[i]);
  k->npaths = v->npaths;
  k->nnarrow = v->nnarrow;
  k->nbroad = v->nbroad;
  k->raw_command = raw_command;
  return k;
}

void prompt_kept_audit(const struct prompt_kept *k, const char *decision,
                       const char *by, const char *option_id, long long wait_ms,
                       struct audit_entry *a) {
  *a = (struct audit_entry){
      .root = k->root,
      .agent = k->agent,
      .session = k->session,
      .tool_call_id = k->tool_call_id,
      .kind = k->kind,
      .title = k->title,
      .command = k->command,
      .path_list = k->paths,
      .npaths = k->npaths,
      .decision = decision,
      .by = by,
      .rule = k->rule,
      .source = k->source,
      .outcome = strcmp(by, "agent") == 0 ? "unasked"
                 : option_id              ? "selected"
                                          : "cancelled",
      .option_id = option_id,
      .wait_ms = wait_ms,
  };
  if (a->rule && !a->rule[0])
    a->rule = a->source = NULL;
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
