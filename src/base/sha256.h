#pragma once
// SHA-256 (FIPS 180-4), for the trust store's record of what the person
// trusted. Pure. Written here rather than taken from nettle or libcrypto:
// the broker needs one hash a few times per session, and either library
// costs more than this file (nettle's shared library adds ~230 KiB to an
// idle broker's memory, its static archive ~40 KiB of code it never runs).
// tests/unit/test_sha256.c checks it against the FIPS vectors.

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX_LEN (2 * SHA256_LEN + 1) // with the NUL

struct sha256 {
  uint32_t h[8];
  uint64_t nbytes; // total length so far
  uint8_t buf[64]; // a partial block
  size_t nbuf;
};

// Starts a computation.
void sha256_init(struct sha256 *c);
// Adds n bytes of data.
void sha256_update(struct sha256 *c, const void *data, size_t n);
// Writes the digest to out; c must be initialised again before reuse.
void sha256_final(struct sha256 *c, uint8_t out[SHA256_LEN]);
// The digest as lowercase hex in out (NUL-terminated).
void sha256_hex(const uint8_t digest[SHA256_LEN], char out[SHA256_HEX_LEN]);
