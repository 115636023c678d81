#pragma once
// The client methods the broker offers agents: fs/read_text_file and
// fs/write_text_file through Neovim's buffers (else on disk), and
// terminal/* (design §9). Every one is checked first:
//
// * fs/* stays inside the project root unless a Read/Edit rule allows the
//   path (or the person's answer to a request naming it); deny rules and
//   plan mode apply even when the agent did not ask permission.
// * fs/write_text_file inside the project is done when an allow answer of
//   this turn covered the path (the agent asked first, as Gemini does) or
//   when the policy allows that edit by itself (acceptEdits, yolo, an allow
//   rule, session memory; audited). Otherwise the broker asks the person
//   itself: a prompt (a pending entry with the broker's options allow_once
//   and reject_once) naming the path and showing the diff against what the
//   person has (the loaded buffer, else the disk); the answer completes or
//   refuses (-32001) the call. A protected file (the files that govern
//   permissions, ...) is written only when the person's answer covered it.
// * terminal/create likewise: an answer of this turn covering the command,
//   or the policy allowing it (audited), else a prompt showing the
//   command; deny rules always win (refused, audited).
//
// "An allow answer covered it": each allow decision (by the person or by
// the policy) on a session/request_permission is remembered as an approval
// of its command and paths for the rest of its turn (and at most a few
// minutes), used up by one fs write or one terminal. Only requests of a
// kind that may write (not read, search, fetch, think, execute) cover a
// write of a path they name.

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct broker;
struct acp_conn;

// Handles one client method request (see acp.h: client_request).
void client_request(struct broker *b, struct acp_conn *c, const json_t *id,
                    const char *method, json_t *params);
// Remembers an allow answer (info: the gate's info of the request), given
// by the person or by the policy.
void client_approved(struct broker *b, struct acp_conn *c, const json_t *info,
                     bool person);
// broker_resolve's hook: when token is a prompt the broker made for an
// fs/* or terminal/* call, completes that call (allow) or refuses it, and
// returns true (the caller then sends no outcome to the agent).
bool client_answered(struct broker *b, struct acp_conn *c, uint64_t token,
                     bool allow, const char *by);
// The turn of c is cancelled or c is going (all connections when NULL):
// unasked writes whose prompt is not shown yet are refused.
void client_cancel(struct broker *b, struct acp_conn *c);
// The agent is gone: its terminals are killed and released.
void client_conn_gone(struct broker *b, struct acp_conn *c);
// Frees what is left at exit.
void client_free(struct broker *b);
