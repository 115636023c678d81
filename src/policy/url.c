#include "url.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

static const char *const special_schemes[] = {"ftp",   "file", "http",
                                              "https", "ws",   "wss"};

static enum url_status host_parse(const char *s, size_t n, char **out);
static enum url_status ipv6_parse(const char *s, size_t n, char **out);
static bool ends_in_number(const char *h);
static enum url_status ipv4_parse(const char *h, char **out);
static int ipv4_number(const char *s, size_t n, uint64_t *v);

static bool alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool digit(char c) {
  return c >= '0' && c <= '9';
}

static char lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

enum url_status url_parse(const char *in, size_t n, struct url *u) {
  *u = (struct url){0};
  if (n > URL_LEN_MAX)
    return URL_UNSURE;
  // Leading and trailing C0 controls and spaces go; tabs and newlines go
  // from everywhere (they never end anything).
  while (n && (unsigned char)in[0] <= 0x20)
    in++, n--;
  while (n && (unsigned char)in[n - 1] <= 0x20)
    n--;
  char *s = xmalloc(n + 1);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (in[i] != '\t' && in[i] != '\n' && in[i] != '\r')
      s[m++] = in[i];
  s[m] = '\0';
  enum url_status st = URL_INVALID;
  // scheme := ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
  size_t i = 0;
  if (!alpha(s[0]))
    goto out;
  while (alpha(s[i]) || digit(s[i]) || s[i] == '+' || s[i] == '-' ||
         s[i] == '.')
    i++;
  if (s[i] != ':')
    goto out; // a relative reference: no base, so Node throws
  if (i >= sizeof(u->scheme)) {
    st = URL_UNSURE;
    goto out;
  }
  for (size_t k = 0; k < i; k++)
    u->scheme[k] = lower(s[k]);
  for (size_t k = 0; k < sizeof(special_schemes) / sizeof(*special_schemes);
       k++)
    u->special = u->special || strcmp(u->scheme, special_schemes[k]) == 0;
  if (!u->special || strcmp(u->scheme, "file") == 0) {
    st = URL_OK; // no host the rules could name
    goto out;
  }
  // Special authority: any run of slashes and backslashes, then the
  // authority up to `/`, `\`, `?` or `#`; the host follows the last `@`.
  size_t p = i + 1;
  while (s[p] == '/' || s[p] == '\\')
    p++;
  size_t end = p;
  while (s[end] && !strchr("/\\?#", s[end]))
    end++;
  for (size_t k = p; k < end; k++)
    if (s[k] == '@')
      p = k + 1;
  size_t hend = p;
  if (s[p] == '[') {
    while (hend < end && s[hend] != ']')
      hend++;
    if (hend == end)
      goto out;
    hend++;
  } else {
    while (hend < end && s[hend] != ':')
      hend++;
  }
  if (hend < end) { // a port: digits only (maybe none), at most 65535
    if (s[hend] != ':')
      goto out;
    uint32_t port = 0;
    for (size_t k = hend + 1; k < end; k++) {
      if (!digit(s[k]))
        goto out;
      port = port * 10 + (uint32_t)(s[k] - '0');
      if (port > 65535)
        goto out;
    }
  }
  if (hend == p)
    goto out; // an empty host
  st = host_parse(s + p, hend - p, &u->host);
  if (st != URL_OK)
    goto out;
  size_t q = end;
  while (s[q] && s[q] != '?' && s[q] != '#')
    q++;
  u->path = xstrndup(s + end, q - end);
  for (char *c = u->path; *c; c++)
    if (*c == '\\')
      *c = '/';
  if (!u->path[0]) {
    free(u->path);
    u->path = xstrdup("/");
  }
out:
  free(s);
  if (st != URL_OK)
    url_clear(u);
  return st;
}

void url_clear(struct url *u) {
  free(u->host);
  free(u->path);
  u->host = u->path = NULL;
}

// The host of a special URL: an IPv6 literal, an IPv4 address in any of
// its numeric forms, or a domain (percent-decoded, lower case).
static enum url_status host_parse(const char *s, size_t n, char **out) {
  if (s[0] == '[')
    return s[n - 1] == ']' ? ipv6_parse(s + 1, n - 2, out) : URL_INVALID;
  char *h = xmalloc(n + 1);
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int hi = i + 2 < n ? url_hex_value(s[i + 1]) : -1;
    int lo = i + 2 < n ? url_hex_value(s[i + 2]) : -1;
    if (s[i] == '%' && hi >= 0 && lo >= 0) {
      h[m++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      h[m++] = s[i];
    }
  }
  h[m] = '\0';
  enum url_status st = URL_OK;
  for (size_t i = 0; i < m && st == URL_OK; i++) {
    unsigned char c = (unsigned char)h[i];
    if (c >= 0x80)
      st = URL_UNSURE; // IDNA (UTS #46) would map it: not modelled
    else if (c <= 0x20 || c == 0x7f || strchr("#%/:<>?@[\\]^|", c))
      st = URL_INVALID; // a forbidden domain code point
    else
      h[i] = lower(h[i]);
  }
  if (st == URL_OK && m == 0)
    st = URL_INVALID;
  if (st == URL_OK && ends_in_number(h)) {
    char *v4 = NULL;
    st = ipv4_parse(h, &v4);
    free(h);
    h = v4;
  }
  if (st != URL_OK) {
    free(h);
    return st;
  }
  *out = h;
  return URL_OK;
}

// The last label (a trailing empty one aside) is all digits, or 0x hex.
static bool ends_in_number(const char *h) {
  size_t n = strlen(h);
  if (n && h[n - 1] == '.')
    n--;
  size_t start = n;
  while (start && h[start - 1] != '.')
    start--;
  const char *l = h + start;
  size_t ln = n - start;
  if (!ln)
    return false;
  size_t d = 0;
  while (d < ln && digit(l[d]))
    d++;
  if (d == ln)
    return true;
  if (ln >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
    for (size_t k = 2; k < ln; k++)
      if (url_hex_value(l[k]) < 0)
        return false;
    return true;
  }
  return false;
}

// One part of an IPv4 address: decimal, 0x hex or 0-prefixed octal.
// Returns -1 when it is not a number; values past 2^32 are clamped.
static int ipv4_number(const char *s, size_t n, uint64_t *v) {
  unsigned base = 10;
  if (n >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    n -= 2;
  } else if (n >= 2 && s[0] == '0') {
    base = 8;
    s++;
    n--;
  }
  *v = 0;
  if (n == 0)
    return base == 10 ? -1 : 0; // "" is not a number; "0x" is zero
  for (size_t i = 0; i < n; i++) {
    int d = url_hex_value(s[i]);
    if (d < 0 || (unsigned)d >= base)
      return -1;
    *v = *v * base + (unsigned)d;
    if (*v > UINT32_MAX)
      *v = (uint64_t)UINT32_MAX + 1;
  }
  return 0;
}

static enum url_status ipv4_parse(const char *h, char **out) {
  uint64_t part[4];
  size_t np = 0, n = strlen(h);
  if (n && h[n - 1] == '.')
    n--; // one trailing dot is dropped
  for (size_t start = 0;;) {
    size_t e = start;
    while (e < n && h[e] != '.')
      e++;
    if (np == 4 || ipv4_number(h + start, e - start, &part[np]) < 0)
      return URL_INVALID;
    np++;
    if (e >= n)
      break;
    start = e + 1;
  }
  uint64_t addr = part[np - 1];
  for (size_t i = 0; i + 1 < np; i++) {
    if (part[i] > 255)
      return URL_INVALID;
    addr += part[i] << (8 * (3 - i));
  }
  if (part[np - 1] >= ((uint64_t)1 << (8 * (5 - np))))
    return URL_INVALID;
  char buf[16];
  snprintf(buf, sizeof(buf), "%u.%u.%u.%u", (unsigned)(addr >> 24) & 255,
           (unsigned)(addr >> 16) & 255, (unsigned)(addr >> 8) & 255,
           (unsigned)addr & 255);
  *out = xstrdup(buf);
  return URL_OK;
}

// The URL Standard's IPv6 parser and serialiser (compressed, lower case).
static enum url_status ipv6_parse(const char *s, size_t n, char **out) {
  uint16_t a[8] = {0};
  int piece = 0, compress = -1;
  size_t p = 0;
#define C (p < n ? s[p] : '\0')
  if (C == ':') {
    if (p + 1 >= n || s[p + 1] != ':')
      return URL_INVALID;
    p += 2;
    compress = ++piece;
  }
  while (p < n) {
    if (piece == 8)
      return URL_INVALID;
    if (C == ':') {
      if (compress != -1)
        return URL_INVALID;
      p++;
      compress = ++piece;
      continue;
    }
    unsigned value = 0, length = 0;
    while (length < 4 && p < n && url_hex_value(C) >= 0) {
      value = value * 16 + (unsigned)url_hex_value(C);
      p++;
      length++;
    }
    if (C == '.') {
      if (length == 0 || piece > 6)
        return URL_INVALID;
      p -= length;
      int seen = 0;
      while (p < n) {
        int v4 = -1;
        if (seen > 0) {
          if (C == '.' && seen < 4)
            p++;
          else
            return URL_INVALID;
        }
        if (!digit(C))
          return URL_INVALID;
        while (p < n && digit(C)) {
          int d = C - '0';
          if (v4 == -1)
            v4 = d;
          else if (v4 == 0)
            return URL_INVALID;
          else
            v4 = v4 * 10 + d;
          if (v4 > 255)
            return URL_INVALID;
          p++;
        }
        a[piece] = (uint16_t)(a[piece] * 0x100 + v4);
        seen++;
        if (seen == 2 || seen == 4)
          piece++;
      }
      if (seen != 4)
        return URL_INVALID;
      break;
    } else if (C == ':') {
      p++;
      if (p >= n)
        return URL_INVALID;
    } else if (p < n) {
      return URL_INVALID;
    }
    a[piece++] = (uint16_t)value;
  }
#undef C
  if (compress != -1) {
    int swaps = piece - compress;
    piece = 7;
    while (piece != 0 && swaps > 0) {
      uint16_t t = a[piece];
      a[piece] = a[compress + swaps - 1];
      a[compress + swaps - 1] = t;
      piece--;
      swaps--;
    }
  } else if (piece != 8) {
    return URL_INVALID;
  }
  // The first longest run of two or more zero pieces becomes "::".
  int best = -1, best_len = 1;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && a[j] == 0)
      j++;
    if (j - i > best_len) {
      best = i;
      best_len = j - i;
    }
    i = j > i ? j : i + 1;
  }
  char buf[64];
  size_t o = 0;
  buf[o++] = '[';
  for (int i = 0; i < 8; i++) {
    if (i == best) {
      o += (size_t)snprintf(buf + o, sizeof(buf) - o, i == 0 ? "::" : ":");
      i += best_len - 1;
      continue;
    }
    o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%x%s", a[i],
                          i < 7 ? ":" : "");
  }
  snprintf(buf + o, sizeof(buf) - o, "]");
  *out = xstrdup(buf);
  return URL_OK;
}

int url_hex_value(char c) {
  if (digit(c))
    return c - '0';
  c = lower(c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}
