#pragma once
// A table of rule positions by key, for the compiled policy (policy.c): a
// key (a tag byte and a string: a command name, a path prefix, a host, a
// tool name, a kind) names the rules that can only match requests showing
// that key. Each key holds one list of positions per rule list (allow,
// ask, deny: RULEIDX_LISTS), so that one lookup serves the three.
// Positions are added in ascending order and come back so.
//
// Open addressing, FNV-1a; memory is linear in the number of positions
// added. Pure: no I/O, no globals.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hash.h"

// Rule positions, ascending.
struct ruleidx_list {
  const uint32_t *v;
  size_t n;
};

#define RULEIDX_LISTS 3

// A growing list of positions.
struct ruleidx_vec {
  uint32_t *v;
  size_t n, cap;
};

// The table (its fields are here so that lookups, in the decision's hot
// path, are inlined; only ruleidx.c writes them).
struct ruleidx_slot {
  uint64_t hash;
  char *key; // tag byte, then the key; NULL: an empty slot
  size_t len;
  struct ruleidx_vec rules[RULEIDX_LISTS];
  size_t aux; // the caller's (ruleidx_aux_max); 0 at first
};

struct ruleidx {
  struct ruleidx_slot *s;
  size_t cap, n; // cap: a power of two, n <= cap / 2
};

// A new empty table.
struct ruleidx *ruleidx_new(void);
// Frees it (NULL is fine).
void ruleidx_free(struct ruleidx *t);
// Appends pos to list `list` (< RULEIDX_LISTS) of (tag, key[0..n)); pos
// must not be lower than what was added there before.
void ruleidx_add(struct ruleidx *t, int list, char tag, const char *key,
                 size_t n, uint32_t pos);
// Raises the aux value of (tag, key[0..n)), added before, to v (when below).
void ruleidx_aux_max(struct ruleidx *t, char tag, const char *key, size_t n,
                     size_t v);
// List `list` of (tag, key[0..n)), empty when there is none.
struct ruleidx_list ruleidx_get(const struct ruleidx *t, int list, char tag,
                                const char *key, size_t n);
// The hash of (tag, key) built a piece at a time, for keys that extend
// each other (the prefixes of a path): start with the tag, add each piece,
// then look up with the whole key.
static inline uint64_t ruleidx_hash_start(char tag) {
  return fnv64_byte(FNV64_OFFSET, (unsigned char)tag);
}
static inline uint64_t ruleidx_hash_more(uint64_t h, const char *s, size_t n) {
  return fnv64_more(h, s, n);
}
static inline uint64_t ruleidx_hash_byte(uint64_t h, char c) {
  return fnv64_byte(h, (unsigned char)c);
}
// The slot of (tag, key[0..n)) whose hash is h, or NULL.
static inline const struct ruleidx_slot *
ruleidx_find_hashed(const struct ruleidx *t, uint64_t h, char tag,
                    const char *key, size_t n) {
  if (!t || !t->n)
    return NULL;
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    const struct ruleidx_slot *s = &t->s[i];
    if (!s->key)
      return NULL;
    if (s->hash == h && s->len == n + 1 && s->key[0] == tag &&
        memcmp(s->key + 1, key, n) == 0)
      return s;
  }
}

// List `list` of a slot (NULL: empty).
static inline struct ruleidx_list
ruleidx_slot_list(const struct ruleidx_slot *s, int list) {
  return s ? (struct ruleidx_list){s->rules[list].v, s->rules[list].n}
           : (struct ruleidx_list){NULL, 0};
}

static inline struct ruleidx_list ruleidx_get_hashed(const struct ruleidx *t,
                                                     int list, uint64_t h,
                                                     char tag, const char *key,
                                                     size_t n) {
  return ruleidx_slot_list(ruleidx_find_hashed(t, h, tag, key, n), list);
}

// How many keys the table holds.
size_t ruleidx_keys(const struct ruleidx *t);

// Appends pos to v.
void ruleidx_vec_push(struct ruleidx_vec *v, uint32_t pos);
// Frees v's storage.
void ruleidx_vec_free(struct ruleidx_vec *v);
// v as a list.
struct ruleidx_list ruleidx_vec_list(const struct ruleidx_vec *v);
