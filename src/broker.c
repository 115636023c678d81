#include "broker.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acp.h"
#include "jsonpack.h"
#include "log.h"
#include "mem.h"
#include "nvim_rpc.h"
#include "pending.h"

#define BROKER_MAX_PENDING 16384 // permission requests waiting for a person
#define BROKER_MAX_CONNS 64      // agent connections
#define BROKER_STOP_GRACE_MS 500 // SIGTERM → SIGKILL for :AcpStop
#define BROKER_EXIT_GRACE_MS 300 // the same when Neovim is gone
#define BROKER_DEADLINE_MS 800   // then everything is killed

static const char lua_event[] = "return require('acp.broker')._on_event(...)";

struct broker {
  uv_loop_t *loop;
  struct nvim_rpc *rpc;
  struct pending pending;
  struct acp_conn *conns[BROKER_MAX_CONNS]; // live and closing connections
  size_t nconns;
  uv_signal_t signals[3];
  uv_timer_t deadline;
  bool shutting_down;
  bool rpc_closed;
  bool finished;
};

struct shown {
  struct broker *b;
  uint64_t token;
};

static void shutdown_begin(struct broker *b, const char *why);
static void shown_cb(void *ud, const msgpack_object *error,
                     const msgpack_object *result);

// ---- events to Lua ----

static void send_event(struct broker *b, const char *name, json_t *data,
                       struct shown *request) {
  if (!data)
    LOG_E("could not build the %s event", name);
  if (!data || b->rpc_closed || b->shutting_down) {
    json_decref(data);
    free(request);
    return;
  }
  msgpack_packer *pk = request
                           ? nvim_rpc_begin_request(b->rpc, "nvim_exec_lua", 2,
                                                    shown_cb, request)
                           : nvim_rpc_begin_notify(b->rpc, "nvim_exec_lua", 2);
  jsonpack_str(pk, lua_event);
  msgpack_pack_array(pk, 2);
  jsonpack_str(pk, name);
  jsonpack_pack(pk, data);
  // Streaming updates may be dropped when Neovim stops reading; events
  // that change state never are.
  nvim_rpc_end(b->rpc, strcmp(name, "update") == 0);
  json_decref(data);
}

static void host_emit(void *ud, const char *event, json_t *data) {
  send_event(ud, event, data, NULL);
}

static void emit_error(struct broker *b, const char *agent, const char *msg) {
  LOG_W("%s%s%s", agent ? agent : "", agent ? ": " : "", msg);
  send_event(b, "error",
             json_pack("{s:s?,s:s}", "agent", agent, "message", msg), NULL);
}

// ---- pending permissions ----

// Answers the agent and tells Lua. option_id NULL means `cancelled`.
static void resolve(struct broker *b, uint64_t token, const char *option_id,
                    const char *by) {
  struct pending_entry e;
  if (!pending_take(&b->pending, token, &e))
    return;
  struct acp_conn *c = e.conn;
  json_t *outcome =
      option_id ? json_pack("{s:{s:s,s:s}}", "outcome", "outcome", "selected",
                            "optionId", option_id)
                : json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled");
  acp_conn_respond(c, e.agent_id, outcome);
  LOG_I("%s: permission %llu (%s) answered %s by %s", acp_conn_name(c),
        (unsigned long long)token, e.tool_call_id,
        option_id ? option_id : "cancelled", by);
  send_event(b, "permission_resolved",
             json_pack("{s:I,s:s,s:s,s:s,s:s,s:s?,s:s}", "id",
                       (json_int_t)token, "agent", acp_conn_name(c), "session",
                       e.session, "toolCallId", e.tool_call_id, "outcome",
                       option_id ? "selected" : "cancelled", "optionId",
                       option_id, "by", by),
             NULL);
  pending_entry_clear(&e);
}

// Answers `cancelled` to every pending request of c (all when c is NULL).
static void cancel_pending(struct broker *b, struct acp_conn *c,
                           const char *by) {
  // Collect first: resolve() edits the table.
  size_t n = 0;
  uint64_t *tokens = xcalloc(pending_count(&b->pending) + 1, sizeof(*tokens));
  for (size_t i = 0; i < b->pending.len; i++) {
    struct pending_entry *e = &b->pending.v[i];
    if (e->live && (!c || e->conn == c))
      tokens[n++] = e->token;
  }
  for (size_t i = 0; i < n; i++)
    resolve(b, tokens[i], NULL, by);
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
    emit_error(b, NULL,
               "could not show a permission prompt (see the log); the agent "
               "was answered `cancelled`");
  }
  resolve(b, token, NULL, "error");
}

static void host_permission(void *ud, struct acp_conn *c, const json_t *id,
                            json_t *params) {
  struct broker *b = ud;
  json_t *tc = json_object_get(params, "toolCall");
  json_t *options = json_object_get(params, "options");
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *tcid = json_string_value(json_object_get(tc, "toolCallId"));
  uint64_t token =
      pending_add(&b->pending, c, json_deep_copy(id), xstrdup(sid),
                  xstrdup(tcid), json_incref(options), uv_now(b->loop));
  if (token == 0) {
    acp_conn_respond(c, id,
                     json_pack("{s:{s:s}}", "outcome", "outcome", "cancelled"));
    emit_error(b, acp_conn_name(c),
               "too many permission requests waiting; one was answered "
               "`cancelled`");
    return;
  }
  json_t *title = json_object_get(tc, "title");
  json_t *kind = json_object_get(tc, "kind");
  json_t *data = json_pack(
      "{s:I,s:s,s:s,s:s,s:O?,s:O?,s:O,s:O}", "id", (json_int_t)token, "agent",
      acp_conn_name(c), "session", sid, "toolCallId", tcid, "title",
      json_is_string(title) ? title : NULL, "kind",
      json_is_string(kind) ? kind : NULL, "options", options, "toolCall", tc);
  struct shown *s = xmalloc(sizeof(*s));
  *s = (struct shown){b, token};
  send_event(b, "permission", data, s);
  if (b->shutting_down)
    resolve(b, token, NULL, "cancel");
}

static void host_withdraw(void *ud, struct acp_conn *c, const json_t *id) {
  struct broker *b = ud;
  struct pending_entry *e = pending_find_agent_id(&b->pending, c, id);
  if (e)
    resolve(b, e->token, NULL, "agent");
}

static void host_gone(void *ud, struct acp_conn *c, bool exited) {
  cancel_pending(ud, c, exited ? "agent_exit" : "cancel");
}

static void maybe_finish(struct broker *b) {
  if (!b->shutting_down || b->nconns || !b->rpc_closed || b->finished)
    return;
  b->finished = true;
  uv_close((uv_handle_t *)&b->deadline, NULL);
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

static const struct acp_host broker_host = {
    host_emit, host_permission, host_withdraw, host_gone, host_closed};

static struct acp_conn *find_conn(struct broker *b, const char *name) {
  for (size_t i = 0; i < b->nconns; i++)
    if (acp_conn_alive(b->conns[i]) &&
        strcmp(acp_conn_name(b->conns[i]), name) == 0)
      return b->conns[i];
  return NULL;
}

// ---- methods Lua calls ----

// A copy of a msgpack string, or NULL when o is not one or holds a NUL.
static char *mp_strdup(const msgpack_object *o) {
  if (!o || (o->type != MSGPACK_OBJECT_STR && o->type != MSGPACK_OBJECT_BIN))
    return NULL;
  if (memchr(o->via.str.ptr, '\0', o->via.str.size))
    return NULL;
  return xstrndup(o->via.str.ptr, o->via.str.size);
}

// Like mp_strdup, but only valid UTF-8: what goes into JSON must be.
static char *mp_utf8dup(const msgpack_object *o) {
  char *s = mp_strdup(o);
  json_t *probe = s ? json_string(s) : NULL;
  if (!probe) {
    free(s);
    return NULL;
  }
  json_decref(probe);
  return s;
}

static const msgpack_object *mp_get(const msgpack_object *map,
                                    const char *key) {
  if (!map || map->type != MSGPACK_OBJECT_MAP)
    return NULL;
  for (uint32_t i = 0; i < map->via.map.size; i++)
    if (nvim_rpc_str_eq(&map->via.map.ptr[i].key, key))
      return &map->via.map.ptr[i].val;
  return NULL;
}

static const msgpack_object *arg(const struct nvim_rpc_msg *m, uint32_t i) {
  return i < m->params->via.array.size ? &m->params->via.array.ptr[i] : NULL;
}

extern char **environ;

// Removes NAME=... from env (NULL-terminated, n entries); returns new n.
static size_t env_unset(char **env, size_t n, const char *name, size_t nlen) {
  for (size_t i = 0; i < n;) {
    if (strncmp(env[i], name, nlen) == 0 && env[i][nlen] == '=') {
      free(env[i]);
      env[i] = env[--n];
      env[n] = NULL;
    } else {
      i++;
    }
  }
  return n;
}

// The agent's environment: Neovim's (inherited by the broker), with the
// spec's entries set, or removed where their value is false.
static char **build_env(const msgpack_object *map) {
  size_t n = 0, extra = 0;
  while (environ[n])
    n++;
  if (map && map->type == MSGPACK_OBJECT_MAP)
    extra = map->via.map.size;
  char **env = xcalloc(n + extra + 1, sizeof(*env));
  for (size_t i = 0; i < n; i++)
    env[i] = xstrdup(environ[i]);
  for (size_t i = 0; i < extra; i++) {
    char *key = mp_strdup(&map->via.map.ptr[i].key);
    if (!key || !key[0] || strchr(key, '=')) {
      free(key);
      continue;
    }
    n = env_unset(env, n, key, strlen(key));
    char *val = mp_strdup(&map->via.map.ptr[i].val);
    if (val) {
      env[n] = xmalloc(strlen(key) + strlen(val) + 2);
      sprintf(env[n++], "%s=%s", key, val);
    }
    free(key);
    free(val);
  }
  return env;
}

static void free_strv(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

static char **build_argv(const msgpack_object *cmd) {
  if (!cmd || cmd->type != MSGPACK_OBJECT_ARRAY || cmd->via.array.size == 0 ||
      cmd->via.array.size > 4096)
    return NULL;
  uint32_t n = cmd->via.array.size;
  char **argv = xcalloc(n + 1, sizeof(*argv));
  for (uint32_t i = 0; i < n; i++)
    if (!(argv[i] = mp_strdup(&cmd->via.array.ptr[i]))) {
      free_strv(argv);
      return NULL;
    }
  return argv;
}

static void spawn_conn(struct broker *b, const char *name,
                       const msgpack_object *spec, const char *cwd) {
  char **argv = build_argv(mp_get(spec, "cmd"));
  if (!argv) {
    emit_error(b, name, "the agent's cmd must be a non-empty list of strings");
    return;
  }
  char **env = build_env(mp_get(spec, "env"));
  struct proc_spawn ps = {(const char *const *)argv, env, cwd, name};
  char err[512];
  struct acp_conn *c = NULL;
  if (b->nconns < BROKER_MAX_CONNS)
    c = acp_conn_start(b->loop, name, &ps, &broker_host, b, err, sizeof(err));
  else
    snprintf(err, sizeof(err), "too many agents running");
  free_strv(argv);
  free_strv(env);
  if (!c) {
    emit_error(b, name, err);
    send_event(b, "agent_exit",
               json_pack("{s:s,s:i,s:i,s:s}", "agent", name, "code", -1,
                         "signal", 0, "message", err),
               NULL);
    return;
  }
  b->conns[b->nconns++] = c;
  send_event(b, "agent_started",
             json_pack("{s:s,s:i}", "agent", name, "pid", acp_conn_pid(c)),
             NULL);
  acp_conn_new_session(c, cwd);
}

static void m_start(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  const msgpack_object *spec = arg(m, 1);
  char *cwd = mp_utf8dup(mp_get(spec, "cwd"));
  if (!name || !cwd || cwd[0] != '/') {
    emit_error(b, name,
               "acp_start needs an agent name and an absolute cwd (UTF-8)");
  } else {
    struct acp_conn *c = find_conn(b, name);
    if (c)
      acp_conn_new_session(c, cwd);
    else
      spawn_conn(b, name, spec, cwd);
  }
  free(name);
  free(cwd);
}

static void m_prompt(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  char *text = mp_utf8dup(arg(m, 1));
  struct acp_conn *c = name ? find_conn(b, name) : NULL;
  const char *why = !text ? "a prompt must be UTF-8 text"
                    : !c  ? "that agent is not running (:AcpStart starts it)"
                    : acp_conn_prompt(c, text) != 0
                        ? "too many prompts are waiting"
                        : NULL;
  if (why) {
    emit_error(b, name, why);
    send_event(b, "turn_end",
               json_pack("{s:s?,s:s,s:s}", "agent", name, "stopReason", "error",
                         "message", why),
               NULL);
  }
  free(name);
  free(text);
}

static void m_cancel(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  struct acp_conn *c = name ? find_conn(b, name) : NULL;
  if (c) {
    acp_conn_cancel(c);
    cancel_pending(b, c, "cancel");
  }
  free(name);
}

static void m_stop(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  struct acp_conn *c = name ? find_conn(b, name) : NULL;
  if (c)
    acp_conn_stop(c, BROKER_STOP_GRACE_MS, "the agent was stopped");
  free(name);
}

static void m_respond(struct broker *b, const struct nvim_rpc_msg *m) {
  const msgpack_object *t = arg(m, 0);
  const msgpack_object *opt = arg(m, 1);
  if (!t || t->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
    emit_error(b, NULL, "acp_respond needs a prompt id");
    return;
  }
  struct pending_entry *e = pending_find(&b->pending, t->via.u64);
  if (!e) {
    LOG_I("answer for permission %llu, which is no longer pending",
          (unsigned long long)t->via.u64);
    return;
  }
  if (!opt || opt->type == MSGPACK_OBJECT_NIL) {
    resolve(b, e->token, NULL, "person");
    return;
  }
  char *option_id = mp_strdup(opt);
  // The broker, not Lua, is the authority: only an offered id is sent.
  if (!option_id || !pending_offered(e, option_id)) {
    char msg[300];
    snprintf(msg, sizeof(msg),
             "option '%.200s' was not offered by the agent; the prompt stays "
             "open",
             option_id ? option_id : "?");
    emit_error(b, acp_conn_name(e->conn), msg);
  } else {
    resolve(b, e->token, option_id, "person");
  }
  free(option_id);
}

static const struct {
  const char *name;
  void (*fn)(struct broker *, const struct nvim_rpc_msg *);
} methods[] = {
    {"acp_start", m_start},   {"acp_prompt", m_prompt},
    {"acp_cancel", m_cancel}, {"acp_respond", m_respond},
    {"acp_stop", m_stop},
};

static void on_message(void *ud, const struct nvim_rpc_msg *m) {
  struct broker *b = ud;
  for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
    if (m->method_len != strlen(methods[i].name) ||
        memcmp(m->method, methods[i].name, m->method_len) != 0)
      continue;
    if (m->type == NVIM_RPC_NOTIFICATION && !b->shutting_down)
      methods[i].fn(b, m);
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

static const struct nvim_rpc_ops rpc_ops = {on_message, on_eof};

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

struct broker *broker_start(uv_loop_t *loop, char *err, size_t errlen) {
  struct broker *b = xcalloc(1, sizeof(*b));
  b->loop = loop;
  pending_init(&b->pending, BROKER_MAX_PENDING);
  b->rpc = nvim_rpc_open(loop, 0, 1, &rpc_ops, b, err, errlen);
  if (!b->rpc) {
    pending_free(&b->pending);
    free(b);
    return NULL;
  }
  uv_timer_init(loop, &b->deadline);
  b->deadline.data = b;
  const int sigs[3] = {SIGTERM, SIGINT, SIGHUP};
  for (size_t i = 0; i < 3; i++) {
    uv_signal_init(loop, &b->signals[i]);
    b->signals[i].data = b;
    uv_signal_start(&b->signals[i], signal_cb, sigs[i]);
  }
  send_event(b, "ready",
             json_pack("{s:s,s:i,s:s}", "version", ACP_VERSION, "pid",
                       (int)getpid(), "log", log_path()),
             NULL);
  LOG_I("acp-broker %s ready (pid %d)", ACP_VERSION, (int)getpid());
  return b;
}

void broker_free(struct broker *b) {
  pending_free(&b->pending);
  free(b);
}
