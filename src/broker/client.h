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

//
// The broker reaches these services through struct client, and they reach
// the broker only through struct client_host (as acp.c does with
// struct acp_host): the connections, the gate, Neovim and the audit log.

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "io/nvim_rpc.h"
#include "policy/gate.h"

struct acp_conn;
struct client;

// What the services need from their owner (the broker).
struct client_host {
  // The live connection with this serial (acp_conn_serial), or NULL.
  struct acp_conn *(*conn)(void *ud, uint64_t serial);
  // An event for Lua; data is stolen (NULL: it could not be built).
  void (*emit)(void *ud, const char *event, json_t *data);
  // Tells the person something went wrong (an `error` event; agent may be
  // NULL).
  void (*error)(void *ud, const char *agent, const char *msg);
  // Calls Lua (`nvim_exec_lua(code, args)`, args stolen); the answer goes
  // to cb. Returns false (cb never called) when Neovim is gone.
  bool (*call_lua)(void *ud, const char *code, json_t *args,
                   nvim_rpc_response_cb cb, void *cb_ud);
  // Judges a request agent did not make as the gate judges
  // session/request_permission: params ({sessionId, toolCall, options})
  // borrowed, of a session in cwd; fills v (v->info is the caller's).
  void (*judge)(void *ud, const char *agent, const char *session,
                const char *cwd, json_t *params, struct gate_verdict *v);
  // Asks the person about a request of c: a pending entry and a
  // `permission` event (params borrowed; info taken on success). Returns
  // its token, or 0 when the table is full (info not taken).
  uint64_t (*ask)(void *ud, struct acp_conn *c, const json_t *id,
                  json_t *params, json_t *info);
  // Answers a pending entry (option_id NULL: `cancelled`); by is who.
  void (*resolve)(void *ud, uint64_t token, const char *option_id,
                  const char *by);
  // Appends an audit line for a decision made without a prompt (info: the
  // gate's info; outcome `selected` with option_id, else `cancelled`).
  void (*audit)(void *ud, const json_t *info, const char *decision,
                const char *by, const char *option_id);
  // True once the broker is shutting down (a prompt is then cancelled at
  // once).
  bool (*closing)(void *ud);
};

// The services, running on loop, reaching their owner through host (ud is
// passed to every callback).
struct client *client_new(uv_loop_t *loop, const struct client_host *host,
                          void *ud);
// Frees what is left (terminals are released by client_conn_gone first).
void client_free(struct client *cl);
// Handles one client method request (see acp.h: client_request).
void client_request(struct client *cl, struct acp_conn *c, const json_t *id,
                    const char *method, json_t *params);
// Remembers an allow answer (info: the gate's info of the request), given
// by the person or by the policy.
void client_approved(struct client *cl, struct acp_conn *c, const json_t *info,
                     bool person);
// The same from the verdict's fields: command only when it is the agent's
// own (rawInput), kind, and the paths (copied).
void client_approved_call(struct client *cl, struct acp_conn *c,
                          const char *session, const char *command,
                          const char *kind, const char *const *paths,
                          size_t npaths, bool person);
// The resolve hook: when token is a prompt the services made for an fs/*
// or terminal/* call, completes that call (allow) or refuses it, and
// returns true (the caller then sends no outcome to the agent).
bool client_answered(struct client *cl, struct acp_conn *c, uint64_t token,
                     bool allow, const char *by);
// Neovim's answer to a write it held for the person ({wait = token}, see
// doc/protocol.md): true completes it; a string (why) or anything else
// refuses it (-32001). Returns false when no write waits for token.
bool client_fs_answer(struct client *cl, uint64_t token,
                      const msgpack_object *result);
// The turn of c is cancelled or c is going (all connections when NULL):
// unasked writes and terminals whose prompt is not shown yet are refused,
// and so are the writes Neovim holds for the person (client_fs_answer).
void client_cancel(struct client *cl, struct acp_conn *c);
// The agent is gone: its terminals are killed and released.
void client_conn_gone(struct client *cl, struct acp_conn *c);
// The options of a request the broker judges or asks about itself (an
// fs/* or terminal/* call the agent did not ask about, a tool call that
// acted unasked): allow_once and reject_once (a new array).
json_t *client_own_options(void);
