#include "json2mp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "jsonlex.h"
#include "jsonpack.h"

// An open array or object. Its header is a 32-bit one written with a zero
// count, patched when it closes.
struct frame {
  size_t hdr;     // offset in sb of the 0xdd / 0xdf byte
  uint32_t count; // elements or pairs so far
  uint32_t keys;  // objects: index in keys[] of their first key
  bool obj;
};

// A key of an open object, for the duplicate check.
struct key {
  size_t off; // offset in sb of the key's bytes (sb->data may move)
  uint32_t len;
  uint32_t hash;
};

struct j2m {
  msgpack_sbuffer *sb;
  const unsigned char *p, *end;
  int depth; // open containers
  uint32_t nkeys;
  struct frame stack[JSONPACK_MAX_DEPTH + 1];
  struct key keys[JSON2MP_MAX_KEYS];
};

// Room for n more bytes, growing like msgpack_sbuffer_write does.
static bool reserve(msgpack_sbuffer *sb, size_t n) {
  if (sb->alloc - sb->size >= n)
    return true;
  size_t want = sb->size + n;
  if (want < n)
    return false;
  size_t cap = sb->alloc ? sb->alloc : MSGPACK_SBUFFER_INIT_SIZE;
  while (cap < want)
    cap = cap > SIZE_MAX / 2 ? want : cap * 2;
  char *d = realloc(sb->data, cap);
  if (!d)
    return false;
  sb->data = d;
  sb->alloc = cap;
  return true;
}

static bool append(msgpack_sbuffer *sb, const void *src, size_t n) {
  if (!reserve(sb, n))
    return false;
  memcpy(sb->data + sb->size, src, n);
  sb->size += n;
  return true;
}

static void put_be32(char *o, uint32_t v) {
  o[0] = (char)(v >> 24);
  o[1] = (char)(v >> 16);
  o[2] = (char)(v >> 8);
  o[3] = (char)v;
}

static void skip_ws(struct j2m *j) {
  j->p = jsonlex_ws(j->p, j->end);
}

// The string whose opening quote is at j->p, as a msgpack str. Its body ends
// up at *off, *len bytes long.
static bool string(struct j2m *j, size_t *off, uint32_t *len) {
  msgpack_sbuffer *sb = j->sb;
  if (!reserve(sb, 5))
    return false;
  size_t hdr = sb->size;
  sb->size += 5;
  j->p++;
  for (;;) {
    // A run of bytes copied as they are: printable ASCII but '"' and '\',
    // and valid UTF-8 sequences.
    const unsigned char *run = j->p, *p = j->p;
    while ((p = jsonlex_plain(p, j->end)) < j->end && *p >= 0x80) {
      size_t n = utf8_len(p, j->end);
      if (!n)
        return false;
      p += n;
    }
    if (p > run && !append(sb, run, (size_t)(p - run)))
      return false;
    j->p = p;
    if (p == j->end)
      return false; // unterminated
    if (*p == '"')
      break;
    if (*p != '\\')
      return false; // a raw control character
    unsigned char out[4];
    size_t n = jsonlex_unescape(&j->p, j->end, out);
    if (!n || !append(sb, out, n))
      return false;
  }
  j->p++;
  size_t n = sb->size - hdr - 5;
  if (n > UINT32_MAX)
    return false;
  // Short strings (keys, mostly) get the narrowest header: moving them is
  // cheaper than sending the spare bytes.
  char *h = sb->data + hdr;
  size_t hlen;
  if (n < 32) {
    h[0] = (char)(0xa0 | n);
    hlen = 1;
  } else if (n < 256) {
    h[0] = (char)0xd9;
    h[1] = (char)n;
    hlen = 2;
  } else if (n < 65536) {
    h[0] = (char)0xda;
    h[1] = (char)(n >> 8);
    h[2] = (char)n;
    hlen = 3;
  } else {
    h[0] = (char)0xdb;
    put_be32(h + 1, (uint32_t)n);
    hlen = 5;
  }
  if (hlen < 5) {
    memmove(h + hlen, h + 5, n);
    sb->size -= 5 - hlen;
  }
  *off = hdr + hlen;
  *len = (uint32_t)n;
  return true;
}

// The number at j->p (jsonlex_number says which jansson accepts).
static bool number(struct j2m *j, msgpack_packer *pk) {
  bool real;
  long long i;
  double d;
  if (!jsonlex_number(&j->p, j->end, &real, &i, &d))
    return false;
  return (real ? msgpack_pack_double(pk, d) : msgpack_pack_int64(pk, i)) == 0;
}

static bool literal(struct j2m *j, const char *word, size_t n) {
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
    return false;
  j->p += n;
  return true;
}

static uint32_t fnv1a(const char *s, uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

// A key of the innermost object (its quote at j->p), then ':'. Duplicates go
// to the slow path: jansson keeps the first one's place with the last value.
static bool key(struct j2m *j) {
  if (j->p == j->end || *j->p != '"')
    return false;
  size_t off;
  uint32_t len;
  if (!string(j, &off, &len))
    return false;
  const char *s = j->sb->data + off;
  uint32_t h = fnv1a(s, len);
  const struct frame *f = &j->stack[j->depth - 1];
  for (uint32_t i = f->keys; i < j->nkeys; i++) {
    const struct key *k = &j->keys[i];
    if (k->hash == h && k->len == len &&
        memcmp(j->sb->data + k->off, s, len) == 0)
      return false;
  }
  if (j->nkeys == JSON2MP_MAX_KEYS)
    return false;
  j->keys[j->nkeys++] = (struct key){off, len, h};
  skip_ws(j);
  if (j->p == j->end || *j->p != ':')
    return false;
  j->p++;
  skip_ws(j);
  return true;
}

// Writes a container's header with a zero count and opens it.
static bool open_container(struct j2m *j, bool obj) {
  if (!reserve(j->sb, 5))
    return false;
  struct frame *f = &j->stack[j->depth++];
  f->hdr = j->sb->size;
  f->count = 0;
  f->keys = j->nkeys;
  f->obj = obj;
  j->sb->data[j->sb->size] = (char)(obj ? 0xdf : 0xdd);
  put_be32(j->sb->data + j->sb->size + 1, 0);
  j->sb->size += 5;
  j->p++;
  skip_ws(j);
  return true;
}

// Patches the innermost container's count and closes it.
static void close_container(struct j2m *j) {
  struct frame *f = &j->stack[--j->depth];
  if (f->count == 0) {
    // Nothing follows the header: the empty fix form fits in its place.
    j->sb->data[f->hdr] = (char)(f->obj ? 0x80 : 0x90);
    j->sb->size = f->hdr + 1;
  } else {
    put_be32(j->sb->data + f->hdr + 1, f->count);
  }
  if (f->obj)
    j->nkeys = f->keys;
  j->p++;
}

static bool run(struct j2m *j) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, j->sb, msgpack_sbuffer_write);
  skip_ws(j);
  // json_loadb without JSON_DECODE_ANY wants an array or object on top.
  if (j->p == j->end || (*j->p != '[' && *j->p != '{'))
    return false;
  for (;;) {
    // A value starts at j->p. jsonpack packs values this deep as nil: the
    // slow path does that.
    if (j->depth > JSONPACK_MAX_DEPTH || j->p == j->end)
      return false;
    bool ok;
    bool ungets = true; // numbers and literals: see below
    switch (*j->p) {
    case '{':
    case '[': {
      bool obj = *j->p == '{';
      if (!open_container(j, obj))
        return false;
      if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        close_container(j);
        ok = true;
        ungets = false;
        break;
      }
      if (obj && !key(j))
        return false;
      continue; // its first value
    }
    case '"': {
      size_t off;
      uint32_t len;
      ok = string(j, &off, &len);
      ungets = false;
      break;
    }
    case 't':
      ok = literal(j, "true", 4) && msgpack_pack_true(&pk) == 0;
      break;
    case 'f':
      ok = literal(j, "false", 5) && msgpack_pack_false(&pk) == 0;
      break;
    case 'n':
      ok = literal(j, "null", 4) && msgpack_pack_nil(&pk) == 0;
      break;
    default:
      ok = number(j, &pk);
      break;
    }
    if (!ok)
      return false;
    // jansson quirk: a number or literal ends by reading one byte too many
    // and ungetting it, and its stream drops an ungot NUL byte (it takes a
    // NUL in its one-character buffer for "empty"). So "[1\0]" loads as
    // [1]; match it.
    if (ungets && j->p < j->end && *j->p == '\0')
      j->p++;
    // A value ended: close the containers it ends, or go on to the next.
    for (;;) {
      if (j->depth == 0) {
        skip_ws(j);
        return j->p == j->end;
      }
      struct frame *f = &j->stack[j->depth - 1];
      if (f->count == UINT32_MAX)
        return false;
      f->count++;
      skip_ws(j);
      if (j->p == j->end)
        return false;
      if (*j->p == ',') {
        j->p++;
        skip_ws(j);
        if (f->obj && !key(j))
          return false;
        break;
      }
      if (*j->p != (f->obj ? '}' : ']'))
        return false;
      close_container(j);
    }
  }
}

bool json2mp(msgpack_sbuffer *sb, const char *text, size_t len) {
  size_t entry = sb->size;
  if (!text)
    return false;
  struct j2m j;
  j.sb = sb;
  j.p = (const unsigned char *)text;
  j.end = j.p + len;
  j.depth = 0;
  j.nkeys = 0;
  if (!run(&j)) {
    sb->size = entry;
    return false;
  }
  return true;
}
