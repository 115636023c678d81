// Newline framing (linebuf) and JSON-RPC classification (jsonrpc).
//
// Input: byte 0 picks where the payload is cut into three feeds, byte 1 the
// longest accepted line; the rest is the agent's stdout. Properties:
//  * the lines and overlong reports are exactly those of a simple reference
//    model of the whole payload, wherever it is cut; no line holds a '\n' or
//    is longer than max; linebuf_pending is the unfinished tail;
//  * jsonrpc_parse returns 0 exactly for the valid kinds, with the fields
//    each kind promises;
//  * a reply built for a request (or for an invalid request with a usable
//    id) is one line ending in exactly one '\n' that parses back as a
//    response with an equal id; a request or notification rebuilt from a
//    parsed one parses back with the same method and params.

#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "acp/jsonrpc.h"
#include "io/linebuf.h"

struct event {
  bool overlong;
  size_t off, len; // line: bytes [off, off+len) of the payload; overlong: len
};

struct run {
  const char *payload;
  const struct event *want;
  size_t nwant, got, max;
};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

// A reply text: one line, its length right, exactly one trailing '\n'.
static void check_text(const char *text, size_t len, const char *what) {
  FUZZ_CHECK(text != NULL, "%s: no text", what);
  FUZZ_CHECK(len > 0 && strlen(text) == len, "%s: len %zu", what, len);
  FUZZ_CHECK(text[len - 1] == '\n', "%s: no trailing newline", what);
  FUZZ_CHECK(memchr(text, '\n', len - 1) == NULL && text[len - 1] == '\n',
             "%s: more than one newline: %s", what, text);
}

// The reply to a request with this id parses back as a response to it.
static void check_reply(const json_t *id, const char *method) {
  size_t len;
  char *text = jsonrpc_result(id, json_object(), &len);
  check_text(text, len, "jsonrpc_result");
  struct jsonrpc_msg back;
  int rc = jsonrpc_parse(text, len - 1, &back, NULL, 0);
  FUZZ_CHECK(rc == 0 && back.kind == JSONRPC_RESPONSE, "result reply: %s",
             text);
  FUZZ_CHECK(jsonrpc_id_equal(id, back.id) && back.result && !back.error,
             "result reply id/result: %s", text);
  jsonrpc_msg_free(&back);
  free(text);

  text = jsonrpc_error(id, JSONRPC_METHOD_NOT_FOUND, method, &len);
  check_text(text, len, "jsonrpc_error");
  rc = jsonrpc_parse(text, len - 1, &back, NULL, 0);
  FUZZ_CHECK(rc == 0 && back.kind == JSONRPC_RESPONSE, "error reply: %s", text);
  FUZZ_CHECK(jsonrpc_id_equal(id, back.id) && back.error && !back.result,
             "error reply id/error: %s", text);
  FUZZ_CHECK(json_integer_value(json_object_get(back.error, "code")) ==
                 JSONRPC_METHOD_NOT_FOUND,
             "error reply code: %s", text);
  jsonrpc_msg_free(&back);
  free(text);
}

// A request or notification rebuilt from msg parses back the same.
static void check_rebuild(const struct jsonrpc_msg *msg) {
  size_t len;
  json_t *params = msg->params ? json_incref(msg->params) : NULL;
  bool req = msg->kind == JSONRPC_REQUEST;
  char *text = req ? jsonrpc_request(-7, msg->method, params, &len)
                   : jsonrpc_notification(msg->method, params, &len);
  check_text(text, len, req ? "jsonrpc_request" : "jsonrpc_notification");
  struct jsonrpc_msg back;
  int rc = jsonrpc_parse(text, len - 1, &back, NULL, 0);
  FUZZ_CHECK(rc == 0 && back.kind == msg->kind, "rebuilt: %s", text);
  FUZZ_CHECK(strcmp(back.method, msg->method) == 0, "rebuilt method: %s",
             text);
  FUZZ_CHECK(req ? jsonrpc_id_is_int(back.id, -7) : back.id == NULL,
             "rebuilt id: %s", text);
  FUZZ_CHECK(!msg->params == !back.params &&
                 (!msg->params || json_equal(msg->params, back.params)),
             "rebuilt params: %s", text);
  jsonrpc_msg_free(&back);
  free(text);
}

static void check_message(const char *line, size_t len) {
  struct jsonrpc_msg msg;
  char err[256];
  int rc = jsonrpc_parse(line, len, &msg, err, sizeof(err));
  FUZZ_CHECK(rc == (msg.kind == JSONRPC_INVALID ? -1 : 0), "rc %d kind %d", rc,
             (int)msg.kind);
  switch (msg.kind) {
  case JSONRPC_INVALID:
    FUZZ_CHECK(!msg.method && !msg.params && !msg.result && !msg.error,
               "invalid message with fields");
    FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL, "err not terminated");
    if (msg.id) { // a request with a usable id: answered -32600
      FUZZ_CHECK(json_is_integer(msg.id) || json_is_string(msg.id), "bad id");
      check_reply(msg.id, err);
    }
    break;
  case JSONRPC_REQUEST:
  case JSONRPC_NOTIFICATION:
    FUZZ_CHECK(msg.root && msg.method, "call without method");
    FUZZ_CHECK(msg.kind == JSONRPC_REQUEST ? msg.id != NULL : msg.id == NULL,
               "call id");
    FUZZ_CHECK(!msg.params || json_is_object(msg.params) ||
                   json_is_array(msg.params),
               "params type");
    FUZZ_CHECK(!msg.result && !msg.error, "call with result");
    if (msg.id) {
      FUZZ_CHECK(jsonrpc_id_equal(msg.id, msg.id), "id not equal to itself");
      check_reply(msg.id, msg.method);
    }
    check_rebuild(&msg);
    break;
  case JSONRPC_RESPONSE:
    FUZZ_CHECK(msg.id && (json_is_integer(msg.id) || json_is_string(msg.id)),
               "response id");
    FUZZ_CHECK(!msg.result != !msg.error, "response needs result xor error");
    FUZZ_CHECK(!msg.error || json_is_integer(json_object_get(msg.error, "code")),
               "error code");
    FUZZ_CHECK(!msg.method, "response with method");
    break;
  }
  jsonrpc_msg_free(&msg);
  FUZZ_CHECK(msg.root == NULL && msg.kind == JSONRPC_INVALID, "not cleared");
}

static void on_line(void *ud, const char *line, size_t len) {
  struct run *r = ud;
  FUZZ_CHECK(r->got < r->nwant, "extra line (%zu bytes)", len);
  const struct event *e = &r->want[r->got++];
  FUZZ_CHECK(!e->overlong, "line of %zu bytes where an overlong line of %zu "
                           "was expected", len, e->len);
  FUZZ_CHECK(len == e->len && memcmp(line, r->payload + e->off, len) == 0,
             "line %zu differs from the model (%zu vs %zu bytes)", r->got, len,
             e->len);
  FUZZ_CHECK(len <= r->max && memchr(line, '\n', len) == NULL,
             "line too long or with a newline");
  check_message(line, len);
}

static void on_overlong(void *ud, size_t len) {
  struct run *r = ud;
  FUZZ_CHECK(r->got < r->nwant, "extra overlong report (%zu)", len);
  const struct event *e = &r->want[r->got++];
  FUZZ_CHECK(e->overlong && e->len == len,
             "overlong %zu, model: %s %zu", len, e->overlong ? "overlong" : "line",
             e->len);
  FUZZ_CHECK(len > r->max, "overlong report of %zu <= max %zu", len, r->max);
}

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
      return false;
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  unsigned cut = data[0], sel = data[1];
  const char *p = (const char *)data + 2;
  size_t n = size - 2;
  size_t max = sel % 4 == 0 ? (size_t)1 << 20 : sel >> 2;

  // The model: every '\n' ends a line; one '\r' before it is dropped; too
  // long is reported with its length; blank lines are not reported.
  struct event *want = calloc(n + 1, sizeof(*want));
  size_t nwant = 0, start = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] != '\n')
      continue;
    size_t len = i - start;
    if (len && p[i - 1] == '\r')
      len--;
    if (len > max)
      want[nwant++] = (struct event){.overlong = true, .len = len};
    else if (!blank(p + start, len))
      want[nwant++] = (struct event){.off = start, .len = len};
    start = i + 1;
  }

  size_t a = cut * n / 255, b = a + ((cut * 37u) & 255u) * (n - a) / 255;
  struct run r = {.payload = p, .want = want, .nwant = nwant, .max = max};
  struct linebuf lb;
  linebuf_init(&lb, max);
  linebuf_feed(&lb, p, a, on_line, on_overlong, &r);
  linebuf_feed(&lb, p + a, b - a, on_line, on_overlong, &r);
  linebuf_feed(&lb, p + b, n - b, on_line, on_overlong, &r);
  FUZZ_CHECK(r.got == nwant, "%zu events, model %zu", r.got, nwant);
  FUZZ_CHECK(linebuf_pending(&lb) == n - start, "pending %zu, tail %zu",
             linebuf_pending(&lb), n - start);
  linebuf_free(&lb);
  free(want);
  return 0;
}
