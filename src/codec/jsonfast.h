#pragma once
// JSON text to a jansson tree, the same tree json_loadb(text, len, 0)
// builds, several times faster: one pass over the text, checked as jansson
// checks it (jsonlex.h), building the tree as it goes with jansson's
// unchecked constructors. What the fast path leaves alone (a value nested
// deeper than JSONFAST_MAX_DEPTH, a number token longer than 100 bytes) and
// every error go through json_loadb, so errors read as jansson's.

#include <jansson.h>
#include <stddef.h>

// A value inside more containers than this goes to json_loadb (the deepest
// one may hold an empty container: that is still one more open).
#define JSONFAST_MAX_DEPTH 64

// As json_loadb(text, len, 0, err).
json_t *jsonfast_load(const char *text, size_t len, json_error_t *err);
// The fast path alone: json_loadb's tree, or NULL when json_loadb would
// refuse the text or the fast path leaves it to json_loadb.
json_t *jsonfast_tree(const char *text, size_t len);
// The object or array at the start of text (no whitespace before it), as
// jsonfast_tree would read it alone, where more text follows: *used is
// where it ends. NULL when it is not one, or the fast path leaves it.
json_t *jsonfast_value(const char *text, size_t len, size_t *used);
// Gives back the buffers kept between calls (at exit, for leak checkers).
void jsonfast_release(void);
