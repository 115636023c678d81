#pragma once
// A tiny TAP producer for the unit tests: one binary per module, so the
// counters can live in this header. Every assertion reports file and line
// when it fails; main() ends with `return done_testing();`.

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check_run, check_failed;

__attribute__((format(printf, 4, 5))) static inline bool
check_ok(bool cond, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s %d - ", cond ? "ok" : "not ok", ++check_run);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (!cond) {
    check_failed++;
    printf("#   at %s:%d\n", file, line);
  }
  fflush(stdout);
  return cond;
}

static inline bool check_int(intmax_t a, intmax_t b, const char *file, int line,
                             const char *desc) {
  bool r = check_ok(a == b, file, line, "%s", desc);
  if (!r)
    printf("#   got: %jd\n#   expected: %jd\n", a, b);
  return r;
}

static inline bool check_size(size_t a, size_t b, const char *file, int line,
                              const char *desc) {
  bool r = check_ok(a == b, file, line, "%s", desc);
  if (!r)
    printf("#   got: %zu\n#   expected: %zu\n", a, b);
  return r;
}

static inline bool check_str(const char *a, const char *b, const char *file,
                             int line, const char *desc) {
  bool same = (!a && !b) || (a && b && strcmp(a, b) == 0);
  bool r = check_ok(same, file, line, "%s", desc);
  if (!r)
    printf("#   got: %s\n#   expected: %s\n", a ? a : "(null)",
           b ? b : "(null)");
  return r;
}

static inline int done_testing(void) {
  printf("1..%d\n", check_run);
  return check_failed ? 1 : 0;
}

#define ok(cond, ...)                                                          \
  check_ok((cond) ? true : false, __FILE__, __LINE__, __VA_ARGS__)
#define is_int(a, b, desc) check_int((a), (b), __FILE__, __LINE__, (desc))
#define is_size(a, b, desc) check_size((a), (b), __FILE__, __LINE__, (desc))
#define is_str(a, b, desc) check_str((a), (b), __FILE__, __LINE__, (desc))
