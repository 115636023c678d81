#pragma once
// Converts jansson values to msgpack, so the agent's JSON reaches Lua as
// Lua tables. Pure.

#include <jansson.h>
#include <msgpack.h>

// Deeper JSON than this is packed as nil (Neovim's decoder would refuse it).
#define JSONPACK_MAX_DEPTH 64

// Packs v (NULL packs nil) as one msgpack value.
void jsonpack_pack(msgpack_packer *pk, const json_t *v);
// Packs a NUL-terminated string (NULL packs nil).
void jsonpack_str(msgpack_packer *pk, const char *s);
// Converts a msgpack value to JSON (a new reference; NULL when too deep or
// not representable: map keys must be strings, text must be UTF-8).
json_t *jsonpack_unpack(const msgpack_object *o);
// The same for a value whose strings are known to be UTF-8 without NUL
// (json2mp's output): built with jansson's unchecked constructors, keys of
// any length.
json_t *jsonpack_unpack_checked(const msgpack_object *o);
