#pragma once
// The trust store: per project root, the SHA-256 of the permissive content
// the person trusted ($XDG_STATE_HOME/acp-broker/trust.json, a JSON object
// {"<root>": "<hex digest>"}), written atomically (base/files.h).
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

// The trust store's path (a new string), or NULL without HOME.
char *trust_store_path(void);
// Looks up root. Returns 0 with *hash a new string (NULL when root is not
// trusted), or -1 with a reason in err (an unreadable or malformed store:
// nothing counts as trusted then).
int trust_get(const char *root, char **hash, char *err, size_t errlen);
// Records hash for root (atomically). Returns 0, or -1 with a reason in err.
int trust_put(const char *root, const char *hash, char *err, size_t errlen);
