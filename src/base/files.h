#pragma once
// Files on disk: XDG paths, creating directories, reading a whole file
// within a bound, writing all of a buffer and replacing a file atomically.
// Policy (which files, what limit, what is allowed where) stays with the
// callers: settings, the trust store, the fs service, the logs.
//
// Error convention: a function that can fail returns 0 on success or a
// positive errno value (never -1 with errno set, and errno is not to be
// read afterwards). It writes no message: the caller knows the path and
// what it was doing, and says so (strerror(rc) for the rest).

#include <stddef.h>

// For files_replace*: a new file's mode is 0666 less the umask.
#define FILES_MODE_UMASK (-1)

// $var when it holds an absolute path (the XDG spec ignores relative ones),
// else $HOME/fallback; then "/" leaf. A new string, or NULL when neither
// is usable (HOME unset or not absolute).
char *files_xdg_path(const char *var, const char *fallback, const char *leaf);

// Creates dir and its missing parents (new ones 0700), like mkdir -p. An
// existing directory is fine. Returns 0 or an errno value.
int files_mkdirs(const char *dir);

// Reads fd to its end, but no more than max bytes (max < SIZE_MAX). Returns
// 0 with *out (a new buffer, NUL added) and *len; EFBIG when there is more
// than max; or the errno of a failed read. *out is NULL on failure.
int files_read_fd(int fd, size_t max, char **out, size_t *len);

// Reads the file at path whole (files_read_fd) without ever blocking: it is
// opened non-blocking and only a regular file is read. Returns 0 with *out
// and *len, or ENOENT (no such file), EISDIR (a directory), EINVAL (another
// kind of file: a FIFO, a device, a socket), EFBIG (more than max bytes)
// or another errno value of open() or read().
int files_slurp(const char *path, size_t max, char **out, size_t *len);

// Writes all n bytes of data to fd, retrying short writes and EINTR.
// Returns 0 or an errno value (EIO when write() makes no progress).
int files_write_all(int fd, const void *data, size_t n);

// Replaces the file name in the directory dfd by n bytes of data,
// atomically: a new temporary file beside it (".acp-<pid>-<n>.tmp"),
// written, fsync'd, then renamed over name; on failure the temporary file
// is removed and name is untouched. An existing regular file keeps its
// permission bits; a new one gets mode exactly, or 0666 less the umask with
// FILES_MODE_UMASK. name itself is never followed when it is a symlink (the
// link is replaced). Returns 0, EISDIR when name is a directory, or an
// errno value.
int files_replace_at(int dfd, const char *name, const char *data, size_t n,
                     int mode);

// files_replace_at for path (absolute or relative to the working
// directory), after creating its directory and missing parents
// (files_mkdirs). Returns 0 or an errno value.
int files_replace(const char *path, const char *data, size_t n, int mode);
