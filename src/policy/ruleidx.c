#include "ruleidx.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/mem.h"

static uint64_t hash_of(char tag, const char *key, size_t n) {
  return ruleidx_hash_more(ruleidx_hash_start(tag), key, n);
}

static bool same(const struct ruleidx_slot *s, uint64_t h, char tag,
                 const char *key, size_t n) {
  return s->hash == h && s->len == n + 1 && s->key[0] == tag &&
         memcmp(s->key + 1, key, n) == 0;
}

struct ruleidx *ruleidx_new(void) {
  struct ruleidx *t = xcalloc(1, sizeof(*t));
  t->cap = 16;
  t->s = xcalloc(t->cap, sizeof(*t->s));
  return t;
}

void ruleidx_free(struct ruleidx *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->cap; i++) {
    free(t->s[i].key);
    for (int l = 0; l < RULEIDX_LISTS; l++)
      ruleidx_vec_free(&t->s[i].rules[l]);
  }
  free(t->s);
  free(t);
}

static struct ruleidx_slot *find(const struct ruleidx *t, uint64_t h, char tag,
                                 const char *key, size_t n) {
  size_t mask = t->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    struct ruleidx_slot *s = &t->s[i];
    if (!s->key || same(s, h, tag, key, n))
      return s;
  }
}

static void grow(struct ruleidx *t) {
  struct ruleidx_slot *old = t->s;
  size_t ocap = t->cap;
  t->cap *= 2;
  t->s = xcalloc(t->cap, sizeof(*t->s));
  for (size_t i = 0; i < ocap; i++) {
    if (!old[i].key)
      continue;
    size_t mask = t->cap - 1, j = (size_t)old[i].hash & mask;
    while (t->s[j].key)
      j = (j + 1) & mask;
    t->s[j] = old[i];
  }
  free(old);
}

void ruleidx_add(struct ruleidx *t, int list, char tag, const char *key,
                 size_t n, uint32_t pos) {
  if (2 * (t->n + 1) > t->cap)
    grow(t);
  uint64_t h = hash_of(tag, key, n);
  struct ruleidx_slot *s = find(t, h, tag, key, n);
  if (!s->key) {
    s->hash = h;
    s->len = n + 1;
    s->key = xmalloc(n + 1);
    s->key[0] = tag;
    memcpy(s->key + 1, key, n);
    t->n++;
  }
  ruleidx_vec_push(&s->rules[list], pos);
}

void ruleidx_aux_max(struct ruleidx *t, char tag, const char *key, size_t n,
                     size_t v) {
  struct ruleidx_slot *s = find(t, hash_of(tag, key, n), tag, key, n);
  if (s->key && s->aux < v)
    s->aux = v;
}

struct ruleidx_list ruleidx_get(const struct ruleidx *t, int list, char tag,
                                const char *key, size_t n) {
  return ruleidx_get_hashed(t, list, hash_of(tag, key, n), tag, key, n);
}

size_t ruleidx_keys(const struct ruleidx *t) {
  return t ? t->n : 0;
}

void ruleidx_vec_push(struct ruleidx_vec *v, uint32_t pos) {
  if (v->n == v->cap) {
    v->cap = v->cap ? 2 * v->cap : 4;
    v->v = xrealloc(v->v, v->cap * sizeof(*v->v));
  }
  v->v[v->n++] = pos;
}

void ruleidx_vec_free(struct ruleidx_vec *v) {
  free(v->v);
  *v = (struct ruleidx_vec){0};
}

struct ruleidx_list ruleidx_vec_list(const struct ruleidx_vec *v) {
  return (struct ruleidx_list){v->v, v->n};
}
