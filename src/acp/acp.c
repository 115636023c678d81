#include "acp.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/files.h"
#include "base/log.h"
#include "base/mem.h"
#include "content.h"
#include "io/linebuf.h"
#include "jsonrpc.h"
#include "posture.h"
#include "reqview.h"

// Longest line accepted from an agent (the reference SDK's limit too).
#define ACP_MAX_LINE ((size_t)32 * 1024 * 1024)
#define ACP_MAX_PROMPTS 32 // prompts waiting for their session
#define ACP_MAX_CALLS 1024 // our requests waiting for an answer
#define ACP_PROTOCOL_VERSION 1

enum call_kind {
  CALL_INITIALIZE,
  CALL_SESSION_NEW,
  CALL_SESSION_LOAD,
  CALL_PROMPT,
  CALL_AUTHENTICATE,
  CALL_SET_MODE,
  CALL_POSTURE_MODE, // session/set_mode the broker sent to keep the posture
};

struct session {
  char *id;     // the agent's sessionId
  char *cwd;    // where it was started
  bool running; // a session/prompt is waiting for its answer
  bool holding; // prompts wait: the broker is setting the asking mode
  bool modes;   // the agent reported session modes when it opened
  char *mode;   // the agent's own current mode (currentModeId), or NULL
  char *asked;  // the mode the person last asked for (:AcpMode), or NULL
  char *posture_reason; // why the posture is unverified, or NULL: asking
  // The agent's offered mode that asks (what :AcpMode default sets), or
  // NULL (static).
  const char *default_mode;
  struct session *next;
  uint64_t turn; // prompts sent in this session: the current turn's number
};

struct call {
  int64_t id; // our JSON-RPC id
  enum call_kind kind;
  char *cwd;         // CALL_SESSION_NEW/LOAD: the requested cwd (owned)
  char *arg;         // LOAD: the sessionId; AUTHENTICATE, SET_MODE: the
                     // method or mode id (owned)
  struct session *s; // CALL_PROMPT, CALL_SET_MODE: its session
};

// A prompt waiting to be sent.
struct prompt {
  char *text;
  char *session;  // its session, or NULL: the newest
  json_t *blocks; // checked content blocks after the text, or NULL
};

// A session to open once initialize is answered (or after a login).
struct want {
  char *cwd;
  char *load; // sessionId to resume with session/load, or NULL
};

struct acp_conn {
  char *name;
  struct proc *proc;
  struct linebuf lines;
  const struct acp_host *host;
  void *ud;
  bool ready;           // initialize answered
  bool alive;           // not exited nor being stopped
  bool stdin_open;      // we may still write to the agent
  bool gone_called;     // host->gone ran
  bool can_load;        // agentCapabilities.loadSession
  bool has_auth;        // the agent listed authMethods
  unsigned prompt_caps; // promptCapabilities offered (content_cap flags)
  uint64_t serial;      // unique for the life of the process
  char *stop_reason;
  int64_t next_id;
  struct call *calls;
  size_t ncalls, capcalls;
  struct session *sessions; // newest first
  struct want *wants;       // sessions to open once ready
  size_t nwant;
  struct want *auth_wants; // sessions refused until the person logs in
  size_t nauth;
  struct prompt *prompts; // waiting for their session, oldest first
  size_t nprompts;
  int creating; // session/new requests not yet answered
  // The asking posture (posture.h): the family the agent was spawned as
  // (its spawn-time arguments were added), the one it is governed as, and
  // why the posture cannot hold from the start (NULL: it can).
  enum posture_family spawned_as, family;
  char *posture_off;
};

static void send_line(struct acp_conn *c, char *line, size_t len) {
  if (!c->stdin_open) {
    free(line);
    return;
  }
  LOG_D("%s <- %.*s", c->name, (int)(len > 2000 ? 2000 : len - 1), line);
  if (proc_write(c->proc, line, len) != 0)
    acp_conn_stop(c, 500, "the agent stopped reading its input");
}

static int64_t call_add(struct acp_conn *c, enum call_kind kind, char *cwd,
                        char *arg, struct session *s) {
  if (c->ncalls == c->capcalls) {
    c->capcalls = c->capcalls ? c->capcalls * 2 : 8;
    c->calls = xrealloc(c->calls, c->capcalls * sizeof(*c->calls));
  }
  int64_t id = c->next_id++;
  c->calls[c->ncalls++] = (struct call){id, kind, cwd, arg, s};
  return id;
}

// Sends a request whose answer is routed by kind; takes params, cwd and
// arg. Returns false when it could not be sent.
static bool send_request(struct acp_conn *c, const char *method, json_t *params,
                         enum call_kind kind, char *cwd, char *arg,
                         struct session *s) {
  if (c->ncalls >= ACP_MAX_CALLS || !params || !c->stdin_open) {
    LOG_E("%s: not sending %s (%zu requests unanswered)", c->name, method,
          c->ncalls);
    json_decref(params);
    free(cwd);
    free(arg);
    return false;
  }
  size_t len;
  char *line =
      jsonrpc_request(call_add(c, kind, cwd, arg, s), method, params, &len);
  send_line(c, line, len);
  return true;
}

static void emit(struct acp_conn *c, const char *event, json_t *data) {
  if (!data) {
    LOG_E("%s: could not build the %s event", c->name, event);
    return;
  }
  json_object_set_new(data, "agent", json_string(c->name));
  c->host->emit(c->ud, event, data);
}

static void emit_error(struct acp_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void emit_error(struct acp_conn *c, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  LOG_W("%s: %s", c->name, msg);
  emit(c, "error", json_pack("{s:s}", "message", msg));
}

static struct session *find_session(struct acp_conn *c, const char *id) {
  for (struct session *s = c->sessions; s; s = s->next)
    if (strcmp(s->id, id) == 0)
      return s;
  return NULL;
}

static void emit_turn_end(struct acp_conn *c, const char *session,
                          const char *reason, const char *message) {
  json_t *d = json_pack("{s:s?,s:s}", "session", session, "stopReason", reason);
  if (message)
    json_object_set_new(d, "message", json_string(message));
  emit(c, "turn_end", d);
}

// Drops the prompts that never got sent, ending their (never started)
// turns so that Lua's idea of "busy" stays right.
static void drop_prompts(struct acp_conn *c, const char *reason,
                         const char *message) {
  const char *newest = c->sessions ? c->sessions->id : NULL;
  for (size_t i = 0; i < c->nprompts; i++) {
    const char *sid = c->prompts[i].session;
    emit_turn_end(c, sid ? sid : newest, reason, message);
    free(c->prompts[i].text);
    free(c->prompts[i].session);
    json_decref(c->prompts[i].blocks);
  }
  c->nprompts = 0;
}

static void send_prompt(struct acp_conn *c, struct session *s, const char *text,
                        json_t *blocks);

// Sends the oldest waiting prompt when its session is idle.
static void pump_prompts(struct acp_conn *c) {
  while (c->nprompts && c->alive) {
    struct prompt *p = &c->prompts[0];
    struct session *s = p->session ? find_session(c, p->session) : c->sessions;
    if (!s && p->session) {
      emit_turn_end(c, p->session, "error", "no such session");
    } else if (!s || s->running || s->holding || (!p->session && c->creating)) {
      return;
    } else {
      send_prompt(c, s, p->text, p->blocks);
    }
    free(p->text);
    free(p->session);
    json_decref(p->blocks);
    memmove(c->prompts, c->prompts + 1, --c->nprompts * sizeof(*c->prompts));
  }
}

static void send_prompt(struct acp_conn *c, struct session *s, const char *text,
                        json_t *blocks) {
  // The agent said what it accepts only once initialize was answered, so
  // this is checked here, not when the prompt was queued.
  unsigned missing = content_needs(blocks) & ~c->prompt_caps;
  if (missing) {
    char msg[200];
    snprintf(msg, sizeof(msg),
             "the agent does not accept this context (its "
             "promptCapabilities do not offer %s)",
             content_cap_name(missing));
    LOG_W("%s: %s", c->name, msg);
    emit_turn_end(c, s->id, "error", msg);
    return;
  }
  json_t *params = json_pack("{s:s,s:[{s:s,s:s}]}", "sessionId", s->id,
                             "prompt", "type", "text", "text", text);
  if (blocks)
    json_array_extend(json_object_get(params, "prompt"), blocks);
  if (!send_request(c, "session/prompt", params, CALL_PROMPT, NULL, NULL, s)) {
    emit_turn_end(c, s->id, "error", "the prompt could not be sent");
    return;
  }
  s->running = true;
  s->turn++;
  emit(c, "turn_start",
       json_pack("{s:s,s:s?,s:I}", "session", s->id, "text", text, "context",
                 (json_int_t)json_array_size(blocks)));
}

// The posture's session-time part (claude: flag settings in _meta).
static void add_posture_meta(struct acp_conn *c, json_t *params) {
  json_t *meta = c->posture_off ? NULL : posture_session_meta(c->family);
  if (params && meta)
    json_object_set_new(params, "_meta", meta);
  else
    json_decref(meta);
}

// Sends session/new, or session/load when w->load is set; takes w's
// strings.
static void send_open(struct acp_conn *c, struct want w) {
  json_t *params;
  if (w.load && !c->can_load) {
    emit_error(c, "this agent cannot resume sessions (no loadSession); "
                  "starting a new one");
    free(w.load);
    w.load = NULL;
  }
  if (w.load) {
    emit(c, "session_loading",
         json_pack("{s:s,s:s}", "session", w.load, "cwd", w.cwd));
    params = json_pack("{s:s,s:s,s:[]}", "sessionId", w.load, "cwd", w.cwd,
                       "mcpServers");
    add_posture_meta(c, params);
    if (send_request(c, "session/load", params, CALL_SESSION_LOAD, w.cwd,
                     w.load, NULL))
      c->creating++;
    return;
  }
  params = json_pack("{s:s,s:[]}", "cwd", w.cwd, "mcpServers");
  add_posture_meta(c, params);
  if (send_request(c, "session/new", params, CALL_SESSION_NEW, w.cwd, NULL,
                   NULL))
    c->creating++;
}

static void want_push(struct want **v, size_t *n, struct want w) {
  *v = xrealloc(*v, (*n + 1) * sizeof(**v));
  (*v)[(*n)++] = w;
}

// ---- the asking posture (posture.h) ----

static const char *error_text(json_t *error, char *buf, size_t len);

static void set_str(char **dst, const char *v) {
  char *old = *dst;
  *dst = v ? xstrdup(v) : NULL;
  free(old);
}

// Tells Lua the session's posture (the broker audits it on the way).
static void emit_posture(struct acp_conn *c, struct session *s,
                         bool reasserted) {
  emit(c, "posture",
       json_pack("{s:s,s:s,s:s?,s:s,s:s?,s:b,s:s?}", "session", s->id,
                 "posture", s->posture_reason ? "unverified" : "asking",
                 "reason", s->posture_reason, "family",
                 posture_family_name(c->family), "mode", s->mode, "reasserted",
                 reasserted, "defaultMode", s->default_mode));
}

// Sends session/set_mode to the asking mode; queued prompts of s wait for
// its answer.
static bool send_posture_mode(struct acp_conn *c, struct session *s) {
  const char *m = posture_asking_mode(c->family);
  if (!m ||
      !send_request(c, "session/set_mode",
                    json_pack("{s:s,s:s}", "sessionId", s->id, "modeId", m),
                    CALL_POSTURE_MODE, NULL, xstrdup(m), s))
    return false;
  s->holding = true;
  return true;
}

// True when the broker can keep this connection's sessions asking.
static bool posture_known(struct acp_conn *c) {
  return !c->posture_off && posture_asking_mode(c->family) != NULL;
}

// s's mode changed (or the person chose one): asking while the mode is one
// the broker leaves the agent in.
static void posture_judge(struct acp_conn *c, struct session *s) {
  if (!posture_known(c))
    return;
  char why[300] = "";
  if (!posture_mode_ok(c->family, s->mode))
    snprintf(why, sizeof(why),
             "the agent is in its own mode '%.100s', which may approve tool "
             "calls without asking",
             s->mode ? s->mode : "?");
  const char *r = why[0] ? why : NULL;
  if (r == NULL && s->posture_reason == NULL)
    return;
  if (r && s->posture_reason && strcmp(r, s->posture_reason) == 0)
    return;
  set_str(&s->posture_reason, r);
  emit_posture(c, s, false);
}

// A session opened: judge the modes it reported and bring it into posture.
static void posture_open(struct acp_conn *c, struct session *s,
                         const json_t *modes) {
  char why[400];
  set_str(&s->mode, json_string_value(json_object_get(modes, "currentModeId")));
  s->modes = json_is_object(modes);
  s->default_mode = posture_default_mode(c->family, modes);
  if (c->posture_off) {
    set_str(&s->posture_reason, c->posture_off);
    emit_posture(c, s, false);
    return;
  }
  enum posture_verdict v = posture_check(c->family, modes, why, sizeof(why));
  if (v == POSTURE_SET_MODE && send_posture_mode(c, s)) {
    LOG_I("%s: %s; setting it to %s", c->name, why,
          posture_asking_mode(c->family));
    return; // judged once the agent answers
  }
  set_str(&s->posture_reason, v == POSTURE_ASKING ? NULL : why);
  emit_posture(c, s, false);
}

// The broker's own session/set_mode was answered.
static void on_posture_mode(struct acp_conn *c, struct session *s, char *mode,
                            json_t *error) {
  s->holding = false;
  if (error) {
    char buf[300], why[500];
    snprintf(why, sizeof(why), "the agent refused its asking mode '%s': %s",
             mode, error_text(error, buf, sizeof(buf)));
    set_str(&s->posture_reason, why);
  } else {
    set_str(&s->mode, mode);
    set_str(&s->posture_reason, NULL);
    emit(c, "mode_set",
         json_pack("{s:s,s:s,s:s}", "session", s->id, "modeId", mode, "by",
                   "broker"));
  }
  emit_posture(c, s, false);
  free(mode);
  pump_prompts(c);
}

// A current_mode_update: a mode the person did not ask for, that could
// approve tool calls, is set back to the asking mode.
static void posture_mode_update(struct acp_conn *c, const char *sid,
                                const json_t *update) {
  const char *m = json_string_value(json_object_get(update, "currentModeId"));
  struct session *s = find_session(c, sid);
  if (!s || !m)
    return;
  set_str(&s->mode, m);
  if (!s->modes) // no modes to hold (the demo agent's scenarios)
    return;
  if (!posture_known(c) || posture_mode_ok(c->family, m) ||
      (s->asked && strcmp(s->asked, m) == 0)) {
    if (!s->holding)
      posture_judge(c, s);
    return;
  }
  char why[300];
  snprintf(why, sizeof(why),
           "the agent switched itself to its mode '%.100s'; acp-broker sets "
           "it back to '%s'",
           m, posture_asking_mode(c->family));
  LOG_W("%s: %s", c->name, why);
  set_str(&s->posture_reason, why);
  emit_posture(c, s, true);
  if (!s->holding && !send_posture_mode(c, s))
    LOG_E("%s: could not send session/set_mode", c->name);
}

// ---- responses to our requests ----

static const char *error_text(json_t *error, char *buf, size_t len) {
  const char *msg = json_string_value(json_object_get(error, "message"));
  json_int_t code = json_integer_value(json_object_get(error, "code"));
  snprintf(buf, len, "%s (code %lld)", msg ? msg : "error", (long long)code);
  return buf;
}

// Which agent this is: its agentInfo.name wins over its command's name.
// Gemini CLI and codex-acp need their spawn-time arguments: an agent of
// theirs started under another name did not get them.
static void posture_identify(struct acp_conn *c, const json_t *info) {
  const char *name = json_string_value(json_object_get(info, "name"));
  enum posture_family f = posture_family_from_info(name);
  if (f != POSTURE_UNKNOWN)
    c->family = f;
  if (!c->posture_off && c->family == POSTURE_GEMINI &&
      c->spawned_as != POSTURE_GEMINI)
    c->posture_off =
        xstrdup("Gemini CLI was started under a name acp-broker does not know, "
                "without its asking flags (--approval-mode, --admin-policy)");
  LOG_I("%s: agent %s, posture family %s", c->name, name ? name : "(no name)",
        posture_family_name(c->family));
}

static void on_initialized(struct acp_conn *c, json_t *result, json_t *error) {
  char buf[400];
  if (error) {
    emit_error(c, "initialize failed: %s", error_text(error, buf, sizeof(buf)));
    acp_conn_stop(c, 500, "initialize failed");
    return;
  }
  json_t *v = json_object_get(result, "protocolVersion");
  if (!json_is_integer(v) || json_integer_value(v) != ACP_PROTOCOL_VERSION) {
    snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    emit_error(c,
               "the agent speaks ACP protocol version %s; acp-broker speaks "
               "version 1",
               json_is_integer(v) ? buf : "(none given)");
    acp_conn_stop(c, 500, "unsupported protocol version");
    return;
  }
  c->ready = true;
  json_t *caps = json_object_get(result, "agentCapabilities");
  c->can_load = json_is_true(json_object_get(caps, "loadSession"));
  c->prompt_caps = content_caps(caps);
  json_t *auth = json_object_get(result, "authMethods");
  c->has_auth = json_is_array(auth) && json_array_size(auth) > 0;
  posture_identify(c, json_object_get(result, "agentInfo"));
  json_t *d = json_pack(
      "{s:i,s:O?,s:O?,s:O?}", "protocolVersion", ACP_PROTOCOL_VERSION,
      "agentInfo", json_object_get(result, "agentInfo"), "agentCapabilities",
      json_object_get(result, "agentCapabilities"), "authMethods",
      json_object_get(result, "authMethods"));
  emit(c, "agent_ready", d);
  for (size_t i = 0; i < c->nwant; i++)
    send_open(c, c->wants[i]);
  c->nwant = 0;
}

// session/new or session/load answered. load is the resumed sessionId
// (owned), NULL for session/new.
static void on_session_open(struct acp_conn *c, char *cwd, char *load,
                            json_t *result, json_t *error) {
  c->creating--;
  const char *sid =
      load ? load : json_string_value(json_object_get(result, "sessionId"));
  if (error || !sid) {
    char buf[400];
    const char *why = error ? error_text(error, buf, sizeof(buf))
                            : "no sessionId in the answer";
    bool auth =
        error && json_integer_value(json_object_get(error, "code")) == -32000;
    if (auth && c->has_auth) {
      // The person picks a login method (Lua); acp_conn_authenticate then
      // opens the session again.
      emit(c, "auth_required", json_pack("{s:s}", "cwd", cwd));
      want_push(&c->auth_wants, &c->nauth, (struct want){cwd, load});
      return;
    }
    if (load && !auth) {
      emit_error(c, "could not resume session %s: %s; starting a new one", load,
                 why);
      free(load);
      send_open(c, (struct want){cwd, NULL});
      return;
    }
    emit_error(c, "could not start a session: %s%s", why,
               auth ? ". The agent needs you to log in: run it once in a "
                      "terminal and follow its login steps"
                    : "");
    if (!c->creating)
      drop_prompts(c, "error", "no session");
    free(cwd);
    free(load);
    return;
  }
  struct session *s = xcalloc(1, sizeof(*s));
  s->id = xstrdup(sid);
  s->cwd = cwd;
  s->next = c->sessions;
  c->sessions = s;
  emit(c, "session_new",
       json_pack("{s:s,s:s,s:O?,s:b}", "session", sid, "cwd", cwd, "modes",
                 json_object_get(result, "modes"), "resumed", load != NULL));
  posture_open(c, s, json_object_get(result, "modes"));
  free(load);
  pump_prompts(c);
}

static void on_authenticated(struct acp_conn *c, char *method, json_t *error) {
  if (error) {
    char buf[400];
    emit_error(c, "login with %s failed: %s", method,
               error_text(error, buf, sizeof(buf)));
    for (size_t i = 0; i < c->nauth; i++) {
      free(c->auth_wants[i].cwd);
      free(c->auth_wants[i].load);
    }
    c->nauth = 0;
    if (!c->creating)
      drop_prompts(c, "error", "not logged in");
    free(method);
    return;
  }
  emit(c, "authenticated", json_pack("{s:s}", "methodId", method));
  free(method);
  size_t n = c->nauth;
  c->nauth = 0;
  for (size_t i = 0; i < n; i++)
    send_open(c, c->auth_wants[i]);
}

static void on_mode_set(struct acp_conn *c, struct session *s, char *mode,
                        json_t *error) {
  if (error) {
    char buf[400];
    emit_error(c, "the agent refused mode %s: %s", mode,
               error_text(error, buf, sizeof(buf)));
  } else {
    emit(c, "mode_set",
         json_pack("{s:s,s:s}", "session", s->id, "modeId", mode));
    set_str(&s->mode, mode);
    posture_judge(c, s);
  }
  free(mode);
}

static void on_prompt_done(struct acp_conn *c, struct session *s,
                           json_t *result, json_t *error) {
  s->running = false;
  if (error) {
    char buf[400];
    emit_turn_end(c, s->id, "error", error_text(error, buf, sizeof(buf)));
  } else {
    const char *reason =
        json_string_value(json_object_get(result, "stopReason"));
    emit_turn_end(c, s->id, reason ? reason : "end_turn", NULL);
  }
  pump_prompts(c);
}

static void on_response(struct acp_conn *c, struct jsonrpc_msg *m) {
  size_t i = 0;
  while (i < c->ncalls && !jsonrpc_id_is_int(m->id, c->calls[i].id))
    i++;
  if (i == c->ncalls) {
    LOG_W("%s: response to a request we never made; ignored", c->name);
    return;
  }
  struct call call = c->calls[i];
  memmove(c->calls + i, c->calls + i + 1,
          (c->ncalls - i - 1) * sizeof(*c->calls));
  c->ncalls--;
  switch (call.kind) {
  case CALL_INITIALIZE:
    on_initialized(c, m->result, m->error);
    break;
  case CALL_SESSION_NEW:
  case CALL_SESSION_LOAD:
    on_session_open(c, call.cwd, call.arg, m->result, m->error);
    break;
  case CALL_PROMPT:
    on_prompt_done(c, call.s, m->result, m->error);
    break;
  case CALL_AUTHENTICATE:
    on_authenticated(c, call.arg, m->error);
    break;
  case CALL_SET_MODE:
    on_mode_set(c, call.s, call.arg, m->error);
    break;
  case CALL_POSTURE_MODE:
    on_posture_mode(c, call.s, call.arg, m->error);
    break;
  }
}

// ---- requests and notifications from the agent ----

static void reply_error(struct acp_conn *c, const json_t *id, int code,
                        const char *message) {
  size_t len;
  char *line = jsonrpc_error(id, code, message, &len);
  send_line(c, line, len);
}

static const char *const option_kinds[] = {"allow_once", "allow_always",
                                           "reject_once", "reject_always"};

static bool valid_option(const json_t *o) {
  const char *kind = json_string_value(json_object_get(o, "kind"));
  if (!json_is_string(json_object_get(o, "optionId")) ||
      !json_is_string(json_object_get(o, "name")) || !kind)
    return false;
  for (size_t i = 0; i < 4; i++)
    if (strcmp(kind, option_kinds[i]) == 0)
      return true;
  return false;
}

// ACP_FLAT_VIEW=0 in the environment: every request through the tree (to
// compare the two paths).
static bool flat_views(void) {
  static int on = -1;
  if (on < 0) {
    const char *e = getenv("ACP_FLAT_VIEW");
    on = !(e && strcmp(e, "0") == 0);
  }
  return on;
}

// Returns NULL when params is a well-formed permission request of a session
// we know, else the reason it is not.
static const char *check_permission(struct acp_conn *c, json_t *params) {
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  json_t *tc = json_object_get(params, "toolCall");
  json_t *opts = json_object_get(params, "options");
  if (!sid)
    return "sessionId missing";
  if (!find_session(c, sid))
    return "unknown sessionId";
  if (!json_is_object(tc) || !json_is_string(json_object_get(tc, "toolCallId")))
    return "toolCall.toolCallId missing";
  if (!json_is_array(opts) || json_array_size(opts) == 0)
    return "options missing or empty";
  for (size_t i = 0; i < json_array_size(opts); i++)
    if (!valid_option(json_array_get(opts, i)))
      return "an option lacks optionId, name or a known kind";
  return NULL;
}

// The client methods we advertise; the host carries them out.
static const char *const client_methods[] = {
    "fs/read_text_file", "fs/write_text_file",     "terminal/create",
    "terminal/output",   "terminal/wait_for_exit", "terminal/kill",
    "terminal/release",
};

static bool is_client_method(const char *method) {
  for (size_t i = 0; i < sizeof(client_methods) / sizeof(*client_methods); i++)
    if (strcmp(method, client_methods[i]) == 0)
      return true;
  return false;
}

static void on_request(struct acp_conn *c, struct jsonrpc_msg *m) {
  if (is_client_method(m->method)) {
    const char *sid =
        json_string_value(json_object_get(m->params, "sessionId"));
    if (!json_is_object(m->params) || !sid || !find_session(c, sid)) {
      LOG_W("%s: %s for an unknown session", c->name, m->method);
      reply_error(c, m->id, JSONRPC_INVALID_PARAMS,
                  sid ? "unknown sessionId" : "sessionId missing");
      return;
    }
    c->host->client_request(c->ud, c, m->id, m->method, m->params);
    return;
  }
  if (strcmp(m->method, "session/request_permission") == 0) {
    const char *why = check_permission(c, m->params);
    if (why) {
      LOG_W("%s: bad session/request_permission: %s", c->name, why);
      reply_error(c, m->id, JSONRPC_INVALID_PARAMS, why);
      return;
    }
    c->host->permission(c->ud, c, m->id, m->params);
    return;
  }
  LOG_I("%s: method %s not offered; answering -32601", c->name, m->method);
  reply_error(c, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
}

static void on_notification(struct acp_conn *c, struct jsonrpc_msg *m) {
  if (strcmp(m->method, "session/update") == 0) {
    const char *sid =
        json_string_value(json_object_get(m->params, "sessionId"));
    json_t *update = json_object_get(m->params, "update");
    if (!sid || !json_is_object(update)) {
      LOG_W("%s: session/update without sessionId or update", c->name);
      return;
    }
    const char *kind =
        json_string_value(json_object_get(update, "sessionUpdate"));
    if (kind && strcmp(kind, "current_mode_update") == 0)
      posture_mode_update(c, sid, update);
    emit(c, "update", json_pack("{s:s,s:O}", "session", sid, "update", update));
  } else if (strcmp(m->method, "$/cancel_request") == 0) {
    json_t *id = json_object_get(m->params, "requestId");
    if (id)
      c->host->withdraw(c->ud, c, id);
  } else {
    LOG_D("%s: notification %s ignored", c->name, m->method);
  }
}

// A permission request read into a flat view that check_permission would
// pass (else the tree path answers it, with its error).
static bool view_ok(struct acp_conn *c, const struct reqview *v) {
  json_t *id = json_object_get(v->tc, "toolCallId"); // json_is_string: twice
  if (!find_session(c, v->sid_z) || !json_is_string(id))
    return false;
  for (size_t i = 0; i < v->noptions; i++) {
    bool known = false;
    for (size_t k = 0; k < 4; k++)
      known = known || strcmp(v->option_kind_z[i], option_kinds[k]) == 0;
    if (!known)
      return false;
  }
  return v->noptions > 0;
}

static void on_line(void *ud, const char *line, size_t len) {
  struct acp_conn *c = ud;
  if (!c->alive)
    return;
  LOG_D("%s -> %.*s", c->name, (int)(len > 2000 ? 2000 : len), line);
  // The hot path: a permission request of the usual shape, decided without
  // a tree of the whole message (the host builds one if it asks).
  struct reqview rv;
  if (c->host->permission_view && flat_views() &&
      reqview_parse(line, len, &rv) == 0) {
    bool ok = view_ok(c, &rv);
    if (ok)
      c->host->permission_view(c->ud, c, &rv, line, len);
    reqview_clear(&rv);
    if (ok)
      return;
  }
  struct jsonrpc_msg m;
  char err[200];
  if (jsonrpc_parse(line, len, &m, err, sizeof(err)) != 0) {
    LOG_W("%s: skipped a line: %s: %.*s", c->name, err,
          (int)(len > 200 ? 200 : len), line);
    if (m.id)
      reply_error(c, m.id, JSONRPC_INVALID_REQUEST, err);
  } else if (m.kind == JSONRPC_REQUEST) {
    on_request(c, &m);
  } else if (m.kind == JSONRPC_NOTIFICATION) {
    on_notification(c, &m);
  } else {
    on_response(c, &m);
  }
  jsonrpc_msg_free(&m);
}

static void on_overlong(void *ud, size_t len) {
  struct acp_conn *c = ud;
  LOG_E("%s: discarded a %zu-byte line (limit %zu bytes)", c->name, len,
        ACP_MAX_LINE);
}

// ---- process events ----

static void proc_stdout(void *ud, const char *data, size_t n) {
  struct acp_conn *c = ud;
  linebuf_feed(&c->lines, data, n, on_line, on_overlong, c);
}

static void call_gone(struct acp_conn *c, bool exited) {
  c->alive = false;
  if (!c->gone_called) {
    c->gone_called = true;
    c->host->gone(c->ud, c, exited);
  }
}

static void proc_exit(void *ud, int64_t code, int sig) {
  struct acp_conn *c = ud;
  c->stdin_open = false;
  call_gone(c, true);
  char msg[200];
  if (c->stop_reason)
    snprintf(msg, sizeof(msg), "%s", c->stop_reason);
  else if (sig)
    snprintf(msg, sizeof(msg), "the agent was killed by signal %d", sig);
  else
    snprintf(msg, sizeof(msg), "the agent exited with code %lld",
             (long long)code);
  for (struct session *s = c->sessions; s; s = s->next)
    if (s->running) {
      s->running = false;
      emit_turn_end(c, s->id, "error", msg);
    }
  drop_prompts(c, "error", msg);
  json_t *ev = json_pack("{s:I,s:i}", "code", (json_int_t)code, "signal", sig);
  // A crash says what the agent last wrote to stderr, and where the rest
  // is: in the event, and in its one-line message (the chat shows it).
  char full[PROC_STDERR_TAIL * (PROC_STDERR_TAIL_LEN + 8) + 1024];
  snprintf(full, sizeof(full), "%s", msg);
  if (!c->stop_reason) {
    const char *lines[PROC_STDERR_TAIL];
    size_t n = c->proc ? proc_stderr_tail(c->proc, lines, PROC_STDERR_TAIL) : 0;
    json_t *tail = json_array();
    for (size_t i = 0; i < n; i++) {
      json_t *l = json_string(lines[i]); // NULL: not UTF-8, left out
      if (!l)
        continue;
      size_t used = strlen(full);
      snprintf(full + used, sizeof(full) - used, "%s\"%s\"",
               json_array_size(tail) ? " | " : "; its last stderr: ", lines[i]);
      json_array_append_new(tail, l);
    }
    json_object_set_new(ev, "stderr", tail);
    const char *log = log_path();
    if (log && *log) {
      size_t used = strlen(full);
      snprintf(full + used, sizeof(full) - used, "; log: %s", log);
      json_object_set_new(ev, "log", json_string(log));
    }
  }
  json_t *m = json_string(full);
  json_object_set_new(ev, "message", m ? m : json_string(msg));
  emit(c, "agent_exit", ev);
}

static void wants_free(struct want *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].cwd);
    free(v[i].load);
  }
  free(v);
}

static void conn_free(struct acp_conn *c) {
  for (struct session *s = c->sessions, *next; s; s = next) {
    next = s->next;
    free(s->id);
    free(s->cwd);
    free(s->mode);
    free(s->asked);
    free(s->posture_reason);
    free(s);
  }
  for (size_t i = 0; i < c->ncalls; i++) {
    free(c->calls[i].cwd);
    free(c->calls[i].arg);
  }
  wants_free(c->wants, c->nwant);
  wants_free(c->auth_wants, c->nauth);
  for (size_t i = 0; i < c->nprompts; i++) {
    free(c->prompts[i].text);
    free(c->prompts[i].session);
    json_decref(c->prompts[i].blocks);
  }
  free(c->calls);
  free(c->prompts);
  linebuf_free(&c->lines);
  free(c->stop_reason);
  free(c->posture_off);
  free(c->name);
  free(c);
}

static void proc_closed(void *ud) {
  struct acp_conn *c = ud;
  c->host->closed(c->ud, c);
  conn_free(c);
}

static const struct proc_ops conn_proc_ops = {proc_stdout, proc_exit,
                                              proc_closed};

// ---- public ----

// Gemini CLI's system policy directory (Linux): when it holds a policy,
// Gemini ignores every --admin-policy.
#define GEMINI_SYSTEM_POLICIES "/etc/gemini-cli/policies"

// True when dir holds a *.toml file.
static bool has_toml(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return false;
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    found = n > 5 && strcmp(e->d_name + n - 5, ".toml") == 0;
  }
  closedir(d);
  return found;
}

// Writes Gemini CLI's admin policy into the state directory (atomically,
// files_replace); returns its path (in buf) or NULL.
static const char *write_gemini_policy(char *buf, size_t len) {
  if ((size_t)snprintf(buf, len, "%s/gemini-policy.toml", log_state_dir()) >=
      len)
    return NULL;
  const char *text = posture_gemini_policy();
  int rc = files_replace(buf, text, strlen(text), 0600);
  if (rc != 0) {
    LOG_E("cannot write %s: %s", buf, strerror(rc));
    return NULL;
  }
  return buf;
}

struct acp_conn *acp_conn_start(uv_loop_t *loop, const char *name,
                                const struct proc_spawn *spec,
                                const struct acp_host *host, void *ud,
                                char *err, size_t errlen) {
  static uint64_t serials;
  struct acp_conn *c = xcalloc(1, sizeof(*c));
  c->serial = ++serials;
  c->name = xstrdup(name);
  c->host = host;
  c->ud = ud;
  linebuf_init(&c->lines, ACP_MAX_LINE);
  // The posture's spawn-time part: arguments added to the command line.
  const char *const *argv = spec->argv;
  const char **args = NULL;
  char policy[4200];
  c->spawned_as = c->family = posture_family_from_argv(spec->argv);
  const char *off = getenv("ACP_BROKER_TEST_NO_POSTURE");
  if (off && off[0] && strcmp(off, "0") != 0) {
    c->posture_off = xstrdup("the asking posture is switched off "
                             "(ACP_BROKER_TEST_NO_POSTURE, for tests)");
  } else if (c->family != POSTURE_UNKNOWN) {
    const char *extra[POSTURE_MAX_ARGS + 1];
    const char *file = NULL;
    if (c->family == POSTURE_GEMINI &&
        !(file = write_gemini_policy(policy, sizeof(policy))))
      c->posture_off = xstrdup("acp-broker could not write Gemini CLI's "
                               "policy file (see the log)");
    else if (c->family == POSTURE_GEMINI && has_toml(GEMINI_SYSTEM_POLICIES))
      c->posture_off = xstrdup("Gemini CLI ignores acp-broker's admin "
                               "policy: " GEMINI_SYSTEM_POLICIES
                               " holds policies of its own");
    size_t n = 0, k = posture_spawn_args(c->family, file, extra);
    while (argv[n])
      n++;
    args = xcalloc(n + k + 1, sizeof(*args));
    memcpy(args, argv, n * sizeof(*args));
    memcpy(args + n, extra, k * sizeof(*args));
    argv = args;
  }
  struct proc_spawn ps = *spec;
  ps.argv = argv;
  c->proc = proc_spawn(loop, &ps, &conn_proc_ops, c, err, errlen);
  free(args);
  if (!c->proc) {
    conn_free(c);
    return NULL;
  }
  c->alive = c->stdin_open = true;
  json_t *params = json_pack(
      "{s:i,s:{s:{s:b,s:b},s:b},s:{s:s,s:s,s:s}}", "protocolVersion",
      ACP_PROTOCOL_VERSION, "clientCapabilities", "fs", "readTextFile", 1,
      "writeTextFile", 1, "terminal", 1, "clientInfo", "name", "acp-broker",
      "title", "acp-broker (Neovim)", "version", ACP_VERSION);
  send_request(c, "initialize", params, CALL_INITIALIZE, NULL, NULL, NULL);
  return c;
}

// True when a session in cwd is on its way.
static bool opening_in(struct acp_conn *c, const char *cwd) {
  for (size_t i = 0; i < c->nwant; i++)
    if (strcmp(c->wants[i].cwd, cwd) == 0)
      return true;
  for (size_t i = 0; i < c->nauth; i++)
    if (strcmp(c->auth_wants[i].cwd, cwd) == 0)
      return true;
  for (size_t i = 0; i < c->ncalls; i++)
    if ((c->calls[i].kind == CALL_SESSION_NEW ||
         c->calls[i].kind == CALL_SESSION_LOAD) &&
        !strcmp(c->calls[i].cwd, cwd))
      return true;
  return false;
}

void acp_conn_new_session(struct acp_conn *c, const char *cwd,
                          const char *load) {
  acp_conn_open_session(c, cwd, load, false);
}

void acp_conn_open_session(struct acp_conn *c, const char *cwd,
                           const char *load, bool fresh) {
  if (!c->alive || opening_in(c, cwd))
    return;
  for (struct session **pp = &c->sessions; *pp && !fresh; pp = &(*pp)->next) {
    struct session *s = *pp;
    if (strcmp(s->cwd, cwd) != 0 || (load && strcmp(s->id, load) != 0))
      continue;
    // Reuse it: it becomes the newest (the one prompts go to), and Lua is
    // told again so that it becomes the current session there too.
    *pp = s->next;
    s->next = c->sessions;
    c->sessions = s;
    emit(c, "session_new",
         json_pack("{s:s,s:s,s:b}", "session", s->id, "cwd", s->cwd, "reused",
                   1));
    return;
  }
  struct want w = {xstrdup(cwd), load ? xstrdup(load) : NULL};
  if (c->ready)
    send_open(c, w);
  else
    want_push(&c->wants, &c->nwant, w);
}

int acp_conn_authenticate(struct acp_conn *c, const char *method_id) {
  if (!c->alive || !c->ready)
    return -1;
  return send_request(c, "authenticate",
                      json_pack("{s:s}", "methodId", method_id),
                      CALL_AUTHENTICATE, NULL, xstrdup(method_id), NULL)
             ? 0
             : -1;
}

int acp_conn_set_mode(struct acp_conn *c, const char *session,
                      const char *mode_id) {
  struct session *s = session ? find_session(c, session) : c->sessions;
  if (!c->alive || !s)
    return -1;
  set_str(&s->asked, mode_id);
  return send_request(
             c, "session/set_mode",
             json_pack("{s:s,s:s}", "sessionId", s->id, "modeId", mode_id),
             CALL_SET_MODE, NULL, xstrdup(mode_id), s)
             ? 0
             : -1;
}

void acp_conn_respond_error(struct acp_conn *c, const json_t *id, int code,
                            const char *message) {
  if (c->stdin_open)
    reply_error(c, id, code, message);
}

uint64_t acp_conn_serial(const struct acp_conn *c) {
  return c->serial;
}

uint64_t acp_conn_turn(const struct acp_conn *c, const char *sid) {
  for (struct session *s = c->sessions; s && sid; s = s->next)
    if (strcmp(s->id, sid) == 0)
      return s->turn;
  return 0;
}

int acp_conn_prompt(struct acp_conn *c, const char *text, const char *session) {
  return acp_conn_prompt_blocks(c, text, session, NULL);
}

int acp_conn_prompt_blocks(struct acp_conn *c, const char *text,
                           const char *session, json_t *blocks) {
  if (!c->alive || c->nprompts >= ACP_MAX_PROMPTS) {
    json_decref(blocks);
    return -1;
  }
  c->prompts = xrealloc(c->prompts, (c->nprompts + 1) * sizeof(*c->prompts));
  c->prompts[c->nprompts++] =
      (struct prompt){xstrdup(text), session ? xstrdup(session) : NULL, blocks};
  pump_prompts(c);
  return 0;
}

void acp_conn_cancel(struct acp_conn *c) {
  if (!c->alive)
    return;
  drop_prompts(c, "cancelled", NULL);
  for (struct session *s = c->sessions; s; s = s->next) {
    if (!s->running)
      continue;
    size_t len;
    char *line = jsonrpc_notification(
        "session/cancel", json_pack("{s:s}", "sessionId", s->id), &len);
    send_line(c, line, len);
  }
}

void acp_conn_respond(struct acp_conn *c, const json_t *id, json_t *result) {
  if (!c->stdin_open) {
    json_decref(result);
    return;
  }
  size_t len;
  char *line = jsonrpc_result(id, result, &len);
  send_line(c, line, len);
}

void acp_conn_respond_outcome(struct acp_conn *c, const json_t *id,
                              const char *option_id) {
  if (!c->stdin_open)
    return;
  size_t len;
  char *line = jsonrpc_outcome(id, option_id, &len);
  send_line(c, line, len);
}

void acp_conn_stop(struct acp_conn *c, uint64_t grace_ms, const char *why) {
  if (!c->alive)
    return;
  free(c->stop_reason);
  c->stop_reason = xstrdup(why);
  call_gone(c, false); // pending requests are answered before stdin closes
  c->stdin_open = false;
  proc_stop(c->proc, grace_ms);
}

void acp_conn_pause(struct acp_conn *c, bool pause) {
  if (c->proc)
    proc_pause(c->proc, pause);
}

const char *acp_conn_name(const struct acp_conn *c) {
  return c->name;
}

bool acp_conn_alive(const struct acp_conn *c) {
  return c->alive;
}

int acp_conn_pid(const struct acp_conn *c) {
  return proc_pid(c->proc);
}

const char *acp_conn_session_cwd(const struct acp_conn *c, const char *sid) {
  for (struct session *s = c->sessions; s; s = s->next)
    if (strcmp(s->id, sid) == 0)
      return s->cwd;
  return NULL;
}

const char *acp_conn_current_session(const struct acp_conn *c) {
  return c->sessions ? c->sessions->id : NULL;
}
