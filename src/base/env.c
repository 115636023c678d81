#include "env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

void env_init(struct env *e, char *const *base, size_t extra) {
  size_t n = 0;
  while (base && base[n] && n < ENV_MAX)
    n++;
  e->cap = extra < ENV_MAX - n ? n + extra : ENV_MAX;
  e->v = xcalloc(e->cap + 1, sizeof(*e->v));
  for (e->n = 0; e->n < n; e->n++)
    e->v[e->n] = xstrdup(base[e->n]);
}

bool env_set(struct env *e, const char *name, const char *value) {
  size_t nlen = strlen(name);
  if (nlen == 0 || strchr(name, '='))
    return false;
  for (size_t i = 0; i < e->n;) {
    if (strncmp(e->v[i], name, nlen) == 0 && e->v[i][nlen] == '=') {
      free(e->v[i]);
      e->v[i] = e->v[--e->n];
      e->v[e->n] = NULL;
    } else {
      i++;
    }
  }
  if (!value)
    return true;
  if (e->n == e->cap)
    return false;
  size_t len = nlen + strlen(value) + 2;
  e->v[e->n] = xmalloc(len);
  snprintf(e->v[e->n++], len, "%s=%s", name, value);
  return true;
}

char **env_take(struct env *e) {
  char **v = e->v;
  *e = (struct env){0};
  return v;
}

void strv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}
