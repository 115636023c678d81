#include "client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acp/acp.h"
#include "acp/jsonrpc.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "codec/jsonpack.h"
#include "fs.h"
#include "io/term.h"
#include "policy/path.h"

extern char **environ;

#define CLIENT_MAX_TERMS 64       // terminals alive at once, all agents
#define CLIENT_MAX_WAITERS 16     // terminal/wait_for_exit calls per terminal
#define CLIENT_MAX_APPROVALS 64   // allow answers remembered, all agents
#define CLIENT_APPROVAL_MS 300000 // and at most this long (within the turn)
#define CLIENT_MAX_HOLDS 256      // unasked calls waiting for the person
#define CLIENT_HOLD_BYTES ((size_t)64 << 20) // the content they hold
#define CLIENT_MAX_WAITS 64 // writes Neovim holds for the person's answer
#define CLIENT_DIFF_MAX ((size_t)1 << 20) // old + new text shown in a prompt
#define CLIENT_EVENT_MS 100    // terminal output events, at most this often
#define CLIENT_EVENT_TAIL 8192 // bytes of output in a terminal event
#define CLIENT_ERR_REFUSED (-32001) // the broker refused (policy, confinement)
#define ACP_RESOURCE_NOT_FOUND (-32002)

struct approval {
  uint64_t serial; // the connection's
  // One block (client_approved_call) holds the strings and paths' list.
  void *block;
  char *session;
  uint64_t turn; // the session's turn when it was answered
  char *command; // the request's shell command, or NULL
  char **paths;  // its paths
  size_t npaths;
  bool execute; // kind execute
  bool writes;  // a kind that may change files (edit, delete, move, other)
  bool person;  // the person answered (else the policy)
  uint64_t at_ms;
};

struct client_term {
  struct client_term *next;
  struct client *cl;
  struct acp_conn *conn;
  uint64_t serial;
  char *session;
  char *id;
  char *command; // for the events
  char *tcid;    // the broker's own tool call (an unasked one), or NULL
  struct term *t;
  json_t *waiters; // ids of terminal/wait_for_exit calls
  uv_timer_t timer;
  bool event_due;
  bool released;
};

struct fs_call;

// What Neovim runs for fs/*: the loaded buffer's text, or a write into it.
static const char lua_fs[] = "return require('acp.fs').handle(...)";

// An fs/write_text_file or terminal/create the agent did not ask about and
// the policy leaves to the person: waits for the answer to the broker's
// own prompt (a pending entry), which completes or refuses it.
struct hold {
  struct hold *next;
  struct client *cl;
  uint64_t serial;   // the connection's
  uint64_t token;    // the prompt's; 0 while the current text is read
  json_t *info;      // the gate's info, until the prompt takes it
  struct fs_call *f; // the write, or NULL for a terminal:
  json_t *id;        // terminal/create's id,
  json_t *params;    // its params
  char *line;        // and its command line
  char *tcid;        // and the prompt's tool call id
  size_t bytes;      // counted in hold_bytes
  bool answered;     // refused before its prompt was shown (client_cancel)
};

struct client {
  uv_loop_t *loop;
  const struct client_host *host;
  void *ud;
  struct client_term *terms;
  size_t nterms;
  uint64_t next_term;
  // The approvals, oldest first: approvals[first .. first + napprovals).
  // Dropping the oldest (each new one past the bound) moves nothing; the
  // list moves down when it reaches the end, once per bound of approvals.
  struct approval approvals[2 * CLIENT_MAX_APPROVALS];
  size_t first, napprovals;
  struct hold *holds;
  size_t nholds, hold_bytes;
  struct fs_call *waits; // writes Neovim holds (acp_fs_answer answers)
  size_t nwaits;
  uint64_t checks; // numbers the broker's own tool call ids
};

// A Lua call for fs/*: what to do with the answer.
struct fs_call {
  struct client *cl;
  uint64_t serial;
  json_t *id; // the agent's request id
  char *session;
  bool write;     // fs/write_text_file
  char *resolved; // the path, symlinks resolved
  char *within;   // the root the file must stay in, or NULL
  json_t *content;
  uint32_t line, limit;
  char *tcid; // the broker's own tool call (an unasked write), or NULL
  struct fs_call *next; // in cl->waits
  uint64_t wait;        // Neovim's token while the person is asked
  bool approved;        // the person allowed it in the broker's own prompt
};

// The live connection with this serial (its pointer may have been reused).
static struct acp_conn *conn_by_serial(struct client *cl, uint64_t serial) {
  return cl->host->conn(cl->ud, serial);
}

static void emit(struct client *cl, const char *event, json_t *data) {
  cl->host->emit(cl->ud, event, data);
}

static void audit(struct client *cl, const json_t *info, const char *decision,
                  const char *by, const char *option_id) {
  cl->host->audit(cl->ud, info, decision, by, option_id);
}

static void refuse(struct client *cl, struct acp_conn *c, const json_t *id,
                   const char *what, const char *why) {
  char msg[1200];
  snprintf(msg, sizeof(msg), "%s refused: %s", what, why);
  LOG_W("%s: %s", acp_conn_name(c), msg);
  acp_conn_respond_error(c, id, CLIENT_ERR_REFUSED, msg);
  cl->host->error(cl->ud, acp_conn_name(c), msg);
}

// ---- approvals ----

static void approval_clear(struct approval *a) {
  free(a->block);
  memset(a, 0, sizeof(*a));
}

// The i-th approval, oldest first.
static struct approval *approval_at(struct client *cl, size_t i) {
  return &cl->approvals[cl->first + i];
}

static void approval_drop(struct client *cl, size_t i) {
  struct approval *a = approval_at(cl, i);
  approval_clear(a);
  if (i == 0)
    cl->first++;
  else
    memmove(a, a + 1, (cl->napprovals - i - 1) * sizeof(*a));
  if (--cl->napprovals == 0)
    cl->first = 0;
}

void client_approved(struct client *cl, struct acp_conn *c, const json_t *info,
                     bool person) {
  // A command read from a title is a guess: such an approval covers the
  // one command the agent runs next, whatever it is.
  const char *command =
      json_is_true(json_object_get(info, "rawCommand"))
          ? json_string_value(json_object_get(info, "command"))
          : NULL;
  json_t *paths = json_object_get(info, "paths");
  size_t n = 0;
  const char **v = xcalloc(json_array_size(paths) + 1, sizeof(*v));
  for (size_t i = 0; i < json_array_size(paths); i++)
    if (json_is_string(json_array_get(paths, i)))
      v[n++] = json_string_value(json_array_get(paths, i));
  client_approved_call(
      cl, c, json_string_value(json_object_get(info, "session")), command,
      json_string_value(json_object_get(info, "kind")), v, n, person);
  free(v);
}

void client_approved_call(struct client *cl, struct acp_conn *c,
                          const char *session, const char *command,
                          const char *kind, const char *const *paths,
                          size_t npaths, bool person) {
  if (cl->napprovals == CLIENT_MAX_APPROVALS)
    approval_drop(cl, 0);
  // Kinds that only look (or run a command, held to its command) never
  // cover a write of a path they name.
  // (by the first byte, then the one name it may be: a request's kind is
  // compared once, not six times)
  const char *looks = !kind          ? NULL
                      : *kind == 'r' ? "read"
                      : *kind == 's'
                          ? (kind[1] == 'e' ? "search" : "switch_mode")
                      : *kind == 'f' ? "fetch"
                      : *kind == 't' ? "think"
                      : *kind == 'e' ? "execute"
                                     : NULL;
  bool writes = !(looks && strcmp(kind, looks) == 0);
  bool execute = !writes && *looks == 'e';
  // One block for all it keeps (a malloc and a free per approval, not one
  // per string): the paths' list, then session, command and the paths.
  uint64_t turn = session ? acp_conn_turn(c, session) : 0;
  if (!session)
    session = "";
  size_t sn = strlen(session) + 1, cn = command ? strlen(command) + 1 : 0;
  size_t size = npaths * sizeof(char *) + sn + cn;
  for (size_t i = 0; i < npaths; i++)
    size += strlen(paths[i]) + 1;
  char *block = xmalloc(size);
  char **copy = npaths ? (char **)(void *)block : NULL;
  char *at = block + npaths * sizeof(char *);
  char *session_copy = memcpy(at, session, sn);
  at += sn;
  char *command_copy = command ? memcpy(at, command, cn) : NULL;
  at += cn;
  for (size_t i = 0; i < npaths; i++) {
    size_t n = strlen(paths[i]) + 1;
    copy[i] = memcpy(at, paths[i], n);
    at += n;
  }
  if (cl->first + cl->napprovals ==
      sizeof(cl->approvals) / sizeof(*cl->approvals)) {
    memmove(cl->approvals, approval_at(cl, 0),
            cl->napprovals * sizeof(*cl->approvals));
    cl->first = 0;
  }
  *approval_at(cl, cl->napprovals++) = (struct approval){
      .serial = acp_conn_serial(c),
      .block = block,
      .session = session_copy,
      .turn = turn,
      .command = command_copy,
      .paths = copy,
      .npaths = npaths,
      .execute = execute,
      .writes = writes,
      .person = person,
      .at_ms = uv_now(cl->loop),
  };
}

// Uses up the oldest approval of session's current turn that covers the
// command (cmd) or one of the paths (p1, p2; for a write, writes: only an
// approval of a kind that may write), by the person only when person;
// returns whether there was one.
static bool approval_take(struct client *cl, struct acp_conn *c,
                          const char *session, const char *cmd, const char *p1,
                          const char *p2, bool writes, bool person) {
  uint64_t now = uv_now(cl->loop);
  uint64_t turn = acp_conn_turn(c, session);
  for (size_t i = 0; i < cl->napprovals;) {
    struct approval *a = approval_at(cl, i);
    if (now - a->at_ms > CLIENT_APPROVAL_MS) {
      approval_drop(cl, i);
      continue;
    }
    bool mine = a->serial == acp_conn_serial(c) &&
                strcmp(a->session, session) == 0 && a->turn == turn &&
                (a->person || !person);
    bool covers = false;
    if (mine && cmd && a->execute)
      covers = a->command ? strcmp(a->command, cmd) == 0 : true;
    if (mine && (p1 || p2) && (a->writes || !writes))
      for (size_t k = 0; k < a->npaths && !covers; k++) {
        const char *ap = a->paths[k];
        covers = (p1 && !strcmp(ap, p1)) || (p2 && !strcmp(ap, p2));
      }
    if (covers) {
      approval_drop(cl, i);
      return true;
    }
    i++;
  }
  return false;
}

// ---- the policy's view of an fs access or a command ----

// Asks the gate about a request the agent did not make: kind with a path
// or a command, as tool call tcid. Fills v (free v->info; v->option_id is
// not kept: the options are the broker's own, allow_once and reject_once).
static void synthetic(struct client *cl, struct acp_conn *c,
                      const char *session, const char *cwd, const char *kind,
                      const char *path, const char *cmd, const char *tcid,
                      struct gate_verdict *v) {
  json_t *tc = json_pack("{s:s,s:s,s:s}", "toolCallId", tcid, "kind", kind,
                         "title", path ? path : cmd);
  if (path) {
    json_object_set_new(tc, "locations", json_pack("[{s:s}]", "path", path));
    json_object_set_new(tc, "rawInput", json_pack("{s:s}", "file_path", path));
  } else {
    json_object_set_new(tc, "rawInput", json_pack("{s:s}", "command", cmd));
  }
  json_t *params = json_pack("{s:s,s:o,s:o}", "sessionId", session, "toolCall",
                             tc, "options", client_own_options());
  cl->host->judge(cl->ud, acp_conn_name(c), session, cwd ? cwd : "/", params,
                  v);
  json_decref(params);
  v->option_id = NULL; // it pointed into params
}

// Why the gate decided as it did ("" when it did not say).
static const char *reason_of(const struct gate_verdict *v) {
  const char *r = json_string_value(json_object_get(v->info, "reason"));
  return r ? r : "";
}

// Audits what the gate decided by itself (by the rule, mode or memory it
// names) as decision, answered with option_id.
static void audit_verdict(struct client *cl, const struct gate_verdict *v,
                          const char *decision, const char *option_id) {
  audit(cl, v->info, decision,
        json_string_value(json_object_get(v->info, "by")), option_id);
}

static bool by_rule(const struct gate_verdict *v) {
  const char *by = json_string_value(json_object_get(v->info, "by"));
  return v->decision == POLICY_ALLOW && by &&
         (strcmp(by, "rule") == 0 || strcmp(by, "memory") == 0);
}

// Tells Lua how a tool call of the broker's own (a prompt for an unasked
// write or terminal) went on, as a tool_call_update (content stolen, or
// NULL), so that the chat shows it like the agent's.
static void own_update(struct client *cl, struct acp_conn *c,
                       const char *session, const char *tcid,
                       const char *status, json_t *content) {
  emit(cl, "update",
       json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:o?}}", "agent", acp_conn_name(c),
                 "session", session, "update", "sessionUpdate",
                 "tool_call_update", "toolCallId", tcid, "status", status,
                 "content", content));
}

// ---- fs ----

static void fs_call_free(struct fs_call *f) {
  json_decref(f->id);
  free(f->session);
  json_decref(f->content);
  free(f->resolved);
  free(f->within);
  free(f->tcid);
  free(f);
}

// Tells Lua what the agent read or wrote (for the chat and tests).
static void fs_done(struct acp_conn *c, struct fs_call *f, const char *via) {
  emit(f->cl, "fs",
       json_pack("{s:s,s:s,s:s,s:s,s:s}", "agent", acp_conn_name(c), "session",
                 f->session, "op", f->write ? "write" : "read", "path",
                 f->resolved, "via", via));
  if (f->tcid)
    own_update(f->cl, c, f->session, f->tcid, "completed", NULL);
}

static void fs_answer_error(struct acp_conn *c, const json_t *id, int rc,
                            const char *err) {
  acp_conn_respond_error(
      c, id, rc == ENOENT ? ACP_RESOURCE_NOT_FOUND : JSONRPC_INTERNAL_ERROR,
      err);
}

static void fs_from_disk(struct acp_conn *c, struct fs_call *f) {
  char err[PATH_LEN_MAX + 200];
  if (f->write) {
    const char *text = json_string_value(f->content);
    int rc = fs_write(f->resolved, f->within, text,
                      json_string_length(f->content), err, sizeof(err));
    if (rc != 0) {
      fs_answer_error(c, f->id, rc, err);
      if (f->tcid)
        own_update(f->cl, c, f->session, f->tcid, "failed", NULL);
    } else {
      acp_conn_respond(c, f->id, json_object());
      fs_done(c, f, "disk");
    }
    return;
  }
  char *text;
  size_t len;
  int rc = fs_read(f->resolved, f->within, &text, &len, err, sizeof(err));
  if (rc == ENOENT && f->within) {
    // A new file inside the project reads as empty (agents that can only
    // write what they read create files this way).
    acp_conn_respond(c, f->id, json_pack("{s:s}", "content", ""));
    fs_done(c, f, "missing");
    return;
  }
  if (rc != 0) {
    fs_answer_error(c, f->id, rc, err);
    return;
  }
  size_t start, end;
  fs_slice_lines(text, len, f->line, f->limit, &start, &end);
  acp_conn_respond(c, f->id,
                   json_pack("{s:s%}", "content", text + start, end - start));
  free(text);
  fs_done(c, f, "disk");
}

// Keeps f until Neovim answers for the person ({wait = token}); false when
// the answer is not that or too many wait.
static bool fs_wait(struct fs_call *f, const msgpack_object *map) {
  struct client *cl = f->cl;
  uint64_t token = 0;
  for (uint32_t i = 0; i < map->via.map.size; i++)
    if (nvim_rpc_str_eq(&map->via.map.ptr[i].key, "wait") &&
        map->via.map.ptr[i].val.type == MSGPACK_OBJECT_POSITIVE_INTEGER)
      token = map->via.map.ptr[i].val.via.u64;
  if (!token || cl->nwaits >= CLIENT_MAX_WAITS)
    return false;
  for (struct fs_call *w = cl->waits; w; w = w->next)
    if (w->wait == token)
      return false;
  f->wait = token;
  f->next = cl->waits;
  cl->waits = f;
  cl->nwaits++;
  return true;
}

// Neovim's answer: the buffer's text (read), true (the buffer took the
// write), a string (the buffer refused), {wait = token} (the person is
// asked: client_fs_answer answers), or nil/false (no buffer: disk).
static void fs_lua_cb(void *ud, const msgpack_object *error,
                      const msgpack_object *result) {
  struct fs_call *f = ud;
  struct acp_conn *c = conn_by_serial(f->cl, f->serial);
  bool nvim_ok = error && error->type == MSGPACK_OBJECT_NIL;
  if (!c) {
    fs_call_free(f);
    return;
  }
  if (!nvim_ok && error)
    LOG_W("Neovim failed an fs call for %s; using the disk", f->resolved);
  if (nvim_ok && !f->write && result->type == MSGPACK_OBJECT_STR &&
      utf8_valid(result->via.str.ptr, result->via.str.size)) {
    acp_conn_respond(c, f->id,
                     json_pack("{s:s%}", "content", result->via.str.ptr,
                               (size_t)result->via.str.size));
    fs_done(c, f, "buffer");
  } else if (nvim_ok && f->write && result->type == MSGPACK_OBJECT_BOOLEAN &&
             result->via.boolean) {
    acp_conn_respond(c, f->id, json_object());
    fs_done(c, f, "buffer");
  } else if (nvim_ok && result->type == MSGPACK_OBJECT_STR && f->write) {
    // The buffer refused (e.g. 'nomodifiable'): the person reads why.
    char msg[600];
    snprintf(msg, sizeof(msg), "%.*s",
             (int)(result->via.str.size > 500 ? 500 : result->via.str.size),
             result->via.str.ptr);
    acp_conn_respond_error(c, f->id, JSONRPC_INTERNAL_ERROR, msg);
    if (f->tcid)
      own_update(f->cl, c, f->session, f->tcid, "failed", NULL);
  } else if (nvim_ok && f->write && result->type == MSGPACK_OBJECT_MAP) {
    // The person's unsaved changes overlap the write: Neovim asks them and
    // answers later. Never the disk: it would bypass the buffer.
    if (fs_wait(f, result))
      return;
    acp_conn_respond_error(c, f->id, CLIENT_ERR_REFUSED,
                           "fs/write_text_file refused: the person has "
                           "unsaved changes that overlap it, and too many "
                           "writes wait for their answer");
    if (f->tcid)
      own_update(f->cl, c, f->session, f->tcid, "failed", NULL);
  } else {
    fs_from_disk(c, f);
  }
  fs_call_free(f);
}

// Hands the call to Neovim (the loaded buffer), else to the disk; f is
// taken.
static void fs_go(struct client *cl, struct acp_conn *c, struct fs_call *f) {
  // "approved": the person allowed this write in the broker's own prompt,
  // which showed the diff from what they had (the "peek" read).
  json_t *args =
      !f->write ? json_pack("[s,s,i,i]", "read", f->resolved, f->line, f->limit)
      : f->approved
          ? json_pack("[s,s,O,s]", "write", f->resolved, f->content, "approved")
          : json_pack("[s,s,O]", "write", f->resolved, f->content);
  if (!cl->host->call_lua(cl->ud, lua_fs, args, fs_lua_cb, f)) {
    fs_from_disk(c, f);
    fs_call_free(f);
  }
}

// ---- calls the agent did not ask about, asked by the broker ----

static void hold_free(struct client *cl, struct hold *h) {
  for (struct hold **pp = &cl->holds; *pp; pp = &(*pp)->next)
    if (*pp == h) {
      *pp = h->next;
      cl->nholds--;
      cl->hold_bytes -= h->bytes;
      break;
    }
  if (h->f)
    fs_call_free(h->f);
  json_decref(h->info);
  json_decref(h->id);
  json_decref(h->params);
  free(h->line);
  free(h->tcid);
  free(h);
}

// A new hold of bytes bytes for the request id (what) of c, with info
// (taken). NULL when too many wait already: the request is then refused
// and audited.
static struct hold *hold_new(struct client *cl, struct acp_conn *c,
                             const json_t *id, const char *what, size_t bytes,
                             json_t *info) {
  if (cl->nholds >= CLIENT_MAX_HOLDS ||
      bytes > CLIENT_HOLD_BYTES - cl->hold_bytes) {
    audit(cl, info, "ask", "error", NULL);
    json_decref(info);
    refuse(cl, c, id, what,
           "too many calls the agent did not ask about wait for your answer");
    return NULL;
  }
  struct hold *h = xcalloc(1, sizeof(*h));
  *h = (struct hold){.next = cl->holds,
                     .cl = cl,
                     .serial = acp_conn_serial(c),
                     .info = info,
                     .bytes = bytes};
  cl->holds = h;
  cl->nholds++;
  cl->hold_bytes += bytes;
  return h;
}

// The method h holds.
static const char *hold_what(const struct hold *h) {
  return h->f ? "fs/write_text_file" : "terminal/create";
}

// The answer to an fs call or terminal the broker cannot ask about.
static void hold_refuse(struct client *cl, struct acp_conn *c, struct hold *h,
                        const char *what, const char *why) {
  json_t *id = h->f ? h->f->id : h->id;
  if (h->info)
    audit(cl, h->info, "ask", "error", NULL);
  refuse(cl, c, id, what, why);
  hold_free(cl, h);
}

// Shows the prompt of h: toolCall (taken) with the broker's options.
static void hold_ask(struct client *cl, struct acp_conn *c, struct hold *h,
                     const char *sid, json_t *tc) {
  const char *what = hold_what(h);
  json_t *params = tc ? json_pack("{s:s,s:o,s:o}", "sessionId", sid, "toolCall",
                                  tc, "options", client_own_options())
                      : NULL;
  if (!params) {
    hold_refuse(cl, c, h, what, "the prompt could not be made (see the log)");
    return;
  }
  uint64_t token =
      cl->host->ask(cl->ud, c, h->f ? h->f->id : h->id, params, h->info);
  json_decref(params);
  if (token == 0) {
    hold_refuse(cl, c, h, what,
                "too many permission requests wait for your answer");
    return;
  }
  h->info = NULL; // the pending entry has it
  h->token = token;
  if (cl->host->closing(cl->ud))
    cl->host->resolve(cl->ud, token, NULL, "cancel");
}

// "Write src/new.c (not asked by the agent)": the path relative to root
// when it is inside.
static char *write_title(const char *root, const char *resolved) {
  size_t n = root ? strlen(root) : 0;
  const char *shown = resolved;
  if (n && strncmp(resolved, root, n) == 0 && resolved[n] == '/')
    shown = resolved + n + 1;
  size_t len = strlen(shown) + 40;
  char *t = xmalloc(len);
  snprintf(t, len, "Write %s (not asked by the agent)", shown);
  return t;
}

// A tool call content item showing text.
static json_t *text_content(const char *text) {
  return json_pack("{s:s,s:{s:s,s:s}}", "type", "content", "content", "type",
                   "text", "text", text);
}

// Neovim's answer to reading what the person has of the file (the loaded
// buffer; nil: none); then the prompt, showing the diff.
static void hold_old_cb(void *ud, const msgpack_object *error,
                        const msgpack_object *result) {
  struct hold *h = ud;
  struct client *cl = h->cl;
  struct fs_call *f = h->f;
  struct acp_conn *c = conn_by_serial(cl, h->serial);
  if (!c || h->answered) {
    hold_free(cl, h);
    return;
  }
  if (!error && !result) {
    hold_refuse(cl, c, h, "fs/write_text_file",
                "the agent did not ask to write it, and Neovim is gone: "
                "nobody can be asked");
    return;
  }
  bool nvim_ok = error && error->type == MSGPACK_OBJECT_NIL;
  char *old = NULL;
  size_t oldlen = 0;
  char note[PATH_LEN_MAX + 300] = "";
  if (nvim_ok && result && result->type == MSGPACK_OBJECT_STR) {
    old = xstrndup(result->via.str.ptr, result->via.str.size);
    oldlen = result->via.str.size;
    if (!utf8_valid(old, oldlen)) {
      free(old);
      old = NULL;
      snprintf(note, sizeof(note),
               "(the buffer of this file holds text that is not UTF-8: it "
               "cannot be shown)");
    }
  } else {
    char err[PATH_LEN_MAX + 200];
    int rc = fs_read(f->resolved, f->within, &old, &oldlen, err, sizeof(err));
    if (rc != 0 && rc != ENOENT)
      snprintf(note, sizeof(note), "(its current content cannot be read: %s)",
               err);
    if (rc != 0)
      old = NULL;
  }
  size_t newlen = json_string_length(f->content);
  json_t *content = json_array();
  if (note[0])
    json_array_append_new(content, text_content(note));
  if (oldlen + newlen > CLIENT_DIFF_MAX) {
    char big[200];
    snprintf(big, sizeof(big),
             "(too large to show here: %zu bytes now, %zu bytes to write)",
             oldlen, newlen);
    json_array_append_new(content, text_content(big));
  } else {
    json_array_append_new(
        content, json_pack("{s:s,s:s,s:s?,s:O}", "type", "diff", "path",
                           f->resolved, "oldText", old, "newText", f->content));
  }
  free(old);
  json_t *info = h->info;
  json_t *tc =
      json_pack("{s:O,s:O,s:s,s:s,s:[{s:s}],s:{s:s},s:o}", "toolCallId",
                json_object_get(info, "toolCallId"), "title",
                json_object_get(info, "title"), "kind", "edit", "status",
                "pending", "locations", "path", f->resolved, "rawInput",
                "file_path", f->resolved, "content", content);
  hold_ask(cl, c, h, f->session, tc);
}

// Asks the person about a write the agent did not ask for (f and info
// taken): first what the person has of the file, for the diff.
static void hold_write(struct client *cl, struct acp_conn *c, struct fs_call *f,
                       json_t *info) {
  struct hold *h = hold_new(cl, c, f->id, "fs/write_text_file",
                            json_string_length(f->content), info);
  if (!h) {
    fs_call_free(f);
    return;
  }
  h->f = f;
  f->tcid = xstrdup(json_string_value(json_object_get(info, "toolCallId")));
  // "peek": the broker looks, the agent does not see it.
  json_t *args = json_pack("[s,s,i,i,s]", "read", f->resolved, 0, 0, "peek");
  if (!cl->host->call_lua(cl->ud, lua_fs, args, hold_old_cb, h))
    hold_refuse(cl, c, h, "fs/write_text_file",
                "the agent did not ask to write it, and Neovim is gone: "
                "nobody can be asked");
}

static void fs_request(struct client *cl, struct acp_conn *c, const json_t *id,
                       bool write, json_t *params) {
  const char *what = write ? "fs/write_text_file" : "fs/read_text_file";
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *path = json_string_value(json_object_get(params, "path"));
  json_t *content = json_object_get(params, "content");
  json_t *line = json_object_get(params, "line");
  json_t *limit = json_object_get(params, "limit");
  if (!path || path[0] != '/' || (write && !json_is_string(content)) ||
      (line && !json_is_null(line) && !json_is_integer(line)) ||
      (limit && !json_is_null(limit) && !json_is_integer(limit))) {
    acp_conn_respond_error(c, id, JSONRPC_INVALID_PARAMS,
                           write ? "an absolute path and a content string "
                                   "are needed"
                                 : "an absolute path is needed");
    return;
  }
  const char *cwd = acp_conn_session_cwd(c, sid);
  char tcid[64];
  snprintf(tcid, sizeof(tcid), "acp-broker-%s-%llu", write ? "write" : "read",
           (unsigned long long)++cl->checks);
  struct gate_verdict v;
  synthetic(cl, c, sid, cwd, write ? "edit" : "read", path, NULL, tcid, &v);
  const char *root = json_string_value(json_object_get(v.info, "root"));
  bool inside = false;
  char *resolved = fs_resolve(root, path, &inside);
  if (write && resolved) {
    char *title = write_title(root, resolved);
    json_object_set_new(v.info, "title", json_string(title));
    free(title);
  }
  bool protect = inside && v.decision == POLICY_ASK &&
                 strstr(reason_of(&v), "protected") != NULL;
  bool ask = false; // the person is asked (a write only)
  char why[PATH_LEN_MAX + 300] = "";
  if (!resolved) {
    snprintf(why, sizeof(why), "%s cannot be resolved", path);
  } else if (v.decision == POLICY_DENY) {
    snprintf(why, sizeof(why), "%s", reason_of(&v));
    if (write)
      audit_verdict(cl, &v, "deny", "reject_once");
  } else if (!inside) {
    // Outside the project: an Edit/Read rule, or the person's answer to a
    // request of this turn naming it.
    bool linked = approval_take(cl, c, sid, NULL, resolved, path, write, true);
    if (!linked && by_rule(&v) && write)
      audit_verdict(cl, &v, "allow", "allow_once");
    else if (!linked && !by_rule(&v))
      snprintf(why, sizeof(why),
               "%s is outside the project %s (a %s rule, or your answer to a "
               "request naming it, can allow it)",
               resolved, root, write ? "Edit" : "Read");
  } else if (write) {
    // Inside: an allowed request of this turn naming the path (the agent
    // asked first, as Gemini does), else what the policy says of the edit
    // itself. A protected file only after the person's answer.
    bool linked =
        approval_take(cl, c, sid, NULL, resolved, path, true, protect);
    if (!linked && protect)
      snprintf(why, sizeof(why),
               "%s is protected and no answer of yours allowed writing it",
               resolved);
    else if (!linked && v.decision == POLICY_ALLOW)
      audit_verdict(cl, &v, "allow", "allow_once");
    else if (!linked)
      ask = true;
  }
  if (why[0]) {
    // A write the broker's confinement refused (outside the project, a
    // protected file, a path it cannot resolve) is audited like a denial
    // (a deny rule's refusal was audited above).
    if (write && v.decision != POLICY_DENY)
      audit(cl, v.info, "deny", "confinement", NULL);
    refuse(cl, c, id, what, why);
    free(resolved);
    json_decref(v.info);
    return;
  }
  struct fs_call *f = xcalloc(1, sizeof(*f));
  *f = (struct fs_call){
      .cl = cl,
      .serial = acp_conn_serial(c),
      .id = json_deep_copy(id),
      .session = xstrdup(sid),
      .write = write,
      .resolved = resolved,
      .within = inside ? xstrdup(root) : NULL,
      .content = write ? json_incref(content) : NULL,
      .line = (uint32_t)(json_integer_value(line) > 0 ? json_integer_value(line)
                                                      : 0),
      .limit =
          (uint32_t)(json_integer_value(limit) > 0 ? json_integer_value(limit)
                                                   : 0),
  };
  if (ask) {
    char reason[1200];
    snprintf(reason, sizeof(reason), "the agent wrote without asking first; %s",
             reason_of(&v));
    json_object_set_new(v.info, "reason", json_string(reason));
    hold_write(cl, c, f, v.info);
    return;
  }
  json_decref(v.info);
  fs_go(cl, c, f);
}

// ---- terminals ----

static struct client_term *term_find(struct client *cl, struct acp_conn *c,
                                     json_t *params) {
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *tid = json_string_value(json_object_get(params, "terminalId"));
  if (!tid)
    return NULL;
  for (struct client_term *t = cl->terms; t; t = t->next)
    if (!t->released && t->serial == acp_conn_serial(c) &&
        strcmp(t->session, sid) == 0 && strcmp(t->id, tid) == 0)
      return t;
  return NULL;
}

static void term_event(struct client_term *ct) {
  bool truncated;
  json_t *out = term_output(ct->t, CLIENT_EVENT_TAIL, &truncated);
  json_t *st = term_exit_status(ct->t);
  ct->event_due = false;
  emit(ct->cl, "terminal",
       json_pack("{s:s,s:s,s:s,s:s,s:i,s:o,s:b,s:o?}", "agent",
                 acp_conn_name(ct->conn), "session", ct->session, "terminalId",
                 ct->id, "command", ct->command, "pid", term_pid(ct->t),
                 "output", out, "truncated", truncated, "exitStatus", st));
}

static void term_timer_cb(uv_timer_t *h) {
  struct client_term *ct = h->data;
  if (ct->event_due && !ct->released)
    term_event(ct);
}

static void on_term_output(void *ud) {
  struct client_term *ct = ud;
  if (ct->event_due)
    return;
  ct->event_due = true;
  uv_timer_start(&ct->timer, term_timer_cb, CLIENT_EVENT_MS, 0);
}

// Answers every terminal/wait_for_exit call waiting on ct with (a copy
// of) st.
static void answer_waiters(struct client_term *ct, const json_t *st) {
  for (size_t i = 0; i < json_array_size(ct->waiters); i++)
    acp_conn_respond(ct->conn, json_array_get(ct->waiters, i),
                     json_deep_copy(st));
  json_array_clear(ct->waiters);
}

static void on_term_done(void *ud) {
  struct client_term *ct = ud;
  uv_timer_stop(&ct->timer);
  term_event(ct);
  json_t *st = term_exit_status(ct->t);
  answer_waiters(ct, st);
  if (ct->tcid) {
    json_t *code = json_object_get(st, "exitCode");
    own_update(ct->cl, ct->conn, ct->session, ct->tcid,
               json_is_integer(code) && json_integer_value(code) == 0
                   ? "completed"
                   : "failed",
               NULL);
  }
  json_decref(st);
}

static void ct_destroy(struct client_term *ct) {
  free(ct->session);
  free(ct->id);
  free(ct->command);
  free(ct->tcid);
  json_decref(ct->waiters);
  free(ct);
}

static void ct_free(uv_handle_t *h) {
  ct_destroy(h->data);
}

static void on_term_closed(void *ud) {
  struct client_term *ct = ud;
  uv_close((uv_handle_t *)&ct->timer, ct_free);
}

static const struct term_ops term_ops = {on_term_output, on_term_done,
                                         on_term_closed};

// Takes ct out of the list and ends it; pending waiters learn it was
// killed.
static void term_release(struct client *cl, struct client_term *ct) {
  for (struct client_term **pp = &cl->terms; *pp; pp = &(*pp)->next)
    if (*pp == ct) {
      *pp = ct->next;
      cl->nterms--;
      break;
    }
  ct->released = true;
  uv_timer_stop(&ct->timer);
  json_t *killed = json_pack("{s:n,s:s}", "exitCode", "signal", "SIGKILL");
  answer_waiters(ct, killed);
  json_decref(killed);
  term_close(ct->t);
}

// The command line a terminal runs, as the policy sees it: the script of
// `sh -c SCRIPT`, else the words joined (quoted when needed).
static char *command_line(const char *command, json_t *args) {
  size_t n = json_array_size(args);
  const char *base = strrchr(command, '/');
  base = base ? base + 1 : command;
  bool shell = !strcmp(base, "sh") || !strcmp(base, "bash") ||
               !strcmp(base, "dash") || !strcmp(base, "zsh");
  if (n == 0)
    return xstrdup(command);
  const char *a0 = json_string_value(json_array_get(args, 0));
  if (shell && n == 2 && a0 && strcmp(a0, "-c") == 0)
    return xstrdup(json_string_value(json_array_get(args, 1)));
  size_t cap = strlen(command) + 1;
  for (size_t i = 0; i < n; i++)
    cap += strlen(json_string_value(json_array_get(args, i))) * 4 + 3;
  char *out = xmalloc(cap);
  size_t o = 0;
  for (size_t i = 0; i <= n; i++) {
    const char *w =
        i ? json_string_value(json_array_get(args, i - 1)) : command;
    bool plain = w[0] != '\0';
    for (const char *p = w; *p && plain; p++)
      plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789-_./=:,+@%",
                     *p) != NULL;
    if (i)
      out[o++] = ' ';
    if (plain) {
      memcpy(out + o, w, strlen(w));
      o += strlen(w);
      continue;
    }
    out[o++] = '\'';
    for (const char *p = w; *p; p++) {
      if (*p == '\'') {
        memcpy(out + o, "'\\''", 4);
        o += 4;
      } else {
        out[o++] = *p;
      }
    }
    out[o++] = '\'';
  }
  out[o] = '\0';
  return out;
}

static bool strings_array(json_t *a) {
  if (!a || json_is_null(a))
    return true;
  if (!json_is_array(a))
    return false;
  for (size_t i = 0; i < json_array_size(a); i++)
    if (!json_is_string(json_array_get(a, i)))
      return false;
  return true;
}

// environ with the request's {name, value} pairs over it.
static char **term_env(json_t *env) {
  struct env e;
  env_init(&e, environ, json_array_size(env));
  for (size_t i = 0; i < json_array_size(env); i++) {
    json_t *pair = json_array_get(env, i);
    const char *k = json_string_value(json_object_get(pair, "name"));
    const char *v = json_string_value(json_object_get(pair, "value"));
    if (k && v)
      env_set(&e, k, v);
  }
  return env_take(&e);
}

// Whether one more terminal may start; else refuses the request id.
static bool term_room(struct client *cl, struct acp_conn *c, const json_t *id) {
  if (cl->nterms < CLIENT_MAX_TERMS)
    return true;
  refuse(cl, c, id, "terminal/create",
         "too many terminals are open (release some)");
  return false;
}

// The directory a terminal/create runs in: its cwd, else its session's.
static const char *term_cwd(struct acp_conn *c, json_t *params) {
  const char *cwd = json_string_value(json_object_get(params, "cwd"));
  return cwd ? cwd
             : acp_conn_session_cwd(
                   c, json_string_value(json_object_get(params, "sessionId")));
}

// Starts the terminal of an allowed terminal/create (params borrowed, its
// command line taken); tcid: the broker's own tool call that asked, or
// NULL.
static void term_start(struct client *cl, struct acp_conn *c, const json_t *id,
                       json_t *params, char *line, const char *tcid) {
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *command = json_string_value(json_object_get(params, "command"));
  json_t *args = json_object_get(params, "args");
  json_t *env = json_object_get(params, "env");
  json_t *limit = json_object_get(params, "outputByteLimit");
  const char *cwd = term_cwd(c, params);
  if (!term_room(cl, c, id)) {
    free(line);
    return;
  }
  size_t nargs = json_array_size(args);
  const char **argv = xcalloc(nargs + 4, sizeof(*argv));
  if (nargs == 0) {
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = command;
  } else {
    argv[0] = command;
    for (size_t i = 0; i < nargs; i++)
      argv[i + 1] = json_string_value(json_array_get(args, i));
  }
  char **envv = term_env(env);
  struct client_term *ct = xcalloc(1, sizeof(*ct));
  char tid[32];
  snprintf(tid, sizeof(tid), "term-%llu", (unsigned long long)++cl->next_term);
  *ct = (struct client_term){.cl = cl,
                             .conn = c,
                             .serial = acp_conn_serial(c),
                             .session = xstrdup(sid),
                             .id = xstrdup(tid),
                             .command = line,
                             .waiters = json_array()};
  struct proc_spawn ps = {argv, envv, cwd, "terminal"};
  char err[600];
  ct->t =
      term_spawn(cl->loop, &ps, limit ? (size_t)json_integer_value(limit) : 0,
                 &term_ops, ct, err, sizeof(err));
  free(argv);
  strv_free(envv);
  if (!ct->t) {
    acp_conn_respond_error(c, id, JSONRPC_INTERNAL_ERROR, err);
    if (tcid)
      own_update(cl, c, sid, tcid, "failed", NULL);
    ct_destroy(ct);
    return;
  }
  uv_timer_init(cl->loop, &ct->timer);
  ct->timer.data = ct;
  ct->next = cl->terms;
  cl->terms = ct;
  cl->nterms++;
  LOG_I("%s: terminal %s (pid %d): %s", acp_conn_name(c), tid, term_pid(ct->t),
        line);
  acp_conn_respond(c, id, json_pack("{s:s}", "terminalId", tid));
  term_event(ct);
  if (tcid) {
    ct->tcid = xstrdup(tcid);
    own_update(cl, c, sid, tcid, "in_progress",
               json_pack("[{s:s,s:s}]", "type", "terminal", "terminalId", tid));
  }
}

// Asks the person about a command the agent runs without having asked
// (info taken, line taken).
static void hold_term(struct client *cl, struct acp_conn *c, const json_t *id,
                      json_t *params, const char *cwd, char *line,
                      json_t *info) {
  struct hold *h = hold_new(cl, c, id, "terminal/create", strlen(line), info);
  if (!h) {
    free(line);
    return;
  }
  h->id = json_deep_copy(id);
  h->params = json_deep_copy(params);
  h->line = line;
  h->tcid = xstrdup(json_string_value(json_object_get(info, "toolCallId")));
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  json_t *tc =
      json_pack("{s:O,s:O,s:s,s:s,s:{s:s,s:s?}}", "toolCallId",
                json_object_get(info, "toolCallId"), "title",
                json_object_get(info, "title"), "kind", "execute", "status",
                "pending", "rawInput", "command", line, "cwd", cwd);
  hold_ask(cl, c, h, sid, tc);
}

static void term_create(struct client *cl, struct acp_conn *c, const json_t *id,
                        json_t *params) {
  const char *sid = json_string_value(json_object_get(params, "sessionId"));
  const char *command = json_string_value(json_object_get(params, "command"));
  json_t *args = json_object_get(params, "args");
  json_t *env = json_object_get(params, "env");
  json_t *cwdj = json_object_get(params, "cwd");
  json_t *limit = json_object_get(params, "outputByteLimit");
  const char *cwd = json_string_value(cwdj);
  if (!command || !command[0] || !strings_array(args) ||
      (env && !json_is_null(env) && !json_is_array(env)) ||
      (cwdj && !json_is_null(cwdj) && (!cwd || cwd[0] != '/')) ||
      (limit && !json_is_null(limit) &&
       (!json_is_integer(limit) || json_integer_value(limit) < 0))) {
    acp_conn_respond_error(c, id, JSONRPC_INVALID_PARAMS,
                           "terminal/create needs a command (args: strings, "
                           "cwd: absolute, outputByteLimit: >= 0)");
    return;
  }
  cwd = term_cwd(c, params);
  if (!term_room(cl, c, id))
    return;
  char *line = command_line(command, json_is_array(args) ? args : NULL);
  char tcid[64];
  snprintf(tcid, sizeof(tcid), "acp-broker-terminal-%llu",
           (unsigned long long)++cl->checks);
  struct gate_verdict v;
  synthetic(cl, c, sid, cwd, "execute", NULL, line, tcid, &v);
  char title[400];
  snprintf(title, sizeof(title), "Run %.300s%s (not asked by the agent)", line,
           strlen(line) > 300 ? "…" : "");
  json_object_set_new(v.info, "title", json_string(title));
  if (v.decision == POLICY_DENY) {
    char why[1000];
    snprintf(why, sizeof(why), "%s", reason_of(&v));
    audit_verdict(cl, &v, "deny", "reject_once");
    json_decref(v.info);
    refuse(cl, c, id, "terminal/create", why);
    free(line);
    return;
  }
  // An allowed request of this turn for the command (the agent asked
  // first), else what the policy says of the command itself, else the
  // person.
  if (approval_take(cl, c, sid, line, NULL, NULL, false, false)) {
    json_decref(v.info);
  } else if (v.decision == POLICY_ALLOW) {
    audit_verdict(cl, &v, "allow", "allow_once");
    json_decref(v.info);
  } else {
    char reason[1200];
    snprintf(reason, sizeof(reason),
             "the agent ran it without asking first; %s", reason_of(&v));
    json_object_set_new(v.info, "reason", json_string(reason));
    hold_term(cl, c, id, params, cwd, line, v.info);
    return;
  }
  term_start(cl, c, id, params, line, NULL);
}

static void term_request(struct client *cl, struct acp_conn *c,
                         const json_t *id, const char *method, json_t *params) {
  if (strcmp(method, "terminal/create") == 0) {
    term_create(cl, c, id, params);
    return;
  }
  struct client_term *ct = term_find(cl, c, params);
  if (!ct) {
    acp_conn_respond_error(c, id, JSONRPC_INVALID_PARAMS,
                           "unknown or released terminalId");
    return;
  }
  if (strcmp(method, "terminal/output") == 0) {
    bool truncated;
    json_t *out = term_output(ct->t, 0, &truncated);
    acp_conn_respond(c, id,
                     json_pack("{s:o,s:b,s:o?}", "output", out, "truncated",
                               truncated, "exitStatus",
                               term_exit_status(ct->t)));
  } else if (strcmp(method, "terminal/wait_for_exit") == 0) {
    if (term_done(ct->t))
      acp_conn_respond(c, id, term_exit_status(ct->t));
    else if (json_array_size(ct->waiters) >= CLIENT_MAX_WAITERS)
      acp_conn_respond_error(c, id, JSONRPC_INTERNAL_ERROR,
                             "too many wait_for_exit calls on this terminal");
    else
      json_array_append_new(ct->waiters, json_deep_copy(id));
  } else if (strcmp(method, "terminal/kill") == 0) {
    term_kill(ct->t);
    acp_conn_respond(c, id, json_object());
  } else { // terminal/release
    term_release(cl, ct);
    acp_conn_respond(c, id, json_object());
  }
}

// ---- public ----

void client_request(struct client *cl, struct acp_conn *c, const json_t *id,
                    const char *method, json_t *params) {
  if (strncmp(method, "fs/", 3) == 0)
    fs_request(cl, c, id, strcmp(method, "fs/write_text_file") == 0, params);
  else
    term_request(cl, c, id, method, params);
}

// Why a call held for the person's answer is refused, by who ended it.
static const char *hold_refusal(const char *by) {
  if (strcmp(by, "person") == 0)
    return "you were asked, as the agent had not asked first, and rejected it";
  if (strcmp(by, "error") == 0)
    return "the agent had not asked first, and the prompt could not be shown";
  if (strcmp(by, "turn") == 0)
    return "the agent had not asked first, and the turn was cancelled "
           "before you could be asked";
  return "the agent had not asked first, and the prompt was cancelled "
         "before an answer";
}

// Refuses the call h holds (-32001) on c: by ended it.
static void hold_answer_refused(struct acp_conn *c, struct hold *h,
                                const char *by) {
  char msg[300];
  snprintf(msg, sizeof(msg), "%s refused: %s", hold_what(h), hold_refusal(by));
  LOG_I("%s: %s", acp_conn_name(c), msg);
  acp_conn_respond_error(c, h->f ? h->f->id : h->id, CLIENT_ERR_REFUSED, msg);
}

bool client_answered(struct client *cl, struct acp_conn *c, uint64_t token,
                     bool allow, const char *by) {
  struct hold *h = cl->holds;
  while (h && h->token != token)
    h = h->next;
  if (!h)
    return false;
  if (allow && acp_conn_alive(c)) {
    if (h->f) {
      h->f->approved = strcmp(by, "person") == 0;
      fs_go(cl, c, h->f);
      h->f = NULL;
    } else {
      term_start(cl, c, h->id, h->params, h->line, h->tcid);
      h->line = NULL;
    }
  } else {
    hold_answer_refused(c, h, by);
  }
  hold_free(cl, h);
  return true;
}

bool client_fs_answer(struct client *cl, uint64_t token,
                      const msgpack_object *result) {
  struct fs_call *f = NULL;
  for (struct fs_call **pp = &cl->waits; *pp; pp = &(*pp)->next)
    if ((*pp)->wait == token) {
      f = *pp;
      *pp = f->next;
      cl->nwaits--;
      break;
    }
  if (!f)
    return false;
  struct acp_conn *c = conn_by_serial(cl, f->serial);
  if (c && result && result->type == MSGPACK_OBJECT_BOOLEAN &&
      result->via.boolean) {
    acp_conn_respond(c, f->id, json_object());
    fs_done(c, f, "buffer");
  } else if (c) {
    // Refused: the person kept their version (or looks at both); the
    // agent reads why.
    char msg[800];
    bool str = result && result->type == MSGPACK_OBJECT_STR;
    snprintf(
        msg, sizeof(msg), "fs/write_text_file refused: %.*s",
        str ? (int)(result->via.str.size > 600 ? 600 : result->via.str.size)
            : 22,
        str ? result->via.str.ptr : "the person refused it");
    LOG_I("%s: %s", acp_conn_name(c), msg);
    acp_conn_respond_error(c, f->id, CLIENT_ERR_REFUSED, msg);
    if (f->tcid)
      own_update(cl, c, f->session, f->tcid, "failed", NULL);
  }
  fs_call_free(f);
  return true;
}

void client_cancel(struct client *cl, struct acp_conn *c) {
  for (struct hold *h = cl->holds; h; h = h->next) {
    if (h->token || h->answered || (c && h->serial != acp_conn_serial(c)))
      continue;
    struct acp_conn *hc = c ? c : conn_by_serial(cl, h->serial);
    h->answered = true;
    audit(cl, h->info, "ask", "cancel", NULL);
    if (hc)
      hold_answer_refused(hc, h, "turn");
  }
  // Writes Neovim holds for the person: refused now (a later answer is
  // ignored), so that the agent's turn can end.
  for (struct fs_call **pp = &cl->waits; *pp;) {
    struct fs_call *f = *pp;
    if (c && f->serial != acp_conn_serial(c)) {
      pp = &f->next;
      continue;
    }
    *pp = f->next;
    cl->nwaits--;
    struct acp_conn *fc = c ? c : conn_by_serial(cl, f->serial);
    if (fc) {
      acp_conn_respond_error(fc, f->id, CLIENT_ERR_REFUSED,
                             "fs/write_text_file refused: the turn was "
                             "cancelled while the person was asked about "
                             "their unsaved changes that overlap it");
      if (f->tcid)
        own_update(cl, fc, f->session, f->tcid, "failed", NULL);
    }
    fs_call_free(f);
  }
}

void client_conn_gone(struct client *cl, struct acp_conn *c) {
  for (struct client_term *t = cl->terms, *next; t; t = next) {
    next = t->next;
    if (t->conn == c)
      term_release(cl, t);
  }
  for (size_t i = 0; i < cl->napprovals;)
    if (approval_at(cl, i)->serial == acp_conn_serial(c))
      approval_drop(cl, i);
    else
      i++;
  for (struct fs_call **pp = &cl->waits; *pp;) {
    struct fs_call *f = *pp;
    if (f->serial == acp_conn_serial(c)) {
      *pp = f->next;
      cl->nwaits--;
      fs_call_free(f);
    } else {
      pp = &f->next;
    }
  }
}

struct client *client_new(uv_loop_t *loop, const struct client_host *host,
                          void *ud) {
  struct client *cl = xcalloc(1, sizeof(*cl));
  cl->loop = loop;
  cl->host = host;
  cl->ud = ud;
  return cl;
}

void client_free(struct client *cl) {
  if (!cl)
    return;
  for (size_t i = 0; i < cl->napprovals; i++)
    approval_clear(approval_at(cl, i));
  while (cl->holds)
    hold_free(cl, cl->holds);
  while (cl->waits) {
    struct fs_call *f = cl->waits;
    cl->waits = f->next;
    fs_call_free(f);
  }
  free(cl);
}

json_t *client_own_options(void) {
  return json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s}]", "optionId", "allow_once",
                   "name", "Allow", "kind", "allow_once", "optionId",
                   "reject_once", "name", "Reject", "kind", "reject_once");
}
