#include "utf8.h"

#include <stdint.h>

// Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 when it is
// not one: jansson's utf8_check_first/utf8_check_full, i.e. no overlong
// forms, no surrogates, nothing above U+10FFFF, no truncation.
size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned c = p[0];
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0; // continuation byte, C0/C1 or F5..FF as lead
  }
  if ((size_t)(end - p) < n)
    return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) ||
      (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000))
    return 0;
  return n;
}

bool utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  while (p < end) {
    if (*p == 0)
      return false;
    size_t n = *p < 0x80 ? 1 : utf8_len(p, end);
    if (n == 0)
      return false;
    p += n;
  }
  return true;
}
