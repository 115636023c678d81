#pragma once
// The client methods the broker offers agents: fs/read_text_file and
// fs/write_text_file through Neovim's buffers (else on disk), and
// terminal/* (design §9). Every one is checked first:
//
// * fs/* stays inside the project root unless a Read/Edit rule allows the
//   path; deny rules and plan mode apply even when the agent did not ask
//   permission; a protected file (the files that govern permissions, ...)
//   is written only when an allow answer in this session covered it.
// * terminal/create runs a command the policy allows, or one that an allow
//   answer in this session covered; deny rules always win.
//
// "An allow answer covered it": each allow decision (by the person or by
// the policy) on a session/request_permission is remembered for a short
// while as an approval of its command and paths, used up by one fs write or
// one terminal.

#include <jansson.h>
#include <stdbool.h>

struct broker;
struct acp_conn;

// Handles one client method request (see acp.h: client_request).
void client_request(struct broker *b, struct acp_conn *c, const json_t *id,
                    const char *method, json_t *params);
// Remembers an allow answer (info: the gate's info of the request), given
// by the person or by the policy.
void client_approved(struct broker *b, struct acp_conn *c, const json_t *info,
                     bool person);
// The agent is gone: its terminals are killed and released.
void client_conn_gone(struct broker *b, struct acp_conn *c);
// Frees what is left at exit.
void client_free(struct broker *b);
