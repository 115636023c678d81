#pragma once
// An agent's process: spawned in its own process group with three pipes.
//
// stdout bytes go to the owner (who frames them); stderr lines go to the
// log; writes to stdin are queued (bounded). Exit is reported once stdout
// has been drained (or shortly after exit if something keeps it open), so
// every message the agent wrote before dying is seen first. The whole
// process group is killed when the agent exits, so nothing it started lives
// on.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct proc;

struct proc_ops {
  // Bytes from the agent's stdout; data lives only during the call.
  void (*on_stdout)(void *ud, const char *data, size_t n);
  // The process exited (code, or signal when killed by one) and its stdout
  // is drained. Called once.
  void (*on_exit)(void *ud, int64_t code, int signal);
  // Every handle is closed; the proc is freed right after this returns.
  void (*on_closed)(void *ud);
};

struct proc_spawn {
  const char *const *argv; // NULL-terminated; argv[0] is looked up in PATH
  char **env;              // NULL-terminated "K=V" list, or NULL to inherit
  const char *cwd;         // working directory, or NULL
  const char *name;        // for log lines
};

// uv_spawn of spec in its own process group (setsid), with three stdio
// slots; for proc_spawn and terminals. Returns 0, or a libuv error with a
// reason in err (the handle must still be closed).
int proc_start(uv_loop_t *loop, uv_process_t *h, const struct proc_spawn *spec,
               uv_stdio_container_t stdio[3], uv_exit_cb on_exit, char *err,
               size_t errlen);
// Starts the process. Returns NULL with a reason in err on failure (the
// callbacks are then never called).
struct proc *proc_spawn(uv_loop_t *loop, const struct proc_spawn *spec,
                        const struct proc_ops *ops, void *ud, char *err,
                        size_t errlen);
// Queues data for the agent's stdin, taking ownership of it (freed on every
// path). Returns 0, or -1 when stdin is closed or too much is already
// waiting (the agent is not reading).
int proc_write(struct proc *p, char *data, size_t len);
// Closes stdin (after what is queued), gives the agent a moment to read it
// and exit on EOF, then sends SIGTERM to the process group, and SIGKILL
// grace_ms later if it has not exited.
void proc_stop(struct proc *p, uint64_t grace_ms);
// Stops (pause) or resumes reading the process's stdout: it then blocks
// writing once the pipe is full. Flow control for a reader that is behind.
void proc_pause(struct proc *p, bool pause);
// Returns the process id (also the process group id).
int proc_pid(const struct proc *p);
// The last stderr lines the agent wrote, oldest first, into lines (at most
// max; they live as long as p): at most PROC_STDERR_TAIL lines of at most
// PROC_STDERR_TAIL_LEN bytes each (cut at a character), terminal escapes
// left out. Returns how many.
#define PROC_STDERR_TAIL 5
#define PROC_STDERR_TAIL_LEN 200
size_t proc_stderr_tail(const struct proc *p, const char **lines, size_t max);
// Returns true once the process has exited.
bool proc_exited(const struct proc *p);
