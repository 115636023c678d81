#include "pending.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

static bool search(const struct pending *p, uint64_t token, size_t *at);
static void compact(struct pending *p);
static const char *option_str(const json_t *opt, const char *key);
static struct pending_option *options_of(const char *const *ids,
                                         const char *const *kinds, size_t n,
                                         size_t *count);
static struct pending_option *compile_options(const json_t *options, size_t *n);

void pending_init(struct pending *p, size_t max) {
  *p = (struct pending){.max = max, .next_token = 1};
}

void pending_free(struct pending *p) {
  // Tombstones own nothing, so clearing every slot is safe.
  for (size_t i = 0; i < p->len; i++)
    pending_entry_clear(&p->v[i]);
  free(p->v);
  *p = (struct pending){.max = p->max, .next_token = p->next_token};
}

// Adds e (its options compiled already; every field taken).
static uint64_t add(struct pending *p, struct pending_entry *e) {
  if (p->len == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 16;
    p->v = xrealloc(p->v, cap * sizeof(*p->v)); // bounded by 2 * max + 1
    p->cap = cap;
  }
  e->token = p->next_token++;
  p->v[p->len++] = *e;
  p->live++;
  return e->token;
}

uint64_t pending_add(struct pending *p, void *conn, json_t *agent_id,
                     char *session, char *tool_call_id, json_t *options,
                     uint64_t now_ms) {
  struct pending_entry e = {.live = true,
                            .conn = conn,
                            .agent_id = agent_id,
                            .session = session,
                            .tool_call_id = tool_call_id,
                            .added_ms = now_ms};
  if (p->live >= p->max) {
    json_decref(options);
    pending_entry_clear(&e); // we own the arguments on every path
    return 0;
  }
  e.options = compile_options(options, &e.noptions);
  json_decref(options);
  return add(p, &e);
}

uint64_t pending_add_of(struct pending *p, void *conn, json_t *agent_id,
                        char *session, char *tool_call_id,
                        const char *const *ids, const char *const *kinds,
                        size_t n, uint64_t now_ms) {
  struct pending_entry e = {.live = true,
                            .conn = conn,
                            .agent_id = agent_id,
                            .session = session,
                            .tool_call_id = tool_call_id,
                            .added_ms = now_ms};
  if (p->live >= p->max) {
    pending_entry_clear(&e);
    return 0;
  }
  e.options = options_of(ids, kinds, n, &e.noptions);
  return add(p, &e);
}

struct pending_entry *pending_find(struct pending *p, uint64_t token) {
  size_t i;
  return search(p, token, &i) && p->v[i].live ? &p->v[i] : NULL;
}

struct pending_entry *pending_find_agent_id(struct pending *p, const void *conn,
                                            const json_t *id) {
  // Linear, oldest first: rare (only for $/cancel_request) and small.
  for (size_t i = 0; i < p->len; i++) {
    struct pending_entry *e = &p->v[i];
    // json_equal compares type first, so 0 and "0" stay distinct.
    if (e->live && e->conn == conn && id && json_equal(e->agent_id, id))
      return e;
  }
  return NULL;
}

bool pending_take(struct pending *p, uint64_t token,
                  struct pending_entry *out) {
  size_t i;
  if (!search(p, token, &i) || !p->v[i].live)
    return false;
  *out = p->v[i];
  // The slot keeps its token so that the binary search stays valid.
  p->v[i] = (struct pending_entry){.token = token, .live = false};
  p->live--;
  if ((p->len - p->live) * 2 > p->len)
    compact(p);
  return true;
}

void pending_entry_clear(struct pending_entry *e) {
  json_decref(e->agent_id);
  json_decref(e->info);
  free(e->kept);
  free(e->options);
  free(e->session);
  free(e->tool_call_id);
  e->agent_id = e->info = NULL;
  e->kept = NULL;
  e->options = NULL;
  e->noptions = 0;
  e->session = e->tool_call_id = NULL;
  e->live = false;
}

const struct pending_option *pending_offered(const struct pending_entry *e,
                                             const char *option_id) {
  if (!option_id)
    return NULL;
  for (size_t i = 0; i < e->noptions; i++)
    if (strcmp(e->options[i].id, option_id) == 0)
      return &e->options[i];
  return NULL;
}

const struct pending_option *
pending_first_of_kind(const struct pending_entry *e, const char *kind) {
  if (!kind)
    return NULL;
  for (size_t i = 0; i < e->noptions; i++)
    if (strcmp(e->options[i].kind, kind) == 0)
      return &e->options[i];
  return NULL;
}

size_t pending_count(const struct pending *p) {
  return p->live;
}

// Finds the slot holding token (live or tombstone); tokens are increasing.
static bool search(const struct pending *p, uint64_t token, size_t *at) {
  size_t lo = 0, hi = p->len;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->v[mid].token < token)
      lo = mid + 1;
    else
      hi = mid;
  }
  *at = lo;
  return lo < p->len && p->v[lo].token == token;
}

// Drops tombstones, keeping arrival order. Run only when they are more than
// half of the slots, so its cost is amortised over the takes that made them.
static void compact(struct pending *p) {
  size_t n = 0;
  for (size_t i = 0; i < p->len; i++)
    if (p->v[i].live)
      p->v[n++] = p->v[i];
  p->len = n;
}

static const char *option_str(const json_t *opt, const char *key) {
  return json_string_value(json_object_get(opt, key));
}

// The options given as n optionIds and kinds (a NULL one is left out), as
// one allocation: the array of the entries kept, then their strings. NULL
// when none is kept. The strings are no longer than the request's line,
// which the connection bounds.
static struct pending_option *options_of(const char *const *ids,
                                         const char *const *kinds, size_t n,
                                         size_t *count) {
  size_t k = 0, bytes = 0;
  *count = 0;
  for (size_t i = 0; i < n; i++)
    if (ids[i] && kinds[i]) {
      k++;
      bytes += strlen(ids[i]) + 1 + strlen(kinds[i]) + 1;
    }
  if (k == 0)
    return NULL;
  struct pending_option *v = xmalloc(k * sizeof(*v) + bytes);
  char *at = (char *)(v + k);
  k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ids[i] || !kinds[i])
      continue;
    const char *s[2] = {ids[i], kinds[i]};
    for (int j = 0; j < 2; j++) {
      size_t len = strlen(s[j]) + 1;
      memcpy(at, s[j], len);
      s[j] = at;
      at += len;
    }
    v[k++] = (struct pending_option){.id = s[0], .kind = s[1]};
  }
  *count = k;
  return v;
}

// An option is {"optionId": string, "name": string, "kind": string, ...};
// anything else the agent sent is ignored rather than trusted: its id and
// kind are NULL in ids and kinds. One lookup of each key per option.
static struct pending_option *compile_options(const json_t *options,
                                              size_t *n) {
  enum { STACK = 16 };
  size_t len = json_array_size(options);
  const char *stack[2 * STACK] = {0};
  const char **ids =
      len <= STACK ? stack : xmalloc(2 * len * sizeof(const char *));
  const char **kinds = ids + (len <= STACK ? STACK : len);
  for (size_t i = 0; i < len; i++) {
    const json_t *opt = json_array_get(options, i);
    bool ok = option_str(opt, "name") != NULL; // NULL for a non-object
    ids[i] = ok ? option_str(opt, "optionId") : NULL;
    kinds[i] = ok ? option_str(opt, "kind") : NULL;
  }
  struct pending_option *v = options_of(ids, kinds, len, n);
  if (ids != stack)
    free(ids);
  return v;
}
