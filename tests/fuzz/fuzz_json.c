// The fast JSON path (json2mp, jsonfast_load) against jansson's own parser.
//
// Input: any bytes, as an agent might write them on one line. Properties:
//  * jsonfast_load gives what json_loadb(text, 0) gives: the same tree with
//    keys in the same order, or NULL with the same error text and position;
//  * its fast path (jsonfast_tree) builds a tree only where jansson accepts
//    the text, and then the same one;
//  * every tree is allocated through mem_cache (as in the broker), whose
//    cache stays within its bound;
//  * json2mp succeeds only on text jansson accepts, leaves the buffer as it
//    was when it fails, and its output is one msgpack value whose compact
//    JSON is that of jansson's tree.

#include <jansson.h>
#include <msgpack.h>
#include <string.h>

#include "fuzz.h"
#include "base/mem.h"
#include "codec/json2mp.h"
#include "codec/jsonfast.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  return 0;
}

// msgpack to JSON without jsonpack_unpack's limits (its keys are short).
static json_t *to_json(const msgpack_object *o) {
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return json_null();
  case MSGPACK_OBJECT_BOOLEAN:
    return json_boolean(o->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    return json_integer((json_int_t)o->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return json_integer(o->via.i64);
  case MSGPACK_OBJECT_FLOAT64:
    return json_real(o->via.f64);
  case MSGPACK_OBJECT_STR:
    return json_stringn(o->via.str.ptr, o->via.str.size);
  case MSGPACK_OBJECT_ARRAY: {
    json_t *a = json_array();
    for (uint32_t i = 0; i < o->via.array.size; i++)
      json_array_append_new(a, to_json(&o->via.array.ptr[i]));
    return a;
  }
  case MSGPACK_OBJECT_MAP: {
    json_t *m = json_object();
    for (uint32_t i = 0; i < o->via.map.size; i++) {
      const msgpack_object *k = &o->via.map.ptr[i].key;
      json_t *v = to_json(&o->via.map.ptr[i].val);
      if (k->type != MSGPACK_OBJECT_STR ||
          json_object_setn_new(m, k->via.str.ptr, k->via.str.size, v) != 0)
        json_decref(v);
    }
    return m;
  }
  default:
    return NULL;
  }
}

static char *dump(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  json_error_t e1, e2;
  json_t *slow = json_loadb(text, size, 0, &e1);
  json_t *tree = jsonfast_tree(text, size);
  FUZZ_CHECK(!tree || slow, "jsonfast_tree accepted what jansson refuses");
  json_t *fast = tree ? tree : jsonfast_load(text, size, &e2);
  char *ds = slow ? dump(slow) : NULL, *df = fast ? dump(fast) : NULL;
  if (slow || fast) {
    FUZZ_CHECK(slow && fast && ds && df && strcmp(ds, df) == 0,
               "trees differ: %s vs %s", ds ? ds : "(none)",
               df ? df : "(none)");
  } else {
    FUZZ_CHECK(strcmp(e1.text, e2.text) == 0 && e1.position == e2.position,
               "errors differ: %s vs %s", e1.text, e2.text);
  }

  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_sbuffer_write(&sb, "x", 1);
  bool ok = json2mp(&sb, text, size);
  FUZZ_CHECK(ok || sb.size == 1, "a failure left %zu bytes", sb.size - 1);
  FUZZ_CHECK(!ok || slow, "json2mp accepted what jansson refuses");
  if (ok) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 1;
    // msgpack-c unpacks containers up to 32 deep: deeper is left unchecked.
    if (msgpack_unpack_next(&u, sb.data, sb.size, &off) ==
        MSGPACK_UNPACK_SUCCESS) {
      FUZZ_CHECK(off == sb.size, "trailing bytes after the value");
      json_t *back = to_json(&u.data);
      char *db = back ? dump(back) : NULL;
      FUZZ_CHECK(db && ds && strcmp(db, ds) == 0, "msgpack differs: %s vs %s",
                 db ? db : "(none)", ds);
      free(db);
      json_decref(back);
    }
    msgpack_unpacked_destroy(&u);
  }
  msgpack_sbuffer_destroy(&sb);
  free(ds);
  free(df);
  json_decref(slow);
  json_decref(fast);
  FUZZ_CHECK(mem_cache_bytes() <= MEM_CACHE_MAX_BYTES, "the cache holds %zu",
             mem_cache_bytes());
  return 0;
}
