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

// A bounded cache of freed small blocks in front of malloc, for jansson's
// many small nodes: json_set_alloc_funcs(mem_cache_malloc, mem_cache_free)
// once at startup. Blocks up to MEM_CACHE_MAX_BLOCK bytes are kept on free
// lists by size class (16-byte steps), MEM_CACHE_MAX_BYTES in all; the rest
// go back to free(). Every block is malloc's own (its size read back with
// malloc_usable_size), so one freed with free() (json_dumps' text) or
// allocated before the cache was set is fine. One thread only.
#define MEM_CACHE_MAX_BLOCK 256
#define MEM_CACHE_MAX_BYTES ((size_t)1 << 20)

// As malloc(n), NULL on failure (jansson handles it).
void *mem_cache_malloc(size_t n);
// As free(p).
void mem_cache_free(void *p);
// Frees every cached block (at exit, for leak checkers; it can be used
// again after).
void mem_cache_release(void);
// Bytes held on the free lists now (for tests).
size_t mem_cache_bytes(void);
