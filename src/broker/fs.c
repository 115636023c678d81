#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "policy/path.h"

char *fs_resolve(const char *root, const char *path, bool *inside) {
  *inside = false;
  if (!path || path[0] != '/' || strlen(path) > PATH_LEN_MAX)
    return NULL;
  char *norm = path_absolute("/", path, NULL);
  char *linked = norm ? path_resolve(norm) : NULL;
  free(norm);
  // A `..` after a component that does not exist is left as written;
  // collapsing it can only name a place the kernel would not reach.
  char *res = linked ? path_normalize("/", linked, NULL) : NULL;
  free(linked);
  if (!res)
    return NULL;
  char *rroot = root ? path_resolve(root) : NULL;
  *inside = rroot && path_within(res, rroot);
  free(rroot);
  return res;
}

void fs_slice_lines(const char *text, size_t len, uint32_t line, uint32_t limit,
                    size_t *start, size_t *end) {
  size_t i = 0;
  for (uint32_t n = 1; n < line && i < len; n++) {
    const char *nl = memchr(text + i, '\n', len - i);
    i = nl ? (size_t)(nl - text) + 1 : len;
  }
  *start = i;
  if (limit == 0) {
    *end = len;
    return;
  }
  for (uint32_t n = 0; n < limit && i < len; n++) {
    const char *nl = memchr(text + i, '\n', len - i);
    i = nl ? (size_t)(nl - text) + 1 : len;
  }
  *end = i;
}

// Fails unless the open descriptor fd is within dir (or dir is NULL).
static int check_fd(int fd, const char *within, char *err, size_t errlen) {
  if (!within)
    return 0;
  char link[64], real[PATH_LEN_MAX + 1];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, real, sizeof(real) - 1);
  if (n < 0) {
    snprintf(err, errlen, "cannot check where the file is: %s",
             strerror(errno));
    return EXDEV;
  }
  real[n] = '\0';
  char *rwithin = path_resolve(within);
  bool ok = rwithin && path_within(real, rwithin);
  free(rwithin);
  if (!ok) {
    snprintf(err, errlen, "the path changed to %s, outside %s", real, within);
    return EXDEV;
  }
  return 0;
}

static int fail(int e, char *err, size_t errlen, const char *what,
                const char *path) {
  snprintf(err, errlen, "%s %s: %s", what, path, strerror(e));
  return e;
}

int fs_read(const char *resolved, const char *within, char **out,
            size_t *outlen, char *err, size_t errlen) {
  *out = NULL;
  *outlen = 0;
  int fd = open(resolved, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return fail(errno, err, errlen, "cannot open", resolved);
  struct stat st;
  int rc = check_fd(fd, within, err, errlen);
  if (rc == 0 && fstat(fd, &st) != 0)
    rc = fail(errno, err, errlen, "cannot stat", resolved);
  if (rc == 0 && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "%s is not a regular file", resolved);
    rc = EINVAL;
  }
  if (rc == 0 && (size_t)st.st_size > FS_READ_MAX) {
    snprintf(err, errlen, "%s is larger than %zu MiB", resolved,
             FS_READ_MAX >> 20);
    rc = EFBIG;
  }
  if (rc != 0) {
    close(fd);
    return rc;
  }
  char *buf;
  size_t len;
  rc = files_read_fd(fd, FS_READ_MAX, &buf, &len);
  close(fd);
  if (rc == EFBIG)
    snprintf(err, errlen, "%s is larger than %zu MiB", resolved,
             FS_READ_MAX >> 20);
  else if (rc != 0)
    fail(rc, err, errlen, "cannot read", resolved);
  if (rc == 0 && !utf8_valid(buf, len)) {
    snprintf(err, errlen, "%s is not UTF-8 text", resolved);
    rc = EILSEQ;
  }
  if (rc != 0) {
    free(buf);
    return rc;
  }
  *out = buf;
  *outlen = len;
  return 0;
}

// Opens the directory dir, creating it and its missing parents when they
// lie within `within`. Returns the descriptor, or -1 with err set.
static int open_dir(const char *dir, const char *within, int *rc, char *err,
                    size_t errlen) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT && strcmp(dir, "/") != 0) {
    char *parent = xstrdup(dir);
    char *slash = strrchr(parent, '/');
    if (slash == parent)
      slash[1] = '\0';
    else
      *slash = '\0';
    int pfd = open_dir(parent, within, rc, err, errlen);
    free(parent);
    if (pfd < 0)
      return -1;
    const char *base = strrchr(dir, '/') + 1;
    if (mkdirat(pfd, base, 0777) != 0 && errno != EEXIST) {
      *rc = fail(errno, err, errlen, "cannot create the directory", dir);
      close(pfd);
      return -1;
    }
    fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(pfd);
  }
  if (fd < 0) {
    *rc = fail(errno, err, errlen, "cannot open the directory", dir);
    return -1;
  }
  if ((*rc = check_fd(fd, within, err, errlen)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

int fs_write(const char *resolved, const char *within, const char *data,
             size_t len, char *err, size_t errlen) {
  const char *slash = strrchr(resolved, '/');
  if (!slash || !slash[1]) {
    snprintf(err, errlen, "%s is not a file path", resolved);
    return EINVAL;
  }
  char *dir = slash == resolved
                  ? xstrdup("/")
                  : xstrndup(resolved, (size_t)(slash - resolved));
  const char *base = slash + 1;
  int rc = 0;
  int dfd = open_dir(dir, within, &rc, err, errlen);
  free(dir);
  if (dfd < 0)
    return rc;
  rc = files_replace_at(dfd, base, data, len, FILES_MODE_UMASK);
  if (rc == EISDIR)
    snprintf(err, errlen, "%s is a directory", resolved);
  else if (rc != 0)
    fail(rc, err, errlen, "cannot write", resolved);
  close(dfd);
  return rc;
}
