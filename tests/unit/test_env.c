// env: an environment is a copy of its base with names set over it or
// removed; bad names are refused; the count stays bounded.

#include "base/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

// How many entries of v name name (NAME=...), and the value of the last.
static size_t count(char **v, const char *name, const char **value) {
  size_t n = 0, len = strlen(name);
  for (size_t i = 0; v[i]; i++)
    if (strncmp(v[i], name, len) == 0 && v[i][len] == '=') {
      n++;
      *value = v[i] + len + 1;
    }
  return n;
}

static size_t length(char **v) {
  size_t n = 0;
  while (v[n])
    n++;
  return n;
}

int main(void) {
  char a[] = "A=1", b[] = "B=2", c[] = "C=3", d[] = "B=dup";
  char *base[] = {a, b, c, d, NULL};
  struct env e;
  env_init(&e, base, 4);
  ok(env_set(&e, "A", "one"), "A is set");
  ok(env_set(&e, "B", NULL), "B is removed");
  ok(env_set(&e, "D", "4"), "D is added");
  ok(env_set(&e, "D", "four"), "D is set again");
  ok(env_set(&e, "E", ""), "E is set empty");
  ok(!env_set(&e, "", "x"), "an empty name is refused");
  ok(!env_set(&e, "X=Y", "x"), "a name with = is refused");
  char **v = env_take(&e);
  ok(e.v == NULL && e.n == 0, "the builder is left empty");
  const char *val = NULL;
  ok(count(v, "A", &val) == 1 && strcmp(val, "one") == 0, "A=one, once");
  ok(count(v, "B", &val) == 0, "no B (both of the base's entries)");
  ok(count(v, "C", &val) == 1 && strcmp(val, "3") == 0, "C kept");
  ok(count(v, "D", &val) == 1 && strcmp(val, "four") == 0, "D=four, once");
  ok(count(v, "E", &val) == 1 && strcmp(val, "") == 0, "E empty");
  ok(count(v, "X", &val) == 0, "nothing of the refused name");
  is_size(length(v), 4, "A C D E");
  ok(v[0] != base[0], "the base is copied, not borrowed");
  strv_free(v);
  is_str(base[0], "A=1", "the base is unchanged");

  // Room for `extra` names over the base: the next new one is refused,
  // replacing one still works.
  env_init(&e, base, 1);
  ok(env_set(&e, "N1", "x"), "one new name fits");
  ok(!env_set(&e, "N2", "x"), "a second is refused: full");
  ok(env_set(&e, "N1", "y"), "replacing one is not");
  v = env_take(&e);
  is_size(length(v), 5, "the base and N1");
  strv_free(v);

  env_init(&e, NULL, 1);
  ok(env_set(&e, "ONLY", "1"), "an empty base");
  v = env_take(&e);
  is_size(length(v), 1, "one entry");
  is_str(v[0], "ONLY=1", "NAME=value");
  strv_free(v);

  // The bound: a request cannot grow an environment past ENV_MAX.
  env_init(&e, base, (size_t)-1);
  ok(e.cap == ENV_MAX, "room is bounded by ENV_MAX");
  strv_free(env_take(&e));
  strv_free(NULL);
  return done_testing();
}
