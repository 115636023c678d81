#pragma once
// JSON-RPC 2.0 for ACP: parse one line, classify it, build replies.
//
// Pure: no I/O, no globals. Ids are kept as the jansson values the peer sent
// (integer or string; `0`, `"0"` and 64-bit values are all distinct and are
// echoed exactly), never converted.

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum jsonrpc_kind {
  JSONRPC_INVALID = 0,  // not a JSON-RPC message we accept
  JSONRPC_REQUEST,      // method + id: must be answered
  JSONRPC_NOTIFICATION, // method, no id: never answered
  JSONRPC_RESPONSE,     // id + result or error: answers one of our requests
};

// Standard error codes.
enum {
  JSONRPC_PARSE_ERROR = -32700,
  JSONRPC_INVALID_REQUEST = -32600,
  JSONRPC_METHOD_NOT_FOUND = -32601,
  JSONRPC_INVALID_PARAMS = -32602,
  JSONRPC_INTERNAL_ERROR = -32603,
};

struct jsonrpc_msg {
  enum jsonrpc_kind kind;
  json_t *root;       // owned: the whole message (NULL if it did not parse)
  json_t *id;         // borrowed from root: id of a request or response, or
                      // NULL (notification, or no usable id)
  const char *method; // borrowed: method of a request or notification
  json_t *params;     // borrowed: params (object or array), or NULL
  json_t *result;     // borrowed: result of a successful response, or NULL
  json_t *error;      // borrowed: error object of a failed response, or NULL
};

// Parses and classifies one line. Always fills *msg; returns 0 when the line
// is a valid message, or -1 with a reason in err (msg->kind is then
// JSONRPC_INVALID, and msg->id is set when the line was a request with a
// usable id, so the caller can answer -32600). Free with jsonrpc_msg_free.
int jsonrpc_parse(const char *line, size_t len, struct jsonrpc_msg *msg,
                  char *err, size_t errlen);
// Releases msg->root and clears msg.
void jsonrpc_msg_free(struct jsonrpc_msg *msg);

// The builders return a new compact JSON text ending in "\n" (the caller
// frees it) and store its length, newline included, in *len. Arguments
// marked "stolen" are released on every path.

// {"jsonrpc":"2.0","id":id,"method":...,"params":params (stolen)}
char *jsonrpc_request(int64_t id, const char *method, json_t *params,
                      size_t *len);
// {"jsonrpc":"2.0","method":...,"params":params (stolen)}
char *jsonrpc_notification(const char *method, json_t *params, size_t *len);
// {"jsonrpc":"2.0","id":id (borrowed; NULL → null),"result":result (stolen)}
char *jsonrpc_result(const json_t *id, json_t *result, size_t *len);
// The answer to session/request_permission, written with a fixed format
// (the hot path of auto-decided requests: no tree, no dump): the same text
// as jsonrpc_result(id, {"outcome":{"outcome":"selected","optionId":
// option_id}}) or, option_id NULL, {"outcome":{"outcome":"cancelled"}}.
// option_id must be UTF-8 without NUL (it comes from the agent's options).
char *jsonrpc_outcome(const json_t *id, const char *option_id, size_t *len);
// {"jsonrpc":"2.0","id":id (borrowed; NULL → null),"error":{"code","message"}}
char *jsonrpc_error(const json_t *id, int code, const char *message,
                    size_t *len);

// True when id is a JSON integer equal to v (a string "5" is not 5).
bool jsonrpc_id_is_int(const json_t *id, int64_t v);
// True when a and b are the same id: same JSON type and same value.
bool jsonrpc_id_equal(const json_t *a, const json_t *b);
