// acp-demo-agent: a scripted ACP agent with no language model behind it.
//
// It speaks the agent side of ACP (newline-delimited JSON-RPC 2.0 on stdio)
// and plays a scenario on every session/prompt: message chunks, permission
// requests shaped like those of real agents, and the actions they guard
// (write a file, run a command), through the client's fs/terminal methods
// when the client advertised them. A scenario can also read, write or run
// without asking (as real agents read files, or as a misbehaving agent
// would write), end a turn with an error, offer session modes, require
// authentication and load sessions. `make demo` uses the built-in scenario;
// the end-to-end tests pass scenario files (format: tests/scenarios/README.md)
// and read the transcript named by $ACP_DEMO_TRANSCRIPT.
//
// One thread, one poll() loop over stdin, a self-pipe for signals, the output
// pipes of local child processes, the sleep timers of running turns and the
// kill timers of running commands. A prompt turn is a small state machine:
//
//   session/prompt
//        |
//        v
//   [next step] --message/raw/update(s)--> [next step]
//        |  |  \--sleep--> (timer) ----> [next step]
//        |  |   \--read/write/run--------------------> [acting] --> done
//        |  \--permission(s)--> [asking] --answer--> [acting] --> done
//        |                         (fs/*, terminal/* or a child process)
//        v                                                         |
//   no step left, a stop, an error step, or session/cancel  <------/
//        |                     (once no permission of the turn is open)
//        v
//   prompt response {stopReason} (or the error step's error)
//
// Each permission request is a "perm" in a list of its own, and so is each
// action step, which asks nothing. A perm whose turn has ended (the turn
// failed, or the step said "wait": false) is orphaned: it still takes its
// answer, but acts on nothing and tells nobody.

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/signame.h"

#define AGENT_NAME "acp-demo-agent"
#define AGENT_VERSION "0.1.0"
#define MAX_LINE ((size_t)64 << 20) // longest accepted input line
#define CHUNK_BYTES 20              // usual size of a message chunk
#define MAX_CHUNKS 8                // long texts get bigger chunks instead
#define OUTPUT_KEEP 8192 // bytes of a local command's output or read kept
#define READ_SHOW 2000   // bytes of a file read shown in its message
// Bulk output (garbage and flood steps) is written in chunks of this size.
#define WRITE_CHUNK ((size_t)1 << 20)

// The scenario played when neither --scenario nor $ACP_DEMO_SCENARIO names
// one. tests/scenarios/demo.json is the same document.
static const char default_scenario[] =
    "{"
    "  \"name\": \"demo\","
    "  \"id_style\": \"int\","
    "  \"steps\": ["
    "    {"
    "      \"type\": \"message\","
    "      \"text\": \"Hi! I'm the demo agent. I'll create a file, then run a "
    "command — each only if you allow it.\""
    "    },"
    "    {"
    "      \"type\": \"permission\","
    "      \"announce\": true,"
    "      \"toolCall\": {"
    "        \"toolCallId\": \"demo_write_${turn}\","
    "        \"title\": \"Write hello.txt\","
    "        \"kind\": \"edit\","
    "        \"content\": ["
    "          {"
    "            \"type\": \"diff\","
    "            \"path\": \"${cwd}/hello.txt\","
    "            \"oldText\": null,"
    "            \"newText\": \"Hello from the acp-broker demo agent!\\n\""
    "          }"
    "        ],"
    "        \"locations\": [{\"path\": \"${cwd}/hello.txt\"}],"
    "        \"rawInput\": {"
    "          \"file_path\": \"${cwd}/hello.txt\","
    "          \"content\": \"Hello from the acp-broker demo agent!\\n\""
    "        }"
    "      },"
    "      \"options\": ["
    "        {\"optionId\": \"allow_always\", \"name\": \"Always Allow\", "
    "\"kind\": \"allow_always\"},"
    "        {\"optionId\": \"allow\", \"name\": \"Allow\", \"kind\": "
    "\"allow_once\"},"
    "        {\"optionId\": \"reject\", \"name\": \"Reject\", \"kind\": "
    "\"reject_once\"}"
    "      ],"
    "      \"on_allow\": {"
    "        \"type\": \"write\","
    "        \"path\": \"hello.txt\","
    "        \"content\": \"Hello from the acp-broker demo agent!\\n\""
    "      }"
    "    },"
    "    {"
    "      \"type\": \"permission\","
    "      \"announce\": false,"
    "      \"toolCall\": {"
    "        \"toolCallId\": \"demo_shell_${turn}\","
    "        \"status\": \"pending\","
    "        \"title\": \"ls -la hello.txt\","
    "        \"kind\": \"execute\","
    "        \"content\": ["
    "          {"
    "            \"type\": \"content\","
    "            \"content\": {"
    "              \"type\": \"text\","
    "              \"text\": \"[current working directory ${cwd}] (Show the "
    "file that was written)\""
    "            }"
    "          }"
    "        ],"
    "        \"locations\": [],"
    "        \"rawInput\": {\"command\": \"ls -la hello.txt\"}"
    "      },"
    "      \"options\": ["
    "        {\"optionId\": \"proceed_always\", \"name\": \"Allow for this "
    "session\", \"kind\": \"allow_always\"},"
    "        {\"optionId\": \"proceed_once\", \"name\": \"Allow\", \"kind\": "
    "\"allow_once\"},"
    "        {\"optionId\": \"cancel\", \"name\": \"Reject\", \"kind\": "
    "\"reject_once\"}"
    "      ],"
    "      \"on_allow\": {\"type\": \"run\", \"command\": \"ls -la hello.txt\"}"
    "    },"
    "    {\"type\": \"message\", \"text\": \"All done.\"}"
    "  ]"
    "}";

struct buf {
  char *data;
  size_t len, cap;
};

enum id_style { ID_INT, ID_STRING, ID_UUID };

// What a request of ours was for, so that its response goes to the right
// continuation of the perm that sent it.
enum req_kind {
  REQ_PERMISSION,
  REQ_FS_READ,
  REQ_FS_WRITE,
  REQ_TERM_CREATE,
  REQ_TERM_KILL,
  REQ_TERM_WAIT,
  REQ_TERM_OUTPUT,
  REQ_TERM_RELEASE
};

// What an allowed permission (its on_allow) or an action step does.
enum act_type { ACT_NONE, ACT_READ, ACT_WRITE, ACT_RUN };

struct perm;

// A request we sent and whose response has not arrived yet.
struct outreq {
  struct outreq *next;
  json_t *id; // owned; matched with json_equal, so 0 and "0" differ
  enum req_kind kind;
  struct perm *perm;
};

struct turn;

struct session {
  struct session *next;
  char *id;
  char *cwd;         // absolute, without a trailing slash
  struct turn *turn; // the running prompt turn, or NULL
  unsigned turns;    // prompt turns started so far
  char *mode;        // current mode id, or NULL if the scenario has no modes
};

struct turn {
  struct session *session;
  json_t *prompt_id; // owned; the id of the client's session/prompt
  unsigned number;   // 1 for the session's first turn (${turn})
  size_t step;       // index of the next step to run
  size_t active;     // perms of this turn not finished yet
  int64_t wake_at;   // monotonic ms at which a sleep ends, or 0
  bool cancelled;    // session/cancel arrived
  const char *stop;  // stop reason asked for by an on_reject, or NULL
  json_t *error;     // owned; the error an error step ends the turn with
  bool pumping;      // turn_pump is running steps
};

struct perm {
  struct perm *next, *prev; // newest first
  struct session *session;
  struct turn *turn;        // NULL once orphaned
  json_t *spec;             // owned; the request or step, variables expanded
  json_t *act;              // borrowed from spec: on_allow, or the step
  const char *tool_call_id; // borrowed from spec; NULL for an action step
  char *title;              // what messages call the tool call
  char *detail;             // outcome of the action, e.g. "exit 0"
  bool failed;              // the action failed
  char *path;               // file read or written, absolute
  char *term_id;            // the client's terminal, while we hold it
  struct buf output;        // the command's output, or the start of a read
  bool truncated;           // the command's output was cut
  json_t *exit_code;        // exit code of a command that ran, or NULL
  json_t *signal;           // signal name that ended the command, or NULL
  int64_t kill_at;          // monotonic ms at which to kill it, or 0
  pid_t pid;                // local child running the command, or 0
  int out_fd;               // read end of the child's output pipe, or -1
  bool reaped;              // the child has been waited for
};

struct agent {
  json_t *scenario;
  enum id_style id_style;
  bool fs_read, fs_write, terminal; // what the client advertised
  bool authenticated;               // an authenticate request succeeded
  FILE *transcript;
  struct session *sessions;
  unsigned nsessions;
  struct outreq *outreqs, **outreqs_tail; // oldest first
  struct perm *perms;
  uint64_t next_id;
  struct buf in;       // the unfinished input line
  bool skipping;       // discarding an overlong input line
  size_t skipped;      // its length so far
  struct pollfd *pfds; // scratch array for poll()
  size_t pfds_cap;
};

// Signal handlers only write one byte here; the loop does the work.
static int sig_pipe[2] = {-1, -1};

static void agent_exit(struct agent *a, int code);
static void turn_pump(struct agent *a, struct turn *t);
static void turn_finish(struct agent *a, struct turn *t, const char *stop,
                        json_t *error);
static void perm_complete(struct agent *a, struct perm *p);

// ---------------------------------------------------------------------------
// Small utilities

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs(AGENT_NAME ": ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

// Running out of memory or a bug in this file: no way to go on.
__attribute__((noreturn)) static void die(const char *what) {
  say("fatal: %s", what);
  abort();
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p)
    die("out of memory");
  return p;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  if (!p)
    die("out of memory");
  return p;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xrealloc(NULL, n), s, n);
}

// Returns a new string formatted like printf.
__attribute__((format(printf, 1, 2))) static char *fmt(const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = vsnprintf(NULL, 0, f, ap);
  va_end(ap);
  if (n < 0)
    die("bad format");
  char *s = xrealloc(NULL, (size_t)n + 1);
  va_start(ap, f);
  vsnprintf(s, (size_t)n + 1, f, ap);
  va_end(ap);
  return s;
}

static void buf_add(struct buf *b, const char *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    b->cap = (b->len + n + 1) * 2;
    b->data = xrealloc(b->data, b->cap);
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void buf_adds(struct buf *b, const char *s) {
  buf_add(b, s, strlen(s));
}

static void buf_free(struct buf *b) {
  free(b->data);
  *b = (struct buf){0};
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// A JSON string of n bytes at p; bytes that are not valid UTF-8 (a command's
// output can be anything) make it fall back to ASCII with '?' for the rest.
static json_t *text_json(const char *p, size_t n) {
  json_t *s = json_stringn(p, n);
  if (s)
    return s;
  char *copy = xrealloc(NULL, n);
  for (size_t i = 0; i < n; i++)
    copy[i] = (p[i] & 0x80) || p[i] == '\0' ? '?' : p[i];
  s = json_stringn(copy, n);
  free(copy);
  return s;
}

// ---------------------------------------------------------------------------
// Transcript and output

// Appends one JSON object to the transcript; steals rec.
static void record(struct agent *a, json_t *rec) {
  if (a->transcript && rec) {
    json_dumpf(rec, a->transcript, JSON_COMPACT | JSON_ENCODE_ANY);
    fputc('\n', a->transcript);
    fflush(a->transcript); // tests read it while we run
  }
  json_decref(rec);
}

static void record_msg(struct agent *a, const char *dir, json_t *msg) {
  record(a, json_pack("{s:s,s:O}", "dir", dir, "msg", msg));
}

static void write_all(struct agent *a, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDOUT_FILENO, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN) {
      struct pollfd pfd = {.fd = STDOUT_FILENO, .events = POLLOUT};
      poll(&pfd, 1, -1);
      continue;
    }
    if (w <= 0) {
      say("stdout: %s; exiting", w < 0 ? strerror(errno) : "closed");
      agent_exit(a, 1);
    }
    p += w;
    n -= (size_t)w;
  }
}

// Writes one line of n bytes to stdout exactly as given and records it.
static void send_raw(struct agent *a, const char *line, size_t n) {
  write_all(a, line, n);
  write_all(a, "\n", 1);
  json_t *msg = json_loadb(line, n, JSON_DECODE_ANY, NULL);
  if (!msg) // recorded as a string, as unparseable input lines are
    msg = text_json(line, n);
  record_msg(a, "out", msg);
  json_decref(msg);
}

// A raw step's line with "encoding": "latin1": each character below U+0100
// becomes the one byte of that value, so that a scenario (which is UTF-8
// JSON) can write bytes that are not UTF-8. Other characters (only a
// variable can bring them in) are copied as they are. Returns the bytes'
// count.
static size_t latin1_bytes(const char *s, char *out) {
  size_t n = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; n++) {
    if ((p[0] == 0xC2 || p[0] == 0xC3) && (p[1] & 0xC0) == 0x80) {
      out[n] = (char)(((p[0] & 0x03) << 6) | (p[1] & 0x3F));
      p += 2;
    } else {
      out[n] = (char)*p++;
    }
  }
  return n;
}

// Sends one compact JSON message; steals msg.
static void send_msg(struct agent *a, json_t *msg) {
  if (!msg)
    die("could not build a message");
  char *s = json_dumps(msg, JSON_COMPACT);
  if (!s)
    die("could not encode a message");
  write_all(a, s, strlen(s));
  write_all(a, "\n", 1);
  free(s);
  record_msg(a, "out", msg);
  json_decref(msg);
}

static void respond(struct agent *a, json_t *id, json_t *result) {
  send_msg(a, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "result",
                        result));
}

// Answers with an error; steals data, which may be NULL.
static void respond_error(struct agent *a, json_t *id, int code,
                          const char *message, json_t *data) {
  json_t *err = json_pack("{s:i,s:s}", "code", code, "message", message);
  if (data)
    json_object_set_new(err, "data", data);
  send_msg(
      a, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", id, "error", err));
}

static void notify(struct agent *a, const char *method, json_t *params) {
  send_msg(a, json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method,
                        "params", params));
}

static void send_update(struct agent *a, struct session *s, json_t *update) {
  notify(a, "session/update",
         json_pack("{s:s,s:o}", "sessionId", s->id, "update", update));
}

// Streams text as a few agent_message_chunk updates, cut on UTF-8 character
// boundaries, so that clients see it arrive in pieces as from a real model.
// Each text is one message with its own messageId, as real agents mark them.
static void send_text(struct agent *a, struct session *s, const char *text) {
  static unsigned long messages;
  char id[48];
  snprintf(id, sizeof(id), "msg_%ld_%lu", (long)getpid(), ++messages);
  size_t len = strlen(text);
  size_t size = len / MAX_CHUNKS > CHUNK_BYTES ? len / MAX_CHUNKS : CHUNK_BYTES;
  for (size_t i = 0; i < len;) {
    size_t n = len - i < size ? len - i : size;
    while (i + n < len && (text[i + n] & 0xC0) == 0x80)
      n++;
    send_update(a, s,
                json_pack("{s:s,s:s,s:{s:s,s:o}}", "sessionUpdate",
                          "agent_message_chunk", "messageId", id, "content",
                          "type", "text", "text", text_json(text + i, n)));
    i += n;
  }
}

// Bulk output for fault tests: written in chunks of WRITE_CHUNK bytes and
// recorded in the transcript as one event, not line by line.

// Writes total bytes: fill repeated, with a "\n" after every `line` bytes
// (0: no newline at all). Then, if end_line, one "\n" unless the last byte
// was one, so that what follows starts a line of its own. Returns the bytes
// written.
static uint64_t write_filler(struct agent *a, uint64_t total, uint64_t line,
                             const char *fill, bool end_line) {
  size_t flen = strlen(fill);
  char *pat = xrealloc(NULL, WRITE_CHUNK), *buf = xrealloc(NULL, WRITE_CHUNK);
  for (size_t i = 0; i < WRITE_CHUNK; i++)
    pat[i] = fill[i % flen];
  uint64_t col = 0, written = 0;
  bool nl_last = false;
  while (written < total) {
    size_t n =
        total - written < WRITE_CHUNK ? (size_t)(total - written) : WRITE_CHUNK;
    for (size_t i = 0; i < n;) {
      if (line && col == line) {
        buf[i++] = '\n';
        col = 0;
        continue;
      }
      size_t k = n - i;
      if (line && line - col < k)
        k = (size_t)(line - col);
      memcpy(buf + i, pat, k);
      i += k;
      col += k;
    }
    write_all(a, buf, n);
    nl_last = buf[n - 1] == '\n';
    written += n;
  }
  if (end_line && !nl_last) {
    write_all(a, "\n", 1);
    written++;
  }
  free(pat);
  free(buf);
  return written;
}

// The "garbage" step: bytes of filler (ended by a newline unless "newline"
// is false), or with "json": true one valid session/update line whose
// message text is that filler.
static void send_garbage(struct agent *a, struct session *s, json_t *st) {
  uint64_t total = (uint64_t)json_integer_value(json_object_get(st, "bytes"));
  json_t *line = json_object_get(st, "line");
  const char *fill = json_string_value(json_object_get(st, "fill"));
  if (!fill || !*fill)
    fill = "x";
  uint64_t written = 0;
  if (json_is_true(json_object_get(st, "json"))) {
    char *head = fmt("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                     "\"params\":{\"sessionId\":\"%s\",\"update\":{"
                     "\"sessionUpdate\":\"agent_message_chunk\",\"content\":{"
                     "\"type\":\"text\",\"text\":\"",
                     s->id);
    static const char tail[] = "\"}}}}\n";
    write_all(a, head, strlen(head));
    written = strlen(head) + write_filler(a, total, 0, fill, false);
    write_all(a, tail, sizeof(tail) - 1);
    written += sizeof(tail) - 1;
    free(head);
  } else {
    written = write_filler(a, total, (uint64_t)json_integer_value(line), fill,
                           !json_is_false(json_object_get(st, "newline")));
  }
  say("wrote %" PRIu64 " bytes of garbage", written);
  record(a, json_pack("{s:s,s:I}", "event", "garbage", "bytes",
                      (json_int_t)written));
}

// The "flood" step: agent_message_chunk updates of `chunk` bytes of text
// until `bytes` bytes of text are sent. The lines are built by hand (the
// text is ASCII): jansson would take most of the time.
static void send_flood(struct agent *a, struct session *s, json_t *st) {
  uint64_t total = (uint64_t)json_integer_value(json_object_get(st, "bytes"));
  json_t *c = json_object_get(st, "chunk");
  size_t chunk = c ? (size_t)json_integer_value(c) : 65536;
  static unsigned long floods;
  char *head = fmt("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\","
                   "\"params\":{\"sessionId\":\"%s\",\"update\":{"
                   "\"sessionUpdate\":\"agent_message_chunk\",\"messageId\":"
                   "\"flood_%ld_%lu\",\"content\":{\"type\":\"text\","
                   "\"text\":\"",
                   s->id, (long)getpid(), ++floods);
  static const char tail[] = "\"}}}}\n";
  size_t hlen = strlen(head);
  char *line = xrealloc(NULL, hlen + chunk + sizeof(tail));
  memcpy(line, head, hlen);
  memset(line + hlen, 'x', chunk);
  uint64_t sent = 0, updates = 0;
  while (sent < total) {
    size_t n = total - sent < chunk ? (size_t)(total - sent) : chunk;
    // Each text starts with its number, so that a reader can tell gaps.
    char num[24];
    size_t k = (size_t)snprintf(num, sizeof(num), "[%" PRIu64 "]", updates);
    memcpy(line + hlen, num, k < n ? k : n);
    if (k < n)
      memset(line + hlen + k, 'x', n - k);
    memcpy(line + hlen + n, tail, sizeof(tail) - 1);
    write_all(a, line, hlen + n + sizeof(tail) - 1);
    sent += n;
    updates++;
  }
  free(line);
  free(head);
  say("flood: %" PRIu64 " updates, %" PRIu64 " bytes of text", updates, sent);
  record(a, json_pack("{s:s,s:I,s:I}", "event", "flood", "updates",
                      (json_int_t)updates, "bytes", (json_int_t)sent));
}

static json_t *uuid_json(void) {
  unsigned char b[16];
  FILE *f = fopen("/dev/urandom", "rbe");
  if (!f || fread(b, 1, sizeof(b), f) != sizeof(b))
    for (size_t i = 0; i < sizeof(b); i++)
      b[i] = (unsigned char)rand();
  if (f)
    fclose(f);
  b[6] = (unsigned char)((b[6] & 0x0F) | 0x40); // version 4
  b[8] = (unsigned char)((b[8] & 0x3F) | 0x80); // RFC 4122 variant
  char s[37], *p = s;
  for (size_t i = 0; i < sizeof(b); i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      *p++ = '-';
    p += sprintf(p, "%02x", b[i]);
  }
  return json_string(s);
}

static json_t *new_id(struct agent *a) {
  uint64_t n = a->next_id++;
  switch (a->id_style) {
  case ID_STRING:
    return json_sprintf("%" PRIu64, n);
  case ID_UUID:
    return uuid_json();
  default:
    return json_integer((json_int_t)n);
  }
}

// Sends a request of ours and remembers it; steals params. id_override, if
// not NULL, is the exact id to use (a scenario's "id").
static void request(struct agent *a, json_t *id_override, const char *method,
                    json_t *params, enum req_kind kind, struct perm *p) {
  struct outreq *r = xcalloc(1, sizeof(*r));
  r->id = id_override ? json_incref(id_override) : new_id(a);
  r->kind = kind;
  r->perm = p;
  // Appended: answers given in the order asked are found at the head.
  if (!a->outreqs)
    a->outreqs_tail = &a->outreqs;
  *a->outreqs_tail = r;
  a->outreqs_tail = &r->next;
  send_msg(a, json_pack("{s:s,s:O,s:s,s:o}", "jsonrpc", "2.0", "id", r->id,
                        "method", method, "params", params));
}

// ---------------------------------------------------------------------------
// Scenario variables: ${cwd}, ${turn}, ${session}, ${prompt_id}, ${mode}
// and ${n}

// What the variables stand for. A variable with nothing to stand for (no
// turn when a session/load replays history, no modes, no ${n}) stays as it
// is.
struct vars {
  const struct session *session;
  const struct turn *turn; // ${turn} and ${prompt_id}, or NULL
  const char *n;           // the text of ${n} (a copy's number), or NULL
};

// Appends the value of the variable at s, if one is there and has a value,
// and returns its length; else returns 0.
static size_t expand_var(struct buf *b, const char *s, const struct vars *v) {
  const struct session *sess = v->session;
  const struct turn *t = v->turn;
  if (strncmp(s, "${cwd}", 6) == 0) {
    buf_adds(b, sess->cwd);
    return 6;
  }
  if (strncmp(s, "${session}", 10) == 0) {
    buf_adds(b, sess->id);
    return 10;
  }
  if (sess->mode && strncmp(s, "${mode}", 7) == 0) {
    buf_adds(b, sess->mode);
    return 7;
  }
  if (t && strncmp(s, "${turn}", 7) == 0) {
    char number[24];
    snprintf(number, sizeof(number), "%u", t->number);
    buf_adds(b, number);
    return 7;
  }
  if (t && strncmp(s, "${prompt_id}", 12) == 0) {
    char *id = json_dumps(t->prompt_id, JSON_COMPACT | JSON_ENCODE_ANY);
    buf_adds(b, id ? id : "null");
    free(id);
    return 12;
  }
  if (v->n && strncmp(s, "${n}", 4) == 0) {
    buf_adds(b, v->n);
    return 4;
  }
  return 0;
}

// Returns a new string: s with its variables expanded.
static char *expand(const char *s, const struct vars *v) {
  struct buf b = {0};
  buf_add(&b, "", 0);
  while (*s) {
    size_t n = expand_var(&b, s, v);
    if (n)
      s += n;
    else
      buf_add(&b, s++, 1);
  }
  return b.data;
}

// Returns a deep copy of j with the variables expanded in every string and
// object key.
static json_t *subst(json_t *j, const struct vars *v) {
  if (json_is_string(j)) {
    char *s = expand(json_string_value(j), v);
    json_t *r = json_string(s);
    free(s);
    return r;
  }
  if (json_is_array(j)) {
    json_t *r = json_array();
    size_t i;
    json_t *item;
    json_array_foreach(j, i, item) json_array_append_new(r, subst(item, v));
    return r;
  }
  if (json_is_object(j)) {
    json_t *r = json_object();
    const char *key;
    json_t *item;
    json_object_foreach(j, key, item) {
      char *k = expand(key, v);
      json_object_set_new(r, k, subst(item, v));
      free(k);
    }
    return r;
  }
  return json_deep_copy(j);
}

// Expands the variables of a step of turn t; n as in struct vars.
static json_t *subst_turn(json_t *j, const struct turn *t, const char *n) {
  return subst(j, &(struct vars){.session = t->session, .turn = t, .n = n});
}

// ---------------------------------------------------------------------------
// Perms: one permission request and the action it guards, or an action step

static struct perm *perm_new(struct agent *a, struct turn *t, json_t *spec) {
  struct perm *p = xcalloc(1, sizeof(*p));
  p->session = t->session;
  p->turn = t;
  p->spec = json_incref(spec);
  p->out_fd = -1;
  p->next = a->perms;
  if (p->next)
    p->next->prev = p;
  a->perms = p;
  return p;
}

static void perm_free(struct agent *a, struct perm *p) {
  *(p->prev ? &p->prev->next : &a->perms) = p->next;
  if (p->next)
    p->next->prev = p->prev;
  if (p->out_fd >= 0)
    close(p->out_fd);
  json_decref(p->spec);
  json_decref(p->exit_code);
  json_decref(p->signal);
  free(p->title);
  free(p->detail);
  free(p->path);
  free(p->term_id);
  buf_free(&p->output);
  free(p);
}

// The perm is finished: its turn may go on.
static void perm_done(struct agent *a, struct perm *p) {
  struct turn *t = p->turn;
  perm_free(a, p);
  if (t) {
    t->active--;
    turn_pump(a, t);
  }
}

// Appends the words of an array to b, each after a space (but the first
// only if b is not empty); a word that is not a string shows as "?".
static void add_words(struct buf *b, json_t *words) {
  size_t i;
  json_t *word;
  json_array_foreach(words, i, word) {
    buf_adds(b, i || b->len ? " " : "");
    buf_adds(b, json_is_string(word) ? json_string_value(word) : "?");
  }
}

// The name messages use: the title, else the announced title, else the
// command, else the kind and id (codex's TS adapter sends no title).
static char *tool_title(json_t *spec) {
  json_t *tc = json_object_get(spec, "toolCall");
  const char *t = json_string_value(json_object_get(tc, "title"));
  if (!t)
    t = json_string_value(
        json_object_get(json_object_get(spec, "announce"), "title"));
  if (t)
    return xstrdup(t);
  json_t *cmd = json_object_get(json_object_get(tc, "rawInput"), "command");
  if (json_is_string(cmd))
    return xstrdup(json_string_value(cmd));
  if (json_is_array(cmd) && json_array_size(cmd) > 0) {
    struct buf b = {0};
    add_words(&b, cmd);
    return b.data;
  }
  const char *kind = json_string_value(json_object_get(tc, "kind"));
  return fmt("%s %s", kind ? kind : "tool",
             json_string_value(json_object_get(tc, "toolCallId")));
}

// Sends the tool_call update that Claude-like agents send before asking.
static void perm_announce(struct agent *a, struct perm *p) {
  json_t *ann = json_object_get(p->spec, "announce");
  if (!json_is_true(ann) && !json_is_object(ann))
    return;
  json_t *u = json_pack("{s:s}", "sessionUpdate", "tool_call");
  json_object_update(u, json_object_get(p->spec, "toolCall"));
  json_object_set_new(u, "status", json_string("pending"));
  if (json_is_object(ann))
    json_object_update(u, ann);
  send_update(a, p->session, u);
}

// Starts one permission request of turn t; spec has its variables expanded.
static void perm_start(struct agent *a, struct turn *t, json_t *spec) {
  struct perm *p = perm_new(a, t, spec);
  json_t *tc = json_object_get(spec, "toolCall");
  p->act = json_object_get(spec, "on_allow");
  p->tool_call_id = json_string_value(json_object_get(tc, "toolCallId"));
  p->title = tool_title(spec);
  perm_announce(a, p);
  json_t *params =
      json_pack("{s:s,s:O,s:O}", "sessionId", t->session->id, "toolCall", tc,
                "options", json_object_get(spec, "options"));
  request(a, json_object_get(spec, "id"), "session/request_permission", params,
          REQ_PERMISSION, p);
  if (json_is_false(json_object_get(spec, "wait")))
    p->turn = NULL; // nobody waits for the answer
  else
    t->active++;
}

// The kind of the offered option option_id, or NULL if it was not offered.
static const char *offered_kind(struct perm *p, const char *option_id) {
  size_t i;
  json_t *opt;
  json_array_foreach(json_object_get(p->spec, "options"), i, opt) {
    if (strcmp(json_string_value(json_object_get(opt, "optionId")),
               option_id) == 0)
      return json_string_value(json_object_get(opt, "kind"));
  }
  return NULL;
}

// Ends the turn with an error, as the reference SDK does when an answer
// cannot be understood: the tests count on it to catch broker bugs. Takes
// why, a new string.
static void perm_fail_turn(struct agent *a, struct perm *p, char *why) {
  struct turn *t = p->turn;
  char *text = fmt("ERROR: %s", why);
  say("%s (tool call %s)", text, p->tool_call_id);
  send_text(a, t->session, text);
  perm_free(a, p);
  turn_finish(a, t, NULL,
              json_pack("{s:i,s:s,s:{s:s}}", "code", -32603, "message",
                        "Internal error", "data", "details", why));
  free(text);
  free(why);
}

static void perm_rejected(struct agent *a, struct perm *p) {
  char *text = fmt("Skipped: %s", p->title);
  send_text(a, p->session, text);
  free(text);
  const char *on_reject =
      json_string_value(json_object_get(p->spec, "on_reject"));
  if (on_reject && strcmp(on_reject, "end_turn") == 0)
    p->turn->stop = "end_turn";
  else if (on_reject && strcmp(on_reject, "cancelled") == 0)
    p->turn->stop = "cancelled";
  perm_done(a, p);
}

// ---------------------------------------------------------------------------
// Actions: read or write a file, run a command

static enum act_type act_type(json_t *act) {
  const char *type = json_string_value(json_object_get(act, "type"));
  if (!type)
    return ACT_NONE;
  return strcmp(type, "read") == 0    ? ACT_READ
         : strcmp(type, "write") == 0 ? ACT_WRITE
         : strcmp(type, "run") == 0   ? ACT_RUN
                                      : ACT_NONE;
}

static char *abs_path(const struct session *s, const char *path) {
  return path[0] == '/' ? xstrdup(path) : fmt("%s/%s", s->cwd, path);
}

// The length of the longest start of the n bytes at s that has at most max
// bytes and does not end inside a UTF-8 character.
static size_t utf8_prefix(const char *s, size_t n, size_t max) {
  if (n <= max)
    return n;
  while (max > 0 && (s[max] & 0xC0) == 0x80)
    max--;
  return max;
}

// A read has ended with content, or else with error (a JSON-RPC error
// object); steals both. Its message shows the first READ_SHOW bytes.
static void read_finished(struct agent *a, struct perm *p, json_t *content,
                          json_t *error, const char *via) {
  json_t *ev = json_pack("{s:s,s:s}", "event", "read", "path", p->path);
  if (content) {
    const char *text = json_string_value(content);
    size_t n = json_string_length(content);
    size_t keep = utf8_prefix(text, n, READ_SHOW);
    buf_add(&p->output, text, keep);
    if (keep < n)
      buf_adds(&p->output, "…");
    json_object_set_new(ev, "content", content);
  } else {
    const char *m = json_string_value(json_object_get(error, "message"));
    p->failed = true;
    p->detail = xstrdup(m ? m : "?");
    json_object_set_new(ev, "error", error);
  }
  json_object_set_new(ev, "via", json_string(via));
  record(a, ev);
  perm_complete(a, p);
}

// Reads the file itself: from line "line" (1-based, default 1), at most
// "limit" lines (default all), keeping the first OUTPUT_KEEP bytes.
static void read_local(struct agent *a, struct perm *p) {
  json_t *line = json_object_get(p->act, "line");
  json_t *limit = json_object_get(p->act, "limit");
  json_int_t first = line ? json_integer_value(line) : 1;
  json_int_t end = limit ? first + json_integer_value(limit) : -1;
  struct buf b = {0};
  buf_add(&b, "", 0);
  FILE *f = fopen(p->path, "re");
  json_int_t n = 1; // the number of the line being read
  int c;
  while (f && b.len < OUTPUT_KEEP && n != end && (c = getc(f)) != EOF) {
    char ch = (char)c;
    if (n >= first)
      buf_add(&b, &ch, 1);
    n += c == '\n';
  }
  int err = !f || ferror(f) ? errno : 0;
  if (f)
    fclose(f);
  if (err)
    read_finished(a, p, NULL, json_pack("{s:s}", "message", strerror(err)),
                  "local");
  else
    read_finished(a, p, text_json(b.data, b.len), NULL, "local");
  buf_free(&b);
}

static void act_read(struct agent *a, struct perm *p) {
  p->path =
      abs_path(p->session, json_string_value(json_object_get(p->act, "path")));
  if (!a->fs_read) {
    read_local(a, p);
    return;
  }
  json_t *params =
      json_pack("{s:s,s:s}", "sessionId", p->session->id, "path", p->path);
  static const char *const optional[] = {"line", "limit", NULL};
  for (const char *const *k = optional; *k; k++)
    if (json_object_get(p->act, *k))
      json_object_set(params, *k, json_object_get(p->act, *k));
  request(a, NULL, "fs/read_text_file", params, REQ_FS_READ, p);
}

static void on_fs_read(struct agent *a, struct perm *p, json_t *msg) {
  json_t *content = json_object_get(json_object_get(msg, "result"), "content");
  json_t *err = json_object_get(msg, "error");
  if (json_is_string(content))
    read_finished(a, p, json_incref(content), NULL, "client");
  else
    read_finished(a, p, NULL,
                  err ? json_incref(err)
                      : json_pack("{s:s}", "message", "no content string"),
                  "client");
}

// A write has ended; error (stolen) is NULL on success, else a JSON-RPC
// error object. A permission's message names the file in its detail; a
// write step's title already does.
static void write_finished(struct agent *a, struct perm *p, json_t *error,
                           const char *via) {
  if (!error) {
    if (p->tool_call_id)
      p->detail = fmt("wrote %s", p->path);
    record(a, json_pack("{s:s,s:s,s:s}", "event", "wrote", "path", p->path,
                        "via", via));
    perm_complete(a, p);
    return;
  }
  const char *m = json_string_value(json_object_get(error, "message"));
  m = m ? m : "?";
  p->failed = true;
  if (!p->tool_call_id)
    p->detail = xstrdup(m);
  else if (strcmp(via, "client") == 0)
    p->detail = fmt("fs/write_text_file failed: %s", m);
  else
    p->detail = fmt("%s: %s", p->path, m);
  record(a, json_pack("{s:s,s:s,s:o,s:s}", "event", "write_failed", "path",
                      p->path, "error", error, "via", via));
  perm_complete(a, p);
}

static void act_write(struct agent *a, struct perm *p) {
  const char *content = json_string_value(json_object_get(p->act, "content"));
  p->path =
      abs_path(p->session, json_string_value(json_object_get(p->act, "path")));
  // "direct": written by the agent itself all the same (as claude-agent-acp
  // writes its files).
  if (a->fs_write && !json_is_true(json_object_get(p->act, "direct"))) {
    request(a, NULL, "fs/write_text_file",
            json_pack("{s:s,s:s,s:s}", "sessionId", p->session->id, "path",
                      p->path, "content", content),
            REQ_FS_WRITE, p);
    return;
  }
  FILE *f = fopen(p->path, "we");
  size_t n = strlen(content);
  bool ok = f && fwrite(content, 1, n, f) == n;
  if (f && fclose(f) != 0)
    ok = false;
  write_finished(a, p,
                 ok ? NULL : json_pack("{s:s}", "message", strerror(errno)),
                 "local");
}

static void on_fs_written(struct agent *a, struct perm *p, json_t *msg) {
  write_finished(a, p,
                 json_object_get(msg, "result")
                     ? NULL
                     : json_incref(json_object_get(msg, "error")),
                 "client");
}

// Runs in the child: the command gets /dev/null as stdin and our pipe as
// stdout and stderr, never our stdout, which carries only ACP messages. It
// runs under /bin/sh -c, or with "args" as the command and those arguments.
__attribute__((noreturn)) static void child_exec(const int fds[2],
                                                 const char *cwd, json_t *act) {
  signal(SIGPIPE, SIG_DFL); // ignored dispositions survive exec
  int null = open("/dev/null", O_RDONLY);
  if (null > STDIN_FILENO) {
    dup2(null, STDIN_FILENO);
    close(null);
  }
  dup2(fds[1], STDOUT_FILENO);
  dup2(fds[1], STDERR_FILENO);
  close(fds[0]); // else the command holds its own pipe open
  close(fds[1]);
  if (chdir(cwd) != 0) {
    dprintf(STDERR_FILENO, "cd %s: %s\n", cwd, strerror(errno));
    _exit(127);
  }
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(act, "env"), i, item) {
    setenv(json_string_value(json_object_get(item, "name")),
           json_string_value(json_object_get(item, "value")), 1);
  }
  const char *cmd = json_string_value(json_object_get(act, "command"));
  json_t *args = json_object_get(act, "args");
  const char *file = args ? cmd : "/bin/sh";
  // Copies, because execvp takes strings that are not const.
  char **argv = xcalloc(json_array_size(args) + 4, sizeof(*argv));
  size_t n = 0;
  argv[n++] = xstrdup(args ? cmd : "sh");
  if (!args) {
    argv[n++] = xstrdup("-c");
    argv[n++] = xstrdup(cmd);
  }
  json_array_foreach(args, i, item) {
    argv[n++] = xstrdup(json_string_value(item));
  }
  execvp(file, argv);
  dprintf(STDERR_FILENO, "%s: %s\n", file, strerror(errno));
  _exit(127);
}

static void spawn_local(struct agent *a, struct perm *p) {
  int fds[2];
  pid_t pid = -1;
  if (pipe(fds) == 0) {
    pid = fork();
    if (pid == 0)
      child_exec(fds, p->session->cwd, p->act);
    int saved = errno;
    close(fds[1]);
    if (pid < 0)
      close(fds[0]);
    errno = saved;
  }
  if (pid < 0) {
    p->failed = true;
    p->detail = fmt("could not start a process: %s", strerror(errno));
    perm_complete(a, p);
    return;
  }
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  p->pid = pid;
  p->out_fd = fds[0];
  buf_add(&p->output, "", 0); // the output is "" until some comes
  json_t *ms = json_object_get(p->act, "kill_after_ms");
  if (json_is_true(json_object_get(p->act, "release_early")))
    p->kill_at = now_ms(); // there is no terminal to release: kill it now
  else if (ms)
    p->kill_at = now_ms() + json_integer_value(ms);
}

// Sends the next terminal/* call about the perm's terminal.
static void term_call(struct agent *a, struct perm *p, const char *method,
                      enum req_kind kind) {
  request(a, NULL, method,
          json_pack("{s:s,s:s}", "sessionId", p->session->id, "terminalId",
                    p->term_id),
          kind, p);
}

static void act_run(struct agent *a, struct perm *p) {
  if (!a->terminal) {
    spawn_local(a, p);
    return;
  }
  const char *cmd = json_string_value(json_object_get(p->act, "command"));
  json_t *args = json_object_get(p->act, "args");
  json_t *params =
      args ? json_pack("{s:s,s:s,s:O}", "sessionId", p->session->id, "command",
                       cmd, "args", args)
           : json_pack("{s:s,s:s,s:[s,s]}", "sessionId", p->session->id,
                       "command", "/bin/sh", "args", "-c", cmd);
  json_object_set_new(params, "cwd", json_string(p->session->cwd));
  static const char *const optional[] = {"env", "outputByteLimit", NULL};
  for (const char *const *k = optional; *k; k++)
    if (json_object_get(p->act, *k))
      json_object_set(params, *k, json_object_get(p->act, *k));
  request(a, NULL, "terminal/create", params, REQ_TERM_CREATE, p);
}

// The time for a command's kill_after_ms (or, locally, release_early) has
// come. In the client's terminal, terminal/kill goes out even if the
// command has exited: only the client knows. A local child still running
// is killed, and its pipe closed, since something it started in the
// background may hold the pipe open.
static void perm_kill(struct agent *a, struct perm *p) {
  p->kill_at = 0;
  if (p->term_id) {
    term_call(a, p, "terminal/kill", REQ_TERM_KILL);
    return;
  }
  if (p->reaped)
    return;
  kill(p->pid, SIGKILL);
  if (p->out_fd >= 0) {
    close(p->out_fd);
    p->out_fd = -1;
  }
}

// The command has finished, locally or in the client's terminal. A detail
// set before this point is an error or a signal, so a failure; with neither
// a detail nor an exit code, the terminal was released while running.
static void run_finished(struct agent *a, struct perm *p, const char *via) {
  json_t *code = p->exit_code ? p->exit_code : json_null();
  json_t *out =
      p->output.data ? text_json(p->output.data, p->output.len) : json_null();
  record(a,
         json_pack("{s:s,s:O,s:O,s:s,s:o,s:b,s:O}", "event", "ran", "command",
                   json_object_get(p->act, "command"), "exit", code, "via", via,
                   "output", out, "truncated", p->truncated, "signal",
                   p->signal ? p->signal : json_null()));
  if (p->detail) {
    p->failed = true;
  } else if (!p->exit_code) {
    p->detail = xstrdup("released while running");
  } else {
    p->detail = fmt("exit %" JSON_INTEGER_FORMAT, json_integer_value(code));
    p->failed = json_integer_value(code) != 0;
  }
  perm_complete(a, p);
}

// Notes the first error of the terminal/* sequence; the rest still runs so
// that the terminal gets released.
static void term_error(struct perm *p, const char *method, json_t *msg) {
  const char *m = json_string_value(
      json_object_get(json_object_get(msg, "error"), "message"));
  if (!p->detail)
    p->detail = fmt("%s failed: %s", method, m ? m : "bad answer");
}

// The terminal was created: release it at once (release_early), kill it
// after kill_after_ms, or wait for it to exit.
static void term_created(struct agent *a, struct perm *p) {
  json_t *ms = json_object_get(p->act, "kill_after_ms");
  if (json_is_true(json_object_get(p->act, "release_early")))
    term_call(a, p, "terminal/release", REQ_TERM_RELEASE);
  else if (ms)
    p->kill_at = now_ms() + json_integer_value(ms);
  else
    term_call(a, p, "terminal/wait_for_exit", REQ_TERM_WAIT);
}

// The terminal/* sequence, each call after the answer to the one before:
// create -> (kill) -> wait_for_exit -> output -> release. After an error,
// release comes next.
static void on_term_response(struct agent *a, struct perm *p,
                             enum req_kind kind, json_t *msg) {
  json_t *res = json_object_get(msg, "result");
  switch (kind) {
  case REQ_TERM_CREATE: {
    const char *id = json_string_value(json_object_get(res, "terminalId"));
    if (!id) {
      term_error(p, "terminal/create", msg);
      p->failed = true;
      perm_complete(a, p); // nothing ran
      return;
    }
    p->term_id = xstrdup(id);
    term_created(a, p);
    return;
  }
  case REQ_TERM_KILL:
    if (json_object_get(msg, "error")) {
      term_error(p, "terminal/kill", msg);
      term_call(a, p, "terminal/release", REQ_TERM_RELEASE);
    } else {
      term_call(a, p, "terminal/wait_for_exit", REQ_TERM_WAIT);
    }
    return;
  case REQ_TERM_WAIT:
    if (!json_is_object(res)) {
      term_error(p, "terminal/wait_for_exit", msg);
      term_call(a, p, "terminal/release", REQ_TERM_RELEASE);
      return;
    }
    p->exit_code = json_incref(json_object_get(res, "exitCode"));
    if (json_is_string(json_object_get(res, "signal")))
      p->signal = json_incref(json_object_get(res, "signal"));
    if (!json_is_integer(p->exit_code)) {
      const char *sig = json_string_value(p->signal);
      p->detail = fmt("killed by signal %s", sig ? sig : "?");
    }
    term_call(a, p, "terminal/output", REQ_TERM_OUTPUT);
    return;
  case REQ_TERM_OUTPUT: {
    const char *out = json_string_value(json_object_get(res, "output"));
    if (out)
      buf_adds(&p->output, out);
    else
      term_error(p, "terminal/output", msg);
    p->truncated = json_is_true(json_object_get(res, "truncated"));
    term_call(a, p, "terminal/release", REQ_TERM_RELEASE);
    return;
  }
  default: // REQ_TERM_RELEASE
    if (json_object_get(msg, "error"))
      term_error(p, "terminal/release", msg);
    run_finished(a, p, "terminal");
  }
}

static void perm_act(struct agent *a, struct perm *p) {
  switch (act_type(p->act)) {
  case ACT_READ:
    act_read(a, p);
    return;
  case ACT_WRITE:
    act_write(a, p);
    return;
  case ACT_RUN:
    act_run(a, p);
    return;
  default:
    perm_complete(a, p);
  }
}

// The message that reports a finished action: "Done: <title> (<detail>)"
// or "Failed: ...", then a command's output on the next lines; for a read,
// "Read <path>: <content>" or "Failed: read <path> (<error>)".
static char *result_text(const struct perm *p) {
  if (act_type(p->act) == ACT_READ)
    return p->failed ? fmt("Failed: read %s (%s)", p->path, p->detail)
                     : fmt("Read %s: %s", p->path, p->output.data);
  struct buf text = {0};
  buf_adds(&text, p->failed ? "Failed: " : "Done: ");
  buf_adds(&text, p->title);
  if (p->detail) {
    buf_adds(&text, " (");
    buf_adds(&text, p->detail);
    buf_adds(&text, ")");
  }
  size_t n = p->output.len;
  while (n > 0 && p->output.data[n - 1] == '\n')
    n--; // the message ends where the output's last line does
  if (n) {
    buf_adds(&text, "\n");
    buf_add(&text, p->output.data, n);
  }
  return text.data;
}

// The action is over: report it (a permission's tool call too), then let
// the turn go on.
static void perm_complete(struct agent *a, struct perm *p) {
  if (p->turn) {
    if (p->tool_call_id)
      send_update(a, p->session,
                  json_pack("{s:s,s:s,s:s}", "sessionUpdate",
                            "tool_call_update", "toolCallId", p->tool_call_id,
                            "status", p->failed ? "failed" : "completed"));
    char *text = result_text(p);
    send_text(a, p->session, text);
    free(text);
  }
  perm_done(a, p);
}

// Starts an action step of turn t: a read, write or run that asks no
// permission. Its title is "read <path>", "write <path>" or the command.
static void action_start(struct agent *a, struct turn *t, json_t *step) {
  struct perm *p = perm_new(a, t, step);
  p->act = step;
  if (act_type(step) == ACT_RUN) {
    struct buf b = {0};
    buf_adds(&b, json_string_value(json_object_get(step, "command")));
    add_words(&b, json_object_get(step, "args"));
    p->title = b.data;
  } else {
    char *path =
        abs_path(t->session, json_string_value(json_object_get(step, "path")));
    p->title =
        fmt("%s %s", json_string_value(json_object_get(step, "type")), path);
    free(path);
  }
  t->active++;
  perm_act(a, p);
}

// Handles the client's answer to a permission request.
static void on_permission_answer(struct agent *a, struct perm *p, json_t *msg) {
  if (!p->turn) {
    say("answer for %s after its turn ended: ignored", p->tool_call_id);
    perm_free(a, p);
    return;
  }
  const char *outcome = NULL, *option_id = NULL;
  json_t *err = json_object_get(msg, "error");
  if (err) {
    const char *m = json_string_value(json_object_get(err, "message"));
    perm_fail_turn(a, p, fmt("permission request failed: %s", m ? m : "?"));
    return;
  }
  if (json_unpack(json_object_get(msg, "result"), "{s:{s:s,s?s}}", "outcome",
                  "outcome", &outcome, "optionId", &option_id) != 0 ||
      (strcmp(outcome, "cancelled") != 0 &&
       (strcmp(outcome, "selected") != 0 || !option_id))) {
    perm_fail_turn(a, p, xstrdup("malformed permission answer"));
    return;
  }
  if (strcmp(outcome, "cancelled") == 0) {
    if (p->turn->cancelled)
      perm_done(a, p); // the turn ends "cancelled"
    else
      perm_rejected(a, p);
    return;
  }
  const char *kind = offered_kind(p, option_id);
  if (!kind) {
    perm_fail_turn(a, p, fmt("unknown optionId %s", option_id));
    return;
  }
  if (p->turn->cancelled) {
    say("%s: \"%s\" selected after session/cancel: not acting", p->tool_call_id,
        option_id);
    perm_done(a, p);
  } else if (strncmp(kind, "allow_", 6) == 0) {
    perm_act(a, p);
  } else {
    perm_rejected(a, p);
  }
}

// ---------------------------------------------------------------------------
// Local child processes

static void read_child(struct agent *a, int fd) {
  struct perm *p = a->perms;
  while (p && p->out_fd != fd)
    p = p->next;
  if (!p)
    return;
  char tmp[4096];
  ssize_t n = read(fd, tmp, sizeof(tmp));
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n > 0) {
    size_t room = OUTPUT_KEEP - p->output.len;
    p->truncated = p->truncated || (size_t)n > room;
    buf_add(&p->output, tmp, (size_t)n < room ? (size_t)n : room);
    return;
  }
  close(fd); // end of output (or a read error: same thing here)
  p->out_fd = -1;
}

// The name of a signal as ACP clients report it ("SIGKILL"), else its
// number.
static json_t *signal_json(int sig) {
  const char *name = signame(sig);
  return name ? json_string(name) : json_sprintf("%d", sig);
}

static void reap_children(struct agent *a) {
  for (struct perm *p = a->perms; p; p = p->next) {
    int status;
    if (p->pid > 0 && !p->reaped && waitpid(p->pid, &status, WNOHANG) > 0) {
      p->reaped = true;
      p->exit_code =
          WIFEXITED(status) ? json_integer(WEXITSTATUS(status)) : NULL;
      if (WIFSIGNALED(status)) {
        p->detail = fmt("killed by signal %d", WTERMSIG(status));
        p->signal = signal_json(WTERMSIG(status));
      }
    }
  }
}

// Finishes the commands whose output has ended and who have been reaped.
// Finishing one can start or free others, so the search starts over.
static void finish_children(struct agent *a) {
  for (;;) {
    struct perm *p = a->perms;
    while (p && !(p->pid > 0 && p->reaped && p->out_fd < 0))
      p = p->next;
    if (!p)
      return;
    p->pid = 0;
    run_finished(a, p, "local");
  }
}

// ---------------------------------------------------------------------------
// Prompt turns

// Answers the prompt (with stop, or with error if not NULL; steals error),
// then frees the turn. Its perms still open become orphans.
static void turn_finish(struct agent *a, struct turn *t, const char *stop,
                        json_t *error) {
  if (error)
    send_msg(a, json_pack("{s:s,s:O,s:o}", "jsonrpc", "2.0", "id", t->prompt_id,
                          "error", error));
  else
    respond(a, t->prompt_id, json_pack("{s:s}", "stopReason", stop));
  for (struct perm *p = a->perms; p; p = p->next)
    if (p->turn == t)
      p->turn = NULL;
  t->session->turn = NULL;
  json_decref(t->prompt_id);
  free(t);
}

// Sends the requests of a many_permissions step: `count` copies of its
// request, ${n} numbering them from 1, all at once.
static void many_permissions(struct agent *a, struct turn *t, json_t *st) {
  json_int_t count = json_integer_value(json_object_get(st, "count"));
  json_t *req = json_object_get(st, "request");
  for (json_int_t i = 1; i <= count; i++) {
    char n[24];
    snprintf(n, sizeof(n), "%" JSON_INTEGER_FORMAT, i);
    json_t *one = subst_turn(req, t, n);
    perm_start(a, t, one);
    json_decref(one);
  }
}

// Sends the updates of an "updates" step: `count` copies of its update,
// ${n} numbering them from 1, as fast as the client reads them.
static void send_updates(struct agent *a, struct turn *t, json_t *st) {
  json_int_t count = json_integer_value(json_object_get(st, "count"));
  json_t *update = json_object_get(st, "update");
  for (json_int_t i = 1; i <= count; i++) {
    char n[24];
    snprintf(n, sizeof(n), "%" JSON_INTEGER_FORMAT, i);
    send_update(a, t->session, subst_turn(update, t, n));
  }
}

// An "error" step: the turn ends with this JSON-RPC error (turn_pump sends
// it, since the turn cannot be freed while a step runs).
static void error_step(struct turn *t, json_t *st) {
  t->error = json_pack("{s:O,s:O}", "code", json_object_get(st, "code"),
                       "message", json_object_get(st, "message"));
  if (json_object_get(st, "data"))
    json_object_set(t->error, "data", json_object_get(st, "data"));
}

static void raw_step(struct agent *a, json_t *st) {
  const char *line = json_string_value(json_object_get(st, "line"));
  if (!json_object_get(st, "encoding")) {
    send_raw(a, line, strlen(line));
    return;
  }
  char *bytes = xrealloc(NULL, strlen(line) + 1);
  send_raw(a, bytes, latin1_bytes(line, bytes));
  free(bytes);
}

static void run_step(struct agent *a, struct turn *t, json_t *step) {
  json_t *st = subst_turn(step, t, NULL);
  const char *type = json_string_value(json_object_get(st, "type"));
  if (strcmp(type, "message") == 0) {
    send_text(a, t->session, json_string_value(json_object_get(st, "text")));
  } else if (strcmp(type, "permission") == 0) {
    perm_start(a, t, st);
  } else if (strcmp(type, "permissions_parallel") == 0) {
    size_t i;
    json_t *req;
    json_array_foreach(json_object_get(st, "requests"), i, req)
        perm_start(a, t, req);
  } else if (strcmp(type, "sleep") == 0) {
    json_int_t ms = json_integer_value(json_object_get(st, "ms"));
    t->wake_at = ms > 0 ? now_ms() + ms : 0;
  } else if (strcmp(type, "exit") == 0) {
    json_int_t code = json_integer_value(json_object_get(st, "code"));
    say("scenario step: exit %" JSON_INTEGER_FORMAT, code);
    json_decref(st);
    agent_exit(a, (int)code);
  } else if (strcmp(type, "raw") == 0) {
    raw_step(a, st);
  } else if (strcmp(type, "update") == 0) {
    send_update(a, t->session, json_incref(json_object_get(st, "update")));
  } else if (strcmp(type, "garbage") == 0) {
    send_garbage(a, t->session, st);
  } else if (strcmp(type, "flood") == 0) {
    send_flood(a, t->session, st);
  } else if (strcmp(type, "many_permissions") == 0) {
    many_permissions(a, t, st);
  } else if (strcmp(type, "updates") == 0) {
    send_updates(a, t, st);
  } else if (strcmp(type, "error") == 0) {
    error_step(t, st);
  } else { // read, write or run, without asking
    action_start(a, t, st);
  }
  json_decref(st);
}

// Runs steps until the turn has to wait (for answers or a timer) or ends.
// An action step that finishes at once (a local read or write) calls this
// again from inside run_step: that inner call returns at once, and this
// loop goes on, so that only this loop frees the turn.
static void turn_pump(struct agent *a, struct turn *t) {
  json_t *steps = json_object_get(a->scenario, "steps");
  if (t->pumping)
    return;
  t->pumping = true;
  while (t->active == 0 && t->wake_at == 0) {
    const char *stop = t->cancelled ? "cancelled" : t->stop;
    if (!stop && t->step >= json_array_size(steps))
      stop = "end_turn";
    if (stop || t->error) {
      turn_finish(a, t, stop, t->error);
      return;
    }
    run_step(a, t, json_array_get(steps, t->step++));
  }
  t->pumping = false;
}

static void fire_timers(struct agent *a) {
  int64_t now = now_ms();
  for (struct perm *p = a->perms; p; p = p->next)
    if (p->kill_at && p->kill_at <= now)
      perm_kill(a, p);
  for (struct session *s = a->sessions; s; s = s->next)
    if (s->turn && s->turn->wake_at && s->turn->wake_at <= now) {
      s->turn->wake_at = 0;
      turn_pump(a, s->turn);
    }
}

// The earlier of two monotonic times, where 0 or less means none.
static int64_t earliest(int64_t next, int64_t at) {
  return at > 0 && (next <= 0 || at < next) ? at : next;
}

// Milliseconds until the next sleep ends or command is to be killed, or -1
// when there is nothing to wait for.
static int next_timeout(const struct agent *a) {
  int64_t next = 0, now = now_ms();
  for (const struct session *s = a->sessions; s; s = s->next)
    if (s->turn)
      next = earliest(next, s->turn->wake_at);
  for (const struct perm *p = a->perms; p; p = p->next)
    next = earliest(next, p->kill_at);
  if (next <= 0)
    return -1;
  return next <= now ? 0 : next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

// ---------------------------------------------------------------------------
// Incoming requests and notifications

static struct session *find_session(struct agent *a, json_t *params) {
  const char *id = json_string_value(json_object_get(params, "sessionId"));
  struct session *s = a->sessions;
  while (s && (!id || strcmp(s->id, id) != 0))
    s = s->next;
  return s;
}

static void invalid_params(struct agent *a, json_t *id, const char *why) {
  say("invalid params: %s", why);
  respond_error(a, id, -32602, "Invalid params",
                json_pack("{s:s}", "details", why));
}

// The object of an array whose "id" is the string id, or NULL.
static json_t *find_by_id(json_t *array, const char *id) {
  size_t i;
  json_t *item;
  json_array_foreach(array, i, item) {
    const char *s = json_string_value(json_object_get(item, "id"));
    if (s && strcmp(s, id) == 0)
      return item;
  }
  return NULL;
}

static void on_initialize(struct agent *a, json_t *id, json_t *params) {
  json_t *caps = json_object_get(params, "clientCapabilities");
  json_t *fs = json_object_get(caps, "fs");
  a->fs_read = json_is_true(json_object_get(fs, "readTextFile"));
  a->fs_write = json_is_true(json_object_get(fs, "writeTextFile"));
  a->terminal = json_is_true(json_object_get(caps, "terminal"));
  say("initialize: client fs.readTextFile=%s fs.writeTextFile=%s terminal=%s",
      a->fs_read ? "yes" : "no", a->fs_write ? "yes" : "no",
      a->terminal ? "yes" : "no");
  json_t *agent_caps =
      json_pack("{s:b,s:{s:b,s:b,s:b}}", "loadSession", 0, "promptCapabilities",
                "image", 0, "audio", 0, "embeddedContext", 0);
  json_object_update(agent_caps,
                     json_object_get(a->scenario, "agent_capabilities"));
  json_t *methods = json_object_get(a->scenario, "auth_methods");
  const char *info_name =
      json_string_value(json_object_get(a->scenario, "agent_name"));
  respond(a, id,
          json_pack("{s:i,s:o,s:{s:s,s:s},s:o}", "protocolVersion", 1,
                    "agentCapabilities", agent_caps, "agentInfo", "name",
                    info_name ? info_name : AGENT_NAME, "version",
                    AGENT_VERSION, "authMethods",
                    methods ? json_incref(methods) : json_array()));
}

// While the scenario's require_auth holds and no authenticate has
// succeeded, answers -32000 and returns false.
static bool check_auth(struct agent *a, json_t *id) {
  if (a->authenticated ||
      !json_is_true(json_object_get(a->scenario, "require_auth")))
    return true;
  say("authentication required");
  respond_error(a, id, -32000, "Authentication required", NULL);
  return false;
}

static void on_authenticate(struct agent *a, json_t *id, json_t *params) {
  const char *method = json_string_value(json_object_get(params, "methodId"));
  if (!method ||
      !find_by_id(json_object_get(a->scenario, "auth_methods"), method)) {
    invalid_params(a, id, "unknown methodId");
    return;
  }
  a->authenticated = true;
  say("authenticated with %s", method);
  respond(a, id, json_object());
  record(a,
         json_pack("{s:s,s:s}", "event", "authenticated", "methodId", method));
}

// Sets the session's cwd, an absolute path, without trailing slashes so
// that "${cwd}/x" has one slash.
static void session_set_cwd(struct session *s, const char *cwd) {
  free(s->cwd);
  s->cwd = xstrdup(cwd);
  size_t n = strlen(s->cwd);
  while (n > 1 && s->cwd[n - 1] == '/')
    s->cwd[--n] = '\0';
}

// Adds a session; takes id, a new string. It starts in the scenario's
// current mode, if the scenario has modes.
static struct session *session_add(struct agent *a, char *id, const char *cwd) {
  const char *mode = json_string_value(
      json_object_get(json_object_get(a->scenario, "modes"), "currentModeId"));
  struct session *s = xcalloc(1, sizeof(*s));
  s->id = id;
  session_set_cwd(s, cwd);
  s->mode = mode ? xstrdup(mode) : NULL;
  s->next = a->sessions;
  a->sessions = s;
  return s;
}

// Returns result (a session/new or session/load result) with the
// scenario's modes added, if it has modes, showing the session's mode.
static json_t *with_modes(struct agent *a, struct session *s, json_t *result) {
  json_t *modes = json_object_get(a->scenario, "modes");
  if (modes) {
    json_t *m = json_deep_copy(modes);
    json_object_set_new(m, "currentModeId", json_string(s->mode));
    json_object_set_new(result, "modes", m);
  }
  return result;
}

static void on_session_new(struct agent *a, json_t *id, json_t *params) {
  const char *cwd = json_string_value(json_object_get(params, "cwd"));
  if (!check_auth(a, id))
    return;
  if (!cwd || cwd[0] != '/') {
    invalid_params(a, id, "cwd must be an absolute path");
    return;
  }
  struct session *s =
      session_add(a, fmt("demo-%ld-%u", (long)getpid(), ++a->nsessions), cwd);
  say("session %s in %s", s->id, s->cwd);
  respond(a, id, with_modes(a, s, json_pack("{s:s}", "sessionId", s->id)));
  // Like Gemini and Claude: right after the response, outside any turn.
  send_update(a, s,
              json_pack("{s:s,s:[{s:s,s:s,s:n}]}", "sessionUpdate",
                        "available_commands_update", "availableCommands",
                        "name", "demo", "description",
                        "Play the demo scenario (any prompt does)", "input"));
}

// The session may come from an earlier run of the agent, so any id that
// looks like one of ours will do. The scenario's history is replayed
// before the answer, as the protocol asks.
static void on_session_load(struct agent *a, json_t *id, json_t *params) {
  const char *cwd = json_string_value(json_object_get(params, "cwd"));
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  if (!check_auth(a, id))
    return;
  if (!cwd || cwd[0] != '/') {
    invalid_params(a, id, "cwd must be an absolute path");
    return;
  }
  if (!sid || strncmp(sid, "demo-", 5) != 0) {
    say("session/load: no session %s", sid ? sid : "(no sessionId string)");
    respond_error(a, id, -32002, "Resource not found",
                  json_pack("{s:s?}", "sessionId", sid));
    return;
  }
  struct session *s = find_session(a, params);
  if (s && s->turn) {
    respond_error(a, id, -32000, "turn already running", NULL);
    return;
  }
  if (s)
    session_set_cwd(s, cwd);
  else
    s = session_add(a, xstrdup(sid), cwd);
  say("session %s loaded in %s", s->id, s->cwd);
  size_t i;
  json_t *update;
  json_array_foreach(json_object_get(a->scenario, "history"), i, update) {
    send_update(a, s, subst(update, &(struct vars){.session = s}));
  }
  respond(a, id, with_modes(a, s, json_object()));
  record(a, json_pack("{s:s,s:s}", "event", "loaded", "session", s->id));
}

static void on_set_mode(struct agent *a, json_t *id, json_t *params) {
  struct session *s = find_session(a, params);
  const char *mode = json_string_value(json_object_get(params, "modeId"));
  json_t *modes = json_object_get(a->scenario, "modes");
  if (!s) {
    invalid_params(a, id, "unknown sessionId");
    return;
  }
  if (!mode || !find_by_id(json_object_get(modes, "availableModes"), mode)) {
    invalid_params(a, id, "unknown modeId");
    return;
  }
  free(s->mode);
  s->mode = xstrdup(mode);
  say("session %s: mode %s", s->id, s->mode);
  send_update(a, s,
              json_pack("{s:s,s:s}", "sessionUpdate", "current_mode_update",
                        "currentModeId", s->mode));
  respond(a, id, json_object());
  record(a, json_pack("{s:s,s:s,s:s}", "event", "mode", "session", s->id,
                      "modeId", s->mode));
}

static void on_session_prompt(struct agent *a, json_t *id, json_t *params) {
  struct session *s = find_session(a, params);
  if (!s) {
    invalid_params(a, id, "unknown sessionId");
    return;
  }
  if (s->turn) {
    respond_error(a, id, -32000, "turn already running", NULL);
    return;
  }
  struct turn *t = xcalloc(1, sizeof(*t));
  t->session = s;
  t->prompt_id = json_incref(id);
  t->number = ++s->turns;
  s->turn = t;
  say("session %s: turn %u", s->id, t->number);
  turn_pump(a, t);
}

static void on_session_cancel(struct agent *a, json_t *params) {
  struct session *s = find_session(a, params);
  if (!s || !s->turn) {
    say("session/cancel with no turn running: ignored");
    return;
  }
  say("session %s: cancelled (%zu permission(s) open)", s->id, s->turn->active);
  s->turn->cancelled = true;
  s->turn->wake_at = 0; // a sleep ends at once
  turn_pump(a, s->turn);
}

// Whether the scenario offers authenticate, session/load, session/set_mode.
static bool offers_auth(const struct agent *a) {
  return json_object_get(a->scenario, "auth_methods") != NULL;
}

static bool offers_load(const struct agent *a) {
  return json_is_true(json_object_get(
      json_object_get(a->scenario, "agent_capabilities"), "loadSession"));
}

static bool offers_modes(const struct agent *a) {
  return json_object_get(a->scenario, "modes") != NULL;
}

// A method the scenario does not offer is unknown (-32601), like any other.
static const struct {
  const char *name;
  void (*fn)(struct agent *a, json_t *id, json_t *params);
  bool (*offered)(const struct agent *a); // NULL: always offered
} request_handlers[] = {
    {"initialize", on_initialize, NULL},
    {"authenticate", on_authenticate, offers_auth},
    {"session/new", on_session_new, NULL},
    {"session/load", on_session_load, offers_load},
    {"session/prompt", on_session_prompt, NULL},
    {"session/set_mode", on_set_mode, offers_modes},
};

static void on_request(struct agent *a, json_t *id, const char *method,
                       json_t *params) {
  if (!json_is_integer(id) && !json_is_string(id) && !json_is_null(id)) {
    respond_error(a, json_null(), -32600, "Invalid Request", NULL);
    return;
  }
  for (size_t i = 0; i < sizeof(request_handlers) / sizeof(*request_handlers);
       i++)
    if (strcmp(method, request_handlers[i].name) == 0 &&
        (!request_handlers[i].offered || request_handlers[i].offered(a))) {
      request_handlers[i].fn(a, id, params);
      return;
    }
  say("unknown method %s", method);
  respond_error(a, id, -32601, "Method not found", NULL);
}

static void on_response(struct agent *a, json_t *msg) {
  json_t *id = json_object_get(msg, "id");
  struct outreq **rp = &a->outreqs;
  while (*rp && !json_equal((*rp)->id, id))
    rp = &(*rp)->next;
  if (!*rp) {
    char *s = json_dumps(id, JSON_ENCODE_ANY);
    say("ERROR: response for an unknown request id %s: ignored", s);
    free(s);
    return;
  }
  struct outreq *r = *rp;
  *rp = r->next;
  if (!*rp)
    a->outreqs_tail = rp;
  struct perm *p = r->perm;
  enum req_kind kind = r->kind;
  json_decref(r->id);
  free(r);
  if (kind == REQ_PERMISSION)
    on_permission_answer(a, p, msg);
  else if (kind == REQ_FS_READ)
    on_fs_read(a, p, msg);
  else if (kind == REQ_FS_WRITE)
    on_fs_written(a, p, msg);
  else
    on_term_response(a, p, kind, msg);
}

static void dispatch(struct agent *a, json_t *msg) {
  json_t *method = json_object_get(msg, "method");
  json_t *id = json_object_get(msg, "id");
  json_t *params = json_object_get(msg, "params");
  if (!json_is_object(msg)) {
    say("not a JSON-RPC message (batches are not ACP)");
    respond_error(a, json_null(), -32600, "Invalid Request", NULL);
  } else if (json_is_string(method) && id) {
    on_request(a, id, json_string_value(method), params);
  } else if (json_is_string(method)) {
    if (strcmp(json_string_value(method), "session/cancel") == 0)
      on_session_cancel(a, params);
    else // unknown notifications are ignored, never answered
      say("notification %s ignored", json_string_value(method));
  } else if (id && (json_object_get(msg, "result") ||
                    json_object_get(msg, "error"))) {
    on_response(a, msg);
  } else {
    say("not a request, notification or response");
    respond_error(a,
                  json_is_string(id) || json_is_integer(id) ? id : json_null(),
                  -32600, "Invalid Request", NULL);
  }
}

// ---------------------------------------------------------------------------
// Input framing

static void parse_error(struct agent *a, json_t *what) {
  record_msg(a, "in", what);
  json_decref(what);
  respond_error(a, json_null(), -32700, "Parse error", NULL);
}

static void handle_line(struct agent *a, const char *line, size_t len) {
  while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' ||
                     line[len - 1] == '\t'))
    len--;
  size_t i = 0;
  while (i < len && (line[i] == ' ' || line[i] == '\t'))
    i++;
  if (i == len)
    return; // blank lines are allowed and skipped
  json_error_t err;
  json_t *msg = json_loadb(line, len, JSON_DECODE_ANY, &err);
  if (!msg) {
    say("parse error: %s (line of %zu bytes)", err.text, len);
    json_t *raw = text_json(line, len);
    parse_error(a, raw ? raw : json_string("(unprintable line)"));
    return;
  }
  record_msg(a, "in", msg);
  dispatch(a, msg);
  json_decref(msg);
}

// Cuts the input into lines. Over-long lines are dropped as they stream and
// answered with a parse error, so memory stays bounded.
static void feed(struct agent *a, const char *p, size_t n) {
  for (;;) {
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    if (!a->skipping && a->in.len + take > MAX_LINE) {
      a->skipping = true;
      a->skipped = a->in.len;
      a->in.len = 0;
    }
    if (a->skipping)
      a->skipped += take;
    else
      buf_add(&a->in, p, take);
    if (!nl)
      return;
    if (a->skipping) {
      say("input line of %zu bytes is too long", a->skipped);
      a->skipping = false;
      parse_error(a,
                  json_sprintf("(a line of %zu bytes, dropped)", a->skipped));
    } else {
      handle_line(a, a->in.data ? a->in.data : "", a->in.len);
    }
    a->in.len = 0;
    p = nl + 1;
    n -= take + 1;
  }
}

static void read_stdin(struct agent *a) {
  char tmp[65536];
  ssize_t n = read(STDIN_FILENO, tmp, sizeof(tmp));
  if (n < 0 && (errno == EINTR || errno == EAGAIN))
    return;
  if (n < 0)
    say("stdin: %s", strerror(errno));
  if (n > 0) {
    feed(a, tmp, (size_t)n);
    return;
  }
  // End of input: a last line without its newline still counts.
  if (a->in.len && !a->skipping)
    handle_line(a, a->in.data, a->in.len);
  say("stdin closed: exiting");
  agent_exit(a, 0);
}

// ---------------------------------------------------------------------------
// Signals, the loop, and shutdown

static void on_signal(int sig) {
  int saved = errno;
  char c = sig == SIGTERM ? 'T' : 'C';
  if (write(sig_pipe[1], &c, 1) < 0) {
    // The pipe is full: a wakeup is pending anyway.
  }
  errno = saved;
}

static void setup_signals(void) {
  if (pipe(sig_pipe) != 0)
    die("pipe");
  for (int i = 0; i < 2; i++) {
    fcntl(sig_pipe[i], F_SETFD, FD_CLOEXEC);
    fcntl(sig_pipe[i], F_SETFL, O_NONBLOCK);
  }
  struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_flags |= SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, NULL);
  signal(SIGPIPE, SIG_IGN); // a closed stdout is seen as a write error
}

static void handle_signals(struct agent *a) {
  char c[64];
  ssize_t n;
  bool term = false;
  while ((n = read(sig_pipe[0], c, sizeof(c))) > 0)
    for (ssize_t i = 0; i < n; i++)
      term = term || c[i] == 'T';
  if (term) {
    say("SIGTERM: exiting");
    record(a, json_pack("{s:s}", "event", "sigterm"));
    agent_exit(a, 0);
  }
  reap_children(a);
}

// Fills a->pfds: the signal pipe, stdin, then the output of each child.
static size_t build_pollfds(struct agent *a) {
  size_t n = 2;
  for (struct perm *p = a->perms; p; p = p->next)
    n += p->out_fd >= 0;
  if (n > a->pfds_cap) {
    a->pfds_cap = n * 2;
    a->pfds = xrealloc(a->pfds, a->pfds_cap * sizeof(*a->pfds));
  }
  a->pfds[0] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
  a->pfds[1] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
  n = 2;
  for (struct perm *p = a->perms; p; p = p->next)
    if (p->out_fd >= 0)
      a->pfds[n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
  return n;
}

static void run_loop(struct agent *a) {
  for (;;) {
    size_t n = build_pollfds(a);
    int r = poll(a->pfds, (nfds_t)n, next_timeout(a));
    if (r < 0 && errno != EINTR)
      die("poll failed");
    if (r > 0) {
      if (a->pfds[0].revents)
        handle_signals(a);
      // Children before stdin: handling input can start new children, and
      // a new pipe may reuse the number of one closed here.
      for (size_t i = 2; i < n; i++)
        if (a->pfds[i].revents)
          read_child(a, a->pfds[i].fd);
      finish_children(a);
      if (a->pfds[1].revents)
        read_stdin(a);
    }
    fire_timers(a);
  }
}

static void agent_free(struct agent *a) {
  while (a->perms) {
    struct perm *p = a->perms;
    if (p->pid > 0 && !p->reaped) { // a command still running: stop it
      kill(p->pid, SIGKILL);
      waitpid(p->pid, NULL, 0);
    }
    perm_free(a, p);
  }
  while (a->outreqs) {
    struct outreq *r = a->outreqs;
    a->outreqs = r->next;
    json_decref(r->id);
    free(r);
  }
  while (a->sessions) {
    struct session *s = a->sessions;
    a->sessions = s->next;
    if (s->turn)
      json_decref(s->turn->prompt_id);
    free(s->turn);
    free(s->id);
    free(s->cwd);
    free(s->mode);
    free(s);
  }
  json_decref(a->scenario);
  buf_free(&a->in);
  free(a->pfds);
  if (a->transcript)
    fclose(a->transcript);
  close(sig_pipe[0]);
  close(sig_pipe[1]);
}

// Records the exit, frees everything and exits; used on every way out.
__attribute__((noreturn)) static void agent_exit(struct agent *a, int code) {
  record(a, json_pack("{s:s,s:i}", "event", "exit", "code", code));
  agent_free(a);
  exit(code);
}

// ---------------------------------------------------------------------------
// Scenario loading and checking

static bool is_one_of(const char *s, const char *const *list) {
  for (; s && *list; list++)
    if (strcmp(s, *list) == 0)
      return true;
  return false;
}

// Is v an integer >= min?
static bool is_count(json_t *v, json_int_t min) {
  return json_is_integer(v) && json_integer_value(v) >= min;
}

static bool is_string_array(json_t *v) {
  size_t i;
  json_t *item;
  json_array_foreach(v, i, item) {
    if (!json_is_string(item))
      return false;
  }
  return json_is_array(v);
}

// Is v an array of objects, each with a string in every field named in
// fields (a NULL-terminated list)?
static bool is_array_of(json_t *v, const char *const *fields) {
  size_t i;
  json_t *item;
  json_array_foreach(v, i, item) {
    for (const char *const *f = fields; *f; f++)
      if (!json_is_string(json_object_get(item, *f)))
        return false;
  }
  return json_is_array(v);
}

// Is v absent, or a uint32 (as line and limit are in the schema) >= 1?
static bool is_line_count(json_t *v) {
  return !v || (is_count(v, 1) && json_integer_value(v) <= UINT32_MAX);
}

static const char *check_run(json_t *act) {
  json_t *args = json_object_get(act, "args");
  json_t *env = json_object_get(act, "env");
  json_t *limit = json_object_get(act, "outputByteLimit");
  json_t *kill_ms = json_object_get(act, "kill_after_ms");
  json_t *early = json_object_get(act, "release_early");
  if (!json_is_string(json_object_get(act, "command")))
    return "a run action needs a command string";
  if (args && !is_string_array(args))
    return "args must be an array of strings";
  if (env && !is_array_of(env, (const char *const[]){"name", "value", NULL}))
    return "env must be an array of {name, value} strings";
  if (limit && !is_count(limit, 0))
    return "outputByteLimit must be an integer >= 0";
  if (kill_ms && !is_count(kill_ms, 0))
    return "kill_after_ms must be an integer >= 0";
  if (early && !json_is_boolean(early))
    return "release_early must be true or false";
  if (kill_ms && json_is_true(early))
    return "kill_after_ms and release_early exclude each other";
  return NULL;
}

// Checks an action: a permission's on_allow, or a read, write or run step.
static const char *check_action(json_t *act) {
  switch (act_type(act)) {
  case ACT_READ:
    return !json_is_string(json_object_get(act, "path"))
               ? "a read action needs a path string"
           : !is_line_count(json_object_get(act, "line")) ||
                   !is_line_count(json_object_get(act, "limit"))
               ? "line and limit must be integers 1-4294967295"
               : NULL;
  case ACT_WRITE:
    return json_is_string(json_object_get(act, "path")) &&
                   json_is_string(json_object_get(act, "content"))
               ? NULL
               : "a write action needs path and content strings";
  case ACT_RUN:
    return check_run(act);
  default:
    return "on_allow must be {\"type\":\"write\",...}, {\"type\":\"run\","
           "...} or {\"type\":\"read\",...}";
  }
}

// Checks one permission request (a "permission" step or an item of a
// "permissions_parallel" step).
static const char *check_request(json_t *req) {
  static const char *const on_reject[] = {"continue", "end_turn", "cancelled",
                                          NULL};
  json_t *opts = json_object_get(req, "options");
  json_t *ann = json_object_get(req, "announce");
  json_t *on_allow = json_object_get(req, "on_allow");
  json_t *rej = json_object_get(req, "on_reject");
  json_t *wait = json_object_get(req, "wait");
  if (!json_is_string(
          json_object_get(json_object_get(req, "toolCall"), "toolCallId")))
    return "needs toolCall.toolCallId (a string)";
  if (!json_is_array(opts))
    return "needs an options array";
  size_t i;
  json_t *opt;
  json_array_foreach(opts, i, opt) {
    if (!json_is_string(json_object_get(opt, "optionId")) ||
        !json_is_string(json_object_get(opt, "kind")))
      return "every option needs an optionId string and a kind string";
  }
  if (ann && !json_is_boolean(ann) && !json_is_object(ann))
    return "announce must be true, false or an object";
  if (on_allow && check_action(on_allow))
    return check_action(on_allow);
  if (rej && !is_one_of(json_string_value(rej), on_reject))
    return "on_reject must be \"continue\", \"end_turn\" or \"cancelled\"";
  if (wait && !json_is_boolean(wait))
    return "wait must be true or false";
  return NULL;
}

static const char *check_raw(json_t *step) {
  const char *line = json_string_value(json_object_get(step, "line"));
  json_t *enc = json_object_get(step, "encoding");
  if (!line)
    return "raw needs a line string";
  if (enc &&
      !is_one_of(json_string_value(enc), (const char *const[]){"latin1", NULL}))
    return "encoding must be \"latin1\"";
  // Every character below U+0100: ASCII, or C2/C3 and one more byte.
  for (const unsigned char *p = (const unsigned char *)line; enc && *p; p++) {
    if (*p >= 0x80 && *p != 0xC2 && *p != 0xC3)
      return "a latin1 line has only characters U+0000-U+00FF";
    if (*p >= 0x80)
      p++;
  }
  return NULL;
}

static const char *check_garbage(json_t *step) {
  json_t *line = json_object_get(step, "line");
  json_t *fill = json_object_get(step, "fill");
  json_t *js = json_object_get(step, "json");
  if (!is_count(json_object_get(step, "bytes"), 0))
    return "garbage needs bytes, an integer >= 0";
  if (line && !is_count(line, 0))
    return "line must be an integer >= 0";
  if (fill && (!json_is_string(fill) || strchr(json_string_value(fill), '\n')))
    return "fill must be a string without a newline";
  if (js && !json_is_boolean(js))
    return "json must be true or false";
  if (json_object_get(step, "newline") &&
      !json_is_boolean(json_object_get(step, "newline")))
    return "newline must be true or false";
  if (json_is_true(js) && json_integer_value(line) != 0)
    return "json: true makes one line: no line length";
  for (const char *p = fill ? json_string_value(fill) : "";
       json_is_true(js) && *p; p++)
    if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
      return "json: true needs a fill without quotes, backslashes or controls";
  return NULL;
}

static const char *check_step(json_t *step) {
  const char *type = json_string_value(json_object_get(step, "type"));
  if (!type)
    return "a step needs a type";
  if (strcmp(type, "message") == 0)
    return json_is_string(json_object_get(step, "text"))
               ? NULL
               : "message needs a text string";
  if (strcmp(type, "permission") == 0)
    return check_request(step);
  if (strcmp(type, "permissions_parallel") == 0) {
    json_t *reqs = json_object_get(step, "requests");
    if (!json_is_array(reqs) || json_array_size(reqs) == 0)
      return "permissions_parallel needs a non-empty requests array";
    size_t i;
    json_t *req;
    const char *why = NULL;
    json_array_foreach(reqs, i, req) {
      if (!why)
        why = check_request(req);
    }
    return why;
  }
  if (strcmp(type, "sleep") == 0)
    return json_integer_value(json_object_get(step, "ms")) >= 0 &&
                   json_is_integer(json_object_get(step, "ms"))
               ? NULL
               : "sleep needs ms, an integer >= 0";
  if (strcmp(type, "exit") == 0) {
    json_t *code = json_object_get(step, "code");
    return json_is_integer(code) && json_integer_value(code) >= 0 &&
                   json_integer_value(code) <= 255
               ? NULL
               : "exit needs code, an integer 0-255";
  }
  if (strcmp(type, "raw") == 0)
    return check_raw(step);
  if (strcmp(type, "garbage") == 0)
    return check_garbage(step);
  if (strcmp(type, "flood") == 0)
    return !is_count(json_object_get(step, "bytes"), 0)
               ? "flood needs bytes, an integer >= 0"
           : json_object_get(step, "chunk") &&
                   !is_count(json_object_get(step, "chunk"), 1)
               ? "chunk must be an integer >= 1"
               : NULL;
  if (strcmp(type, "many_permissions") == 0) {
    if (!is_count(json_object_get(step, "count"), 1))
      return "many_permissions needs count, an integer >= 1";
    if (!json_is_object(json_object_get(step, "request")))
      return "many_permissions needs a request object";
    return check_request(json_object_get(step, "request"));
  }
  if (strcmp(type, "update") == 0)
    return json_is_object(json_object_get(step, "update"))
               ? NULL
               : "update needs an update object";
  if (strcmp(type, "updates") == 0)
    return !is_count(json_object_get(step, "count"), 1)
               ? "updates needs count, an integer >= 1"
           : !json_is_object(json_object_get(step, "update"))
               ? "updates needs an update object"
               : NULL;
  if (strcmp(type, "error") == 0)
    return json_is_integer(json_object_get(step, "code")) &&
                   json_is_string(json_object_get(step, "message"))
               ? NULL
               : "error needs code, an integer, and a message string";
  if (is_one_of(type, (const char *const[]){"read", "write", "run", NULL}))
    return check_action(step);
  return "unknown step type";
}

// Checks the scenario's optional top-level fields (all but steps and
// id_style). Returns why one is bad, naming it, or NULL.
static const char *check_top(json_t *sc) {
  json_t *caps = json_object_get(sc, "agent_capabilities");
  json_t *methods = json_object_get(sc, "auth_methods");
  json_t *auth = json_object_get(sc, "require_auth");
  json_t *modes = json_object_get(sc, "modes");
  json_t *history = json_object_get(sc, "history");
  json_t *available = json_object_get(modes, "availableModes");
  const char *mode = json_string_value(json_object_get(modes, "currentModeId"));
  static const char *const id_name[] = {"id", "name", NULL};
  if (caps && !json_is_object(caps))
    return "agent_capabilities must be an object";
  if (json_object_get(sc, "agent_name") &&
      !json_is_string(json_object_get(sc, "agent_name")))
    return "agent_name must be a string";
  if (methods && !is_array_of(methods, id_name))
    return "auth_methods must be an array of objects with id and name strings";
  if (auth && !json_is_boolean(auth))
    return "require_auth must be true or false";
  if (json_is_true(auth) && json_array_size(methods) == 0)
    return "require_auth needs a non-empty auth_methods";
  if (modes && (!is_array_of(available, id_name) || !mode ||
                !find_by_id(available, mode)))
    return "modes needs availableModes (objects with id and name strings) "
           "and a currentModeId, the id of one of them";
  if (history &&
      !is_array_of(history, (const char *const[]){"sessionUpdate", NULL}))
    return "history must be an array of objects with a sessionUpdate string";
  if (history && !json_is_true(json_object_get(caps, "loadSession")))
    return "history needs agent_capabilities.loadSession: true";
  return NULL;
}

// Loads the scenario (the built-in one if path is NULL) and checks it, so
// that a typo in a test's scenario fails at once and says where.
static json_t *scenario_load(const char *path, enum id_style *style) {
  json_error_t err;
  json_t *sc = path ? json_load_file(path, 0, &err)
                    : json_loads(default_scenario, 0, &err);
  const char *name = path ? path : "(built-in scenario)";
  if (!sc) {
    say("%s:%d:%d: %s", name, err.line, err.column, err.text);
    exit(2);
  }
  const char *idst = json_string_value(json_object_get(sc, "id_style"));
  static const char *const styles[] = {"int", "string", "uuid", NULL};
  const char *why = NULL;
  size_t bad = 0;
  if (!json_is_array(json_object_get(sc, "steps")))
    why = "a scenario is an object with a steps array";
  else if (json_object_get(sc, "id_style") && !is_one_of(idst, styles))
    why = "id_style must be \"int\", \"string\" or \"uuid\"";
  else
    why = check_top(sc);
  for (; !why && bad < json_array_size(json_object_get(sc, "steps")); bad++)
    why = check_step(json_array_get(json_object_get(sc, "steps"), bad));
  if (why) {
    if (bad) // a step is bad; else the scenario's top level is
      say("%s: steps[%zu]: %s", name, bad - 1, why);
    else
      say("%s: %s", name, why);
    json_decref(sc);
    exit(2);
  }
  *style = !idst || strcmp(idst, "int") == 0 ? ID_INT
           : strcmp(idst, "string") == 0     ? ID_STRING
                                             : ID_UUID;
  return sc;
}

static void usage(FILE *f) {
  fputs("usage: " AGENT_NAME " [--scenario FILE]\n"
        "       " AGENT_NAME " --print-default-scenario | --version\n"
        "A scripted ACP agent on stdin/stdout, for demos and tests.\n"
        "Environment: ACP_DEMO_SCENARIO (scenario file, if no --scenario),\n"
        "ACP_DEMO_TRANSCRIPT (file to append a JSON-lines transcript to).\n"
        "Scenario format: tests/scenarios/README.md\n",
        f);
}

// Returns the scenario path from argv or the environment (NULL for the
// built-in one); handles the options that print something and exit.
static const char *parse_args(int argc, char **argv) {
  const char *path = getenv("ACP_DEMO_SCENARIO");
  if (path && !*path)
    path = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--scenario") == 0 && i + 1 < argc) {
      path = argv[++i];
    } else if (strncmp(argv[i], "--scenario=", 11) == 0) {
      path = argv[i] + 11;
    } else if (strcmp(argv[i], "--print-default-scenario") == 0) {
      json_t *sc = json_loads(default_scenario, 0, NULL);
      json_dumpf(sc, stdout, JSON_INDENT(2));
      fputc('\n', stdout);
      json_decref(sc);
      exit(0);
    } else if (strcmp(argv[i], "--version") == 0) {
      puts(AGENT_NAME " " AGENT_VERSION);
      exit(0);
    } else {
      usage(strcmp(argv[i], "--help") == 0 ? stdout : stderr);
      exit(strcmp(argv[i], "--help") == 0 ? 0 : 2);
    }
  }
  return path;
}

int main(int argc, char **argv) {
  static struct agent agent; // static: reachable from anywhere at exit()
  struct agent *a = &agent;
  const char *path = parse_args(argc, argv);
  a->scenario = scenario_load(path, &a->id_style);
  const char *tr = getenv("ACP_DEMO_TRANSCRIPT");
  if (tr && *tr && !(a->transcript = fopen(tr, "ae"))) {
    say("cannot open transcript %s: %s", tr, strerror(errno));
    json_decref(a->scenario);
    return 2;
  }
  srand((unsigned)getpid() ^ (unsigned)time(NULL));
  setup_signals();
  say("ready, scenario \"%s\" (%s)",
      json_string_value(json_object_get(a->scenario, "name"))
          ? json_string_value(json_object_get(a->scenario, "name"))
          : "unnamed",
      path ? path : "built-in");
  run_loop(a);
}
