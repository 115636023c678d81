// path: lexical normalisation, symlink resolution in a temp dir, gitignore
// globs, and the anchors of Read/Edit specifiers.

#include "policy/path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static void is_own(char *got, const char *want, const char *desc) {
  is_str(got, want, desc);
  free(got);
}

static void test_normalize(void) {
  static const struct {
    const char *base, *p, *want;
  } rows[] = {
      {"/a", "b", "/a/b"},
      {"/a/b", "../../../x", "/x"},
      {"/p", "src/../../etc/passwd", "/etc/passwd"},
      {"/p", "/p/src/../../etc/passwd", "/etc/passwd"},
      {"/", "//a//b/./c/", "/a/b/c"},
      {"/x", "/", "/"},
      {"/x", ".", "/x"},
      {"/x", "~/f", "/h/f"},
      {"/x", "~", "/h"},
      {"/x", "~bob/f", "/x/~bob/f"},
      {NULL, "rel", NULL},
      {"rel", "x", NULL},
      {"/x", "", NULL},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    char desc[128];
    snprintf(desc, sizeof(desc), "normalize %s + %s", rows[i].base, rows[i].p);
    is_own(path_normalize(rows[i].base, rows[i].p, "/h"), rows[i].want, desc);
  }
  char *big = malloc(PATH_LEN_MAX + 10);
  memset(big, 'a', PATH_LEN_MAX + 9);
  big[0] = '/';
  big[PATH_LEN_MAX + 9] = '\0';
  ok(!path_normalize("/", big, NULL), "an overlong path is refused");
  free(big);
}

static void test_match(void) {
  static const struct {
    const char *pat, *path;
    bool fold, dir_self, want;
  } rows[] = {
      {"/r/**/.env", "/r/a/b/.env", false, false, true},
      {"/r/**/.env", "/r/.env", false, false, true},
      {"/r/**/.env", "/r/a/.envrc", false, false, false},
      {"/r/src/**", "/r/src/a/b.ts", false, false, true},
      {"/r/src/**", "/r/src", false, false, false},
      {"/r/src/**", "/r/src", false, true, true},
      {"/r/src/**", "/r/srcx/a", false, false, false},
      {"/r/src/*.ts", "/r/src/a.ts", false, false, true},
      {"/r/src/*.ts", "/r/src/a/b.ts", false, false, false},
      {"/r/src/**/*.ts", "/r/src/b.ts", false, false, true},
      {"/r/src/**/*.ts", "/r/src/a/b/c.ts", false, false, true},
      {"/r/*", "/r/.hidden", false, false, true},
      {"/r/a?c", "/r/abc", false, false, true},
      {"/r/a?c", "/r/ac", false, false, false},
      {"/r/[a-c]x", "/r/bx", false, false, true},
      {"/r/[!a-c]x", "/r/bx", false, false, false},
      {"/r/[!a-c]x", "/r/dx", false, false, true},
      {"/r/a\\*b", "/r/a*b", false, false, true},
      {"/r/a\\*b", "/r/axb", false, false, false},
      {"/r/[x", "/r/[x", false, false, true},
      {"/R/Src/A.TS", "/r/src/a.ts", true, false, true},
      {"/R/Src/A.TS", "/r/src/a.ts", false, false, false},
      {"/**", "/etc/passwd", false, false, true},
      {"/", "/", false, false, true},
      {"/etc/passwd", "/etc/passwd", false, false, true},
      {"/etc/passwd", "/etc/passwd/x", false, false, false},
      {"/a/**/b/**", "/a/x/y/b/z", false, false, true},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++)
    is_int(
        path_match(rows[i].pat, rows[i].path, rows[i].fold, rows[i].dir_self),
        rows[i].want, rows[i].pat);
  ok(!path_match("rel", "/x", false, false), "relative pattern: no match");
}

static void test_rule_pattern(void) {
  static const struct {
    const char *spec;
    bool allow;
    const char *want;
  } rows[] = {
      {"//tmp/x", true, "/tmp/x"},       {"//", true, "/**"},
      {"~/D/*.pdf", true, "/h/D/*.pdf"}, {"~", true, "/h"},
      {"/src/**", true, "/r/src/**"},    {"/", true, "/r/**"},
      {".env", true, "/r/**/.env"},      {"./.env", false, "/r/**/.env"},
      {"*.env", false, "/r/**/*.env"},   {"src/**", true, "/r/src/**"},
      {"src/**", false, "/r/**/src/**"}, {"dir/", true, "/r/dir/**"},
      {"dir/", false, "/r/**/dir/**"},   {"a/b/*.ts", false, "/r/a/b/*.ts"},
      {"//etc/", false, "/etc/**"},      {"/src/../lib/**", true, "/r/lib/**"},
  };
  char err[128];
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++)
    is_own(path_rule_pattern(rows[i].spec, "/r", "/h", rows[i].allow, err,
                             sizeof(err)),
           rows[i].want, rows[i].spec);
  ok(!path_rule_pattern("~bob/x", "/r", "/h", true, err, sizeof(err)) &&
         strstr(err, "~user"),
     "~user is refused: %s", err);
  ok(!path_rule_pattern("~/x", "/r", NULL, true, err, sizeof(err)) &&
         strstr(err, "home"),
     "~/ without a home: %s", err);
  ok(!path_rule_pattern("/x", NULL, "/h", true, err, sizeof(err)) &&
         strstr(err, "root"),
     "/ without a root: %s", err);
  ok(!path_rule_pattern("", "/r", "/h", true, err, sizeof(err)),
     "empty path refused");
}

static void test_resolve(void) {
  const char *tmp = getenv("TMPDIR");
  char tmpl[600];
  snprintf(tmpl, sizeof(tmpl), "%s/acp-path.XXXXXX", tmp ? tmp : "/tmp");
  char *t0 = mkdtemp(tmpl);
  char *t = t0 ? realpath(t0, NULL) : NULL;
  if (!ok(t != NULL, "temp dir"))
    return;
  char a[1024], b[1024], want[1200];
  snprintf(a, sizeof(a), "%s/real/dir", t);
  snprintf(b, sizeof(b), "%s/real", t);
  mkdir(b, 0700);
  mkdir(a, 0700);
  snprintf(a, sizeof(a), "%s/l", t);
  ok(symlink("real", a) == 0, "relative link");
  snprintf(a, sizeof(a), "%s/d", t);
  snprintf(b, sizeof(b), "%s/real/nothere", t);
  ok(symlink(b, a) == 0, "dangling absolute link");
  snprintf(a, sizeof(a), "%s/loop", t);
  ok(symlink("loop", a) == 0, "a link to itself");
  snprintf(a, sizeof(a), "%s/up", t);
  ok(symlink("real/dir/..", a) == 0, "a link with ..");

  snprintf(a, sizeof(a), "%s/l/dir/new.txt", t);
  snprintf(want, sizeof(want), "%s/real/dir/new.txt", t);
  is_own(path_resolve(a), want, "through a relative link; new file");
  snprintf(a, sizeof(a), "%s/d", t);
  snprintf(want, sizeof(want), "%s/real/nothere", t);
  is_own(path_resolve(a), want, "a dangling link resolves to its target");
  snprintf(a, sizeof(a), "%s/up/dir", t);
  snprintf(want, sizeof(want), "%s/real/dir", t);
  is_own(path_resolve(a), want, ".. inside a link target is physical");
  snprintf(a, sizeof(a), "%s/loop/x", t);
  is_own(path_resolve(a), NULL, "a link loop: NULL");
  snprintf(a, sizeof(a), "%s/no/such/x", t);
  is_own(path_resolve(a), a, "nothing exists: unchanged");
  is_own(path_resolve("/"), "/", "/ is /");
  is_own(path_resolve("rel"), NULL, "relative: NULL");

  // The epoch cache: one view of the filesystem per epoch, none at 0.
  snprintf(a, sizeof(a), "%s/c", t);
  snprintf(b, sizeof(b), "%s/c/x", t);
  path_cache_epoch(0);
  is_own(path_resolve_cached(b), b, "epoch 0: c missing, as written");
  ok(symlink("real", a) == 0, "c becomes a link");
  snprintf(want, sizeof(want), "%s/real/x", t);
  is_own(path_resolve_cached(b), want, "epoch 0 remembers nothing");
  path_cache_epoch(7);
  is_own(path_resolve_cached(b), want, "epoch 7: through the link");
  unlink(a);
  is_own(path_resolve_cached(b), want, "epoch 7 keeps its view");
  is_own(path_resolve(b), b, "path_resolve always looks");
  path_cache_epoch(8);
  is_own(path_resolve_cached(b), b, "epoch 8 looks again");
  path_cache_epoch(0);
  path_cache_free();

  const char *rm[] = {"l", "d", "loop", "up", "real/dir", "real"};
  for (size_t i = 0; i < sizeof(rm) / sizeof(*rm); i++) {
    snprintf(a, sizeof(a), "%s/%s", t, rm[i]);
    if (unlink(a) != 0)
      rmdir(a);
  }
  rmdir(t);
  free(t);
}

static void test_misc(void) {
  ok(path_within("/a/b", "/a"), "within: below");
  ok(path_within("/a", "/a"), "within: itself");
  ok(!path_within("/ab", "/a"), "within: not a prefix of a name");
  ok(path_within("/x", "/"), "within /: everything");
  ok(!path_within(NULL, "/"), "within: NULL");
  is_own(path_escape("/a*b?[c]\\d"), "/a\\*b\\?\\[c\\]\\\\d", "escape");
  char *esc = path_escape("/we[ird]*/f?le");
  ok(path_match(esc, "/we[ird]*/f?le", false, false) &&
         !path_match(esc, "/weird/file", false, false),
     "an escaped path matches only itself");
  free(esc);
}

int main(void) {
  test_normalize();
  test_match();
  test_rule_pattern();
  test_resolve();
  test_misc();
  return done_testing();
}
