#pragma once
// Newline framing for the agent's stdout: bytes in, complete lines out.
//
// Pure: no I/O, no globals. Lines end with "\n"; one "\r" before it is
// dropped. Lines that are empty or only whitespace are not reported. A line
// longer than `max` bytes is discarded while it streams (memory stays bounded
// by `max` plus nothing) and reported once, with its length, when its newline
// arrives.

#include <stddef.h>

struct linebuf {
  char *data;     // bytes of the unfinished line
  size_t len;     // bytes used in data
  size_t cap;     // bytes allocated for data
  size_t max;     // longest accepted line, without its line ending
  size_t skipped; // length so far of an overlong line being discarded, or 0
};

// Called for each complete line; `line` (not NUL-terminated) lives only for
// the duration of the call.
typedef void (*linebuf_line_cb)(void *ud, const char *line, size_t len);
// Called once for each line longer than max, with its full length.
typedef void (*linebuf_overlong_cb)(void *ud, size_t len);

// Prepares an empty buffer that accepts lines of up to max bytes.
void linebuf_init(struct linebuf *lb, size_t max);
// Frees the buffer's memory; lb can be initialised again.
void linebuf_free(struct linebuf *lb);
// Feeds n bytes, calling on_line/on_overlong for each line they complete.
// Complete lines inside `data` are passed without being copied.
void linebuf_feed(struct linebuf *lb, const char *data, size_t n,
                  linebuf_line_cb on_line, linebuf_overlong_cb on_overlong,
                  void *ud);
// Returns the number of bytes of an unfinished line held (or skipped).
size_t linebuf_pending(const struct linebuf *lb);
