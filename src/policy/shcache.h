#pragma once
// The shell analysis of a command line, remembered by its text (agents send
// the same commands again and again): a bounded LRU in front of
// shell_analyse. The analysis depends on the script and home only (it
// expands ~ and $HOME; the cwd is applied by the caller, request.c), so
// both are the key and a cached result is the one shell_analyse would
// give. Results are shared and read-only; each reference is released.
//
// Not pure: one cache per process (the broker's loop is single-threaded).

#include <stddef.h>

#include "policy/shell/shell.h"

#define SHCACHE_ENTRIES 256          // results remembered at most
#define SHCACHE_BYTES (1u << 20)     // their scripts' bytes at most
#define SHCACHE_SCRIPT_MAX (8 << 10) // longer scripts are not remembered

// The analysis of script with home (may be NULL): a reference to release
// with shcache_release. Never NULL.
const struct shell_result *shcache_analyse(const char *script,
                                           const char *home);
// The same, with script's length (strlen) known.
const struct shell_result *shcache_analyse_len(const char *script, size_t len,
                                               const char *home);
// A block of size bytes (zeroed at first, aligned for any type) kept with
// the result r for as long as it lives: what a caller derives from the
// analysis alone (request.c: each atom's facts, and the atoms of a plain
// command as the request lists them) is worked out once per analysis, not
// once per request. Only for what depends on the analysis and nothing
// else; every call for one result must ask for the same size.
void *shcache_memo(const struct shell_result *r, size_t size);
// A number no other result of this process has had (never 0), for what a
// caller keeps about a result beyond its life (policy.c keys the index
// keys of its atoms by it: an address can be reused once a result is
// released, this number cannot).
unsigned long long shcache_serial(const struct shell_result *r);
// The script of r as the cache keeps it (alive while r is referenced), or
// NULL when r is not kept (too long, or the cache off).
const char *shcache_script(const struct shell_result *r);
// Releases a reference (NULL is fine).
void shcache_release(const struct shell_result *r);
// Forgets every result (those still referenced live until released).
void shcache_clear(void);
// Turns the cache off (0: every call analyses afresh, what is remembered
// stays for later) or on again (the default). For tests.
void shcache_enable(int on);

struct shcache_stats {
  size_t hits, misses, entries, bytes;
};
void shcache_stats(struct shcache_stats *out);
