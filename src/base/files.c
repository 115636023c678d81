#include "files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem.h"

char *files_xdg_path(const char *var, const char *fallback, const char *leaf) {
  const char *base = getenv(var);
  char *s;
  if (base && base[0] == '/') {
    s = xmalloc(strlen(base) + strlen(leaf) + 2);
    sprintf(s, "%s/%s", base, leaf);
    return s;
  }
  const char *home = getenv("HOME");
  if (!home || home[0] != '/')
    return NULL;
  s = xmalloc(strlen(home) + strlen(fallback) + strlen(leaf) + 3);
  sprintf(s, "%s/%s/%s", home, fallback, leaf);
  return s;
}

int files_mkdirs(const char *dir) {
  if (!*dir)
    return ENOENT;
  char *p = xstrdup(dir);
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0')
      continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0700) != 0 && errno != EEXIST) {
      rc = errno;
      break;
    }
    *s = c;
    if (c == '\0')
      break;
  }
  free(p);
  return rc;
}

int files_read_fd(int fd, size_t max, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  // A regular file's size is the first guess; one byte more lets the end
  // show without growing.
  struct stat st;
  size_t cap = 4096;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0)
    cap = (size_t)st.st_size + 1;
  if (cap > max + 1)
    cap = max + 1;
  char *buf = xmalloc(cap + 1);
  size_t n = 0;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      if (cap > max) {
        rc = EFBIG;
        break;
      }
      cap = cap > max / 2 ? max + 1 : cap * 2;
      buf = xrealloc(buf, cap + 1);
    }
    ssize_t got = read(fd, buf + n, cap - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      rc = errno;
      break;
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  if (rc != 0) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  *len = n;
  return 0;
}

int files_slurp(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0)
    rc = errno;
  else if (S_ISDIR(st.st_mode))
    rc = EISDIR;
  else if (!S_ISREG(st.st_mode))
    rc = EINVAL;
  else if ((size_t)st.st_size > max)
    rc = EFBIG;
  else
    rc = files_read_fd(fd, max, out, len);
  close(fd);
  return rc;
}

int files_write_all(int fd, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return errno;
    if (w == 0)
      return EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int files_replace_at(int dfd, const char *name, const char *data, size_t n,
                     int mode) {
  struct stat st;
  bool existed = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (existed && S_ISDIR(st.st_mode))
    return EISDIR;
  char tmp[64];
  int fd = -1;
  for (int i = 0; i < 100 && fd < 0; i++) {
    snprintf(tmp, sizeof(tmp), ".acp-%ld-%d.tmp", (long)getpid(),
             rand() % 1000000);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                0666);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0)
    return errno;
  int rc = 0;
  if (existed && S_ISREG(st.st_mode))
    (void)fchmod(fd, st.st_mode & 07777);
  else if (mode != FILES_MODE_UMASK && fchmod(fd, (mode_t)mode) != 0)
    rc = errno;
  if (rc == 0)
    rc = files_write_all(fd, data, n);
  if (rc == 0 && fsync(fd) != 0)
    rc = errno;
  if (close(fd) != 0 && rc == 0)
    rc = errno;
  if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0)
    rc = errno;
  if (rc != 0)
    unlinkat(dfd, tmp, 0);
  return rc;
}

int files_replace(const char *path, const char *data, size_t n, int mode) {
  const char *slash = strrchr(path, '/');
  const char *name = slash ? slash + 1 : path;
  if (!*name)
    return EISDIR;
  char *dir = !slash          ? xstrdup(".")
              : slash == path ? xstrdup("/")
                              : xstrndup(path, (size_t)(slash - path));
  int rc = files_mkdirs(dir);
  int dfd = rc ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rc == 0 && dfd < 0)
    rc = errno;
  free(dir);
  if (rc == 0)
    rc = files_replace_at(dfd, name, data, n, mode);
  if (dfd >= 0)
    close(dfd);
  return rc;
}
