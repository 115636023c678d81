// base/files: XDG paths, mkdirs, bounded reads, write_all and atomic
// replacement, and their one error convention (0 or an errno value).

#include "base/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static char T[700];

// Each test works in its own directory under T (at() names files there).
static void fresh(const char *sub) {
  static char base[512];
  if (!base[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(base, sizeof(base), "%s/acp-files.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(base))
      abort();
  }
  snprintf(T, sizeof(T), "%s/%s", base, sub);
  if (mkdir(T, 0700) != 0)
    abort();
}

// T/rel in a static buffer (one of two, so two can be used at once).
static const char *at(const char *rel) {
  static char buf[2][800];
  static int i;
  i ^= 1;
  snprintf(buf[i], sizeof(buf[i]), "%s/%s", T, rel);
  return buf[i];
}

static void put(const char *rel, const char *text) {
  FILE *f = fopen(at(rel), "w");
  if (!f)
    abort();
  fputs(text, f);
  fclose(f);
}

static unsigned mode_of(const char *rel) {
  struct stat st;
  return lstat(at(rel), &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

// Entries of T/rel whose name ends in .tmp.
static int temps(const char *rel) {
  DIR *d = opendir(at(rel));
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    n += len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0;
  }
  if (d)
    closedir(d);
  return n;
}

static void test_xdg(void) {
  setenv("HOME", "/home/someone", 1);
  setenv("ACP_TEST_XDG", "/x/state", 1);
  char *p = files_xdg_path("ACP_TEST_XDG", ".local/state", "acp-broker/f");
  is_str(p, "/x/state/acp-broker/f", "xdg: an absolute $var");
  free(p);
  setenv("ACP_TEST_XDG", "rel/state", 1);
  p = files_xdg_path("ACP_TEST_XDG", ".local/state", "acp-broker/f");
  is_str(p, "/home/someone/.local/state/acp-broker/f",
         "xdg: a relative $var is ignored");
  free(p);
  unsetenv("ACP_TEST_XDG");
  p = files_xdg_path("ACP_TEST_XDG", ".config", "x");
  is_str(p, "/home/someone/.config/x", "xdg: unset: $HOME/fallback");
  free(p);
  setenv("HOME", "relative", 1);
  ok(files_xdg_path("ACP_TEST_XDG", ".config", "x") == NULL,
     "xdg: a relative HOME is not used");
  unsetenv("HOME");
  ok(files_xdg_path("ACP_TEST_XDG", ".config", "x") == NULL,
     "xdg: no HOME, no path");
}

static void test_mkdirs(void) {
  fresh("mkdirs");
  is_int(files_mkdirs(at("a/b/c")), 0, "mkdirs: creates the parents");
  is_int(mode_of("a/b/c"), 0700, "mkdirs: new directories are 0700");
  is_int(files_mkdirs(at("a/b/c")), 0, "mkdirs: an existing one is fine");
  is_int(files_mkdirs(at("a/b/c/")), 0, "mkdirs: a trailing slash");
  put("a/f", "x");
  is_int(files_mkdirs(at("a/f/g")), ENOTDIR,
         "mkdirs: a file on the way: ENOTDIR (not -1)");
  is_int(files_mkdirs(""), ENOENT, "mkdirs: an empty path: ENOENT");
}

static void test_read(void) {
  fresh("read");
  char *out;
  size_t len;
  put("ten", "0123456789");
  is_int(files_slurp(at("ten"), 10, &out, &len), 0, "slurp: exactly max");
  ok(out && len == 10 && out[10] == '\0' && !memcmp(out, "0123456789", 10),
     "slurp: the content, NUL added");
  free(out);
  is_int(files_slurp(at("ten"), 9, &out, &len), EFBIG,
         "slurp: one byte over max: EFBIG");
  ok(out == NULL && len == 0, "slurp: nothing returned on failure");
  put("empty", "");
  is_int(files_slurp(at("empty"), 10, &out, &len), 0, "slurp: empty file");
  ok(out && len == 0 && out[0] == '\0', "slurp: an empty string");
  free(out);
  is_int(files_slurp(at("none"), 10, &out, &len), ENOENT, "slurp: ENOENT");
  files_mkdirs(at("dir"));
  is_int(files_slurp(at("dir"), 10, &out, &len), EISDIR, "slurp: EISDIR");
  mkfifo(at("fifo"), 0600);
  // Would block forever if it were opened for reading in blocking mode.
  is_int(files_slurp(at("fifo"), 10, &out, &len), EINVAL,
         "slurp: a FIFO is refused without blocking");
  symlink("nowhere", at("dangling"));
  is_int(files_slurp(at("dangling"), 10, &out, &len), ENOENT,
         "slurp: a dangling symlink is ENOENT (callers probe first)");

  // A pipe has no size to guess from: the buffer grows, and the bound
  // holds while it does.
  int fds[2];
  if (pipe(fds) != 0)
    abort();
  char big[20000];
  memset(big, 'z', sizeof(big));
  if (fork() == 0) {
    close(fds[0]);
    files_write_all(fds[1], big, sizeof(big));
    _exit(0);
  }
  close(fds[1]);
  is_int(files_read_fd(fds[0], sizeof(big), &out, &len), 0,
         "read_fd: a pipe, grown past the first guess");
  ok(len == sizeof(big) && out && !memcmp(out, big, len), "read_fd: all of it");
  free(out);
  close(fds[0]);
  wait(NULL);
  if (pipe(fds) != 0)
    abort();
  if (fork() == 0) {
    close(fds[0]);
    files_write_all(fds[1], big, sizeof(big));
    _exit(0);
  }
  close(fds[1]);
  is_int(files_read_fd(fds[0], 5000, &out, &len), EFBIG,
         "read_fd: a pipe with more than max: EFBIG");
  close(fds[0]);
  wait(NULL);
  is_int(files_read_fd(-1, 10, &out, &len), EBADF, "read_fd: EBADF (not -1)");
}

static void test_write_all(void) {
  int fd = open("/dev/full", O_WRONLY);
  if (fd >= 0) {
    is_int(files_write_all(fd, "x", 1), ENOSPC, "write_all: ENOSPC (not -1)");
    close(fd);
  }
  is_int(files_write_all(-1, "x", 1), EBADF, "write_all: EBADF");
  is_int(files_write_all(-1, "x", 0), 0, "write_all: nothing to write");
}

static void test_replace(void) {
  fresh("replace");
  mode_t old = umask(022);
  is_int(files_replace(at("d/e/f.json"), "{}\n", 3, 0600), 0,
         "replace: creates the directories");
  is_int(mode_of("d/e/f.json"), 0600, "replace: a new file gets mode");
  is_int(mode_of("d/e"), 0700, "replace: new directories are 0700");
  umask(077);
  is_int(files_replace(at("g.json"), "x", 1, 0644), 0, "replace: 0644");
  is_int(mode_of("g.json"), 0644, "replace: mode exactly, whatever the umask");
  is_int(files_replace(at("u.txt"), "x", 1, FILES_MODE_UMASK), 0,
         "replace: FILES_MODE_UMASK");
  is_int(mode_of("u.txt"), 0600, "replace: 0666 less the umask");
  umask(022);
  chmod(at("g.json"), 0640);
  is_int(files_replace(at("g.json"), "second", 6, 0600), 0,
         "replace: an existing file");
  is_int(mode_of("g.json"), 0640, "replace: an existing file keeps its mode");
  char *out;
  size_t len;
  files_slurp(at("g.json"), 100, &out, &len);
  is_str(out, "second", "replace: the new content");
  free(out);

  // The link is replaced, what it points to is not written.
  put("target", "keep");
  symlink("target", at("link"));
  is_int(files_replace(at("link"), "new", 3, 0600), 0, "replace: a symlink");
  struct stat st;
  ok(lstat(at("link"), &st) == 0 && S_ISREG(st.st_mode),
     "replace: the symlink became a file");
  files_slurp(at("target"), 100, &out, &len);
  is_str(out, "keep", "replace: its target is untouched");
  free(out);

  files_mkdirs(at("adir"));
  is_int(files_replace(at("adir"), "x", 1, 0600), EISDIR,
         "replace: a directory: EISDIR");
  is_int(files_replace(at("d/"), "x", 1, 0600), EISDIR,
         "replace: a path ending in /: EISDIR");
  put("blocker", "x");
  is_int(files_replace(at("blocker/f"), "x", 1, 0600), ENOTDIR,
         "replace: a file where a directory should be: ENOTDIR");
  ok(temps("") == 0 && temps("d/e") == 0, "replace: no temporary file left");

  if (geteuid() != 0) { // root writes anywhere
    files_mkdirs(at("ro"));
    files_replace(at("ro/keep"), "old", 3, 0600);
    chmod(at("ro"), 0500);
    is_int(files_replace(at("ro/keep"), "new", 3, 0600), EACCES,
           "replace: an unwritable directory: EACCES");
    chmod(at("ro"), 0700);
    files_slurp(at("ro/keep"), 100, &out, &len);
    is_str(out, "old", "replace: a failed write leaves the file as it was");
    free(out);
  }

  // Relative to the working directory.
  char cwd[600];
  if (!getcwd(cwd, sizeof(cwd)) || chdir(T) != 0)
    abort();
  is_int(files_replace("rel.txt", "r", 1, 0600), 0,
         "replace: a bare file name");
  if (chdir(cwd) != 0)
    abort();
  is_int(mode_of("rel.txt"), 0600, "replace: written in the working dir");
  umask(old);
}

int main(void) {
  test_xdg();
  test_mkdirs();
  test_read();
  test_write_all();
  test_replace();
  // T's parent holds every test's directory.
  char cmd[700];
  snprintf(cmd, sizeof(cmd), "rm -rf -- '%.*s'", (int)(strrchr(T, '/') - T), T);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", T);
  return done_testing();
}
