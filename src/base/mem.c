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
