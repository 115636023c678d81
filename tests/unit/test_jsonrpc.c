// jsonrpc: table-driven classification, exact id round-trips through the
// builders, one "\n" per message, and ownership of stolen arguments.

#include "acp/jsonrpc.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

struct pcase {
  const char *json;
  size_t len; // 0: strlen(json); set for inputs holding NUL bytes
  enum jsonrpc_kind kind;
  const char *id;     // msg->id as compact JSON, or NULL for none
  const char *method; // msg->method, or NULL
};

#define REQ JSONRPC_REQUEST
#define NOTE JSONRPC_NOTIFICATION
#define RESP JSONRPC_RESPONSE
#define BAD JSONRPC_INVALID
#define V "\"jsonrpc\":\"2.0\","

static const struct pcase cases[] = {
    // Requests: every id keeps its JSON type and full int64 value.
    {"{" V "\"id\":0,\"method\":\"m\",\"params\":{}}", 0, REQ, "0", "m"},
    {"{" V "\"id\":\"0\",\"method\":\"m\"}", 0, REQ, "\"0\"", "m"},
    {"{" V "\"id\":-1,\"method\":\"m\",\"params\":[1]}", 0, REQ, "-1", "m"},
    {"{" V "\"id\":9223372036854775807,\"method\":\"m\"}", 0, REQ,
     "9223372036854775807", "m"},
    {"{" V "\"id\":-9223372036854775808,\"method\":\"m\"}", 0, REQ,
     "-9223372036854775808", "m"},
    {"{" V "\"id\":\"6f1c2a8e-3b7d-4c1e-9f2a-0d5e8b7c6a41\",\"method\":\"x\"}",
     0, REQ, "\"6f1c2a8e-3b7d-4c1e-9f2a-0d5e8b7c6a41\"", "x"},
    {"{\"id\":2,\"method\":\"no/version\"}", 0, REQ, "2", "no/version"},
    // Notifications.
    {"{" V "\"method\":\"session/update\",\"params\":{\"a\":1}}", 0, NOTE, NULL,
     "session/update"},
    // Responses.
    {"{" V "\"id\":3,\"result\":{\"x\":1}}", 0, RESP, "3", NULL},
    {"{" V "\"id\":\"a\",\"result\":null}", 0, RESP, "\"a\"", NULL},
    {"{" V "\"id\":4,\"error\":{\"code\":-32601,\"message\":\"no\"}}", 0, RESP,
     "4", NULL},
    // Invalid: not objects (a batch is an array).
    {"[{" V "\"id\":1,\"method\":\"m\"}]", 0, BAD, NULL, NULL},
    {"42", 0, BAD, NULL, NULL},
    {"\"str\"", 0, BAD, NULL, NULL},
    {"null", 0, BAD, NULL, NULL},
    // Invalid envelopes; a request's usable id is still reported.
    {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"m\"}", 0, BAD, "1", NULL},
    {"{\"jsonrpc\":2.0,\"id\":1,\"method\":\"m\"}", 0, BAD, "1", NULL},
    {"{" V "\"id\":1,\"method\":5}", 0, BAD, "1", NULL},
    {"{" V "\"id\":7,\"method\":\"m\",\"params\":\"str\"}", 0, BAD, "7", NULL},
    {"{" V "\"method\":\"m\",\"params\":5}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1.5,\"method\":\"m\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":true,\"method\":\"m\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":{},\"method\":\"m\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":[],\"method\":\"m\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":null,\"method\":\"m\"}", 0, BAD, NULL, NULL},
    // Invalid responses: never answered, so no id either.
    {"{" V "\"id\":1,\"result\":1,\"error\":{\"code\":1}}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":null,\"result\":1}", 0, BAD, NULL, NULL},
    {"{" V "\"result\":1}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"error\":{\"message\":\"x\"}}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"error\":{\"code\":\"1\"}}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"error\":{\"code\":1.0}}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"error\":\"bad\"}", 0, BAD, NULL, NULL},
    // Invalid JSON text.
    {"{" V "\"id\":1,\"method\":\"m\xff\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"method\":\"\xc3\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"method\":\"m\"", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"method\":\"m\"} x", 0, BAD, NULL, NULL},
    {"{}{}", 0, BAD, NULL, NULL},
    {"", 0, BAD, NULL, NULL},
    {"{" V "\"id\":9223372036854775808,\"method\":\"m\"}", 0, BAD, NULL, NULL},
    {"{" V "\"id\":1,\"method\":\"a\\u0000b\"}", 0, BAD, NULL, NULL},
    {"{\"id\":1,\"method\":\"m\0x\"}", 23, BAD, NULL, NULL},
    {"{\"id\":1,\"method\":\"m\"}\0", 22, BAD, NULL, NULL},
};

static const char *kind_name(enum jsonrpc_kind k) {
  static const char *const names[] = {"invalid", "request", "notification",
                                      "response"};
  return names[k];
}

static void test_case(size_t i, const struct pcase *c) {
  size_t len = c->len ? c->len : strlen(c->json);
  struct jsonrpc_msg msg;
  char err[160] = "";
  int rc = jsonrpc_parse(c->json, len, &msg, err, sizeof(err));
  char *id = msg.id ? json_dumps(msg.id, JSON_ENCODE_ANY) : NULL;
  bool good = msg.kind == c->kind && rc == (c->kind == BAD ? -1 : 0);
  good = good && (c->kind != BAD) == (err[0] == '\0');
  good = good && ((!id && !c->id) || (id && c->id && !strcmp(id, c->id)));
  good = good && ((!msg.method && !c->method) ||
                  (msg.method && c->method && !strcmp(msg.method, c->method)));
  if (c->kind == BAD)
    good = good && !msg.params && !msg.result && !msg.error;
  if (c->kind == RESP)
    good = good && !msg.result != !msg.error;
  ok(good, "case %zu is %s: %.50s", i, kind_name(c->kind), c->json);
  if (!good)
    printf("#   got %s, rc %d, id %s, err \"%s\"\n", kind_name(msg.kind), rc,
           id ? id : "(none)", err);
  free(id);
  jsonrpc_msg_free(&msg);
}

static void test_parse(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    test_case(i, &cases[i]);

  struct jsonrpc_msg msg;
  const char *s = "{\"id\":1,\"method\":\"m\",\"params\":{\"k\":[true]}}";
  is_int(jsonrpc_parse(s, strlen(s), &msg, NULL, 0), 0, "err may be NULL");
  ok(json_is_object(msg.params) &&
         json_is_array(json_object_get(msg.params, "k")),
     "params points into the message");
  jsonrpc_msg_free(&msg);
  ok(!msg.root && !msg.id && msg.kind == BAD, "msg_free clears the message");
  jsonrpc_msg_free(&msg); // and is then safe to call again

  is_int(jsonrpc_parse("{", 1, &msg, NULL, 0), -1, "bad JSON, err NULL");
  ok(!msg.root, "no root when the line does not parse");
  jsonrpc_msg_free(&msg);
}

// Checks that out is exactly want and one line, and that it parses back.
static void check_built(char *out, const size_t *lenp, const char *want,
                        const char *desc) {
  size_t len = *lenp; // read after the builder ran, not as an argument
  is_str(out, want, desc);
  is_size(len, out ? strlen(out) : 0, "length includes the newline");
  const char *nl = out ? strchr(out, '\n') : NULL;
  ok(nl && nl == out + len - 1, "exactly one newline, at the end");
  json_t *back = out ? json_loadb(out, len, 0, NULL) : NULL;
  ok(json_is_object(back), "parses back as one JSON object");
  json_decref(back);
  free(out);
}

static json_t *parse_id(const char *line) {
  struct jsonrpc_msg msg;
  jsonrpc_parse(line, strlen(line), &msg, NULL, 0);
  json_t *id = json_incref(msg.id);
  jsonrpc_msg_free(&msg);
  return id;
}

// Echoes the id of line in a result and checks the reply carries an equal id.
static void round_trip(const char *line) {
  json_t *id = parse_id(line);
  size_t len;
  char *out = jsonrpc_result(id, json_true(), &len);
  struct jsonrpc_msg msg;
  int rc = jsonrpc_parse(out, len, &msg, NULL, 0);
  ok(rc == 0 && msg.kind == RESP && jsonrpc_id_equal(msg.id, id),
     "id round-trips exactly: %s", line);
  jsonrpc_msg_free(&msg);
  free(out);
  json_decref(id);
}

// The fixed-format answer to session/request_permission is byte for byte
// what the tree gives, for this id and option id (NULL: cancelled).
static void same_outcome(const json_t *id, const char *option_id,
                         const char *what) {
  json_t *result =
      option_id ? json_pack("{s:{s:s,s:s}}", "outcome", "outcome", "selected",
                            "optionId", option_id)
                : json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled");
  size_t want_len = 0, got_len = 0;
  char *want = jsonrpc_result(id, result, &want_len);
  char *got = jsonrpc_outcome(id, option_id, &got_len);
  ok(want && got && want_len == got_len && !memcmp(want, got, got_len) &&
         got[got_len] == '\0',
     "fixed-format outcome = tree (%s): %s", what, got ? got : "(null)");
  free(want);
  free(got);
}

static void test_outcome(void) {
  static const char *const ids[] = {
      "{\"id\":0}",
      "{\"id\":7}",
      "{\"id\":-1}",
      "{\"id\":10}",
      "{\"id\":1234567890123}",
      "{\"id\":-9223372036854775808}",
      "{\"id\":9223372036854775807}",
      "{\"id\":\"0\"}",
      "{\"id\":\"a\\\"b\\\\c\\n\\u0001\\u001f\\u007f\\u00e9\\u2028/\"}",
      "{\"id\":1.5}",
      "{\"id\":null}",
  };
  for (size_t i = 0; i < sizeof(ids) / sizeof(*ids); i++) {
    json_t *root = json_loads(ids[i], 0, NULL);
    ok(root != NULL, "parsed %s", ids[i]);
    const json_t *id = json_object_get(root, "id");
    same_outcome(id, "allow_once", ids[i]);
    same_outcome(id, NULL, ids[i]);
    json_decref(root);
  }
  same_outcome(NULL, "x", "no id");
  // Every byte an option id can hold, one at a time.
  char opt[8];
  for (int c = 1; c < 256; c++) {
    if (c >= 0x80)
      snprintf(opt, sizeof(opt), "o%c%c", 0xc0 | (c >> 6), 0x80 | (c & 63));
    else
      snprintf(opt, sizeof(opt), "o%c", c);
    char what[24];
    snprintf(what, sizeof(what), "option byte %d", c);
    same_outcome(NULL, opt, what);
  }
  same_outcome(NULL, "", "empty option id");
  static char big[5000];
  memset(big, '"', sizeof(big) - 1);
  same_outcome(NULL, big, "a long option id of quotes");
}

static void test_builders(void) {
  round_trip("{\"id\":\"0\",\"method\":\"m\"}");
  round_trip("{\"id\":0,\"method\":\"m\"}");
  round_trip("{\"id\":9223372036854775807,\"method\":\"m\"}");
  round_trip("{\"id\":-9223372036854775808,\"method\":\"m\"}");
  round_trip("{\"id\":\"a\\nb\\u00e9\",\"method\":\"m\"}");

  size_t len;
  json_t *id = parse_id("{\"id\":\"0\",\"result\":1}");
  check_built(jsonrpc_result(id, json_object(), &len), &len,
              "{\"jsonrpc\":\"2.0\",\"id\":\"0\",\"result\":{}}\n",
              "string id \"0\" stays a string");
  json_decref(id);

  id = parse_id("{\"id\":9223372036854775807,\"method\":\"m\"}");
  check_built(jsonrpc_error(id, JSONRPC_INVALID_REQUEST, "bad\nthing", &len),
              &len,
              "{\"jsonrpc\":\"2.0\",\"id\":9223372036854775807,\"error\":"
              "{\"code\":-32600,\"message\":\"bad\\nthing\"}}\n",
              "INT64_MAX id is exact; newline in message escaped");
  json_decref(id);

  check_built(jsonrpc_error(NULL, JSONRPC_PARSE_ERROR, "Parse error", &len),
              &len,
              "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":"
              "{\"code\":-32700,\"message\":\"Parse error\"}}\n",
              "NULL id becomes null");
  check_built(jsonrpc_result(NULL, NULL, &len), &len,
              "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":null}\n",
              "NULL result becomes null");
  check_built(jsonrpc_request(INT64_MIN, "session/prompt",
                              json_pack("{s:s}", "text", "a\nb\r\n"), &len),
              &len,
              "{\"jsonrpc\":\"2.0\",\"id\":-9223372036854775808,\"method\":"
              "\"session/prompt\",\"params\":{\"text\":\"a\\nb\\r\\n\"}}\n",
              "request with INT64_MIN id and a newline in params");
  check_built(jsonrpc_notification("session/cancel", NULL, &len), &len,
              "{\"jsonrpc\":\"2.0\",\"method\":\"session/cancel\"}\n",
              "notification without params");
  check_built(jsonrpc_error(NULL, 1, "\xff", &len), &len,
              "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,"
              "\"message\":\"(message is not valid UTF-8)\"}}\n",
              "an error reply survives a message that is not UTF-8");
}

// Stolen arguments are released on success and on failure alike.
static void test_ownership(void) {
  size_t len = 99;
  json_t *params = json_object();
  json_incref(params);
  char *out = jsonrpc_request(1, "m", params, &len);
  is_size(params->refcount, 1, "request released its params reference");
  free(out);

  json_incref(params);
  out = jsonrpc_request(1, "\xff", params, &len);
  ok(!out, "a method that is not UTF-8 fails");
  is_size(len, 0, "and stores length 0");
  is_size(params->refcount, 1, "params still released on failure");

  json_incref(params);
  out = jsonrpc_notification(NULL, params, &len);
  ok(!out, "a NULL method fails");
  is_size(params->refcount, 1, "notification released params on failure");

  json_incref(params);
  json_t *id = json_string("x");
  out = jsonrpc_result(id, params, &len);
  is_size(params->refcount, 1, "result released its reference");
  is_size(id->refcount, 1, "the borrowed id was not kept");
  free(out);
  json_decref(params);
  json_decref(id);
}

struct eq_case {
  const char *a, *b; // ids as JSON text, or NULL for a NULL pointer
  bool equal;
};

static json_t *load(const char *s) {
  return s ? json_loads(s, JSON_DECODE_ANY, NULL) : NULL;
}

static void test_id_equal(void) {
  static const struct eq_case eq[] = {
      {"0", "0", true},
      {"\"0\"", "\"0\"", true},
      {"0", "\"0\"", false},
      {"\"0\"", "0", false},
      {"1", "2", false},
      {"\"a\"", "\"b\"", false},
      {"\"a\"", "\"ab\"", false},
      {"9223372036854775807", "9223372036854775807", true},
      {"9223372036854775807", "-9223372036854775808", false},
      {"-9223372036854775808", "-9223372036854775808", true},
      {"0", "0.0", false},
      {"0", "false", false},
      {"null", "null", true},
      {"1.5", "1.5", true},
      {"true", "false", false},
      {"\"\"", "null", false},
      {"0", NULL, false},
      {NULL, NULL, false},
  };
  for (size_t i = 0; i < sizeof(eq) / sizeof(eq[0]); i++) {
    json_t *a = load(eq[i].a), *b = load(eq[i].b);
    ok(jsonrpc_id_equal(a, b) == eq[i].equal, "id_equal(%s, %s) is %s",
       eq[i].a ? eq[i].a : "NULL", eq[i].b ? eq[i].b : "NULL",
       eq[i].equal ? "true" : "false");
    json_decref(a);
    json_decref(b);
  }
  json_t *five = json_integer(5), *str = json_string("5");
  ok(jsonrpc_id_is_int(five, 5), "5 is the integer 5");
  ok(!jsonrpc_id_is_int(str, 5), "\"5\" is not the integer 5");
  ok(!jsonrpc_id_is_int(NULL, 0), "NULL is no integer");
  json_t *big = json_integer(INT64_MIN);
  ok(jsonrpc_id_is_int(big, INT64_MIN), "INT64_MIN compares exactly");
  json_decref(five);
  json_decref(str);
  json_decref(big);
}

int main(void) {
  test_parse();
  test_builders();
  test_outcome();
  test_ownership();
  test_id_equal();
  return done_testing();
}
