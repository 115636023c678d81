// The methods Lua calls on the broker (doc/protocol.md): argument decoding
// and validation, then the work, done by the broker, its connections and
// the gate.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/acp.h"
#include "acp/content.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "broker_priv.h"
#include "client.h"
#include "codec/jsonpack.h"
#include "policy/gate.h"
#include "prompt.h"

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

// The agent's environment: Neovim's (inherited by the broker), with the
// spec's entries set, or removed where their value is false.
static char **build_env(const msgpack_object *map) {
  bool is_map = map && map->type == MSGPACK_OBJECT_MAP;
  struct env env;
  env_init(&env, environ, is_map ? map->via.map.size : 0);
  for (uint32_t i = 0; is_map && i < map->via.map.size; i++) {
    char *key = mp_strdup(&map->via.map.ptr[i].key);
    char *val = mp_strdup(&map->via.map.ptr[i].val);
    if (key)
      env_set(&env, key, val);
    free(key);
    free(val);
  }
  return env_take(&env);
}

static char **build_argv(const msgpack_object *cmd) {
  if (!cmd || cmd->type != MSGPACK_OBJECT_ARRAY || cmd->via.array.size == 0 ||
      cmd->via.array.size > 4096)
    return NULL;
  uint32_t n = cmd->via.array.size;
  char **argv = xcalloc(n + 1, sizeof(*argv));
  for (uint32_t i = 0; i < n; i++)
    if (!(argv[i] = mp_strdup(&cmd->via.array.ptr[i]))) {
      strv_free(argv);
      return NULL;
    }
  return argv;
}

static void spawn_conn(struct broker *b, const char *name,
                       const msgpack_object *spec, const char *cwd,
                       const char *load) {
  char **argv = build_argv(mp_get(spec, "cmd"));
  if (!argv) {
    broker_emit_error(b, name,
                      "the agent's cmd must be a non-empty list of strings");
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
  strv_free(argv);
  strv_free(env);
  if (!c) {
    broker_emit_error(b, name, err);
    broker_send_event(b, "agent_exit",
                      json_pack("{s:s,s:i,s:i,s:s}", "agent", name, "code", -1,
                                "signal", 0, "message", err),
                      NULL);
    return;
  }
  b->conns[b->nconns++] = c;
  if (b->paused)
    acp_conn_pause(c, true); // read once Neovim caught up
  broker_send_event(
      b, "agent_started",
      json_pack("{s:s,s:i}", "agent", name, "pid", acp_conn_pid(c)), NULL);
  acp_conn_new_session(c, cwd, load);
}

static void m_start(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  const msgpack_object *spec = arg(m, 1);
  char *cwd = mp_utf8dup(mp_get(spec, "cwd"));
  char *load = mp_utf8dup(mp_get(spec, "resume"));
  const msgpack_object *fresh = mp_get(spec, "new");
  if (!name || !cwd || cwd[0] != '/') {
    broker_emit_error(
        b, name, "acp_start needs an agent name and an absolute cwd (UTF-8)");
  } else {
    struct acp_conn *c = broker_find_conn(b, name);
    if (c)
      acp_conn_open_session(c, cwd, load && load[0] ? load : NULL,
                            fresh && fresh->type == MSGPACK_OBJECT_BOOLEAN &&
                                fresh->via.boolean);
    else
      spawn_conn(b, name, spec, cwd, load && load[0] ? load : NULL);
  }
  free(name);
  free(cwd);
  free(load);
}

static void m_authenticate(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  char *method = mp_utf8dup(arg(m, 1));
  struct acp_conn *c = name ? broker_find_conn(b, name) : NULL;
  if (!c || !method || acp_conn_authenticate(c, method) != 0)
    broker_emit_error(b, name,
                      "acp_authenticate needs a running agent and a method id");
  free(name);
  free(method);
}

static void m_set_mode(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  char *session = mp_utf8dup(arg(m, 1));
  char *mode = mp_utf8dup(arg(m, 2));
  struct acp_conn *c = name ? broker_find_conn(b, name) : NULL;
  if (!c || !mode || acp_conn_set_mode(c, session, mode) != 0)
    broker_emit_error(b, name,
                      "acp_set_mode needs a running agent with a session and "
                      "a mode id");
  free(name);
  free(session);
  free(mode);
}

// The prompt's content blocks (argument 3: a list, or nil for none),
// checked; NULL with the reason in err when they are not acceptable.
static json_t *prompt_blocks(const msgpack_object *o, char *err,
                             size_t errlen) {
  if (!o || o->type == MSGPACK_OBJECT_NIL)
    return json_array();
  if (o->type != MSGPACK_OBJECT_ARRAY ||
      o->via.array.size > CONTENT_MAX_BLOCKS) {
    snprintf(err, errlen, "the content blocks must be a list of at most %d",
             CONTENT_MAX_BLOCKS);
    return NULL;
  }
  json_t *raw = jsonpack_unpack(o);
  if (!raw) {
    snprintf(err, errlen, "the content blocks must be UTF-8 maps");
    return NULL;
  }
  json_t *blocks = content_check(raw, err, errlen);
  json_decref(raw);
  return blocks;
}

static void m_prompt(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  char *text = mp_utf8dup(arg(m, 1));
  char *session = mp_utf8dup(arg(m, 2));
  char bad[300];
  json_t *blocks = prompt_blocks(arg(m, 3), bad, sizeof(bad));
  struct acp_conn *c = name ? broker_find_conn(b, name) : NULL;
  const char *why = NULL;
  if (!text)
    why = "a prompt must be UTF-8 text";
  else if (!blocks)
    why = bad;
  else if (!c)
    why = "that agent is not running (:AcpStart starts it)";
  if (!why) {
    json_t *given = blocks; // the connection takes them, sent or not
    blocks = NULL;
    if (acp_conn_prompt_blocks(c, text, session, given) != 0)
      why = "too many prompts are waiting";
  }
  json_decref(blocks);
  if (why) {
    broker_emit_error(b, name, why);
    broker_send_event(b, "turn_end",
                      json_pack("{s:s?,s:s,s:s}", "agent", name, "stopReason",
                                "error", "message", why),
                      NULL);
  }
  free(name);
  free(text);
  free(session);
}

static void m_cancel(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  struct acp_conn *c = name ? broker_find_conn(b, name) : NULL;
  if (c) {
    acp_conn_cancel(c);
    broker_cancel_pending(b, c, "cancel");
  }
  free(name);
}

static void m_stop(struct broker *b, const struct nvim_rpc_msg *m) {
  char *name = mp_utf8dup(arg(m, 0));
  struct acp_conn *c = name ? broker_find_conn(b, name) : NULL;
  if (c)
    acp_conn_stop(c, BROKER_STOP_GRACE_MS, "the agent was stopped");
  free(name);
}

// Records what an answer asked to remember; the answer itself goes on
// even when remembering fails (the person is told).
static void remember(struct broker *b, struct pending_entry *e,
                     const char *scope, bool broad) {
  const char *agent = acp_conn_name(e->conn);
  const char *cwd = acp_conn_session_cwd(e->conn, e->session);
  char err[512];
  size_t n;
  const char **rules = prompt_remember_rules(e->kept, e->info, broad, &n);
  int rc = gate_remember(b->gate, scope, broad, agent, e->session,
                         cwd ? cwd : "/", rules, n, err, sizeof(err));
  free(rules);
  if (rc != 0) {
    char msg[700];
    snprintf(msg, sizeof(msg), "could not remember the answer (%s): %s", scope,
             err);
    broker_emit_error(b, agent, msg);
    return;
  }
  if (cwd)
    broker_send_event(b, "settings", gate_settings(b->gate, cwd, agent), NULL);
}

static void m_respond(struct broker *b, const struct nvim_rpc_msg *m) {
  const msgpack_object *t = arg(m, 0);
  const msgpack_object *opt = arg(m, 1);
  char *scope = mp_utf8dup(mp_get(arg(m, 2), "remember"));
  // The broader rules the prompt suggested instead of the narrow ones.
  const msgpack_object *wide = mp_get(arg(m, 2), "broad");
  bool broad =
      wide && wide->type == MSGPACK_OBJECT_BOOLEAN && wide->via.boolean;
  if (!t || t->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
    broker_emit_error(b, NULL, "acp_respond needs a prompt id");
    free(scope);
    return;
  }
  struct pending_entry *e = pending_find(&b->pending, t->via.u64);
  if (!e) {
    LOG_I("answer for permission %llu, which is no longer pending",
          (unsigned long long)t->via.u64);
  } else if (!opt || opt->type == MSGPACK_OBJECT_NIL) {
    broker_resolve(b, e->token, NULL, "person");
  } else {
    char *option_id = mp_strdup(opt);
    const struct pending_option *o =
        option_id ? pending_offered(e, option_id) : NULL;
    const char *kind = o ? o->kind : NULL;
    char msg[400];
    // The broker, not Lua, is the authority: only an offered id is sent,
    // and only an allow-once answer may record anything.
    if (!o) {
      snprintf(msg, sizeof(msg),
               "option '%.200s' was not offered by the agent; the prompt "
               "stays open",
               option_id ? option_id : "?");
      broker_emit_error(b, acp_conn_name(e->conn), msg);
    } else if (scope && strcmp(kind, "allow_once") != 0) {
      snprintf(msg, sizeof(msg),
               "only an allow-once answer can be remembered; the prompt stays "
               "open");
      broker_emit_error(b, acp_conn_name(e->conn), msg);
    } else {
      if (scope)
        remember(b, e, scope, broad);
      broker_resolve(b, e->token, option_id, "person");
    }
    free(option_id);
  }
  free(scope);
}

// Neovim's answer to a write it held while the person was asked.
static void m_fs_answer(struct broker *b, const struct nvim_rpc_msg *m) {
  const msgpack_object *t = arg(m, 0);
  if (!t || t->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
    broker_emit_error(b, NULL, "acp_fs_answer needs a write's token");
    return;
  }
  if (!client_fs_answer(b->client, t->via.u64, arg(m, 1)))
    LOG_I("answer for held write %llu, which no longer waits",
          (unsigned long long)t->via.u64);
}

// The cwd and agent a policy command is about: ctx.cwd, else the agent's
// current session's cwd.
static char *ctx_cwd(struct broker *b, const msgpack_object *cwd_obj,
                     const char *agent) {
  char *cwd = mp_utf8dup(cwd_obj);
  if (cwd && cwd[0] == '/')
    return cwd;
  free(cwd);
  struct acp_conn *c = agent ? broker_find_conn(b, agent) : NULL;
  const char *sid = c ? acp_conn_current_session(c) : NULL;
  const char *s = sid ? acp_conn_session_cwd(c, sid) : NULL;
  return s ? xstrdup(s) : NULL;
}

static void m_config(struct broker *b, const struct nvim_rpc_msg *m) {
  const msgpack_object *o = arg(m, 0);
  json_t *setup = o ? jsonpack_unpack(o) : NULL;
  if (!json_is_object(setup) &&
      !(json_is_array(setup) && !json_array_size(setup))) {
    broker_emit_error(b, NULL, "acp_config needs a map of setup() options");
    json_decref(setup);
    return;
  }
  gate_configure(b->gate, setup);
}

static void m_rule(struct broker *b, const struct nvim_rpc_msg *m) {
  char *scope = mp_utf8dup(arg(m, 0));
  char *list = mp_utf8dup(arg(m, 1));
  char *rule = mp_utf8dup(arg(m, 2));
  const msgpack_object *ctx = arg(m, 3);
  char *agent = mp_utf8dup(mp_get(ctx, "agent"));
  char *cwd = ctx_cwd(b, mp_get(ctx, "cwd"), agent);
  struct acp_conn *c = agent ? broker_find_conn(b, agent) : NULL;
  const char *session = c ? acp_conn_current_session(c) : NULL;
  char err[512], file[4200];
  if (!scope || !list || !rule || !cwd) {
    broker_emit_error(b, agent,
                      "acp_rule needs a scope, a list, a rule and a cwd");
  } else if (gate_add_rule(b->gate, scope, list, rule, agent, session, cwd,
                           file, sizeof(file), err, sizeof(err)) != 0) {
    char msg[800];
    snprintf(msg, sizeof(msg), "rule %.200s refused: %s", rule, err);
    broker_emit_error(b, agent, msg);
  } else {
    json_t *st = gate_settings(b->gate, cwd, agent);
    // The person's own allow rule in a project whose other permissive
    // content they have not trusted does not apply yet: trusting it
    // automatically would also enable what the repository brought.
    const char *note =
        strcmp(scope, "project") == 0 && strcmp(list, "allow") == 0 &&
                !json_is_true(json_object_get(st, "trusted"))
            ? "it applies once you trust this project's settings (:AcpTrust "
              "shows everything that would enable)"
            : NULL;
    broker_send_event(b, "rule_added",
                      json_pack("{s:s,s:s,s:s,s:s,s:s?}", "scope", scope,
                                "list", list, "rule", rule, "file", file,
                                "note", note),
                      NULL);
    broker_send_event(b, "settings", st, NULL);
  }
  free(scope);
  free(list);
  free(rule);
  free(agent);
  free(cwd);
}

static void m_yolo(struct broker *b, const struct nvim_rpc_msg *m) {
  char *agent = mp_utf8dup(arg(m, 2));
  char *cwd = ctx_cwd(b, arg(m, 0), agent);
  char *action = mp_utf8dup(arg(m, 1));
  char err[512];
  if (!cwd)
    broker_emit_error(b, agent, "acp_yolo needs a project directory");
  else if (gate_yolo(b->gate, cwd, action ? action : "status", agent, err,
                     sizeof(err)) != 0)
    broker_emit_error(b, agent, err);
  if (cwd)
    broker_send_event(b, "settings", gate_settings(b->gate, cwd, agent), NULL);
  free(agent);
  free(cwd);
  free(action);
}

static void m_mode(struct broker *b, const struct nvim_rpc_msg *m) {
  char *cwd = ctx_cwd(b, arg(m, 0), NULL);
  char *mode = mp_utf8dup(arg(m, 1));
  char err[512];
  if (!cwd)
    broker_emit_error(b, NULL, "acp_mode needs a project directory");
  else if (gate_mode(b->gate, cwd, mode, err, sizeof(err)) != 0)
    broker_emit_error(b, NULL, err);
  if (cwd)
    broker_send_event(b, "settings", gate_settings(b->gate, cwd, NULL), NULL);
  free(cwd);
  free(mode);
}

static void m_rules(struct broker *b, const struct nvim_rpc_msg *m) {
  char *cwd = ctx_cwd(b, arg(m, 0), NULL);
  if (!cwd) {
    broker_emit_error(b, NULL, "acp_rules needs a project directory");
    return;
  }
  broker_send_event(b, "rules", gate_rules(b->gate, cwd, NULL), NULL);
  broker_send_event(b, "settings", gate_settings(b->gate, cwd, NULL), NULL);
  free(cwd);
}

static void m_trust(struct broker *b, const struct nvim_rpc_msg *m) {
  char *cwd = ctx_cwd(b, arg(m, 0), NULL);
  json_t *enabled = NULL;
  char err[512];
  if (!cwd) {
    broker_emit_error(b, NULL, "acp_trust needs a project directory");
  } else if (gate_trust(b->gate, cwd, &enabled, err, sizeof(err)) != 0) {
    broker_emit_error(b, NULL, err);
  } else {
    json_t *st = gate_settings(b->gate, cwd, NULL);
    broker_send_event(b, "trusted",
                      json_pack("{s:O,s:o}", "root",
                                json_object_get(st, "root"), "enabled",
                                enabled),
                      NULL);
    broker_send_event(b, "settings", st, NULL);
  }
  free(cwd);
}

const struct broker_method broker_methods[] = {
    {"acp_start", m_start},       {"acp_prompt", m_prompt},
    {"acp_cancel", m_cancel},     {"acp_respond", m_respond},
    {"acp_stop", m_stop},         {"acp_config", m_config},
    {"acp_rule", m_rule},         {"acp_yolo", m_yolo},
    {"acp_mode", m_mode},         {"acp_rules", m_rules},
    {"acp_trust", m_trust},       {"acp_authenticate", m_authenticate},
    {"acp_set_mode", m_set_mode}, {"acp_fs_answer", m_fs_answer},
};

const size_t broker_nmethods =
    sizeof(broker_methods) / sizeof(broker_methods[0]);
