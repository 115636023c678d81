#include "jsonfast.h"

#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>

#include "json2mp.h"

// The transcoding buffer is kept between calls, unless a huge message grew
// it: then it is given back.
#define KEEP_BYTES ((size_t)1 << 20)

static json_t *build(const msgpack_object *o);

// json2mp checked every string (UTF-8, no NUL) and every key (unique), so
// the tree is built with jansson's unchecked constructors.
static json_t *build_map(const msgpack_object *o) {
  json_t *obj = json_object();
  for (uint32_t i = 0; obj && i < o->via.map.size; i++) {
    const msgpack_object *k = &o->via.map.ptr[i].key;
    json_t *v = build(&o->via.map.ptr[i].val);
    if (!v || k->type != MSGPACK_OBJECT_STR ||
        json_object_setn_new_nocheck(obj, k->via.str.ptr, k->via.str.size, v) !=
            0) {
      json_decref(v);
      json_decref(obj);
      return NULL;
    }
  }
  return obj;
}

static json_t *build(const msgpack_object *o) {
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return json_null();
  case MSGPACK_OBJECT_BOOLEAN:
    return json_boolean(o->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    return o->via.u64 > INT64_MAX ? NULL : json_integer((json_int_t)o->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return json_integer(o->via.i64);
  case MSGPACK_OBJECT_FLOAT64:
    return json_real(o->via.f64);
  case MSGPACK_OBJECT_STR:
    return json_stringn_nocheck(o->via.str.ptr, o->via.str.size);
  case MSGPACK_OBJECT_ARRAY: {
    json_t *a = json_array();
    for (uint32_t i = 0; a && i < o->via.array.size; i++) {
      json_t *v = build(&o->via.array.ptr[i]);
      if (!v || json_array_append_new(a, v) != 0) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  }
  case MSGPACK_OBJECT_MAP:
    return build_map(o);
  default:
    return NULL;
  }
}

static msgpack_sbuffer sb;
static msgpack_zone *zone; // the unpacked objects, cleared after each call

void jsonfast_release(void) {
  msgpack_sbuffer_destroy(&sb);
  msgpack_sbuffer_init(&sb);
  msgpack_zone_free(zone);
  zone = NULL;
}

json_t *jsonfast_load(const char *text, size_t len, json_error_t *err) {
  json_t *v = NULL;
  sb.size = 0;
  if (!zone)
    zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
  if (zone && json2mp(&sb, text, len)) {
    msgpack_object o;
    size_t off = 0;
    if (msgpack_unpack(sb.data, sb.size, &off, zone, &o) ==
            MSGPACK_UNPACK_SUCCESS &&
        off == sb.size)
      v = build(&o);
    msgpack_zone_clear(zone);
  }
  if (sb.alloc > KEEP_BYTES)
    jsonfast_release();
  return v ? v : json_loadb(text, len, 0, err);
}
