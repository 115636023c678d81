// fs: confinement (resolve, the descriptor check against a symlink swapped
// after the check), atomic writes, line slices, UTF-8.

#include "base/utf8.h"
#include "broker/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char base[256];

static void path_of(char *out, size_t n, const char *rel) {
  snprintf(out, n, "%s/%s", base, rel);
}

static void put(const char *rel, const char *text) {
  char p[512];
  path_of(p, sizeof(p), rel);
  FILE *f = fopen(p, "w");
  fputs(text, f);
  fclose(f);
}

static char *slurp(const char *rel) {
  char p[512];
  path_of(p, sizeof(p), rel);
  FILE *f = fopen(p, "r");
  if (!f)
    return NULL;
  static char buf[4096];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void test_resolve(void) {
  char root[512], p[512];
  path_of(root, sizeof(root), "proj");
  bool inside;
  path_of(p, sizeof(p), "proj/a.txt");
  char *r = fs_resolve(root, p, &inside);
  ok(r && inside, "a file in the project is inside");
  free(r);
  path_of(p, sizeof(p), "proj/../out/secret");
  r = fs_resolve(root, p, &inside);
  ok(r && !inside, ".. out of the project is outside");
  free(r);
  path_of(p, sizeof(p), "proj/nope/../../out/secret");
  r = fs_resolve(root, p, &inside);
  ok(r && !inside && !strstr(r, ".."),
     ".. after a missing directory: collapsed, outside");
  free(r);
  path_of(p, sizeof(p), "proj/link-out/secret");
  r = fs_resolve(root, p, &inside);
  ok(r && !inside, "a symlink leaving the project is outside");
  free(r);
  r = fs_resolve(root, "relative/path", &inside);
  ok(r == NULL && !inside, "a relative path is refused");
}

static void test_read_write(void) {
  char root[512], p[512], err[600];
  path_of(root, sizeof(root), "proj");
  put("proj/a.txt", "one\ntwo\nthree\n");
  char *text;
  size_t len;
  path_of(p, sizeof(p), "proj/a.txt");
  is_int(fs_read(p, root, &text, &len, err, sizeof(err)), 0, "read inside");
  is_str(text, "one\ntwo\nthree\n", "the content");
  size_t s, e;
  fs_slice_lines(text, len, 2, 1, &s, &e);
  is_size(e - s, 4, "line 2, limit 1: one line");
  ok(memcmp(text + s, "two\n", 4) == 0, "...and it is line 2");
  fs_slice_lines(text, len, 0, 0, &s, &e);
  ok(s == 0 && e == len, "line 0, limit 0: everything");
  fs_slice_lines(text, len, 9, 2, &s, &e);
  ok(s == len && e == len, "past the end: nothing");
  free(text);

  path_of(p, sizeof(p), "proj/new/deeper/b.txt");
  is_int(fs_write(p, root, "bee\n", 4, err, sizeof(err)), 0,
         "a write creates missing directories inside");
  is_str(slurp("proj/new/deeper/b.txt"), "bee\n", "written");
  chmod(p, 0640);
  is_int(fs_write(p, root, "bee2\n", 5, err, sizeof(err)), 0, "overwrite");
  struct stat st;
  stat(p, &st);
  is_int(st.st_mode & 0777, 0640, "the file keeps its mode");
  is_str(slurp("proj/new/deeper/b.txt"), "bee2\n", "overwritten");

  path_of(p, sizeof(p), "proj/missing.txt");
  is_int(fs_read(p, root, &text, &len, err, sizeof(err)), ENOENT,
         "a missing file: ENOENT");
  put("proj/bin.dat", "a\xff\xfe");
  path_of(p, sizeof(p), "proj/bin.dat");
  is_int(fs_read(p, root, &text, &len, err, sizeof(err)), EILSEQ,
         "not UTF-8: EILSEQ");
}

// The check happened on a path whose directory was real; the directory is
// then replaced by a symlink to the outside before the write: the write
// must notice through the descriptor and touch nothing outside.
static void test_swap(void) {
  char root[512], p[512], d[512], out[512], err[600];
  path_of(root, sizeof(root), "proj");
  path_of(d, sizeof(d), "proj/swapdir");
  path_of(out, sizeof(out), "out");
  mkdir(d, 0755);
  path_of(p, sizeof(p), "proj/swapdir/sub");
  mkdir(p, 0755);
  path_of(p, sizeof(p), "out/sub");
  mkdir(p, 0755);
  path_of(p, sizeof(p), "proj/swapdir/sub/victim.txt");
  bool inside;
  char *r = fs_resolve(root, p, &inside);
  ok(r && inside, "before the swap: inside");
  path_of(p, sizeof(p), "proj/swapdir/sub");
  rmdir(p);
  rmdir(d);
  is_int(symlink(out, d), 0, "a directory on the way becomes a link out");
  is_int(fs_write(r, root, "PWNED", 5, err, sizeof(err)), EXDEV,
         "the write notices the swap through its descriptor");
  ok(slurp("out/sub/victim.txt") == NULL, "nothing written outside");
  char *text;
  size_t len;
  put("out/sub/victim.txt", "secret");
  is_int(fs_read(r, root, &text, &len, err, sizeof(err)), EXDEV,
         "the read notices it too");
  // The file's own directory swapped to a link: not followed.
  path_of(p, sizeof(p), "proj/swapdir/victim2.txt");
  unlink(d);
  mkdir(d, 0755);
  char *r2 = fs_resolve(root, p, &inside);
  rmdir(d);
  symlink(out, d);
  ok(fs_write(r2, root, "PWNED", 5, err, sizeof(err)) != 0,
     "the file's directory swapped to a link: refused");
  ok(slurp("out/victim2.txt") == NULL, "nothing written outside either");
  // The final component swapped to a link: not followed.
  put("proj/file.txt", "mine");
  path_of(p, sizeof(p), "proj/file.txt");
  char *rf = fs_resolve(root, p, &inside);
  unlink(rf);
  path_of(out, sizeof(out), "out/sub/victim.txt");
  symlink(out, rf);
  is_int(fs_read(rf, root, &text, &len, err, sizeof(err)), ELOOP,
         "a final link swapped in is not followed");
  is_int(fs_write(rf, root, "new", 3, err, sizeof(err)), 0,
         "a write replaces the link itself");
  is_str(slurp("out/sub/victim.txt"), "secret",
         "the link's target is untouched");
  free(r);
  free(r2);
  free(rf);
}

static void test_utf8(void) {
  const char *good = "h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80";
  ok(utf8_valid(good, strlen(good)), "valid UTF-8");
  ok(!utf8_valid("\xc0\xaf", 2), "overlong rejected");
  ok(!utf8_valid("\xed\xa0\x80", 3), "surrogate rejected");
  ok(!utf8_valid("\xe2\x82", 2), "truncated rejected");
  ok(!utf8_valid("a\0b", 3), "NUL rejected");
}

int main(void) {
  snprintf(base, sizeof(base), "%s/acp-fs-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(base))
    return 2;
  char p[512], t[512];
  path_of(p, sizeof(p), "proj");
  mkdir(p, 0755);
  path_of(p, sizeof(p), "out");
  mkdir(p, 0755);
  put("out/secret", "s");
  path_of(p, sizeof(p), "proj/link-out");
  path_of(t, sizeof(t), "out");
  if (symlink(t, p) != 0)
    return 2;
  test_resolve();
  test_read_write();
  test_swap();
  test_utf8();
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
  if (system(cmd) != 0)
    return 2;
  return done_testing();
}
