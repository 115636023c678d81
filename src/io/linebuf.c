#include "linebuf.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

// The buffer holds at most max + 1 bytes: a line of exactly max bytes may be
// followed by the "\r" of its "\r\n", and we cannot drop that "\r" until the
// "\n" shows up in a later feed.
//
// While an overlong line streams (skipped > 0) nothing is kept except, when
// the data seen so far ends in "\r", that one byte: it is counted only if
// more bytes follow, so the reported length excludes a "\r\n" ending.
//
//   framing --(tail would exceed max+1)--> skipping --("\n")--> framing
//      ^                                      | on_overlong(len)
//      +----------- "\n": on_line ------------+ (from framing)

struct linebuf_cbs {
  linebuf_line_cb on_line;
  linebuf_overlong_cb on_overlong;
  void *ud;
};

static void end_line(struct linebuf *lb, const char *seg, size_t n,
                     const struct linebuf_cbs *cbs);
static void keep_tail(struct linebuf *lb, const char *p, size_t n);
static void emit(const struct linebuf *lb, const char *line, size_t len,
                 const struct linebuf_cbs *cbs);
static void discard(struct linebuf *lb, const char *p, size_t n);
static void append(struct linebuf *lb, const char *p, size_t n);
static size_t add_sat(size_t a, size_t b);
static bool is_blank(const char *s, size_t n);

void linebuf_init(struct linebuf *lb, size_t max) {
  // Keep max + 1 (the buffer's bound) and its doubling free of overflow.
  if (max > SIZE_MAX / 4)
    max = SIZE_MAX / 4;
  *lb = (struct linebuf){.max = max};
}

void linebuf_free(struct linebuf *lb) {
  free(lb->data);
  *lb = (struct linebuf){.max = lb->max};
}

void linebuf_feed(struct linebuf *lb, const char *data, size_t n,
                  linebuf_line_cb on_line, linebuf_overlong_cb on_overlong,
                  void *ud) {
  struct linebuf_cbs cbs = {on_line, on_overlong, ud};
  const char *p = data, *end = data + n;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) {
      keep_tail(lb, p, (size_t)(end - p));
      return;
    }
    end_line(lb, p, (size_t)(nl - p), &cbs);
    p = nl + 1;
  }
}

size_t linebuf_pending(const struct linebuf *lb) {
  return add_sat(lb->skipped, lb->len);
}

// Completes the current line with seg (the bytes before its "\n").
static void end_line(struct linebuf *lb, const char *seg, size_t n,
                     const struct linebuf_cbs *cbs) {
  if (!lb->skipped && lb->len == 0) {
    emit(lb, seg, n, cbs); // the common case: no copy at all
    return;
  }
  if (!lb->skipped && n <= lb->max + 1 - lb->len) {
    append(lb, seg, n);
    emit(lb, lb->data, lb->len, cbs);
    lb->len = 0;
    return;
  }
  discard(lb, seg, n);
  size_t total = lb->skipped;
  lb->skipped = 0;
  lb->len = 0; // a held "\r" ended the line: not part of it
  if (cbs->on_overlong)
    cbs->on_overlong(cbs->ud, total);
}

// Keeps the bytes of an unfinished line, or counts them once it is too long.
static void keep_tail(struct linebuf *lb, const char *p, size_t n) {
  if (lb->skipped || n > lb->max + 1 - lb->len)
    discard(lb, p, n);
  else
    append(lb, p, n);
}

static void emit(const struct linebuf *lb, const char *line, size_t len,
                 const struct linebuf_cbs *cbs) {
  if (len && line[len - 1] == '\r')
    len--;
  if (len > lb->max) {
    if (cbs->on_overlong)
      cbs->on_overlong(cbs->ud, len);
    return;
  }
  if (!is_blank(line, len) && cbs->on_line)
    cbs->on_line(cbs->ud, line, len);
}

// Moves the line into skipping state: counts the held bytes plus p[0..n),
// keeping back only a final "\r" that may turn out to be a line ending.
static void discard(struct linebuf *lb, const char *p, size_t n) {
  size_t total = add_sat(add_sat(lb->skipped, lb->len), n);
  bool cr = n ? p[n - 1] == '\r' : lb->len && lb->data[lb->len - 1] == '\r';
  lb->len = 0;
  if (cr) {
    append(lb, "\r", 1);
    total--;
  }
  // Only reached with more than max + 1 bytes, so total stays > 0 and
  // "skipped != 0" keeps meaning "skipping".
  lb->skipped = total;
}

// Appends n bytes; callers guarantee len + n <= max + 1.
static void append(struct linebuf *lb, const char *p, size_t n) {
  size_t need = lb->len + n;
  if (need > lb->cap) {
    size_t cap = lb->cap ? lb->cap : 64;
    while (cap < need)
      cap *= 2; // cannot overflow: need <= max + 1 <= SIZE_MAX / 4 + 1
    if (cap > lb->max + 1)
      cap = lb->max + 1;
    lb->data = xrealloc(lb->data, cap);
    lb->cap = cap;
  }
  memcpy(lb->data + lb->len, p, n);
  lb->len = need;
}

// A stream longer than SIZE_MAX bytes reports SIZE_MAX rather than wrapping.
static size_t add_sat(size_t a, size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

// JSON's whitespace; such lines are skipped as the reference SDK does.
static bool is_blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
      return false;
  return true;
}
