// base/mem: the bounded cache of small blocks jansson allocates through
// (reuse by size class, the bound, blocks from plain malloc, release), and
// jansson trees built and freed through it.

#include "base/mem.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codec/jsonfast.h"

static void test_reuse(void) {
  // A freed block comes back for the next request of its size, for every
  // size the cache keeps.
  int missed = 0, first = 0;
  for (size_t n = 0; n <= MEM_CACHE_MAX_BLOCK; n++) {
    unsigned char *p = mem_cache_malloc(n);
    memset(p, 0xab, n); // the whole size is writable (ASan checks)
    mem_cache_free(p);
    unsigned char *q = mem_cache_malloc(n);
    if (q != p && missed++ == 0)
      first = (int)n;
    mem_cache_free(q);
  }
  if (!ok(missed == 0, "a freed block is reused for its size, 0..%d bytes",
          MEM_CACHE_MAX_BLOCK))
    printf("#   %d sizes missed, the first %d bytes\n", missed, first);
  mem_cache_release();
  is_size(mem_cache_bytes(), 0, "release empties the cache");
}

static void test_sizes(void) {
  // A block from one size's class serves every size of that class: fill
  // the cache with blocks of each size, then ask for each size again and
  // write all of it.
  enum { N = MEM_CACHE_MAX_BLOCK + 1 };
  unsigned char *b[N];
  for (size_t n = 0; n < N; n++)
    b[n] = mem_cache_malloc(n);
  for (size_t n = 0; n < N; n++)
    mem_cache_free(b[n]);
  ok(mem_cache_bytes() > 0, "freed blocks are kept");
  for (size_t n = N; n-- > 0;) {
    b[n] = mem_cache_malloc(n);
    memset(b[n], (int)n, n);
  }
  bool intact = true;
  for (size_t n = 0; n < N; n++)
    for (size_t i = 0; i < n; i++)
      intact = intact && b[n][i] == (unsigned char)n;
  ok(intact, "blocks of every size hold their bytes, none overlap");
  for (size_t n = 0; n < N; n++)
    mem_cache_free(b[n]);
  mem_cache_release();
}

static void test_bound(void) {
  // 4 MiB of small blocks freed: the cache keeps at most its bound, the
  // rest goes back to malloc (valgrind and ASan see no leak either way).
  enum { COUNT = 40000 };
  void **v = malloc(COUNT * sizeof(*v));
  for (int i = 0; i < COUNT; i++)
    v[i] = mem_cache_malloc(100);
  for (int i = 0; i < COUNT; i++)
    mem_cache_free(v[i]);
  size_t held = mem_cache_bytes();
  ok(held <= MEM_CACHE_MAX_BYTES, "the cache holds %zu bytes, at most %zu",
     held, MEM_CACHE_MAX_BYTES);
  ok(held > MEM_CACHE_MAX_BYTES - 2 * MEM_CACHE_MAX_BLOCK,
     "and fills up to its bound (%zu)", held);
  // Large blocks pass through.
  void *big = mem_cache_malloc(MEM_CACHE_MAX_BLOCK + 1);
  memset(big, 1, MEM_CACHE_MAX_BLOCK + 1);
  mem_cache_free(big);
  is_size(mem_cache_bytes(), held, "a large block is not kept");
  mem_cache_release();
  is_size(mem_cache_bytes(), 0, "release empties it");
  // Blocks from plain malloc (trees built before the cache was set) may be
  // freed through it and come back; the cache's may go to free() (json_dumps'
  // text).
  char *m = malloc(40);
  mem_cache_free(m);
  ok(mem_cache_bytes() > 0, "a block from malloc is kept");
  char *m2 = mem_cache_malloc(40);
  ok(m2 == m, "and given out again");
  free(m2);
  free(v);
}

static void test_jansson(void) {
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  static const char line[] =
      "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/request_permission\","
      "\"params\":{\"sessionId\":\"s\",\"toolCall\":{\"toolCallId\":\"c\","
      "\"rawInput\":{\"command\":\"git status\",\"t\":1234567890123456789}},"
      "\"options\":[{\"optionId\":\"allow\",\"kind\":\"allow_once\"},"
      "{\"optionId\":\"reject\",\"kind\":\"reject_once\"}]}}";
  json_error_t err;
  json_t *want = json_loadb(line, sizeof(line) - 1, 0, &err);
  char *wtext = json_dumps(want, JSON_COMPACT);
  bool same = true;
  json_t *keep[64];
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < 64; i++)
      keep[i] = jsonfast_load(line, sizeof(line) - 1, &err);
    for (int i = 0; i < 64; i++) {
      char *t = json_dumps(keep[i], JSON_COMPACT);
      same = same && t && strcmp(t, wtext) == 0;
      free(t); // json_dumps' text: freed with free(), as callers do
      json_decref(keep[i]);
    }
  }
  ok(same, "64 trees at a time through the cache equal json_loadb's");
  ok(mem_cache_bytes() > 0 && mem_cache_bytes() <= MEM_CACHE_MAX_BYTES,
     "their nodes are kept for the next (%zu bytes)", mem_cache_bytes());
  free(wtext);
  json_decref(want);
  jsonfast_release();
  mem_cache_release();
}

// Trees built in the arena: freed in any order, kept past the next ones,
// more kept than the arena's chunks hold; each equals json_loadb's while
// it lives, and every block is counted back.
static void test_arena(void) {
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  static const char doc[] =
      "{\"toolCallId\":\"call-1\",\"title\":\"git status\",\"kind\":"
      "\"execute\",\"rawInput\":{\"command\":\"git status\",\"n\":"
      "1234567890123456789,\"list\":[1,\"two\",{\"three\":3.5}]}}";
  json_error_t err;
  json_t *want = json_loadb(doc, sizeof(doc) - 1, 0, &err);
  char *wtext = json_dumps(want, JSON_COMPACT);
  size_t used;
  // One tree at a time: the chunk starts again, its blocks the same.
  mem_arena_begin();
  json_t *a = jsonfast_value(doc, sizeof(doc) - 1, &used);
  mem_arena_end();
  json_t *key = json_object_get(a, "kind");
  json_decref(a);
  is_size(mem_arena_live(), 0, "a tree freed gives every block back");
  mem_arena_begin();
  a = jsonfast_value(doc, sizeof(doc) - 1, &used);
  mem_arena_end();
  ok(json_object_get(a, "kind") == key, "the next tree reuses its blocks");
  json_decref(a);
  // 2,000 trees, each tenth kept until the end (they outlive the chunks
  // around them, and more than the arena holds); a node added to a kept
  // tree outside the span, one taken out of it and kept alone.
  enum { N = 2000 };
  json_t **kept = calloc(N, sizeof(*kept));
  json_t *alone = NULL;
  bool same = true;
  for (int i = 0; i < N; i++) {
    mem_arena_begin();
    json_t *t = jsonfast_value(doc, sizeof(doc) - 1, &used);
    mem_arena_end();
    char *text = json_dumps(t, JSON_COMPACT);
    same = same && text && strcmp(text, wtext) == 0;
    free(text);
    if (i % 10 == 0) {
      kept[i] = t;
      json_object_set_new(t, "added", json_string("later"));
      json_object_del(t, "added");
    } else if (i == 555) {
      alone = json_incref(json_object_get(t, "rawInput"));
      json_decref(t);
    } else {
      json_decref(t);
    }
  }
  ok(same, "%d trees from the arena equal json_loadb's", N);
  ok(mem_arena_live() > 0, "the kept trees hold blocks (%zu)",
     mem_arena_live());
  for (int i = 0; i < N; i++)
    if (kept[i]) {
      char *text = json_dumps(kept[i], JSON_COMPACT);
      same = same && text && strcmp(text, wtext) == 0;
      free(text);
    }
  ok(same, "the kept trees are intact after the others were freed");
  char *rtext = json_dumps(alone, JSON_COMPACT);
  char *wraw = json_dumps(json_object_get(want, "rawInput"), JSON_COMPACT);
  ok(rtext && wraw && strcmp(rtext, wraw) == 0,
     "a subtree kept alone is intact");
  free(rtext);
  free(wraw);
  for (int i = N; i-- > 0;)
    json_decref(kept[i]);
  json_decref(alone);
  is_size(mem_arena_live(), 0, "every block is given back at the end");
  free(kept);
  free(wtext);
  json_decref(want);
  jsonfast_release();
  mem_cache_release();
}

int main(void) {
  test_reuse();
  test_sizes();
  test_bound();
  test_jansson();
  test_arena();
  return done_testing();
}
