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
// when the verdict has no such string). The pending entry keeps the JSON
// the answer reads (the audit line, the approval, the rules to remember):
//   {root, agent, session, toolCallId, kind, title, command, paths, rule,
//    source, narrow, broad, rawCommand}
// prompt_data_json and prompt_info_trim build the same from the verdict's
// JSON (gate_verdict_info): the broker's own prompts (fs/terminal calls
// the agent did not ask about) take that way, and tests/unit/test_prompt.c
// checks that both give the same bytes.

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "policy/gate.h"

// Packs the event's data for v (ASK, from gate_decide) as the prompt with
// this token of agent's session; tc and options are the request's
// toolCall and options (borrowed).
void prompt_pack(msgpack_packer *pk, uint64_t token, const char *agent,
                 const char *session, const json_t *tc, const json_t *options,
                 const struct gate_verdict *v);
// What the pending entry keeps of v (a new object); raw_command: the
// command is the agent's own (rawInput), not read from the title.
json_t *prompt_kept(const struct gate_verdict *v, bool raw_command);
// The event's data built as JSON from params ({sessionId, toolCall,
// options}, borrowed) and info (a verdict's JSON, borrowed); NULL when
// params lack a string sessionId or toolCall.toolCallId.
json_t *prompt_data_json(uint64_t token, const char *agent,
                         const json_t *params, const json_t *info);
// Deletes from info what only the event needed: info becomes what the
// pending entry keeps.
void prompt_info_trim(json_t *info);
