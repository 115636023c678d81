#pragma once
// UTF-8 as jansson accepts it (the agent's JSON) and as the broker checks
// text it passes on (files, terminal output, audit lines). Pure.

#include <stdbool.h>
#include <stddef.h>

// Length of the valid UTF-8 sequence at p (lead byte >= 0x80), 0 when it is
// not one: no overlong forms, no surrogates, nothing above U+10FFFF, no
// truncation before end.
size_t utf8_len(const unsigned char *p, const unsigned char *end);

// True when s[0..len) is valid UTF-8 with no NUL byte.
bool utf8_valid(const char *s, size_t len);
