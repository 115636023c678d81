// Unit tests for proc.c: an agent's process on a real libuv loop. Output
// and exit (reported once stdout is drained), stdin writes and their bound,
// stderr lines in the log, the stop sequence (EOF, SIGTERM, SIGKILL), the
// process group killed at exit, a child that closes stdout but runs on, one
// that escapes with stdout open, pausing, spawn failures.
//
// No timing assertion: every wait is for an event (or for a file or a
// process to change, polled by a uv timer), with a failsafe timer.

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "base/log.h"
#include "base/mem.h"
#include "check.h"
#include "io/proc.h"
#include "uvtest.h"

// What the callbacks saw.
struct rec {
  char *out;
  size_t len, cap;
  int exits, closed;
  int64_t code;
  int sig;
  size_t len_at_exit;
  bool closed_after_exit;
  struct proc *p; // set by tests that look at the stderr tail at exit
  char tail[PROC_STDERR_TAIL][PROC_STDERR_TAIL_LEN + 1];
  size_t ntail;
};

static void on_stdout(void *ud, const char *data, size_t n) {
  struct rec *r = ud;
  if (r->len + n + 1 > r->cap) {
    r->cap = (r->len + n + 1) * 2;
    r->out = xrealloc(r->out, r->cap);
  }
  memcpy(r->out + r->len, data, n);
  r->len += n;
  r->out[r->len] = '\0';
}

static void on_exit_cb(void *ud, int64_t code, int sig) {
  struct rec *r = ud;
  r->exits++;
  r->code = code;
  r->sig = sig;
  r->len_at_exit = r->len;
  if (r->p) {
    const char *lines[PROC_STDERR_TAIL];
    r->ntail = proc_stderr_tail(r->p, lines, PROC_STDERR_TAIL);
    for (size_t i = 0; i < r->ntail; i++)
      snprintf(r->tail[i], sizeof(r->tail[i]), "%s", lines[i]);
  }
}

static void on_closed(void *ud) {
  struct rec *r = ud;
  r->closed++;
  r->closed_after_exit = r->exits == 1;
}

static const struct proc_ops ops = {on_stdout, on_exit_cb, on_closed};

static struct proc *spawn_sh(const char *script, const char *name,
                             struct rec *r) {
  const char *argv[] = {"sh", "-c", script, NULL};
  struct proc_spawn spec = {argv, NULL, NULL, name};
  char err[256] = "";
  memset(r, 0, sizeof(*r));
  struct proc *p = proc_spawn(&loop, &spec, &ops, r, err, sizeof(err));
  ok(p != NULL, "%s: starts (%s)", name, err);
  return p;
}

static void rec_free(struct rec *r) {
  free(r->out);
  r->out = NULL;
}

// The first line of r's output as a pid.
static int first_pid(const struct rec *r) {
  return r->out ? atoi(r->out) : 0;
}

static void test_output_and_exit(void) {
  struct rec r;
  struct proc *p =
      spawn_sh("printf 'one\\ntwo'; printf 'an error line\\n' >&2; exit 3",
               "t-exit", &r);
  if (!p)
    return;
  ok(proc_pid(p) > 0, "a pid");
  ok(!proc_exited(p), "not exited before the loop runs");
  WAIT(r.closed);
  is_int(r.exits, 1, "on_exit once");
  is_int(r.code, 3, "exit code 3");
  is_int(r.sig, 0, "no signal");
  is_str(r.out, "one\ntwo", "stdout bytes as written (no newline needed)");
  is_size(r.len_at_exit, 7, "all of stdout before on_exit");
  ok(r.closed_after_exit, "on_closed after on_exit");
  ok(log_has("[t-exit stderr] an error line"), "the stderr line is logged");
  rec_free(&r);

  // 1 MiB of output then a quick exit: every byte comes before on_exit.
  p = spawn_sh("head -c 1048576 /dev/zero | tr '\\0' a; exit 0", "t-big", &r);
  if (!p)
    return;
  WAIT(r.closed);
  is_size(r.len, 1048576, "1 MiB of stdout");
  is_size(r.len_at_exit, 1048576, "all of it before on_exit");
  is_int(r.code, 0, "exit code 0");
  rec_free(&r);
}

static void test_stdin(void) {
  struct rec r;
  struct proc *p = spawn_sh("exec cat", "t-cat", &r);
  if (!p)
    return;
  is_int(proc_write(p, xstrdup("hello\n"), 6), 0, "a line written");
  WAIT(r.len >= 6);
  is_str(r.out, "hello\n", "echoed");
  for (int i = 0; i < 100; i++)
    proc_write(p, xstrdup("0123456789\n"), 11);
  WAIT(r.len >= 6 + 1100);
  is_size(r.len, 6 + 1100, "a burst of 100 lines, all echoed");
  ok(r.out && strncmp(r.out + r.len - 11, "0123456789\n", 11) == 0,
     "in one piece");
  proc_stop(p, 5000);
  is_int(proc_write(p, xstrdup("late\n"), 5), -1,
         "no writes once stopping (the data is freed)");
  WAIT(r.closed);
  is_int(r.exits, 1, "cat exits after EOF");
  ok((r.code == 0 && r.sig == 0) || r.sig == SIGTERM,
     "on EOF (or SIGTERM on a slow machine): code %d signal %d", (int)r.code,
     r.sig);
  rec_free(&r);
}

// proc_stop: an agent (and its children) ignoring SIGTERM get SIGKILL.
static void test_stop_escalates(void) {
  struct rec r;
  struct proc *p = spawn_sh(
      "trap '' TERM; sleep 1000 & echo $!; echo ready; exec sleep 1000",
      "t-stubborn", &r);
  if (!p)
    return;
  WAIT(r.out && strstr(r.out, "ready\n"));
  int child = first_pid(&r);
  ok(child > 0 && !pid_gone(child), "a child runs (%d)", child);
  proc_stop(p, 100);
  WAIT(r.closed);
  is_int(r.sig, SIGKILL, "SIGKILL after SIGTERM was ignored");
  POLL(pid_gone(child));
  ok(pid_gone(child), "the child is gone too");
  rec_free(&r);

  // One that obeys SIGTERM (and does not read its stdin).
  p = spawn_sh("echo ready; exec sleep 1000", "t-term", &r);
  if (!p)
    return;
  WAIT(r.out && strstr(r.out, "ready\n"));
  proc_stop(p, 10000);
  proc_stop(p, 10000); // a second stop changes nothing
  WAIT(r.closed);
  is_int(r.sig, SIGTERM, "SIGTERM");
  is_int(r.exits, 1, "on_exit once");
  rec_free(&r);
}

// The agent exits while a child it started holds stdout open: the whole
// group is killed, so the exit is reported and nothing lives on.
static void test_group_killed_at_exit(void) {
  struct rec r;
  struct proc *p = spawn_sh("sleep 1000 & echo $!; exit 5", "t-group", &r);
  if (!p)
    return;
  WAIT(r.closed);
  is_int(r.code, 5, "exit code 5");
  int child = first_pid(&r);
  ok(child > 0, "the child's pid (%d)", child);
  POLL(pid_gone(child));
  ok(child > 0 && pid_gone(child), "the child that held stdout is gone");
  rec_free(&r);
}

// A child that left the group (setsid) keeps stdout open: the exit is
// reported anyway, shortly after.
static void test_escaped_child(void) {
  struct rec r;
  // The script waits until the child has its own session (it writes its
  // pid only then), so that the group kill at exit cannot reach it.
  char script[1200];
  snprintf(script, sizeof(script),
           "setsid sh -c 'echo $$ > \"$0\"; exec sleep 1000' '%s/escaped' & "
           "while [ ! -s '%s/escaped' ]; do sleep 0.01; done; "
           "cat '%s/escaped'; exit 0",
           tmp, tmp, tmp);
  struct proc *p = spawn_sh(script, "t-escape", &r);
  if (!p)
    return;
  WAIT(r.closed);
  is_int(r.exits, 1, "the exit is reported");
  is_int(r.code, 0, "code 0");
  int child = first_pid(&r);
  ok(child > 0 && !pid_gone(child), "the escaped child still runs");
  ok(log_has("t-escape: stdout still open"), "logged");
  if (child > 0)
    kill(child, SIGKILL);
  rec_free(&r);
}

// A child that closes its stdout but runs on: no exit until it exits.
static void test_closes_stdout(void) {
  struct rec r;
  struct proc *p =
      spawn_sh("echo bye; exec >&-; echo stdout-closed >&2; exec sleep 1000",
               "t-closed", &r);
  if (!p)
    return;
  POLL(r.len >= 4 && log_has("[t-closed stderr] stdout-closed"));
  for (int i = 0; i < 10; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  is_str(r.out, "bye\n", "its output");
  is_int(r.exits, 0, "no exit reported while it runs");
  ok(!proc_exited(p), "not exited");
  is_int(proc_write(p, xstrdup("x\n"), 2), 0, "stdin still takes writes");
  proc_stop(p, 10000);
  WAIT(r.closed);
  is_int(r.exits, 1, "then stopped: on_exit");
  is_int(r.sig, SIGTERM, "by SIGTERM");
  rec_free(&r);
}

// Writes to an agent that does not read are bounded.
static void test_write_bound(void) {
  struct rec r;
  struct proc *p = spawn_sh("exec sleep 1000", "t-noread", &r);
  if (!p)
    return;
  size_t chunk = (size_t)1 << 20, accepted = 0;
  int refused_at = -1;
  for (int i = 0; i < 200 && refused_at < 0; i++) {
    char *data = xmalloc(chunk);
    memset(data, 'x', chunk);
    data[chunk - 1] = '\n';
    if (proc_write(p, data, chunk) == 0)
      accepted += chunk;
    else
      refused_at = i;
  }
  ok(refused_at > 0, "a write is refused once too much waits (after %d MiB)",
     refused_at);
  ok(accepted <= (size_t)64 << 20, "at most 64 MiB waits (%zu MiB)",
     accepted >> 20);
  ok(log_has("t-noread: ") && log_has("agent not reading"), "logged");
  proc_stop(p, 100);
  WAIT(r.closed);
  is_int(r.exits, 1, "stopped");
  rec_free(&r);
}

// stderr lines longer than the limit are not kept, only counted.
static void test_stderr_bound(void) {
  struct rec r;
  struct proc *p = spawn_sh("head -c 20000 /dev/zero | tr '\\0' x >&2; "
                            "echo >&2; echo short >&2; echo done",
                            "t-stderr", &r);
  if (!p)
    return;
  WAIT(r.closed);
  ok(log_has("[t-stderr stderr] (a 20000-byte line, not logged)"),
     "an overlong stderr line is counted, not logged");
  ok(log_has("[t-stderr stderr] short"), "the next line is logged");
  ok(!log_has("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"),
     "none of the long line");
  rec_free(&r);
}

// The last stderr lines are kept for the exit message: five, each cut to
// 200 bytes at a character, escapes left out, a last line without its
// newline too.
static void test_stderr_tail(void) {
  struct rec r;
  struct proc *p = spawn_sh(
      "for i in 1 2 3; do echo old$i >&2; done; printf '\\033[31mred\\033[0m "
      "done\\n' >&2; printf 'a%.0s' $(seq 199) >&2; printf '\\303\\251\\n' >&2;"
      " echo kept >&2; head -c 20000 /dev/zero | tr '\\0' x >&2; echo >&2;"
      " printf 'last words' >&2; exit 9",
      "t-tail", &r);
  if (!p)
    return;
  r.p = p;
  WAIT(r.closed);
  is_int(r.code, 9, "exit code 9");
  is_size(r.ntail, 5, "five lines kept");
  if (r.ntail == 5) {
    is_str(r.tail[0], "red done", "the escapes left out");
    char want[256];
    memset(want, 'a', 199);
    want[199] = '\0';
    is_str(r.tail[1], want, "cut before the character the limit splits");
    is_str(r.tail[2], "kept", "a line");
    is_str(r.tail[3], "(a 20000-byte line)", "an overlong line, counted");
    is_str(r.tail[4], "last words", "the last line without its newline");
  }
  rec_free(&r);
}

// Paused: stdout is not read until resumed.
static void test_pause(void) {
  struct rec r;
  struct proc *p = spawn_sh("echo first; read x; echo second; echo written >&2;"
                            " exec sleep 1000",
                            "t-pause", &r);
  if (!p)
    return;
  WAIT(r.len >= 6);
  proc_pause(p, true);
  proc_write(p, xstrdup("go\n"), 3);
  POLL(log_has("[t-pause stderr] written"));
  for (int i = 0; i < 10; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  is_str(r.out, "first\n", "nothing read while paused");
  proc_pause(p, false);
  WAIT(r.len >= 13);
  is_str(r.out, "first\nsecond\n", "read once resumed");
  proc_stop(p, 100);
  WAIT(r.closed);
  rec_free(&r);
}

// Starts a shell that writes `echo words` and exits with code once told,
// pauses its stdout, tells it, and lets the drain timeout pass.
static struct proc *exit_while_paused(const char *name, int code,
                                      struct rec *r) {
  char script[100];
  snprintf(script, sizeof(script), "read x; echo last words; exit %d", code);
  struct proc *p = spawn_sh(script, name, r);
  if (!p)
    return NULL;
  proc_pause(p, true);
  proc_write(p, xstrdup("go\n"), 3);
  POLL(proc_exited(p));
  ok(proc_exited(p), "it exited");
  run_for(600); // past the drain timeout
  return p;
}

// The agent writes its last words and exits while its stdout is paused
// (Neovim is behind): they are still read once reading resumes, and only
// then is the exit reported. (Before the fix in proc.c, the drain timeout
// reported the exit 200 ms later and closed the pipe unread.)
static void test_exit_while_paused(void) {
  struct rec r;
  struct proc *p = exit_while_paused("t-pexit", 4, &r);
  if (!p)
    return;
  is_int(r.exits, 0, "no exit reported while its output is unread");
  proc_pause(p, false);
  WAIT(r.closed);
  is_str(r.out, "last words\n", "its last words are read once resumed");
  is_size(r.len_at_exit, 11, "before on_exit");
  is_int(r.code, 4, "exit code 4");
  rec_free(&r);
}

// Exited while paused, then stopped (Neovim quit while it was behind): the
// exit is reported without waiting for a resume.
static void test_stop_after_paused_exit(void) {
  struct rec r;
  struct proc *p = exit_while_paused("t-pstop", 0, &r);
  if (!p)
    return;
  proc_stop(p, 100);
  WAIT(r.closed);
  is_int(r.exits, 1, "the exit is reported once stopped");
  is_int(r.closed, 1, "and everything closed");
  rec_free(&r);
}

// cwd and env are the spec's.
static void test_env_cwd(void) {
  const char *argv[] = {"sh", "-c", "echo \"$FOO\"; pwd", NULL};
  static char foo[] = "FOO=bar baz", path[] = "PATH=/usr/bin:/bin";
  char *env[] = {foo, path, NULL};
  struct proc_spawn spec = {argv, env, tmp, "t-env"};
  struct rec r = {0};
  char err[256] = "";
  struct proc *p = proc_spawn(&loop, &spec, &ops, &r, err, sizeof(err));
  ok(p != NULL, "starts (%s)", err);
  if (!p)
    return;
  WAIT(r.closed);
  char want[4200], real[4096];
  if (!realpath(tmp, real))
    snprintf(real, sizeof(real), "%s", tmp);
  snprintf(want, sizeof(want), "bar baz\n%s\n", real);
  is_str(r.out, want, "the environment and the working directory");
  rec_free(&r);
}

static void test_spawn_failure(void) {
  const char *argv[] = {"/nonexistent/program", NULL};
  struct proc_spawn spec = {argv, NULL, NULL, NULL};
  struct rec r = {0};
  char err[256] = "";
  struct proc *p = proc_spawn(&loop, &spec, &ops, &r, err, sizeof(err));
  ok(p == NULL, "a missing program: NULL");
  ok(strstr(err, "cannot start /nonexistent/program") != NULL, "reason: %s",
     err);
  for (int i = 0; i < 5; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  ok(r.exits == 0 && r.closed == 0 && r.len == 0, "and no callback");

  const char *argv2[] = {"sh", "-c", "exit 0", NULL};
  struct proc_spawn spec2 = {argv2, NULL, "/nonexistent/dir", NULL};
  p = proc_spawn(&loop, &spec2, &ops, &r, err, sizeof(err));
  ok(p == NULL, "a missing cwd: NULL (%s)", err);
  for (int i = 0; i < 5; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  ok(r.exits == 0 && r.closed == 0, "and no callback");
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (!uvtest_init("proc"))
    return 2;

  test_output_and_exit();
  test_stdin();
  test_stop_escalates();
  test_group_killed_at_exit();
  test_escaped_child();
  test_closes_stdout();
  test_write_bound();
  test_stderr_bound();
  test_stderr_tail();
  test_pause();
  test_exit_while_paused();
  test_stop_after_paused_exit();
  test_env_cwd();
  test_spawn_failure();

  uvtest_fini();
  return done_testing();
}
