#pragma once
// The lexical pieces of JSON as jansson's json_loadb reads them, shared by
// json2mp (JSON to msgpack) and jsonfast (JSON to a jansson tree). Pure;
// every function reads [p, end) and never past end.

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

// Longest number token converted; longer ones (valid but absurd) are left to
// json_loadb rather than copied to the heap.
#define JSONLEX_NUM_MAX 100

// JSON's four whitespace characters, the ones jansson skips.
static inline const unsigned char *jsonlex_ws(const unsigned char *p,
                                              const unsigned char *end) {
  // Compact JSON has none: one compare for anything above the space.
  while (p < end && *p <= ' ' &&
         (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
    p++;
  return p;
}

// The first byte at or after p that a string cannot copy as it is: '"',
// '\\', a control character or a byte above ASCII (end when none). Sixteen
// bytes at a time (SSE2), then eight, while they are all plain.
static inline const unsigned char *jsonlex_plain(const unsigned char *p,
                                                 const unsigned char *end) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    // Signed, the bytes below 0x20 and those above 0x7F are less than 0x20.
    __m128i m = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
        _mm_cmpgt_epi8(space, x));
    int mask = _mm_movemask_epi8(m);
    if (mask)
      return p + __builtin_ctz((unsigned)mask);
    p += 16;
  }
#endif
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  while (end - p >= 8) {
    uint64_t x;
    memcpy(&x, p, 8);
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    // A byte of the result has its high bit set when that byte of x is '"',
    // '\\', below 0x20 or above 0x7F (the usual zero-byte test; a borrow can
    // only mark a byte above one that is really marked).
    // Bytes below the first such byte borrow nothing, so the lowest mark
    // is exact (little-endian: the lowest byte is the first).
    uint64_t t = ((q - ones) & ~q) | ((b - ones) & ~b) | (x - ones * 0x20) | x;
    t &= highs;
    if (t) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return p + (__builtin_ctzll(t) >> 3);
#else
      break;
#endif
    }
    p += 8;
  }
  while (p < end && *p - 0x20u < 0x60u && *p != '"' && *p != '\\')
    p++;
  return p;
}

// The four hex digits at p as a code unit, -1 when they are not.
static inline int32_t jsonlex_hex4(const unsigned char *p,
                                   const unsigned char *end) {
  if (end - p < 4)
    return -1;
  int32_t v = 0;
  for (int i = 0; i < 4; i++) {
    unsigned c = p[i];
    if (c >= '0' && c <= '9')
      c -= '0';
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      c = (c | 0x20) - 'a' + 10;
    else
      return -1;
    v = v << 4 | (int32_t)c;
  }
  return v;
}

static inline size_t jsonlex_utf8_put(uint32_t cp, unsigned char *o) {
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | cp >> 6);
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

// Decodes the escape whose backslash is at *pp into out and moves *pp past
// it; its length, or 0 when jansson would reject it (including \u0000,
// refused without JSON_ALLOW_NUL, and lone or mismatched surrogates).
static inline size_t jsonlex_unescape(const unsigned char **pp,
                                      const unsigned char *end,
                                      unsigned char out[4]) {
  const unsigned char *p = *pp;
  if (end - p < 2)
    return 0;
  p += 2;
  *pp = p;
  switch (p[-1]) {
  case '"':
  case '\\':
  case '/':
    out[0] = p[-1];
    return 1;
  case 'b':
    out[0] = '\b';
    return 1;
  case 'f':
    out[0] = '\f';
    return 1;
  case 'n':
    out[0] = '\n';
    return 1;
  case 'r':
    out[0] = '\r';
    return 1;
  case 't':
    out[0] = '\t';
    return 1;
  case 'u':
    break;
  default:
    return 0;
  }
  int32_t cp = jsonlex_hex4(p, end);
  if (cp <= 0) // invalid, or \u0000
    return 0;
  p += 4;
  if (cp >= 0xDC00 && cp <= 0xDFFF)
    return 0; // a low surrogate first
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    // A high surrogate needs a low one right after it.
    if (end - p < 2 || p[0] != '\\' || p[1] != 'u')
      return 0;
    int32_t lo = jsonlex_hex4(p + 2, end);
    if (lo < 0xDC00 || lo > 0xDFFF)
      return 0;
    p += 6;
    cp = ((cp - 0xD800) << 10) + (lo - 0xDC00) + 0x10000;
  }
  *pp = p;
  return jsonlex_utf8_put((uint32_t)cp, out);
}

static inline bool jsonlex_digit(const unsigned char *p,
                                 const unsigned char *end) {
  return p < end && *p >= '0' && *p <= '9';
}

// A number token at *pp, with jansson's grammar and conversions: integers
// through strtoll (overflow is an error), the rest through strtod (overflow
// to infinity is an error, underflow is not). Sets *real and *i or *d and
// moves *pp past it; false when jansson would refuse it or it is longer
// than JSONLEX_NUM_MAX.
static inline bool jsonlex_number(const unsigned char **pp,
                                  const unsigned char *end, bool *real,
                                  long long *i, double *d) {
  const unsigned char *s = *pp, *p = s;
  *real = false;
  if (p < end && *p == '-')
    p++;
  if (!jsonlex_digit(p, end))
    return false;
  if (*p == '0')
    p++;
  else
    while (jsonlex_digit(p, end))
      p++;
  if (jsonlex_digit(p, end))
    return false; // a leading zero
  if (p < end && *p == '.') {
    *real = true;
    if (!jsonlex_digit(++p, end))
      return false;
    while (jsonlex_digit(p, end))
      p++;
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    *real = true;
    p++;
    if (p < end && (*p == '+' || *p == '-'))
      p++;
    if (!jsonlex_digit(p, end))
      return false;
    while (jsonlex_digit(p, end))
      p++;
  }
  size_t n = (size_t)(p - s);
  if (n > JSONLEX_NUM_MAX)
    return false; // an integer that long overflows anyway
  *pp = p;
  bool neg = *s == '-';
  if (!*real && n - neg <= 19) {
    // Up to 19 digits fit in 64 bits unsigned: strtoll's range checked
    // without its copy.
    uint64_t v = 0;
    for (const unsigned char *q = s + neg; q < p; q++)
      v = v * 10 + (uint64_t)(*q - '0');
    if (v > (uint64_t)INT64_MAX + neg)
      return false;
    *i = neg ? (long long)(0 - v) : (long long)v;
    return true;
  }
  char buf[JSONLEX_NUM_MAX + 1];
  memcpy(buf, s, n);
  buf[n] = '\0';
  errno = 0;
  if (!*real) {
    *i = strtoll(buf, NULL, 10);
    return errno != ERANGE;
  }
  // The broker keeps the C locale, so strtod's decimal point is jansson's.
  *d = strtod(buf, NULL);
  return !((*d == HUGE_VAL || *d == -HUGE_VAL) && errno == ERANGE);
}
