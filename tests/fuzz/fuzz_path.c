// The path normaliser and matchers (path_normalize, path_absolute,
// path_resolve, path_within, path_escape, path_match, path_rule_pattern).
//
// Input: path NUL base NUL home NUL pattern (missing parts: base "/b/c", no
// home, no pattern). Properties:
//  * a normalised path is absolute, has no "//", no "." or ".." segment, no
//    trailing '/' (except "/"), fits PATH_LEN_MAX, and normalising it again
//    (alone, against any base, or as ./x from it) gives it back; an
//    absolute input that fits PATH_LEN_MAX always normalises;
//  * path_resolve of it is NULL or normal too;
//  * it is within itself and within "/"; "/**" matches it (with dir_self);
//    its escaped form matches exactly it (with and without case folding);
//  * fuzzed patterns and Read/Edit specifiers never crash the matcher, and
//    a specifier's pattern is absolute.

#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "policy/path.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

static void check_normal(const char *r, const char *what) {
  size_t n = strlen(r);
  FUZZ_CHECK(r[0] == '/', "%s not absolute: %s", what, r);
  FUZZ_CHECK(n <= PATH_LEN_MAX, "%s longer than PATH_LEN_MAX", what);
  FUZZ_CHECK(!strstr(r, "//"), "%s has //: %s", what, r);
  FUZZ_CHECK(n == 1 || r[n - 1] != '/', "%s ends in /: %s", what, r);
  for (const char *s = r; *s;) {
    while (*s == '/')
      s++;
    size_t k = strcspn(s, "/");
    FUZZ_CHECK(!(k == 1 && s[0] == '.') && !(k == 2 && s[0] == '.' &&
                                             s[1] == '.'),
               "%s has a . or .. segment: %s", what, r);
    s += k;
  }
}

static void check_same(char *again, const char *r, const char *how) {
  FUZZ_CHECK(again && strcmp(again, r) == 0, "normalising %s again (%s): %s",
             r, how, again ? again : "NULL");
  free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  memcpy(buf, data, size);
  buf[size] = '\0';
  const char *part[4] = {NULL, NULL, NULL, NULL};
  size_t np = 0;
  for (char *s = buf; np < 4 && s <= buf + size; s += strlen(s) + 1)
    part[np++] = s;
  const char *path = part[0];
  const char *base = part[1] ? part[1] : "/b/c";
  const char *home = part[2];
  const char *pattern = part[3];

  char *abs = path_absolute(base, path, home);
  char *r = path_normalize(base, path, home);
  FUZZ_CHECK(!r || abs, "normalised %s but no absolute form", path);
  if (path[0] == '/' && strlen(path) <= PATH_LEN_MAX)
    FUZZ_CHECK(r != NULL, "absolute path %s did not normalise", path);
  if (r) {
    check_normal(r, "normalised");
    check_same(path_normalize(NULL, r, NULL), r, "alone");
    check_same(path_normalize(base, r, home), r, "with base and home");
    check_same(path_normalize(r, ".", NULL), r, "as . from itself");
    FUZZ_CHECK(path_within(r, r) && path_within(r, "/"), "within %s", r);
    FUZZ_CHECK(path_match("/**", r, false, true), "/** vs %s", r);
    char *esc = path_escape(r);
    FUZZ_CHECK(esc && path_match(esc, r, false, false) &&
                   path_match(esc, r, true, false),
               "escaped %s does not match it: %s", r, esc ? esc : "NULL");
    free(esc);
    char *res = path_resolve(r);
    if (res)
      check_normal(res, "resolved");
    free(res);
    if (pattern) {
      for (int k = 0; k < 4; k++)
        path_match(pattern, r, k & 1, k & 2);
    }
  }
  if (abs && abs[0] == '/') {
    char *n2 = path_normalize(NULL, abs, NULL);
    FUZZ_CHECK(!r == !n2 && (!r || strcmp(r, n2) == 0),
               "normalising the absolute form %s gives %s, not %s", abs,
               n2 ? n2 : "NULL", r ? r : "NULL");
    free(n2);
  }
  if (pattern) {
    char err[512];
    for (int allow = 0; allow < 2; allow++) {
      const char *root = base[0] == '/' ? base : NULL;
      char *pat = path_rule_pattern(pattern, root, home, allow, err,
                                    sizeof(err));
      FUZZ_CHECK(!pat || pat[0] == '/', "specifier %s: pattern %s", pattern,
                 pat);
      if (pat && r)
        path_match(pat, r, allow, !allow);
      free(pat);
    }
  }
  free(abs);
  free(r);
  free(buf);
  return 0;
}
