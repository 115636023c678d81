// log: debug lines are written only when the log is open at level debug,
// and LOG_D's arguments are not evaluated otherwise; other levels as set.

#include "base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static int evaluated;

static int counted(void) {
  return ++evaluated;
}

// Whether the file at path has a line containing s.
static bool has(const char *path, const char *s) {
  FILE *f = fopen(path, "r");
  char line[1024];
  bool found = false;
  while (f && !found && fgets(line, sizeof(line), f))
    found = strstr(line, s) != NULL;
  if (f)
    fclose(f);
  return found;
}

int main(void) {
  char dir[] = "/tmp/acp-log-XXXXXX";
  ok(mkdtemp(dir) != NULL, "temp dir");
  char path[256];
  snprintf(path, sizeof(path), "%s/broker.log", dir);

  ok(log_open(path, LOG_LEVEL_DEBUG) == 0, "opened at debug");
  LOG_D("debug line %d", counted());
  LOG_I("info line");
  log_close();
  ok(has(path, "debug line 1") && has(path, "info line"),
     "at debug: debug and info lines written");
  is_int(evaluated, 1, "LOG_D's arguments evaluated once");

  unlink(path);
  ok(log_open(path, LOG_LEVEL_INFO) == 0, "opened at info");
  LOG_D("hidden line %d", counted());
  LOG_I("shown line");
  log_close();
  ok(!has(path, "hidden line") && has(path, "shown line"),
     "at info: no debug line, the info line");
  is_int(evaluated, 1, "LOG_D's arguments not evaluated at info");

  // Closed: nothing is written, nothing evaluated.
  LOG_D("closed %d", counted());
  is_int(evaluated, 1, "nor once the log is closed");
  unlink(path);
  ok(log_open(path, LOG_LEVEL_DEBUG) == 0, "opened at debug again");
  log_open(path, LOG_LEVEL_OFF); // set off while a file is open
  LOG_D("off %d", counted());
  log_close();
  ok(!has(path, "off"), "set off: no debug line");
  unlink(path);
  rmdir(dir);
  return done_testing();
}
