#include "broker.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp/acp.h"
#include "acp/jsonrpc.h"
#include "acp/reqview.h"
#include "audit.h"
#include "base/log.h"
#include "base/mem.h"
#include "broker_priv.h"
#include "client.h"
#include "codec/jsonfast.h"
#include "codec/jsonpack.h"
#include "io/nvim_rpc.h"
#include "pending.h"
#include "policy/gate.h"
#include "prompt.h"
#include "unasked.h"
#include "verdict.h"

static const char lua_event[] = "return require('acp.broker')._on_event(...)";
// Notifications of one loop iteration reach Lua together.
static const char lua_events[] = "return require('acp.broker')._on_events(...)";

static void shutdown_begin(struct broker *b, const char *why);

// Before the gate decides or reads settings: a new epoch (the settings
// files, the project root and the paths a request names are looked at
// again) once the current one is BROKER_EPOCH_NS old, counted from its
// first look, or marked stale. Looking costs a dozen stat and readlink
// calls, more than the decision itself: per request, they made an agent
// asking one request at a time wait 20-30 us longer for every answer.
// Stale marks what the broker sees change files or settings: anything
// from Neovim (the person), an agent's fs/* and terminal/* calls, and the
// progress of its own tool calls (a status other than pending); changes it
// does not see (an editor outside Neovim, a command the agent runs and
// does not report) are seen within BROKER_EPOCH_NS (ACP_BROKER_TEST_EPOCH_MS
// replaces it, for the tests of the stale marks).
static void gate_fresh(struct broker *b) {
  uint64_t now = uv_hrtime();
  if (b->epoch_stale || b->epochs == 0 || now - b->epoch_t0 >= b->epoch_ns) {
    gate_epoch(b->gate, ++b->epochs);
    b->epoch_t0 = now;
    b->epoch_stale = false;
  }
}
static void shown_cb(void *ud, const msgpack_object *error,
                     const msgpack_object *result);
static void asked(struct broker *b, struct acp_conn *c, const json_t *id,
                  const char *sid, json_t *tc, const json_t *options,
                  const struct reqview *rv, struct gate_verdict *v);
static uint64_t ask(void *ud, struct acp_conn *c, const json_t *id,
                    json_t *params, json_t *info);

// ---- events to Lua ----

static const char *str(const json_t *info, const char *key);

// A streamed chunk of text (`update` {session, agent, update =
// {sessionUpdate = *_chunk, messageId?, content = {type = "text", text}}},
// nothing else) as a text item: the chunks of one message that follow each
// other in a batch reach Lua as one update with their texts joined
// (nvim_rpc_end_text_item), which saves Neovim a table per chunk. Returns
// false for anything else, which goes as is.
static bool send_text_chunk(struct broker *b, const char *name,
                            const json_t *data) {
  const json_t *u = json_object_get(data, "update");
  const json_t *c = json_object_get(u, "content");
  const char *kind = str(u, "sessionUpdate"), *sid = str(data, "session");
  const char *agent = str(data, "agent"), *type = str(c, "type");
  const json_t *text = json_object_get(c, "text");
  const json_t *id = json_object_get(u, "messageId");
  if (strcmp(name, "update") != 0 || !kind || !sid || !agent ||
      json_object_size(data) != 3 || !type || strcmp(type, "text") != 0 ||
      !json_is_string(text) || json_object_size(c) != 2 ||
      (id && !json_is_string(id)) || json_object_size(u) != (id ? 3u : 2u))
    return false;
  if (strcmp(kind, "agent_message_chunk") != 0 &&
      strcmp(kind, "agent_thought_chunk") != 0 &&
      strcmp(kind, "user_message_chunk") != 0)
    return false;
  msgpack_packer *pk = nvim_rpc_begin_text_item(b->rpc);
  msgpack_pack_array(pk, 2);
  jsonpack_str(pk, name);
  msgpack_pack_map(pk, 3);
  jsonpack_str(pk, "session");
  jsonpack_pack(pk, json_object_get(data, "session"));
  jsonpack_str(pk, "agent");
  jsonpack_pack(pk, json_object_get(data, "agent"));
  jsonpack_str(pk, "update");
  msgpack_pack_map(pk, id ? 3 : 2);
  jsonpack_str(pk, "sessionUpdate");
  jsonpack_pack(pk, json_object_get(u, "sessionUpdate"));
  if (id) {
    jsonpack_str(pk, "messageId");
    jsonpack_pack(pk, id);
  }
  jsonpack_str(pk, "content");
  msgpack_pack_map(pk, 2);
  jsonpack_str(pk, "type");
  jsonpack_str(pk, "text");
  jsonpack_str(pk, "text"); // its value, the last of the item: the text
  nvim_rpc_end_text_item(b->rpc, json_string_value(text),
                         json_string_length(text), true);
  return true;
}

void broker_send_event(struct broker *b, const char *name, json_t *data,
                       struct shown *request) {
  if (!data)
    LOG_E("could not build the %s event", name);
  if (!data || b->rpc_closed || b->shutting_down) {
    json_decref(data);
    free(request);
    return;
  }
  // Streaming updates may be dropped when Neovim stops reading; events
  // that change state never are.
  bool droppable = strcmp(name, "update") == 0;
  if (request) {
    msgpack_packer *pk =
        nvim_rpc_begin_request(b->rpc, "nvim_exec_lua", 2, shown_cb, request);
    jsonpack_str(pk, lua_event);
    msgpack_pack_array(pk, 2);
    jsonpack_str(pk, name);
    jsonpack_pack(pk, data);
    nvim_rpc_end(b->rpc, droppable);
  } else if (!droppable || !send_text_chunk(b, name, data)) {
    msgpack_packer *pk = nvim_rpc_begin_item(b->rpc);
    msgpack_pack_array(pk, 2);
    jsonpack_str(pk, name);
    jsonpack_pack(pk, data);
    nvim_rpc_end_item(b->rpc, droppable);
  }
  json_decref(data);
}

static bool call_lua(void *ud, const char *code, json_t *args,
                     nvim_rpc_response_cb cb, void *cb_ud) {
  struct broker *b = ud;
  if (!args || b->rpc_closed || b->shutting_down) {
    json_decref(args);
    return false;
  }
  msgpack_packer *pk =
      nvim_rpc_begin_request(b->rpc, "nvim_exec_lua", 2, cb, cb_ud);
  jsonpack_str(pk, code);
  jsonpack_pack(pk, args);
  nvim_rpc_end(b->rpc, false);
  json_decref(args);
  return true;
}

static void report_unasked(struct broker *b, const char *agent, const char *cwd,
                           json_t *found);

static const char *str(const json_t *info, const char *key);

// Watches tool calls for acting unasked (unasked.h): updates after they
// reach Lua, turn ends before. Other updates pay a compare and a lookup.
// Only sessions the connection has opened are watched: what an agent
// replays or invents for other ids cannot push theirs out of the table.
static void watch_updates(struct broker *b, const char *event, json_t *data,
                          bool before) {
  json_t *found = NULL, *u = NULL;
  if (!before) {
    u = strcmp(event, "update") == 0 ? json_object_get(data, "update") : NULL;
    if (!unasked_is_tool_update(u))
      return;
    // A tool call of the agent's own runs or ran: what it did may have
    // changed files the gate looks at. (Announcing one, `pending`, changes
    // nothing: agents announce every call before asking about it.)
    const char *status = str(u, "status");
    if (status && strcmp(status, "pending") != 0)
      b->epoch_stale = true;
  } else if (strcmp(event, "turn_end") != 0) {
    bool loading = strcmp(event, "session_loading") == 0;
    if (loading || strcmp(event, "session_new") == 0)
      unasked_loading(b->unasked, str(data, "agent"), str(data, "session"),
                      loading);
    return;
  }
  const char *agent = str(data, "agent"), *sid = str(data, "session");
  struct acp_conn *c = agent ? broker_find_conn(b, agent) : NULL;
  const char *cwd = c && sid ? acp_conn_session_cwd(c, sid) : NULL;
  if (!cwd)
    return;
  found = u ? unasked_update(b->unasked, agent, sid, u)
            : unasked_turn_end(b->unasked, agent, sid);
  if (found)
    report_unasked(b, agent, cwd, found);
}

static void audit_posture(struct broker *b, json_t *d);

static void host_emit(void *ud, const char *event, json_t *data) {
  struct broker *b = ud;
  char *cwd = NULL, *agent = NULL;
  json_incref(data); // for the watch after the event is sent
  watch_updates(b, event, data, true);
  if (strcmp(event, "posture") == 0)
    audit_posture(b, data);
  if (strcmp(event, "turn_start") == 0)
    snapshots_turn_start(b->snaps, str(data, "agent"), str(data, "session"));
  else if (strcmp(event, "turn_end") == 0)
    snapshots_turn_end(b->snaps, str(data, "agent"), str(data, "session"));
  if (strcmp(event, "session_new") == 0) {
    // The person learns what governs the session as it starts.
    const char *c = json_string_value(json_object_get(data, "cwd"));
    const char *a = json_string_value(json_object_get(data, "agent"));
    cwd = c ? xstrdup(c) : NULL;
    agent = a ? xstrdup(a) : NULL;
  }
  broker_send_event(b, event, data, NULL);
  watch_updates(b, event, data, false);
  json_decref(data);
  if (cwd) {
    gate_fresh(b);
    broker_send_event(b, "settings", gate_settings(b->gate, cwd, agent), NULL);
  }
  free(cwd);
  free(agent);
}

void broker_emit_error(struct broker *b, const char *agent, const char *msg) {
  LOG_W("%s%s%s", agent ? agent : "", agent ? ": " : "", msg);
  broker_send_event(b, "error",
                    json_pack("{s:s?,s:s}", "agent", agent, "message", msg),
                    NULL);
}

// ---- pending permissions ----

static const char *str(const json_t *info, const char *key) {
  return json_string_value(json_object_get(info, key));
}

static void audit_failed(struct broker *b);

// Appends a decision to the audit log; tells the person once if it cannot.
static void audit_entry(struct broker *b, const struct audit_entry *a) {
  if (audit_write(NULL, a) != 0)
    audit_failed(b);
}

// The same for a verdict as JSON (info, the gate's) ...
static void audit(struct broker *b, const json_t *info, const char *decision,
                  const char *by, const char *option_id, long long wait_ms) {
  struct audit_entry a;
  verdict_audit_info(info, decision, by, option_id, wait_ms, &a);
  audit_entry(b, &a);
}

// ... and as the gate's struct.
static void audit_verdict(struct broker *b, const struct gate_verdict *v,
                          const char *by, const char *option_id) {
  struct audit_entry a;
  verdict_audit(v, v->decision_name, by, option_id, 0, &a);
  audit_entry(b, &a);
}

// An agent that cannot be kept asking, or that was set back to its asking
// mode, gets an audit line: kind "posture", by "agent", outcome
// "unverified" or "reasserted", the reason in the title.
static void audit_posture(struct broker *b, json_t *d) {
  const char *posture = str(d, "posture");
  bool reasserted = json_is_true(json_object_get(d, "reasserted"));
  if (!posture || (!reasserted && strcmp(posture, "asking") == 0))
    return;
  struct acp_conn *c =
      broker_find_conn(b, str(d, "agent") ? str(d, "agent") : "");
  const char *sid = str(d, "session");
  char title[700];
  snprintf(title, sizeof(title), "posture %s: %s", posture,
           str(d, "reason") ? str(d, "reason") : "");
  struct audit_entry a = {
      .root = c && sid ? acp_conn_session_cwd(c, sid) : NULL,
      .agent = str(d, "agent"),
      .session = sid,
      .kind = "posture",
      .title = title,
      .decision = "ask",
      .by = "agent",
      .outcome = reasserted ? "reasserted" : "unverified",
  };
  if (audit_write(NULL, &a) != 0)
    audit_failed(b);
}

// Tells the person once that the audit log cannot be written.
static void audit_failed(struct broker *b) {
  if (b->audit_failed)
    return;
  b->audit_failed = true;
  char msg[600];
  snprintf(msg, sizeof(msg),
           "the audit log %s cannot be written (see the log); decisions are "
           "still made",
           audit_path());
  broker_emit_error(b, NULL, msg);
}

// Tool calls that acted with no request the broker saw (found: one
// {sessionId, toolCall} or an array of them, stolen), each judged by the
// gate as if the agent had asked. Where the policy would have asked or
// denied: an audit line (by "agent", outcome "unasked") and an `unasked`
// event. Nothing is answered: the call is over.
static void report_unasked(struct broker *b, const char *agent, const char *cwd,
                           json_t *found) {
  if (!json_is_array(found)) {
    json_t *one = json_array();
    json_array_append_new(one, found);
    found = one;
  }
  // What the policy would say, with the options every agent offers.
  json_t *options = client_own_options();
  size_t i;
  json_t *params;
  json_array_foreach(found, i, params) {
    json_object_set_nocheck(params, "options", options);
    const char *sid = str(params, "sessionId");
    json_t *tc = json_object_get(params, "toolCall");
    struct gate_verdict v;
    gate_fresh(b);
    gate_decide(b->gate, agent, sid, cwd ? cwd : "/", params, &v);
    if (v.decision == POLICY_ALLOW) {
      gate_verdict_clear(&v);
      continue;
    }
    gate_verdict_to_info(&v); // the event is built from it
    const char *decision = str(v.info, "decision");
    LOG_W("%s: %s (%s) acted without asking; the policy would have said %s: "
          "%s",
          agent, str(tc, "toolCallId"), str(tc, "kind"), decision,
          str(v.info, "reason"));
    audit(b, v.info, decision, "agent", NULL, 0);
    // The event: the verdict's keys, and what the chat shows of a file.
    json_t *diffs = json_array();
    size_t k;
    json_t *item;
    json_array_foreach(json_object_get(tc, "content"), k, item) {
      const char *type = str(item, "type");
      if (type && strcmp(type, "diff") == 0)
        json_array_append(diffs, item);
    }
    json_object_del(v.info, "root");
    json_object_del(v.info, "narrow");
    json_object_del(v.info, "broad");
    json_object_set_nocheck(v.info, "status", json_object_get(tc, "status"));
    json_object_set_new_nocheck(v.info, "content", diffs);
    json_t *loc = json_object_get(tc, "locations");
    json_object_set_new_nocheck(v.info, "locations",
                                json_is_array(loc) ? json_incref(loc)
                                                   : json_array());
    json_object_set_new_nocheck(v.info, "by", json_string("agent"));
    broker_send_event(b, "unasked", v.info, NULL);
  }
  json_decref(options);
  json_decref(found);
}

// The audit log's `by` for a prompt that was answered or dropped.
static const char *audit_by(const char *by) {
  if (strcmp(by, "person") == 0 || strcmp(by, "error") == 0)
    return by;
  return "cancel"; // cancel, agent_exit, agent (withdrawn)
}

// Answers the agent and tells Lua. option_id NULL means `cancelled`.
void broker_resolve(struct broker *b, uint64_t token, const char *option_id,
                    const char *by) {
  struct pending_entry e;
  if (!pending_take(&b->pending, token, &e))
    return;
  struct acp_conn *c = e.conn;
  const struct pending_option *offered =
      pending_offered(&e, option_id ? option_id : "");
  const char *kind = offered ? offered->kind : NULL;
  bool allow = kind && strncmp(kind, "allow_", 6) == 0;
  // A prompt the broker made for an fs/* or terminal/* call the agent did
  // not ask about: the answer completes or refuses that call.
  if (!client_answered(b->client, c, token, allow, by)) {
    acp_conn_respond_outcome(c, e.agent_id, option_id);
    const struct prompt_kept *k = e.kept;
    bool person = strcmp(by, "person") == 0;
    if (allow && k)
      client_approved_call(b->client, c, k->session,
                           k->raw_command ? k->command : NULL, k->kind,
                           k->paths, k->npaths, person);
    else if (allow)
      client_approved(b->client, c, e.info, person);
  }
  LOG_I("%s: permission %llu (%s) answered %s by %s", acp_conn_name(c),
        (unsigned long long)token, e.tool_call_id,
        option_id ? option_id : "cancelled", by);
  long long wait_ms = (long long)(uv_now(b->loop) - e.added_ms);
  if (e.kept) {
    struct audit_entry a;
    prompt_kept_audit(e.kept, "ask", audit_by(by), option_id, wait_ms, &a);
    audit_entry(b, &a);
  } else {
    audit(b, e.info, "ask", audit_by(by), option_id, wait_ms);
  }
  if (!b->rpc_closed && !b->shutting_down) { // as broker_send_event
    msgpack_packer *pk = nvim_rpc_begin_item(b->rpc);
    msgpack_pack_array(pk, 2);
    jsonpack_str(pk, "permission_resolved");
    prompt_pack_resolved(pk, token, acp_conn_name(c), e.session, e.tool_call_id,
                         option_id, by);
    nvim_rpc_end_item(b->rpc, false);
  }
  pending_entry_clear(&e);
}

// Answers `cancelled` to every pending request of c (all when c is NULL).
void broker_cancel_pending(struct broker *b, struct acp_conn *c,
                           const char *by) {
  client_cancel(b->client, c); // the broker's own prompts not shown yet
  // Collect first: broker_resolve() edits the table.
  size_t n = 0;
  uint64_t *tokens = xcalloc(pending_count(&b->pending) + 1, sizeof(*tokens));
  for (size_t i = 0; i < b->pending.len; i++) {
    struct pending_entry *e = &b->pending.v[i];
    if (e->live && (!c || e->conn == c))
      tokens[n++] = e->token;
  }
  for (size_t i = 0; i < n; i++)
    broker_resolve(b, tokens[i], NULL, by);
  free(tokens);
}

// The answer to a `permission` event: Lua has drawn the prompt, or failed.
static void shown_cb(void *ud, const msgpack_object *error,
                     const msgpack_object *result) {
  struct shown *s = ud;
  struct broker *b = s->b;
  uint64_t token = s->token;
  free(s);
  if (error && error->type == MSGPACK_OBJECT_NIL)
    return; // Lua has it
  // Fail closed: a prompt nobody can see must not stay open.
  if (error || result) {
    LOG_E("Lua could not show permission %llu; answering cancelled",
          (unsigned long long)token);
    broker_emit_error(
        b, NULL,
        "could not show a permission prompt (see the log); the agent "
        "was answered `cancelled`");
  }
  broker_resolve(b, token, NULL, "error");
}

// What the rest of the broker keeps of a request the gate decided (v):
// the unasked watch hears that it was asked. Returns whether its command
// is the agent's own (rawInput) or read from the title (only the former is
// a command an approval can be held to).
static bool note_request(struct broker *b, struct acp_conn *c,
                         const struct gate_verdict *v) {
  unasked_requested(b->unasked, acp_conn_name(c), v->session, v->tool_call_id);
  if (v->req) // the request read rawInput.command
    return policy_request_raw_command(v->req);
  json_t *raw = json_object_get(json_object_get(v->tc, "rawInput"), "command");
  return json_is_string(raw) || json_is_array(raw);
}

// Sends the `decided` event of v, packed from the verdict itself
// (verdict.h: no JSON in between); snaps is released.
static void send_decided(struct broker *b, const struct gate_verdict *v,
                         bool with_paths, json_t *snaps) {
  if (!b->rpc_closed && !b->shutting_down) {
    msgpack_packer *pk = nvim_rpc_begin_item(b->rpc);
    msgpack_pack_array(pk, 2);
    jsonpack_str(pk, "decided");
    verdict_pack_decided(pk, v, with_paths, snaps);
    nvim_rpc_end_item(b->rpc, false);
  }
  json_decref(snaps);
}

// Answers a request the gate decided (allow or deny) without asking: the
// answer first, then everything else the request causes (the audit line,
// the `decided` event).
static void answer_decided(struct broker *b, struct acp_conn *c,
                           const json_t *id, struct gate_verdict *v) {
  // An allowed call that may change files keeps its paths: Lua snapshots
  // them before the change (the turn ledger, doc/protocol.md). Reads, the
  // bulk of what is decided, do not.
  const char *kind = v->kind;
  // (by the first byte, then the one name it may be)
  const char *look = !kind          ? NULL
                     : *kind == 'r' ? "read"
                     : *kind == 's' ? "search"
                     : *kind == 'f' ? "fetch"
                     : *kind == 't' ? "think"
                                    : NULL;
  bool edit = v->decision == POLICY_ALLOW && !(look && strcmp(kind, look) == 0);
  // Read before the agent has its answer: a fast command could change
  // them before Lua hears of the call.
  json_t *snaps = edit ? snapshots_take_list(b->snaps, v->agent, v->session,
                                             v->paths, v->npaths)
                       : NULL;
  acp_conn_respond_outcome(c, id, v->option_id);
  bool raw = note_request(b, c, v);
  if (v->decision == POLICY_ALLOW)
    client_approved_call(b->client, c, v->session, raw ? v->command : NULL,
                         v->kind, v->paths, v->npaths, false);
  LOG_D("%s: %s %s by %s: %s", acp_conn_name(c), v->tool_call_id,
        v->decision_name, v->by, v->reason);
  audit_verdict(b, v, v->by, v->option_id);
  // Only what doc/protocol.md lists: Neovim decodes every field of every
  // decision, and an agent can have thousands decided per second.
  send_decided(b, v, edit, snaps);
}

static void host_permission(void *ud, struct acp_conn *c, const json_t *id,
                            json_t *params) {
  struct broker *b = ud;
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *cwd = acp_conn_session_cwd(c, sid);
  struct gate_verdict v;
  gate_fresh(b);
  gate_decide(b->gate, acp_conn_name(c), sid, cwd ? cwd : "/", params, &v);
  if (v.decision != POLICY_ASK) {
    answer_decided(b, c, id, &v);
    gate_verdict_clear(&v);
    return;
  }
  asked(b, c, id, json_string_value(json_object_get(params, "sessionId")),
        json_object_get(params, "toolCall"), json_object_get(params, "options"),
        NULL, &v);
}

// A request read into a flat view (no tree of the message): decided from
// its toolCall's tree and its options, and a prompt packed from the view
// too (its options' strings are read in line, which is alive until this
// returns).
static void host_permission_view(void *ud, struct acp_conn *c,
                                 const struct reqview *rv, const char *line,
                                 size_t len) {
  struct broker *b = ud;
  const char *cwd = acp_conn_session_cwd(c, rv->sid_z);
  struct gate_verdict v;
  gate_fresh(b);
  struct gate_options o = {(const char *const *)rv->option_id_z,
                           (const char *const *)rv->option_kind_z,
                           rv->noptions};
  gate_decide_tc(b->gate, acp_conn_name(c), rv->sid_z, cwd ? cwd : "/", rv->tc,
                 &o, &v);
  if (v.decision != POLICY_ASK) {
    answer_decided(b, c, rv->id, &v);
    gate_verdict_clear(&v);
    return;
  }
  (void)line; // the view holds what the prompt needs of it
  (void)len;
  asked(b, c, rv->id, rv->sid_z, rv->tc, NULL, rv, &v);
}

// The person is asked about a request the gate did not decide (v: ASK):
// the pending entry keeps what the answer reads, and the `permission`
// event is packed from the verdict (prompt.h), without the verdict's JSON.
// The request is the tree's (options) or the flat view's (rv: the line it
// was read from still alive); the prompt is the same.
static void asked(struct broker *b, struct acp_conn *c, const json_t *id,
                  const char *sid, json_t *tc, const json_t *options,
                  const struct reqview *rv, struct gate_verdict *v) {
  struct prompt_kept *kept = prompt_keep(v, note_request(b, c, v));
  const char *tcid = json_string_value(json_object_get(tc, "toolCallId"));
  json_t *agent_id = json_deep_copy(id);
  uint64_t now = uv_now(b->loop);
  uint64_t token =
      rv ? pending_add_of(&b->pending, c, agent_id, xstrdup(sid), xstrdup(tcid),
                          (const char *const *)rv->option_id_z,
                          (const char *const *)rv->option_kind_z, rv->noptions,
                          now)
         : pending_add(&b->pending, c, agent_id, xstrdup(sid), xstrdup(tcid),
                       json_incref((json_t *)(uintptr_t)options), now);
  if (token == 0) {
    acp_conn_respond_outcome(c, id, NULL);
    struct audit_entry a;
    prompt_kept_audit(kept, "ask", "error", NULL, 0, &a);
    audit_entry(b, &a);
    free(kept);
    gate_verdict_clear(v);
    broker_emit_error(b, acp_conn_name(c),
                      "too many permission requests waiting; one was answered "
                      "`cancelled`");
    return;
  }
  struct pending_entry *e = pending_find(&b->pending, token);
  e->kept = kept; // with the rules gate_remember takes
  if (!b->rpc_closed && !b->shutting_down) {
    struct shown *sh = xmalloc(sizeof(*sh));
    *sh = (struct shown){b, token};
    msgpack_packer *pk =
        nvim_rpc_begin_request(b->rpc, "nvim_exec_lua", 2, shown_cb, sh);
    jsonpack_str(pk, lua_event);
    msgpack_pack_array(pk, 2);
    jsonpack_str(pk, "permission");
    if (rv)
      prompt_pack_view(pk, token, acp_conn_name(c), rv, v);
    else
      prompt_pack(pk, token, acp_conn_name(c), sid, tc, options, v);
    nvim_rpc_end(b->rpc, false);
  }
  gate_verdict_clear(v);
  if (b->shutting_down)
    broker_resolve(b, token, NULL, "cancel");
}

// Shows a prompt for a request of c that the person must answer: adds it
// to the pending table and sends the `permission` event. params is
// {sessionId, toolCall, options} (borrowed); info (a verdict's JSON with
// rawCommand: the broker's own prompts, client.c) is taken on success.
// Returns the token, or 0 when the table is full (info not taken, nothing
// answered). The caller resolves it at once when the broker is shutting
// down.
static uint64_t ask(void *ud, struct acp_conn *c, const json_t *id,
                    json_t *params, json_t *info) {
  struct broker *b = ud;
  json_t *tc = json_object_get(params, "toolCall");
  json_t *options = json_object_get(params, "options");
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *tcid = json_string_value(json_object_get(tc, "toolCallId"));
  uint64_t token =
      pending_add(&b->pending, c, json_deep_copy(id), xstrdup(sid),
                  xstrdup(tcid), json_incref(options), uv_now(b->loop));
  if (token == 0)
    return 0;
  pending_find(&b->pending, token)->info = info;
  json_t *data = prompt_data_json(token, acp_conn_name(c), params, info);
  struct shown *sh = xmalloc(sizeof(*sh));
  *sh = (struct shown){b, token};
  broker_send_event(b, "permission", data, sh);
  prompt_info_trim(info);
  return token;
}

static void host_withdraw(void *ud, struct acp_conn *c, const json_t *id) {
  struct broker *b = ud;
  struct pending_entry *e = pending_find_agent_id(&b->pending, c, id);
  if (e)
    broker_resolve(b, e->token, NULL, "agent");
}

static void host_client_request(void *ud, struct acp_conn *c, const json_t *id,
                                const char *method, json_t *params) {
  struct broker *b = ud;
  b->epoch_stale = true; // fs/* may write, terminal/* may run anything
  client_request(b->client, c, id, method, params);
}

static void host_gone(void *ud, struct acp_conn *c, bool exited) {
  struct broker *b = ud;
  // Its sessions' turns end here: what ran unasked is reported now.
  json_t *found = unasked_forget(b->unasked, acp_conn_name(c));
  for (size_t i = 0; i < json_array_size(found); i++) {
    json_t *f = json_array_get(found, i);
    report_unasked(b, acp_conn_name(c),
                   acp_conn_session_cwd(c, str(f, "sessionId")),
                   json_incref(f));
  }
  json_decref(found);
  broker_cancel_pending(b, c, exited ? "agent_exit" : "cancel");
  client_conn_gone(b->client, c);
  gate_forget(b->gate, acp_conn_name(c));
}

static void maybe_finish(struct broker *b) {
  if (!b->shutting_down || b->nconns || !b->rpc_closed || b->finished)
    return;
  b->finished = true;
  uv_close((uv_handle_t *)&b->deadline, NULL);
  uv_close((uv_handle_t *)&b->flush, NULL);
}

static void host_closed(void *ud, struct acp_conn *c) {
  struct broker *b = ud;
  for (size_t i = 0; i < b->nconns; i++)
    if (b->conns[i] == c) {
      b->conns[i] = b->conns[--b->nconns];
      break;
    }
  maybe_finish(b);
}

const struct acp_host broker_host = {
    host_emit,     host_permission, host_permission_view, host_client_request,
    host_withdraw, host_gone,       host_closed};

struct acp_conn *broker_find_conn(struct broker *b, const char *name) {
  for (size_t i = 0; i < b->nconns; i++)
    if (acp_conn_alive(b->conns[i]) &&
        strcmp(acp_conn_name(b->conns[i]), name) == 0)
      return b->conns[i];
  return NULL;
}

static void on_message(void *ud, const struct nvim_rpc_msg *m) {
  struct broker *b = ud;
  // The person may have changed settings (a file, :AcpTrust, a mode):
  // what the gate looks at from here on is looked at again.
  b->epoch_stale = true;
  gate_fresh(b);
  for (size_t i = 0; i < broker_nmethods; i++) {
    if (m->method_len != strlen(broker_methods[i].name) ||
        memcmp(m->method, broker_methods[i].name, m->method_len) != 0)
      continue;
    if (m->type == NVIM_RPC_NOTIFICATION && !b->shutting_down)
      broker_methods[i].fn(b, m);
    break;
  }
  if (m->type == NVIM_RPC_REQUEST) {
    // Lua never waits on the broker; a request is a mistake, answered so
    // that the caller does not hang.
    msgpack_packer *pk = nvim_rpc_begin_response(b->rpc, m->msgid);
    jsonpack_str(pk, "acp-broker takes notifications only");
    msgpack_pack_nil(pk);
    nvim_rpc_end(b->rpc, false);
  }
}

// ---- start and shutdown ----

static void on_eof(void *ud) {
  shutdown_begin(ud, "Neovim closed the channel");
}

// Neovim is behind on events (an agent streams faster than it draws):
// stop reading the agents until it caught up, instead of queueing without
// bound or dropping what they said.
static void on_backlog(void *ud, bool above) {
  struct broker *b = ud;
  b->paused = above;
  LOG_D("Neovim is %s: %s reading the agents", above ? "behind" : "caught up",
        above ? "stop" : "resume");
  for (size_t i = 0; i < b->nconns; i++)
    acp_conn_pause(b->conns[i], above);
}

static const struct nvim_rpc_ops rpc_ops = {on_message, on_eof, on_backlog};

static void rpc_closed(void *ud) {
  struct broker *b = ud;
  b->rpc_closed = true;
  maybe_finish(b);
}

static void deadline_cb(uv_timer_t *t) {
  struct broker *b = t->data;
  LOG_W("agents still running %d ms after shutdown; killing them",
        BROKER_DEADLINE_MS);
  for (size_t i = 0; i < b->nconns; i++)
    kill(-acp_conn_pid(b->conns[i]), SIGKILL);
  uv_stop(b->loop);
}

static void signal_cb(uv_signal_t *h, int signum) {
  LOG_I("signal %d", signum);
  shutdown_begin(h->data, "signal");
}

static void shutdown_begin(struct broker *b, const char *why) {
  if (b->shutting_down)
    return;
  LOG_I("shutting down: %s", why);
  // Stop first, so that pending requests are answered `cancelled` while
  // the agents' stdin is still open; then mark the broker as shutting down.
  for (size_t i = 0; i < b->nconns; i++)
    acp_conn_stop(b->conns[i], BROKER_EXIT_GRACE_MS, "Neovim exited");
  b->shutting_down = true;
  for (size_t i = 0; i < 3; i++)
    uv_close((uv_handle_t *)&b->signals[i], NULL);
  uv_timer_start(&b->deadline, deadline_cb, BROKER_DEADLINE_MS, 0);
  nvim_rpc_close(b->rpc, rpc_closed, b);
}

// Before the loop waits for I/O: the decisions of this iteration reach
// the audit log in one write (after their answers went out).
static void flush_cb(uv_prepare_t *h) {
  struct broker *b = h->data;
  if (audit_flush() != 0)
    audit_failed(b);
}

// ---- what the client services (client.h) reach ----

static struct acp_conn *cl_conn(void *ud, uint64_t serial) {
  struct broker *b = ud;
  for (size_t i = 0; i < b->nconns; i++)
    if (acp_conn_serial(b->conns[i]) == serial && acp_conn_alive(b->conns[i]))
      return b->conns[i];
  return NULL;
}

static void cl_emit(void *ud, const char *event, json_t *data) {
  struct broker *b = ud;
  b->epoch_stale = true; // a file written, a terminal's command ended, ...
  broker_send_event(b, event, data, NULL);
}

static void cl_error(void *ud, const char *agent, const char *msg) {
  broker_emit_error(ud, agent, msg);
}

static void cl_judge(void *ud, const char *agent, const char *session,
                     const char *cwd, json_t *params, struct gate_verdict *v) {
  struct broker *b = ud;
  gate_fresh(b);
  gate_decide(b->gate, agent, session, cwd, params, v);
  gate_verdict_to_info(v); // the services work on the JSON
}

static void cl_resolve(void *ud, uint64_t token, const char *option_id,
                       const char *by) {
  broker_resolve(ud, token, option_id, by);
}

static void cl_audit(void *ud, const json_t *info, const char *decision,
                     const char *by, const char *option_id) {
  audit(ud, info, decision, by, option_id, 0);
}

static bool cl_closing(void *ud) {
  struct broker *b = ud;
  return b->shutting_down;
}

static const struct client_host client_host = {
    cl_conn, cl_emit,    cl_error, call_lua,  cl_judge,
    ask,     cl_resolve, cl_audit, cl_closing};

struct broker *broker_start(uv_loop_t *loop, char *err, size_t errlen) {
  struct broker *b = xcalloc(1, sizeof(*b));
  b->loop = loop;
  pending_init(&b->pending, BROKER_MAX_PENDING);
  b->gate = gate_new();
  b->epoch_ns = BROKER_EPOCH_NS;
  const char *epoch_ms = getenv("ACP_BROKER_TEST_EPOCH_MS");
  if (epoch_ms && *epoch_ms) {
    char *end;
    unsigned long long ms = strtoull(epoch_ms, &end, 10);
    if (*end == '\0' && ms <= 3600 * 1000ULL)
      b->epoch_ns = ms * 1000 * 1000;
  }
  b->unasked = unasked_new(0, 0, 0);
  b->snaps = snapshots_new(NULL);
  b->client = client_new(loop, &client_host, b);
  b->rpc = nvim_rpc_open(loop, 0, 1, &rpc_ops, b, err, errlen);
  if (!b->rpc) {
    gate_free(b->gate);
    unasked_free(b->unasked);
    snapshots_free(b->snaps);
    client_free(b->client);
    pending_free(&b->pending);
    free(b);
    return NULL;
  }
  nvim_rpc_set_batch(b->rpc, "nvim_exec_lua", lua_events);
  uv_timer_init(loop, &b->deadline);
  uv_prepare_init(loop, &b->flush);
  b->flush.data = b;
  uv_prepare_start(&b->flush, flush_cb);
  b->deadline.data = b;
  const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < 3; i++) {
    uv_signal_init(loop, &b->signals[i]);
    b->signals[i].data = b;
    uv_signal_start(&b->signals[i], signal_cb, sigs[i]);
  }
  broker_send_event(b, "ready",
                    json_pack("{s:s,s:i,s:s}", "version", ACP_VERSION, "pid",
                              (int)getpid(), "log", log_path()),
                    NULL);
  LOG_I("acp-broker %s ready (pid %d)", ACP_VERSION, (int)getpid());
  return b;
}

void broker_free(struct broker *b) {
  client_free(b->client);
  gate_free(b->gate);
  unasked_free(b->unasked);
  snapshots_free(b->snaps);
  audit_close();
  jsonfast_release();
  pending_free(&b->pending);
  free(b);
}
