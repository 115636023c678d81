#pragma once
// The broker's debug log: a size-bounded file, never stdout (stdout carries
// only msgpack-RPC frames to Neovim).

#include <stdarg.h>
#include <stdbool.h>

enum log_level {
  LOG_LEVEL_DEBUG,
  LOG_LEVEL_INFO,
  LOG_LEVEL_WARN,
  LOG_LEVEL_ERROR,
  LOG_LEVEL_OFF,
};

// Opens the log at path (NULL: $XDG_STATE_HOME/acp-broker/broker.log, or
// ~/.local/state/...). Creates the directory. Returns 0, or -1 when the file
// cannot be opened (logging is then off; the broker works on).
int log_open(const char *path, enum log_level level);
// Closes the log file.
void log_close(void);
// Returns the path of the log file (may be "" when logging is off).
const char *log_path(void);
// Parses "debug", "info", "warn", "error", "off"; unknown → info.
enum log_level log_level_parse(const char *s);
// Returns the state directory path ($XDG_STATE_HOME/acp-broker, ...).
const char *log_state_dir(void);
// Writes one line; use the LOG_* macros.
void log_write(enum log_level level, const char *func, int line,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

// Whether debug lines are written (the log open at level debug): LOG_D,
// on the hot path of every request, costs one test when they are not (its
// arguments are not evaluated then).
extern bool log_debug_on;

#define LOG_D(...)                                                             \
  (log_debug_on ? log_write(LOG_LEVEL_DEBUG, __func__, __LINE__, __VA_ARGS__)  \
                : (void)0)
#define LOG_I(...) log_write(LOG_LEVEL_INFO, __func__, __LINE__, __VA_ARGS__)
#define LOG_W(...) log_write(LOG_LEVEL_WARN, __func__, __LINE__, __VA_ARGS__)
#define LOG_E(...) log_write(LOG_LEVEL_ERROR, __func__, __LINE__, __VA_ARGS__)
