#pragma once
// A libuv loop for the unit tests that run real processes (acp, proc,
// term): one loop per binary, waits for events with a timer only as a
// failsafe (no timing assertions), a scratch directory and a debug log,
// and a look at whether a process still runs. Like check.h, everything is
// static in this header.

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/log.h"
#include "check.h"

#define UVTEST_WAIT_MS 20000 // the failsafe: nothing here should take that

static uv_loop_t loop;
static uv_timer_t uvtest_failsafe, uvtest_tick;
static bool uvtest_timed_out;
static char tmp[256];     // a scratch directory of this run
static char logfile[300]; // the broker's debug log, in tmp

static inline void uvtest_failsafe_cb(uv_timer_t *t) {
  (void)t;
  uvtest_timed_out = true;
}

static inline void uvtest_tick_cb(uv_timer_t *t) {
  (void)t;
}

static inline void uvtest_begin(bool poll) {
  uvtest_timed_out = false;
  uv_timer_start(&uvtest_failsafe, uvtest_failsafe_cb, UVTEST_WAIT_MS, 0);
  if (poll)
    uv_timer_start(&uvtest_tick, uvtest_tick_cb, 10, 10);
}

static inline void uvtest_end(void) {
  uv_timer_stop(&uvtest_failsafe);
  uv_timer_stop(&uvtest_tick);
}

// Runs the loop until cond holds (or the failsafe fires). POLL also wakes
// the loop every 10 ms, for conditions no handle reports (a file, a pid).
#define UVTEST_WAIT(cond, poll)                                                \
  do {                                                                         \
    uvtest_begin(poll);                                                        \
    while (!(cond) && !uvtest_timed_out)                                       \
      uv_run(&loop, UV_RUN_ONCE);                                              \
    uvtest_end();                                                              \
  } while (0)
#define WAIT(cond) UVTEST_WAIT(cond, false)
#define POLL(cond) UVTEST_WAIT(cond, true)

static bool uvtest_slept;
static inline void uvtest_sleep_cb(uv_timer_t *t) {
  (void)t;
  uvtest_slept = true;
}

// Runs the loop for at least ms: never an assertion, only the chance for a
// timer that should not matter to fire.
static inline void run_for(uint64_t ms) {
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  uvtest_slept = false;
  uv_timer_start(&t, uvtest_sleep_cb, ms, 0);
  WAIT(uvtest_slept);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(&loop, UV_RUN_NOWAIT);
}

// True when a line of the log holds needle.
static inline bool log_has(const char *needle) {
  FILE *f = fopen(logfile, "r");
  if (!f)
    return false;
  char line[8192];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f))
    found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

// True when pid no longer runs (gone, or a zombie nobody reaped yet).
static inline bool pid_gone(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return true;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return !paren || paren[1] != ' ' || paren[2] == 'Z' || paren[2] == 'X';
}

// The loop, the scratch directory (named after what) and the log at debug
// level. Returns false when the directory cannot be made.
static inline bool uvtest_init(const char *what) {
  snprintf(tmp, sizeof(tmp), "%s/acp-%s-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", what);
  if (!mkdtemp(tmp))
    return false;
  snprintf(logfile, sizeof(logfile), "%s/broker.log", tmp);
  log_open(logfile, LOG_LEVEL_DEBUG);
  uv_loop_init(&loop);
  uv_timer_init(&loop, &uvtest_failsafe);
  uv_timer_init(&loop, &uvtest_tick);
  return true;
}

// Closes the loop (every handle must be closed: that is a test) and
// removes the scratch directory.
static inline void uvtest_fini(void) {
  uv_close((uv_handle_t *)&uvtest_failsafe, NULL);
  uv_close((uv_handle_t *)&uvtest_tick, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ok(uv_loop_close(&loop) == 0, "every handle closed");
  log_close();
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", tmp);
}
