// reqview: a session/request_permission line read into a flat view
// (acp/reqview.h) reads what the tree of jsonrpc_parse reads, or declines.
// For every request of the conformance, extra, adversarial and fail-closed
// sets and of the fuzz corpus, written as a line in several ways, and for
// every one-byte change of a few lines: when the view takes the line, the
// tree takes it too with the same id, sessionId, toolCall and options; the
// request read from the view's toolCall equals the one read from params
// (request_same, request_ref.c); the gate's verdict from the view
// (gate_decide_tc) equals the one from params (gate_decide): the decision,
// the option answered, the verdict's JSON, the `decided` event's bytes and
// the audit entry. Shapes the view does not model (a key twice, escapes,
// other members) are declined.

#include "acp/reqview.h"
#include "base/mem.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acp/jsonrpc.h"
#include "broker/verdict.h"
#include "check.h"
#include "codec/jsonfast.h"
#include "fixtures.h"
#include "policy/gate.h"
#include "policy/request.h"
#include "request_ref.c"

// Two gates: a verdict borrows from its gate until the gate's next call.
static struct gate *G, *G2;
static const char *CWD, *HOME_DIR;
static size_t lines, viewed, mismatched, requests, verdicts;

static void differs(const char *what, const char *why) {
  if (mismatched++ < 20)
    ok(false, "%s: %s", what, why);
}

static bool str_eq(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

static bool jstr_is(const json_t *j, const struct reqview_str *s) {
  return json_is_string(j) && json_string_length(j) == s->n &&
         memcmp(json_string_value(j), s->s, s->n) == 0;
}

// Why params (the tree's) and the view differ, or NULL.
static const char *params_differ(const json_t *params,
                                 const struct reqview *v) {
  if (!json_is_object(params) || json_object_size(params) != 3)
    return "params has other members";
  if (!jstr_is(json_object_get(params, "sessionId"), &v->sid) ||
      strlen(v->sid_z) != v->sid.n)
    return "sessionId";
  if (!json_equal(json_object_get(params, "toolCall"), v->tc))
    return "toolCall";
  const json_t *opts = json_object_get(params, "options");
  if (!json_is_array(opts) || json_array_size(opts) != v->noptions)
    return "the number of options";
  for (size_t i = 0; i < v->noptions; i++) {
    const json_t *o = json_array_get(opts, i);
    if (json_object_size(o) != 3 ||
        !jstr_is(json_object_get(o, "optionId"), &v->options[i].id) ||
        !jstr_is(json_object_get(o, "name"), &v->options[i].name) ||
        !jstr_is(json_object_get(o, "kind"), &v->options[i].kind) ||
        !str_eq(json_string_value(json_object_get(o, "optionId")),
                v->option_id_z[i]) ||
        !str_eq(json_string_value(json_object_get(o, "kind")),
                v->option_kind_z[i]))
      return "an option";
  }
  return NULL;
}

static const char *audit_differs(const struct audit_entry *a,
                                 const struct audit_entry *b) {
  if (!str_eq(a->root, b->root) || !str_eq(a->agent, b->agent) ||
      !str_eq(a->session, b->session) ||
      !str_eq(a->tool_call_id, b->tool_call_id) || !str_eq(a->kind, b->kind) ||
      !str_eq(a->title, b->title) || !str_eq(a->command, b->command) ||
      !str_eq(a->decision, b->decision) || !str_eq(a->by, b->by) ||
      !str_eq(a->rule, b->rule) || !str_eq(a->source, b->source) ||
      !str_eq(a->outcome, b->outcome) || !str_eq(a->option_id, b->option_id) ||
      a->wait_ms != b->wait_ms || a->npaths != b->npaths ||
      ((a->paths || b->paths) && !json_equal(a->paths, b->paths)))
    return "the audit entry";
  for (size_t i = 0; i < a->npaths; i++)
    if (!str_eq(a->path_list[i], b->path_list[i]))
      return "the audit entry's paths";
  return NULL;
}

// The gate's verdict on params and on the view's toolCall and options.
static const char *verdict_differs(json_t *params, const struct reqview *rv) {
  struct gate_verdict a, b;
  gate_decide(G, "ag", "s", CWD, params, &a);
  struct gate_options o = {(const char *const *)rv->option_id_z,
                           (const char *const *)rv->option_kind_z,
                           rv->noptions};
  gate_decide_tc(G2, "ag", "s", CWD, rv->tc, &o, &b);
  verdicts++;
  const char *why = NULL;
  if (a.decision != b.decision || !str_eq(a.option_id, b.option_id))
    why = "the decision or its option";
  msgpack_sbuffer sa, sb;
  msgpack_sbuffer_init(&sa);
  msgpack_sbuffer_init(&sb);
  msgpack_packer pa, pb;
  msgpack_packer_init(&pa, &sa, msgpack_sbuffer_write);
  msgpack_packer_init(&pb, &sb, msgpack_sbuffer_write);
  verdict_pack_decided(&pa, &a, true, NULL);
  verdict_pack_decided(&pb, &b, true, NULL);
  if (!why && (sa.size != sb.size || memcmp(sa.data, sb.data, sa.size) != 0))
    why = "the decided event";
  msgpack_sbuffer_destroy(&sa);
  msgpack_sbuffer_destroy(&sb);
  struct audit_entry ea, eb;
  verdict_audit(&a, a.decision_name, a.by, a.option_id, 0, &ea);
  verdict_audit(&b, b.decision_name, b.by, b.option_id, 0, &eb);
  if (!why)
    why = audit_differs(&ea, &eb);
  if (!why && !json_equal(gate_verdict_info(&a), gate_verdict_info(&b)))
    why = "the verdict's JSON";
  // The broker holds an approval to the command when the request says it
  // is rawInput.command (a string or an argv) as its tree does.
  json_t *raw = json_object_get(
      json_object_get(json_object_get(params, "toolCall"), "rawInput"),
      "command");
  bool is_raw = json_is_string(raw) || json_is_array(raw);
  if (!why &&
      (!a.req || !b.req || policy_request_raw_command(a.req) != is_raw ||
       policy_request_raw_command(b.req) != is_raw))
    why = "rawInput.command's presence";
  gate_verdict_clear(&a);
  gate_verdict_clear(&b);
  return why;
}

// Reads line both ways; returns whether the view took it.
static bool check_line(const char *line, size_t len, const char *what) {
  struct reqview v;
  lines++;
  if (reqview_parse(line, len, &v) != 0)
    return false;
  viewed++;
  struct jsonrpc_msg m;
  char err[200], why[1200];
  const char *d = NULL;
  if (jsonrpc_parse(line, len, &m, err, sizeof(err)) != 0) {
    snprintf(why, sizeof(why), "the tree refuses it: %s", err);
    d = why;
  } else if (m.kind != JSONRPC_REQUEST ||
             strcmp(m.method, "session/request_permission") != 0) {
    d = "not a permission request";
  } else if (!jsonrpc_id_equal(m.id, v.id)) {
    d = "the id";
  } else {
    d = params_differ(m.params, &v);
  }
  if (!d) {
    struct request a, b;
    request_init(&a, m.params, CWD, HOME_DIR);
    request_init_tc(&b, v.tc, CWD, HOME_DIR);
    requests++;
    if (!request_same(&a, &b, why, sizeof(why)))
      d = why;
    request_clear(&a);
    request_clear(&b);
  }
  if (!d)
    d = verdict_differs(m.params, &v);
  if (d)
    differs(what, d);
  jsonrpc_msg_free(&m);
  reqview_clear(&v);
  return true;
}

// params as lines: compact, indented, keys sorted, a string id, no
// "jsonrpc"; returns how many the view took.
static size_t check_params(const json_t *params, const char *what) {
  static const size_t flags[] = {JSON_COMPACT, JSON_INDENT(1),
                                 JSON_COMPACT | JSON_SORT_KEYS};
  size_t took = 0;
  for (size_t f = 0; f < 5; f++) {
    json_t *msg = json_pack("{s:s,s:I,s:s,s:O}", "jsonrpc", "2.0", "id",
                            (json_int_t)(f * 1000 + 7), "method",
                            "session/request_permission", "params", params);
    if (f == 3)
      json_object_set_new(msg, "id", json_string("req-3"));
    if (f == 4)
      json_object_del(msg, "jsonrpc");
    char *text = json_dumps(msg, f < 3 ? flags[f] : JSON_COMPACT);
    if (text)
      took += check_line(text, strlen(text), what);
    free(text);
    json_decref(msg);
  }
  return took;
}

static void view_fixture(const json_t *c, const char *what, void *ud) {
  size_t *n = ud;
  const json_t *params = json_object_get(c, "request");
  if (params) {
    n[1] += check_params(params, what);
    n[0]++;
  }
}

static void test_fixtures(void) {
  size_t n[2] = {0, 0}; // cases, lines taken
  each_fixture(view_fixture, n);
  size_t cases = n[0], took = n[1];
  ok(cases == 1015, "%zu conformance requests", cases);
  // Most are of the modelled shape: the comparison is not vacuous.
  ok(took > cases * 3, "the view took %zu of %zu lines", took, cases * 5);
  DIR *d = opendir("tests/fuzz/corpus/request");
  struct dirent *e;
  size_t corpus = 0;
  while (d && (e = readdir(d)) != NULL) {
    char path[512];
    snprintf(path, sizeof(path), "tests/fuzz/corpus/request/%s", e->d_name);
    json_t *params = e->d_name[0] == '.' ? NULL : json_load_file(path, 0, NULL);
    if (params) {
      check_params(params, path);
      corpus++;
    }
    json_decref(params);
  }
  if (d)
    closedir(d);
  ok(corpus > 0, "%zu requests of the fuzz corpus", corpus);
}

// The bench agent's line (the usual shape) is taken.
static const char bench_line[] =
    "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"session/"
    "request_permission\",\"params\":{\"sessionId\":\"s\","
    "\"toolCall\":{\"toolCallId\":\"call-42\",\"title\":\"git status\","
    "\"kind\":\"execute\",\"rawInput\":{\"command\":\"git status\","
    "\"bench_t_ns\":123456789}},\"options\":["
    "{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":"
    "\"allow_once\"},{\"optionId\":\"reject\",\"name\":\"Reject\","
    "\"kind\":\"reject_once\"}]}}\n";

static void test_shapes(void) {
  ok(check_line(bench_line, strlen(bench_line), "bench"), "the bench line");
  struct reqview v;
  ok(reqview_parse(bench_line, strlen(bench_line), &v) == 0 &&
         v.noptions == 2 && strcmp(v.sid_z, "s") == 0 &&
         json_integer_value(v.id) == 42 &&
         strcmp(v.option_id_z[1], "reject") == 0 &&
         strcmp(v.option_kind_z[0], "allow_once") == 0,
     "its fields");
  reqview_clear(&v);
  // Declined: the tree reads these differently (a key twice: the last one)
  // or the view does not model them.
  static const struct {
    const char *line, *what;
  } no[] = {
      {"{\"id\":1,\"id\":2,\"method\":\"session/request_permission\","
       "\"params\":{\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{"
       "\"optionId\":\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "id twice"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"toolCall\":{\"kind\":\"x\"},"
       "\"options\":[{\"optionId\":\"a\",\"name\":\"A\",\"kind\":"
       "\"allow_once\"}]}}",
       "toolCall twice"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"optionId\":\"b\",\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "optionId twice"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\\u0041\",\"toolCall\":{},\"options\":[{"
       "\"optionId\":\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "an escape"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\xc3\xa9\",\"toolCall\":{},\"options\":[{"
       "\"optionId\":\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "UTF-8 beyond ASCII"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"name\":\"A\",\"kind\":\"allow_once\",\"_meta\":{}}]}}",
       "an option's other member"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"name\":\"A\",\"kind\":\"allow_once\"}],\"_meta\":{}}}",
       "params' other member"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[]}}",
       "no options"},
      {"{\"id\":1.5,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "a real id"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{\"a\":\"\xff\"},\"options\":[{"
       "\"optionId\":\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}]}}",
       "a toolCall json_loadb refuses"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"name\":\"A\",\"kind\":\"allow_once\"}]}} x",
       "trailing text"},
      {"{\"id\":1,\"method\":\"session/request_permission\",\"params\":{"
       "\"sessionId\":\"s\",\"toolCall\":{},\"options\":[{\"optionId\":\"a\","
       "\"name\":\"A\",\"kind\":\"allow_once\"}]},\"result\":1}",
       "a result"},
      {"{\"jsonrpc\":\"2.1\",\"id\":1,\"method\":\"session/"
       "request_permission\",\"params\":{\"sessionId\":\"s\",\"toolCall\":{},"
       "\"options\":[{\"optionId\":\"a\",\"name\":\"A\",\"kind\":"
       "\"allow_once\"}]}}",
       "another version"},
  };
  for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
    ok(reqview_parse(no[i].line, strlen(no[i].line), &v) != 0, "declined: %s",
       no[i].what);
    reqview_clear(&v);
  }
  // Deeper than the view goes: the tree.
  char deep[4096];
  size_t n = (size_t)snprintf(deep, sizeof(deep),
                              "{\"id\":1,\"method\":\"session/"
                              "request_permission\",\"params\":{\"sessionId\":"
                              "\"s\",\"options\":[{\"optionId\":\"a\",\"name\":"
                              "\"A\",\"kind\":\"allow_once\"}],\"toolCall\":{"
                              "\"a\":");
  size_t head = n;
  for (int depth = JSONFAST_MAX_DEPTH - 2; depth <= JSONFAST_MAX_DEPTH + 2;
       depth++) {
    n = head;
    for (int i = 0; i < depth; i++)
      deep[n++] = '[';
    for (int i = 0; i < depth; i++)
      deep[n++] = ']';
    n += (size_t)snprintf(deep + n, sizeof(deep) - n, "}}}");
    check_line(deep, n, "deep");
  }
  n = head;
  for (int i = 0; i < 2 * JSONFAST_MAX_DEPTH; i++)
    deep[n++] = '[';
  for (int i = 0; i < 2 * JSONFAST_MAX_DEPTH; i++)
    deep[n++] = ']';
  n += (size_t)snprintf(deep + n, sizeof(deep) - n, "}}}");
  ok(reqview_parse(deep, n, &v) != 0, "declined: nested %d deep",
     2 * JSONFAST_MAX_DEPTH + 1);
  reqview_clear(&v);
}

// Every byte of a few lines changed to each of a set of bytes, deleted, or
// doubled: whatever the view takes, it reads as the tree does.
static void test_mutations(void) {
  static const char subs[] = "\"\\{}[],: a0-.e\x01\x7f\x80\xc3\xff";
  const char *bases[] = {
      bench_line,
      "{\"id\":\"x\",\"method\":\"session/request_permission\",\"params\":{"
      "\"options\":[{\"kind\":\"reject_always\",\"optionId\":\"r\",\"name\":"
      "\"R\"},{\"optionId\":\"a\",\"name\":\"A\",\"kind\":\"allow_once\"}],"
      "\"sessionId\":\"s\",\"toolCall\":{\"kind\":\"edit\",\"rawInput\":{"
      "\"file_path\":\"/p/a\",\"content\":\"x\\n\"},\"locations\":[{"
      "\"path\":\"/p/a\"}],\"toolCallId\":\"t1\"}}}",
  };
  size_t took = 0;
  char buf[1024];
  for (size_t b = 0; b < sizeof(bases) / sizeof(*bases); b++) {
    size_t n = strlen(bases[b]);
    for (size_t i = 0; i < n; i++) {
      for (size_t s = 0; s < sizeof(subs) - 1 + 2; s++) {
        size_t m = 0;
        memcpy(buf, bases[b], i);
        m = i;
        if (s < sizeof(subs) - 1)
          buf[m++] = subs[s];
        else if (s == sizeof(subs) - 1) // deleted
          ;
        else { // doubled
          buf[m++] = bases[b][i];
          buf[m++] = bases[b][i];
        }
        memcpy(buf + m, bases[b] + i + 1, n - i - 1);
        m += n - i - 1;
        took += check_line(buf, m, "a changed byte");
      }
    }
  }
  ok(took > 0, "the view took %zu changed lines", took);
}

int main(void) {
  // As in the broker: jansson through the cache, the toolCall's tree in
  // the arena (base/mem.h).
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  char tmpl[] = "/tmp/test_reqview.XXXXXX";
  char *t = mkdtemp(tmpl);
  ok(t != NULL, "a temp dir");
  if (!t)
    return done_testing();
  char p[256], h[256];
  snprintf(p, sizeof(p), "%s/p", t);
  snprintf(h, sizeof(h), "%s/h", t);
  mkdir(p, 0700);
  mkdir(h, 0700);
  setenv("HOME", h, 1);
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");
  CWD = p;
  HOME_DIR = h;
  G = gate_new();
  G2 = gate_new();
  test_shapes();
  test_fixtures();
  test_mutations();
  ok(mismatched == 0,
     "%zu lines, %zu taken by the view: requests (%zu) and verdicts (%zu) "
     "equal the tree's (%zu differ)",
     lines, viewed, requests, verdicts, mismatched);
  gate_free(G);
  gate_free(G2);
  is_size(mem_arena_live(), 0, "every toolCall's tree gave its blocks back");
  mem_cache_release();
  rmdir(p);
  rmdir(h);
  rmdir(t);
  return done_testing();
}
