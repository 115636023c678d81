// Unit tests for the ACP connection (acp.c) with a fake host: from the
// newline framing of the agent's stdout to the state machine the host sees.
//
// The agent is a relay (sh and two cats) between the connection and this
// test: what the test writes to `H.to` is the agent's stdout, and what the
// connection writes to the agent's stdin comes back on a pipe the test
// reads. So the test plays the agent line by line, on a real libuv loop,
// through the real process plumbing (proc.c).
//
// No timing assertion: every wait is for an event, with a uv timer only as a
// failsafe. To check that something was NOT sent, the test first makes a
// round trip (a request for an unknown method, which the connection answers
// in order after everything it had to write before).

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "acp/acp.h"
#include "acp/jsonrpc.h"
#include "acp/reqview.h"
#include "base/log.h"
#include "check.h"
#include "io/linebuf.h"
#include "uvtest.h"

// $1: the pipe to read the agent's stdout from, $2: where the agent's stdin
// goes, $3: a file that receives the arguments (the posture may add some).
// The background cat reads the saved stdin (an asynchronous list's own
// stdin is /dev/null).
static const char relay[] =
    "exec 9<&0; printf '%s\\n' \"$@\" > \"$3\"; cat <&9 > \"$2\" & "
    "exec cat \"$1\"";

// ---- the harness: one fake agent and one fake host at a time ----

struct harness {
  struct acp_conn *conn;
  int to;            // the agent's stdout (the test writes it)
  uv_pipe_t from;    // the agent's stdin (the test reads it)
  bool from_open;    // from is still being read
  bool from_eof;     // the agent's stdin reached EOF
  struct linebuf lb; // framing of what the agent received
  json_t *rx;        // every message the agent received, in order
  size_t rxi;        // the next one rx_next returns
  int syncs_sent, syncs_seen;
  json_t *ev;          // what the host saw: [{"name", "data"}], in order
  size_t evi;          // the next one ev_wait looks at
  json_t *perms;       // permission request ids not yet answered
  bool answer_on_gone; // the host answers pending permissions in `gone`
  bool alive_in_gone;  // acp_conn_alive() inside `gone`
  int closed;
};

static struct harness H;

static char buf_rd[65536];

static void rx_line(void *ud, const char *line, size_t len) {
  (void)ud;
  json_error_t e;
  json_t *m = json_loadb(line, len, 0, &e);
  if (!m) {
    m = json_pack("{s:s#}", "unparsable", line, (int)len);
  }
  const char *id = json_string_value(json_object_get(m, "id"));
  if (id && strncmp(id, "sync-", 5) == 0) {
    H.syncs_seen++;
    json_decref(m);
    return;
  }
  json_array_append_new(H.rx, m);
}

static void rx_overlong(void *ud, size_t len) {
  (void)ud;
  (void)len;
}

static void from_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void)h;
  (void)suggested;
  *b = uv_buf_init(buf_rd, sizeof(buf_rd));
}

static void from_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  if (n > 0) {
    linebuf_feed(&H.lb, b->base, (size_t)n, rx_line, rx_overlong, NULL);
  } else if (n < 0) {
    uv_read_stop(s);
    H.from_eof = true;
  }
}

// ---- the fake host ----

static void record(const char *name, json_t *data) {
  json_array_append_new(H.ev, json_pack("{s:s,s:o}", "name", name, "data",
                                        data ? data : json_null()));
}

static void host_emit(void *ud, const char *event, json_t *data) {
  (void)ud;
  record(event, data);
}

static void host_permission(void *ud, struct acp_conn *c, const json_t *id,
                            json_t *params) {
  (void)ud;
  (void)c;
  json_array_append_new(H.perms, json_deep_copy(id));
  record("permission", json_pack("{s:O,s:O}", "id", id, "params", params));
}

// A request read into a flat view (acp/reqview.h): recorded as the tree
// would give it, so every test below sees the same events either way.
static size_t view_calls, view_bad;
static void host_permission_view(void *ud, struct acp_conn *c,
                                 const struct reqview *v, const char *line,
                                 size_t len) {
  struct jsonrpc_msg m;
  char err[200];
  view_calls++;
  if (jsonrpc_parse(line, len, &m, err, sizeof(err)) == 0 &&
      jsonrpc_id_equal(m.id, v->id))
    host_permission(ud, c, v->id, m.params);
  else
    view_bad++;
  jsonrpc_msg_free(&m);
}

static void host_client_request(void *ud, struct acp_conn *c, const json_t *id,
                                const char *method, json_t *params) {
  (void)ud;
  record("client_request", json_pack("{s:O,s:s,s:O}", "id", id, "method",
                                     method, "params", params));
  acp_conn_respond(c, id, json_pack("{s:s}", "done", method));
}

static void host_withdraw(void *ud, struct acp_conn *c, const json_t *id) {
  (void)ud;
  (void)c;
  record("withdraw", json_pack("{s:O}", "id", id));
}

static void host_gone(void *ud, struct acp_conn *c, bool exited) {
  (void)ud;
  H.alive_in_gone = acp_conn_alive(c);
  record("gone", json_pack("{s:b}", "exited", exited));
  if (!H.answer_on_gone)
    return;
  for (size_t i = 0; i < json_array_size(H.perms); i++)
    acp_conn_respond(c, json_array_get(H.perms, i),
                     json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
  json_array_clear(H.perms);
}

static void host_closed(void *ud, struct acp_conn *c) {
  (void)ud;
  (void)c;
  H.closed++;
  H.conn = NULL;
  record("closed", NULL);
}

static const struct acp_host host = {.emit = host_emit,
                                     .permission = host_permission,
                                     .permission_view = host_permission_view,
                                     .client_request = host_client_request,
                                     .withdraw = host_withdraw,
                                     .gone = host_gone,
                                     .closed = host_closed};

// ---- helpers ----

// Writes one line as the agent's stdout (a newline is added).
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
  char line[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof(line) - 1) {
    ok(false, "say: line too long");
    return;
  }
  line[n++] = '\n';
  if (write(H.to, line, (size_t)n) != n)
    ok(false, "say: write: %s", strerror(errno));
}

static void say_raw(const char *data, size_t n) {
  if (write(H.to, data, n) != (ssize_t)n)
    ok(false, "say_raw: write: %s", strerror(errno));
}

// A round trip: everything the connection wrote because of what came
// before is in H.rx afterwards, every event it emitted in H.ev.
static void sync_agent(void) {
  int n = ++H.syncs_sent;
  say("{\"jsonrpc\":\"2.0\",\"id\":\"sync-%d\",\"method\":\"test/sync\"}", n);
  WAIT(H.syncs_seen >= n);
  ok(H.syncs_seen >= n, "round trip %d", n);
}

// The next message the agent received (NULL after the failsafe).
static json_t *rx_next(void) {
  WAIT(json_array_size(H.rx) > H.rxi);
  return json_array_get(H.rx, H.rxi < json_array_size(H.rx) ? H.rxi++ : H.rxi);
}

static const char *method_of(const json_t *m) {
  return json_string_value(json_object_get(m, "method"));
}

static json_int_t id_of(const json_t *m) {
  return json_integer_value(json_object_get(m, "id"));
}

// Pending = received and not consumed by rx_next.
static size_t rx_pending(void) {
  return json_array_size(H.rx) - H.rxi;
}

static json_t *ev_at(size_t i) {
  return json_array_get(H.ev, i);
}

static const char *ev_name(size_t i) {
  return json_string_value(json_object_get(ev_at(i), "name"));
}

static size_t ev_index(const char *name, size_t from) {
  for (size_t i = from; i < json_array_size(H.ev); i++)
    if (strcmp(ev_name(i), name) == 0)
      return i;
  return (size_t)-1;
}

// Waits for the next event called name (from the cursor on) and returns
// its data (NULL after the failsafe); the cursor moves past it.
static json_t *ev_wait(const char *name) {
  WAIT(ev_index(name, H.evi) != (size_t)-1);
  size_t i = ev_index(name, H.evi);
  if (i == (size_t)-1)
    return NULL;
  H.evi = i + 1;
  return json_object_get(ev_at(i), "data");
}

// The names of the events from index `from` on, comma-separated, skipping
// those in `skip` (a comma-separated list, or NULL).
static const char *ev_names(size_t from, const char *skip) {
  static char out[1024];
  size_t k = 0;
  out[0] = '\0';
  for (size_t i = from; i < json_array_size(H.ev) && k < sizeof(out) - 64;
       i++) {
    const char *n = ev_name(i);
    char pat[80];
    snprintf(pat, sizeof(pat), ",%s,", n);
    char list[300];
    snprintf(list, sizeof(list), ",%s,", skip ? skip : "");
    if (strstr(list, pat))
      continue;
    k += (size_t)snprintf(out + k, sizeof(out) - k, "%s%s", k ? "," : "", n);
  }
  return out;
}

static size_t ev_count(const char *name) {
  size_t n = 0;
  for (size_t i = 0; i < json_array_size(H.ev); i++)
    n += strcmp(ev_name(i), name) == 0;
  return n;
}

static const char *str_at(const json_t *o, const char *path) {
  // "a.b.c": nested object keys.
  char key[64];
  const json_t *v = o;
  while (v && *path) {
    size_t n = strcspn(path, ".");
    snprintf(key, sizeof(key), "%.*s", (int)n, path);
    v = json_object_get(v, key);
    path += n + (path[n] == '.');
  }
  return json_string_value(v);
}

static char argsfile[300];

// Starts a relay agent as argv0 (a name of /bin/sh) with the fake host;
// the shell first runs prelude (or nothing).
static struct acp_conn *start_with(const char *argv0, const char *prelude) {
  memset(&H, 0, sizeof(H));
  H.rx = json_array();
  H.ev = json_array();
  H.perms = json_array();
  linebuf_init(&H.lb, 1 << 20);
  int to[2], from[2];
  if (pipe(to) != 0 || pipe(from) != 0) {
    ok(false, "pipes: %s", strerror(errno));
    return NULL;
  }
  // Only the agent's ends are inherited (by the agent alone: they are
  // closed here right after the spawn).
  fcntl(to[1], F_SETFD, FD_CLOEXEC);
  fcntl(from[0], F_SETFD, FD_CLOEXEC);
  char rpath[32], wpath[32];
  snprintf(rpath, sizeof(rpath), "/dev/fd/%d", to[0]);
  snprintf(wpath, sizeof(wpath), "/dev/fd/%d", from[1]);
  snprintf(argsfile, sizeof(argsfile), "%s/args", tmp);
  unlink(argsfile);
  char script[1024];
  snprintf(script, sizeof(script), "%s%s", prelude ? prelude : "", relay);
  const char *argv[] = {argv0, "-c",  script,   "agent",
                        rpath, wpath, argsfile, NULL};
  struct proc_spawn spec = {argv, NULL, NULL, "test-agent"};
  char err[256] = "";
  H.conn = acp_conn_start(&loop, "fake", &spec, &host, NULL, err, sizeof(err));
  close(to[0]);
  close(from[1]);
  H.to = to[1];
  uv_pipe_init(&loop, &H.from, 0);
  uv_pipe_open(&H.from, from[0]);
  uv_read_start((uv_stream_t *)&H.from, from_alloc, from_read);
  H.from_open = true;
  ok(H.conn != NULL, "the agent starts (%s)", err);
  return H.conn;
}

static struct acp_conn *start_as(const char *argv0) {
  return start_with(argv0, NULL);
}

static struct acp_conn *start(void) {
  return start_as("sh");
}

static void on_from_closed(uv_handle_t *h) {
  (void)h;
  H.from_open = false;
}

// Stops the agent if it still runs and waits for the connection to close.
static void finish(void) {
  if (H.conn)
    acp_conn_stop(H.conn, 100, "test over");
  close(H.to); // the relay ends without waiting for SIGTERM
  WAIT(H.closed > 0);
  ok(H.closed == 1, "closed once");
  uv_close((uv_handle_t *)&H.from, on_from_closed);
  WAIT(!H.from_open);
  linebuf_free(&H.lb);
  json_decref(H.rx);
  json_decref(H.ev);
  json_decref(H.perms);
}

// Answers initialize as an agent called info_name.
static void handshake(const char *info_name, const char *extra) {
  json_t *m = rx_next();
  is_str(method_of(m), "initialize", "the first message is initialize");
  say("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"protocolVersion\":1,"
      "\"agentInfo\":{\"name\":\"%s\",\"version\":\"1.0\"},"
      "\"agentCapabilities\":{}%s}}",
      (long long)id_of(m), info_name, extra ? extra : "");
  ok(ev_wait("agent_ready") != NULL, "agent_ready");
}

// Opens a session in cwd answered as sid (with modes, a JSON object or
// NULL); returns the session/new request.
static void open_session(const char *cwd, const char *sid, const char *modes) {
  acp_conn_new_session(H.conn, cwd, NULL);
  json_t *m = rx_next();
  is_str(method_of(m), "session/new", "session/new sent");
  say("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"sessionId\":\"%s\"%s%s}}",
      (long long)id_of(m), sid, modes ? ",\"modes\":" : "", modes ? modes : "");
  json_t *d = ev_wait("session_new");
  is_str(str_at(d, "session"), sid, "session_new names the session");
}

// Answers the connection's request id with result (JSON text).
static void answer(json_int_t id, const char *result) {
  say("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":%s}", (long long)id, result);
}

static void answer_error(json_int_t id, int code, const char *message) {
  say("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"error\":{\"code\":%d,"
      "\"message\":\"%s\"}}",
      (long long)id, code, message);
}

// The agent asks (request id: JSON text) to run tool call t of session
// sid, offering one option "a" of kind.
static void ask_permission(const char *id, const char *sid, const char *kind) {
  say("{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":"
      "\"session/request_permission\",\"params\":{\"sessionId\":\"%s\","
      "\"toolCall\":{\"toolCallId\":\"t\"},\"options\":[{\"optionId\":"
      "\"a\",\"name\":\"A\",\"kind\":\"%s\"}]}}",
      id, sid, kind);
}

// The code of an error answer.
static json_int_t error_code(const json_t *m) {
  return json_integer_value(
      json_object_get(json_object_get(m, "error"), "code"));
}

// A started agent (agentInfo "x") with a session "s" in tmp.
static struct acp_conn *ready_session(void) {
  if (!start())
    return NULL;
  handshake("x", NULL);
  open_session(tmp, "s", NULL);
  return H.conn;
}

// A turn runs in session "s" with a permission request (id: JSON text)
// pending, which the host will answer `cancelled` when the agent goes.
static void pending_permission(struct acp_conn *c, const char *id) {
  acp_conn_prompt(c, "go", NULL);
  json_t *m = rx_next();
  is_str(method_of(m), "session/prompt", "a turn runs");
  ask_permission(id, "s", "allow_once");
  ok(ev_wait("permission") != NULL, "a permission request is pending");
  H.answer_on_gone = true;
}

// ---- tests ----

// initialize → session/new → prompt → updates → a permission → the turn
// ends; a second prompt waits for the first turn.
static void test_flow(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  ok(acp_conn_alive(c), "alive after start");
  ok(acp_conn_pid(c) > 0, "has a pid");
  is_str(acp_conn_name(c), "fake", "name");
  ok(acp_conn_current_session(c) == NULL, "no session yet");

  json_t *m = rx_next();
  is_str(method_of(m), "initialize", "initialize first");
  is_int(id_of(m), 0, "with id 0");
  is_int(json_integer_value(
             json_object_get(json_object_get(m, "params"), "protocolVersion")),
         1, "protocol version 1");
  json_t *caps =
      json_object_get(json_object_get(m, "params"), "clientCapabilities");
  ok(json_is_true(
         json_object_get(json_object_get(caps, "fs"), "readTextFile")) &&
         json_is_true(
             json_object_get(json_object_get(caps, "fs"), "writeTextFile")) &&
         json_is_true(json_object_get(caps, "terminal")),
     "fs and terminal advertised");

  // Asked before initialize is answered: the session and the prompt wait.
  acp_conn_new_session(c, tmp, NULL);
  is_int(acp_conn_prompt(c, "hello", NULL), 0, "a prompt is queued");
  sync_agent();
  is_size(rx_pending(), 0, "nothing else sent before initialize is answered");

  // The id "0" is not initialize's 0.
  say("{\"jsonrpc\":\"2.0\",\"id\":\"0\",\"result\":{\"protocolVersion\":1}}");
  sync_agent();
  is_size(ev_count("agent_ready"), 0,
          "a response with id \"0\" does not answer 0");
  say("{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":1,"
      "\"agentInfo\":{\"name\":\"fake-agent\",\"version\":\"1.0\"},"
      "\"agentCapabilities\":{\"loadSession\":true},\"authMethods\":[]}}");
  json_t *d = ev_wait("agent_ready");
  is_str(str_at(d, "agentInfo.name"), "fake-agent", "agent_ready: agentInfo");
  is_str(str_at(d, "agent"), "fake", "events name the agent");
  m = rx_next();
  is_str(method_of(m), "session/new", "then session/new");
  is_str(str_at(json_object_get(m, "params"), "cwd"), tmp, "in the cwd");
  ok(json_is_array(json_object_get(json_object_get(m, "params"), "mcpServers")),
     "with mcpServers");
  sync_agent();
  is_size(rx_pending(), 0, "the prompt waits for the session");

  answer(id_of(m), "{\"sessionId\":\"s1\"}");
  d = ev_wait("session_new");
  is_str(str_at(d, "session"), "s1", "session_new");
  is_str(str_at(d, "cwd"), tmp, "session_new: cwd");
  ok(json_is_false(json_object_get(d, "resumed")), "session_new: not resumed");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "unverified",
         "an unknown agent's posture is unverified");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "does not know"),
     "with the reason: %s", str_at(d, "reason"));
  is_str(str_at(d, "family"), "unknown", "family unknown");
  is_str(acp_conn_current_session(c), "s1", "the current session");
  is_str(acp_conn_session_cwd(c, "s1"), tmp, "its cwd");

  m = rx_next();
  is_str(method_of(m), "session/prompt", "the queued prompt is sent");
  json_int_t prompt_id = id_of(m);
  is_str(str_at(json_object_get(m, "params"), "sessionId"), "s1",
         "to the session");
  json_t *p0 = json_array_get(
      json_object_get(json_object_get(m, "params"), "prompt"), 0);
  is_str(str_at(p0, "type"), "text", "a text block");
  is_str(str_at(p0, "text"), "hello", "with the text");
  d = ev_wait("turn_start");
  is_str(str_at(d, "text"), "hello", "turn_start");
  is_int((intmax_t)acp_conn_turn(c, "s1"), 1, "turn 1");

  // A second prompt waits for the first turn.
  is_int(acp_conn_prompt(c, "again", "s1"), 0, "a second prompt is queued");
  say("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"content\":{\"type\":\"text\","
      "\"text\":\"hi\"}}}}");
  d = ev_wait("update");
  is_str(str_at(d, "session"), "s1", "update: session");
  is_str(str_at(d, "update.content.text"), "hi", "update: the update itself");

  ask_permission("\"p1\"", "s1", "allow_once");
  d = ev_wait("permission");
  is_str(str_at(d, "id"), "p1", "the host gets the permission request");
  is_str(str_at(d, "params.toolCall.toolCallId"), "t", "with its params");
  sync_agent();
  is_size(rx_pending(), 0, "the connection never answers it itself");
  acp_conn_respond(c, json_array_get(H.perms, 0),
                   json_pack("{s:{s:s,s:s}}", "outcome", "outcome", "selected",
                             "optionId", "a"));
  json_array_clear(H.perms);
  m = rx_next();
  is_str(str_at(m, "id"), "p1", "the answer carries the request's id");
  is_str(str_at(m, "result.outcome.optionId"), "a", "and the host's result");

  answer(prompt_id, "{\"stopReason\":\"end_turn\"}");
  d = ev_wait("turn_end");
  is_str(str_at(d, "stopReason"), "end_turn", "turn_end: end_turn");
  is_str(str_at(d, "session"), "s1", "turn_end: session");
  m = rx_next();
  is_str(method_of(m), "session/prompt", "then the second prompt goes");
  is_str(str_at(json_array_get(
                    json_object_get(json_object_get(m, "params"), "prompt"), 0),
                "text"),
         "again", "with its text");
  is_int((intmax_t)acp_conn_turn(c, "s1"), 2, "turn 2");
  answer_error(id_of(m), 429, "rate limited");
  d = ev_wait("turn_end");
  is_str(str_at(d, "stopReason"), "error", "an error ends the turn");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "rate limited") &&
         strstr(str_at(d, "message"), "429"),
     "with the agent's message and code: %s", str_at(d, "message"));

  // A session in the same cwd is reused: no second session/new.
  size_t mark = json_array_size(H.ev);
  acp_conn_new_session(c, tmp, NULL);
  is_str(ev_names(mark, NULL), "session_new", "the session is reused");
  sync_agent();
  is_size(rx_pending(), 0, "without a request");
  // A prompt for a session that does not exist ends at once.
  mark = json_array_size(H.ev);
  is_int(acp_conn_prompt(c, "x", "nope"), 0, "a prompt for another session");
  d = ev_wait("turn_end");
  is_str(str_at(d, "message"), "no such session", "ends: no such session");

  mark = json_array_size(H.ev);
  acp_conn_stop(c, 100, "stopped by the test");
  ok(!acp_conn_alive(c), "not alive once stopped");
  WAIT(H.closed > 0);
  is_str(ev_names(mark, NULL), "gone,agent_exit,closed",
         "gone, agent_exit, closed");
  d = json_object_get(ev_at(ev_index("agent_exit", mark)), "data");
  is_str(str_at(d, "message"), "stopped by the test",
         "agent_exit says why it was stopped");
  finish();
}

// Lines split across reads, several lines in one read, blank lines and
// "\r\n" endings.
static void test_framing(void) {
  if (!start())
    return;
  json_t *m = rx_next();
  char line[512];
  int n = snprintf(line, sizeof(line),
                   "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{"
                   "\"protocolVersion\":1,\"agentInfo\":{\"name\":\"x\"}}}\r\n",
                   (long long)id_of(m));
  // One byte at a time (the loop runs between them): nothing happens
  // until the newline.
  for (int i = 0; i < n - 1; i++) {
    say_raw(line + i, 1);
    uv_run(&loop, UV_RUN_NOWAIT);
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  is_size(ev_count("agent_ready"), 0,
          "a line without its newline is not handled");
  say_raw(line + n - 1, 1);
  ok(ev_wait("agent_ready") != NULL, "the newline completes it: agent_ready");
  sync_agent();
  ok(!log_has("skipped a line"), "no line was skipped");

  acp_conn_new_session(H.conn, tmp, NULL);
  m = rx_next();
  is_str(method_of(m), "session/new", "session/new");
  // Three messages in one write, with blank and whitespace-only lines.
  n = snprintf(
      line, sizeof(line),
      "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"sessionId\":\"s\"}}\n"
      "\n   \n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"u1\"}}}\r\n"
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"u2\"}}}\n",
      (long long)id_of(m));
  size_t mark = json_array_size(H.ev);
  say_raw(line, (size_t)n);
  WAIT(ev_count("update") >= 2);
  is_str(ev_names(mark, NULL), "session_new,posture,update,update",
         "three lines in one write, in order");
  is_str(str_at(json_object_get(ev_at(ev_index("update", mark)), "data"),
                "update.sessionUpdate"),
         "u1", "the first update first");
  finish();
}

// Lines that are not JSON-RPC: a clear log line, an error answer when they
// carry a request id, and the connection goes on.
static void test_malformed(void) {
  if (!ready_session())
    return;

  size_t mark = json_array_size(H.ev);
  say("this is not json");
  say("[1,2,3]");
  say("{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"fs/read_text_file\"}");
  say("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":7}");
  say("{\"jsonrpc\":\"2.0\",\"id\":\"%c%c\",\"method\":\"x\"}", '\xff', 'a');
  sync_agent();
  ok(log_has("skipped a line: parse error"),
     "invalid JSON: logged as a parse error");
  ok(log_has("skipped a line: not a JSON object"),
     "a batch: logged as not an object");
  ok(log_has("jsonrpc is not"), "a wrong jsonrpc version: logged");
  json_t *m = rx_next();
  is_int(id_of(m), 5, "the bad request with id 5 is answered");
  is_int(error_code(m), -32600, "with -32600");
  m = rx_next();
  is_int(id_of(m), 6, "a method that is not a string: id 6 answered");
  is_int(error_code(m), -32600, "with -32600");
  is_size(rx_pending(), 0, "lines without a usable id are not answered");
  is_str(ev_names(mark, NULL), "", "no event for any of them");
  ok(acp_conn_alive(H.conn), "the connection survives");

  // Responses to requests never made, and an id of the wrong type.
  acp_conn_prompt(H.conn, "p", NULL);
  m = rx_next();
  is_str(method_of(m), "session/prompt", "a prompt");
  json_int_t pid = id_of(m);
  say("{\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{\"stopReason\":"
      "\"end_turn\"}}");
  say("{\"jsonrpc\":\"2.0\",\"id\":\"%lld\",\"result\":{\"stopReason\":"
      "\"end_turn\"}}",
      (long long)pid);
  say("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,"
      "\"message\":\"m\"}}");
  sync_agent();
  is_size(ev_count("turn_end"), 0,
          "unknown ids and a string id do not end the turn");
  ok(log_has("response to a request we never made"),
     "a response with an unknown id is logged");
  is_size(rx_pending(), 0, "responses are never answered");
  answer(pid, "{\"stopReason\":\"cancelled\"}");
  json_t *d = ev_wait("turn_end");
  is_str(str_at(d, "stopReason"), "cancelled", "the right id ends the turn");
  answer(pid, "{\"stopReason\":\"end_turn\"}");
  sync_agent();
  is_size(ev_count("turn_end"), 1, "a second answer to it is ignored");
  ok(acp_conn_alive(H.conn), "still alive");
  finish();
}

// The requests an agent makes: permission requests are checked before the
// host sees them, client methods need a known session, other methods are
// answered -32601; $/cancel_request reaches the host.
static void test_agent_requests(void) {
  if (!ready_session())
    return;

  static const struct {
    const char *params, *why;
  } bad[] = {
      {"{\"toolCall\":{\"toolCallId\":\"t\"},\"options\":[{\"optionId\":"
       "\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}",
       "sessionId missing"},
      {"{\"sessionId\":\"zz\",\"toolCall\":{\"toolCallId\":\"t\"},"
       "\"options\":[{\"optionId\":\"a\",\"name\":\"A\",\"kind\":"
       "\"allow_once\"}]}",
       "unknown sessionId"},
      {"{\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":"
       "\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}",
       "toolCall.toolCallId missing"},
      {"{\"sessionId\":\"s\",\"toolCall\":{\"toolCallId\":\"t\"},"
       "\"options\":[]}",
       "options missing or empty"},
      {"{\"sessionId\":\"s\",\"toolCall\":{\"toolCallId\":\"t\"},"
       "\"options\":[{\"optionId\":\"a\",\"name\":\"A\",\"kind\":"
       "\"allow_everything\"}]}",
       "an option lacks optionId, name or a known kind"},
      {"{\"sessionId\":\"s\",\"toolCall\":{\"toolCallId\":\"t\"},"
       "\"options\":[{\"optionId\":1,\"name\":\"A\",\"kind\":"
       "\"allow_once\"}]}",
       "an option lacks optionId, name or a known kind"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    say("{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":"
        "\"session/request_permission\",\"params\":%s}",
        100 + i, bad[i].params);
    json_t *m = rx_next();
    is_int(id_of(m), (intmax_t)(100 + i), "malformed permission answered");
    is_int(json_integer_value(
               json_object_get(json_object_get(m, "error"), "code")),
           -32602, "with -32602");
    is_str(str_at(m, "error.message"), bad[i].why, "with the reason");
  }
  is_size(ev_count("permission"), 0, "the host never saw them");

  say("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"fs/read_text_file\","
      "\"params\":{\"sessionId\":\"nope\",\"path\":\"/x\"}}");
  json_t *m = rx_next();
  is_str(str_at(m, "error.message"), "unknown sessionId",
         "a client method for an unknown session");
  say("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"terminal/create\","
      "\"params\":{\"command\":\"ls\"}}");
  m = rx_next();
  is_str(str_at(m, "error.message"), "sessionId missing",
         "a client method without a session");
  is_int(error_code(m), -32602, "-32602");
  is_size(ev_count("client_request"), 0, "the host never saw them");

  static const char *const methods[] = {
      "fs/read_text_file", "fs/write_text_file",     "terminal/create",
      "terminal/output",   "terminal/wait_for_exit", "terminal/kill",
      "terminal/release"};
  for (size_t i = 0; i < sizeof(methods) / sizeof(*methods); i++) {
    say("{\"jsonrpc\":\"2.0\",\"id\":\"c%zu\",\"method\":\"%s\",\"params\":{"
        "\"sessionId\":\"s\"}}",
        i, methods[i]);
    json_t *d = ev_wait("client_request");
    is_str(str_at(d, "method"), methods[i], "the host gets the client method");
    m = rx_next();
    is_str(str_at(m, "result.done"), methods[i], "the host's answer is sent");
  }

  say("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"session/new\","
      "\"params\":{}}");
  m = rx_next();
  is_int(error_code(m), -32601, "a method the client does not offer: -32601");
  is_int(id_of(m), 3, "with its id");

  ask_permission("\"0\"", "s", "reject_once");
  json_t *d = ev_wait("permission");
  ok(json_is_string(json_object_get(d, "id")) && !strcmp(str_at(d, "id"), "0"),
     "the id \"0\" stays a string");
  say("{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{"
      "\"requestId\":\"0\"}}");
  d = ev_wait("withdraw");
  is_str(str_at(d, "id"), "0", "$/cancel_request: the host withdraws it");
  acp_conn_respond_error(H.conn, json_array_get(H.perms, 0), -32800,
                         "cancelled");
  m = rx_next();
  is_str(str_at(m, "id"), "0", "respond_error: the id");
  is_int(error_code(m), -32800, "respond_error: the code");
  json_array_clear(H.perms);

  say("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"update\":{}}}");
  say("{\"jsonrpc\":\"2.0\",\"method\":\"something/else\",\"params\":{}}");
  sync_agent();
  is_size(ev_count("update"), 0,
          "an update without sessionId and an unknown notification: no event");
  is_size(rx_pending(), 0, "notifications are never answered");
  finish();
}

// The agent dies mid-turn with a permission request pending: the host is
// told (`gone`, exited) before the turn ends and the exit is reported;
// its late answer goes nowhere.
static void test_exit_mid_turn(void) {
  struct acp_conn *c = ready_session();
  if (!c)
    return;
  pending_permission(c, "41");
  acp_conn_prompt(c, "queued", NULL);
  size_t mark = json_array_size(H.ev);
  ok(kill(acp_conn_pid(c), SIGKILL) == 0, "the agent is killed");
  WAIT(H.closed > 0);
  is_str(ev_names(mark, NULL), "gone,turn_end,turn_end,agent_exit,closed",
         "gone first, then both turns end, the exit, closed");
  json_t *g = json_object_get(ev_at(mark), "data");
  ok(json_is_true(json_object_get(g, "exited")), "gone: exited");
  ok(!H.alive_in_gone, "not alive in gone");
  is_size(json_array_size(H.perms), 0, "the host answered it (cancelled)");
  json_t *d = json_object_get(ev_at(mark + 1), "data");
  is_str(str_at(d, "stopReason"), "error", "the running turn: error");
  is_str(str_at(d, "message"), "the agent was killed by signal 9",
         "it says how the agent died");
  d = json_object_get(ev_at(mark + 2), "data");
  is_str(str_at(d, "stopReason"), "error", "the queued prompt's turn ends too");
  d = json_object_get(ev_at(mark + 3), "data");
  is_int(json_integer_value(json_object_get(d, "signal")), SIGKILL,
         "agent_exit: signal");
  finish();
}

// An agent that exits on its own with a code.
static void test_exit_code(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  handshake("x", NULL);
  size_t mark = json_array_size(H.ev);
  close(H.to); // the relay's cat ends: the agent exits 0
  H.to = open("/dev/null", O_WRONLY | O_CLOEXEC);
  WAIT(H.closed > 0);
  is_str(ev_names(mark, NULL), "gone,agent_exit,closed", "gone, exit, closed");
  json_t *d = json_object_get(ev_at(ev_index("agent_exit", mark)), "data");
  is_int(json_integer_value(json_object_get(d, "code")), 0, "code 0");
  // The message names the log when there is one (a crash's last stderr
  // lines too: none here).
  char want[1200] = "the agent exited with code 0";
  const char *log = log_path();
  if (log && *log) {
    snprintf(want + strlen(want), sizeof(want) - strlen(want), "; log: %s",
             log);
    is_str(str_at(d, "log"), log, "agent_exit: log");
  }
  is_str(str_at(d, "message"), want, "message");
  is_size(json_array_size(json_object_get(d, "stderr")), 0,
          "agent_exit: no stderr lines");
  finish();
}

// Stopped mid-turn: `gone` runs while answers can still be sent, so the
// agent reads the cancelled outcome before its stdin closes.
static void test_stop_mid_turn(void) {
  struct acp_conn *c = ready_session();
  if (!c)
    return;
  pending_permission(c, "42");
  size_t mark = json_array_size(H.ev);
  acp_conn_stop(c, 100, "stopped with a prompt open");
  json_t *m = rx_next();
  is_int(id_of(m), 42, "the agent gets the answer to its request");
  is_str(str_at(m, "result.outcome.outcome"), "cancelled", "cancelled");
  WAIT(H.from_eof);
  ok(H.from_eof, "then its stdin closes");
  is_size(rx_pending(), 0, "nothing after the answer");
  WAIT(H.closed > 0);
  is_str(ev_names(mark, NULL), "gone,turn_end,agent_exit,closed",
         "gone, turn_end, agent_exit, closed");
  json_t *g = json_object_get(ev_at(mark), "data");
  ok(json_is_false(json_object_get(g, "exited")), "gone: not exited yet");
  json_t *d = json_object_get(ev_at(mark + 1), "data");
  is_str(str_at(d, "message"), "stopped with a prompt open",
         "the turn ends with the reason");
  finish();
}

// initialize refused, or another protocol version: an error, then the
// agent is stopped.
static void test_initialize_refused(void) {
  static const char *const results[] = {
      "\"result\":{\"protocolVersion\":2}",
      "\"result\":{}",
      "\"error\":{\"code\":-32603,\"message\":\"boom\"}",
  };
  static const char *const says[] = {"version 2", "(none given)", "boom"};
  for (size_t i = 0; i < 3; i++) {
    if (!start())
      return;
    acp_conn_new_session(H.conn, tmp, NULL);
    json_t *m = rx_next();
    say("{\"jsonrpc\":\"2.0\",\"id\":%lld,%s}", (long long)id_of(m),
        results[i]);
    json_t *d = ev_wait("error");
    ok(str_at(d, "message") && strstr(str_at(d, "message"), says[i]),
       "an error: %s", str_at(d, "message"));
    WAIT(H.closed > 0);
    is_size(ev_count("agent_ready"), 0, "never ready");
    is_size(ev_count("session_new"), 0, "no session");
    is_size(rx_pending(), 0, "session/new never sent");
    finish();
  }
}

// The asking posture of an agent that names itself acp-demo-agent: a
// session that starts in a mode that does not ask is set to `default`
// before the first prompt; a mode the agent switches to by itself is set
// back; a mode the person asked for is kept.
static void test_posture_modes(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  handshake("acp-demo-agent", NULL);
  acp_conn_prompt(c, "first", NULL);
  acp_conn_new_session(c, tmp, NULL);
  json_t *m = rx_next();
  is_str(method_of(m), "session/new", "session/new");
  ok(json_object_get(json_object_get(m, "params"), "_meta") == NULL,
     "no _meta for this agent");
  size_t mark = json_array_size(H.ev);
  answer(id_of(m), "{\"sessionId\":\"s\",\"modes\":{\"currentModeId\":\"yolo\","
                   "\"availableModes\":[{\"id\":\"default\",\"name\":\"Ask\"},{"
                   "\"id\":\"yolo\",\"name\":\"Yolo\"}]}}");
  m = rx_next();
  is_str(method_of(m), "session/set_mode", "the asking mode is set");
  is_str(str_at(m, "params.modeId"), "default", "to default");
  is_str(str_at(m, "params.sessionId"), "s", "on the session");
  sync_agent();
  is_size(rx_pending(), 0, "the prompt waits for the mode");
  is_str(ev_names(mark, NULL), "session_new", "no posture judged yet");
  answer(id_of(m), "{}");
  json_t *d = ev_wait("mode_set");
  is_str(str_at(d, "modeId"), "default", "mode_set default");
  is_str(str_at(d, "by"), "broker", "by the broker");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "asking", "posture: asking");
  is_str(str_at(d, "family"), "demo", "family demo (from agentInfo)");
  is_str(str_at(d, "mode"), "default", "mode default");
  ok(json_is_false(json_object_get(d, "reasserted")), "not reasserted");
  m = rx_next();
  is_str(method_of(m), "session/prompt", "then the prompt goes");
  json_int_t pid = id_of(m);

  // The agent switches itself to a mode that does not ask.
  mark = json_array_size(H.ev);
  say("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
      "\"current_mode_update\",\"currentModeId\":\"yolo\"}}}");
  m = rx_next();
  is_str(method_of(m), "session/set_mode", "set back");
  is_str(str_at(m, "params.modeId"), "default", "to default");
  sync_agent();
  is_str(ev_names(mark, NULL), "posture,update", "posture, then the update");
  d = json_object_get(ev_at(mark), "data");
  is_str(str_at(d, "posture"), "unverified", "unverified meanwhile");
  ok(json_is_true(json_object_get(d, "reasserted")), "reasserted");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "switched itself"),
     "the reason: %s", str_at(d, "reason"));
  H.evi = json_array_size(H.ev);
  // The agent refuses.
  answer_error(id_of(m), -32602, "no");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "unverified", "refused: unverified");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "refused"),
     "the reason: %s", str_at(d, "reason"));

  // The person asks for a mode: it is kept.
  is_int(acp_conn_set_mode(c, NULL, "yolo"), 0, "set_mode by the person");
  m = rx_next();
  is_str(str_at(m, "params.modeId"), "yolo", "sent as asked");
  answer(id_of(m), "{}");
  d = ev_wait("mode_set");
  is_str(str_at(d, "modeId"), "yolo", "mode_set yolo");
  ok(json_object_get(d, "by") == NULL, "not by the broker");
  mark = json_array_size(H.ev);
  say("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
      "\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":"
      "\"current_mode_update\",\"currentModeId\":\"yolo\"}}}");
  sync_agent();
  is_size(rx_pending(), 0, "a mode the person chose is not set back");
  is_str(ev_names(mark, NULL), "update", "and not reasserted");
  is_int(acp_conn_set_mode(c, "nope", "x"), -1, "set_mode: unknown session");

  // Back to an asking mode: the posture holds again.
  is_int(acp_conn_set_mode(c, "s", "default"), 0, "set_mode default");
  m = rx_next();
  answer(id_of(m), "{}");
  ev_wait("mode_set");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "asking", "asking again");
  answer(pid, "{\"stopReason\":\"end_turn\"}");
  ev_wait("turn_end");
  finish();
}

// A mode the asking mode cannot be set from, and no modes at all.
static void test_posture_unverified(void) {
  if (!start())
    return;
  handshake("acp-demo-agent", NULL);
  open_session(tmp, "s",
               "{\"currentModeId\":\"yolo\",\"availableModes\":[{\"id\":"
               "\"yolo\",\"name\":\"Yolo\"}]}");
  json_t *d = ev_wait("posture");
  is_str(str_at(d, "posture"), "unverified", "no asking mode offered");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "offers no"),
     "the reason: %s", str_at(d, "reason"));
  sync_agent();
  is_size(rx_pending(), 0, "no set_mode");
  finish();

  if (!start())
    return;
  handshake("codex-acp", NULL);
  open_session(tmp, "s", NULL);
  d = ev_wait("posture");
  is_str(str_at(d, "family"), "codex", "codex by agentInfo");
  is_str(str_at(d, "posture"), "unverified", "no modes reported");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "no session mode"),
     "the reason: %s", str_at(d, "reason"));
  finish();
}

// Claude: flag settings in session/new's _meta.
static void test_posture_claude_meta(void) {
  if (!start())
    return;
  handshake("@zed-industries/claude-agent-acp", NULL);
  acp_conn_new_session(H.conn, tmp, NULL);
  json_t *m = rx_next();
  is_str(method_of(m), "session/new", "session/new");
  const char *s = str_at(json_object_get(m, "params"),
                         "_meta.claudeCode.options.extraArgs.settings");
  ok(s && strstr(s, "\"ask\"") && strstr(s, "\"Bash\"") &&
         strstr(s, "\"Write\""),
     "_meta carries the ask rules: %s", s ? s : "(none)");
  finish();
}

// Spawn-time arguments: codex-acp gets its -c overrides, Gemini CLI its
// approval mode and an admin policy written to the state directory.
static void test_posture_spawn_args(void) {
  char link[400], args[2048];
  snprintf(link, sizeof(link), "%s/codex-acp", tmp);
  ok(symlink("/bin/sh", link) == 0, "a shell named codex-acp");
  if (!start_as(link))
    return;
  handshake("codex-acp", NULL);
  FILE *f = fopen(argsfile, "r");
  size_t n = f ? fread(args, 1, sizeof(args) - 1, f) : 0;
  args[n] = '\0';
  if (f)
    fclose(f);
  ok(strstr(args, "\n-c\napproval_policy=\"on-request\"\n-c\n"
                  "sandbox_mode=\"read-only\"\n") != NULL,
     "codex-acp: the -c overrides are appended");
  open_session(tmp, "s",
               "{\"currentModeId\":\"read-only\",\"availableModes\":[{\"id\":"
               "\"read-only\",\"name\":\"Read Only\"}]}");
  json_t *d = ev_wait("posture");
  is_str(str_at(d, "posture"), "asking", "codex in read-only: asking");
  finish();

  snprintf(link, sizeof(link), "%s/gemini", tmp);
  ok(symlink("/bin/sh", link) == 0, "a shell named gemini");
  if (!start_as(link))
    return;
  handshake("gemini-cli", NULL);
  f = fopen(argsfile, "r");
  n = f ? fread(args, 1, sizeof(args) - 1, f) : 0;
  args[n] = '\0';
  if (f)
    fclose(f);
  char policy[400], want[600];
  snprintf(policy, sizeof(policy), "%s/state/acp-broker/gemini-policy.toml",
           tmp);
  snprintf(want, sizeof(want),
           "\n--approval-mode\ndefault\n--admin-policy\n%s\n", policy);
  ok(strstr(args, want) != NULL, "gemini: approval mode and admin policy");
  struct stat st;
  ok(stat(policy, &st) == 0 && st.st_size > 0, "the policy file is written");
  open_session(tmp, "s",
               "{\"currentModeId\":\"default\",\"availableModes\":[{\"id\":"
               "\"default\",\"name\":\"Default\"}]}");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "asking", "gemini in default: asking");
  finish();

  // Gemini started under another name did not get its flags.
  if (!start())
    return;
  handshake("gemini-cli", NULL);
  open_session(tmp, "s",
               "{\"currentModeId\":\"default\",\"availableModes\":[{\"id\":"
               "\"default\",\"name\":\"Default\"}]}");
  d = ev_wait("posture");
  is_str(str_at(d, "posture"), "unverified",
         "gemini under another name: unverified");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "--approval-mode"),
     "the reason: %s", str_at(d, "reason"));
  finish();
}

// ACP_BROKER_TEST_NO_POSTURE: nothing is added, nothing set; every
// session is told it is unverified.
static void test_posture_off(void) {
  setenv("ACP_BROKER_TEST_NO_POSTURE", "1", 1);
  if (!start())
    return;
  unsetenv("ACP_BROKER_TEST_NO_POSTURE");
  handshake("@zed-industries/claude-agent-acp", NULL);
  acp_conn_new_session(H.conn, tmp, NULL);
  json_t *m = rx_next();
  ok(json_object_get(json_object_get(m, "params"), "_meta") == NULL,
     "no _meta");
  answer(
      id_of(m),
      "{\"sessionId\":\"s\",\"modes\":{\"currentModeId\":\"bypassPermissions\","
      "\"availableModes\":[{\"id\":\"default\",\"name\":\"Ask\"}]}}");
  json_t *d = ev_wait("posture");
  is_str(str_at(d, "posture"), "unverified", "unverified");
  ok(str_at(d, "reason") && strstr(str_at(d, "reason"), "switched off"),
     "the reason: %s", str_at(d, "reason"));
  sync_agent();
  is_size(rx_pending(), 0, "no set_mode");
  finish();
}

// session/cancel for the running turn; queued prompts are dropped.
static void test_cancel(void) {
  struct acp_conn *c = ready_session();
  if (!c)
    return;
  acp_conn_prompt(c, "one", NULL);
  acp_conn_prompt(c, "two", NULL);
  json_t *m = rx_next();
  json_int_t pid = id_of(m);
  size_t mark = json_array_size(H.ev);
  acp_conn_cancel(c);
  m = rx_next();
  is_str(method_of(m), "session/cancel", "session/cancel sent");
  ok(json_object_get(m, "id") == NULL, "as a notification");
  is_str(str_at(m, "params.sessionId"), "s", "for the session");
  is_str(ev_names(mark, NULL), "turn_end", "the queued prompt ends");
  is_str(str_at(json_object_get(ev_at(mark), "data"), "stopReason"),
         "cancelled", "cancelled");
  answer(pid, "{\"stopReason\":\"cancelled\"}");
  json_t *d = ev_wait("turn_end");
  d = ev_wait("turn_end");
  is_str(str_at(d, "stopReason"), "cancelled", "the running turn: cancelled");
  sync_agent();
  is_size(rx_pending(), 0, "the dropped prompt is never sent");
  finish();
}

// Content blocks go after the text, and only where the agent's
// promptCapabilities offer them; otherwise the turn ends and nothing is sent.
static void test_prompt_blocks(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  json_t *m = rx_next();
  say("{\"jsonrpc\":\"2.0\",\"id\":%lld,\"result\":{\"protocolVersion\":1,"
      "\"agentInfo\":{\"name\":\"x\",\"version\":\"1.0\"},"
      "\"agentCapabilities\":{\"promptCapabilities\":{\"embeddedContext\":"
      "true}}}}",
      (long long)id_of(m));
  ok(ev_wait("agent_ready") != NULL, "agent_ready");
  open_session(tmp, "s", NULL);
  json_t *blocks = json_pack("[{s:s,s:{s:s,s:s}}]", "type", "resource",
                             "resource", "uri", "file:///a", "text", "A");
  is_int(acp_conn_prompt_blocks(c, "look", NULL, blocks), 0, "queued");
  m = rx_next();
  is_str(method_of(m), "session/prompt", "sent");
  json_t *p = json_object_get(json_object_get(m, "params"), "prompt");
  is_size(json_array_size(p), 2, "the text and the block");
  is_str(str_at(json_array_get(p, 0), "text"), "look", "the text first");
  is_str(str_at(json_array_get(p, 1), "resource.text"), "A",
         "then the embedded resource");
  json_t *d = ev_wait("turn_start");
  is_int(json_integer_value(json_object_get(d, "context")), 1,
         "turn_start counts the blocks");
  answer(id_of(m), "{\"stopReason\":\"end_turn\"}");
  ok(ev_wait("turn_end") != NULL, "the turn ends");

  blocks = json_pack("[{s:s,s:s,s:s}]", "type", "image", "data", "AAAA",
                     "mimeType", "image/png");
  is_int(acp_conn_prompt_blocks(c, "see", NULL, blocks), 0, "queued");
  d = ev_wait("turn_end");
  is_str(str_at(d, "stopReason"), "error",
         "an image not offered ends the turn");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "offer image"),
     "saying why: %s", str_at(d, "message"));
  sync_agent();
  is_size(rx_pending(), 0, "nothing is sent");
  is_int((intmax_t)acp_conn_turn(c, "s"), 1, "no turn started");
  finish();
}

// Logins: a session refused with -32000 waits for authenticate.
static void test_auth(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  handshake("x", ",\"authMethods\":[{\"id\":\"key\",\"name\":\"Key\"}]");
  acp_conn_new_session(c, tmp, NULL);
  json_t *m = rx_next();
  answer_error(id_of(m), -32000, "auth required");
  json_t *d = ev_wait("auth_required");
  is_str(str_at(d, "cwd"), tmp, "auth_required for the cwd");
  is_int(acp_conn_authenticate(c, "key"), 0, "authenticate");
  m = rx_next();
  is_str(method_of(m), "authenticate", "authenticate sent");
  is_str(str_at(m, "params.methodId"), "key", "with the method");
  answer(id_of(m), "{}");
  d = ev_wait("authenticated");
  is_str(str_at(d, "methodId"), "key", "authenticated");
  m = rx_next();
  is_str(method_of(m), "session/new", "the session is asked again");
  finish();
}

// session/load: resumed when the agent can; a new session when it cannot.
static void test_load(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  handshake("x", NULL); // no loadSession
  acp_conn_new_session(c, tmp, "old");
  json_t *d = ev_wait("error");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "cannot resume"),
     "cannot resume: %s", str_at(d, "message"));
  json_t *m = rx_next();
  is_str(method_of(m), "session/new", "a new session instead");
  finish();

  if (!(c = start()))
    return;
  json_t *init = rx_next();
  answer(
      id_of(init),
      "{\"protocolVersion\":1,\"agentCapabilities\":{\"loadSession\":true}}");
  ev_wait("agent_ready");
  acp_conn_new_session(c, tmp, "old");
  d = ev_wait("session_loading");
  is_str(str_at(d, "session"), "old", "session_loading");
  m = rx_next();
  is_str(method_of(m), "session/load", "session/load");
  is_str(str_at(m, "params.sessionId"), "old", "of the session");
  answer(id_of(m), "null");
  d = ev_wait("session_new");
  is_str(str_at(d, "session"), "old", "session_new: the old id");
  ok(json_is_true(json_object_get(d, "resumed")), "resumed");
  finish();
}

// A session in a cwd that has one is reused (session_new says "reused"),
// unless a fresh one is asked for (a new conversation); prompts then go to
// the newest.
static void test_fresh_session(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  handshake("x", NULL);
  open_session(tmp, "s1", NULL);
  acp_conn_new_session(c, tmp, NULL);
  json_t *d = ev_wait("session_new");
  is_str(str_at(d, "session"), "s1", "the session in cwd is reused");
  ok(json_is_true(json_object_get(d, "reused")), "reused: true");
  sync_agent();
  is_size(rx_pending(), 0, "nothing asked of the agent");
  acp_conn_open_session(c, tmp, NULL, true);
  json_t *m = rx_next();
  is_str(method_of(m), "session/new", "fresh: session/new sent");
  answer(id_of(m), "{\"sessionId\":\"s2\"}");
  d = ev_wait("session_new");
  is_str(str_at(d, "session"), "s2", "a new session");
  ok(json_object_get(d, "reused") == NULL, "not reused");
  is_str(acp_conn_current_session(c), "s2", "the newest gets prompts");
  acp_conn_new_session(c, tmp, "s1");
  d = ev_wait("session_new");
  is_str(str_at(d, "session"), "s1", "the first one again, by its id");
  is_str(acp_conn_current_session(c), "s1", "it is the newest again");
  finish();
}

static void test_spawn_failure(void) {
  const char *argv[] = {"/nonexistent/agent", NULL};
  struct proc_spawn spec = {argv, NULL, NULL, NULL};
  char err[256] = "";
  memset(&H, 0, sizeof(H));
  H.ev = json_array();
  struct acp_conn *c =
      acp_conn_start(&loop, "none", &spec, &host, NULL, err, sizeof(err));
  ok(c == NULL, "a missing program: no connection");
  ok(strstr(err, "cannot start /nonexistent/agent") != NULL, "reason: %s", err);
  uv_run(&loop, UV_RUN_NOWAIT);
  is_size(json_array_size(H.ev), 0, "and no callback");
  json_decref(H.ev);
}

// Bounds: a line longer than 32 MiB is discarded as it streams (and
// logged), the connection goes on; at most 32 prompts wait; at most 1024
// of the connection's requests wait for an answer.
static void test_bounds(void) {
  struct acp_conn *c =
      start_with("sh", "head -c 33554433 /dev/zero | tr '\\0' x; echo; ");
  if (!c)
    return;
  handshake("x", NULL);
  ok(log_has("fake: discarded a 33554433-byte line (limit 33554432 bytes)"),
     "a 32 MiB + 1 line is discarded and logged");
  int queued = 0;
  while (queued < 100 && acp_conn_prompt(c, "p", NULL) == 0)
    queued++;
  is_int(queued, 32, "32 prompts wait for a session, no more");
  int sent = 0;
  open_session(tmp, "s", NULL);
  acp_conn_cancel(c); // the queued prompts end; one turn runs
  while (sent < 2000 && acp_conn_set_mode(c, "s", "m") == 0)
    sent++;
  // With the running prompt, 1024 requests wait (initialize and
  // session/new were answered).
  is_int(sent, 1023, "1024 requests wait for answers, no more");
  WAIT(json_array_size(H.rx) >= (size_t)(sent + 4));
  // initialize, session/new, session/prompt, session/cancel, set_mode...
  is_size(json_array_size(H.rx), (size_t)sent + 4,
          "all of them reached the agent");
  finish();
}

// What goes wrong while sessions open: an error answer (queued prompts
// end), a second request for a cwd already opening (not sent twice), a
// session/load refused (a new session instead), a login refused, a mode
// refused.
static void test_session_errors(void) {
  struct acp_conn *c = start();
  if (!c)
    return;
  json_t *m = rx_next();
  answer(id_of(m), "{\"protocolVersion\":1,\"agentCapabilities\":{"
                   "\"loadSession\":true},\"authMethods\":[{\"id\":"
                   "\"key\",\"name\":\"Key\"}]}");
  ev_wait("agent_ready");
  acp_conn_new_session(c, tmp, NULL);
  acp_conn_new_session(c, tmp, NULL);
  acp_conn_prompt(c, "waits", NULL);
  m = rx_next();
  is_str(method_of(m), "session/new", "session/new");
  sync_agent();
  is_size(rx_pending(), 0, "asked once for a cwd already opening");
  answer_error(id_of(m), -32603, "disk on fire");
  json_t *d = ev_wait("error");
  ok(str_at(d, "message") &&
         strstr(str_at(d, "message"), "could not start a session") &&
         strstr(str_at(d, "message"), "disk on fire"),
     "error: %s", str_at(d, "message"));
  d = ev_wait("turn_end");
  is_str(str_at(d, "message"), "no session", "the queued prompt ends");
  is_int((intmax_t)acp_conn_turn(c, "nope"), 0,
         "no turn in an unknown session");

  acp_conn_new_session(c, tmp, "old");
  ev_wait("session_loading");
  m = rx_next();
  is_str(method_of(m), "session/load", "session/load");
  answer_error(id_of(m), -32602, "no such session");
  d = ev_wait("error");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "could not resume"),
     "error: %s", str_at(d, "message"));
  m = rx_next();
  is_str(method_of(m), "session/new", "a new session instead");
  answer_error(id_of(m), -32000, "log in");
  ev_wait("auth_required");
  is_int(acp_conn_authenticate(c, "key"), 0, "authenticate");
  m = rx_next();
  answer_error(id_of(m), -32000, "wrong key");
  d = ev_wait("error");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "login with key"),
     "error: %s", str_at(d, "message"));
  sync_agent();
  is_size(rx_pending(), 0, "the session is not asked again");

  acp_conn_new_session(c, tmp, NULL);
  m = rx_next();
  answer(id_of(m), "{\"sessionId\":\"s\"}");
  ev_wait("session_new");
  is_int(acp_conn_set_mode(c, NULL, "fast"), 0, "set_mode");
  m = rx_next();
  answer_error(id_of(m), -32602, "unknown mode");
  d = ev_wait("error");
  ok(str_at(d, "message") && strstr(str_at(d, "message"), "refused mode fast"),
     "error: %s", str_at(d, "message"));
  finish();
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (!uvtest_init("acp"))
    return 2;
  char state[400];
  snprintf(state, sizeof(state), "%s/state", tmp);
  mkdir(state, 0700);
  setenv("XDG_STATE_HOME", state, 1);
  unsetenv("ACP_BROKER_TEST_NO_POSTURE");

  test_flow();
  test_framing();
  test_malformed();
  test_agent_requests();
  test_exit_mid_turn();
  test_exit_code();
  test_stop_mid_turn();
  test_initialize_refused();
  test_posture_modes();
  test_posture_unverified();
  test_posture_claude_meta();
  test_posture_spawn_args();
  test_posture_off();
  test_cancel();
  test_prompt_blocks();
  test_auth();
  test_load();
  test_fresh_session();
  test_spawn_failure();
  test_bounds();
  test_session_errors();

  uvtest_fini();
  // The usual permission requests above came through the flat view, and
  // none it took was one the tree reads otherwise.
  ok(view_calls > 0, "%zu permission requests read into a flat view",
     view_calls);
  is_size(view_bad, 0, "each as the tree reads it");
  return done_testing();
}
