#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "files.h"

// The log rotates to <path>.1 when it grows past this size, so it never
// takes more than twice this much disk.
#define LOG_MAX_BYTES (4L * 1024 * 1024)

static FILE *log_file;
static enum log_level log_min = LOG_LEVEL_INFO;
static char log_file_path[4200];
static char state_dir[4096];
bool log_debug_on;

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

const char *log_state_dir(void) {
  if (state_dir[0])
    return state_dir;
  char *dir = files_xdg_path("XDG_STATE_HOME", ".local/state", "acp-broker");
  const char *home = getenv("HOME");
  if (dir)
    snprintf(state_dir, sizeof(state_dir), "%s", dir);
  else // no usable HOME: as it is, or here
    snprintf(state_dir, sizeof(state_dir), "%s/.local/state/acp-broker",
             home ? home : ".");
  free(dir);
  return state_dir;
}

int log_open(const char *path, enum log_level level) {
  log_min = level;
  log_debug_on = false;
  if (level == LOG_LEVEL_OFF)
    return 0;
  if (path) {
    snprintf(log_file_path, sizeof(log_file_path), "%s", path);
  } else {
    const char *dir = log_state_dir();
    if (files_mkdirs(dir) != 0)
      return -1;
    snprintf(log_file_path, sizeof(log_file_path), "%s/broker.log", dir);
  }
  log_file = fopen(log_file_path, "a");
  if (!log_file) {
    log_file_path[0] = '\0';
    return -1;
  }
  log_debug_on = level <= LOG_LEVEL_DEBUG;
  return 0;
}

void log_close(void) {
  if (log_file)
    fclose(log_file);
  log_file = NULL;
  log_debug_on = false;
}

const char *log_path(void) {
  return log_file_path;
}

enum log_level log_level_parse(const char *s) {
  if (!s)
    return LOG_LEVEL_INFO;
  static const char *const names[] = {"debug", "info", "warn", "error", "off"};
  for (int i = 0; i <= LOG_LEVEL_OFF; i++)
    if (strcmp(s, names[i]) == 0)
      return (enum log_level)i;
  return LOG_LEVEL_INFO;
}

// Moves a full log aside so that the file stays bounded.
static void rotate_if_full(void) {
  long size = ftell(log_file);
  if (size < LOG_MAX_BYTES)
    return;
  char old[4300];
  snprintf(old, sizeof(old), "%s.1", log_file_path);
  fclose(log_file);
  rename(log_file_path, old);
  log_file = fopen(log_file_path, "a");
}

void log_write(enum log_level level, const char *func, int line,
               const char *fmt, ...) {
  if (!log_file || level < log_min || level >= LOG_LEVEL_OFF)
    return;
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char ts[32];
  strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
  fprintf(log_file, "%s.%03ld %d %s %s:%d: ", ts, (long)tv.tv_usec / 1000,
          (int)getpid(), level_names[level], func, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(log_file, fmt, ap);
  va_end(ap);
  fputc('\n', log_file);
  fflush(log_file);
  rotate_if_full();
}
