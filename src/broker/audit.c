#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/files.h"
#include "base/log.h"
#include "base/utf8.h"

// Lines of one loop iteration are written together (audit_flush); a line
// never straddles two writes, so the file only ever holds whole lines.
#define AUDIT_BUF 65536
#define AUDIT_LINE_MAX 8192 // with its newline

static int audit_fd = -1;
static char audit_file_path[4200];
static char obuf[AUDIT_BUF];
static size_t olen;
static bool write_failed; // a write failed since the last audit_write

const char *audit_path(void) {
  return audit_file_path;
}

static int write_out(void) {
  int rc = files_write_all(audit_fd, obuf, olen);
  olen = 0;
  if (rc != 0) {
    LOG_E("cannot write the audit log %s: %s", audit_file_path, strerror(rc));
    return -1;
  }
  return 0;
}

int audit_flush(void) {
  if (audit_fd < 0 || olen == 0)
    return 0;
  if (write_out() == 0)
    return 0;
  write_failed = true;
  return -1;
}

void audit_close(void) {
  audit_flush();
  if (audit_fd >= 0)
    close(audit_fd);
  audit_fd = -1;
  olen = 0;
}

static int audit_open(const char *path) {
  if (audit_fd >= 0)
    return 0;
  if (path) {
    snprintf(audit_file_path, sizeof(audit_file_path), "%s", path);
  } else {
    // log_open created the state directory; create it again in case
    // logging is off.
    const char *dir = log_state_dir();
    files_mkdirs(dir);
    snprintf(audit_file_path, sizeof(audit_file_path), "%s/audit.jsonl", dir);
  }
  audit_fd =
      open(audit_file_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (audit_fd < 0) {
    LOG_E("cannot open the audit log %s: %s", audit_file_path, strerror(errno));
    return -1;
  }
  return 0;
}

// The timestamp of the current millisecond, formatted once per second.
static void iso8601(char *buf, size_t len) {
  static time_t last_sec = -1;
  static char base[32];
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (ts.tv_sec != last_sec) {
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    last_sec = ts.tv_sec;
  }
  // The milliseconds by hand: snprintf was a tenth of the audit's cost.
  size_t k = strlen(base);
  long ms = ts.tv_nsec / 1000000;
  if (len < k + 6) {
    buf[0] = '\0';
    return;
  }
  memcpy(buf, base, k);
  buf[k] = '.';
  buf[k + 1] = (char)('0' + ms / 100);
  buf[k + 2] = (char)('0' + ms / 10 % 10);
  buf[k + 3] = (char)('0' + ms % 10);
  buf[k + 4] = 'Z';
  buf[k + 5] = '\0';
}

// A line being built (bounded: a longer line is cut and marked invalid).
struct line {
  char *p;
  size_t len, cap;
  bool overflow;
};

static void put(struct line *l, const char *s, size_t n) {
  if (l->len + n > l->cap) {
    l->overflow = true;
    return;
  }
  memcpy(l->p + l->len, s, n);
  l->len += n;
}

static void puts_(struct line *l, const char *s) {
  put(l, s, strlen(s));
}

// The first byte of [p, end) that a string cannot copy as it is: '"',
// '\\', a control character or a byte above ASCII (end when none); start
// <= p is where the string starts, all plain up to p. Sixteen bytes at a
// time, the last ones by a load that ends at end and overlaps bytes
// already looked at (most strings of a line are short: a byte at a time
// cost more than the rest of the line).
static const unsigned char *plain_end(const unsigned char *start,
                                      const unsigned char *p,
                                      const unsigned char *end) {
#ifdef __SSE2__
  if (end - start >= 16) {
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\'),
                  space = _mm_set1_epi8(0x20);
    for (;;) {
      size_t left = (size_t)(end - p);
      if (left == 0)
        return end;
      const unsigned char *at = left >= 16 ? p : end - 16;
      __m128i x = _mm_loadu_si128((const __m128i *)(const void *)at);
      // Signed, the bytes below 0x20 and those above 0x7F are below 0x20.
      __m128i m = _mm_or_si128(
          _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
          _mm_cmpgt_epi8(space, x));
      unsigned mask = (unsigned)_mm_movemask_epi8(m);
      if (left < 16)
        mask &= 0xffffu << (16 - left); // the bytes from p on
      if (mask)
        return at + __builtin_ctz(mask);
      if (left <= 16)
        return end;
      p += 16;
    }
  }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (end - start >= 8) {
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    for (;;) {
      size_t left = (size_t)(end - p);
      if (left == 0)
        return end;
      const unsigned char *at = left >= 8 ? p : end - 8;
      uint64_t x;
      memcpy(&x, at, 8);
      uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
      // The usual zero-byte test: a borrow only marks a byte above one that
      // is really marked (a byte before p may be: put_str_n looks again).
      uint64_t t =
          ((q - ones) & ~q) | ((b - ones) & ~b) | (x - ones * 0x20) | x;
      t &= highs;
      if (left < 8)
        t &= ~0ull << (8 * (8 - left));
      if (t)
        return at + (__builtin_ctzll(t) >> 3);
      if (left <= 8)
        return end;
      p += 8;
    }
  }
#endif
  while (p < end && *p - 0x20u < 0x60u && *p != '"' && *p != '\\')
    p++;
  return p;
}

// A JSON string: ASCII controls, quote and backslash escaped; bytes of
// invalid UTF-8 (paths need not be) written as \u00XX. The plain runs
// between are found sixteen bytes at a time (plain_end) and put whole.
static void put_str_n(struct line *l, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)s, *end = p + n;
  const unsigned char *run = p; // the first byte not put yet
  // Whether s is UTF-8 is only asked at its first byte above ASCII (most
  // strings have none): 0 not asked yet, 1 valid, -1 not.
  int utf8 = 0;
  put(l, "\"", 1);
  while ((p = plain_end((const unsigned char *)s, p, end)) < end) {
    unsigned char c = *p;
    if (c - 0x20u < 0x60u && c != '"' && c != '\\') {
      p++; // a false mark (a borrow from a byte before p): plain
      continue;
    }
    if (c >= 0x80) {
      if (utf8 == 0)
        utf8 = utf8_valid(s, n) ? 1 : -1;
      if (utf8 > 0) {
        p++; // copied as it is, with the run
        continue;
      }
    }
    put(l, (const char *)run, (size_t)(p - run));
    char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    if (c == '"' || c == '\\') {
      esc[1] = (char)c;
      put(l, esc, 2);
    } else if (c == '\n') {
      put(l, "\\n", 2);
    } else {
      put(l, esc, 6);
    }
    run = ++p;
  }
  put(l, (const char *)run, (size_t)(end - run));
  put(l, "\"", 1);
}

static void put_str(struct line *l, const char *s) {
  put_str_n(l, s, strlen(s));
}

// ,"key": then the value (key: the literal name, its punctuation added
// at compile time).
#define PUT_FIELD(l, key, value)                                               \
  put_field(l, ",\"" key "\":", sizeof(key) + 3, value)

// Inlined at each PUT_FIELD, where n is a constant: a value with nothing
// to escape (most) is copied with its head and quotes in one step.
static inline __attribute__((always_inline)) void
put_field(struct line *l, const char *head, size_t n, const char *value) {
  if (!value) {
    put(l, head, n);
    put(l, "null", 4);
    return;
  }
  size_t k = strlen(value);
  const unsigned char *v = (const unsigned char *)value;
  if (l->len + n + k + 2 <= l->cap && plain_end(v, v, v + k) == v + k) {
    char *o = l->p + l->len;
    memcpy(o, head, n);
    o[n] = '"';
    memcpy(o + n + 1, value, k);
    o[n + 1 + k] = '"';
    l->len += n + k + 2;
    return;
  }
  put(l, head, n);
  put_str_n(l, value, k);
}

// One line for e: every key, absent values as null. Returns false when it
// does not fit.
static bool format_line(struct line *l, const char *ts,
                        const struct audit_entry *e) {
  put(l, "{\"ts\":", 6);
  put_str(l, ts);
  PUT_FIELD(l, "root", e->root);
  PUT_FIELD(l, "agent", e->agent);
  PUT_FIELD(l, "sessionId", e->session);
  PUT_FIELD(l, "toolCallId", e->tool_call_id);
  PUT_FIELD(l, "kind", e->kind);
  PUT_FIELD(l, "title", e->title);
  PUT_FIELD(l, "command", e->command);
  puts_(l, ",\"paths\":[");
  size_t i;
  json_t *v;
  bool first = true;
  json_array_foreach(e->paths, i, v) {
    if (!json_is_string(v))
      continue;
    if (!first)
      put(l, ",", 1);
    first = false;
    put_str(l, json_string_value(v));
  }
  for (i = 0; !e->paths && i < e->npaths; i++) {
    if (i)
      put(l, ",", 1);
    put_str(l, e->path_list[i]);
  }
  put(l, "]", 1);
  PUT_FIELD(l, "decision", e->decision);
  PUT_FIELD(l, "by", e->by);
  PUT_FIELD(l, "rule", e->rule);
  PUT_FIELD(l, "source", e->source);
  PUT_FIELD(l, "outcome", e->outcome);
  PUT_FIELD(l, "optionId", e->option_id);
  // The number by hand (snprintf costs more than the rest of the line).
  char num[48] = ",\"wait_ms\":";
  size_t k = strlen(num);
  unsigned long long w = e->wait_ms < 0 ? 0ULL - (unsigned long long)e->wait_ms
                                        : (unsigned long long)e->wait_ms;
  char digits[24];
  size_t nd = 0;
  do
    digits[nd++] = (char)('0' + w % 10);
  while ((w /= 10) && nd < sizeof(digits));
  if (e->wait_ms < 0)
    num[k++] = '-';
  while (nd)
    num[k++] = digits[--nd];
  num[k++] = '}';
  put(l, num, k);
  return !l->overflow;
}

int audit_write(const char *path, const struct audit_entry *e) {
  if (audit_open(path) != 0)
    return -1;
  if (write_failed) {
    write_failed = false;
    return -1;
  }
  char ts[48];
  iso8601(ts, sizeof(ts));
  // The line is built in place, after the lines already gathered.
  if (olen + AUDIT_LINE_MAX > sizeof(obuf) && write_out() != 0)
    return -1;
  char *buf = obuf + olen;
  struct line l = {buf, 0, AUDIT_LINE_MAX - 1, false};
  if (!format_line(&l, ts, e)) {
    // Too long to keep whole (a huge command): the decision is still
    // recorded, without the fields that made it long.
    struct audit_entry cut = *e;
    cut.root = cut.command = cut.rule = cut.source = NULL;
    cut.paths = NULL;
    cut.npaths = 0;
    cut.title = "(too long for the audit log)";
    l = (struct line){buf, 0, AUDIT_LINE_MAX - 1, false};
    if (!format_line(&l, ts, &cut))
      return -1;
  }
  buf[l.len++] = '\n';
  olen += l.len;
  return 0;
}
