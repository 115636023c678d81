#include "audit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"

static FILE *audit_file;
static char audit_file_path[4200];

const char *audit_path(void) {
  return audit_file_path;
}

void audit_close(void) {
  if (audit_file)
    fclose(audit_file);
  audit_file = NULL;
}

static int audit_open(const char *path) {
  if (audit_file)
    return 0;
  if (path) {
    snprintf(audit_file_path, sizeof(audit_file_path), "%s", path);
  } else {
    // log_open created the state directory; create it again in case
    // logging is off.
    const char *dir = log_state_dir();
    mkdir(dir, 0700);
    snprintf(audit_file_path, sizeof(audit_file_path), "%s/audit.jsonl", dir);
  }
  audit_file = fopen(audit_file_path, "a");
  if (!audit_file) {
    LOG_E("cannot open the audit log %s: %s", audit_file_path, strerror(errno));
    return -1;
  }
  return 0;
}

static void iso8601(char *buf, size_t len) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char base[32];
  strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

int audit_write(const char *path, const struct audit_entry *e) {
  if (audit_open(path) != 0)
    return -1;
  char ts[48];
  iso8601(ts, sizeof(ts));
  json_t *line = json_pack(
      "{s:s,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:O?,s:s?,s:s?,s:s?,s:s?,"
      "s:s?,s:s?,s:I}",
      "ts", ts, "root", e->root, "agent", e->agent, "sessionId", e->session,
      "toolCallId", e->tool_call_id, "kind", e->kind, "title", e->title,
      "command", e->command, "paths", e->paths, "decision", e->decision, "by",
      e->by, "rule", e->rule, "source", e->source, "outcome", e->outcome,
      "optionId", e->option_id, "wait_ms", (json_int_t)e->wait_ms);
  if (!line)
    return -1;
  // Absent values are written as null so that every line has every key.
  static const char *const keys[] = {"root",   "agent",   "sessionId", "kind",
                                     "title",  "command", "paths",     "rule",
                                     "source", "outcome", "optionId"};
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    if (!json_object_get(line, keys[i]))
      json_object_set_new(line, keys[i], json_null());
  if (!json_is_array(json_object_get(line, "paths")))
    json_object_set_new(line, "paths", json_array());
  // One buffer, one write: the line reaches the file whole or not at all.
  char buf[8192];
  size_t n = json_dumpb(line, buf, sizeof(buf) - 1, JSON_COMPACT);
  char *text = n < sizeof(buf) - 1 ? buf : json_dumps(line, JSON_COMPACT);
  if (text != buf && text)
    n = strlen(text);
  int r = -1;
  if (text) {
    text[n] = '\n';
    r = fwrite(text, 1, n + 1, audit_file) == n + 1 && fflush(audit_file) == 0
            ? 0
            : -1;
  }
  if (text != buf)
    free(text);
  json_decref(line);
  if (r != 0) {
    LOG_E("cannot write the audit log %s: %s", audit_file_path,
          strerror(errno));
    audit_close();
  }
  return r;
}
