#include "shcache.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/mem.h"

#define BUCKETS 512 // a power of two, twice SHCACHE_ENTRIES

struct entry {
  struct shell_result res; // first: a result pointer is its entry
  char *script, *home;
  void *memo; // shcache_memo, or NULL
  size_t len;
  uint64_t hash;
  // shcache_serial
  unsigned long long serial;
  int refs;    // the cache's own reference counts while cached
  bool cached; // in the table and the LRU list
  struct entry *next_hash;
  struct entry *prev, *next; // LRU: head is the most recently used
};

static struct {
  struct entry *table[BUCKETS];
  struct entry *head, *tail;
  size_t n, bytes, hits, misses;
  unsigned long long serials; // the last shcache_serial given
  bool off;
} cache;

// The script only, 8 bytes at a time (a request's command is hashed on
// every decision; FNV-1a byte by byte cost as much as the rest of the
// lookup). home is compared in the bucket: the same script with another
// home is rare.
// The last bytes are the last 8 (overlapping what came before; the
// length is in the hash): a load, not a call of memcpy for 1 to 7 bytes.
static uint64_t hash_of(const char *script, size_t len) {
  uint64_t h = FNV64_OFFSET ^ len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, script + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15u;
    h ^= h >> 29;
  }
  uint64_t w = 0;
  if (i == len && len) // a multiple of 8: each byte hashed once
    return h ^ (h >> 32);
  if (len >= 8)
    memcpy(&w, script + len - 8, 8);
  else
    for (size_t k = 0; k < len; k++)
      w = w << 8 | (unsigned char)script[k];
  h = (h ^ w) * 0x9e3779b97f4a7c15u;
  return h ^ (h >> 32);
}

static void entry_free(struct entry *e) {
  shell_result_free(&e->res);
  free(e->memo);
  free(e->script);
  free(e->home);
  free(e);
}

static void unref(struct entry *e) {
  if (--e->refs == 0)
    entry_free(e);
}

static void lru_unlink(struct entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    cache.head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    cache.tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push(struct entry *e) {
  e->next = cache.head;
  if (cache.head)
    cache.head->prev = e;
  cache.head = e;
  if (!cache.tail)
    cache.tail = e;
}

static void evict(struct entry *e) {
  struct entry **pp = &cache.table[e->hash & (BUCKETS - 1)];
  while (*pp != e)
    pp = &(*pp)->next_hash;
  *pp = e->next_hash;
  lru_unlink(e);
  e->cached = false;
  cache.n--;
  cache.bytes -= e->len;
  unref(e);
}

const struct shell_result *shcache_analyse(const char *script,
                                           const char *home) {
  return shcache_analyse_len(script, strlen(script), home);
}

const struct shell_result *shcache_analyse_len(const char *script, size_t len,
                                               const char *home) {
  uint64_t h = hash_of(script, len);
  bool keep = !cache.off && len <= SHCACHE_SCRIPT_MAX;
  for (struct entry *e = keep ? cache.table[h & (BUCKETS - 1)] : NULL; e;
       e = e->next_hash) {
    if (e->hash == h && e->len == len && memcmp(e->script, script, len) == 0 &&
        (e->home != NULL) == (home != NULL) &&
        (!home || strcmp(e->home, home) == 0)) {
      cache.hits++;
      if (cache.head != e) {
        lru_unlink(e);
        lru_push(e);
      }
      e->refs++;
      return &e->res;
    }
  }
  cache.misses++;
  struct entry *e = xcalloc(1, sizeof(*e));
  shell_analyse(script, home, &e->res);
  e->serial = ++cache.serials;
  e->refs = 1;
  if (!keep)
    return &e->res;
  e->script = xstrndup(script, len);
  e->home = home ? xstrdup(home) : NULL;
  e->len = len;
  e->hash = h;
  while (cache.tail &&
         (cache.n >= SHCACHE_ENTRIES || cache.bytes + len > SHCACHE_BYTES))
    evict(cache.tail);
  struct entry **slot = &cache.table[h & (BUCKETS - 1)];
  e->next_hash = *slot;
  *slot = e;
  lru_push(e);
  e->cached = true;
  e->refs++;
  cache.n++;
  cache.bytes += len;
  return &e->res;
}

void *shcache_memo(const struct shell_result *r, size_t size) {
  struct entry *e = (struct entry *)(uintptr_t)r;
  if (!e->memo)
    e->memo = xcalloc(size ? size : 1, 1);
  return e->memo;
}

unsigned long long shcache_serial(const struct shell_result *r) {
  return ((const struct entry *)(uintptr_t)r)->serial;
}

const char *shcache_script(const struct shell_result *r) {
  return ((const struct entry *)(uintptr_t)r)->script;
}

void shcache_release(const struct shell_result *r) {
  if (r)
    unref((struct entry *)(uintptr_t)r);
}

void shcache_clear(void) {
  while (cache.tail)
    evict(cache.tail);
}

void shcache_enable(int on) {
  cache.off = !on;
}

void shcache_stats(struct shcache_stats *out) {
  *out = (struct shcache_stats){cache.hits, cache.misses, cache.n, cache.bytes};
}
