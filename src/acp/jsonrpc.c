#include "jsonrpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "codec/jsonfast.h"

// The members of a message's top level that JSON-RPC names (NULL: absent).
struct members {
  json_t *jsonrpc, *id, *method, *params, *result, *error;
};

static void members(json_t *root, struct members *m);
static int classify_call(struct jsonrpc_msg *msg, const struct members *m,
                         char *err, size_t errlen);
static int classify_response(struct jsonrpc_msg *msg, const struct members *m,
                             char *err, size_t errlen);
static bool version_ok(const json_t *v);
static bool id_usable(const json_t *id);
static json_t *id_copy(const json_t *id);
static json_t *envelope(bool *ok);
static void put(json_t *obj, const char *key, json_t *v, bool *ok);
static char *finish(json_t *obj, bool ok, size_t *len);
static int fail(struct jsonrpc_msg *msg, char *err, size_t errlen,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

int jsonrpc_parse(const char *line, size_t len, struct jsonrpc_msg *msg,
                  char *err, size_t errlen) {
  *msg = (struct jsonrpc_msg){.kind = JSONRPC_INVALID};
  json_error_t jerr;
  msg->root = jsonfast_load(line, len, &jerr);
  if (!msg->root)
    return fail(msg, err, errlen, "parse error: %s", jerr.text);
  // Batches are arrays: ACP does not use them, so they are invalid here.
  if (!json_is_object(msg->root))
    return fail(msg, err, errlen, "not a JSON object");
  struct members m;
  members(msg->root, &m);
  // Set early so that any invalid request can still be answered by id.
  if (m.method && id_usable(m.id))
    msg->id = m.id;
  if (!version_ok(m.jsonrpc))
    return fail(msg, err, errlen, "jsonrpc is not \"2.0\"");
  if (m.method)
    return classify_call(msg, &m, err, errlen);
  return classify_response(msg, &m, err, errlen);
}

void jsonrpc_msg_free(struct jsonrpc_msg *msg) {
  json_decref(msg->root);
  *msg = (struct jsonrpc_msg){.kind = JSONRPC_INVALID};
}

char *jsonrpc_request(int64_t id, const char *method, json_t *params,
                      size_t *len) {
  bool ok = true;
  json_t *obj = envelope(&ok);
  put(obj, "id", json_integer(id), &ok);
  put(obj, "method", json_string(method), &ok);
  if (params)
    put(obj, "params", params, &ok);
  return finish(obj, ok, len);
}

char *jsonrpc_notification(const char *method, json_t *params, size_t *len) {
  bool ok = true;
  json_t *obj = envelope(&ok);
  put(obj, "method", json_string(method), &ok);
  if (params)
    put(obj, "params", params, &ok);
  return finish(obj, ok, len);
}

// Appends v's compact JSON (null for NULL) to *out (*cap bytes, grown).
static bool dump_append(const json_t *v, char **out, size_t *n, size_t *cap) {
  if (!v) {
    v = json_null();
  }
  size_t k =
      json_dumpb(v, *out + *n, *cap - *n, JSON_COMPACT | JSON_ENCODE_ANY);
  if (k == 0)
    return false;
  if (k > *cap - *n) {
    while (*cap - *n < k + 64)
      *cap *= 2;
    *out = xrealloc(*out, *cap);
    if (json_dumpb(v, *out + *n, *cap - *n, JSON_COMPACT | JSON_ENCODE_ANY) !=
        k)
      return false;
  }
  *n += k;
  return true;
}

static void bytes_append(const char *t, size_t k, char **out, size_t *n,
                         size_t *cap) {
  if (*cap - *n < k + 1) {
    while (*cap - *n < k + 1)
      *cap *= 2;
    *out = xrealloc(*out, *cap);
  }
  memcpy(*out + *n, t, k);
  *n += k;
}

static void text_append(const char *t, char **out, size_t *n, size_t *cap) {
  bytes_append(t, strlen(t), out, n, cap);
}

// A literal's bytes, its length known at compile time.
#define LIT_APPEND(lit, out, n, cap)                                           \
  bytes_append(lit, sizeof(lit) - 1, out, n, cap)

char *jsonrpc_result(const json_t *id, json_t *result, size_t *len) {
  // Written out directly (the answer to every request goes through here):
  // the same text the envelope object would give, keys in the same order.
  size_t cap = 512, n = 0;
  char *out = xmalloc(cap);
  text_append("{\"jsonrpc\":\"2.0\",\"id\":", &out, &n, &cap);
  bool ok = dump_append(id, &out, &n, &cap);
  text_append(",\"result\":", &out, &n, &cap);
  ok = ok && dump_append(result, &out, &n, &cap);
  text_append("}\n", &out, &n, &cap);
  json_decref(result);
  if (!ok) {
    free(out);
    *len = 0;
    return NULL;
  }
  out[n] = '\0';
  *len = n;
  return out;
}

// Appends s as a JSON string, escaped as jansson's compact dump escapes it
// (s is UTF-8: it came from a parsed message). Room for the worst case (6
// bytes per byte) is made first.
static void str_append(const char *s, char **out, size_t *n, size_t *cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t k = strlen(s);
  if (*cap - *n < 6 * k + 3) {
    while (*cap - *n < 6 * k + 3)
      *cap *= 2;
    *out = xrealloc(*out, *cap);
  }
  char *o = *out + *n;
  *o++ = '"';
  for (size_t i = 0; i < k; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') {
      *o++ = (char)c;
      continue;
    }
    *o++ = '\\';
    switch (c) {
    case '"':
    case '\\':
      *o++ = (char)c;
      break;
    case '\b':
      *o++ = 'b';
      break;
    case '\f':
      *o++ = 'f';
      break;
    case '\n':
      *o++ = 'n';
      break;
    case '\r':
      *o++ = 'r';
      break;
    case '\t':
      *o++ = 't';
      break;
    default:
      memcpy(o, "u00", 3);
      o[3] = hex[c >> 4];
      o[4] = hex[c & 15];
      o += 5;
    }
  }
  *o++ = '"';
  *n = (size_t)(o - *out);
}

char *jsonrpc_outcome(const json_t *id, const char *option_id, size_t *len) {
  size_t cap = 256, n = 0;
  char *out = xmalloc(cap);
  LIT_APPEND("{\"jsonrpc\":\"2.0\",\"id\":", &out, &n, &cap);
  bool ok = true;
  if (json_is_integer(id)) {
    // The digits by hand: snprintf would cost half of the whole answer.
    json_int_t v = json_integer_value(id);
    unsigned long long u =
        v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    char num[24], *d = num + sizeof(num) - 1;
    *d = '\0';
    do
      *--d = (char)('0' + u % 10);
    while ((u /= 10) != 0);
    if (v < 0)
      *--d = '-';
    bytes_append(d, (size_t)(num + sizeof(num) - 1 - d), &out, &n, &cap);
  } else if (json_is_string(id) &&
             !memchr(json_string_value(id), 0, json_string_length(id))) {
    str_append(json_string_value(id), &out, &n, &cap);
  } else {
    ok = dump_append(id, &out, &n, &cap);
  }
  if (option_id) {
    LIT_APPEND(",\"result\":{\"outcome\":{\"outcome\":\"selected\","
               "\"optionId\":",
               &out, &n, &cap);
    str_append(option_id, &out, &n, &cap);
    LIT_APPEND("}}}\n", &out, &n, &cap);
  } else {
    LIT_APPEND(",\"result\":{\"outcome\":{\"outcome\":\"cancelled\"}}}\n", &out,
               &n, &cap);
  }
  if (!ok) {
    free(out);
    *len = 0;
    return NULL;
  }
  out[n] = '\0';
  *len = n;
  return out;
}

char *jsonrpc_error(const json_t *id, int code, const char *message,
                    size_t *len) {
  // An error reply must always go out: text that is not UTF-8 (say, copied
  // from a peer) is replaced rather than failing the whole reply.
  json_t *text = json_string(message ? message : "");
  if (!text)
    text = json_string("(message is not valid UTF-8)");
  bool ok = true;
  json_t *error = json_object();
  put(error, "code", json_integer(code), &ok);
  put(error, "message", text, &ok);
  json_t *obj = envelope(&ok);
  put(obj, "id", id_copy(id), &ok);
  put(obj, "error", error, &ok);
  return finish(obj, ok, len);
}

bool jsonrpc_id_is_int(const json_t *id, int64_t v) {
  return json_is_integer(id) && json_integer_value(id) == v;
}

bool jsonrpc_id_equal(const json_t *a, const json_t *b) {
  // json_equal compares the type first (0 != "0", 1 != 1.0), then integers
  // exactly and strings byte for byte, length included.
  return a && b && json_equal(a, b);
}

// One pass over the top level instead of a hashed lookup per name (a
// message has a handful of members; a key appears once in a jansson
// object, so this finds what json_object_get would).
static void members(json_t *root, struct members *m) {
  *m = (struct members){0};
  for (void *it = json_object_iter(root); it;
       it = json_object_iter_next(root, it)) {
    const char *k = json_object_iter_key(it);
    json_t **slot = NULL;
    switch (k[0]) {
    case 'j':
      slot = strcmp(k, "jsonrpc") == 0 ? &m->jsonrpc : NULL;
      break;
    case 'i':
      slot = strcmp(k, "id") == 0 ? &m->id : NULL;
      break;
    case 'm':
      slot = strcmp(k, "method") == 0 ? &m->method : NULL;
      break;
    case 'p':
      slot = strcmp(k, "params") == 0 ? &m->params : NULL;
      break;
    case 'r':
      slot = strcmp(k, "result") == 0 ? &m->result : NULL;
      break;
    case 'e':
      slot = strcmp(k, "error") == 0 ? &m->error : NULL;
      break;
    }
    if (slot)
      *slot = json_object_iter_value(it);
  }
}

// A request or notification; msg->id is already set when usable.
static int classify_call(struct jsonrpc_msg *msg, const struct members *m,
                         char *err, size_t errlen) {
  if (!json_is_string(m->method))
    return fail(msg, err, errlen, "method is not a string");
  if (m->id && !msg->id)
    return fail(msg, err, errlen, "id is not an integer or a string");
  json_t *params = m->params;
  if (params && !json_is_object(params) && !json_is_array(params))
    return fail(msg, err, errlen, "params is not an object or an array");
  msg->kind = m->id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
  msg->method = json_string_value(m->method);
  msg->params = params;
  return 0;
}

// A response to one of our requests. msg->id stays NULL unless valid:
// responses are never answered, so an invalid one needs no id.
static int classify_response(struct jsonrpc_msg *msg, const struct members *m,
                             char *err, size_t errlen) {
  json_t *id = m->id;
  if (!id_usable(id))
    return fail(msg, err, errlen, "no method and no usable id");
  json_t *result = m->result;
  json_t *error = m->error;
  if (!result == !error)
    return fail(msg, err, errlen, "response needs one of result or error");
  if (error && !json_is_integer(json_object_get(error, "code")))
    return fail(msg, err, errlen, "error has no integer code");
  msg->kind = JSONRPC_RESPONSE;
  msg->id = id;
  msg->result = result;
  msg->error = error;
  return 0;
}

// "jsonrpc" may be absent (lenient), but when present it must be "2.0".
static bool version_ok(const json_t *v) {
  return !v || (json_is_string(v) && json_string_length(v) == 3 &&
                memcmp(json_string_value(v), "2.0", 3) == 0);
}

// ACP ids are integers or strings; null cannot be answered distinctly.
static bool id_usable(const json_t *id) {
  return json_is_integer(id) || json_is_string(id);
}

// A deep copy avoids casting away const; ids are scalars, so it is cheap.
static json_t *id_copy(const json_t *id) {
  return id ? json_deep_copy(id) : json_null();
}

static json_t *envelope(bool *ok) {
  json_t *obj = json_object();
  put(obj, "jsonrpc", json_string("2.0"), ok);
  return obj;
}

// Sets key to v (stolen), recording a failure: v is NULL when its
// constructor refused the input (a method that is not UTF-8, say).
static void put(json_t *obj, const char *key, json_t *v, bool *ok) {
  if (json_object_set_new(obj, key, v) != 0)
    *ok = false;
}

// Serialises obj compactly with a "\n" (and a NUL after it), then releases
// obj. Returns NULL, with *len 0, if building or encoding it failed.
static char *finish(json_t *obj, bool ok, size_t *len) {
  *len = 0;
  // Most messages fit the stack buffer: encoded once, then copied.
  char small[4096];
  size_t n = ok ? json_dumpb(obj, small, sizeof(small), JSON_COMPACT) : 0;
  char *out = n ? xmalloc(n + 2) : NULL;
  if (out && n <= sizeof(small)) {
    memcpy(out, small, n);
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
  } else if (out && json_dumpb(obj, out, n, JSON_COMPACT) == n) {
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
  } else {
    free(out);
    out = NULL;
  }
  json_decref(obj);
  return out;
}

static int fail(struct jsonrpc_msg *msg, char *err, size_t errlen,
                const char *fmt, ...) {
  msg->kind = JSONRPC_INVALID;
  msg->method = NULL;
  msg->params = msg->result = msg->error = NULL;
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return -1;
}
