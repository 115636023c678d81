// client: the fs/* and terminal/* services with a fake host (the broker's
// side of struct client_host: the real gate judges, Neovim and the person
// are played by the test) and a real libuv loop, in a temp directory.
//
// Confinement: reads and writes inside the project; `..` escapes, absolute
// paths outside the root and a symlink inside the root that points outside
// are refused (-32001, audited for writes); a directory swapped for a
// symlink between the decision and the write (in the round trip to Neovim)
// does not lead outside. Unasked writes: deny rules and plan mode refuse
// them, acceptEdits does them (audited), an allow answer of this turn
// covers one write, otherwise the person is asked. terminal/create: a deny
// rule refuses it, an allow rule runs it, otherwise the person is asked.
//
// The agent connection is faked here too: this file defines the acp_conn_*
// functions client.c calls (so acp.o is not linked from libbroker.a). A new
// acp_conn_* call in client.c shows as a duplicate symbol at link time: add
// it below.

#include "broker/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acp/acp.h"
#include "check.h"
#include "policy/gate.h"

// ---- a fake agent connection ----

struct acp_conn {
  const char *name;
  uint64_t serial;
  const char *cwd; // of session "s1"
  uint64_t turn;
  bool alive;
  json_t *answers; // [{id, result} | {id, code, message}]
};

void acp_conn_respond(struct acp_conn *c, const json_t *id, json_t *result) {
  json_array_append_new(c->answers,
                        json_pack("{s:O,s:o}", "id", id, "result", result));
}

void acp_conn_respond_error(struct acp_conn *c, const json_t *id, int code,
                            const char *message) {
  json_array_append_new(c->answers, json_pack("{s:O,s:i,s:s}", "id", id, "code",
                                              code, "message", message));
}

uint64_t acp_conn_serial(const struct acp_conn *c) {
  return c->serial;
}

uint64_t acp_conn_turn(const struct acp_conn *c, const char *sid) {
  return sid && strcmp(sid, "s1") == 0 ? c->turn : 0;
}

const char *acp_conn_name(const struct acp_conn *c) {
  return c->name;
}

bool acp_conn_alive(const struct acp_conn *c) {
  return c->alive;
}

const char *acp_conn_session_cwd(const struct acp_conn *c, const char *sid) {
  return sid && strcmp(sid, "s1") == 0 ? c->cwd : NULL;
}

// ---- a fake host ----

struct lua_call {
  nvim_rpc_response_cb cb;
  void *ud;
};

static struct {
  struct acp_conn *conn;
  struct gate *gate;
  json_t *events, *errors, *audits, *asks; // what the services did
  bool nvim;                               // Neovim answers Lua calls
  struct lua_call lua[16];                 // calls waiting for an answer
  size_t nlua;
  void (*before_lua)(void); // runs in each Lua call (between the
                            // decision and the disk)
  uint64_t tokens;
  bool closing;
  json_t *last_args; // of the last Lua call
} H;

static struct acp_conn *h_conn(void *ud, uint64_t serial) {
  (void)ud;
  return H.conn && H.conn->serial == serial && H.conn->alive ? H.conn : NULL;
}

static void h_emit(void *ud, const char *event, json_t *data) {
  (void)ud;
  json_array_append_new(H.events,
                        json_pack("{s:s,s:o?}", "event", event, "data", data));
}

static void h_error(void *ud, const char *agent, const char *msg) {
  (void)ud;
  (void)agent;
  json_array_append_new(H.errors, json_string(msg));
}

static bool h_call_lua(void *ud, const char *code, json_t *args,
                       nvim_rpc_response_cb cb, void *cb_ud) {
  (void)ud;
  (void)code;
  json_decref(H.last_args);
  H.last_args = args;
  if (H.before_lua)
    H.before_lua();
  if (!H.nvim || H.nlua == sizeof(H.lua) / sizeof(*H.lua))
    return false;
  H.lua[H.nlua++] = (struct lua_call){cb, cb_ud};
  return true;
}

static void h_judge(void *ud, const char *agent, const char *session,
                    const char *cwd, json_t *params, struct gate_verdict *v) {
  (void)ud;
  gate_decide(H.gate, agent, session, cwd, params, v);
  gate_verdict_to_info(v);
}

static uint64_t h_ask(void *ud, struct acp_conn *c, const json_t *id,
                      json_t *params, json_t *info) {
  (void)ud;
  (void)c;
  uint64_t token = ++H.tokens;
  json_array_append_new(H.asks, json_pack("{s:I,s:O,s:O,s:o}", "token",
                                          (json_int_t)token, "id", id, "params",
                                          params, "info", info));
  return token;
}

static void h_resolve(void *ud, uint64_t token, const char *option_id,
                      const char *by) {
  (void)ud;
  (void)token;
  (void)option_id;
  (void)by;
}

static void h_audit(void *ud, const json_t *info, const char *decision,
                    const char *by, const char *option_id) {
  (void)ud;
  json_array_append_new(H.audits,
                        json_pack("{s:s,s:s?,s:s?,s:O?,s:O?,s:O?}", "decision",
                                  decision, "by", by, "optionId", option_id,
                                  "title", json_object_get(info, "title"),
                                  "rule", json_object_get(info, "rule"),
                                  "paths", json_object_get(info, "paths")));
}

static bool h_closing(void *ud) {
  (void)ud;
  return H.closing;
}

static const struct client_host host = {h_conn,     h_emit,  h_error,
                                        h_call_lua, h_judge, h_ask,
                                        h_resolve,  h_audit, h_closing};

// ---- helpers ----

static char base[256], proj[300], out[300];
static uv_loop_t loop;
static struct client *cl;
static int next_id;

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static char *slurp(const char *path) {
  static char buf[4096];
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

// Clears what the host and the connection recorded.
static void reset(void) {
  json_array_clear(H.events);
  json_array_clear(H.errors);
  json_array_clear(H.audits);
  json_array_clear(H.asks);
  json_array_clear(H.conn->answers);
}

// Sets the setup() options' permissions (a JSON text) and the mode.
static void configure(const char *permissions, const char *mode) {
  json_error_t e;
  json_t *p = json_loads(permissions, 0, &e);
  gate_configure(H.gate, json_pack("{s:o}", "permissions", p));
  char err[300];
  gate_mode(H.gate, proj, mode, err, sizeof(err));
}

// Sends a client method request with params (a json_pack format and its
// values); returns the id it had.
static int request(const char *method, json_t *params) {
  json_t *id = json_integer(++next_id);
  client_request(cl, H.conn, id, method, params);
  json_decref(id);
  json_decref(params);
  return next_id;
}

static json_t *fs_write_params(const char *path, const char *text) {
  return json_pack("{s:s,s:s,s:s}", "sessionId", "s1", "path", path, "content",
                   text);
}

// The connection's answer to request id (borrowed), or NULL.
static json_t *answer(int id) {
  size_t i;
  json_t *a;
  json_array_foreach(H.conn->answers, i, a) {
    if (json_integer_value(json_object_get(a, "id")) == id)
      return a;
  }
  return NULL;
}

static int error_code(int id) {
  return (int)json_integer_value(json_object_get(answer(id), "code"));
}

static const char *error_message(int id) {
  const char *m = json_string_value(json_object_get(answer(id), "message"));
  return m ? m : "";
}

static const char *audit_str(size_t i, const char *key) {
  return json_string_value(json_object_get(json_array_get(H.audits, i), key));
}

// Neovim answers the waiting Lua calls: nil (no loaded buffer).
static void lua_reply_nil(void) {
  msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
  while (H.nlua) {
    struct lua_call c = H.lua[0];
    memmove(H.lua, H.lua + 1, --H.nlua * sizeof(*H.lua));
    c.cb(c.ud, &nil, &nil);
  }
}

static size_t count_events(const char *name) {
  size_t n = 0, i;
  json_t *e;
  json_array_foreach(H.events, i, e) {
    n += strcmp(json_string_value(json_object_get(e, "event")), name) == 0;
  }
  return n;
}

// ---- fs ----

static void test_read_inside(void) {
  char p[400];
  reset();
  configure("{}", "default");
  snprintf(p, sizeof(p), "%s/a.txt", proj);
  put(p, "one\ntwo\n");
  int id = request("fs/read_text_file", json_pack("{s:s,s:s,s:i}", "sessionId",
                                                  "s1", "path", p, "line", 2));
  is_str(json_string_value(
             json_object_get(json_object_get(answer(id), "result"), "content")),
         "two\n", "a read inside the project is answered from line 2");
  is_size(count_events("fs"), 1, "and told to Lua");
  is_size(json_array_size(H.audits), 0, "reads are not audited");
  snprintf(p, sizeof(p), "%s/missing.txt", proj);
  id = request("fs/read_text_file",
               json_pack("{s:s,s:s}", "sessionId", "s1", "path", p));
  is_str(json_string_value(
             json_object_get(json_object_get(answer(id), "result"), "content")),
         "", "a missing file inside reads as empty");
}

static void test_write_inside(void) {
  char p[400];
  reset();
  configure("{}", "acceptEdits");
  snprintf(p, sizeof(p), "%s/sub/new.txt", proj);
  int id = request("fs/write_text_file", fs_write_params(p, "new\n"));
  ok(json_is_object(json_object_get(answer(id), "result")),
     "acceptEdits: an unasked write inside is done");
  is_str(slurp(p), "new\n", "the file is written (its directory made)");
  is_size(json_array_size(H.audits), 1, "one audit line");
  is_str(audit_str(0, "decision"), "allow", "allow");
  is_str(audit_str(0, "by"), "mode", "by mode");
  is_str(audit_str(0, "optionId"), "allow_once", "allow_once");
  is_str(audit_str(0, "title"), "Write sub/new.txt (not asked by the agent)",
         "titled with the path in the project");
  is_size(json_array_size(H.asks), 0, "nobody asked");

  // Default mode: an allow answer of this turn naming the path covers one
  // write, unaudited here (its answer was).
  reset();
  configure("{}", "default");
  json_t *info =
      json_pack("{s:s,s:s,s:[s]}", "session", "s1", "kind", "edit", "paths", p);
  client_approved(cl, H.conn, info, true);
  json_decref(info);
  id = request("fs/write_text_file", fs_write_params(p, "covered\n"));
  ok(json_is_object(json_object_get(answer(id), "result")),
     "a write covered by an allow answer is done");
  is_str(slurp(p), "covered\n", "written");
  is_size(json_array_size(H.audits) + json_array_size(H.asks), 0,
          "nothing audited or asked");
  H.nvim = false;
  id = request("fs/write_text_file", fs_write_params(p, "again\n"));
  is_int(error_code(id), -32001, "the answer was used up: the next is not");
  is_str(slurp(p), "covered\n", "not written");
  is_str(audit_str(0, "by"), "error", "audited: nobody could be asked");

  // An allowed read of the path does not cover writing it.
  reset();
  info =
      json_pack("{s:s,s:s,s:[s]}", "session", "s1", "kind", "read", "paths", p);
  client_approved(cl, H.conn, info, true);
  json_decref(info);
  id = request("fs/write_text_file", fs_write_params(p, "read-kind\n"));
  is_int(error_code(id), -32001, "a read answer does not cover a write");
  is_str(slurp(p), "covered\n", "not written");
}

// The last 64 allow answers are kept (the oldest dropped first, however
// many came before), each used once, one used from the middle too.
static void test_approvals_kept(void) {
  char p[400];
  reset();
  configure("{}", "default");
  bool nvim = H.nvim;
  H.nvim = false;
  for (int i = 0; i < 300; i++) {
    snprintf(p, sizeof(p), "%s/kept%d.txt", proj, i);
    json_t *info = json_pack("{s:s,s:s,s:[s]}", "session", "s1", "kind", "edit",
                             "paths", p);
    client_approved(cl, H.conn, info, true);
    json_decref(info);
  }
  snprintf(p, sizeof(p), "%s/kept%d.txt", proj, 250);
  int id = request("fs/write_text_file", fs_write_params(p, "x\n"));
  ok(json_is_object(json_object_get(answer(id), "result")),
     "an answer from the middle covers its write");
  int wrong = 0, covered = 0;
  for (int i = 0; i < 300; i++) {
    snprintf(p, sizeof(p), "%s/kept%d.txt", proj, i);
    id = request("fs/write_text_file", fs_write_params(p, "x\n"));
    bool done = json_is_object(json_object_get(answer(id), "result"));
    covered += done;
    wrong += done != (i >= 236 && i != 250);
  }
  ok(wrong == 0 && covered == 63,
     "only the last 64 answers are kept, each used once (%d covered, %d "
     "wrong)",
     covered, wrong);
  H.nvim = nvim;
}

// An approval keeps its session, command and every path (one block of
// memory each): 100 answers naming three paths and a command, the ring
// dropping the oldest; each path of the last 64 covers its write once,
// in another session nothing is covered.
static void test_approvals_paths(void) {
  char p[3][400];
  reset();
  configure("{}", "default");
  bool nvim = H.nvim;
  H.nvim = false;
  for (int i = 0; i < 100; i++) {
    for (int k = 0; k < 3; k++)
      snprintf(p[k], sizeof(p[k]), "%s/multi%d-%d-%s.txt", proj, i, k,
               k == 1 ? "a-longer-name-than-the-others" : "x");
    json_t *info =
        json_pack("{s:s,s:s,s:s,s:b,s:[s,s,s]}", "session", i % 2 ? "s1" : "s2",
                  "kind", "edit", "command", "make -j2 test", "rawCommand", 1,
                  "paths", p[0], p[1], p[2]);
    client_approved(cl, H.conn, info, true);
    json_decref(info);
  }
  int wrong = 0, covered = 0;
  for (int i = 0; i < 100; i++) {
    int k = i % 3; // one of its paths: the answer is used up by a write
    snprintf(p[k], sizeof(p[k]), "%s/multi%d-%d-%s.txt", proj, i, k,
             k == 1 ? "a-longer-name-than-the-others" : "x");
    for (int again = 0; again < 2; again++) {
      int id = request("fs/write_text_file", fs_write_params(p[k], "x\n"));
      bool done = json_is_object(json_object_get(answer(id), "result"));
      covered += done;
      // s1's answers only (the request's session), the last 64, once.
      wrong += done != (i >= 36 && i % 2 == 1 && !again);
    }
  }
  ok(wrong == 0 && covered == 32,
     "each kept answer's paths are its own (%d covered, %d wrong)", covered,
     wrong);
  H.nvim = nvim;
}

// A refused write: -32001, nothing written at target, one audit line (deny
// by `by`) and an error for the person.
static void refused_write(const char *path, const char *target, const char *by,
                          const char *desc) {
  char d[300];
  reset();
  int id = request("fs/write_text_file", fs_write_params(path, "x\n"));
  snprintf(d, sizeof(d), "%s: refused (-32001)", desc);
  is_int(error_code(id), -32001, d);
  snprintf(d, sizeof(d), "%s: nothing written", desc);
  ok(!exists(target), "%s", d);
  snprintf(d, sizeof(d), "%s: audited deny by %s", desc, by);
  ok(json_array_size(H.audits) == 1 &&
         strcmp(audit_str(0, "decision"), "deny") == 0 &&
         strcmp(audit_str(0, "by"), by) == 0,
     "%s", d);
  snprintf(d, sizeof(d), "%s: the person is told", desc);
  is_size(json_array_size(H.errors), 1, d);
  is_size(json_array_size(H.asks), 0, "nobody asked");
}

// A refused read: -32001 with a reason naming where, no content.
static void refused_read(const char *path, const char *desc) {
  char d[300];
  reset();
  int id = request("fs/read_text_file",
                   json_pack("{s:s,s:s}", "sessionId", "s1", "path", path));
  snprintf(d, sizeof(d), "%s: refused (-32001)", desc);
  is_int(error_code(id), -32001, d);
  snprintf(d, sizeof(d), "%s: no content is sent", desc);
  ok(answer(id) && !json_object_get(answer(id), "result"), "%s", d);
  is_size(count_events("fs"), 0, "no fs event");
}

static void test_escapes(void) {
  char p[600], target[400];
  configure("{}", "acceptEdits"); // inside, any write would be done
  snprintf(target, sizeof(target), "%s/new.txt", out);

  snprintf(p, sizeof(p), "%s/../out/secret.txt", proj);
  refused_read(p, "read via ..");
  ok(strstr(error_message(next_id), "outside the project") != NULL,
     "the reason says outside the project");
  snprintf(p, sizeof(p), "%s/sub/../../out/new.txt", proj);
  refused_write(p, target, "confinement", "write via ..");
  snprintf(p, sizeof(p), "%s/nope/../../out/new.txt", proj);
  refused_write(p, target, "confinement", "write via .. after a missing dir");

  snprintf(p, sizeof(p), "%s/secret.txt", out);
  refused_read(p, "absolute path outside");
  refused_write(target, target, "confinement", "absolute path outside");
  refused_read("/etc/passwd", "/etc/passwd");

  snprintf(p, sizeof(p), "%s/link/secret.txt", proj);
  refused_read(p, "symlink inside pointing outside");
  snprintf(p, sizeof(p), "%s/link/new.txt", proj);
  refused_write(p, target, "confinement", "write through a symlink inside");
  snprintf(p, sizeof(p), "%s/file-link", proj);
  refused_read(p, "a file symlink pointing outside");
  snprintf(p, sizeof(p), "%s/file-link", proj);
  reset();
  int id = request("fs/write_text_file", fs_write_params(p, "over\n"));
  is_int(error_code(id), -32001, "writing a file symlink pointing outside");
  snprintf(p, sizeof(p), "%s/secret.txt", out);
  is_str(slurp(p), "secret!\n", "the target is unchanged");

  // A protected file is written only after the person's answer.
  snprintf(p, sizeof(p), "%s/.acp/settings.json", proj);
  snprintf(target, sizeof(target), "%s/.acp/settings.json", proj);
  refused_write(p, target, "confinement", "a protected file under acceptEdits");
}

// Between the decision and the write (Neovim is asked whether a buffer has
// the file), a directory of the path is swapped for a symlink leading
// outside the project.
static char swap_dir[400], swap_away[400];
static void swap_for_symlink(void) {
  rename(swap_dir, swap_away);
  if (symlink(out, swap_dir) != 0)
    perror("symlink");
}

static void test_swap(void) {
  char p[500], target[400];
  configure("{}", "acceptEdits");
  snprintf(swap_dir, sizeof(swap_dir), "%s/swapped", proj);
  snprintf(swap_away, sizeof(swap_away), "%s/swapped-away", proj);
  mkdir(swap_dir, 0755);
  snprintf(p, sizeof(p), "%s/swapped/new.txt", proj);
  snprintf(target, sizeof(target), "%s/new.txt", out);
  reset();
  H.before_lua = swap_for_symlink;
  int id = request("fs/write_text_file", fs_write_params(p, "swapped\n"));
  H.before_lua = NULL;
  struct stat st;
  ok(lstat(swap_dir, &st) == 0 && S_ISLNK(st.st_mode),
     "the directory was swapped in the window");
  ok(answer(id) && !json_object_get(answer(id), "result"),
     "the write is answered with an error");
  ok(!exists(target), "nothing was written outside the project");
  is_size(count_events("fs"), 0, "no fs event");

  // The same swap before a read.
  reset();
  snprintf(p, sizeof(p), "%s/secret.txt", out);
  unlink(swap_dir);
  rename(swap_away, swap_dir);
  snprintf(p, sizeof(p), "%s/swapped/secret.txt", proj);
  put(p, "inside\n");
  H.before_lua = swap_for_symlink;
  id = request("fs/read_text_file",
               json_pack("{s:s,s:s}", "sessionId", "s1", "path", p));
  H.before_lua = NULL;
  ok(answer(id) && !json_object_get(answer(id), "result"),
     "a read through the swapped directory is answered with an error");
  unlink(swap_dir);
  rename(swap_away, swap_dir);
}

static void test_deny_and_plan(void) {
  char p[400], target[400];
  snprintf(p, sizeof(p), "%s/private", proj);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/private/key.txt", proj);
  put(p, "key\n");
  configure("{\"deny\":[\"Edit(/private/**)\",\"Read(/private/**)\"]}",
            "acceptEdits");
  snprintf(target, sizeof(target), "%s/private/new.txt", proj);
  refused_write(target, target, "rule", "a deny rule on an unasked write");
  is_str(audit_str(0, "rule"), "Edit(/private/**)", "the rule is audited");
  is_str(audit_str(0, "optionId"), "reject_once", "as reject_once");
  refused_read(p, "a deny rule on a read");
  is_size(json_array_size(H.audits), 0, "reads are not audited");

  // A deny rule wins over an allow answer of this turn.
  reset();
  json_t *info = json_pack("{s:s,s:s,s:[s]}", "session", "s1", "kind", "edit",
                           "paths", target);
  client_approved(cl, H.conn, info, true);
  json_decref(info);
  int id = request("fs/write_text_file", fs_write_params(target, "x\n"));
  is_int(error_code(id), -32001, "a deny rule wins over an allow answer");
  ok(!exists(target), "not written");
  client_conn_gone(cl, H.conn); // drops the unused approval

  configure("{}", "plan");
  snprintf(target, sizeof(target), "%s/plan.txt", proj);
  refused_write(target, target, "mode", "plan mode on an unasked write");
}

static void test_asked_write(void) {
  char p[400];
  configure("{}", "default");
  snprintf(p, sizeof(p), "%s/asked.txt", proj);
  put(p, "old\n");
  H.nvim = true;
  for (int allow = 0; allow < 2; allow++) {
    reset();
    int id = request("fs/write_text_file",
                     fs_write_params(p, allow ? "allowed\n" : "rejected\n"));
    lua_reply_nil(); // no buffer: the prompt shows the disk's text
    json_t *ask = json_array_get(H.asks, 0);
    json_t *tc = json_object_get(json_object_get(ask, "params"), "toolCall");
    is_str(json_string_value(json_object_get(tc, "kind")), "edit",
           "default mode: an unasked write is asked as an edit");
    json_t *diff = json_array_get(json_object_get(tc, "content"), 0);
    is_str(json_string_value(json_object_get(diff, "oldText")), "old\n",
           "showing the old text");
    ok(answer(id) == NULL, "not answered while the person is asked");
    uint64_t token =
        (uint64_t)json_integer_value(json_object_get(ask, "token"));
    ok(client_answered(cl, H.conn, token, allow, "person"),
       "the answer is the services'");
    lua_reply_nil();
    if (allow) {
      ok(json_is_object(json_object_get(answer(id), "result")), "allow: done");
      is_str(slurp(p), "allowed\n", "allow: written");
    } else {
      is_int(error_code(id), -32001, "reject: refused");
      ok(strstr(error_message(id), "rejected it") != NULL, "saying so");
      is_str(slurp(p), "old\n", "reject: not written");
    }
  }
  ok(!client_answered(cl, H.conn, 999, true, "person"),
     "another token is not the services'");

  // Cancelled before the prompt is shown (Neovim has not answered yet).
  reset();
  int id = request("fs/write_text_file", fs_write_params(p, "cancelled\n"));
  client_cancel(cl, H.conn);
  is_int(error_code(id), -32001, "a turn cancelled before the prompt refuses");
  is_str(audit_str(0, "by"), "cancel", "audited as cancelled");
  lua_reply_nil();
  is_size(json_array_size(H.asks), 0, "and nobody is asked after");
  is_str(slurp(p), "allowed\n", "not written");
  H.nvim = false;
}

// Neovim answers the oldest waiting Lua call with result.
static void lua_reply(const msgpack_object *result) {
  msgpack_object nil = {.type = MSGPACK_OBJECT_NIL};
  struct lua_call c = H.lua[0];
  memmove(H.lua, H.lua + 1, --H.nlua * sizeof(*H.lua));
  c.cb(c.ud, &nil, result);
}

// Neovim holds a write while the person is asked ({wait = token}).
static void lua_reply_wait(uint64_t token) {
  msgpack_object_kv kv = {
      .key = {.type = MSGPACK_OBJECT_STR, .via.str = {4, "wait"}},
      .val = {.type = MSGPACK_OBJECT_POSITIVE_INTEGER, .via.u64 = token}};
  msgpack_object map = {.type = MSGPACK_OBJECT_MAP,
                        .via.map = {.size = 1, .ptr = &kv}};
  lua_reply(&map);
}

// The last Lua call's argument i (borrowed).
static const char *lua_arg(size_t i) {
  return json_string_value(json_array_get(H.last_args, i));
}

static void test_held_write(void) {
  char p[400];
  msgpack_object yes = {.type = MSGPACK_OBJECT_BOOLEAN, .via.boolean = true};
  msgpack_object why = {.type = MSGPACK_OBJECT_STR,
                        .via.str = {13, "kept his own!"}};
  configure("{}", "acceptEdits");
  snprintf(p, sizeof(p), "%s/held.txt", proj);
  put(p, "disk\n");
  H.nvim = true;

  // The person's unsaved changes overlap: Neovim answers later.
  reset();
  int id = request("fs/write_text_file", fs_write_params(p, "agent\n"));
  is_str(lua_arg(0), "write", "the write goes to Neovim");
  ok(lua_arg(3) == NULL, "not marked approved (the policy allowed it)");
  lua_reply_wait(5);
  ok(answer(id) == NULL, "held: not answered while the person is asked");
  ok(!client_fs_answer(cl, 6, &yes), "another token answers nothing");
  ok(client_fs_answer(cl, 5, &yes), "the answer for token 5");
  ok(json_is_object(json_object_get(answer(id), "result")),
     "true: the write is done");
  is_size(count_events("fs"), 1, "and told to Lua");
  is_str(slurp(p), "disk\n", "never on disk: the buffer took it");
  ok(!client_fs_answer(cl, 5, &yes), "a token answers once");

  reset();
  id = request("fs/write_text_file", fs_write_params(p, "agent\n"));
  lua_reply_wait(7);
  ok(client_fs_answer(cl, 7, &why), "a string answers");
  is_int(error_code(id), -32001, "a string: refused");
  ok(strstr(error_message(id), "kept his own!") != NULL, "with the reason");
  is_str(slurp(p), "disk\n", "not written");

  // A token already waiting is not taken twice; the second write is refused.
  reset();
  id = request("fs/write_text_file", fs_write_params(p, "one\n"));
  lua_reply_wait(8);
  int id2 = request("fs/write_text_file", fs_write_params(p, "two\n"));
  lua_reply_wait(8);
  is_int(error_code(id2), -32001, "a token in use: refused at once");
  ok(answer(id) == NULL, "the first still waits");

  // The turn is cancelled: what waits is refused at once.
  client_cancel(cl, H.conn);
  is_int(error_code(id), -32001, "a cancelled turn refuses a held write");
  ok(strstr(error_message(id), "cancelled") != NULL, "saying so");
  ok(!client_fs_answer(cl, 8, &yes), "a later answer is ignored");

  // The agent goes: what waits is dropped (ASan: no leak).
  reset();
  id = request("fs/write_text_file", fs_write_params(p, "three\n"));
  lua_reply_wait(9);
  client_conn_gone(cl, H.conn);
  ok(!client_fs_answer(cl, 9, &yes), "dropped with its agent");
  ok(answer(id) == NULL, "and never answered");

  // A write the person allowed in the broker's own prompt is marked so.
  configure("{}", "default");
  reset();
  id = request("fs/write_text_file", fs_write_params(p, "asked\n"));
  is_str(lua_arg(4), "peek", "the prompt's read is a peek");
  lua_reply_nil();
  uint64_t token = (uint64_t)json_integer_value(
      json_object_get(json_array_get(H.asks, 0), "token"));
  ok(client_answered(cl, H.conn, token, true, "person"), "allowed");
  is_str(lua_arg(3), "approved", "the write says the person allowed it");
  lua_reply(&yes);
  ok(json_is_object(json_object_get(answer(id), "result")), "done");
  H.nvim = false;
}

// ---- terminals ----

static bool terminal_done(void) {
  size_t i;
  json_t *e;
  json_array_foreach(H.events, i, e) {
    json_t *d = json_object_get(e, "data");
    if (strcmp(json_string_value(json_object_get(e, "event")), "terminal") ==
            0 &&
        json_is_object(json_object_get(d, "exitStatus")))
      return true;
  }
  return false;
}

static void test_terminal(void) {
  char p[400];
  snprintf(p, sizeof(p), "%s/keep.txt", proj);
  put(p, "keep\n");
  configure("{\"deny\":[\"Bash(rm *)\"],\"allow\":[\"Bash(echo hi)\"]}",
            "default");
  reset();
  int id = request("terminal/create",
                   json_pack("{s:s,s:s,s:[s,s]}", "sessionId", "s1", "command",
                             "rm", "args", "-f", "keep.txt"));
  is_int(error_code(id), -32001, "terminal/create refused by a deny rule");
  ok(exists(p), "nothing ran");
  is_size(count_events("terminal"), 0, "no terminal");
  ok(json_array_size(H.audits) == 1 &&
         strcmp(audit_str(0, "decision"), "deny") == 0 &&
         strcmp(audit_str(0, "by"), "rule") == 0,
     "audited deny by rule");
  is_str(audit_str(0, "rule"), "Bash(rm *)", "naming the rule");

  reset();
  id =
      request("terminal/create", json_pack("{s:s,s:s,s:[s]}", "sessionId", "s1",
                                           "command", "echo", "args", "hi"));
  const char *tid = json_string_value(
      json_object_get(json_object_get(answer(id), "result"), "terminalId"));
  ok(tid != NULL, "terminal/create allowed by an allow rule");
  ok(json_array_size(H.audits) == 1 &&
         strcmp(audit_str(0, "decision"), "allow") == 0 &&
         strcmp(audit_str(0, "by"), "rule") == 0,
     "audited allow by rule");
  char *term_id = tid ? strdup(tid) : strdup("");
  for (int i = 0; i < 500 && !terminal_done(); i++)
    uv_run(&loop, UV_RUN_ONCE);
  ok(terminal_done(), "it ran to its end");
  id =
      request("terminal/wait_for_exit",
              json_pack("{s:s,s:s}", "sessionId", "s1", "terminalId", term_id));
  is_int(json_integer_value(json_object_get(
             json_object_get(answer(id), "result"), "exitCode")),
         0, "exit code 0");
  id = request("terminal/output", json_pack("{s:s,s:s}", "sessionId", "s1",
                                            "terminalId", term_id));
  is_str(json_string_value(
             json_object_get(json_object_get(answer(id), "result"), "output")),
         "hi\n", "its output");
  id = request("terminal/release", json_pack("{s:s,s:s}", "sessionId", "s1",
                                             "terminalId", term_id));
  ok(json_is_object(json_object_get(answer(id), "result")), "released");
  id = request("terminal/output", json_pack("{s:s,s:s}", "sessionId", "s1",
                                            "terminalId", term_id));
  is_int(error_code(id), -32602, "a released terminal is unknown");
  free(term_id);

  // An allow answer of this turn for the command (kind execute) covers
  // running it once, without a rule or a prompt; one of another kind
  // (search, switch_mode: they only look) does not.
  static const char *const kinds[] = {"execute", "search", "switch_mode", "s"};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(*kinds); k++) {
    reset();
    json_t *info =
        json_pack("{s:s,s:s,s:s,s:b}", "session", "s1", "kind", kinds[k],
                  "command", "true covered", "rawCommand", 1);
    client_approved(cl, H.conn, info, false);
    json_decref(info);
    id = request("terminal/create",
                 json_pack("{s:s,s:s,s:[s]}", "sessionId", "s1", "command",
                           "true", "args", "covered"));
    bool run = json_is_object(json_object_get(answer(id), "result"));
    ok(run == (k == 0) && json_array_size(H.asks) == (k == 0 ? 0u : 1u),
       "an allowed %s answer for the command %s", kinds[k],
       k == 0 ? "covers running it" : "does not cover running it");
    for (int i = 0; i < 500 && run && !terminal_done(); i++)
      uv_run(&loop, UV_RUN_ONCE);
  }

  // No rule: the person is asked; a reject refuses.
  reset();
  id = request("terminal/create",
               json_pack("{s:s,s:s,s:[s]}", "sessionId", "s1", "command",
                         "touch", "args", "made.txt"));
  json_t *ask = json_array_get(H.asks, 0);
  json_t *tc = json_object_get(json_object_get(ask, "params"), "toolCall");
  is_str(json_string_value(json_object_get(tc, "kind")), "execute",
         "an unasked command with no rule is asked");
  is_str(json_string_value(
             json_object_get(json_object_get(tc, "rawInput"), "command")),
         "touch made.txt", "showing the command");
  ok(client_answered(
         cl, H.conn,
         (uint64_t)json_integer_value(json_object_get(ask, "token")), false,
         "person"),
     "answered");
  is_int(error_code(id), -32001, "a reject refuses it");
  snprintf(p, sizeof(p), "%s/made.txt", proj);
  ok(!exists(p), "nothing ran");
}

int main(void) {
  snprintf(base, sizeof(base), "%s/acp-client-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(base))
    return 2;
  char p[600], home[300];
  snprintf(home, sizeof(home), "%s/home", base);
  snprintf(proj, sizeof(proj), "%s/proj", base);
  snprintf(out, sizeof(out), "%s/out", base);
  mkdir(home, 0755);
  mkdir(proj, 0755);
  mkdir(out, 0755);
  snprintf(p, sizeof(p), "%s/.git", proj); // the project root
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/sub", proj);
  mkdir(p, 0755);
  snprintf(p, sizeof(p), "%s/secret.txt", out);
  put(p, "secret!\n");
  snprintf(p, sizeof(p), "%s/link", proj);
  if (symlink(out, p) != 0)
    return 2;
  snprintf(p, sizeof(p), "%s/file-link", proj);
  char t[400];
  snprintf(t, sizeof(t), "%s/secret.txt", out);
  if (symlink(t, p) != 0)
    return 2;
  setenv("HOME", home, 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");

  uv_loop_init(&loop);
  struct acp_conn conn = {.name = "demo",
                          .serial = 7,
                          .cwd = proj,
                          .turn = 1,
                          .alive = true,
                          .answers = json_array()};
  H.conn = &conn;
  H.gate = gate_new();
  H.events = json_array();
  H.errors = json_array();
  H.audits = json_array();
  H.asks = json_array();
  cl = client_new(&loop, &host, NULL);

  test_read_inside();
  test_write_inside();
  test_approvals_kept();
  test_approvals_paths();
  test_escapes();
  test_swap();
  test_deny_and_plan();
  test_asked_write();
  test_held_write();
  test_terminal();

  client_conn_gone(cl, &conn);
  uv_run(&loop, UV_RUN_DEFAULT);
  client_free(cl);
  gate_free(H.gate);
  uv_loop_close(&loop);
  json_decref(conn.answers);
  json_decref(H.events);
  json_decref(H.errors);
  json_decref(H.audits);
  json_decref(H.asks);
  json_decref(H.last_args);
  char cmd[400];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
  if (system(cmd) != 0)
    return 2;
  return done_testing();
}
