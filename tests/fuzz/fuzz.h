#pragma once
// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.c): the entry points and
// a property check that aborts (libFuzzer keeps the input as a crash).

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                  \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz property failed at %s:%d: %s\n  ", __FILE__,       \
              __LINE__, #cond);                                                \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

// FUZZ_STRICT=1: also fail on the known issues that a target otherwise
// skips or tolerates (each has a reproducer in tests/fuzz/regressions/).
static inline bool fuzz_strict(void) {
  const char *e = getenv("FUZZ_STRICT");
  return e && strcmp(e, "1") == 0;
}
