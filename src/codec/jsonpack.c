#include "jsonpack.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

// Packed bytes are gathered here and handed to the packer's callback a few
// KiB at a time, instead of once per header and once per body as the
// msgpack_pack_* functions do: the same bytes (msgpack-c's encodings, the
// smallest form of each header), far fewer calls.
#define OUT_BYTES 4096

struct out {
  msgpack_packer *pk;
  size_t n;
  unsigned char buf[OUT_BYTES];
};

static void flush(struct out *o) {
  if (o->n) {
    o->pk->callback(o->pk->data, (const char *)o->buf, o->n);
    o->n = 0;
  }
}

// Room for k bytes (a header: at most 9) at o->buf + o->n.
static unsigned char *room(struct out *o, size_t k) {
  if (OUT_BYTES - o->n < k)
    flush(o);
  return o->buf + o->n;
}

static void bytes(struct out *o, const void *p, size_t k) {
  if (OUT_BYTES - o->n < k) {
    flush(o);
    if (k >= OUT_BYTES / 2) { // a long string goes as it is
      o->pk->callback(o->pk->data, p, k);
      return;
    }
  }
  memcpy(o->buf + o->n, p, k);
  o->n += k;
}

static void be(unsigned char *d, uint64_t v, int k) {
  for (int i = k - 1; i >= 0; i--, v >>= 8)
    d[i] = (unsigned char)v;
}

// A header: one byte, or the byte then k bytes of v.
static void head(struct out *o, unsigned char b, uint64_t v, int k) {
  unsigned char *d = room(o, 9);
  d[0] = b;
  be(d + 1, v, k);
  o->n += 1 + (size_t)k;
}

// Arrays (fix 0x90), maps (fix 0x80) and strings (fix 0xa0, then str8).
static void head_array(struct out *o, size_t n) {
  if (n < 16)
    head(o, (unsigned char)(0x90 | n), 0, 0);
  else if (n < 65536)
    head(o, 0xdc, n, 2);
  else
    head(o, 0xdd, n, 4);
}

static void head_map(struct out *o, size_t n) {
  if (n < 16)
    head(o, (unsigned char)(0x80 | n), 0, 0);
  else if (n < 65536)
    head(o, 0xde, n, 2);
  else
    head(o, 0xdf, n, 4);
}

static void str(struct out *o, const char *s, size_t n) {
  if (n < 32)
    head(o, (unsigned char)(0xa0 | n), 0, 0);
  else if (n < 256)
    head(o, 0xd9, n, 1);
  else if (n < 65536)
    head(o, 0xda, n, 2);
  else
    head(o, 0xdb, n, 4);
  bytes(o, s, n);
}

// msgpack_pack_int64's choice of encoding.
static void int64(struct out *o, int64_t d) {
  uint64_t u = (uint64_t)d;
  if (d < -(1LL << 5)) {
    if (d < -(1LL << 15))
      head(o, d < -(1LL << 31) ? 0xd3 : 0xd2, u, d < -(1LL << 31) ? 8 : 4);
    else
      head(o, d < -(1 << 7) ? 0xd1 : 0xd0, u, d < -(1 << 7) ? 2 : 1);
  } else if (d < (1 << 7)) {
    head(o, (unsigned char)d, 0, 0);
  } else if (d < (1LL << 16)) {
    head(o, d < (1 << 8) ? 0xcc : 0xcd, u, d < (1 << 8) ? 1 : 2);
  } else {
    head(o, d < (1LL << 32) ? 0xce : 0xcf, u, d < (1LL << 32) ? 4 : 8);
  }
}

static void pack(struct out *o, const json_t *v, int depth);

static void pack_object(struct out *o, const json_t *v, int depth) {
  head_map(o, json_object_size(v));
  // json_object_foreach needs a non-const object; jansson does not modify
  // it while iterating.
  json_t *obj = (json_t *)(uintptr_t)v;
  for (void *it = json_object_iter(obj); it;
       it = json_object_iter_next(obj, it)) {
#if JANSSON_VERSION_HEX >= 0x020e00
    str(o, json_object_iter_key(it), json_object_iter_key_len(it));
#else
    const char *key = json_object_iter_key(it);
    str(o, key, strlen(key));
#endif
    pack(o, json_object_iter_value(it), depth + 1);
  }
}

static void pack(struct out *o, const json_t *v, int depth) {
  if (!v || depth > JSONPACK_MAX_DEPTH) {
    head(o, 0xc0, 0, 0);
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    pack_object(o, v, depth);
    break;
  case JSON_ARRAY: {
    size_t n = json_array_size(v);
    head_array(o, n);
    for (size_t i = 0; i < n; i++)
      pack(o, json_array_get(v, i), depth + 1);
    break;
  }
  case JSON_STRING:
    str(o, json_string_value(v), json_string_length(v));
    break;
  case JSON_INTEGER:
    int64(o, json_integer_value(v));
    break;
  case JSON_REAL: {
    double d = json_real_value(v);
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    head(o, 0xcb, bits, 8);
    break;
  }
  case JSON_TRUE:
    head(o, 0xc3, 0, 0);
    break;
  case JSON_FALSE:
    head(o, 0xc2, 0, 0);
    break;
  case JSON_NULL:
    head(o, 0xc0, 0, 0);
    break;
  }
}

void jsonpack_pack(msgpack_packer *pk, const json_t *v) {
  struct out o;
  o.pk = pk;
  o.n = 0;
  pack(&o, v, 0);
  flush(&o);
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
