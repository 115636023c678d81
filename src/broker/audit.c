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

#include "base/files.h"
#include "base/log.h"
#include "base/utf8.h"

// Lines of one loop iteration are written together (audit_flush); a line
// never straddles two writes, so the file only ever holds whole lines.
#define AUDIT_BUF 65536

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

// Whether any of the eight bytes of w needs a look of its own: an ASCII
// control, a quote, a backslash or a byte above ASCII (exact: never a
// false "no"; a false "yes" only costs the look).
static bool special8(uint64_t w) {
  const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
  uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
  return (((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b) |
          w) &
         high;
}

// A JSON string: ASCII controls, quote and backslash escaped; bytes of
// invalid UTF-8 (paths need not be) written as \u00XX.
static void put_str(struct line *l, const char *s) {
  static const char hex[] = "0123456789abcdef";
  size_t n = strlen(s);
  // Whether s is UTF-8 is only asked at its first byte above ASCII (most
  // strings have none): 0 not asked yet, 1 valid, -1 not.
  int utf8 = 0;
  put(l, "\"", 1);
  size_t run = 0; // bytes copied as they are, not yet put
  for (size_t i = 0; i < n; i++) {
    // Plain ASCII, most of a line, eight bytes at a time.
    uint64_t w;
    while (i + 8 <= n && (memcpy(&w, s + i, 8), !special8(w))) {
      i += 8;
      run += 8;
    }
    if (i == n)
      break;
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x80 && utf8 == 0)
      utf8 = utf8_valid(s, n) ? 1 : -1;
    if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || utf8 > 0)) {
      run++;
      continue;
    }
    put(l, s + i - run, run);
    run = 0;
    char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
    if (c == '"' || c == '\\') {
      esc[1] = (char)c;
      put(l, esc, 2);
    } else if (c == '\n') {
      put(l, "\\n", 2);
    } else {
      put(l, esc, 6);
    }
  }
  put(l, s + n - run, run);
  put(l, "\"", 1);
}

// ,"key": then the value (key: the literal name, its punctuation added
// at compile time).
#define PUT_FIELD(l, key, value)                                               \
  put_field(l, ",\"" key "\":", sizeof(key) + 3, value)

static void put_field(struct line *l, const char *head, size_t n,
                      const char *value) {
  put(l, head, n);
  if (value)
    put_str(l, value);
  else
    put(l, "null", 4);
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
  char buf[8192];
  struct line l = {buf, 0, sizeof(buf) - 1, false};
  if (!format_line(&l, ts, e)) {
    // Too long to keep whole (a huge command): the decision is still
    // recorded, without the fields that made it long.
    struct audit_entry cut = *e;
    cut.root = cut.command = cut.rule = cut.source = NULL;
    cut.paths = NULL;
    cut.npaths = 0;
    cut.title = "(too long for the audit log)";
    l = (struct line){buf, 0, sizeof(buf) - 1, false};
    if (!format_line(&l, ts, &cut))
      return -1;
  }
  buf[l.len++] = '\n';
  if (olen + l.len > sizeof(obuf) && write_out() != 0)
    return -1;
  memcpy(obuf + olen, buf, l.len);
  olen += l.len;
  return 0;
}
