// The rule parser (policy_rule_check, policy_rule_check_list, rules_parse
// through policy_new) and decisions under one fuzzed rule.
//
// Input: one rule text. It is compiled alone as an allow, an ask and a deny
// rule, in the default mode and in yolo, and the requests of fuzz_requests.h
// are decided: all of them without an edit atom in every combination; one
// with an edit atom, in one combination, for a quarter of the inputs (all
// picked by a hash of the input): deciding an edit costs about a thousand
// times more (path_match zeroes 64 KiB per call, and the protected-path
// check calls it ~120 times per edit). Properties:
//  * a rule refused by policy_rule_check is refused for every list, gets a
//    warning from policy_new and changes no decision; one refused only for
//    allow lists changes no decision there;
//  * requests that are opaque, hit the circuit breaker or edit a tier-1
//    protected file are never allowed, whatever the rule, list or yolo (also
//    when the rule is in the session memory);
//  * an ask or deny rule never makes a request allowed that was not already
//    allowed without it; an allow rule never denies;
//  * policy_pick_option answers allow with allow_once, deny with
//    reject_once, ask with nothing;
//  * the rule as a path specifier or a host pattern never crashes the path
//    and host matchers.

#include <string.h>

#include "fuzz.h"
#include "fuzz_requests.h"
#include "policy/path.h"
#include "policy/policy.h"
#include "policy/rules.h"

#define ROOT "/fuzz/p"
#define HOME "/fuzz/h"

static const char *const protect[] = {HOME "/.config/acp-broker/settings.json"};
static struct policy_request *reqs[FUZZ_NREQUESTS];
static struct policy *none[2]; // no rules: default mode, yolo
static enum policy_decision base[2][FUZZ_NREQUESTS];
static json_t *options;
static size_t edit_reqs[FUZZ_NREQUESTS], nedit;

static uint32_t hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

static struct policy *compile(const char *text, enum policy_list list,
                              bool yolo, size_t *nw) {
  struct policy_rule_text t = {text, list, "fuzz"};
  struct policy_input in = {.rules = &t,
                            .nrules = text ? 1 : 0,
                            .mode = POLICY_MODE_DEFAULT,
                            .yolo = yolo,
                            .root = ROOT,
                            .home = HOME,
                            .protect = protect,
                            .nprotect = 1};
  char **w = NULL;
  size_t n = 0;
  struct policy *p = policy_new(&in, &w, &n);
  FUZZ_CHECK(p != NULL, "policy_new returned NULL");
  for (size_t i = 0; i < n; i++) {
    FUZZ_CHECK(w[i] != NULL, "warning %zu NULL", i);
    free(w[i]);
  }
  free(w);
  *nw = n;
  return p;
}

static void check_result(const struct policy_result *res) {
  FUZZ_CHECK(res->decision == POLICY_ALLOW || res->decision == POLICY_ASK ||
                 res->decision == POLICY_DENY,
             "decision %d", (int)res->decision);
  FUZZ_CHECK(memchr(res->reason, '\0', sizeof(res->reason)) &&
                 memchr(res->rule, '\0', sizeof(res->rule)) &&
                 memchr(res->source, '\0', sizeof(res->source)),
             "unterminated result strings");
  enum policy_decision d = res->decision;
  const char *opt = policy_pick_option(options, &d);
  FUZZ_CHECK(d == res->decision, "pick_option changed %s to %s",
             fuzz_decision(res->decision), fuzz_decision(d));
  const char *want = d == POLICY_ALLOW ? "allow"
                     : d == POLICY_DENY ? "reject"
                                        : NULL;
  FUZZ_CHECK(want ? opt && strcmp(opt, want) == 0 : opt == NULL,
             "option %s for %s", opt ? opt : "(none)", fuzz_decision(d));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_requests_new(reqs, ROOT, HOME);
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++)
    if (fuzz_request_defs[i].edits)
      edit_reqs[nedit++] = i;
  json_t *params = fuzz_request_params(0, ROOT, HOME);
  options = json_incref(json_object_get(params, "options"));
  json_decref(params);
  for (int y = 0; y < 2; y++) {
    size_t nw;
    none[y] = compile(NULL, POLICY_LIST_ALLOW, y, &nw);
    for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
      struct policy_result res;
      policy_decide(none[y], NULL, reqs[i], &res);
      base[y][i] = res.decision;
      FUZZ_CHECK(!fuzz_request_defs[i].never_allow ||
                     res.decision != POLICY_ALLOW,
                 "request %zu allowed with no rules (yolo %d): %s", i, y,
                 res.reason);
    }
  }
  // The fixtures are what they claim: asked without rules, allowed by yolo.
  FUZZ_CHECK(base[0][0] == POLICY_ASK && base[1][0] == POLICY_ALLOW &&
                 base[0][5] == POLICY_ALLOW,
             "unexpected baseline");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';

  char err[512] = "";
  int rc = policy_rule_check(text, err, sizeof(err));
  FUZZ_CHECK(rc == 0 || rc == -1, "rc %d", rc);
  FUZZ_CHECK(rc == 0 || err[0], "refused without a reason");
  int rc_list[3];
  for (int l = 0; l < 3; l++) {
    char err2[512] = "";
    rc_list[l] = policy_rule_check_list(text, (enum policy_list)l, err2,
                                        sizeof(err2));
    FUZZ_CHECK(rc_list[l] == 0 || err2[0], "refused without a reason");
    FUZZ_CHECK(rc == 0 ? l == POLICY_LIST_ALLOW || rc_list[l] == 0
                       : rc_list[l] != 0,
               "check %d, check for list %d: %d", rc, l, rc_list[l]);
  }

  uint32_t h = hash(data, size);
  size_t e1 = (h >> 24) % 4 == 0 ? edit_reqs[h % nedit] : SIZE_MAX;
  int combo = (int)((h >> 16) % 6);
  for (int l = 0; l < 3; l++) {
    for (int y = 0; y < 2; y++) {
      size_t nw;
      struct policy *p = compile(text, (enum policy_list)l, y, &nw);
      FUZZ_CHECK(rc_list[l] == 0 || nw > 0, "refused rule without warning");
      for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
        if (fuzz_request_defs[i].edits &&
            !(i == e1 && combo == l * 2 + y))
          continue;
        struct policy_result res;
        policy_decide(p, NULL, reqs[i], &res);
        check_result(&res);
        enum policy_decision d = res.decision, b = base[y][i];
        FUZZ_CHECK(!fuzz_request_defs[i].never_allow || d != POLICY_ALLOW,
                   "request %zu allowed by %s (list %d, yolo %d): %s", i, text,
                   l, y, res.reason);
        FUZZ_CHECK(rc_list[l] == 0 || d == b,
                   "refused rule %s changed request %zu: %s -> %s", text, i,
                   fuzz_decision(b), fuzz_decision(d));
        FUZZ_CHECK(l == POLICY_LIST_ALLOW || d != POLICY_ALLOW ||
                       b == POLICY_ALLOW,
                   "list %d rule %s allowed request %zu: %s", l, text, i,
                   res.reason);
        FUZZ_CHECK(l != POLICY_LIST_ALLOW || d != POLICY_DENY ||
                       b == POLICY_DENY,
                   "allow rule %s denied request %zu: %s", text, i,
                   res.reason);
        if (l == POLICY_LIST_ALLOW && !y) {
          // The same rule remembered for the session.
          policy_decide(none[0], p, reqs[i], &res);
          check_result(&res);
          FUZZ_CHECK(!fuzz_request_defs[i].never_allow ||
                         res.decision != POLICY_ALLOW,
                     "request %zu allowed by memory %s: %s", i, text,
                     res.reason);
          FUZZ_CHECK(res.decision != POLICY_DENY || b == POLICY_DENY,
                     "memory %s denied request %zu", text, i);
        }
      }
      policy_free(p);
    }
  }

  // The text as a Read/Edit specifier and as a host pattern.
  for (int allow = 0; allow < 2; allow++) {
    char *pat = path_rule_pattern(text, ROOT, HOME, allow, err, sizeof(err));
    FUZZ_CHECK(!pat || pat[0] == '/', "pattern %s", pat);
    if (pat) {
      path_match(pat, ROOT "/src/a.ts", allow, !allow);
      path_match(pat, "/", allow, allow);
    }
    free(pat);
  }
  rules_host_match(text, "api.example.com");
  rules_glob(text, "mcp__github__create_issue", size & 1);
  free(text);
  return 0;
}
