#pragma once
// A session/request_permission line read into a flat view, without a
// jansson tree of the whole message (issue 16, item 3): the envelope
// (jsonrpc, id, method), params.sessionId and params.options are read in
// place; only params.toolCall, which the policy reads, becomes a tree
// (jsonfast_tree of its own text). Pure.
//
// The view models one shape exactly: a JSON object with the members
// jsonrpc ("2.0", optional), id (an integer or a string), method
// ("session/request_permission") and params, an object with sessionId (a
// string), toolCall (an object) and options (an array of objects with
// optionId, name and kind, all strings), no other member anywhere above the
// toolCall, no key twice, strings of those levels printable ASCII without
// escapes, a toolCall that jsonfast reads without json_loadb. Anything else
// (and anything json_loadb would refuse) is left to the tree (jsonrpc_parse):
// the view only ever reads what the tree would read, and when unsure it
// declines.

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define REQVIEW_OPTIONS_MAX 16 // more options: the tree

struct reqview_str {
  const char *s; // into the line (not NUL-terminated)
  size_t n;
};

struct reqview_option {
  struct reqview_str id, name, kind;
};

struct reqview {
  json_t *id;             // owned: the request's id (an integer or a string)
  struct reqview_str sid; // params.sessionId
  json_t *tc;             // owned: params.toolCall (an object)
  size_t noptions;
  // NUL-terminated copies of sid and of each option's optionId and kind.
  char *strs; // owned, one block
  const char *sid_z;
  struct reqview_option options[REQVIEW_OPTIONS_MAX];
  const char *option_id_z[REQVIEW_OPTIONS_MAX];
  const char *option_kind_z[REQVIEW_OPTIONS_MAX];
};

// Reads line (len bytes, a trailing newline allowed) into *v. Returns 0,
// or -1 when the line is not of the modelled shape (then *v holds nothing
// to clear).
int reqview_parse(const char *line, size_t len, struct reqview *v);
// Frees what reqview_parse made.
void reqview_clear(struct reqview *v);
