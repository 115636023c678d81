#pragma once
// Tool calls that acted without a permission request the broker saw.
//
// Fed with every `tool_call` / `tool_call_update` of every session and with
// the toolCallId of every permission request, it tells which tool calls of
// a kind the policy governs (edit, delete, move, execute, fetch) acted with
// no request: the call reached `completed`, or `failed` after
// `in_progress`, or it was `in_progress` when its turn ended (or its agent
// went away). Each such call is reported once, as the params of a synthetic
// session/request_permission ({sessionId, toolCall}), for the gate to judge.
//
// The updates of one tool call are merged as ACP says (a field with a value
// replaces the old one), so that a kind sent only in an earlier update is
// kept. Pure: no I/O, no globals. Bounded: sessions, tool calls per session
// (the oldest forgotten first) and the bytes of rawInput, content and
// locations kept per session (the oldest calls lose them first).

#include <jansson.h>
#include <stddef.h>

#define UNASKED_MAX_SESSIONS 256
#define UNASKED_MAX_CALLS 4096              // per session
#define UNASKED_MAX_BYTES ((size_t)4 << 20) // payload kept per session

struct unasked;

// A tracker with these bounds (0: the defaults above).
struct unasked *unasked_new(size_t max_sessions, size_t max_calls,
                            size_t max_bytes);
void unasked_free(struct unasked *u);

// True when update (a session/update's `update`) is a tool call or an
// update of one: the only updates unasked_update needs to see.
int unasked_is_tool_update(const json_t *update);

// A tool_call or tool_call_update (borrowed) in session sid of agent.
// Returns {sessionId, toolCall} (new) when this update shows the call acted
// with no request seen, else NULL.
json_t *unasked_update(struct unasked *u, const char *agent, const char *sid,
                       const json_t *update);

// Session sid of agent is being resumed (loading true) or is open (false):
// while it is resumed, the updates are its history, replayed; they are
// remembered as finished and never reported.
void unasked_loading(struct unasked *u, const char *agent, const char *sid,
                     int loading);

// The agent sent a permission request for tool_call_id in session sid.
void unasked_requested(struct unasked *u, const char *agent, const char *sid,
                       const char *tool_call_id);

// The turn of session sid ended: the calls still `in_progress` with no
// request, as an array of {sessionId, toolCall} (new), or NULL when none.
json_t *unasked_turn_end(struct unasked *u, const char *agent, const char *sid);

// The agent went away: what unasked_turn_end reports for each of its
// sessions (NULL when nothing), and its sessions are forgotten.
json_t *unasked_forget(struct unasked *u, const char *agent);

// Tool calls and payload bytes held (for tests).
size_t unasked_count(const struct unasked *u, size_t *bytes);
