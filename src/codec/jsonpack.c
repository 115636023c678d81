#include "jsonpack.h"

#include <stdbool.h>
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

static json_t *unpack(const msgpack_object *o, int depth, bool checked);

// checked: the strings are known to be UTF-8 without NUL (json2mp's output),
// so jansson's unchecked constructors are used and keys have no length
// limit; otherwise every string is checked.
static json_t *unpack_map(const msgpack_object *o, int depth, bool checked) {
  json_t *obj = json_object();
  for (uint32_t i = 0; i < o->via.map.size; i++) {
    const msgpack_object *k = &o->via.map.ptr[i].key;
    if (k->type != MSGPACK_OBJECT_STR)
      goto fail;
    json_t *v = unpack(&o->via.map.ptr[i].val, depth + 1, checked);
    if (!v)
      goto fail;
    if (checked) {
      if (json_object_setn_new_nocheck(obj, k->via.str.ptr, k->via.str.size,
                                       v) != 0)
        goto fail;
      continue;
    }
    char key[256];
    if (k->via.str.size >= sizeof(key) ||
        memchr(k->via.str.ptr, '\0', k->via.str.size)) {
      json_decref(v);
      goto fail;
    }
    memcpy(key, k->via.str.ptr, k->via.str.size);
    key[k->via.str.size] = '\0';
    if (json_object_set_new(obj, key, v) != 0)
      goto fail;
  }
  return obj;
fail:
  json_decref(obj);
  return NULL;
}

static json_t *unpack(const msgpack_object *o, int depth, bool checked) {
  if (depth > JSONPACK_MAX_DEPTH)
    return NULL;
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return json_null();
  case MSGPACK_OBJECT_BOOLEAN:
    return json_boolean(o->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    return o->via.u64 > INT64_MAX ? json_real((double)o->via.u64)
                                  : json_integer((json_int_t)o->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return json_integer(o->via.i64);
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    return json_real(o->via.f64);
  case MSGPACK_OBJECT_STR:
  case MSGPACK_OBJECT_BIN:
    return checked ? json_stringn_nocheck(o->via.str.ptr, o->via.str.size)
                   : json_stringn(o->via.str.ptr, o->via.str.size);
  case MSGPACK_OBJECT_ARRAY: {
    json_t *a = json_array();
    for (uint32_t i = 0; i < o->via.array.size; i++) {
      json_t *v = unpack(&o->via.array.ptr[i], depth + 1, checked);
      if (!v) {
        json_decref(a);
        return NULL;
      }
      json_array_append_new(a, v);
    }
    return a;
  }
  case MSGPACK_OBJECT_MAP:
    return unpack_map(o, depth, checked);
  default:
    return NULL;
  }
}

json_t *jsonpack_unpack_checked(const msgpack_object *o) {
  return unpack(o, 0, true);
}

json_t *jsonpack_unpack(const msgpack_object *o) {
  return unpack(o, 0, false);
}
