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

// path_normalize_into is path_normalize, whatever the lengths.
static void test_normalize_into(void) {
  static char big[3 * PATH_LEN_MAX];
  memset(big, 'a', sizeof(big) - 1);
  static const struct {
    const char *base, *p, *home;
    size_t cut; // p: the first cut bytes of big when not 0
  } rows[] = {
      {"/r", "a/../b", "/h", 0},
      {NULL, "~/x", "/h", 0},
      {"/r", "~/x", NULL, 0},
      {NULL, "rel", "/h", 0},
      {"rel", "x", NULL, 0},
      {"/", "", NULL, 0},
      {"/r", "/a//b/./c/..", NULL, 0},
      {"/r", NULL, NULL, PATH_LEN_MAX - 3},
      {"/r", NULL, NULL, PATH_LEN_MAX},
      {"/r", NULL, NULL, 2 * PATH_LEN_MAX + 8},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    char p[3 * PATH_LEN_MAX];
    snprintf(p, sizeof(p), "%s", rows[i].p ? rows[i].p : "");
    if (rows[i].cut) {
      memcpy(p, big, rows[i].cut);
      p[rows[i].cut] = '\0';
    }
    char *w = path_normalize(rows[i].base, p, rows[i].home);
    char out[PATH_LEN_MAX + 1];
    size_t n = path_normalize_into(rows[i].base, p, rows[i].home, out);
    ok(w ? n == strlen(w) && strcmp(out, w) == 0 : n == 0,
       "normalize_into row %zu (%s)", i, w ? "a path" : "NULL");
    free(w);
  }
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

  // The cached walk (its hashes grown component by component) and the
  // _into form give what path_resolve gives: links, `..` in and after a
  // link, a loop, new files; twice (the second from the cache).
  static const char *const rel[] = {
      "l/dir/new.txt", "d",           "up/dir",           "loop/x",
      "no/such/x",     "l/../real/.", "up/dir/../../l/x", "l//dir/./y"};
  for (int pass = 0; pass < 2; pass++) {
    path_cache_epoch(9);
    for (size_t i = 0; i < sizeof(rel) / sizeof(*rel); i++) {
      snprintf(a, sizeof(a), "%s/%s", t, rel[i]);
      char *w = path_resolve(a), *got = path_resolve_cached(a);
      char out[PATH_LEN_MAX + 1];
      size_t n = path_resolve_cached_into(t, rel[i], NULL, out);
      ok(w ? got && strcmp(got, w) == 0 && n == strlen(w) && strcmp(out, w) == 0
           : !got && n == 0,
         "cached, pass %d: %s -> %s", pass, rel[i], w ? w : "NULL");
      free(w);
      free(got);
    }
  }
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
  test_normalize_into();
  test_resolve();
  test_misc();
  return done_testing();
}
