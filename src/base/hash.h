// FNV-1a, 64 bits: the hash of the policy's lookup tables (rule index,
// shell-analysis cache, path probe cache). Not for anything an attacker
// could exploit by colliding keys beyond a slower lookup: every table
// compares the full key too.
#ifndef ACP_BASE_HASH_H
#define ACP_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV64_OFFSET 14695981039346656037u
#define FNV64_PRIME 1099511628211u

// h extended by the n bytes at s.
static inline uint64_t fnv64_more(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * FNV64_PRIME;
  return h;
}

// h extended by one byte.
static inline uint64_t fnv64_byte(uint64_t h, unsigned char c) {
  return (h ^ c) * FNV64_PRIME;
}

#endif
