// A suggested set of rules as a prompt offers it: for test_suggest and
// fuzz_request, which compare the sets the policy keeps with those made
// for the request.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/utf8.h"

// got (n rules) is want (m rules) without those that are not UTF-8.
static inline bool same_utf8(char **got, size_t n, char **want, size_t m) {
  size_t k = 0;
  for (size_t i = 0; i < m; i++) {
    if (!utf8_valid(want[i], strlen(want[i])))
      continue;
    if (k >= n || strcmp(got[k], want[i]) != 0)
      return false;
    k++;
  }
  return k == n && (n > 0) == (got != NULL);
}
