#pragma once
// JSON text to a jansson tree, the same tree json_loadb(text, len, 0)
// builds, several times faster: the text is checked and decoded by json2mp
// in one pass and the tree built from that without checking again. What the
// fast path leaves alone (json2mp.h) and every error go through json_loadb,
// so errors read as jansson's.

#include <jansson.h>
#include <stddef.h>

// As json_loadb(text, len, 0, err).
json_t *jsonfast_load(const char *text, size_t len, json_error_t *err);
// Gives back the buffer kept between calls (at exit, for leak checkers).
void jsonfast_release(void);
