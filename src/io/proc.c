#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/mem.h"
#include "linebuf.h"

// Bytes queued for the agent's stdin before it counts as not reading.
#define PROC_MAX_QUEUED ((size_t)64 * 1024 * 1024)
// After exit, how long stdout may stay open (held by an escaped child)
// before the exit is reported anyway.
#define PROC_DRAIN_MS 200
// After stdin is closed, how long the agent has to read what is queued
// (answers to its pending requests) and exit on EOF before SIGTERM.
#define PROC_EOF_MS 250
#define PROC_STDERR_LINE_MAX 8192
#define PROC_READ_SIZE 65536

struct proc {
  uv_process_t process;
  uv_pipe_t in, out, err; // the agent's stdin, stdout, stderr
  uv_timer_t timer;       // SIGKILL after the grace period, or drain timeout
  uv_idle_t flush;        // writes the lines of one loop iteration together
  uv_shutdown_t shutdown_req;
  char *name;
  const struct proc_ops *ops;
  void *ud;
  int pid;
  int open_handles;
  size_t queued; // bytes written to stdin, not yet accepted
  char *obuf;    // lines not yet handed to the pipe (counted in queued)
  bool burst;    // a line went out at once since the last flush
  size_t olen, ocap;
  int64_t exit_code;
  int exit_signal;
  bool exited;       // the process has exited
  bool out_eof;      // stdout reached EOF
  bool err_eof;      // stderr reached EOF (or failed)
  bool paused;       // stdout is not read for now (proc_pause)
  bool reported;     // on_exit was called
  bool stdin_closed; // no more writes
  bool stopping;     // proc_stop ran
  uint64_t grace_ms; // SIGTERM → SIGKILL
  bool closing;      // handles are being closed
  bool spawn_failed; // never started: no callbacks
  struct linebuf err_lines;
  // The last stderr lines (a ring, oldest at tail_first), for the message
  // the person gets when the agent dies.
  char tail[PROC_STDERR_TAIL][PROC_STDERR_TAIL_LEN + 1];
  size_t tail_first, ntail;
  char rbuf[PROC_READ_SIZE];
};

struct write_req {
  uv_write_t req; // first member: freed through it
  char *data;
  size_t len;
};

static void close_cb(uv_handle_t *h) {
  struct proc *p = h->data;
  if (--p->open_handles > 0)
    return;
  bool notify = !p->spawn_failed;
  const struct proc_ops *ops = p->ops;
  void *ud = p->ud;
  linebuf_free(&p->err_lines);
  free(p->obuf);
  free(p->name);
  free(p);
  if (notify)
    ops->on_closed(ud);
}

static void close_all(struct proc *p) {
  if (p->closing)
    return;
  p->closing = true;
  uv_close((uv_handle_t *)&p->process, close_cb);
  uv_close((uv_handle_t *)&p->in, close_cb);
  uv_close((uv_handle_t *)&p->out, close_cb);
  uv_close((uv_handle_t *)&p->err, close_cb);
  uv_close((uv_handle_t *)&p->timer, close_cb);
  uv_close((uv_handle_t *)&p->flush, close_cb);
}

// Reports the exit once, then closes everything. The callback may free
// the owner's state but not p, which lives until close_cb.
static void keep_stderr(struct proc *p, const char *line, size_t len);
static void err_line(void *ud, const char *line, size_t len);
static void err_overlong(void *ud, size_t len);

static void report_exit(struct proc *p) {
  if (p->reported)
    return;
  p->reported = true;
  // What the agent wrote to stderr before it died is in the pipe already,
  // maybe not read yet: read it now (bounded), so the tail has it.
  uv_os_fd_t fd;
  // Only from a non-blocking pipe (libuv's are): a process the agent left
  // behind may hold it open and write nothing.
  int fl;
  if (!p->err_eof && uv_fileno((uv_handle_t *)&p->err, &fd) == 0 &&
      (fl = fcntl(fd, F_GETFL)) >= 0 && (fl & O_NONBLOCK)) {
    char buf[4096];
    ssize_t n;
    for (int i = 0; i < 16 && (n = read(fd, buf, sizeof(buf))) > 0; i++)
      linebuf_feed(&p->err_lines, buf, (size_t)n, err_line, err_overlong, p);
  }
  // A last line without its newline is one too.
  struct linebuf *lb = &p->err_lines;
  if (lb->len && !lb->skipped)
    keep_stderr(p, lb->data, lb->len);
  uv_timer_stop(&p->timer);
  p->ops->on_exit(p->ud, p->exit_code, p->exit_signal);
  close_all(p);
}

static void kill_group(struct proc *p, int sig) {
  // The agent runs in its own process group (UV_PROCESS_DETACHED calls
  // setsid), so this reaches every process it started too.
  if (p->pid > 0 && kill(-p->pid, sig) != 0 && errno != ESRCH)
    LOG_W("kill(-%d, %d): %s", p->pid, sig, strerror(errno));
}

static void drain_timeout_cb(uv_timer_t *t) {
  struct proc *p = t->data;
  // Paused, stdout is unread rather than held open: the agent's last
  // messages are read (and the exit reported) once reading resumes.
  if (p->paused && !p->stopping)
    return;
  LOG_W("%s: stdout still open %d ms after exit; reporting exit", p->name,
        PROC_DRAIN_MS);
  report_exit(p);
}

static void exit_cb(uv_process_t *h, int64_t status, int sig) {
  struct proc *p = h->data;
  p->exited = true;
  p->exit_code = status;
  p->exit_signal = sig;
  LOG_I("%s (pid %d) exited: code %lld, signal %d", p->name, p->pid,
        (long long)status, sig);
  kill_group(p, SIGKILL);
  if (p->out_eof) {
    report_exit(p);
    return;
  }
  uv_timer_stop(&p->timer);
  uv_timer_start(&p->timer, drain_timeout_cb, PROC_DRAIN_MS, 0);
}

static void flush_out(struct proc *p);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct proc *p = h->data;
  *buf = uv_buf_init(p->rbuf, sizeof(p->rbuf));
}

static void out_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct proc *p = s->data;
  if (n > 0) {
    p->ops->on_stdout(p->ud, buf->base, (size_t)n);
    // Answers to what was just read go out now, in one write (p is still
    // alive here: it is freed only once its handles are closed).
    if (!p->closing)
      flush_out(p);
    return;
  }
  if (n == 0)
    return;
  uv_read_stop(s);
  p->out_eof = true;
  if (p->exited)
    report_exit(p);
}

// Keeps line as the newest of the tail: at most PROC_STDERR_TAIL_LEN
// bytes, cut before a UTF-8 sequence, terminal escapes (ESC [ ... final)
// left out and other control characters shown as spaces.
static void keep_stderr(struct proc *p, const char *line, size_t len) {
  size_t slot = (p->tail_first + p->ntail) % PROC_STDERR_TAIL;
  if (p->ntail == PROC_STDERR_TAIL)
    p->tail_first = (p->tail_first + 1) % PROC_STDERR_TAIL;
  else
    p->ntail++;
  char *o = p->tail[slot];
  size_t n = 0;
  for (size_t i = 0; i < len && n < PROC_STDERR_TAIL_LEN; i++) {
    unsigned char ch = (unsigned char)line[i];
    if (ch == 0x1b && i + 1 < len && line[i + 1] == '[') {
      for (i += 2; i < len && !((unsigned char)line[i] >= 0x40 &&
                                (unsigned char)line[i] <= 0x7e);
           i++)
        ;
      continue;
    }
    o[n++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
  }
  // Cut at a character boundary: drop a sequence the limit split.
  if (n == PROC_STDERR_TAIL_LEN) {
    size_t k = n;
    while (k > 0 && ((unsigned char)o[k - 1] & 0xc0) == 0x80)
      k--;
    if (k > 0 && ((unsigned char)o[k - 1] & 0xc0) == 0xc0)
      n = k - 1;
  }
  o[n] = '\0';
}

static void err_line(void *ud, const char *line, size_t len) {
  struct proc *p = ud;
  LOG_I("[%s stderr] %.*s", p->name, (int)len, line);
  keep_stderr(p, line, len);
}

static void err_overlong(void *ud, size_t len) {
  struct proc *p = ud;
  LOG_I("[%s stderr] (a %zu-byte line, not logged)", p->name, len);
  char note[64];
  int n = snprintf(note, sizeof(note), "(a %zu-byte line)", len);
  keep_stderr(p, note, (size_t)n);
}

size_t proc_stderr_tail(const struct proc *p, const char **lines, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < p->ntail && n < max; i++) {
    const char *l = p->tail[(p->tail_first + i) % PROC_STDERR_TAIL];
    if (l[0])
      lines[n++] = l;
  }
  return n;
}

static void err_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct proc *p = s->data;
  if (n > 0)
    linebuf_feed(&p->err_lines, buf->base, (size_t)n, err_line, err_overlong,
                 p);
  else if (n < 0) {
    uv_read_stop(s);
    p->err_eof = true;
  }
}

static void write_cb(uv_write_t *req, int status) {
  struct write_req *w = (struct write_req *)req;
  struct proc *p = req->handle->data;
  p->queued -= w->len;
  if (status < 0 && status != UV_ECANCELED)
    LOG_W("%s: write to stdin failed: %s", p->name, uv_strerror(status));
  free(w->data);
  free(w);
}

// Hands the gathered lines to the pipe in one write.
static void write_out(struct proc *p) {
  if (p->olen == 0)
    return;
  struct write_req *w = xmalloc(sizeof(*w));
  w->data = p->obuf;
  w->len = p->olen;
  p->obuf = NULL;
  p->olen = p->ocap = 0;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  int r = uv_write(&w->req, (uv_stream_t *)&p->in, &b, 1, write_cb);
  if (r < 0) {
    LOG_W("%s: write to stdin failed: %s", p->name, uv_strerror(r));
    p->queued -= w->len;
    free(w->data);
    free(w);
  }
}

// The end of a burst: what was gathered goes out.
static void flush_out(struct proc *p) {
  uv_idle_stop(&p->flush);
  write_out(p);
  p->burst = false;
}

static void flush_cb(uv_idle_t *h) {
  flush_out(h->data);
}

int proc_write(struct proc *p, char *data, size_t len) {
  if (p->stdin_closed || p->closing || p->queued + len > PROC_MAX_QUEUED) {
    if (!p->stdin_closed && !p->closing)
      LOG_E("%s: %zu bytes already waiting on stdin; agent not reading",
            p->name, p->queued);
    free(data);
    return -1;
  }
  if (p->olen + len > p->ocap) {
    size_t cap = p->ocap ? p->ocap : 4096;
    while (cap < p->olen + len)
      cap *= 2;
    p->obuf = xrealloc(p->obuf, cap);
    p->ocap = cap;
  }
  memcpy(p->obuf + p->olen, data, len);
  p->olen += len;
  p->queued += len;
  free(data);
  // The first line of a burst goes out at once (an agent waiting for one
  // answer gets it without delay); the rest of what is read with it is
  // written together once it is handled.
  if (p->queued == len && !p->burst) {
    p->burst = true;
    write_out(p);
  }
  if (!uv_is_active((uv_handle_t *)&p->flush))
    uv_idle_start(&p->flush, flush_cb);
  return 0;
}

static void shutdown_cb(uv_shutdown_t *req, int status) {
  (void)req;
  (void)status;
}

static void kill_timer_cb(uv_timer_t *t) {
  struct proc *p = t->data;
  if (p->exited)
    return;
  LOG_W("%s (pid %d) ignored SIGTERM; sending SIGKILL", p->name, p->pid);
  kill_group(p, SIGKILL);
}

static void term_timer_cb(uv_timer_t *t) {
  struct proc *p = t->data;
  if (p->exited)
    return;
  kill_group(p, SIGTERM);
  uv_timer_start(&p->timer, kill_timer_cb, p->grace_ms, 0);
}

void proc_stop(struct proc *p, uint64_t grace_ms) {
  if (p->closing || p->stopping)
    return;
  p->stopping = true;
  if (p->exited) {
    // Exited while paused: its exit waits for a resume no longer needed.
    if (p->paused && !p->reported) {
      uv_timer_stop(&p->timer);
      uv_timer_start(&p->timer, drain_timeout_cb, 0, 0);
    }
    return;
  }
  p->grace_ms = grace_ms;
  uint64_t eof_ms = PROC_EOF_MS;
  if (!p->stdin_closed) {
    flush_out(p);
    p->stdin_closed = true;
    // The shutdown completes once the queued writes are in the pipe; the
    // agent then sees EOF after reading them.
    if (uv_shutdown(&p->shutdown_req, (uv_stream_t *)&p->in, shutdown_cb))
      eof_ms = 0;
  }
  uv_timer_stop(&p->timer);
  uv_timer_start(&p->timer, term_timer_cb, eof_ms, 0);
}

void proc_pause(struct proc *p, bool pause) {
  if (p->closing || p->out_eof || p->paused == pause)
    return;
  p->paused = pause;
  if (pause) {
    uv_read_stop((uv_stream_t *)&p->out);
    return;
  }
  uv_read_start((uv_stream_t *)&p->out, alloc_cb, out_read_cb);
  if (p->exited) { // the drain timeout waited for this
    uv_timer_stop(&p->timer);
    uv_timer_start(&p->timer, drain_timeout_cb, PROC_DRAIN_MS, 0);
  }
}

int proc_pid(const struct proc *p) {
  return p->pid;
}

bool proc_exited(const struct proc *p) {
  return p->exited;
}

static struct proc *proc_new(uv_loop_t *loop, const struct proc_spawn *spec,
                             const struct proc_ops *ops, void *ud) {
  struct proc *p = xcalloc(1, sizeof(*p));
  p->name = xstrdup(spec->name ? spec->name : spec->argv[0]);
  p->ops = ops;
  p->ud = ud;
  linebuf_init(&p->err_lines, PROC_STDERR_LINE_MAX);
  uv_pipe_init(loop, &p->in, 0);
  uv_pipe_init(loop, &p->out, 0);
  uv_pipe_init(loop, &p->err, 0);
  uv_timer_init(loop, &p->timer);
  uv_idle_init(loop, &p->flush);
  p->process.data = p->in.data = p->out.data = p->err.data = p->timer.data =
      p->flush.data = p;
  p->open_handles = 6;
  return p;
}

int proc_start(uv_loop_t *loop, uv_process_t *h, const struct proc_spawn *spec,
               uv_stdio_container_t stdio[3], uv_exit_cb on_exit, char *err,
               size_t errlen) {
  uv_process_options_t opts = {
      .exit_cb = on_exit,
      .file = spec->argv[0],
      // libuv takes char ** but does not modify the strings.
      .args = (char **)(uintptr_t)spec->argv,
      .env = spec->env,
      .cwd = spec->cwd,
      .flags = UV_PROCESS_DETACHED,
      .stdio_count = 3,
      .stdio = stdio,
  };
  int r = uv_spawn(loop, h, &opts);
  if (r != 0)
    snprintf(err, errlen, "cannot start %s: %s", spec->argv[0], uv_strerror(r));
  return r;
}

struct proc *proc_spawn(uv_loop_t *loop, const struct proc_spawn *spec,
                        const struct proc_ops *ops, void *ud, char *err,
                        size_t errlen) {
  struct proc *p = proc_new(loop, spec, ops, ud);
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE,
       .data.stream = (uv_stream_t *)&p->in},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&p->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&p->err},
  };
  if (proc_start(loop, &p->process, spec, stdio, exit_cb, err, errlen) != 0) {
    p->spawn_failed = true;
    close_all(p);
    return NULL;
  }
  p->pid = p->process.pid;
  uv_read_start((uv_stream_t *)&p->out, alloc_cb, out_read_cb);
  uv_read_start((uv_stream_t *)&p->err, alloc_cb, err_read_cb);
  LOG_I("started %s (pid %d)", p->name, p->pid);
  return p;
}
