// linebuf: the same events at every split point and byte by byte, bounded
// memory for overlong lines, and no copies for lines complete in one feed.

#include "io/linebuf.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

// Events as text: "L:<line>|" per line, "O:<len>|" per overlong line.
struct rec {
  char log[4096];
  size_t n;
  const char *lo, *hi; // the current feed's input, for zero-copy checks
  int in_input;        // lines that pointed into the input
  int copied;          // lines that did not
};

static void on_line(void *ud, const char *line, size_t len) {
  struct rec *r = ud;
  r->n += (size_t)snprintf(r->log + r->n, sizeof(r->log) - r->n, "L:%.*s|",
                           (int)len, line);
  if (line >= r->lo && line + len <= r->hi)
    r->in_input++;
  else
    r->copied++;
}

static void on_overlong(void *ud, size_t len) {
  struct rec *r = ud;
  r->n += (size_t)snprintf(r->log + r->n, sizeof(r->log) - r->n, "O:%zu|", len);
}

// Feeds a heap copy of exactly n bytes so that ASan and valgrind catch any
// read past the end, as a guard page would.
static void feed(struct linebuf *lb, struct rec *r, const char *s, size_t n) {
  char *copy = malloc(n ? n : 1);
  memcpy(copy, s, n);
  r->lo = copy;
  r->hi = copy + n;
  linebuf_feed(lb, copy, n, on_line, on_overlong, r);
  free(copy);
}

static void feed_str(struct linebuf *lb, struct rec *r, const char *s) {
  feed(lb, r, s, strlen(s));
}

enum { MAX = 8 };

static const char input[] = "abc\r\n"
                            "\n"
                            "   \t \r\n"
                            "12345678\n"
                            "12345678\r\n"
                            "123456789\n"
                            "123456789\r\n"
                            "123456789\r\r\n"
                            "1234567\r\r\n"
                            "\r\n"
                            "x\n"
                            "aaaaaaaaaaaaaaaaaaaaaaaaa\n"
                            "\r\r\n"
                            "123456789\rx\n"
                            "y\n"
                            "tail";

static const char expected[] = "L:abc|L:12345678|L:12345678|O:9|O:9|O:10|"
                               "L:1234567\r|L:x|O:25|O:11|L:y|";

// Feeds input in pieces cut at cuts[0..ncuts); returns true when the events,
// the pending count and the memory bound are all as expected.
static bool run_cuts(const size_t *cuts, size_t ncuts, struct rec *r) {
  struct linebuf lb;
  linebuf_init(&lb, MAX);
  *r = (struct rec){0};
  size_t n = sizeof(input) - 1, at = 0;
  bool bounded = true;
  for (size_t i = 0; i <= ncuts; i++) {
    size_t to = i < ncuts ? cuts[i] : n;
    feed(&lb, r, input + at, to - at);
    bounded = bounded && lb.cap <= MAX + 1 && lb.len <= lb.cap;
    at = to;
  }
  bool good = bounded && strcmp(r->log, expected) == 0 &&
              linebuf_pending(&lb) == 4 && lb.skipped == 0;
  linebuf_free(&lb);
  return good;
}

static void diag_split(size_t i, size_t j, const char *log) {
  printf("# first bad split: cuts at %zu and %zu gave %s\n", i, j, log);
}

static void test_splits(void) {
  struct rec r;
  size_t n = sizeof(input) - 1;
  ok(run_cuts(NULL, 0, &r), "whole input in one feed");
  is_str(r.log, expected, "events of the whole input");

  size_t bad = 0, runs = 0;
  for (size_t i = 0; i <= n; i++)
    for (size_t j = i; j <= n; j++, runs++)
      if (!run_cuts((size_t[]){i, j}, 2, &r) && bad++ == 0)
        diag_split(i, j, r.log);
  ok(bad == 0, "all %zu two-cut splits give the same events (%zu bad)", runs,
     bad);

  size_t cuts[sizeof(input)];
  for (size_t i = 0; i < n; i++)
    cuts[i] = i + 1;
  ok(run_cuts(cuts, n - 1, &r), "byte by byte gives the same events");
  is_str(r.log, expected, "events byte by byte");
}

// A 1 MB line fed in odd-sized chunks: memory stays within max + 1, the
// pending count follows it, and its exact length is reported once.
static void test_huge(void) {
  enum { HMAX = 1000, HUGE = 1000000, CHUNK = 4097 };
  struct linebuf lb;
  linebuf_init(&lb, HMAX);
  struct rec r = {0};
  char *big = malloc(HUGE);
  memset(big, 'a', HUGE);
  bool bounded = true, counted = true;
  for (size_t at = 0; at < HUGE; at += CHUNK) {
    size_t k = HUGE - at < CHUNK ? HUGE - at : CHUNK;
    feed(&lb, &r, big + at, k);
    bounded = bounded && lb.cap <= HMAX + 1;
    counted = counted && linebuf_pending(&lb) == at + k;
  }
  ok(bounded, "cap stays <= max + 1 while a huge line streams");
  ok(counted, "pending counts every byte of the huge line");
  feed_str(&lb, &r, "\r");
  is_size(linebuf_pending(&lb), HUGE + 1, "a held \\r is pending");
  is_str(r.log, "", "nothing reported before the newline");
  feed_str(&lb, &r, "\nok\n");
  is_str(r.log, "O:1000000|L:ok|", "exact length once, then framing goes on");
  is_size(linebuf_pending(&lb), 0, "nothing pending after the newline");
  ok(lb.cap <= HMAX + 1, "cap still bounded (%zu)", lb.cap);
  linebuf_free(&lb);

  // Complete in one feed: reported without buffering anything at all.
  linebuf_init(&lb, HMAX);
  r = (struct rec){0};
  big[HUGE - 1] = '\n';
  feed(&lb, &r, big, HUGE);
  is_str(r.log, "O:999999|", "an overlong complete line is reported");
  is_size(lb.cap, 0, "and nothing was allocated for it");
  linebuf_free(&lb);
  free(big);
}

static void test_zero_copy(void) {
  struct linebuf lb;
  linebuf_init(&lb, 64);
  struct rec r = {0};
  feed_str(&lb, &r, "one\r\ntwo\n");
  is_str(r.log, "L:one|L:two|", "two complete lines");
  is_int(r.in_input, 2, "both point into the fed data");
  is_int(r.copied, 0, "none was copied");
  is_size(lb.cap, 0, "no buffer was allocated");

  r = (struct rec){0};
  feed_str(&lb, &r, "par");
  is_size(linebuf_pending(&lb), 3, "an unfinished line is held");
  feed_str(&lb, &r, "tial\nnext\nrest");
  is_str(r.log, "L:partial|L:next|", "buffered line, then a direct one");
  is_int(r.copied, 1, "only the line that was split is copied");
  is_int(r.in_input, 1, "the following line points into the fed data");
  is_size(linebuf_pending(&lb), 4, "the new tail is held");
  linebuf_free(&lb);
}

static void test_edges(void) {
  struct linebuf lb;
  linebuf_init(&lb, 0);
  struct rec r = {0};
  feed_str(&lb, &r, "\n\r\n");
  feed_str(&lb, &r, "\r");
  ok(lb.cap <= 1, "max 0 holds at most one byte (a \\r)");
  feed_str(&lb, &r, "\na\n");
  feed_str(&lb, &r, "bc");
  feed_str(&lb, &r, "\r\n");
  is_str(r.log, "O:1|O:2|", "max 0: only blank lines fit");
  linebuf_free(&lb);

  // Freed, the buffer can be used again.
  linebuf_init(&lb, 4);
  r = (struct rec){0};
  feed_str(&lb, &r, "ab");
  linebuf_free(&lb);
  linebuf_init(&lb, 4);
  feed_str(&lb, &r, "cd\n");
  is_str(r.log, "L:cd|", "nothing survives linebuf_free");
  linebuf_free(&lb);

  // No callbacks: framing still advances.
  linebuf_init(&lb, 2);
  linebuf_feed(&lb, "abcdef\nxy", 9, NULL, NULL, NULL); // 9: no NUL
  is_size(linebuf_pending(&lb), 2, "NULL callbacks are allowed");
  linebuf_free(&lb);
}

int main(void) {
  test_splits();
  test_huge();
  test_zero_copy();
  test_edges();
  return done_testing();
}
