#pragma once
// What broker.c and methods.c share; nothing else includes this.

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "acp/acp.h"
#include "io/nvim_rpc.h"
#include "pending.h"
#include "policy/gate.h"

#define BROKER_MAX_PENDING 16384 // permission requests waiting for a person
#define BROKER_MAX_CONNS 64      // agent connections
#define BROKER_STOP_GRACE_MS 500 // SIGTERM → SIGKILL for :AcpStop
#define BROKER_EXIT_GRACE_MS 300 // the same when Neovim is gone
#define BROKER_DEADLINE_MS 800   // then everything is killed

struct client_state;

struct broker {
  uv_loop_t *loop;
  struct client_state *client; // fs/* and terminal/* (client.c)
  struct nvim_rpc *rpc;
  struct pending pending;
  struct gate *gate;
  struct unasked *unasked; // tool calls watched for acting unasked
  bool audit_failed; // the person was told the audit log cannot be written
  struct acp_conn *conns[BROKER_MAX_CONNS]; // live and closing connections
  size_t nconns;
  uv_signal_t signals[3];
  uv_timer_t deadline;
  uv_prepare_t epoch; // a new gate epoch per loop iteration
  uint64_t epochs;
  bool shutting_down;
  bool paused; // agents are not read: Neovim is behind (on_backlog)
  bool rpc_closed;
  bool finished;
};

struct shown {
  struct broker *b;
  uint64_t token;
};

// The options of a request the broker judges or asks about itself (an
// fs/* or terminal/* call the agent did not ask about, a tool call that
// acted unasked): allow_once and reject_once (a new array).
json_t *broker_own_options(void);
// Sends an event to Lua (data stolen); with request, as a msgpack-RPC
// request whose answer (the prompt was shown, or not) goes to request.
void broker_send_event(struct broker *b, const char *name, json_t *data,
                       struct shown *request);
// Calls Lua (`nvim_exec_lua(code, args)`, args stolen) as a request whose
// answer goes to cb. Returns false (cb never called) when Neovim is gone.
bool broker_call_lua(struct broker *b, const char *code, json_t *args,
                     nvim_rpc_response_cb cb, void *ud);
// Tells the person something went wrong (an `error` event) and logs it.
void broker_emit_error(struct broker *b, const char *agent, const char *msg);
// Answers a pending request (option_id NULL: `cancelled`), audits it and
// tells Lua; by is who answered.
void broker_resolve(struct broker *b, uint64_t token, const char *option_id,
                    const char *by);
// Shows a prompt for a request of c that the person must answer: adds it
// to the pending table and sends the `permission` event. params is
// {sessionId, toolCall, options} (borrowed); info (the gate's info) is
// taken on success. Returns the token, or 0 when the table is full (info
// not taken, nothing answered). The caller resolves it at once when the
// broker is shutting down.
uint64_t broker_ask(struct broker *b, struct acp_conn *c, const json_t *id,
                    json_t *params, json_t *info);
// Appends an audit line for a decision made without a prompt (outcome
// `selected` with option_id, else `cancelled`).
void broker_audit(struct broker *b, json_t *info, const char *decision,
                  const char *by, const char *option_id);
// Answers `cancelled` to every pending request of c (all when c is NULL).
void broker_cancel_pending(struct broker *b, struct acp_conn *c,
                           const char *by);
// The live connection named name, or NULL.
struct acp_conn *broker_find_conn(struct broker *b, const char *name);
// The callbacks every connection gets.
extern const struct acp_host broker_host;

struct broker_method {
  const char *name;
  void (*fn)(struct broker *, const struct nvim_rpc_msg *);
};
// The methods Lua calls (methods.c).
extern const struct broker_method broker_methods[];
extern const size_t broker_nmethods;
