#include "unasked.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/mem.h"

enum {
  F_REQUESTED = 1, // a permission request named it
  F_RUNNING = 2,   // it reached in_progress
  F_DONE = 4,      // completed, failed or reported: nothing more to see
};

// A toolCallId this long or shorter (most are) is kept in the call itself:
// no malloc and free per request.
#define CALL_ID_INLINE 40
struct call {
  char *id; // toolCallId when it is longer than inl holds, else NULL
  char inl[CALL_ID_INLINE]; // else the toolCallId (call_id)
  bool used;                // false for a free slot
  uint32_t hash;            // of the toolCallId
  unsigned flags;
  json_t *tc;    // the merged toolCall, NULL once requested or done
  size_t weight; // what tc's fields count against the session's bytes
};

// One session: its tool calls in a ring, oldest at head once full.
struct track {
  char *agent, *sid;
  // toolCallId -> call: slots[] holds the index + 1 of the call whose id
  // hashes there (0: empty), linear probing, at most half full.
  uint32_t *slots;
  size_t mask;
  struct call *v;
  size_t n, cap, head;
  size_t bytes;
  bool loading;              // session/load replays its history
  struct track *prev, *next; // most recently used first
};

struct unasked {
  size_t max_sessions, max_calls, max_bytes;
  struct track *first, *last;
  size_t nsessions;
};

// The toolCall fields kept (a field with a value replaces the old one);
// the first four count against the session's bytes.
static const char *const fields[] = {
    "title", "rawInput", "content", "locations", "kind", "status", "name"};
#define HEAVY 4

// The kinds the policy governs: what acts on files, runs or fetches.
static const char *const watched[] = {"edit", "delete", "move", "execute",
                                      "fetch"};

static json_t *unconst(const json_t *j) {
  return (json_t *)(uintptr_t)j;
}

static const char *str(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

static bool is_watched(const char *kind) {
  for (size_t i = 0; kind && i < sizeof(watched) / sizeof(*watched); i++)
    if (strcmp(kind, watched[i]) == 0)
      return true;
  return false;
}

// Roughly the bytes a value holds: its strings plus a little per node.
static size_t weight(const json_t *j) {
  size_t w = 16;
  if (json_is_string(j))
    return w + json_string_length(j);
  if (json_is_object(j)) {
    const char *k;
    json_t *v;
    json_object_foreach(unconst(j), k, v) w += strlen(k) + weight(v);
  } else if (json_is_array(j)) {
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) w += weight(v);
  }
  return w;
}

struct unasked *unasked_new(size_t max_sessions, size_t max_calls,
                            size_t max_bytes) {
  struct unasked *u = xcalloc(1, sizeof(*u));
  u->max_sessions = max_sessions ? max_sessions : UNASKED_MAX_SESSIONS;
  u->max_calls = max_calls ? max_calls : UNASKED_MAX_CALLS;
  u->max_bytes = max_bytes ? max_bytes : UNASKED_MAX_BYTES;
  return u;
}

static const char *call_id(const struct call *c) {
  return c->id ? c->id : c->inl;
}

static void call_clear(struct call *c) {
  free(c->id);
  json_decref(c->tc);
  *c = (struct call){0};
}

static void unlink_track(struct unasked *u, struct track *t) {
  if (t->prev)
    t->prev->next = t->next;
  else
    u->first = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    u->last = t->prev;
  t->prev = t->next = NULL;
}

static void push_front(struct unasked *u, struct track *t) {
  t->next = u->first;
  if (u->first)
    u->first->prev = t;
  u->first = t;
  if (!u->last)
    u->last = t;
}

static void track_free(struct unasked *u, struct track *t) {
  unlink_track(u, t);
  u->nsessions--;
  for (size_t i = 0; i < t->n; i++)
    call_clear(&t->v[i]);
  free(t->v);
  free(t->slots);
  free(t->agent);
  free(t->sid);
  free(t);
}

void unasked_free(struct unasked *u) {
  if (!u)
    return;
  while (u->first)
    track_free(u, u->first);
  free(u);
}

int unasked_is_tool_update(const json_t *update) {
  const char *k = str(update, "sessionUpdate");
  // "tool_call" and "tool_call_update"; one compare for everything else.
  return k && k[0] == 't' && strncmp(k, "tool_call", 9) == 0 &&
         (k[9] == '\0' || strcmp(k + 9, "_update") == 0);
}

// The session's tracker, made the most recently used; created (the least
// recently used one forgotten when there are too many) when create is set.
static struct track *find_track(struct unasked *u, const char *agent,
                                const char *sid, bool create) {
  struct track *t = u->first;
  while (t && (strcmp(t->sid, sid) != 0 || strcmp(t->agent, agent) != 0))
    t = t->next;
  if (t) {
    if (t != u->first) {
      unlink_track(u, t);
      push_front(u, t);
    }
    return t;
  }
  if (!create)
    return NULL;
  if (u->nsessions >= u->max_sessions)
    track_free(u, u->last);
  t = xcalloc(1, sizeof(*t));
  t->agent = xstrdup(agent);
  t->sid = xstrdup(sid);
  push_front(u, t);
  u->nsessions++;
  return t;
}

static void set_weight(struct track *t, struct call *c, size_t w) {
  t->bytes = t->bytes - c->weight + w;
  c->weight = w;
}

// Forgets what a call carries but its id, kind, status and name.
static void drop_payload(struct track *t, struct call *c) {
  for (size_t i = 0; c->tc && i < HEAVY; i++)
    json_object_del(c->tc, fields[i]);
  set_weight(t, c, 0);
}

static void finish(struct track *t, struct call *c) {
  c->flags |= F_DONE;
  json_decref(c->tc);
  c->tc = NULL;
  set_weight(t, c, 0);
}

// The call's slot, a new one (the oldest call forgotten when full) when
// create is set.
static uint32_t id_hash(const char *id) {
  uint64_t h = fnv64_more(FNV64_OFFSET, id, strlen(id));
  return (uint32_t)(h ^ (h >> 32));
}

// Where id (hash h) is in t's index, or the empty slot where it would go.
static size_t slot_of(const struct track *t, const char *id, uint32_t h) {
  size_t p = h & t->mask;
  for (uint32_t k; (k = t->slots[p]) != 0; p = (p + 1) & t->mask) {
    const struct call *c = &t->v[k - 1];
    if (c->hash == h && strcmp(call_id(c), id) == 0)
      break;
  }
  return p;
}

// The index made again for room for cap calls (the t->n there are).
static void index_grow(struct track *t, size_t cap) {
  size_t n = 16;
  while (n < 2 * cap)
    n *= 2;
  free(t->slots);
  t->slots = xcalloc(n, sizeof(*t->slots));
  t->mask = n - 1;
  for (size_t i = 0; i < t->n; i++)
    t->slots[slot_of(t, call_id(&t->v[i]), t->v[i].hash)] = (uint32_t)(i + 1);
}

// Empties slot p, moving back the entries after it that probing would no
// longer reach.
static void index_del(struct track *t, size_t p) {
  for (size_t q = (p + 1) & t->mask; t->slots[q]; q = (q + 1) & t->mask) {
    size_t home = t->v[t->slots[q] - 1].hash & t->mask;
    // It stays when its home is cyclically within (p, q].
    bool stays = p < q ? home > p && home <= q : home > p || home <= q;
    if (!stays) {
      t->slots[p] = t->slots[q];
      p = q;
    }
  }
  t->slots[p] = 0;
}

static struct call *find_call(struct unasked *u, struct track *t,
                              const char *id, bool create) {
  uint32_t h = id_hash(id);
  size_t p = t->slots ? slot_of(t, id, h) : 0;
  if (t->slots && t->slots[p])
    return &t->v[t->slots[p] - 1];
  if (!create)
    return NULL;
  size_t i;
  if (t->n < u->max_calls) {
    if (t->n == t->cap) {
      t->cap = t->cap ? t->cap * 2 : 16;
      if (t->cap > u->max_calls)
        t->cap = u->max_calls;
      t->v = xrealloc(t->v, t->cap * sizeof(*t->v));
      index_grow(t, t->cap);
      p = slot_of(t, id, h);
    }
    i = t->n++;
  } else {
    i = t->head;
    t->head = (t->head + 1) % t->n;
    index_del(t, slot_of(t, call_id(&t->v[i]), t->v[i].hash));
    set_weight(t, &t->v[i], 0);
    call_clear(&t->v[i]);
    p = slot_of(t, id, h); // the entries may have moved
  }
  struct call *c = &t->v[i];
  size_t n = strlen(id);
  c->id = n < sizeof(c->inl) ? NULL : xstrdup(id);
  if (!c->id)
    memcpy(c->inl, id, n + 1);
  c->used = true;
  c->hash = h;
  c->flags = 0;
  c->tc = NULL;
  c->weight = 0;
  t->slots[p] = (uint32_t)(i + 1);
  return c;
}

// Keeps the session within its bytes: the oldest calls lose their payload
// first (a call without it is judged on less, which asks more, never less).
static void budget(struct unasked *u, struct track *t) {
  for (size_t k = 0; k < t->n && t->bytes > u->max_bytes; k++) {
    struct call *c = &t->v[(t->head + k) % t->n];
    if (c->weight)
      drop_payload(t, c);
  }
}

static void merge(struct track *t, struct call *c, const json_t *update) {
  if (!c->tc) {
    c->tc = json_object();
    json_object_set_new_nocheck(c->tc, "toolCallId", json_string(call_id(c)));
  }
  size_t w = c->weight;
  for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++) {
    json_t *v = json_object_get(update, fields[i]);
    if (!v || json_is_null(v))
      continue;
    if (i < HEAVY) {
      json_t *old = json_object_get(c->tc, fields[i]);
      w += weight(v) - (old ? weight(old) : 0);
    }
    json_object_set_nocheck(c->tc, fields[i], v);
  }
  // The Claude adapter names its tool only here; the policy reads it.
  const char *name =
      str(json_object_get(json_object_get(update, "_meta"), "claudeCode"),
          "toolName");
  if (name && !json_object_get(c->tc, "name"))
    json_object_set_new_nocheck(c->tc, "name", json_string(name));
  set_weight(t, c, w);
}

// {sessionId, toolCall} for a call that acted unasked; it is done.
static json_t *report(struct track *t, struct call *c) {
  json_t *r = json_object();
  json_object_set_new_nocheck(r, "sessionId", json_string(t->sid));
  json_object_set_nocheck(r, "toolCall", c->tc);
  finish(t, c);
  return r;
}

json_t *unasked_update(struct unasked *u, const char *agent, const char *sid,
                       const json_t *update) {
  const char *id = str(update, "toolCallId");
  if (!id || !agent || !sid)
    return NULL;
  struct track *t = find_track(u, agent, sid, true);
  struct call *c = find_call(u, t, id, true);
  if (c->flags & (F_REQUESTED | F_DONE))
    return NULL;
  if (t->loading) {
    finish(t, c); // history: done before this client saw it
    return NULL;
  }
  merge(t, c, update);
  const char *kind = str(c->tc, "kind");
  bool governed = is_watched(kind);
  if (kind && !governed)
    drop_payload(t, c); // a read's content is never needed
  const char *status = str(update, "status");
  if (status && strcmp(status, "in_progress") == 0)
    c->flags |= F_RUNNING;
  bool completed = status && strcmp(status, "completed") == 0;
  bool failed = status && strcmp(status, "failed") == 0;
  json_t *out = NULL;
  if (governed && (completed || (failed && (c->flags & F_RUNNING))))
    out = report(t, c);
  else if (completed || failed)
    finish(t, c);
  budget(u, t);
  return out;
}

void unasked_loading(struct unasked *u, const char *agent, const char *sid,
                     int loading) {
  struct track *t =
      agent && sid ? find_track(u, agent, sid, loading != 0) : NULL;
  if (t)
    t->loading = loading != 0;
}

void unasked_requested(struct unasked *u, const char *agent, const char *sid,
                       const char *tool_call_id) {
  if (!agent || !sid || !tool_call_id)
    return;
  struct track *t = find_track(u, agent, sid, true);
  struct call *c = find_call(u, t, tool_call_id, true);
  c->flags |= F_REQUESTED;
  json_decref(c->tc);
  c->tc = NULL;
  set_weight(t, c, 0);
}

// Reports the calls of t still running unasked (into *out, made on need).
static void running(struct track *t, json_t **out) {
  for (size_t k = 0; k < t->n; k++) {
    struct call *c = &t->v[(t->head + k) % t->n];
    if (!c->used || (c->flags & (F_REQUESTED | F_DONE)) ||
        !(c->flags & F_RUNNING) || !is_watched(str(c->tc, "kind")))
      continue;
    if (!*out)
      *out = json_array();
    json_array_append_new(*out, report(t, c));
  }
}

json_t *unasked_turn_end(struct unasked *u, const char *agent,
                         const char *sid) {
  struct track *t = agent && sid ? find_track(u, agent, sid, false) : NULL;
  json_t *out = NULL;
  if (t)
    running(t, &out);
  return out;
}

json_t *unasked_forget(struct unasked *u, const char *agent) {
  json_t *out = NULL;
  for (struct track *t = u->first, *next; t; t = next) {
    next = t->next;
    if (agent && strcmp(t->agent, agent) != 0)
      continue;
    running(t, &out);
    track_free(u, t);
  }
  return out;
}

size_t unasked_count(const struct unasked *u, size_t *bytes) {
  size_t n = 0, b = 0;
  for (const struct track *t = u->first; t; t = t->next) {
    n += t->n;
    b += t->bytes;
  }
  if (bytes)
    *bytes = b;
  return n;
}
