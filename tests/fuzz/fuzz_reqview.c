// A session/request_permission line read into a flat view (acp/reqview.h)
// against jsonrpc_parse's tree.
//
// Input: any bytes, as an agent might write them on one line. Properties:
//  * the view takes a line only when jsonrpc_parse takes it as a
//    session/request_permission request, with the same id, a params object
//    of exactly sessionId, toolCall and options, the same sessionId, a
//    toolCall equal to the tree's and the same options (optionId, name,
//    kind: strings, nothing else);
//  * the request read from the view's toolCall (request_init_tc) equals the
//    one read from params (request_init), every atom and target;
//  * trees are allocated through mem_cache, as in the broker.

#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "acp/jsonrpc.h"
#include "acp/reqview.h"
#include "base/mem.h"
#include "policy/request.h"

#include "../unit/request_ref.c"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  return 0;
}

static bool jstr_is(const json_t *j, const struct reqview_str *s) {
  return json_is_string(j) && json_string_length(j) == s->n &&
         memcmp(json_string_value(j), s->s, s->n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *line = (const char *)data;
  struct reqview v;
  if (reqview_parse(line, size, &v) != 0)
    return 0;
  struct jsonrpc_msg m;
  char err[200];
  FUZZ_CHECK(jsonrpc_parse(line, size, &m, err, sizeof(err)) == 0,
             "the tree refuses what the view took: %s", err);
  FUZZ_CHECK(m.kind == JSONRPC_REQUEST &&
                 strcmp(m.method, "session/request_permission") == 0,
             "not a permission request");
  FUZZ_CHECK(jsonrpc_id_equal(m.id, v.id), "the id");
  const json_t *p = m.params;
  FUZZ_CHECK(json_is_object(p) && json_object_size(p) == 3, "params");
  FUZZ_CHECK(jstr_is(json_object_get(p, "sessionId"), &v.sid) &&
                 strlen(v.sid_z) == v.sid.n,
             "sessionId");
  FUZZ_CHECK(json_equal(json_object_get(p, "toolCall"), v.tc), "toolCall");
  const json_t *opts = json_object_get(p, "options");
  FUZZ_CHECK(json_array_size(opts) == v.noptions && v.noptions > 0,
             "the options");
  for (size_t i = 0; i < v.noptions; i++) {
    const json_t *o = json_array_get(opts, i);
    FUZZ_CHECK(json_object_size(o) == 3 &&
                   jstr_is(json_object_get(o, "optionId"), &v.options[i].id) &&
                   jstr_is(json_object_get(o, "name"), &v.options[i].name) &&
                   jstr_is(json_object_get(o, "kind"), &v.options[i].kind) &&
                   strcmp(v.option_id_z[i],
                          json_string_value(json_object_get(o, "optionId"))) ==
                       0 &&
                   strcmp(v.option_kind_z[i],
                          json_string_value(json_object_get(o, "kind"))) == 0,
               "option %zu", i);
  }
  struct request a, b;
  request_init(&a, p, "/p", "/h");
  request_init_tc(&b, v.tc, "/p", "/h");
  char why[1024];
  FUZZ_CHECK(request_same(&a, &b, why, sizeof(why)), "the request: %s", why);
  request_clear(&a);
  request_clear(&b);
  jsonrpc_msg_free(&m);
  reqview_clear(&v);
  return 0;
}
