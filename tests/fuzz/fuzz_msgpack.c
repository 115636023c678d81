// The msgpack-RPC decoder (nvim_rpc_decoder_*, nvim_rpc_validate).
//
// Input: byte 0 picks where the stream is cut in two; the rest is what
// Neovim writes to the broker's stdin. Properties:
//  * every message handed out is consistent: a request or notification has
//    a str/bin method whose method_len is its size and an array of params;
//    a request or response a 32-bit msgid; a response its error and result;
//  * cutting the stream anywhere gives the same messages and the same
//    verdict (broken or not) as feeding it at once;
//  * a message packed again (msgpack_pack_object) decodes to itself;
//  * a decoder with a small frame bound never crashes either.
//
// Known (tests/fuzz/regressions/msgpack-huge-container.bin): msgpack-c
// allocates a container's declared element count up front, before any
// element arrives (24 bytes per array element, 48 per map pair), so a
// 5-byte header "\xdd\xff\xff\xff\xff" asks malloc for ~100 GB; max_message
// bounds the frame's bytes, not its declared counts. Inputs that declare a
// container larger than the bytes that follow are skipped unless
// FUZZ_STRICT=1 is set (then the reproducer is reported again).

#include <msgpack.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "io/nvim_rpc.h"

#define MAX_MESSAGE ((size_t)64 * 1024 * 1024) // as the broker's channel

struct seen {
  uint64_t hash; // of every message's type, msgid and method, in order
  size_t n;
};

static uint64_t mix(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ s[i]) * 0x100000001b3u;
  return h;
}

static void check_msg(const struct nvim_rpc_msg *m) {
  FUZZ_CHECK(m->type == NVIM_RPC_REQUEST || m->type == NVIM_RPC_RESPONSE ||
                 m->type == NVIM_RPC_NOTIFICATION,
             "type %d", (int)m->type);
  if (m->type == NVIM_RPC_RESPONSE) {
    FUZZ_CHECK(m->error && m->result && !m->method && !m->params,
               "response fields");
    return;
  }
  // An empty method may come with a NULL pointer (msgpack-c's zero-length
  // str/bin); users compare method_len first.
  FUZZ_CHECK((m->method || m->method_len == 0) && m->params && !m->error &&
                 !m->result,
             "call fields");
  FUZZ_CHECK(m->params->type == MSGPACK_OBJECT_ARRAY, "params type %d",
             (int)m->params->type);
  FUZZ_CHECK(m->type != NVIM_RPC_NOTIFICATION || m->msgid == 0,
             "notification msgid %u", m->msgid);
}

struct repacked {
  struct nvim_rpc_msg orig;
  size_t n;
};

static void on_repacked(void *ud, const struct nvim_rpc_msg *m) {
  struct repacked *r = ud;
  const struct nvim_rpc_msg *orig = &r->orig;
  r->n++;
  check_msg(m);
  FUZZ_CHECK(m->type == orig->type && m->msgid == orig->msgid,
             "repacked type/msgid");
  FUZZ_CHECK(m->method_len == orig->method_len &&
                 (!m->method_len ||
                  memcmp(m->method, orig->method, m->method_len) == 0),
             "repacked method");
  if (m->params)
    FUZZ_CHECK(m->params->via.array.size == orig->params->via.array.size,
               "repacked params");
}

// The validated message, packed again, decodes to the same message (with
// d2, a decoder kept for the whole input: nothing stays in it between two
// messages, since each is complete).
static void repack(const struct nvim_rpc_decoder *d,
                   struct nvim_rpc_decoder *d2,
                   const struct nvim_rpc_msg *m) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  FUZZ_CHECK(msgpack_pack_object(&pk, d->result.data) == 0, "pack failed");
  struct repacked r = {*m, 0};
  char err[256];
  int rc = nvim_rpc_decoder_feed(d2, sb.data, sb.size, on_repacked, &r, err,
                                 sizeof(err));
  FUZZ_CHECK(rc == 0 && r.n == 1, "repacked message: %zu, %s", r.n,
             rc ? err : "");
  msgpack_sbuffer_destroy(&sb);
}

struct feed {
  struct seen seen;
  struct nvim_rpc_decoder *d, *d2; // d2: for repack, or NULL
};

static void on_msg(void *ud, const struct nvim_rpc_msg *m) {
  struct feed *f = ud;
  check_msg(m);
  f->seen.n++;
  uint32_t t = m->type;
  f->seen.hash = mix(f->seen.hash, &t, sizeof(t));
  f->seen.hash = mix(f->seen.hash, &m->msgid, sizeof(m->msgid));
  f->seen.hash = mix(f->seen.hash, &m->method_len, sizeof(m->method_len));
  if (m->method_len)
    f->seen.hash = mix(f->seen.hash, m->method, m->method_len);
  if (m->params)
    f->seen.hash = mix(f->seen.hash, &m->params->via.array.size,
                       sizeof(m->params->via.array.size));
  if (f->d2)
    repack(f->d, f->d2, m);
}

// Feeds the stream in pieces (cut at the given offsets); returns whether
// the decoder declared it broken.
static bool feed(const char *p, size_t n, const size_t *cuts, size_t ncuts,
                 size_t max, struct feed *f) {
  struct nvim_rpc_decoder d;
  FUZZ_CHECK(nvim_rpc_decoder_init(&d, max) == 0, "init");
  f->d = &d;
  f->seen.hash = 0xcbf29ce484222325u;
  bool broken = false;
  size_t at = 0;
  for (size_t i = 0; i <= ncuts && !broken; i++) {
    size_t end = i < ncuts ? cuts[i] : n;
    char err[256] = "";
    int rc = nvim_rpc_decoder_feed(&d, p + at, end - at, on_msg, f, err,
                                   sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
    FUZZ_CHECK(rc == 0 || err[0], "broken without a reason");
    broken = rc != 0;
    at = end;
  }
  nvim_rpc_decoder_free(&d);
  return broken;
}

static bool allow_huge;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  allow_huge = fuzz_strict();
  return 0;
}

static uint32_t be(const unsigned char *p, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++)
    v = v << 8 | p[i];
  return v;
}

// True when some array or map header in the stream declares more elements
// than bytes follow it. msgpack is a flat sequence of tokens (a container
// only declares how many of the next ones are its elements), so reading the
// tokens one after the other sees every header; it stops where msgpack-c
// would (0xc1, or the end).
static bool declares_huge(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned b = p[i];
    size_t head = 1, body = 0, count = 0;
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
      head = 1;
    } else if (b <= 0x8f) {
      count = 2 * (b & 15u);
    } else if (b <= 0x9f) {
      count = b & 15u;
    } else if (b <= 0xbf) {
      body = b & 31u;
    } else if (b == 0xc1) {
      return false; // never used: msgpack-c stops here
    } else {
      static const unsigned char fixed[] = {
          [0xca - 0xc4] = 5, [0xcb - 0xc4] = 9, [0xcc - 0xc4] = 2,
          [0xcd - 0xc4] = 3, [0xce - 0xc4] = 5, [0xcf - 0xc4] = 9,
          [0xd0 - 0xc4] = 2, [0xd1 - 0xc4] = 3, [0xd2 - 0xc4] = 5,
          [0xd3 - 0xc4] = 9, [0xd4 - 0xc4] = 3, [0xd5 - 0xc4] = 4,
          [0xd6 - 0xc4] = 6, [0xd7 - 0xc4] = 10, [0xd8 - 0xc4] = 18};
      // Length-prefixed: bin, ext, str (length bytes, then extra header
      // bytes before the body: ext's type).
      static const unsigned char lenbytes[] = {
          [0xc4 - 0xc4] = 1, [0xc5 - 0xc4] = 2, [0xc6 - 0xc4] = 4,
          [0xc7 - 0xc4] = 1, [0xc8 - 0xc4] = 2, [0xc9 - 0xc4] = 4,
          [0xd9 - 0xc4] = 1, [0xda - 0xc4] = 2, [0xdb - 0xc4] = 4,
          [0xdc - 0xc4] = 2, [0xdd - 0xc4] = 4, [0xde - 0xc4] = 2,
          [0xdf - 0xc4] = 4};
      unsigned k = b - 0xc4;
      if (k < sizeof(fixed) && fixed[k]) {
        head = fixed[k];
      } else {
        size_t lb = lenbytes[k];
        if (i + 1 + lb > n)
          return false;
        uint32_t v = be(p + i + 1, lb);
        head = 1 + lb + (b >= 0xc7 && b <= 0xc9);
        if (b >= 0xdc && b <= 0xdd)
          count = v;
        else if (b >= 0xde)
          count = 2 * (size_t)v;
        else
          body = v;
      }
    }
    if (i + head > n)
      return false;
    if (count > n - i - head)
      return true;
    if (body > n - i - head)
      return false;
    i += head + body;
  }
  return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const char *p = (const char *)data + 1;
  size_t n = size - 1, cut = data[0] * n / 255;
  if (!allow_huge && declares_huge(data + 1, n))
    return 0;

  struct nvim_rpc_decoder d2;
  FUZZ_CHECK(nvim_rpc_decoder_init(&d2, MAX_MESSAGE) == 0, "init");
  struct feed whole = {.d2 = &d2}, split = {0}, small = {0};
  bool b1 = feed(p, n, NULL, 0, MAX_MESSAGE, &whole);
  nvim_rpc_decoder_free(&d2);
  bool b2 = feed(p, n, &cut, 1, MAX_MESSAGE, &split);
  FUZZ_CHECK(b1 == b2, "broken at once %d, in two feeds %d (cut %zu)", b1, b2,
             cut);
  FUZZ_CHECK(whole.seen.n == split.seen.n && whole.seen.hash == split.seen.hash,
             "%zu messages at once, %zu in two feeds (cut %zu)", whole.seen.n,
             split.seen.n, cut);
  // A small bound: frames larger than it are refused while they stream.
  if (data[0] & 1)
    feed(p, n, &cut, 1, 1 + (data[0] >> 1 & 63), &small);
  return 0;
}
