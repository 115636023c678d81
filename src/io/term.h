#pragma once
// A command the agent runs through terminal/* (design §9): its own process
// group, stdin from /dev/null, stdout and stderr kept together in one
// buffer bounded by the agent's outputByteLimit (older output is dropped
// first, at a character boundary).

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "proc.h"

#define TERM_OUTPUT_MAX ((size_t)16 * 1024 * 1024) // whatever the agent asks

struct term;

struct term_ops {
  // More output arrived.
  void (*output)(void *ud);
  // The command exited and its output is drained (once).
  void (*done)(void *ud);
  // After term_close: every handle is closed; the term is freed after this.
  void (*closed)(void *ud);
};

// Starts spec->argv (looked up in PATH) in spec->cwd with spec->env, keeping
// at most limit bytes of output (0 or more than TERM_OUTPUT_MAX: the
// maximum). Returns NULL with a reason in err.
struct term *term_spawn(uv_loop_t *loop, const struct proc_spawn *spec,
                        size_t limit, const struct term_ops *ops, void *ud,
                        char *err, size_t errlen);
// SIGKILLs the command's process group; `done` follows.
void term_kill(struct term *t);
// True once `done` has been called.
bool term_done(const struct term *t);
// The exit status: {"exitCode": n|null, "signal": "SIGKILL"|null} (new
// reference), or NULL while the command runs.
json_t *term_exit_status(const struct term *t);
// The output kept so far as a JSON string (invalid UTF-8 replaced by
// U+FFFD), at most max bytes from its end (0: all); *truncated tells
// whether output was dropped to respect the limit.
json_t *term_output(const struct term *t, size_t max, bool *truncated);
// The process id.
int term_pid(const struct term *t);
// Kills the command if it runs and closes everything; only `closed` is
// called after this.
void term_close(struct term *t);
