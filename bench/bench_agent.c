// The agent side of `make bench`: a minimal ACP agent that, when prompted,
// sends a measured workload to whatever client started it (the broker, the
// Lua auto-approver, the Node SDK client) and times every answer.
//
//   bench_agent perm WARMUP N_SEQ N_PIPE DEPTH
//       WARMUP requests (not recorded), then N_SEQ session/request_permission
//       one at a time, then N_PIPE with DEPTH in flight. Every request is one
//       the bench's allow rules allow; an answer other than the allow_once
//       option counts as an error.
//   bench_agent ask WARMUP N
//       requests nothing allows, one at a time (the person is asked); each
//       carries its send time (CLOCK_MONOTONIC ns) in rawInput.bench_t_ns.
//   bench_agent pending N
//       N requests nothing allows, all at once; then waits (they stay
//       pending) until stdin closes.
//   bench_agent stream BYTES CHUNK [MESSAGE]
//       BYTES of agent_message_chunk text in CHUNK-byte updates, a new
//       messageId every MESSAGE bytes (default 128 KiB: a chat may cap one
//       message), then a message of its own: "BENCH-END\n".
//
// Each mode then answers the session/prompt with end_turn. Results go as one
// JSON object to the file $BENCH_OUT. Timing uses CLOCK_MONOTONIC, the clock
// of libuv's uv_hrtime(), so Neovim's timestamps compare with ours.
//
// The agent is built to cost little: responses are recognised by scanning
// for their "id" (only the few requests the client sends are parsed with
// jansson), and requests are written in batches.

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum mode { MODE_PERM, MODE_ASK, MODE_PENDING, MODE_STREAM };

struct out {
  char *buf;
  size_t len, cap;
};

struct agent {
  enum mode mode;
  long warmup, nseq, npipe, depth; // perm, ask (warmup, nseq), pending (nseq)
  long long bytes, chunk, message; // stream
  json_t *prompt_id;               // the session/prompt to answer at the end
  // Requests: ids 1..total; ids 1..warmup are the warm-up.
  long total;
  long next;                // the next id to send
  long done;                // answers received
  long errors;              // answers that were not the expected option
  int64_t *t_sent, *t_recv; // per id, ns
  int64_t t_seq0, t_seq1, t_pipe0, t_pipe1;
  // CPU time (ms) of the client (our parent) and of its parent, at the
  // start and the end of the pipelined phase.
  double cpu_parent0, cpu_parent1, cpu_grand0, cpu_grand1;
  struct out out;
};

// The fields of /proc/PID/stat after the command name (which may hold
// spaces), starting with the state, in buf; NULL when unreadable.
static const char *stat_fields(int pid, char *buf, size_t len) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t n = fread(buf, 1, len - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  return p && p[1] == ' ' ? p + 2 : NULL;
}

// utime + stime of pid in ms, or -1.
static double cpu_ms(int pid) {
  char buf[1024];
  const char *p = stat_fields(pid, buf, sizeof(buf));
  unsigned long long ut, st;
  if (!p || sscanf(p, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                   &ut, &st) != 2)
    return -1;
  return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

// Parent process id of pid, or -1.
static int parent_of(int pid) {
  char buf[1024];
  const char *p = stat_fields(pid, buf, sizeof(buf));
  int ppid;
  return p && sscanf(p, "%*c %d", &ppid) == 1 ? ppid : -1;
}

static const char session_id[] = "bench-session-1";

// Commands the bench's allow rules allow (bench/rules.json), as agents send
// them: single commands, pipelines, chains, paths.
static const char *const allowed_commands[] = {
    "git status --short",
    "git diff --stat HEAD~1 -- src/gate.c",
    "npm test -- --watch=false",
    "ls -la src/",
    "grep -rn TODO src | head -n 20",
    "cat README.md",
    "make -j2 test",
    "git log --oneline -n 20 && git status",
};
#define NALLOWED (sizeof(allowed_commands) / sizeof(allowed_commands[0]))

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("bench_agent: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static void *xalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p)
    die("out of memory");
  return p;
}

// ---- output ----

static void out_reserve(struct out *o, size_t n) {
  if (o->len + n <= o->cap)
    return;
  size_t cap = o->cap ? o->cap : 65536;
  while (cap < o->len + n)
    cap *= 2;
  o->buf = realloc(o->buf, cap);
  if (!o->buf)
    die("out of memory");
  o->cap = cap;
}

static void out_printf(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->cap - o->len;
    int n = vsnprintf(o->buf ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0)
      die("vsnprintf failed");
    if ((size_t)n < room) {
      o->len += (size_t)n;
      return;
    }
    out_reserve(o, (size_t)n + 1);
  }
}

static void out_flush(struct out *o) {
  size_t off = 0;
  while (off < o->len) {
    ssize_t w = write(1, o->buf + off, o->len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      exit(0); // the client is gone
    off += (size_t)w;
  }
  o->len = 0;
}

static void send_json(struct agent *a, json_t *msg) {
  char *s = json_dumps(msg, JSON_COMPACT);
  out_printf(&a->out, "%s\n", s);
  free(s);
  json_decref(msg);
}

static void respond(struct agent *a, json_t *id, json_t *result) {
  send_json(a, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result",
                         result));
}

// ---- requests to the client ----

static void send_permission(struct agent *a, long id) {
  a->t_sent[id] = now_ns();
  const char *cmd;
  char ask[64];
  if (a->mode == MODE_PERM) {
    cmd = allowed_commands[id % NALLOWED];
  } else {
    snprintf(ask, sizeof(ask), "bench-ask --request %ld", id);
    cmd = ask;
  }
  out_printf(&a->out,
             "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/"
             "request_permission\",\"params\":{\"sessionId\":\"%s\","
             "\"toolCall\":{\"toolCallId\":\"call-%ld\",\"title\":\"%s\","
             "\"kind\":\"execute\",\"rawInput\":{\"command\":\"%s\","
             "\"bench_t_ns\":%lld}},\"options\":["
             "{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":"
             "\"allow_once\"},{\"optionId\":\"reject\",\"name\":\"Reject\","
             "\"kind\":\"reject_once\"}]}}\n",
             id, session_id, id, cmd, cmd, (long long)a->t_sent[id]);
}

static void send_stream(struct agent *a) {
  // Prose with a newline every 80 characters, as the text of a long answer.
  static const char words[] = "the broker decides every permission request "
                              "while the agent streams its answer ";
  size_t chunk = (size_t)a->chunk, n = 0;
  char *text = xalloc(2 * chunk + 1);
  for (size_t i = 0; i < chunk; i++) {
    if (i % 80 == 79) { // JSON-escaped: two bytes for one of text
      text[n++] = '\\';
      text[n++] = 'n';
    } else {
      text[n++] = words[i % (sizeof(words) - 1)];
    }
  }
  text[n] = '\0';
  long long sent = 0;
  while (sent < a->bytes) {
    out_printf(&a->out,
               "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
               "{\"sessionId\":\"%s\",\"update\":{\"sessionUpdate\":"
               "\"agent_message_chunk\",\"messageId\":\"m%lld\",\"content\":"
               "{\"type\":\"text\",\"text\":\"%s\"}}}}\n",
               session_id, sent / a->message, text);
    sent += (long long)chunk;
    if (a->out.len >= 256 * 1024)
      out_flush(&a->out);
  }
  out_printf(&a->out,
             "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
             "{\"sessionId\":\"%s\",\"update\":{\"sessionUpdate\":"
             "\"agent_message_chunk\",\"messageId\":\"end\",\"content\":"
             "{\"type\":\"text\",\"text\":\"BENCH-END\\n\"}}}}\n",
             session_id);
  a->bytes = sent;
  free(text);
}

// ---- results ----

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

// Latency figures (µs) of ids [from, to).
static json_t *latencies(const struct agent *a, long from, long to, int64_t t0,
                         int64_t t1) {
  long n = to - from;
  if (n <= 0)
    return json_null();
  int64_t *v = xalloc((size_t)n * sizeof(*v));
  double sum = 0;
  for (long i = 0; i < n; i++) {
    v[i] = a->t_recv[from + i] - a->t_sent[from + i];
    sum += (double)v[i];
  }
  qsort(v, (size_t)n, sizeof(*v), cmp_i64);
  json_t *j =
      json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)n, "mean_us",
                sum / (double)n / 1e3, "p50_us", (double)v[n / 2] / 1e3,
                "p90_us", (double)v[n * 9 / 10] / 1e3, "p99_us",
                (double)v[n * 99 / 100] / 1e3, "max_us", (double)v[n - 1] / 1e3,
                "per_s", (double)n / ((double)(t1 - t0) / 1e9));
  free(v);
  return j;
}

static void write_results(struct agent *a) {
  const char *path = getenv("BENCH_OUT");
  if (!path || !*path)
    return;
  json_t *r = json_pack("{s:I}", "errors", (json_int_t)a->errors);
  if (a->mode == MODE_PERM) {
    long s0 = a->warmup + 1, p0 = s0 + a->nseq;
    json_object_set_new(r, "seq", latencies(a, s0, p0, a->t_seq0, a->t_seq1));
    json_object_set_new(r, "pipe",
                        latencies(a, p0, a->total + 1, a->t_pipe0, a->t_pipe1));
    json_object_set_new(r, "depth", json_integer(a->depth));
    // CPU per pipelined request (µs) of the client and of its parent.
    double n = (double)(a->npipe > 0 ? a->npipe : 1);
    json_object_set_new(
        r, "cpu_parent_us",
        json_real((a->cpu_parent1 - a->cpu_parent0) * 1000.0 / n));
    json_object_set_new(
        r, "cpu_grand_us",
        json_real((a->cpu_grand1 - a->cpu_grand0) * 1000.0 / n));
  } else if (a->mode == MODE_ASK) {
    json_t *sent = json_array(), *recv = json_array();
    for (long i = a->warmup + 1; i <= a->total; i++) {
      json_array_append_new(sent, json_integer(a->t_sent[i]));
      json_array_append_new(recv, json_integer(a->t_recv[i]));
    }
    json_object_set_new(r, "first", json_integer(a->warmup + 1));
    json_object_set_new(r, "t_sent", sent);
    json_object_set_new(r, "t_recv", recv);
  } else if (a->mode == MODE_PENDING) {
    json_object_set_new(r, "sent", json_integer(a->total));
  } else {
    json_object_set_new(r, "bytes", json_integer(a->bytes));
    json_object_set_new(r, "chunk", json_integer(a->chunk));
    json_object_set_new(r, "message", json_integer(a->message));
  }
  if (json_dump_file(r, path, JSON_COMPACT) != 0)
    die("cannot write %s", path);
  json_decref(r);
}

static void finish_turn(struct agent *a) {
  write_results(a);
  if (a->prompt_id) {
    respond(a, a->prompt_id, json_pack("{s:s}", "stopReason", "end_turn"));
    json_decref(a->prompt_id);
    a->prompt_id = NULL;
  }
}

// ---- the workload ----

// Sends what may be sent now: perm keeps `depth` requests in flight in the
// warm-up and the pipelined phase and one in the sequential phase; ask
// sends one at a time. A phase starts once the one before is all answered.
static void pump(struct agent *a) {
  long seq_first = a->warmup + 1, pipe_first = a->warmup + a->nseq + 1;
  while (a->next <= a->total) {
    long id = a->next, inflight = id - 1 - a->done;
    if ((id == seq_first || id == pipe_first) && inflight > 0)
      break;
    bool pipelined =
        a->mode == MODE_PERM && (id < seq_first || id >= pipe_first);
    if (inflight >= (pipelined ? a->depth : 1))
      break;
    if (id == seq_first)
      a->t_seq0 = now_ns();
    if (id == pipe_first) {
      a->cpu_parent0 = cpu_ms(getppid());
      a->cpu_grand0 = cpu_ms(parent_of(getppid()));
      a->t_seq1 = a->t_pipe0 = now_ns();
    }
    send_permission(a, a->next++);
  }
  if (a->done == a->total && a->prompt_id) {
    a->t_pipe1 = now_ns();
    a->cpu_parent1 = cpu_ms(getppid());
    a->cpu_grand1 = cpu_ms(parent_of(getppid()));
    if (!a->npipe)
      a->t_seq1 = a->t_pipe1;
    finish_turn(a);
  }
}

static void start_workload(struct agent *a) {
  if (a->mode == MODE_STREAM) {
    send_stream(a);
    finish_turn(a);
    return;
  }
  if (a->mode == MODE_PENDING) {
    for (long i = 1; i <= a->total; i++) {
      send_permission(a, i);
      if (a->out.len >= 256 * 1024)
        out_flush(&a->out);
    }
    a->next = a->total + 1;
    write_results(a);
    return; // the prompt is answered when stdin closes, never here
  }
  a->next = 1;
  pump(a);
}

// The value after key (a quoted name) and its colon in line, spaces
// skipped, or NULL. Enough for the answers we get, whose only keys are
// jsonrpc, id, result, outcome and optionId.
static const char *value_of(const char *line, const char *key) {
  size_t n = strlen(key);
  for (const char *p = line; (p = strstr(p, key)); p += n) {
    const char *v = p + n;
    while (*v == ' ')
      v++;
    if (*v != ':')
      continue;
    for (v++; *v == ' ';)
      v++;
    return v;
  }
  return NULL;
}

// A response to one of our requests: the line holds no "method".
static void on_response(struct agent *a, const char *line) {
  const char *p = value_of(line, "\"id\"");
  if (!p)
    return;
  long id = strtol(p, NULL, 10);
  if (id < 1 || id > a->total || a->t_recv[id])
    return;
  a->t_recv[id] = now_ns();
  a->done++;
  const char *opt = value_of(line, "\"optionId\"");
  bool allowed = opt && strncmp(opt, "\"allow\"", 7) == 0;
  if (a->mode == MODE_PERM ? !allowed : strstr(line, "\"error\"") != NULL)
    a->errors++;
  if (a->mode != MODE_PENDING)
    pump(a);
}

static void on_request(struct agent *a, json_t *msg) {
  const char *method = json_string_value(json_object_get(msg, "method"));
  json_t *id = json_object_get(msg, "id");
  if (!id)
    return; // notifications (session/cancel) change nothing here
  if (strcmp(method, "initialize") == 0) {
    respond(a, id,
            json_pack("{s:i,s:{s:b},s:[],s:{s:s,s:s}}", "protocolVersion", 1,
                      "agentCapabilities", "loadSession", 0, "authMethods",
                      "agentInfo", "name", "bench-agent", "version", "1"));
  } else if (strcmp(method, "session/new") == 0) {
    respond(a, id, json_pack("{s:s}", "sessionId", session_id));
  } else if (strcmp(method, "session/prompt") == 0 && !a->prompt_id) {
    a->prompt_id = json_incref(id);
    start_workload(a);
  } else {
    send_json(a, json_pack("{s:s,s:O,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id,
                           "error", "code", -32601, "message",
                           "Method not found"));
  }
}

static void on_line(struct agent *a, const char *line) {
  if (!strstr(line, "\"method\"")) {
    on_response(a, line);
    return;
  }
  json_error_t err;
  json_t *msg = json_loads(line, 0, &err);
  if (json_is_string(json_object_get(msg, "method")))
    on_request(a, msg);
  json_decref(msg);
}

// ---- main ----

static long arg(int argc, char **argv, int i) {
  if (i >= argc)
    die("missing argument %d (see the top of bench/bench_agent.c)", i);
  char *end;
  long v = strtol(argv[i], &end, 10);
  if (*end || v < 0)
    die("bad number %s", argv[i]);
  return v;
}

static void parse_args(struct agent *a, int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "";
  if (strcmp(m, "perm") == 0) {
    a->mode = MODE_PERM;
    a->warmup = arg(argc, argv, 2);
    a->nseq = arg(argc, argv, 3);
    a->npipe = arg(argc, argv, 4);
    a->depth = arg(argc, argv, 5);
    if (a->depth < 1)
      die("DEPTH must be at least 1");
  } else if (strcmp(m, "ask") == 0) {
    a->mode = MODE_ASK;
    a->warmup = arg(argc, argv, 2);
    a->nseq = arg(argc, argv, 3);
  } else if (strcmp(m, "pending") == 0) {
    a->mode = MODE_PENDING;
    a->nseq = arg(argc, argv, 2);
  } else if (strcmp(m, "stream") == 0) {
    a->mode = MODE_STREAM;
    a->bytes = arg(argc, argv, 2);
    a->chunk = arg(argc, argv, 3);
    a->message = argc > 4 ? arg(argc, argv, 4) : 128 * 1024;
    if (a->chunk < 1 || a->message < 1)
      die("CHUNK and MESSAGE must be at least 1");
  } else {
    die("usage: bench_agent perm|ask|pending|stream ... (see the source)");
  }
  a->total = a->warmup + a->nseq + a->npipe;
  a->t_sent = xalloc((size_t)(a->total + 2) * sizeof(int64_t));
  a->t_recv = xalloc((size_t)(a->total + 2) * sizeof(int64_t));
}

int main(int argc, char **argv) {
  struct agent a = {0};
  parse_args(&a, argc, argv);
  size_t cap = 1 << 20, len = 0;
  char *in = xalloc(cap);
  for (;;) {
    if (len == cap) {
      cap *= 2;
      in = realloc(in, cap);
      if (!in)
        die("out of memory");
    }
    ssize_t n = read(0, in + len, cap - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
    size_t start = 0;
    for (char *nl; (nl = memchr(in + start, '\n', len - start));) {
      *nl = '\0';
      on_line(&a, in + start);
      start = (size_t)(nl - in) + 1;
    }
    memmove(in, in + start, len - start);
    len -= start;
    out_flush(&a.out);
  }
  if (a.mode == MODE_PENDING)
    write_results(&a);
  return 0;
}
