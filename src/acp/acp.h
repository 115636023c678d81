#pragma once
// One ACP connection: an agent process, its JSON-RPC stream and sessions.
//
// The connection speaks the client side of ACP v1: initialize, authenticate,
// session/new and session/load, session/prompt (one turn at a time per
// session; further prompts wait), session/cancel, session/set_mode; it
// forwards session/update, hands permission requests and the client methods
// (fs/*, terminal/*) of known sessions to the host, and answers every other
// request the agent makes (-32601 for methods it does not implement, -32602
// for malformed params). It never decides a permission itself.

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "io/proc.h"

struct acp_conn;
struct reqview;

// What the connection needs from its owner (the broker).
struct acp_host {
  // An event for Neovim; data is stolen.
  void (*emit)(void *ud, const char *event, json_t *data);
  // A valid session/request_permission; id and params are borrowed. The
  // host must answer it exactly once with acp_conn_respond.
  void (*permission)(void *ud, struct acp_conn *c, const json_t *id,
                     json_t *params);
  // The same, for a request read into a flat view (acp/reqview.h: no tree
  // of the message; line is its text, for whatever needs the tree). Valid
  // as permission's are; v is borrowed. NULL: every request goes to
  // permission.
  void (*permission_view)(void *ud, struct acp_conn *c, const struct reqview *v,
                          const char *line, size_t len);
  // fs/* or terminal/* for a session of this connection (params borrowed,
  // an object). The host must answer it exactly once, with
  // acp_conn_respond or acp_conn_respond_error.
  void (*client_request)(void *ud, struct acp_conn *c, const json_t *id,
                         const char *method, json_t *params);
  // The agent withdrew one of its requests ($/cancel_request).
  void (*withdraw)(void *ud, struct acp_conn *c, const json_t *id);
  // The agent is being stopped (exited == false: answers can still be
  // sent, until this returns) or has exited (exited == true). Called once,
  // before the connection reports turn ends and its exit.
  void (*gone)(void *ud, struct acp_conn *c, bool exited);
  // The connection is closed; c is freed after this returns.
  void (*closed)(void *ud, struct acp_conn *c);
};

// Starts the agent and sends initialize. Returns NULL with a reason in err.
struct acp_conn *acp_conn_start(uv_loop_t *loop, const char *name,
                                const struct proc_spawn *spec,
                                const struct acp_host *host, void *ud,
                                char *err, size_t errlen);
// Asks for a session in cwd (sent once initialize has been answered): an
// existing one in cwd is reused; with load (a sessionId) it is resumed with
// session/load when the agent can, else a new one is made (the person is
// told). Emits session_loading, then session_new (resumed true or false);
// when the agent wants a login first, auth_required.
void acp_conn_new_session(struct acp_conn *c, const char *cwd,
                          const char *load);
// The same; with fresh, a new session even when one in cwd exists (a new
// conversation). A reused session's session_new has "reused": true.
void acp_conn_open_session(struct acp_conn *c, const char *cwd,
                           const char *load, bool fresh);
// Logs in with one of the agent's authMethods; on success the sessions the
// agent refused are opened again. Returns 0, or -1 when it cannot be sent.
int acp_conn_authenticate(struct acp_conn *c, const char *method_id);
// session/set_mode on session (NULL: the newest). Emits mode_set or error.
// Returns 0, or -1 when there is no such session or it cannot be sent.
int acp_conn_set_mode(struct acp_conn *c, const char *session,
                      const char *mode_id);
// Answers a request the agent made with a JSON-RPC error.
void acp_conn_respond_error(struct acp_conn *c, const json_t *id, int code,
                            const char *message);
// A number no other connection of this process has (pointers are reused).
uint64_t acp_conn_serial(const struct acp_conn *c);
// The number of the session's current (or last) turn: 1 for the first
// prompt sent, 0 before any (or for an unknown session).
uint64_t acp_conn_turn(const struct acp_conn *c, const char *sid);
// Sends text as a prompt on session (NULL: the newest); queued (bounded)
// until that session exists and its previous turn has ended. Returns 0, or
// -1 when the queue is full.
int acp_conn_prompt(struct acp_conn *c, const char *text, const char *session);
// The same with content blocks after the text (checked by content_check;
// stolen, NULL for none). They are sent only when the agent's
// promptCapabilities allow them; otherwise the turn ends with an error and
// nothing is sent.
int acp_conn_prompt_blocks(struct acp_conn *c, const char *text,
                           const char *session, json_t *blocks);
// Sends session/cancel for every running turn and drops queued prompts.
void acp_conn_cancel(struct acp_conn *c);
// Answers a request the agent made; result is stolen.
void acp_conn_respond(struct acp_conn *c, const json_t *id, json_t *result);
// Answers a session/request_permission: {"outcome":{"outcome":"selected",
// "optionId":option_id}}, or "cancelled" when option_id is NULL; written
// with a fixed format (jsonrpc_outcome), no tree.
void acp_conn_respond_outcome(struct acp_conn *c, const json_t *id,
                              const char *option_id);
// Ends the agent: the host's `gone` runs first (pending requests are then
// answered), then stdin is closed, SIGTERM, and SIGKILL after grace_ms.
void acp_conn_stop(struct acp_conn *c, uint64_t grace_ms, const char *why);
// Stops or resumes reading what the agent writes (proc_pause).
void acp_conn_pause(struct acp_conn *c, bool pause);
// The agent name this connection was started as.
const char *acp_conn_name(const struct acp_conn *c);
// True until the agent has exited or is being stopped.
bool acp_conn_alive(const struct acp_conn *c);
// The agent's process id.
int acp_conn_pid(const struct acp_conn *c);
// The cwd of one of the connection's sessions, or NULL.
const char *acp_conn_session_cwd(const struct acp_conn *c, const char *sid);
// The newest session's id (the one prompts go to), or NULL.
const char *acp_conn_current_session(const struct acp_conn *c);
