#include "mpbuf.h"

// Not inline: the writer is handed the buffer, of which only the first len
// bytes were written (inlined, GCC's -Wmaybe-uninitialized cannot tell).
void mpbuf_flush(struct mpbuf *m) {
  if (m->len)
    m->pk->callback(m->pk->data, m->buf, m->len);
  m->len = 0;
}

void mpbuf_put_slow(struct mpbuf *m, const void *p, size_t n) {
  mpbuf_flush(m);
  if (n > sizeof(m->buf)) {
    m->pk->callback(m->pk->data, p, n);
    return;
  }
  memcpy(m->buf, p, n);
  m->len = n;
}
