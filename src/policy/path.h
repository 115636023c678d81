#pragma once
// Paths in permission rules and requests (permission-rules §5.4): lexical
// normalisation, symlink resolution, gitignore-style globs and the anchors
// of Read/Edit specifiers.
//
// Everything here is pure except path_resolve, which reads the filesystem
// (lstat, readlink) and nothing else.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PATH_LEN_MAX 4096 // longer paths are refused (the caller fails closed)

// The absolute form of p (relative to base, ~ expanded to home) WITHOUT
// collapsing `.` and `..`: what path_resolve needs, because the kernel
// follows a symlink before it applies a `..` that comes after it. New
// string, or NULL.
char *path_absolute(const char *base, const char *p, const char *home);
// Makes p absolute and lexically normal: a relative p is joined to base
// (absolute), a leading "~" or "~/" is replaced by home (when home is not
// NULL), and "//", "." and ".." are collapsed ("/a/../../b" is "/b").
// Returns a new string, or NULL when there is no absolute result or it is
// longer than PATH_LEN_MAX.
char *path_normalize(const char *base, const char *p, const char *home);
// path_normalize into out (PATH_LEN_MAX + 1 bytes): the result's length, or
// 0 when path_normalize gives NULL. Allocates nothing for paths of usual
// length.
size_t path_normalize_into(const char *base, const char *p, const char *home,
                           char *out);
// path_normalize_into for a base that is absolute and normal already (bn
// bytes, path_normalize's own output): a relative p with nothing to
// collapse is joined to it without a second look at base.
size_t path_normalize_under(const char *base, size_t bn, const char *p,
                            const char *home, char *out);
// Follows the symlinks of an absolute path component by component, applying
// each `..` to what the components before it resolved to, as the kernel
// does (at most 40 links); from the first component that does not exist the
// rest is appended as written, so a new file resolves through its parent.
// Returns a new string, or NULL on a link loop or an overlong result.
char *path_resolve(const char *abs);
// path_resolve, with what lstat and readlink said about each directory
// remembered within one epoch (path_cache_epoch; 0, the default, remembers
// nothing). For the policy's view of a request: requests decided in one
// epoch (broker.c gate_fresh) see one state of the filesystem. fs/* does
// not use it: it checks the disk again when it reads or writes.
char *path_resolve_cached(const char *abs);
// path_resolve_cached(path_absolute(base, p, home)) into out (PATH_LEN_MAX +
// 1 bytes): the result's length, or 0 for NULL. Allocates nothing unless a
// symlink is followed.
size_t path_resolve_cached_into(const char *base, const char *p,
                                const char *home, char *out);
// Starts an epoch: what was remembered before is looked at again.
void path_cache_epoch(uint64_t epoch);
// Frees what is remembered.
void path_cache_free(void);
// True when path is dir or lies below it (both absolute and normal).
bool path_within(const char *path, const char *dir);
// Matches an absolute glob against an absolute, normal path. Per segment:
// `*` any run, `?` one character, `[...]` a class, `\x` a literal x; a
// segment `**` matches any number of segments. A trailing "/**" needs at
// least one segment below, unless dir_self (then the directory itself
// matches too). fold compares ASCII letters case-insensitively.
bool path_match(const char *pattern, const char *path, bool fold,
                bool dir_self);
// One name (no '/') against one glob segment: `*` matches any run of
// characters; with classes `?`, `[...]` and `\x` are read as path_match
// reads them, else every other character is literal (the tool-name and
// domain globs of rules.c). fold as for path_match.
bool path_glob_segment(const char *p, size_t pn, const char *s, size_t sn,
                       bool classes, bool fold);
// The absolute pattern of a Read/Edit specifier: `//abs`, `~/home-rel`,
// `/root-rel`, `./rel` or bare `rel` (relative to root). A relative pattern
// without a slash matches at any depth ("x" is "**/x"); a single-segment
// "dir/**" (or "dir/") is "<root>/dir/**" for allow and any depth
// otherwise. Returns a new string, or NULL with the reason in err.
char *path_rule_pattern(const char *spec, const char *root, const char *home,
                        bool for_allow, char *err, size_t errlen);
// A copy of path with the glob characters escaped, so that the result used
// as a pattern matches exactly path.
char *path_escape(const char *path);
