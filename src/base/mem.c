#include "mem.h"

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

struct cached {
  struct cached *next;
};

static struct cached *lists[CLASSES + 1];
static size_t held;

void *mem_cache_malloc(size_t n) {
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
  if (!p)
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
}

size_t mem_cache_bytes(void) {
  return held;
}
