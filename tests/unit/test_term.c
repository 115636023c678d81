// Unit tests for term.c: a command the agent runs (terminal/*), on a real
// libuv loop. Its output bounded by the agent's limit (the oldest dropped,
// at a character boundary), invalid UTF-8 replaced, waiting for the exit,
// kill, release, and the signal names of the exit status.
//
// No timing assertion: every wait is for an event (or for a process to
// change, polled by a uv timer), with a failsafe timer.

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "io/term.h"
#include "uvtest.h"

struct rec {
  int outputs, done, closed;
};

static void on_output(void *ud) {
  ((struct rec *)ud)->outputs++;
}
static void on_done(void *ud) {
  ((struct rec *)ud)->done++;
}
static void on_closed(void *ud) {
  ((struct rec *)ud)->closed++;
}

static const struct term_ops ops = {on_output, on_done, on_closed};

static struct term *spawn(const char *script, size_t limit, struct rec *r) {
  const char *argv[] = {"sh", "-c", script, NULL};
  struct proc_spawn spec = {argv, NULL, NULL, "term"};
  char err[256] = "";
  memset(r, 0, sizeof(*r));
  struct term *t = term_spawn(&loop, &spec, limit, &ops, r, err, sizeof(err));
  ok(t != NULL, "starts: %s (%s)", script, err);
  return t;
}

// Closes a finished term and waits for `closed`.
static void release(struct term *t, struct rec *r) {
  term_close(t);
  WAIT(r->closed);
  is_int(r->closed, 1, "closed once");
}

// Runs script to its end with limit; checks its output (bytes, with
// term_output's max) and whether it was truncated.
static void check_output(const char *script, size_t limit, size_t max,
                         const char *want, size_t want_len, bool truncated,
                         const char *desc) {
  struct rec r;
  struct term *t = spawn(script, limit, &r);
  if (!t)
    return;
  WAIT(r.done);
  bool tr = !truncated;
  json_t *o = term_output(t, max, &tr);
  ok(o && json_string_length(o) == want_len &&
         memcmp(json_string_value(o), want, want_len) == 0,
     "%s: '%s'", desc, o ? json_string_value(o) : "(null)");
  ok(tr == truncated, "%s: truncated %s", desc, truncated ? "yes" : "no");
  json_decref(o);
  release(t, &r);
}

static bool status_is(const struct term *t, json_int_t code,
                      const char *signame) {
  json_t *s = term_exit_status(t);
  json_t *c = json_object_get(s, "exitCode");
  json_t *g = json_object_get(s, "signal");
  bool r =
      s && (signame ? json_is_null(c) : json_integer_value(c) == code) &&
      (signame ? json_is_string(g) && !strcmp(json_string_value(g), signame)
               : json_is_null(g));
  if (!r) {
    char *d = s ? json_dumps(s, JSON_COMPACT) : NULL;
    printf("# status: %s\n", d ? d : "(null)");
    free(d);
  }
  json_decref(s);
  return r;
}

// The pid the command printed first.
static int printed_pid(const struct term *t) {
  bool tr;
  json_t *o = term_output(t, 0, &tr);
  int pid = o ? atoi(json_string_value(o)) : 0;
  json_decref(o);
  return pid;
}

static void test_exit_status(void) {
  struct rec r;
  struct term *t = spawn("exit 7", 0, &r);
  if (!t)
    return;
  ok(term_pid(t) > 0, "a pid");
  ok(!term_done(t), "not done before it exited");
  json_t *s = term_exit_status(t);
  ok(s == NULL, "no exit status while it runs");
  json_decref(s);
  WAIT(r.done);
  is_int(r.done, 1, "done once");
  ok(term_done(t), "done");
  ok(status_is(t, 7, NULL), "exitCode 7, signal null");
  release(t, &r);
  is_int(r.done, 1, "done not called again");

  t = spawn("printf out; printf err >&2; exit 0", 0, &r);
  if (!t)
    return;
  WAIT(r.done);
  ok(r.outputs >= 1, "output reported (%d)", r.outputs);
  bool tr;
  json_t *o = term_output(t, 0, &tr);
  const char *v = json_string_value(o);
  ok(v && strlen(v) == 6 && strstr(v, "out") && strstr(v, "err"),
     "stdout and stderr in one buffer: %s", v);
  json_decref(o);
  ok(status_is(t, 0, NULL), "exitCode 0");
  release(t, &r);
}

static void test_limit(void) {
  check_output("printf hello", 100, 0, "hello", 5, false, "under the limit");
  check_output("printf abcdefghijklmnopqrstuvwxyz", 10, 0, "qrstuvwxyz", 10,
               true, "the newest 10 bytes kept");
  // a a a a € b b: the last 5 bytes start at the euro sign, the last 4 in
  // its middle (dropped up to the next character).
  check_output("printf 'aaaa\\342\\202\\254bb'", 5, 0,
               "\xe2\x82\xac"
               "bb",
               5, true, "cut at a character");
  check_output("printf 'aaaa\\342\\202\\254bb'", 4, 0, "bb", 2, true,
               "never in the middle of a character");
  // In separate writes (and so, most likely, separate reads).
  check_output("printf abcd; sleep 0.05; printf '\\342\\202'; sleep 0.05; "
               "printf '\\254xy'",
               4, 0, "xy", 2, true, "across reads");
  check_output("printf 'abc\\342\\202\\254xy'", 5, 0,
               "\xe2\x82\xac"
               "xy",
               5, true, "across reads, at a character");
  // term_output's own max (what terminal/output may return).
  check_output("printf 'aaaa\\342\\202\\254bb'", 100, 3, "bb", 2, false,
               "max: from the end, at a character");
  check_output("printf 'aaaa\\342\\202\\254bb'", 100, 5,
               "\xe2\x82\xac"
               "bb",
               5, false, "max: the whole character");

  // Much more output than the limit, over many reads.
  struct rec r;
  struct term *t =
      spawn("i=0; while [ $i -lt 20000 ]; do echo 0123456789abcde; "
            "i=$((i+1)); done; printf END",
            1000, &r);
  if (!t)
    return;
  WAIT(r.done);
  bool tr = false;
  json_t *o = term_output(t, 0, &tr);
  const char *v = json_string_value(o);
  ok(tr, "320 kB through a 1000-byte limit: truncated");
  ok(v && strlen(v) == 1000 && !strcmp(v + 997, "END") &&
         !strncmp(v, "bcde\n0123", 9),
     "the newest 1000 bytes kept");
  json_decref(o);
  release(t, &r);

  // 0: the maximum.
  t = spawn("head -c 100000 /dev/zero | tr '\\0' x", 0, &r);
  if (!t)
    return;
  WAIT(r.done);
  o = term_output(t, 0, &tr);
  is_size(json_string_length(o), 100000, "limit 0: the maximum, not 0");
  ok(!tr, "not truncated");
  json_decref(o);
  release(t, &r);
}

static void test_invalid_utf8(void) {
  check_output("printf 'a\\377b\\300\\n\\303\\251'", 0, 0,
               "a\xef\xbf\xbd"
               "b\xef\xbf\xbd\n\xc3\xa9",
               11, false, "invalid bytes become U+FFFD, valid ones stay");
  check_output("printf '\\342\\202x'", 0, 0, "\xef\xbf\xbd\xef\xbf\xbdx", 7,
               false, "a truncated sequence: one U+FFFD per byte");
  check_output("printf 'x\\0y'", 0, 0, "x\xef\xbf\xbdy", 5, false,
               "NUL replaced");
}

static void test_kill(void) {
  struct rec r;
  struct term *t = spawn("echo started; exec sleep 1000", 0, &r);
  if (!t)
    return;
  WAIT(r.outputs);
  term_kill(t);
  WAIT(r.done);
  is_int(r.done, 1, "done after term_kill");
  ok(status_is(t, 0, "SIGKILL"), "exitCode null, signal SIGKILL");
  term_kill(t); // after the exit: nothing
  release(t, &r);
}

static void test_signal_names(void) {
  static const struct {
    const char *name;
    int sig;
  } sigs[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
              {"ABRT", SIGABRT}, {"KILL", SIGKILL}, {"SEGV", SIGSEGV},
              {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},
              {"BUS", SIGBUS},   {"FPE", SIGFPE},   {"ILL", SIGILL}};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++) {
    char script[64], want[16];
    snprintf(script, sizeof(script), "kill -%s $$", sigs[i].name);
    snprintf(want, sizeof(want), "SIG%s", sigs[i].name);
    struct rec r;
    struct term *t = spawn(script, 0, &r);
    if (!t)
      return;
    WAIT(r.done);
    ok(status_is(t, 0, want), "signal %d is %s", sigs[i].sig, want);
    release(t, &r);
  }
  // A signal without a name of its own still reads as one.
  struct rec r;
  struct term *t = spawn("kill -USR1 $$", 0, &r);
  if (!t)
    return;
  WAIT(r.done);
  json_t *s = term_exit_status(t);
  const char *g = json_string_value(json_object_get(s, "signal"));
  ok(g && strncmp(g, "SIG", 3) == 0, "SIGUSR1: %s", g ? g : "(null)");
  ok(json_is_null(json_object_get(s, "exitCode")), "exitCode null");
  json_decref(s);
  release(t, &r);
}

// Release: a running command is killed with its group; only `closed` is
// called. A command's background children die when it exits.
static void test_release(void) {
  struct rec r;
  struct term *t = spawn("sleep 1000 & echo $!; exec sleep 1000", 0, &r);
  if (!t)
    return;
  WAIT(r.outputs);
  int child = printed_pid(t);
  ok(child > 0 && !pid_gone(child), "a child runs (%d)", child);
  int pid = term_pid(t);
  term_close(t);
  term_close(t); // twice: nothing more
  WAIT(r.closed);
  is_int(r.closed, 1, "closed once");
  is_int(r.done, 0, "done is not called after term_close");
  POLL(pid_gone(child) && pid_gone(pid));
  ok(pid_gone(pid), "the command is gone");
  ok(child > 0 && pid_gone(child), "its child too");

  // The pid goes to a file (the output need not be read by then).
  char script[600], pidfile[300];
  snprintf(pidfile, sizeof(pidfile), "%s/child", tmp);
  snprintf(script, sizeof(script), "sleep 1000 & echo $! > '%s'; exit 3",
           pidfile);
  t = spawn(script, 0, &r);
  if (!t)
    return;
  WAIT(r.done);
  ok(status_is(t, 3, NULL), "exitCode 3 though a child holds the output");
  FILE *f = fopen(pidfile, "r");
  child = 0;
  if (f) {
    if (fscanf(f, "%d", &child) != 1)
      child = 0;
    fclose(f);
  }
  unlink(pidfile);
  POLL(pid_gone(child));
  ok(child > 0 && pid_gone(child), "the child is killed when it exits (%d)",
     child);
  release(t, &r);
}

static void test_spawn_failure(void) {
  const char *argv[] = {"/nonexistent/cmd", NULL};
  struct proc_spawn spec = {argv, NULL, NULL, NULL};
  struct rec r = {0};
  char err[256] = "";
  struct term *t = term_spawn(&loop, &spec, 0, &ops, &r, err, sizeof(err));
  ok(t == NULL, "a missing program: NULL");
  ok(strstr(err, "cannot start /nonexistent/cmd") != NULL, "reason: %s", err);
  for (int i = 0; i < 5; i++)
    uv_run(&loop, UV_RUN_NOWAIT);
  ok(r.outputs == 0 && r.done == 0 && r.closed == 0, "and no callback");
}

int main(void) {
  // The signal tests kill shells with SIGSEGV and friends: no core files.
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  if (!uvtest_init("term"))
    return 2;

  test_exit_status();
  test_limit();
  test_invalid_utf8();
  test_kill();
  test_signal_names();
  test_release();
  test_spawn_failure();

  uvtest_fini();
  return done_testing();
}
