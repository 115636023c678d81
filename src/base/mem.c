#include "mem.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n) {
  fprintf(stderr, "acp-broker: out of memory allocating %zu bytes\n", n);
  abort();
}

void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p)
    oom(n);
  return p;
}

void *xcalloc(size_t n, size_t sz) {
  if (sz && n > SIZE_MAX / sz)
    oom(SIZE_MAX);
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p)
    oom(n * sz);
  return p;
}

void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q)
    oom(n);
  return q;
}

char *xstrdup(const char *s) {
  return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n) {
  char *p = xmalloc(n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

// Size class c holds blocks whose usable size is at least 16 * c - 8 bytes:
// what a request of n bytes needs is class (n + 23) / 16, and a freed block
// of usable size u serves class (u + 8) / 16. With glibc (chunks of 16 * c
// bytes, 8 of them the header) both give the block's own chunk size. Its
// smallest chunk is 32 bytes, so class 2 is the smallest.
#define CLASSES (MEM_CACHE_MAX_BLOCK / 16 + 1)

#ifdef __GLIBC__
#include <malloc.h>
#define usable(p) malloc_usable_size(p)
#else
#define usable(p) ((size_t)0) // size unknown: nothing is cached
#endif

// ASan is told which bytes of an arena chunk are given out, so that a node
// used after its tree was freed is still caught.
#if defined(__SANITIZE_ADDRESS__)
#define MEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEM_ASAN 1
#endif
#endif
#ifdef MEM_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct cached {
  struct cached *next;
};

static struct cached *lists[CLASSES + 1];
static size_t held;

// The arena (mem.h): the chunk blocks are carved from, and the older ones
// whose blocks are not all freed yet.
struct chunk {
  char *base; // MEM_ARENA_CHUNK bytes, or NULL
  size_t used, live;
};
static struct chunk cur, old[MEM_ARENA_OLD];
static size_t nold;
static bool arena_on;

void mem_arena_begin(void) {
  arena_on = true;
}

void mem_arena_end(void) {
  arena_on = false;
}

static bool in_chunk(const struct chunk *c, const void *p) {
  return (uintptr_t)p - (uintptr_t)c->base < MEM_ARENA_CHUNK;
}

// A chunk with room for need bytes: the current one started again when
// its blocks are all freed, else a new one (the current one kept among the
// old until its last block is freed). False when there is none.
__attribute__((noinline)) static bool arena_room(size_t need) {
  if (cur.base && cur.live > 0) {
    if (nold == MEM_ARENA_OLD)
      return false;    // trees kept alive hold every chunk: the cache
    old[nold++] = cur; // freed when its last block is
    cur.base = NULL;
  }
  if (!cur.base && !(cur.base = malloc(MEM_ARENA_CHUNK)))
    return false;
  cur.used = cur.live = 0;
  POISON(cur.base, MEM_ARENA_CHUNK);
  return need <= MEM_ARENA_CHUNK;
}

// A block of n bytes from the arena, NULL when it has none (then the cache
// serves it).
static inline void *arena_malloc(size_t n) {
  size_t need = (n + 16) & ~(size_t)15; // n + 1 rounded up: never 0
  if (__builtin_expect(!cur.base || cur.used + need > MEM_ARENA_CHUNK, 0) &&
      !arena_room(need))
    return NULL;
  char *p = cur.base + cur.used;
  cur.used += need;
  cur.live++;
  UNPOISON(p, n);
  return p;
}

// Whether p is an arena block (then it is freed).
static inline bool arena_free(void *p) {
  if (in_chunk(&cur, p)) { // never when cur.base is NULL (p is not)
    POISON(p, 16); // at least its first bytes; the chunk is reused whole
    if (--cur.live == 0) {
      cur.used = 0; // every block is freed: the chunk starts again
      POISON(cur.base, MEM_ARENA_CHUNK);
    }
    return true;
  }
  for (size_t i = 0; __builtin_expect(i < nold, 0); i++)
    if (in_chunk(&old[i], p)) {
      if (--old[i].live == 0) {
        UNPOISON(old[i].base, MEM_ARENA_CHUNK);
        free(old[i].base);
        old[i] = old[--nold];
      }
      return true;
    }
  return false;
}

void *mem_cache_malloc(size_t n) {
  if (__builtin_expect(arena_on, 0) && n <= MEM_CACHE_MAX_BLOCK) {
    void *p = arena_malloc(n);
    if (p)
      return p;
  }
  if (n <= MEM_CACHE_MAX_BLOCK) {
    size_t c = n <= 24 ? 2 : (n + 23) / 16;
    struct cached *b = lists[c];
    if (b) {
      lists[c] = b->next;
      held -= 16 * c - 8;
      return b;
    }
    // At least the class's size, so that the block comes back to it.
    return malloc(16 * c - 8);
  }
  return malloc(n);
}

void mem_cache_free(void *p) {
  if (!p || arena_free(p))
    return;
  size_t c = (usable(p) + 8) / 16;
  if (c < 2 || c > CLASSES || held + (16 * c - 8) > MEM_CACHE_MAX_BYTES) {
    free(p);
    return;
  }
  struct cached *b = p;
  b->next = lists[c];
  lists[c] = b;
  held += 16 * c - 8;
}

void mem_cache_release(void) {
  for (size_t c = 0; c <= CLASSES; c++)
    while (lists[c]) {
      struct cached *b = lists[c];
      lists[c] = b->next;
      free(b);
    }
  held = 0;
  if (cur.base && cur.live == 0) {
    UNPOISON(cur.base, MEM_ARENA_CHUNK);
    free(cur.base);
    cur.base = NULL;
  }
}

size_t mem_arena_live(void) {
  size_t n = cur.live;
  for (size_t i = 0; i < nold; i++)
    n += old[i].live;
  return n;
}

size_t mem_cache_bytes(void) {
  return held;
}
