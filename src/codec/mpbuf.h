// A small buffer in front of a msgpack packer: what is encoded here reaches
// the packer's writer in a few large writes instead of one per header and
// string (the writer cost more than the encoding, on the hot path of every
// `decided` and `permission` event). What does not fit goes to it directly.
#ifndef ACP_CODEC_MPBUF_H
#define ACP_CODEC_MPBUF_H

#include <msgpack.h>
#include <stddef.h>
#include <string.h>

struct mpbuf {
  msgpack_packer *pk;
  size_t len;
  char buf[2048];
};

// Hands what is buffered to the packer's writer.
void mpbuf_flush(struct mpbuf *m);
// mpbuf_put when the n bytes do not fit: flushes first, and what is larger
// than the buffer goes to the writer directly.
void mpbuf_put_slow(struct mpbuf *m, const void *p, size_t n);

// Appends n bytes.
static inline void mpbuf_put(struct mpbuf *m, const void *p, size_t n) {
  if (m->len + n > sizeof(m->buf)) {
    mpbuf_put_slow(m, p, n);
    return;
  }
  memcpy(m->buf + m->len, p, n);
  m->len += n;
}

// A header: fix (small) or 16/32-bit big-endian length after tag16/tag32.
static inline void mpbuf_head(struct mpbuf *m, unsigned fix, size_t fixmax,
                              unsigned char tag16, unsigned char tag32,
                              size_t n) {
  unsigned char h[5];
  size_t k;
  if (n <= fixmax) {
    h[0] = (unsigned char)(fix | n);
    k = 1;
  } else if (n <= 0xffff) {
    h[0] = tag16;
    h[1] = (unsigned char)(n >> 8);
    h[2] = (unsigned char)n;
    k = 3;
  } else {
    h[0] = tag32;
    h[1] = (unsigned char)(n >> 24);
    h[2] = (unsigned char)(n >> 16);
    h[3] = (unsigned char)(n >> 8);
    h[4] = (unsigned char)n;
    k = 5;
  }
  mpbuf_put(m, h, k);
}

// A string as msgpack-c and jsonpack write it: fixstr, str8, str16, str32.
static inline void mpbuf_str(struct mpbuf *m, const char *s, size_t n) {
  if (n <= 31 && m->len + 1 + n <= sizeof(m->buf)) { // fixstr: most are
    m->buf[m->len] = (char)(0xa0 | n);
    memcpy(m->buf + m->len + 1, s, n);
    m->len += 1 + n;
    return;
  }
  if (n > 31 && n <= 0xff) { // str8
    unsigned char h[2] = {0xd9, (unsigned char)n};
    mpbuf_put(m, h, 2);
  } else {
    mpbuf_head(m, 0xa0, 31, 0xda, 0xdb, n);
  }
  mpbuf_put(m, s, n);
}

static inline void mpbuf_array(struct mpbuf *m, size_t n) {
  mpbuf_head(m, 0x90, 15, 0xdc, 0xdd, n);
}

#endif
