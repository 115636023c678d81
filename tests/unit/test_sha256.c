// base/sha256 against the FIPS 180-4 example vectors, fed whole and in
// pieces of every size.

#include "base/sha256.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void hex_of(const void *data, size_t n, size_t piece,
                   char out[SHA256_HEX_LEN]) {
  struct sha256 c;
  uint8_t d[SHA256_LEN];
  const char *p = data;
  sha256_init(&c);
  for (size_t at = 0; at < n; at += piece)
    sha256_update(&c, p + at, n - at < piece ? n - at : piece);
  sha256_final(&c, d);
  sha256_hex(d, out);
}

int main(void) {
  static const struct {
    const char *msg, *hex;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklm"
       "nopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
  };
  char hex[SHA256_HEX_LEN];
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    size_t n = strlen(v[i].msg);
    hex_of(v[i].msg, n, n ? n : 1, hex);
    is_str(hex, v[i].hex, v[i].msg[0] ? v[i].msg : "(empty)");
    bool same = true;
    for (size_t piece = 1; piece <= n; piece++) {
      hex_of(v[i].msg, n, piece, hex);
      same = same && strcmp(hex, v[i].hex) == 0;
    }
    ok(same, "the same digest fed in pieces of every size");
  }
  // One million 'a' (FIPS 180-2 appendix B.3), and lengths around the
  // padding boundary (55, 56, 63, 64 bytes) against sha256sum's digests.
  size_t n = 1000000;
  char *a = malloc(n);
  memset(a, 'a', n);
  hex_of(a, n, 4099, hex);
  is_str(hex,
         "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
         "a million 'a'");
  static const struct {
    size_t n;
    const char *hex;
  } edge[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
  };
  for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
    hex_of(a, edge[i].n, 7, hex);
    char what[32];
    snprintf(what, sizeof(what), "'a' x %zu", edge[i].n);
    is_str(hex, edge[i].hex, what);
  }
  free(a);
  return done_testing();
}
