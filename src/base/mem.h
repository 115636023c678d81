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

// An arena in front of the cache for one document's tree at a time (an
// agent's toolCall, built and freed per request): between
// mem_arena_begin and mem_arena_end, mem_cache_malloc carves blocks of up
// to MEM_CACHE_MAX_BLOCK bytes from a chunk of MEM_ARENA_CHUNK bytes
// (a pointer moved, no free list), and mem_cache_free of such a block only
// counts it: a chunk whose blocks are all freed starts again from its
// beginning. A tree that outlives the next one keeps its chunk alive (up to
// MEM_ARENA_OLD chunks, then the cache serves), freed with its last block,
// so any block may be freed at any time, in or out of the arena's span.
// mem_cache_release frees an empty chunk. One thread only.
#define MEM_ARENA_CHUNK 16384
#define MEM_ARENA_OLD 8
void mem_arena_begin(void);
void mem_arena_end(void);
// Blocks of the arena not freed yet (for tests).
size_t mem_arena_live(void);
