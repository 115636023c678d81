#pragma once
// The prompt for a request the gate did not decide (ASK): the `permission`
// event's data, packed straight from the verdict (policy/gate.h) and the
// agent's params, and what the pending entry keeps of it. Pure: no I/O.
//
// The event's data is the map it always was (doc/protocol.md):
//   {id, agent, session, toolCallId, title, kind, options, toolCall,
//    reason?, rule?, source?, narrow, broad, command?, atoms, paths,
//    allowOption?, rejectOption?}
// (title and kind nil when the tool call has none; a key with `?` absent
// when the verdict has no such string). The pending entry keeps a C struct
// (prompt_kept: the audit line's and the approval's fields, and the rules
// gate_remember takes): what the JSON it kept before ({root, agent,
// session, toolCallId, kind, title, command, paths, rule, source, narrow,
// broad, rawCommand}) held.
// prompt_data_json and prompt_info_trim build the event's data and the
// entry's JSON the way it was done before, from the verdict's JSON
// (gate_verdict_info): the broker's own prompts (fs/terminal calls the
// agent did not ask about) still take that way, and
// tests/unit/test_prompt.c checks that both ways give the same.

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "acp/reqview.h"
#include "audit.h"
#include "policy/gate.h"

// Packs the event's data for v (ASK, from gate_decide) as the prompt with
// this token of agent's session; tc and options are the request's
// toolCall and options (borrowed).
void prompt_pack(msgpack_packer *pk, uint64_t token, const char *agent,
                 const char *session, const json_t *tc, const json_t *options,
                 const struct gate_verdict *v);
// The same for a request read into a flat view (acp/reqview.h): its
// toolCall, sessionId and options (their strings still in the line it was
// read from, which must be alive); the same bytes as prompt_pack of the
// tree of that line.
void prompt_pack_view(msgpack_packer *pk, uint64_t token, const char *agent,
                      const struct reqview *rv, const struct gate_verdict *v);
// The `permission_resolved` event's data: {id, agent, session, toolCallId,
// outcome ("selected", or "cancelled" when option_id is NULL), optionId
// (nil when NULL), by}; the strings UTF-8.
void prompt_pack_resolved(msgpack_packer *pk, uint64_t token, const char *agent,
                          const char *session, const char *tool_call_id,
                          const char *option_id, const char *by);
// What the pending entry keeps of an asked request for its answer: the
// audit line's fields and the approval's (client_approved_call), in one
// allocation (free() it). The strings are those of the verdict (NULL where
// its JSON has no such key).
struct prompt_kept {
  const char *root, *agent, *session, *tool_call_id, *kind, *title, *command;
  const char *rule, *source;
  const char **paths;
  size_t npaths;
  bool raw_command; // the command is the agent's own (rawInput), not read
                    // from the title
  // The rules the prompt offered to remember (the verdict's narrow and
  // broad sets).
  const char **narrow, **broad;
  size_t nnarrow, nbroad;
};
struct prompt_kept *prompt_keep(const struct gate_verdict *v, bool raw_command);
// The audit line of the answer, as verdict_audit_info writes it from the
// verdict's JSON.
void prompt_kept_audit(const struct prompt_kept *k, const char *decision,
                       const char *by, const char *option_id, long long wait_ms,
                       struct audit_entry *a);
// The rules an answered prompt remembers (broad: the broader set) as
// gate_remember takes them: from what its pending entry kept (k), else
// from its JSON (info's narrow or broad, the broker's own prompts). A new
// array (free it) of *n strings borrowed from k or info; NULL when none.
const char **prompt_remember_rules(const struct prompt_kept *k,
                                   const json_t *info, bool broad, size_t *n);
// The event's data built as JSON from params ({sessionId, toolCall,
// options}, borrowed) and info (a verdict's JSON, borrowed); NULL when
// params lack a string sessionId or toolCall.toolCallId.
json_t *prompt_data_json(uint64_t token, const char *agent,
                         const json_t *params, const json_t *info);
// Deletes from info what only the event needed: info becomes what the
// pending entry keeps.
void prompt_info_trim(json_t *info);
