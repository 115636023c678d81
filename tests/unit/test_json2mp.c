// json2mp: differential against the slow path (json_loadb, flags 0, then
// jsonpack_pack) on hand-written edge cases and on seeded random documents;
// the output buffer is left as it was on failure and appended to otherwise.
// jsonfast_load against json_loadb on the same documents: the same tree,
// keys in the same order, or the same error; its fast path (jsonfast_tree,
// one pass from the text to the tree) must take every document jansson
// accepts up to JSONFAST_MAX_DEPTH deep (duplicate keys too), and none that
// jansson refuses.

#include "codec/json2mp.h"
#include "codec/jsonfast.h"
#include "codec/jsonlex.h"
#include "codec/jsonpack.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

// --- Comparing msgpack output -------------------------------------------

// msgpack_unpack refuses containers nested more than 32 deep, so deep
// documents are compared by this walker, which reads headers of any width
// into msgpack_object's categories.
struct mv {
  msgpack_object_type type;
  uint64_t u; // integers (as two's complement), booleans, float bits, counts
  const unsigned char *s;
};

static uint64_t be(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

// Reads one header at *p; false on truncation or an unexpected type.
static bool mv_read(const unsigned char **p, const unsigned char *end,
                    struct mv *v) {
  if (*p >= end)
    return false;
  unsigned c = *(*p)++;
  size_t need = 0, body = 0;
  v->u = 0;
  v->s = NULL;
  if (c <= 0x7f || c >= 0xe0) {
    v->type = c <= 0x7f ? MSGPACK_OBJECT_POSITIVE_INTEGER
                        : MSGPACK_OBJECT_NEGATIVE_INTEGER;
    v->u = c <= 0x7f ? c : (uint64_t)(int64_t)(int8_t)c;
    return true;
  }
  if ((c & 0xf0) == 0x80 || (c & 0xf0) == 0x90) {
    v->type = (c & 0xf0) == 0x80 ? MSGPACK_OBJECT_MAP : MSGPACK_OBJECT_ARRAY;
    v->u = c & 0x0f;
    return true;
  }
  if ((c & 0xe0) == 0xa0) {
    v->type = MSGPACK_OBJECT_STR;
    body = c & 0x1f;
    goto str;
  }
  switch (c) {
  case 0xc0:
    v->type = MSGPACK_OBJECT_NIL;
    return true;
  case 0xc2:
  case 0xc3:
    v->type = MSGPACK_OBJECT_BOOLEAN;
    v->u = c == 0xc3;
    return true;
  case 0xcb:
    need = 8;
    v->type = MSGPACK_OBJECT_FLOAT64;
    break;
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf:
    need = (size_t)1 << (c - 0xcc);
    v->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    break;
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3:
    need = (size_t)1 << (c - 0xd0);
    v->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
    break;
  case 0xd9:
  case 0xda:
  case 0xdb:
    need = (size_t)1 << (c - 0xd9);
    v->type = MSGPACK_OBJECT_STR;
    break;
  case 0xdc:
  case 0xdd:
    need = c == 0xdc ? 2 : 4;
    v->type = MSGPACK_OBJECT_ARRAY;
    break;
  case 0xde:
  case 0xdf:
    need = c == 0xde ? 2 : 4;
    v->type = MSGPACK_OBJECT_MAP;
    break;
  default:
    return false; // the packer never writes bin, ext or float32 here
  }
  if ((size_t)(end - *p) < need)
    return false;
  v->u = be(*p, (int)need);
  *p += need;
  if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    // Sign-extend, then classify as msgpack_unpack does.
    int shift = 64 - 8 * (int)need;
    int64_t i = (int64_t)(v->u << shift) >> shift;
    v->u = (uint64_t)i;
    v->type = i < 0 ? MSGPACK_OBJECT_NEGATIVE_INTEGER
                    : MSGPACK_OBJECT_POSITIVE_INTEGER;
  }
  if (v->type != MSGPACK_OBJECT_STR)
    return true;
  body = (size_t)v->u;
str:
  if ((size_t)(end - *p) < body)
    return false;
  v->s = *p;
  v->u = body;
  *p += body;
  return true;
}

// Compares the next value of a with the next value of b.
static bool mv_equal(const unsigned char **a, const unsigned char *ae,
                     const unsigned char **b, const unsigned char *be_) {
  struct mv x, y;
  if (!mv_read(a, ae, &x) || !mv_read(b, be_, &y))
    return false;
  if (x.type != y.type || x.u != y.u)
    return false;
  if (x.type == MSGPACK_OBJECT_STR)
    return memcmp(x.s, y.s, (size_t)x.u) == 0;
  uint64_t n = x.type == MSGPACK_OBJECT_MAP     ? 2 * x.u
               : x.type == MSGPACK_OBJECT_ARRAY ? x.u
                                                : 0;
  for (uint64_t i = 0; i < n; i++)
    if (!mv_equal(a, ae, b, be_))
      return false;
  return true;
}

static bool obj_equal(const msgpack_object *x, const msgpack_object *y) {
  if (x->type != y->type)
    return false;
  switch (x->type) {
  case MSGPACK_OBJECT_NIL:
    return true;
  case MSGPACK_OBJECT_BOOLEAN:
    return x->via.boolean == y->via.boolean;
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    return x->via.u64 == y->via.u64;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return x->via.i64 == y->via.i64;
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    // Bit-equal: -0.0 is not 0.0.
    return memcmp(&x->via.f64, &y->via.f64, sizeof(double)) == 0;
  case MSGPACK_OBJECT_STR:
    // msgpack_unpack may leave ptr NULL for "".
    return x->via.str.size == y->via.str.size &&
           (!x->via.str.size ||
            memcmp(x->via.str.ptr, y->via.str.ptr, x->via.str.size) == 0);
  case MSGPACK_OBJECT_ARRAY:
    if (x->via.array.size != y->via.array.size)
      return false;
    for (uint32_t i = 0; i < x->via.array.size; i++)
      if (!obj_equal(&x->via.array.ptr[i], &y->via.array.ptr[i]))
        return false;
    return true;
  case MSGPACK_OBJECT_MAP:
    if (x->via.map.size != y->via.map.size)
      return false;
    for (uint32_t i = 0; i < x->via.map.size; i++)
      if (!obj_equal(&x->via.map.ptr[i].key, &y->via.map.ptr[i].key) ||
          !obj_equal(&x->via.map.ptr[i].val, &y->via.map.ptr[i].val))
        return false;
    return true;
  default:
    return false;
  }
}

// The two buffers hold one equal value each: through msgpack_unpack where
// it can (the walker must agree), through the walker alone where the
// nesting is too deep for it.
static bool mp_same(const char *a, size_t an, const char *b, size_t bn) {
  const unsigned char *pa = (const unsigned char *)a, *pb;
  pb = (const unsigned char *)b;
  bool walk = mv_equal(&pa, pa + an, &pb, pb + bn) &&
              pa == (const unsigned char *)a + an &&
              pb == (const unsigned char *)b + bn;
  msgpack_unpacked ua, ub;
  msgpack_unpacked_init(&ua);
  msgpack_unpacked_init(&ub);
  size_t oa = 0, ob = 0;
  int ra = msgpack_unpack_next(&ua, a, an, &oa);
  int rb = msgpack_unpack_next(&ub, b, bn, &ob);
  bool same = walk;
  if (ra == MSGPACK_UNPACK_SUCCESS && rb == MSGPACK_UNPACK_SUCCESS)
    same = walk && oa == an && ob == bn && obj_equal(&ua.data, &ub.data);
  else if (ra != rb)
    same = false;
  msgpack_unpacked_destroy(&ua);
  msgpack_unpacked_destroy(&ub);
  return same;
}

// --- The slow path and the oracle ---------------------------------------

static int json_depth(const json_t *v) {
  int d = 0;
  if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) {
      int c = 1 + json_depth(json_array_get(v, i));
      d = c > d ? c : d;
    }
  } else if (json_is_object(v)) {
    void *it = json_object_iter((json_t *)(uintptr_t)v);
    for (; it; it = json_object_iter_next((json_t *)(uintptr_t)v, it)) {
      int c = 1 + json_depth(json_object_iter_value(it));
      d = c > d ? c : d;
    }
  }
  return d;
}

struct outcome {
  bool slow_ok, fast_ok;
  bool fallback;  // jansson accepts, but json2mp must leave it to the slow path
  bool same;      // both succeeded with equal values
  bool dirty;     // json2mp failed but left bytes in the buffer
  bool tree;      // jsonfast_load gave json_loadb's tree (or its error)
  bool deep;      // jansson accepts, deeper than JSONFAST_MAX_DEPTH
  bool tree_fast; // jsonfast_tree built it (not left to json_loadb)
};

// jsonfast_load(text) is json_loadb(text, 0): equal values with keys in the
// same order (compared as compact text), or both NULL with the same error.
// *fast tells whether jsonfast_tree built it.
static bool tree_same(const char *text, size_t len, bool *fast) {
  json_error_t e1, e2;
  json_t *a = json_loadb(text, len, 0, &e1);
  json_t *b = jsonfast_tree(text, len);
  *fast = b != NULL;
  if (!b)
    b = jsonfast_load(text, len, &e2);
  bool same;
  if (!a || !b) {
    same =
        !a && !b && strcmp(e1.text, e2.text) == 0 && e1.position == e2.position;
  } else {
    char *da = json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY);
    char *db = json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY);
    same = da && db && strcmp(da, db) == 0 && json_equal(a, b);
    free(da);
    free(db);
  }
  json_decref(a);
  json_decref(b);
  return same;
}

static struct outcome run_both(const char *text, size_t len) {
  struct outcome o = {0};
  json_error_t err;
  json_t *v = json_loadb(text, len, 0, &err);
  msgpack_sbuffer slow, fast;
  msgpack_sbuffer_init(&slow);
  msgpack_sbuffer_init(&fast);
  if (v) {
    o.slow_ok = true;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &slow, msgpack_sbuffer_write);
    jsonpack_pack(&pk, v);
    json_t *strict = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    o.fallback = json_depth(v) > JSONPACK_MAX_DEPTH || !strict;
    o.deep = json_depth(v) > JSONFAST_MAX_DEPTH;
    json_decref(strict);
    json_decref(v);
  }
  o.fast_ok = json2mp(&fast, text, len);
  o.dirty = !o.fast_ok && fast.size != 0;
  if (o.slow_ok && o.fast_ok)
    o.same = mp_same(slow.data, slow.size, fast.data, fast.size);
  o.tree = tree_same(text, len, &o.tree_fast);
  msgpack_sbuffer_destroy(&slow);
  msgpack_sbuffer_destroy(&fast);
  return o;
}

// --- Hand-written cases ---------------------------------------------------

static void print_escaped(const char *s, size_t n);

struct tcase {
  const char *json;
  size_t len;   // 0: strlen(json); set for inputs holding NUL bytes
  bool jansson; // json_loadb accepts it
  bool fast;    // json2mp succeeds (false with jansson true: fallback)
};

#define NUL(s) s, sizeof(s) - 1 // a literal holding NUL bytes
#define Y true
#define N false

static const struct tcase cases[] = {
    // Structure and whitespace.
    {"{}", 0, Y, Y},
    {"[]", 0, Y, Y},
    {" \t\r\n[ ] \n", 0, Y, Y},
    {"{ \"a\" : [ 1 , 2 ] , \"b\" :{ } }", 0, Y, Y},
    {"", 0, N, N},
    {"   ", 0, N, N},
    {"\f[]", 0, N, N},
    {"\xef\xbb\xbf{}", 0, N, N},
    {"1", 0, N, N},
    {"\"s\"", 0, N, N},
    {"null", 0, N, N},
    {"[1] x", 0, N, N},
    {"[1][2]", 0, N, N},
    {NUL("[1]\0"), N, N},
    {"[1]\xff", 0, N, N},
    {"[1,]", 0, N, N},
    {"[,1]", 0, N, N},
    {"[1 2]", 0, N, N},
    {"[", 0, N, N},
    {"[1", 0, N, N},
    {"]", 0, N, N},
    {"[}", 0, N, N},
    {"{\"a\":1,}", 0, N, N},
    {"{\"a\" 1}", 0, N, N},
    {"{\"a\":}", 0, N, N},
    {"{a:1}", 0, N, N},
    {"{1:1}", 0, N, N},
    // Literals.
    {"[true,false,null]", 0, Y, Y},
    {"[tru]", 0, N, N},
    {"[truex]", 0, N, N},
    {"[True]", 0, N, N},
    {"[nul]", 0, N, N},
    {"[true1]", 0, N, N},
    // Escapes.
    {"[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", 0, Y, Y},
    {"[\"\\u0041\\u00e9\\u20AC\\uffff\\u07FF\\u0800\"]", 0, Y, Y},
    {"[\"\\ud83d\\ude00\",\"\\uDBFF\\uDFFF\"]", 0, Y, Y},
    {"[\"\\ud800\"]", 0, N, N},
    {"[\"\\udc00\\ud800\"]", 0, N, N},
    {"[\"\\ud800\\u0041\"]", 0, N, N},
    {"[\"\\ud800\\ud800\"]", 0, N, N},
    {"[\"\\ud800x\"]", 0, N, N},
    {"[\"\\ud800\\n\"]", 0, N, N},
    {"[\"\\u0000\"]", 0, N, N},
    {"{\"\\u0000\":1}", 0, N, N},
    {"[\"\\u12\"]", 0, N, N},
    {"[\"\\u12G4\"]", 0, N, N},
    {"[\"\\x\"]", 0, N, N},
    {"[\"\\'\"]", 0, N, N},
    {"[\"\\", 0, N, N},
    {"[\"a", 0, N, N},
    // Raw bytes in strings: controls no, DEL yes, NUL no.
    {"[\"tab\there\"]", 0, N, N},
    {"[\"new\nline\"]", 0, N, N},
    {NUL("[\"a\0b\"]"), N, N},
    {"[\"\x7f\"]", 0, Y, Y},
    // UTF-8, valid and invalid of each kind.
    {"[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbf\"]", 0, Y, Y},
    {"[\"\xc2\x80\xe0\xa0\x80\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"]", 0, Y, Y},
    {"{\"\xc3\xa9t\xc3\xa9\":\"\xe2\x82\xac\"}", 0, Y, Y},
    {"[\"\x80\"]", 0, N, N},
    {"[\"\xbf\"]", 0, N, N},
    {"[\"\xc0\x80\"]", 0, N, N},
    {"[\"\xc1\xbf\"]", 0, N, N},
    {"[\"\xe0\x80\x80\"]", 0, N, N},
    {"[\"\xe0\x9f\xbf\"]", 0, N, N},
    {"[\"\xf0\x80\x80\x80\"]", 0, N, N},
    {"[\"\xf0\x8f\xbf\xbf\"]", 0, N, N},
    {"[\"\xed\xa0\x80\"]", 0, N, N},
    {"[\"\xed\xbf\xbf\"]", 0, N, N},
    {"[\"\xf4\x90\x80\x80\"]", 0, N, N},
    {"[\"\xf5\x80\x80\x80\"]", 0, N, N},
    {"[\"\xff\"]", 0, N, N},
    {"[\"\xc3\"]", 0, N, N},
    {"[\"\xe2\x82\"]", 0, N, N},
    {"[\"\xc3", 0, N, N},
    {"[\xc3\xa9]", 0, N, N},
    // Numbers.
    {"[0,-0,1,-1,127,128,-32,-33,255,256,65535,65536,4294967296]", 0, Y, Y},
    {"[-0.0,0.0,1.0,1E+2,1e-2,1E2,1.5e3,0.1,2.5E-3]", 0, Y, Y},
    {"[9223372036854775807,-9223372036854775808]", 0, Y, Y},
    {"[9223372036854775808]", 0, N, N},
    {"[-9223372036854775809]", 0, N, N},
    {"[100000000000000000000]", 0, N, N},
    {"[1e400]", 0, N, N},
    {"[-1e400]", 0, N, N},
    {"[1.8e308]", 0, N, N},
    {"[1.7976931348623157e308,4.9e-324,1e-400,-1e-400]", 0, Y, Y},
    {"[123456789012345678901234567890.5,9223372036854775808.0]", 0, Y, Y},
    {"[01]", 0, N, N},
    {"[-01]", 0, N, N},
    {"[00]", 0, N, N},
    {"[+1]", 0, N, N},
    {"[.5]", 0, N, N},
    {"[5.]", 0, N, N},
    {"[1.e5]", 0, N, N},
    {"[1e]", 0, N, N},
    {"[1e+]", 0, N, N},
    {"[-]", 0, N, N},
    {"[-a]", 0, N, N},
    {"[1.5.3]", 0, N, N},
    {"[0x10]", 0, N, N},
    {"[Infinity]", 0, N, N},
    {"[NaN]", 0, N, N},
    {"[1e5x]", 0, N, N},
    // jansson drops one NUL byte right after a number or literal (its
    // stream loses an ungot NUL); strings and containers end without one.
    {NUL("[1\0]"), Y, Y},
    {NUL("[1.5\0,true\0,null\0]"), Y, Y},
    {NUL("{\"a\":false\0}"), Y, Y},
    {NUL("[1\0\0]"), N, N},
    {NUL("[1\0 2]"), N, N},
    {NUL("[\"a\"\0]"), N, N},
    {NUL("[[]\0]"), N, N},
    {NUL("[\0]"), N, N},
    // A real longer than 100 bytes: valid, but left to the slow path.
    {"[0.00000000000000000000000000000000000000000000000000000000000000000"
     "000000000000000000000000000000000000000001]",
     0, Y, N},
    // Duplicate keys: jansson keeps the first place with the last value.
    {"{\"a\":1,\"b\":2,\"a\":3}", 0, Y, N},
    {"{\"a\":{\"a\":1},\"b\":{\"a\":2}}", 0, Y, Y},
    // Realistic ACP lines.
    {"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
     "\"sessionId\":\"sess_01HZX\",\"update\":{\"sessionUpdate\":"
     "\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":"
     "\"Here is the plan:\\n1. Read `src/main.c`\\n2. Fix \\\"it\\\" "
     "\\u2014 done \xe2\x9c\x85\"}}}}",
     0, Y, Y},
    {"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{"
     "\"sessionId\":\"s1\",\"update\":{\"sessionUpdate\":\"tool_call\","
     "\"toolCallId\":\"call_7\",\"title\":\"Edit src/a.c\",\"kind\":\"edit\","
     "\"status\":\"pending\",\"locations\":[{\"path\":\"/w/src/a.c\","
     "\"line\":42}],\"rawInput\":{\"old\":\"int x = 1;\",\"new\":\"int x = "
     "2;\",\"replace_all\":false,\"score\":0.75,\"n\":-3,\"opt\":null},"
     "\"content\":[{\"type\":\"diff\",\"path\":\"/w/src/a.c\",\"oldText\":"
     "\"int x = 1;\\n\",\"newText\":\"int x = 2;\\n\"},{\"type\":\"content\","
     "\"content\":{\"type\":\"text\",\"text\":\"\\t\\u00e9\\ud83d\\ude80\"}}]"
     "}}}\r\n",
     0, Y, Y},
};

static char *repeat(const char *open, int n, const char *mid,
                    const char *close) {
  size_t lo = strlen(open), lm = strlen(mid), lc = strlen(close);
  char *s = malloc(n * (lo + lc) + lm + 1);
  char *p = s;
  for (int i = 0; i < n; i++, p += lo)
    memcpy(p, open, lo);
  memcpy(p, mid, lm);
  p += lm;
  for (int i = 0; i < n; i++, p += lc)
    memcpy(p, close, lc);
  *p = '\0';
  return s;
}

// A number token longer than JSONLEX_NUM_MAX: jsonfast leaves it to
// json_loadb (the hand-written cases have no such run inside a string).
static bool long_number(const char *s, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    run = s[i] && strchr("0123456789+-.eE", s[i]) ? run + 1 : 0;
    if (run > JSONLEX_NUM_MAX)
      return true;
  }
  return false;
}

static void check_case(const char *desc, const char *json, size_t len,
                       bool jansson, bool fast) {
  struct outcome o = run_both(json, len);
  bool want_tree = o.slow_ok && !o.deep && !long_number(json, len);
  bool good = o.slow_ok == jansson && o.fast_ok == fast && !o.dirty &&
              (!o.slow_ok || !o.fast_ok || o.same) && o.tree &&
              o.tree_fast == want_tree;
  if (!ok(good, "%s", desc))
    printf("#   jansson %d (want %d), json2mp %d (want %d), same %d, "
           "jsonfast %d, its fast path %d (want %d)\n",
           o.slow_ok, jansson, o.fast_ok, fast, o.same, o.tree, o.tree_fast,
           want_tree);
}

static void test_cases(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct tcase *c = &cases[i];
    size_t len = c->len ? c->len : strlen(c->json);
    char desc[96];
    snprintf(desc, sizeof(desc), "case %zu: %.60s", i, c->json);
    for (char *p = desc; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
        *p = '?';
    check_case(desc, c->json, len, c->jansson, c->fast);
  }

  // Depth: jsonpack packs values deeper than 64 as nil; json2mp declines.
  struct {
    const char *open, *mid, *close;
    int n;
    bool fast;
    const char *desc;
  } deep[] = {
      {"[", "", "]", 65, Y, "65 arrays, the innermost empty at depth 64"},
      {"[", "1", "]", 64, Y, "a scalar at depth 64"},
      {"[", "1", "]", 65, N, "a scalar at depth 65 falls back"},
      {"[", "", "]", 66, N, "66 arrays fall back"},
      {"{\"k\":", "{}", "}", 64, Y, "65 objects"},
      {"{\"k\":", "{}", "}", 65, N, "66 objects fall back"},
      {"[{\"k\":", "0", "}]", 32, Y, "mixed, 64 deep"},
      {"[{\"k\":", "[0]", "}]", 32, N, "mixed, 65 deep falls back"},
  };
  for (size_t i = 0; i < sizeof(deep) / sizeof(deep[0]); i++) {
    char *s = repeat(deep[i].open, deep[i].n, deep[i].mid, deep[i].close);
    check_case(deep[i].desc, s, strlen(s), Y, deep[i].fast);
    free(s);
  }

  // Strings over 64 KiB, plain and escaped (runs between escapes).
  size_t big = 70000;
  char *s = malloc(big * 2 + 16);
  char *p = s;
  p += sprintf(p, "[\"");
  for (size_t i = 0; i < big; i++)
    *p++ = (char)('a' + i % 26);
  p += sprintf(p, "\"]");
  check_case("a 70000-byte string", s, (size_t)(p - s), Y, Y);
  p = s;
  p += sprintf(p, "{\"k\":\"");
  for (size_t i = 0; i < big / 2; i++) {
    if (i % 97 == 0) {
      memcpy(p, "\\n", 2);
      p += 2;
    } else if (i % 89 == 0) {
      memcpy(p, "\xc3\xa9", 2);
      p += 2;
    } else {
      *p++ = 'x';
    }
  }
  p += sprintf(p, "\"}");
  check_case("a 70000-byte string with escapes", s, (size_t)(p - s), Y, Y);
  free(s);

  // Every byte value at every offset of a string and of a key, and before
  // an escape: the strings are scanned sixteen and eight bytes at a time,
  // so each byte must be caught in every lane and in the tail.
  int bad = 0;
  for (int at = 0; at < 40; at++)
    for (int c = 0; c < 256; c++)
      for (int form = 0; form < 3; form++) {
        char t[64];
        size_t n = 0;
        n += (size_t)sprintf(t, form == 1 ? "{\"" : "[\"");
        for (int i = 0; i < 40; i++)
          t[n++] = i == at ? (char)c : (char)('a' + i % 26);
        if (form == 2)
          n += (size_t)sprintf(t + n, "\\n");
        n += (size_t)sprintf(t + n, form == 1 ? "\":1}" : "\"]");
        struct outcome o = run_both(t, n);
        if (!(o.tree && o.tree_fast == o.slow_ok && !o.dirty &&
              (!o.fast_ok || o.same)) &&
            bad++ == 0)
          print_escaped(t, n);
      }
  ok(bad == 0, "every byte at every offset of a string: %d mismatches", bad);

  // More keys than json2mp remembers: valid, left to the slow path.
  s = malloc(JSON2MP_MAX_KEYS * 16 + 16);
  p = s;
  *p++ = '{';
  for (int i = 0; i <= JSON2MP_MAX_KEYS; i++)
    p += sprintf(p, "%s\"k%d\":%d", i ? "," : "", i, i);
  *p++ = '}';
  check_case("more keys than JSON2MP_MAX_KEYS fall back", s, (size_t)(p - s), Y,
             N);
  p = s;
  *p++ = '{';
  for (int i = 0; i < JSON2MP_MAX_KEYS; i++)
    p += sprintf(p, "%s\"k%d\":%d", i ? "," : "", i, i);
  *p++ = '}';
  check_case("JSON2MP_MAX_KEYS keys", s, (size_t)(p - s), Y, Y);
  free(s);
}

// --- Random documents -----------------------------------------------------

static uint64_t rng_state;

static uint64_t rnd(void) {
  // splitmix64: deterministic across platforms.
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

static unsigned below(unsigned n) {
  return (unsigned)(rnd() % n);
}

struct buf {
  char *data;
  size_t len, cap;
};

static void put(struct buf *b, const void *s, size_t n) {
  if (!n)
    return;
  if (b->len + n > b->cap) {
    b->cap = (b->len + n) * 2 + 64;
    b->data = realloc(b->data, b->cap);
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

static void puts_(struct buf *b, const char *s) {
  put(b, s, strlen(s));
}

// Clean documents hold no invalid pieces, so that mutations and a few
// dirty documents are not all jansson gets to accept or refuse.
static bool dirty;

static void ws(struct buf *b) {
  static const char *const w[] = {"", "", "", " ", "\n", "\t", "\r\n", "  "};
  puts_(b, w[below(8)]);
}

static void gen_utf8(struct buf *b) {
  unsigned char o[4];
  uint32_t cp;
  switch (below(4)) {
  case 0:
    cp = 0x80 + below(0x800 - 0x80);
    o[0] = (unsigned char)(0xc0 | cp >> 6);
    o[1] = (unsigned char)(0x80 | (cp & 0x3f));
    put(b, o, 2);
    return;
  case 1:
    do
      cp = 0x800 + below(0x10000 - 0x800);
    while (cp >= 0xd800 && cp <= 0xdfff);
    o[0] = (unsigned char)(0xe0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp & 0x3f));
    put(b, o, 3);
    return;
  case 2:
    cp = 0x10000 + below(0x100000);
    o[0] = (unsigned char)(0xf0 | cp >> 18);
    o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    o[3] = (unsigned char)(0x80 | (cp & 0x3f));
    put(b, o, 4);
    return;
  default: {
    if (!dirty || below(4)) {
      gen_utf8(b); // mostly valid, some invalid
      return;
    }
    // Likely invalid: random high bytes.
    unsigned n = 1 + below(4);
    for (unsigned i = 0; i < n; i++)
      o[i] = (unsigned char)(0x80 + below(0x80));
    put(b, o, n);
  }
  }
}

static void gen_string(struct buf *b) {
  static const char *const esc[] = {"\\\"", "\\\\", "\\/", "\\b",    "\\f",
                                    "\\n",  "\\r",  "\\t", "\\u0041"};
  static const char *const rare[] = {"\\ud83d\\ude00",
                                     "\\ud800",
                                     "\\udfff",
                                     "\\u0000",
                                     "\\ud800\\u0041",
                                     "\\x",
                                     "\t",
                                     "\\uDBFF\\uDFFF",
                                     "\x7f"};
  puts_(b, "\"");
  unsigned n = below(4) ? below(12) : below(200);
  for (unsigned i = 0; i < n; i++) {
    unsigned k = below(100);
    if (k < 60) {
      char c = (char)(0x20 + below(0x5f));
      if (c == '"' || c == '\\')
        c = 'q';
      put(b, &c, 1);
    } else if (k < 75) {
      puts_(b, esc[below(9)]);
    } else if (k < 82) {
      char u[8];
      unsigned cp = 1 + below(0xffff);
      if (!dirty && cp >= 0xd800 && cp <= 0xdfff)
        cp = 0xfffd;
      snprintf(u, sizeof(u), "\\u%04x", cp);
      puts_(b, u);
    } else if (k < 99) {
      gen_utf8(b);
    } else {
      // The valid ones first.
      puts_(b, rare[dirty ? below(9) : below(2) * 8]);
    }
  }
  puts_(b, "\"");
}

static void gen_number(struct buf *b) {
  static const char *const fixed[] = {"0",
                                      "-0",
                                      "-0.0",
                                      "1e-400",
                                      "9223372036854775807",
                                      "1e400",
                                      "01",
                                      "1.",
                                      ".5",
                                      "1e",
                                      "+1",
                                      "-",
                                      "9223372036854775808",
                                      "-9223372036854775808",
                                      "-9223372036854775809",
                                      "1E+2",
                                      "4.9e-324",
                                      "2.2250738585072014e-308"};
  char s[64];
  switch (below(6)) {
  case 0:
    // The first five are valid.
    puts_(b, fixed[below(dirty ? sizeof(fixed) / sizeof(fixed[0]) : 5)]);
    return;
  // One random draw per statement: argument order is unspecified, and the
  // documents must not depend on the compiler.
  case 1: {
    const char *sign = below(2) ? "-" : "";
    unsigned shift = dirty ? below(64) : 1 + below(63);
    snprintf(s, sizeof(s), "%s%" PRIu64, sign, rnd() >> shift);
    break;
  }
  case 2:
    snprintf(s, sizeof(s), "%d", (int)below(300) - 150);
    break;
  case 3:
    snprintf(s, sizeof(s), "%.17g", (double)(int64_t)rnd() / 1e9);
    break;
  case 4: {
    unsigned ip = below(1000), fp = below(100000);
    const char *esign = below(2) ? "-" : (below(2) ? "+" : "");
    unsigned e = below(dirty ? 330 : 300);
    snprintf(s, sizeof(s), "%u.%ue%s%u", ip, fp, esign, e);
    break;
  }
  default: {
    const char *sign = below(2) ? "-" : "";
    unsigned ip = below(100);
    snprintf(s, sizeof(s), "%s%u%s", sign, ip, below(2) ? ".5" : "E3");
    break;
  }
  }
  puts_(b, s);
}

static void gen_value(struct buf *b, int depth, int max);

static void gen_container(struct buf *b, int depth, int max, bool obj) {
  static const char *const keys[] = {"\"a\"",    "\"b\"",       "\"type\"",
                                     "\"text\"", "\"\\u00e9\"", "\"\xc3\xa9\""};
  puts_(b, obj ? "{" : "[");
  ws(b);
  unsigned n = depth >= max ? 0 : below(depth < 3 ? 6 : 3);
  for (unsigned i = 0; i < n; i++) {
    if (i) {
      puts_(b, ",");
      ws(b);
    }
    if (obj) {
      if (below(3))
        puts_(b, keys[below(6)]);
      else
        gen_string(b);
      ws(b);
      puts_(b, ":");
      ws(b);
    }
    gen_value(b, depth + 1, max);
    ws(b);
  }
  puts_(b, obj ? "}" : "]");
}

static void gen_value(struct buf *b, int depth, int max) {
  unsigned k = below(depth < max ? 10 : 6);
  if (k == 0)
    puts_(b, (const char *const[]){"true", "false", "null"}[below(3)]);
  else if (k < 3)
    gen_number(b);
  else if (k < 6)
    gen_string(b);
  else
    gen_container(b, depth, max, k < 8);
}

// A chain of n containers with a small random value inside.
static void gen_deep(struct buf *b, int n) {
  bool obj[80];
  for (int i = 0; i < n; i++) {
    obj[i] = below(2);
    puts_(b, obj[i] ? "{\"k\":" : "[");
  }
  if (below(2))
    gen_value(b, 0, 1);
  for (int i = n - 1; i >= 0; i--)
    puts_(b, obj[i] ? "}" : "]");
}

static void mutate(struct buf *b) {
  static const char interesting[] = "\"\\{}[],:0-.eE u\x01\x80\xbf\xc3\xff\0";
  if (!b->len)
    return;
  size_t at = below((unsigned)b->len);
  char c =
      below(2) ? (char)below(256) : interesting[below(sizeof(interesting) - 1)];
  switch (below(4)) {
  case 0:
    b->data[at] = c;
    break;
  case 1:
    memmove(b->data + at, b->data + at + 1, b->len - at - 1);
    b->len--;
    break;
  case 2:
    put(b, "", 1);
    memmove(b->data + at + 1, b->data + at, b->len - at - 1);
    b->data[at] = c;
    break;
  default:
    b->len = at;
    break;
  }
}

static void print_escaped(const char *s, size_t n) {
  printf("#   input (%zu bytes): \"", n);
  for (size_t i = 0; i < n && i < 2000; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c >= 0x20 && c < 0x7f)
      putchar(c);
    else
      printf("\\x%02x", c);
  }
  printf("\"\n");
}

static void test_random(void) {
  rng_state = 20240611;
  int runs = 20000, bad = 0, accepted = 0, fast = 0, fallback = 0;
  struct buf b = {0};
  for (int i = 0; i < runs; i++) {
    b.len = 0;
    dirty = below(2);
    ws(&b);
    if (below(100) == 0) {
      gen_deep(&b, 60 + (int)below(10));
    } else {
      int max = 1 + (int)below(6);
      gen_container(&b, 0, max, below(2));
    }
    ws(&b);
    if (below(3) == 0)
      for (unsigned m = 1 + below(3); m; m--)
        mutate(&b);
    struct outcome o = run_both(b.data, b.len);
    bool want_fast = o.slow_ok && !o.fallback;
    bool good = o.fast_ok == want_fast && !o.dirty && (!o.fast_ok || o.same) &&
                o.tree && o.tree_fast == (o.slow_ok && !o.deep);
    accepted += o.slow_ok;
    fast += o.fast_ok;
    fallback += o.slow_ok && o.fallback;
    if (!good && bad++ == 0) {
      printf("# first mismatch: jansson %d (fallback %d), json2mp %d, same "
             "%d, jsonfast %d (fast path %d, deep %d)\n",
             o.slow_ok, o.fallback, o.fast_ok, o.same, o.tree, o.tree_fast,
             o.deep);
      print_escaped(b.data, b.len);
    }
  }
  free(b.data);
  printf("# %d documents: jansson accepted %d (%d left to the slow path), "
         "json2mp %d\n",
         runs, accepted, fallback, fast);
  ok(bad == 0, "%d random documents, %d mismatches", runs, bad);
}

// --- The output buffer ------------------------------------------------------

static void test_buffer(void) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_str_with_body(&pk, "prefix", 6);
  size_t before = sb.size;
  char saved[16];
  memcpy(saved, sb.data, before);

  // Fails late, after writing more than the buffer held (it grows).
  char *s = malloc(2000 * 20 + 16);
  size_t n = 0;
  s[n++] = '[';
  for (int i = 0; i < 2000; i++)
    n += (size_t)sprintf(s + n, "\"0123456789abcde%c\",", 'a' + i % 26);
  n += (size_t)sprintf(s + n, "1}");
  ok(!json2mp(&sb, s, n), "a late error fails");
  is_size(sb.size, before, "the size is restored");
  ok(memcmp(sb.data, saved, before) == 0, "earlier content is intact");
  ok(!json2mp(&sb, NULL, 0), "NULL text fails");
  is_size(sb.size, before, "the size is unchanged");

  // Appends after what is there: both values unpack in order.
  s[n - 1] = ']';
  ok(json2mp(&sb, s, n), "appends after existing content");
  msgpack_sbuffer slow;
  msgpack_sbuffer_init(&slow);
  msgpack_packer spk;
  msgpack_packer_init(&spk, &slow, msgpack_sbuffer_write);
  json_error_t err;
  json_t *v = json_loadb(s, n, 0, &err);
  jsonpack_pack(&spk, v);
  json_decref(v);
  ok(memcmp(sb.data, saved, before) == 0, "the prefix is still first");
  ok(mp_same(sb.data + before, sb.size - before, slow.data, slow.size),
     "the appended value equals the slow path's");

  size_t mid = sb.size;
  ok(json2mp(&sb, "{\"k\":[1,2.5,\"x\"]}", 17), "appends a second value");
  const unsigned char *p = (const unsigned char *)sb.data + mid;
  static const char want[] = "{\"k\":[1,2.5,\"x\"]}";
  v = json_loadb(want, sizeof(want) - 1, 0, &err);
  slow.size = 0;
  jsonpack_pack(&spk, v);
  json_decref(v);
  ok(mp_same((const char *)p, sb.size - mid, slow.data, slow.size),
     "the second value equals the slow path's");
  msgpack_sbuffer_destroy(&slow);
  msgpack_sbuffer_destroy(&sb);
  free(s);

  // An empty, never-allocated buffer is restored to empty.
  msgpack_sbuffer_init(&sb);
  ok(!json2mp(&sb, "[1,2,x]", 7), "fails into an empty buffer");
  is_size(sb.size, 0, "the empty buffer stays empty");
  msgpack_sbuffer_destroy(&sb);
}

int main(void) {
  test_cases();
  test_random();
  test_buffer();
  jsonfast_release();
  return done_testing();
}
