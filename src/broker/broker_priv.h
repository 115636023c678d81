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
#include "snapshot.h"

#define BROKER_MAX_PENDING 16384 // permission requests waiting for a person
#define BROKER_MAX_CONNS 64      // agent connections
#define BROKER_STOP_GRACE_MS 500 // SIGTERM → SIGKILL for :AcpStop
#define BROKER_EXIT_GRACE_MS 300 // the same when Neovim is gone
#define BROKER_DEADLINE_MS 800   // then everything is killed
// How long what the gate looked at (the settings files, the project root,
// the paths a request names) is taken as still true: one look per
// BROKER_EPOCH_NS at most, unless something the broker sees may have
// changed it (gate_fresh in broker.c).
#define BROKER_EPOCH_NS ((uint64_t)1000 * 1000)

struct broker {
  uv_loop_t *loop;
  struct client *client; // fs/* and terminal/* (client.c)
  struct nvim_rpc *rpc;
  struct pending pending;
  struct gate *gate;
  struct unasked *unasked; // tool calls watched for acting unasked
  struct snapshots *snaps; // files auto-allowed calls name, read per turn
  bool audit_failed; // the person was told the audit log cannot be written
  struct acp_conn *conns[BROKER_MAX_CONNS]; // live and closing connections
  size_t nconns;
  uv_signal_t signals[3];
  uv_timer_t deadline;
  uv_prepare_t flush; // writes the audit lines of one loop iteration
  uint64_t epochs;    // the gate's epoch (gate_epoch)
  uint64_t epoch_t0;  // when the gate first looked in it (uv_hrtime)
  uint64_t epoch_ns;  // BROKER_EPOCH_NS, or ACP_BROKER_TEST_EPOCH_MS
  bool epoch_stale;   // something since then may have changed files
  bool shutting_down;
  bool paused; // agents are not read: Neovim is behind (on_backlog)
  bool rpc_closed;
  bool finished;
};

struct shown {
  struct broker *b;
  uint64_t token;
};

// Sends an event to Lua (data stolen); with request, as a msgpack-RPC
// request whose answer (the prompt was shown, or not) goes to request.
void broker_send_event(struct broker *b, const char *name, json_t *data,
                       struct shown *request);
// Tells the person something went wrong (an `error` event) and logs it.
void broker_emit_error(struct broker *b, const char *agent, const char *msg);
// Answers a pending request (option_id NULL: `cancelled`), audits it and
// tells Lua; by is who answered.
void broker_resolve(struct broker *b, uint64_t token, const char *option_id,
                    const char *by);
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
