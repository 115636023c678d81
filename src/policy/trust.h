#pragma once
// The trust store: per project root, the SHA-256 of the permissive content
// the person trusted ($XDG_STATE_HOME/acp-broker/trust.json, a JSON object
// {"<root>": "<hex digest>"}), written atomically (base/files.h).
//
// SHA-256 rather than a fast non-cryptographic hash: a repository that could
// craft content colliding with what the person trusted would loosen its own
// permissions.

#include <jansson.h>
#include <stddef.h>

#define TRUST_HEX_LEN                                                          \
  65 // a SHA-256 digest in hex, with the NUL (SHA256_HEX_LEN)

// The hash a trust record holds for a project's permissive content
// (settings.c builds it): SHA-256 (base/sha256.h) of "acp-broker trust v1\n"
// and the content as compact JSON with sorted keys and \u escapes for
// non-ASCII, in lowercase hex. A new string of TRUST_HEX_LEN bytes. This
// serialisation is the trust store's format: records written by earlier
// versions must keep matching.
char *trust_hash(const json_t *permissive);
// The trust store's path (a new string), or NULL without HOME.
char *trust_store_path(void);
// Looks up root. Returns 0 with *hash a new string (NULL when root is not
// trusted), or -1 with a reason in err (an unreadable or malformed store:
// nothing counts as trusted then).
int trust_get(const char *root, char **hash, char *err, size_t errlen);
// Records hash for root (atomically). Returns 0, or -1 with a reason in err.
int trust_put(const char *root, const char *hash, char *err, size_t errlen);
