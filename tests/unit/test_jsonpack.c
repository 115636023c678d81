// jsonpack_pack: byte for byte what msgpack-c's own packer gives for the
// same tree (the reference below is the packer jsonpack used before it
// gathered its output): every header width of every kind, integers at each
// encoding's edges, strings across the gathering buffer, the depth limit,
// and seeded random trees.

#include "codec/jsonpack.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void ref(msgpack_packer *pk, const json_t *v, int depth) {
  if (!v || depth > JSONPACK_MAX_DEPTH) {
    msgpack_pack_nil(pk);
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    msgpack_pack_map(pk, json_object_size(v));
    json_t *obj = (json_t *)(uintptr_t)v;
    for (void *it = json_object_iter(obj); it;
         it = json_object_iter_next(obj, it)) {
      const char *k = json_object_iter_key(it);
      msgpack_pack_str_with_body(pk, k, strlen(k));
      ref(pk, json_object_iter_value(it), depth + 1);
    }
    break;
  }
  case JSON_ARRAY:
    msgpack_pack_array(pk, json_array_size(v));
    for (size_t i = 0; i < json_array_size(v); i++)
      ref(pk, json_array_get(v, i), depth + 1);
    break;
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

// Counts the packer's calls, to check that output is gathered.
static size_t calls;

static int counting_write(void *data, const char *buf, size_t len) {
  calls++;
  return msgpack_sbuffer_write(data, buf, len);
}

// jsonpack_pack(v) after a prefix equals the reference's bytes.
static bool same(const json_t *v) {
  msgpack_sbuffer a, b;
  msgpack_sbuffer_init(&a);
  msgpack_sbuffer_init(&b);
  msgpack_packer pa, pb;
  msgpack_packer_init(&pa, &a, counting_write);
  msgpack_packer_init(&pb, &b, msgpack_sbuffer_write);
  msgpack_pack_array(&pa, 2);
  msgpack_pack_array(&pb, 2);
  jsonpack_pack(&pa, v);
  ref(&pb, v, 0);
  msgpack_pack_true(&pa); // what follows goes after it
  msgpack_pack_true(&pb);
  bool eq = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
  msgpack_sbuffer_destroy(&a);
  msgpack_sbuffer_destroy(&b);
  return eq;
}

static json_t *str_of(size_t n) {
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++)
    s[i] = (char)('a' + i % 26);
  json_t *v = json_stringn(s, n);
  free(s);
  return v;
}

static void test_edges(void) {
  static const int64_t ints[] = {0,
                                 1,
                                 31,
                                 32,
                                 127,
                                 128,
                                 255,
                                 256,
                                 32767,
                                 32768,
                                 65535,
                                 65536,
                                 2147483647LL,
                                 2147483648LL,
                                 4294967295LL,
                                 4294967296LL,
                                 INT64_MAX,
                                 -1,
                                 -31,
                                 -32,
                                 -33,
                                 -127,
                                 -128,
                                 -129,
                                 -32767,
                                 -32768,
                                 -32769,
                                 -2147483647LL,
                                 -2147483648LL,
                                 -2147483649LL,
                                 INT64_MIN};
  int bad = 0;
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
    json_t *v = json_integer(ints[i]);
    bad += !same(v);
    json_decref(v);
  }
  ok(bad == 0, "integers at every encoding's edges: %d differ", bad);

  static const double reals[] = {0.0, -0.0, 1.5, -2.25e300, 4.9e-324, 1e-7};
  bad = 0;
  for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
    json_t *v = json_real(reals[i]);
    bad += !same(v);
    json_decref(v);
  }
  ok(bad == 0, "reals: %d differ", bad);

  static const size_t lens[] = {0,    1,    31,   32,   255,   256,  2047,
                                2048, 4095, 4096, 4097, 65535, 65536};
  bad = 0;
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
    // Alone, and after 4,000 bytes gathered (it crosses the buffer).
    json_t *v = str_of(lens[i]);
    json_t *a = json_pack("[s,O]", "x", v);
    json_array_set_new(a, 0, str_of(4000));
    bad += !same(v) + !same(a);
    json_decref(v);
    json_decref(a);
  }
  ok(bad == 0, "strings of every header width, across the buffer: %d differ",
     bad);

  static const size_t counts[] = {0, 15, 16, 65535, 65536};
  bad = 0;
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
    json_t *a = json_array(), *o = json_object();
    for (size_t k = 0; k < counts[i]; k++) {
      char key[24];
      snprintf(key, sizeof(key), "k%zu", k);
      json_array_append_new(a, json_integer((json_int_t)k));
      json_object_set_new(o, key, k % 2 ? json_true() : json_null());
    }
    bad += !same(a) + !same(o);
    json_decref(a);
    json_decref(o);
  }
  ok(bad == 0, "arrays and maps of every header width: %d differ", bad);

  bad = 0;
  for (int d = 60; d < 70; d++) {
    json_t *v = json_array();
    for (int i = 0; i < d; i++)
      v = json_pack("[o,{s:o}]", v, "k", json_integer(i));
    bad += !same(v);
    json_decref(v);
  }
  ok(bad == 0, "values past JSONPACK_MAX_DEPTH are nil: %d differ", bad);
  ok(same(NULL), "NULL packs nil");
  json_t *f = json_pack("[b,b,n]", 1, 0);
  ok(same(f), "true, false, null");
  json_decref(f);
}

static uint64_t rng = 42;

static uint64_t rnd(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static json_t *gen(int depth) {
  switch (rnd() % (depth > 6 ? 5 : 7)) {
  case 0:
    return json_integer((json_int_t)(rnd() >> (rnd() % 64)) *
                        (rnd() % 2 ? 1 : -1));
  case 1:
    return json_real((double)(int64_t)rnd() / 1e6);
  case 2:
    return str_of(rnd() % 8 ? rnd() % 40 : rnd() % 5000);
  case 3:
    return rnd() % 2 ? json_true() : json_false();
  case 4:
    return json_null();
  case 5: {
    json_t *a = json_array();
    for (uint64_t n = rnd() % 20; n; n--)
      json_array_append_new(a, gen(depth + 1));
    return a;
  }
  default: {
    json_t *o = json_object();
    for (uint64_t n = rnd() % 20; n; n--) {
      char key[40];
      snprintf(key, sizeof(key), "%.*s%llu", (int)(rnd() % 30),
               "abcdefghijklmnopqrstuvwxyz0123", (unsigned long long)n);
      json_object_set_new(o, key, gen(depth + 1));
    }
    return o;
  }
  }
}

static void test_random(void) {
  int bad = 0;
  for (int i = 0; i < 300; i++) {
    json_t *v = gen(0);
    bad += !same(v);
    json_decref(v);
  }
  ok(bad == 0, "300 random trees: %d differ", bad);

  // A decided event's worth: one call to the packer, not one per piece.
  json_t *ev = json_pack(
      "{s:s,s:s,s:s,s:s,s:{s:s,s:I},s:[s,s],s:b,s:i}", "session", "s-1",
      "toolCallId", "call-7", "decision", "allow", "reason", "rule Bash(git *)",
      "input", "command", "git status", "t", (json_int_t)1234567890123, "atoms",
      "git", "status", "auto", 1, "wait_ms", 0);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, counting_write);
  calls = 0;
  jsonpack_pack(&pk, ev);
  is_size(calls, 1, "a small tree reaches the packer in one call");
  msgpack_sbuffer_destroy(&sb);
  json_decref(ev);
}

int main(void) {
  test_edges();
  test_random();
  return done_testing();
}
