#pragma once
// Files the agent reads and writes through fs/* (design §9), on disk.
//
// Paths are resolved (symlinks followed) before anything is opened, and the
// file or directory actually opened is checked again through its descriptor,
// so a symlink swapped in between the check and the open cannot lead outside
// the directory the caller allows. Writes are atomic: a temporary file in
// the same directory, then rename.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_READ_MAX ((size_t)16 * 1024 * 1024) // larger files are refused

// Resolves an absolute path (path_resolve) and tells whether the result lies
// within root (itself resolved). Returns a new string, or NULL when path is
// not absolute, too long or loops.
char *fs_resolve(const char *root, const char *path, bool *inside);
// The byte range [*start, *end) of text holding `limit` lines from line
// `line` (1-based; 0 or 1 is the first line; limit 0 means to the end).
void fs_slice_lines(const char *text, size_t len, uint32_t line, uint32_t limit,
                    size_t *start, size_t *end);
// Reads the file at resolved (from fs_resolve). When within is not NULL,
// the file opened must lie within it. Returns 0 with *out (malloc'd, NUL
// added) and *outlen, or an errno value (ENOENT, EACCES, EFBIG, EILSEQ for
// text that is not UTF-8, EXDEV when it left within, ...) with a reason in
// err.
int fs_read(const char *resolved, const char *within, char **out,
            size_t *outlen, char *err, size_t errlen);
// Writes data to resolved atomically, creating missing directories (only
// below within, when given) and keeping an existing file's mode. Returns 0
// or an errno value with a reason in err.
int fs_write(const char *resolved, const char *within, const char *data,
             size_t len, char *err, size_t errlen);
