// Unit tests for the audit log writer: every line is one valid JSON object
// with every key, whatever the strings hold; lines reach the file whole,
// when flushed.

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/audit.h"
#include "check.h"

static char path[256];

static json_t *lines(size_t *n) {
  json_t *all = json_array();
  FILE *f = fopen(path, "r");
  char buf[65536];
  while (f && fgets(buf, sizeof(buf), f)) {
    json_error_t err;
    json_t *v = json_loads(buf, 0, &err);
    if (!v)
      printf("# not JSON: %s (%s)\n", buf, err.text);
    json_array_append_new(all, v ? v : json_null());
  }
  if (f)
    fclose(f);
  *n = json_array_size(all);
  return all;
}

static const char *s(json_t *o, const char *k) {
  return json_string_value(json_object_get(o, k));
}

// The escaping of a string as it was written byte by byte (the reference
// the scan of sixteen and eight bytes at a time must agree with).
static void escape_ref(const char *s, char *out) {
  static const char hex[] = "0123456789abcdef";
  size_t n = strlen(s), k = 0;
  json_t *probe = json_stringn(s, n); // NULL when not UTF-8
  bool valid = probe != NULL;
  json_decref(probe);
  out[k++] = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      out[k++] = '\\';
      out[k++] = (char)c;
    } else if (c == '\n') {
      out[k++] = '\\';
      out[k++] = 'n';
    } else if (c < 0x20 || (c >= 0x80 && !valid)) {
      k += (size_t)sprintf(out + k, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
    } else {
      out[k++] = (char)c;
    }
  }
  out[k++] = '"';
  out[k] = '\0';
}

int main(void) {
  char dir[] = "/tmp/acp-audit-XXXXXX";
  ok(mkdtemp(dir) != NULL, "temp dir");
  snprintf(path, sizeof(path), "%s/audit.jsonl", dir);

  json_t *paths = json_pack("[s,s]", "/p/a \"q\".txt", "/p/tab\there");
  struct audit_entry e = {
      .root = "/p",
      .agent = "demo",
      .session = "s1",
      .tool_call_id = "t1",
      .kind = "execute",
      .title = "quote \" backslash \\ newline \n bell \a é ✓ 😀",
      .command = "printf '%s\\n' x | wc -l",
      .paths = paths,
      .decision = "allow",
      .by = "rule",
      .rule = "Bash(printf *)",
      .source = "/p/.acp/settings.json",
      .outcome = "selected",
      .option_id = "allow_once",
      .wait_ms = 12,
  };
  ok(audit_write(path, &e) == 0, "a line is gathered");
  size_t n;
  json_decref(lines(&n));
  ok(n == 0, "nothing in the file before the flush (%zu lines)", n);
  ok(audit_flush() == 0, "flushed");
  json_t *all = lines(&n);
  ok(n == 1, "one line (%zu)", n);
  json_t *l = json_array_get(all, 0);
  ok(json_is_object(l), "the line is a JSON object");
  ok(!strcmp(s(l, "title") ? s(l, "title") : "", e.title),
     "title kept (quote, backslash, controls, UTF-8)");
  ok(!strcmp(s(l, "command") ? s(l, "command") : "", e.command),
     "command kept");
  ok(json_equal(json_object_get(l, "paths"), paths), "paths kept");
  ok(json_integer_value(json_object_get(l, "wait_ms")) == 12, "wait_ms");
  ok(strlen(s(l, "ts") ? s(l, "ts") : "") == 24, "ts is ISO 8601 with ms");
  json_decref(all);

  // Absent values are null; a path that is not UTF-8 is still JSON.
  struct audit_entry bare = {.agent = "demo",
                             .session = "s1",
                             .tool_call_id = "t2",
                             .root = "/p/\xff\xfe-latin1",
                             .decision = "deny",
                             .by = "rule",
                             .outcome = "cancelled"};
  ok(audit_write(path, &bare) == 0, "a line with absent values");
  // A huge command: the line is kept, without it.
  char *big = malloc(20000);
  memset(big, 'x', 19999);
  big[19999] = '\0';
  struct audit_entry huge = e;
  huge.command = big;
  ok(audit_write(path, &huge) == 0, "a line with a 20 KB command");
  free(big);
  // More than the buffer holds: written as it fills, whole lines only.
  for (int i = 0; i < 500; i++)
    audit_write(path, &e);
  audit_close();
  all = lines(&n);
  ok(n == 503, "every line is in the file after close (%zu)", n);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    bad += !json_is_object(json_array_get(all, i));
  ok(bad == 0, "every line is a JSON object (%zu are not)", bad);
  l = json_array_get(all, 1);
  static const char *const keys[] = {
      "ts",     "root",    "agent",    "sessionId", "toolCallId", "kind",
      "title",  "command", "paths",    "decision",  "by",         "rule",
      "source", "outcome", "optionId", "wait_ms"};
  size_t missing = 0;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    missing += json_object_get(l, keys[i]) == NULL;
  ok(missing == 0, "every key is present (%zu missing)", missing);
  ok(json_is_null(json_object_get(l, "rule")), "an absent rule is null");
  ok(json_is_string(json_object_get(l, "root")),
     "a non-UTF-8 root is a string");
  l = json_array_get(all, 2);
  ok(json_is_null(json_object_get(l, "command")) &&
         !strcmp(s(l, "decision") ? s(l, "decision") : "", "allow"),
     "the huge command's line keeps the decision, not the command");
  json_decref(all);

  // The exact text of a line after its timestamp: escapes, UTF-8 kept,
  // every byte of a string that is not UTF-8 as \u00XX, negative and large
  // wait_ms.
  unlink(path);
  json_t *p2 = json_pack("[s,s]", "/p/\xc3\xa9", "/p/a\"b");
  struct audit_entry exact = {.root = "/p/\xc3\xa9\xe2\x82\xac",
                              .agent = "a\"b\\c\n\x01\x1f\x7f",
                              .session = "\xc3\xa9\xff",
                              .tool_call_id = "",
                              .paths = p2,
                              .decision = "allow",
                              .by = "rule",
                              .outcome = "selected",
                              .option_id = "ok",
                              .wait_ms = -42};
  struct audit_entry big_wait = exact;
  big_wait.wait_ms = 9223372036854775807LL;
  struct audit_entry zero = exact;
  zero.wait_ms = 0;
  ok(audit_write(path, &exact) == 0 && audit_write(path, &big_wait) == 0 &&
         audit_write(path, &zero) == 0,
     "three exact lines");
  audit_close();
  static const char *const want[] = {
      ",\"root\":\"/p/\xc3\xa9\xe2\x82\xac\",\"agent\":\"a\\\"b\\\\c\\n\\u0001"
      "\\u001f\x7f\",\"sessionId\":\"\\u00c3\\u00a9\\u00ff\",\"toolCallId\":"
      "\"\","
      "\"kind\":null,\"title\":null,\"command\":null,\"paths\":[\"/p/"
      "\xc3\xa9\","
      "\"/p/a\\\"b\"],\"decision\":\"allow\",\"by\":\"rule\",\"rule\":null,"
      "\"source\":null,\"outcome\":\"selected\",\"optionId\":\"ok\","
      "\"wait_ms\":",
  };
  static const char *const waits[] = {"-42}", "9223372036854775807}", "0}"};
  FILE *f = fopen(path, "r");
  char buf[4096];
  for (int i = 0; i < 3; i++) {
    bool got = f && fgets(buf, sizeof(buf), f);
    // {"ts":"2026-01-02T03:04:05.678Z" is 32 bytes
    bool ts = got && !strncmp(buf, "{\"ts\":\"", 7) && buf[31] == '"' &&
              buf[30] == 'Z' && buf[26] == '.';
    size_t wl = strlen(want[0]);
    ok(ts && !strncmp(buf + 32, want[0], wl) &&
           !strncmp(buf + 32 + wl, waits[i], strlen(waits[i])) &&
           buf[32 + wl + strlen(waits[i])] == '\n',
       "line %d is exactly as expected: %s", i, got ? buf : "(none)");
  }
  if (f)
    fclose(f);

  // Every length up to 40 with each special byte at each position: the
  // title written as the reference escapes it (the plain runs are found
  // sixteen and eight bytes at a time, so each boundary is crossed).
  unlink(path);
  static const char *const specials[] = {"\"", "\\", "\n", "\x01", "\x1f",
                                         "\x7f", "\x80", "\xc3\xa9", "\xf0",
                                         // a byte that a borrow from the
                                         // one before could mark
                                         "\n ", "\"#", "\\]", "\x01 "};
  size_t nspecial = sizeof(specials) / sizeof(*specials), wrote = 0;
  char str[64], want_title[512], line[1024];
  for (size_t len = 0; len <= 40; len++)
    for (size_t at = 0; at <= len; at++)
      for (size_t k = 0; k < nspecial; k++) {
        memset(str, 'a' + (int)(len % 26), len);
        str[len] = '\0';
        if (at < len) {
          size_t sl = strlen(specials[k]);
          memcpy(str + at, specials[k], sl);
          str[at + sl] = '\0';
        }
        struct audit_entry t = {.title = str, .decision = "allow"};
        wrote += audit_write(path, &t) == 0;
      }
  audit_close();
  f = fopen(path, "r");
  size_t same = 0, read_back = 0;
  for (size_t len = 0; len <= 40; len++)
    for (size_t at = 0; at <= len; at++)
      for (size_t k = 0; k < nspecial; k++) {
        memset(str, 'a' + (int)(len % 26), len);
        str[len] = '\0';
        if (at < len) {
          size_t sl = strlen(specials[k]);
          memcpy(str + at, specials[k], sl);
          str[at + sl] = '\0';
        }
        escape_ref(str, want_title);
        if (!f || !fgets(line, sizeof(line), f))
          continue;
        read_back++;
        const char *t = strstr(line, ",\"title\":");
        size_t wl = strlen(want_title);
        if (t && !strncmp(t + 9, want_title, wl) &&
            !strncmp(t + 9 + wl, ",\"command\":null,", 16))
          same++;
        else if (read_back - same < 4)
          printf("# want %s in %s", want_title, line);
      }
  if (f)
    fclose(f);
  ok(wrote == read_back && same == read_back && read_back > 10000,
     "every string escaped as byte by byte (%zu of %zu, %zu written)", same,
     read_back, wrote);
  json_decref(p2);
  json_decref(paths);
  unlink(path);
  rmdir(dir);
  return done_testing();
}
