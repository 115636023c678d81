#pragma once
// The trust store: per project root, the SHA-256 of the permissive content
// the person trusted ($XDG_STATE_HOME/acp-broker/trust.json, a JSON object
// {"<root>": "<hex digest>"}). Also the small file helpers settings.c
// shares with it: XDG paths and atomic writes.
//
// SHA-256 rather than a fast non-cryptographic hash: a repository that could
// craft content colliding with what the person trusted would loosen its own
// permissions.

#include <stddef.h>
#include <stdint.h>

#define TRUST_SHA256_LEN 32
#define TRUST_HEX_LEN (2 * TRUST_SHA256_LEN + 1) // with the NUL

struct trust_sha256 {
  uint32_t h[8];
  uint64_t nbytes; // total length so far
  uint8_t buf[64]; // a partial block
  size_t nbuf;
};

// Starts a SHA-256 computation (FIPS 180-4).
void trust_sha256_init(struct trust_sha256 *c);
// Adds n bytes of data.
void trust_sha256_update(struct trust_sha256 *c, const void *data, size_t n);
// Writes the digest to out; c must be initialised again before reuse.
void trust_sha256_final(struct trust_sha256 *c, uint8_t out[TRUST_SHA256_LEN]);
// The digest of data as lowercase hex in out (NUL-terminated).
void trust_sha256_hex(const void *data, size_t n, char out[TRUST_HEX_LEN]);

// $var when it holds an absolute path, else $HOME/fallback; then "/" leaf.
// A new string, or NULL when neither is usable (no HOME).
char *trust_xdg_path(const char *var, const char *fallback, const char *leaf);
// The trust store's path (a new string), or NULL without HOME.
char *trust_store_path(void);
// Looks up root. Returns 0 with *hash a new string (NULL when root is not
// trusted), or -1 with a reason in err (an unreadable or malformed store:
// nothing counts as trusted then).
int trust_get(const char *root, char **hash, char *err, size_t errlen);
// Records hash for root (atomically). Returns 0, or -1 with a reason in err.
int trust_put(const char *root, const char *hash, char *err, size_t errlen);

// Creates dir and its missing parents (new ones 0700). Returns 0 or -1.
int trust_mkdirs(const char *dir, char *err, size_t errlen);
// Replaces path with n bytes of data: a temporary file in the same directory
// (created with its parents), fsync, rename. An existing file keeps its
// permission bits; a new one gets mode. Returns 0, or -1 with err.
int trust_write_file(const char *path, const char *data, size_t n,
                     unsigned mode, char *err, size_t errlen);
