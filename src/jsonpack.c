#include "jsonpack.h"

#include <string.h>

static void pack(msgpack_packer *pk, const json_t *v, int depth);

static void pack_object(msgpack_packer *pk, const json_t *v, int depth) {
  msgpack_pack_map(pk, json_object_size(v));
  const char *key;
  json_t *val;
  // json_object_foreach needs a non-const object; jansson does not modify
  // it while iterating.
  void *it = json_object_iter((json_t *)(uintptr_t)v);
  for (; it; it = json_object_iter_next((json_t *)(uintptr_t)v, it)) {
    key = json_object_iter_key(it);
    val = json_object_iter_value(it);
    msgpack_pack_str_with_body(pk, key, strlen(key));
    pack(pk, val, depth + 1);
  }
}

static void pack(msgpack_packer *pk, const json_t *v, int depth) {
  if (!v || depth > JSONPACK_MAX_DEPTH) {
    msgpack_pack_nil(pk);
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    pack_object(pk, v, depth);
    break;
  case JSON_ARRAY: {
    size_t n = json_array_size(v);
    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++)
      pack(pk, json_array_get(v, i), depth + 1);
    break;
  }
  case JSON_STRING:
    msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v));
    break;
  case JSON_INTEGER:
    msgpack_pack_int64(pk, json_integer_value(v));
    break;
  case JSON_REAL:
    msgpack_pack_double(pk, json_real_value(v));
    break;
  case JSON_TRUE:
    msgpack_pack_true(pk);
    break;
  case JSON_FALSE:
    msgpack_pack_false(pk);
    break;
  case JSON_NULL:
    msgpack_pack_nil(pk);
    break;
  }
}

void jsonpack_pack(msgpack_packer *pk, const json_t *v) {
  pack(pk, v, 0);
}

void jsonpack_str(msgpack_packer *pk, const char *s) {
  if (s)
    msgpack_pack_str_with_body(pk, s, strlen(s));
  else
    msgpack_pack_nil(pk);
}
