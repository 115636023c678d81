#pragma once
// Environments for child processes: a copy of a base environment (the
// NULL-terminated "NAME=value" strings of environ) with names set over it
// or removed. Pure: the caller passes the base.

#include <stdbool.h>
#include <stddef.h>

#define ENV_MAX 65536 // entries in one environment (base and set together)

struct env {
  char **v; // NULL-terminated, n entries, room for cap
  size_t n, cap;
};

// Starts e as a copy of base (NULL: empty) with room for extra names set
// over it (all bounded by ENV_MAX).
void env_init(struct env *e, char *const *base, size_t extra);
// Sets name to value, replacing every entry of name; value NULL removes
// name. Returns false (e unchanged) when name is empty or holds '=', or
// when e is full.
bool env_set(struct env *e, const char *name, const char *value);
// The environment (NULL-terminated, the caller frees it with strv_free); e
// is left empty.
char **env_take(struct env *e);
// Frees a NULL-terminated array of strings and the strings (an environment
// or an argv; NULL is fine).
void strv_free(char **v);
