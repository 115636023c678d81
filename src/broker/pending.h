#pragma once
// The table of permission requests waiting for an answer.
//
// Pure: no I/O, no globals. Each entry is keyed by the broker's own token
// (never the agent's JSON-RPC id, which may collide across agents or be 0).
// Entries stay in arrival order, so iteration is oldest first. Lookup by
// token is a binary search (tokens only grow); removal leaves a tombstone
// that is compacted away later, so answering N requests costs O(N log N).

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// An offered option, as much of it as an answer needs. The agent's option
// objects (jansson objects of three keys, ~700 bytes each) are not kept:
// 10,000 pending prompts held 14 MiB of them.
struct pending_option {
  const char *id;   // optionId
  const char *kind; // "allow_once", "reject_once", ...
};

struct prompt_kept; // the owner's (prompt.h)

struct pending_entry {
  uint64_t token;                 // broker's token, > 0, increasing
  bool live;                      // false once taken (tombstone)
  void *conn;                     // the agent connection that asked (not owned)
  json_t *agent_id;               // owned reference: the agent's JSON-RPC id
  char *session;                  // owned: the ACP sessionId
  char *tool_call_id;             // owned: toolCall.toolCallId
  struct pending_option *options; // owned, one allocation with its strings:
                                  // the well-formed offered options, in order
  size_t noptions;                // entries in options
  json_t *info;                   // owned reference: the owner's data, or NULL
  struct prompt_kept *kept;       // owned (one allocation: free), or NULL
  uint64_t added_ms;              // loop time when the request arrived
};

struct pending {
  struct pending_entry *v; // entries, oldest first (tombstones included)
  size_t len;              // slots used in v
  size_t cap;              // slots allocated
  size_t live;             // live entries
  size_t max;              // most live entries accepted
  uint64_t next_token;     // token of the next entry
};

// Prepares an empty table that holds at most max live entries.
void pending_init(struct pending *p, size_t max);
// Frees every entry and the table.
void pending_free(struct pending *p);
// Adds an entry. Takes ownership of agent_id and options (references) and of
// session and tool_call_id (malloc'd strings) on every path. Of options (the
// request's array) only the optionId and kind of each well-formed option
// ({"optionId", "name", "kind"} strings) are kept; the array is released.
// Returns the new token, or 0 when the table is full.
uint64_t pending_add(struct pending *p, void *conn, json_t *agent_id,
                     char *session, char *tool_call_id, json_t *options,
                     uint64_t now_ms);
// The same with the options given as n optionIds and kinds, each a
// well-formed option's (the flat view reads only those: acp/reqview.h);
// copied. The other arguments are taken as by pending_add.
uint64_t pending_add_of(struct pending *p, void *conn, json_t *agent_id,
                        char *session, char *tool_call_id,
                        const char *const *ids, const char *const *kinds,
                        size_t n, uint64_t now_ms);
// Returns the live entry with this token, or NULL.
struct pending_entry *pending_find(struct pending *p, uint64_t token);
// Returns the oldest live entry of conn whose agent id equals id (same JSON
// type and value), or NULL.
struct pending_entry *pending_find_agent_id(struct pending *p, const void *conn,
                                            const json_t *id);
// Removes the entry with this token, moving its owned fields into *out (the
// caller releases them with pending_entry_clear). False if no such entry.
bool pending_take(struct pending *p, uint64_t token, struct pending_entry *out);
// Releases the owned fields of an entry obtained from pending_take.
void pending_entry_clear(struct pending_entry *e);
// Returns the offered option whose optionId equals option_id, or NULL.
const struct pending_option *pending_offered(const struct pending_entry *e,
                                             const char *option_id);
// Returns the first offered option of this kind ("allow_once", ...), or NULL.
const struct pending_option *
pending_first_of_kind(const struct pending_entry *e, const char *kind);
// Returns the number of live entries.
size_t pending_count(const struct pending *p);
