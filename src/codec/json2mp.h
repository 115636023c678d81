#pragma once
// A one-pass JSON to msgpack transcoder for the hot path (agent messages
// forwarded to Neovim): no jansson tree, no allocation but the output
// buffer's growth. Its output unpacks to the same msgpack objects as
// json_loadb(text, len, 0) followed by jsonpack_pack(). Pure.

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>

// Transcodes the one JSON value in text[0..len) (whitespace around it
// allowed, nothing else after it) into sb as one msgpack value. Returns true
// on success; false (sb restored to its size on entry) when the text is not
// JSON that jansson's json_loadb(text, len, 0) would accept (this includes a
// top level that is not an object or array, \u0000 in a string and integers
// outside int64), or when it is something the fast path leaves to the slow
// one: a value deeper than JSONPACK_MAX_DEPTH (packed as nil there),
// duplicate keys in an object (jansson keeps the first key's position with
// the last value), a number token longer than 100 bytes, more than
// JSON2MP_MAX_KEYS keys in the open objects together, or no memory.
bool json2mp(msgpack_sbuffer *sb, const char *text, size_t len);

// Keys remembered for the duplicate check, summed over the open objects.
#define JSON2MP_MAX_KEYS 1024
