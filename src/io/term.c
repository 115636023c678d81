#include "term.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/signame.h"
#include "base/utf8.h"

// After exit, how long the output pipes may stay open (held by a child
// that escaped into the background) before the exit is reported anyway.
#define TERM_DRAIN_MS 100
#define TERM_READ_SIZE 65536

struct term {
  uv_process_t process;
  uv_pipe_t out, err;
  uv_timer_t timer; // drain timeout
  const struct term_ops *ops;
  void *ud;
  int pid;
  int open_handles;
  int open_pipes; // output pipes not at EOF
  int64_t exit_code;
  int exit_signal;
  bool exited, done, spawn_failed;
  bool closing; // term_close ran: no more callbacks but `closed`
  bool handles_closed;
  char *buf; // output kept
  size_t len, cap, limit;
  bool truncated;
  char rbuf[TERM_READ_SIZE];
};

static void close_cb(uv_handle_t *h) {
  struct term *t = h->data;
  if (--t->open_handles > 0)
    return;
  bool notify = !t->spawn_failed;
  const struct term_ops *ops = t->ops;
  void *ud = t->ud;
  free(t->buf);
  free(t);
  if (notify)
    ops->closed(ud);
}

static void kill_group(struct term *t) {
  if (t->pid > 0 && kill(-t->pid, SIGKILL) != 0 && errno != ESRCH)
    LOG_W("kill(-%d): %s", t->pid, strerror(errno));
}

static void close_handles(struct term *t) {
  if (t->handles_closed)
    return;
  t->handles_closed = true;
  uv_close((uv_handle_t *)&t->process, close_cb);
  uv_close((uv_handle_t *)&t->out, close_cb);
  uv_close((uv_handle_t *)&t->err, close_cb);
  uv_close((uv_handle_t *)&t->timer, close_cb);
}

static void finish(struct term *t) {
  if (t->done)
    return;
  t->done = true;
  uv_timer_stop(&t->timer);
  // Nothing the command left in the background outlives it.
  kill_group(t);
  if (t->closing)
    close_handles(t);
  else
    t->ops->done(t->ud);
}

static void drain_cb(uv_timer_t *h) {
  finish(h->data);
}

static void exit_cb(uv_process_t *h, int64_t status, int sig) {
  struct term *t = h->data;
  t->exited = true;
  t->exit_code = status;
  t->exit_signal = sig;
  if (t->open_pipes == 0)
    finish(t);
  else
    uv_timer_start(&t->timer, drain_cb, TERM_DRAIN_MS, 0);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct term *t = h->data;
  *buf = uv_buf_init(t->rbuf, sizeof(t->rbuf));
}

// Keeps the last t->limit bytes, cut at a character boundary.
static void append(struct term *t, const char *data, size_t n) {
  if (n >= t->limit) {
    data += n - t->limit;
    n = t->limit;
    t->len = 0;
    t->truncated = true;
  } else if (t->len + n > t->limit) {
    size_t drop = t->len + n - t->limit;
    memmove(t->buf, t->buf + drop, t->len - drop);
    t->len -= drop;
    t->truncated = true;
  }
  if (t->len + n > t->cap) {
    t->cap = t->len + n > t->cap * 2 ? t->len + n : t->cap * 2;
    if (t->cap > t->limit)
      t->cap = t->limit;
    t->buf = xrealloc(t->buf, t->cap);
  }
  memcpy(t->buf + t->len, data, n);
  t->len += n;
  if (t->truncated) {
    // Never start in the middle of a UTF-8 sequence.
    size_t skip = 0;
    while (skip < t->len && skip < 3 &&
           ((unsigned char)t->buf[skip] & 0xc0) == 0x80)
      skip++;
    if (skip) {
      memmove(t->buf, t->buf + skip, t->len - skip);
      t->len -= skip;
    }
  }
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct term *t = s->data;
  if (n > 0) {
    append(t, buf->base, (size_t)n);
    if (!t->closing)
      t->ops->output(t->ud);
    return;
  }
  if (n == 0)
    return;
  uv_read_stop(s);
  if (--t->open_pipes == 0 && t->exited)
    finish(t);
}

struct term *term_spawn(uv_loop_t *loop, const struct proc_spawn *spec,
                        size_t limit, const struct term_ops *ops, void *ud,
                        char *err, size_t errlen) {
  struct term *t = xcalloc(1, sizeof(*t));
  t->ops = ops;
  t->ud = ud;
  t->limit = limit == 0 || limit > TERM_OUTPUT_MAX ? TERM_OUTPUT_MAX : limit;
  uv_pipe_init(loop, &t->out, 0);
  uv_pipe_init(loop, &t->err, 0);
  uv_timer_init(loop, &t->timer);
  t->process.data = t->out.data = t->err.data = t->timer.data = t;
  t->open_handles = 4;
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_IGNORE},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&t->out},
      {.flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE,
       .data.stream = (uv_stream_t *)&t->err},
  };
  if (proc_start(loop, &t->process, spec, stdio, exit_cb, err, errlen) != 0) {
    t->spawn_failed = t->closing = true;
    close_handles(t);
    return NULL;
  }
  t->pid = t->process.pid;
  t->open_pipes = 2;
  uv_read_start((uv_stream_t *)&t->out, alloc_cb, read_cb);
  uv_read_start((uv_stream_t *)&t->err, alloc_cb, read_cb);
  return t;
}

void term_kill(struct term *t) {
  if (!t->exited)
    kill_group(t);
}

bool term_done(const struct term *t) {
  return t->done;
}

json_t *term_exit_status(const struct term *t) {
  if (!t->done)
    return NULL;
  if (t->exit_signal) {
    char buf[32];
    snprintf(buf, sizeof(buf), "SIG%d", t->exit_signal);
    const char *name = signame(t->exit_signal);
    if (!name)
      name = buf;
    return json_pack("{s:n,s:s}", "exitCode", "signal", name);
  }
  return json_pack("{s:I,s:n}", "exitCode", (json_int_t)t->exit_code, "signal");
}

// Copies s[0..n) replacing each byte that does not start a valid UTF-8
// sequence by U+FFFD.
static json_t *utf8_string(const char *s, size_t n) {
  if (utf8_valid(s, n))
    return json_stringn(s, n);
  char *out = xmalloc(n * 3 + 1);
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t k = 1;
    while (k <= 4 && i + k <= n && !utf8_valid(s + i, k))
      k++;
    if (k <= 4 && i + k <= n) {
      memcpy(out + o, s + i, k);
      o += k;
      i += k;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  json_t *j = json_stringn(out, o);
  free(out);
  return j;
}

json_t *term_output(const struct term *t, size_t max, bool *truncated) {
  *truncated = t->truncated;
  size_t from = 0;
  if (max && t->len > max) {
    from = t->len - max;
    while (from < t->len && ((unsigned char)t->buf[from] & 0xc0) == 0x80)
      from++;
  }
  return utf8_string(t->buf ? t->buf + from : "", t->len - from);
}

int term_pid(const struct term *t) {
  return t->pid;
}

void term_close(struct term *t) {
  if (t->closing)
    return;
  t->closing = true;
  if (t->done) {
    close_handles(t);
    return;
  }
  // Closed once it has exited (so that it is reaped): SIGKILL is quick.
  kill_group(t);
}
