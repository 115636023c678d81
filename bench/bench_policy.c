// The policy figures of `make bench`: decisions per second of the broker's
// own code, linked from build/libbroker.a.
//
//   bench_policy RULES.json REQUESTS.json ROOT SECONDS
//
// RULES.json is {"allow": [...], "ask": [...], "deny": [...]}; REQUESTS.json
// a list of session/request_permission params objects; ROOT the project
// root, whose .acp/settings.json holds the same rules (trusted: run
// `acp-broker trust --cwd ROOT` first, with the same HOME and XDG
// variables). Prints one JSON object:
//
//   policy: what decide() costs: policy_request_new (the shell command
//           parsed into atoms, or found in the shell cache; paths
//           resolved) + policy_decide + policy_request_free, on a policy
//           compiled once;
//   cold:   the same with the shell cache off (every command analysed);
//   match:  policy_decide alone, on the requests built once: the rules
//           applied through the compiled index;
//   scan:   the same with policy_decide_reference (every rule against
//           every atom, as before the index);
//   request: policy_request_new + policy_request_free alone (only with
//           BENCH_POLICY_ONLY=request);
//   gate:   what the broker does per request: gate_decide (the project's
//           settings files checked, the policy, the verdict as a C struct),
//           from the settings files;
//   asked:  what the broker does per asked request (counted per asked
//           request only): the gate, the pending entry kept (and freed),
//           the `permission` event's data packed (broker/prompt.h);
//           BENCH_POLICY_ONLY=asked_ref does the same the way it was done
//           before the prompt was packed from the verdict (its JSON);
//           asked_line and asked_line_ref: the same from the request's
//           line, as the broker meets it (the flat view; before, the line
//           also read as a tree for the prompt).
// Each loops over the requests for about SECONDS and counts decisions. One
// pass over the requests is one epoch (gate_epoch, path_cache_epoch): the
// broker starts one per event loop iteration, so that requests read
// together look at the settings files and resolve a path once.

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acp/jsonrpc.h"
#include "acp/reqview.h"
#include "broker/pending.h"
#include "broker/prompt.h"
#include "codec/jsonpack.h"
#include "policy/gate.h"
#include "policy/path.h"
#include "policy/policy.h"
#include "policy/policy_ref.h"
#include "policy/shcache.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static json_t *load(const char *path) {
  json_error_t err;
  json_t *j = json_load_file(path, 0, &err);
  if (!j) {
    fprintf(stderr, "bench_policy: %s:%d: %s\n", path, err.line, err.text);
    exit(1);
  }
  return j;
}

// BENCH_POLICY_PASSES=N: N passes over the requests instead of SECONDS,
// for instruction counts that do not depend on the machine's load
// (callgrind: the difference between two counts of passes is exact).
static long passes;

static bool more(double elapsed, long done, double seconds) {
  return passes ? done < passes : elapsed < seconds;
}

struct tally {
  double per_s;
  long n, decisions[3];
};

static struct policy *compile(json_t *rules, const char *root,
                              const char *home) {
  static const char *const lists[] = {"allow", "ask", "deny"};
  size_t n = 0;
  for (int l = 0; l < 3; l++)
    n += json_array_size(json_object_get(rules, lists[l]));
  struct policy_rule_text *t = calloc(n ? n : 1, sizeof(*t));
  size_t k = 0;
  for (int l = 0; l < 3; l++) {
    json_t *a = json_object_get(rules, lists[l]);
    for (size_t i = 0; i < json_array_size(a); i++)
      t[k++] =
          (struct policy_rule_text){json_string_value(json_array_get(a, i)),
                                    (enum policy_list)l, "bench"};
  }
  struct policy_input in = {.rules = t,
                            .nrules = n,
                            .mode = POLICY_MODE_DEFAULT,
                            .root = root,
                            .home = home};
  char **warnings = NULL;
  size_t nw = 0;
  struct policy *p = policy_new(&in, &warnings, &nw);
  for (size_t i = 0; i < nw; i++) {
    fprintf(stderr, "bench_policy: %s\n", warnings[i]);
    free(warnings[i]);
  }
  free(warnings);
  free(t);
  return p;
}

static struct tally run_policy(const struct policy *p, json_t *reqs,
                               const char *root, const char *home,
                               double seconds) {
  struct tally t = {0};
  size_t n = json_array_size(reqs);
  double t0 = now_s(), t1;
  static uint64_t epoch;
  do {
    path_cache_epoch(++epoch);
    for (size_t i = 0; i < n; i++) {
      struct policy_request *r =
          policy_request_new(json_array_get(reqs, i), root, home);
      struct policy_result res;
      policy_decide(p, NULL, r, &res);
      policy_request_free(r);
      t.decisions[res.decision]++;
    }
    t.n += (long)n;
    t1 = now_s();
  } while (more(t1 - t0, t.n / (long)(n ? n : 1), seconds));
  t.per_s = (double)t.n / (t1 - t0);
  return t;
}

// policy_request_new + policy_request_free alone: reading the request.
__attribute__((noinline)) static struct tally
run_request(json_t *reqs, const char *root, const char *home, double seconds) {
  struct tally t = {0};
  size_t n = json_array_size(reqs);
  double t0 = now_s(), t1;
  static uint64_t epoch;
  do {
    path_cache_epoch(++epoch);
    for (size_t i = 0; i < n; i++)
      policy_request_free(
          policy_request_new(json_array_get(reqs, i), root, home));
    t.n += (long)n;
    t1 = now_s();
  } while (more(t1 - t0, t.n / (long)(n ? n : 1), seconds));
  t.per_s = (double)t.n / (t1 - t0);
  return t;
}

static struct tally run_match(const struct policy *p, json_t *reqs,
                              const char *root, const char *home, bool scan,
                              double seconds) {
  struct tally t = {0};
  size_t n = json_array_size(reqs);
  struct policy_request **r = calloc(n ? n : 1, sizeof(*r));
  for (size_t i = 0; i < n; i++)
    r[i] = policy_request_new(json_array_get(reqs, i), root, home);
  double t0 = now_s(), t1;
  do {
    for (size_t i = 0; i < n; i++) {
      struct policy_result res;
      if (scan)
        policy_decide_reference(p, NULL, r[i], &res);
      else
        policy_decide(p, NULL, r[i], &res);
      t.decisions[res.decision]++;
    }
    t.n += (long)n;
    t1 = now_s();
  } while (more(t1 - t0, t.n / (long)(n ? n : 1), seconds));
  t.per_s = (double)t.n / (t1 - t0);
  for (size_t i = 0; i < n; i++)
    policy_request_free(r[i]);
  free(r);
  return t;
}

static struct tally run_gate(json_t *reqs, const char *root, double seconds) {
  struct tally t = {0};
  struct gate *g = gate_new();
  size_t n = json_array_size(reqs);
  double t0 = now_s(), t1;
  uint64_t epoch = 0;
  do {
    gate_epoch(g, ++epoch);
    for (size_t i = 0; i < n; i++) {
      struct gate_verdict v;
      gate_decide(g, "bench", "bench-session-1", root, json_array_get(reqs, i),
                  &v);
      t.decisions[v.decision]++;
      gate_verdict_clear(&v);
    }
    t.n += (long)n;
    t1 = now_s();
  } while (more(t1 - t0, t.n / (long)(n ? n : 1), seconds));
  t.per_s = (double)t.n / (t1 - t0);
  gate_free(g);
  return t;
}

// An asked request as the broker handles it (broker.c asked()): the gate,
// the pending entry (what it keeps, and freed as when it is answered) and
// the `permission` event's data packed (into a buffer reused). ref: the
// way before the prompt was packed from the struct (the verdict's JSON,
// the event's data built as JSON and packed, the kept JSON trimmed), as
// the broker's own prompts still do. Counts only the asked requests.
static struct tally run_asked(json_t *reqs, const char *root, double seconds,
                              bool ref) {
  struct tally t = {0};
  struct gate *g = gate_new();
  struct pending pend;
  pending_init(&pend, 16);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  // The requests the gate asks about, found once (this also loads the
  // settings, as run_gate's first pass does).
  size_t n = json_array_size(reqs), nasked = 0;
  json_t **asked = calloc(n ? n : 1, sizeof(*asked));
  gate_epoch(g, 1);
  for (size_t i = 0; i < n; i++) {
    struct gate_verdict v;
    gate_decide(g, "bench", "bench-session-1", root, json_array_get(reqs, i),
                &v);
    if (v.decision == POLICY_ASK)
      asked[nasked++] = json_array_get(reqs, i);
    gate_verdict_clear(&v);
  }
  double t0 = now_s(), t1;
  uint64_t epoch = 1;
  long passes_done = 0;
  do {
    gate_epoch(g, ++epoch);
    for (size_t i = 0; i < nasked; i++) {
      json_t *params = asked[i];
      struct gate_verdict v;
      gate_decide(g, "bench", "bench-session-1", root, params, &v);
      t.decisions[v.decision]++;
      t.n++;
      json_t *tc = json_object_get(params, "toolCall");
      json_t *options = json_object_get(params, "options");
      const char *sid = json_string_value(json_object_get(params, "sessionId"));
      const char *tcid = json_string_value(json_object_get(tc, "toolCallId"));
      uint64_t token =
          pending_add(&pend, NULL, json_integer((json_int_t)i), strdup(sid),
                      strdup(tcid), json_incref(options), 0);
      sb.size = 0;
      if (ref) {
        json_t *info = gate_verdict_info(&v);
        v.info = NULL;
        gate_verdict_clear(&v);
        json_object_set_new(info, "rawCommand", json_true());
        pending_find(&pend, token)->info = info;
        json_t *data = prompt_data_json(token, "bench", params, info);
        jsonpack_pack(&pk, data);
        json_decref(data);
        prompt_info_trim(info);
      } else {
        struct pending_entry *e = pending_find(&pend, token);
        e->kept = prompt_keep(&v, true);
        prompt_pack(&pk, token, "bench", sid, tc, options, &v);
        gate_verdict_clear(&v);
      }
      struct pending_entry e;
      pending_take(&pend, token, &e);
      pending_entry_clear(&e);
    }
    t1 = now_s();
  } while (more(t1 - t0, ++passes_done, seconds));
  t.per_s = (double)t.n / (t1 - t0);
  free(asked);
  msgpack_sbuffer_destroy(&sb);
  pending_free(&pend);
  gate_free(g);
  return t;
}

// The same as the broker meets an asked request's line (acp.c with the
// flat view on, its default): the line read into a view (reqview_parse),
// the gate on its toolCall and options, then the pending entry and the
// event packed from the view. ref: as before, the line read again as a
// tree (jsonrpc_parse) for the prompt, built from the verdict's JSON.
static struct tally run_asked_line(json_t *reqs, const char *root,
                                   double seconds, bool ref) {
  struct tally t = {0};
  struct gate *g = gate_new();
  struct pending pend;
  pending_init(&pend, 16);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  size_t n = json_array_size(reqs), nasked = 0;
  char **lines = calloc(n ? n : 1, sizeof(*lines));
  gate_epoch(g, 1);
  for (size_t i = 0; i < n; i++) {
    struct gate_verdict v;
    json_t *params = json_array_get(reqs, i);
    gate_decide(g, "bench", "bench-session-1", root, params, &v);
    if (v.decision == POLICY_ASK) {
      json_t *msg =
          json_pack("{s:s,s:I,s:s,s:O}", "jsonrpc", "2.0", "id", (json_int_t)i,
                    "method", "session/request_permission", "params", params);
      lines[nasked++] = json_dumps(msg, JSON_COMPACT);
      json_decref(msg);
    }
    gate_verdict_clear(&v);
  }
  double t0 = now_s(), t1;
  uint64_t epoch = 1;
  long passes_done = 0;
  do {
    gate_epoch(g, ++epoch);
    for (size_t i = 0; i < nasked; i++) {
      struct reqview rv;
      if (reqview_parse(lines[i], strlen(lines[i]), &rv) != 0) {
        fprintf(stderr, "bench_policy: the view declines a line\n");
        exit(1);
      }
      struct gate_options o = {(const char *const *)rv.option_id_z,
                               (const char *const *)rv.option_kind_z,
                               rv.noptions};
      struct gate_verdict v;
      gate_decide_tc(g, "bench", rv.sid_z, root, rv.tc, &o, &v);
      t.decisions[v.decision]++;
      t.n++;
      uint64_t token;
      sb.size = 0;
      if (ref) {
        struct jsonrpc_msg m;
        char err[200];
        jsonrpc_parse(lines[i], strlen(lines[i]), &m, err, sizeof(err));
        json_t *tc = json_object_get(m.params, "toolCall");
        token = pending_add(
            &pend, NULL, json_deep_copy(rv.id),
            strdup(json_string_value(json_object_get(m.params, "sessionId"))),
            strdup(json_string_value(json_object_get(tc, "toolCallId"))),
            json_incref(json_object_get(m.params, "options")), 0);
        json_t *info = gate_verdict_info(&v);
        v.info = NULL;
        gate_verdict_clear(&v);
        json_object_set_new(info, "rawCommand", json_true());
        pending_find(&pend, token)->info = info;
        json_t *data = prompt_data_json(token, "bench", m.params, info);
        jsonpack_pack(&pk, data);
        json_decref(data);
        prompt_info_trim(info);
        jsonrpc_msg_free(&m);
      } else {
        token = pending_add_of(
            &pend, NULL, json_deep_copy(rv.id), strdup(rv.sid_z),
            strdup(json_string_value(json_object_get(rv.tc, "toolCallId"))),
            (const char *const *)rv.option_id_z,
            (const char *const *)rv.option_kind_z, rv.noptions, 0);
        struct pending_entry *e = pending_find(&pend, token);
        e->kept = prompt_keep(&v, true);
        prompt_pack_view(&pk, token, "bench", &rv, &v);
        gate_verdict_clear(&v);
      }
      struct pending_entry e;
      pending_take(&pend, token, &e);
      pending_entry_clear(&e);
      reqview_clear(&rv);
    }
    t1 = now_s();
  } while (more(t1 - t0, ++passes_done, seconds));
  t.per_s = (double)t.n / (t1 - t0);
  for (size_t i = 0; i < nasked; i++)
    free(lines[i]);
  free(lines);
  msgpack_sbuffer_destroy(&sb);
  pending_free(&pend);
  gate_free(g);
  return t;
}

static json_t *tally_json(const struct tally *t) {
  return json_pack("{s:f,s:I,s:I,s:I,s:I}", "per_s", t->per_s, "n",
                   (json_int_t)t->n, "allow", (json_int_t)t->decisions[0],
                   "ask", (json_int_t)t->decisions[1], "deny",
                   (json_int_t)t->decisions[2]);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr,
            "usage: bench_policy RULES.json REQUESTS.json ROOT SECONDS\n");
    return 2;
  }
  json_t *rules = load(argv[1]), *reqs = load(argv[2]);
  const char *root = argv[3];
  const char *home = getenv("HOME") ? getenv("HOME") : "/";
  double seconds = atof(argv[4]);
  struct policy *p = compile(rules, root, home);
  // BENCH_POLICY_ONLY=policy|cold|match|request|gate: one part (for perf
  // record).
  const char *only = getenv("BENCH_POLICY_ONLY");
  if (getenv("BENCH_POLICY_PASSES"))
    passes = atol(getenv("BENCH_POLICY_PASSES"));
  if (only) {
    struct tally t;
    if (strcmp(only, "gate") == 0)
      t = run_gate(reqs, root, seconds);
    else if (strcmp(only, "asked") == 0 || strcmp(only, "asked_ref") == 0)
      t = run_asked(reqs, root, seconds, strcmp(only, "asked_ref") == 0);
    else if (strcmp(only, "asked_line") == 0 ||
             strcmp(only, "asked_line_ref") == 0)
      t = run_asked_line(reqs, root, seconds,
                         strcmp(only, "asked_line_ref") == 0);
    else if (strcmp(only, "match") == 0)
      t = run_match(p, reqs, root, home, false, seconds);
    else if (strcmp(only, "request") == 0)
      t = run_request(reqs, root, home, seconds);
    else if (strcmp(only, "cold") == 0) {
      shcache_enable(0);
      t = run_policy(p, reqs, root, home, seconds);
      shcache_enable(1);
    } else
      t = run_policy(p, reqs, root, home, seconds);
    // The count, to turn a profile's totals into costs per decision.
    json_t *out = tally_json(&t);
    char *s = json_dumps(out, JSON_COMPACT);
    puts(s);
    free(s);
    json_decref(out);
    policy_free(p);
    json_decref(rules);
    json_decref(reqs);
    return 0;
  }
  struct tally tm = run_match(p, reqs, root, home, false, seconds / 2);
  struct tally ts = run_match(p, reqs, root, home, true, seconds / 2);
  shcache_enable(0);
  run_policy(p, reqs, root, home, seconds / 10); // warm-up
  struct tally tc = run_policy(p, reqs, root, home, seconds);
  shcache_enable(1);
  run_policy(p, reqs, root, home, seconds / 10);
  struct tally tp = run_policy(p, reqs, root, home, seconds);
  run_gate(reqs, root, seconds / 10);
  struct tally tg = run_gate(reqs, root, seconds);
  struct tally ta = run_asked(reqs, root, seconds / 2, false);
  json_t *out = json_pack(
      "{s:o,s:o,s:o,s:o,s:o,s:o,s:I}", "policy", tally_json(&tp), "cold",
      tally_json(&tc), "match", tally_json(&tm), "scan", tally_json(&ts),
      "gate", tally_json(&tg), "asked", tally_json(&ta), "rules",
      (json_int_t)(json_array_size(json_object_get(rules, "allow")) +
                   json_array_size(json_object_get(rules, "ask")) +
                   json_array_size(json_object_get(rules, "deny"))));
  char *s = json_dumps(out, JSON_COMPACT);
  puts(s);
  free(s);
  json_decref(out);
  policy_free(p);
  shcache_clear();
  path_cache_free();
  json_decref(rules);
  json_decref(reqs);
  return 0;
}
