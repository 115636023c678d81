#pragma once
// Allocation helpers that never return NULL: running out of memory aborts
// with the size that failed, so callers need no error path for it.

#include <stddef.h>

// Allocates n bytes (at least 1); aborts on failure.
void *xmalloc(size_t n);
// Allocates n zeroed elements of size sz; aborts on failure or overflow.
void *xcalloc(size_t n, size_t sz);
// Resizes p to n bytes (at least 1); aborts on failure.
void *xrealloc(void *p, size_t n);
// Returns a new copy of s; aborts on failure.
char *xstrdup(const char *s);
// Returns a new NUL-terminated copy of the first n bytes of s.
char *xstrndup(const char *s, size_t n);
