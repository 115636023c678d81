// The compiled policy against the reference engine: policy_decide (rules
// found through the index, shell analyses from the cache) must decide
// exactly as policy_decide_reference (every rule matched against every
// atom, in order) on a fresh analysis (the cache bypassed).
//
// The pool: every rule and request of the conformance sets
// (tests/fixtures/policy*.jsonl: conformance, extra, adversarial,
// fail-closed; {P} and {H} replaced) and of fuzz_requests.h. Input: a first
// byte (mode, yolo, a session memory), then lines:
//   a TEXT / s TEXT / d TEXT   an allow / ask / deny rule
//   m TEXT                     a rule remembered for the session (allow)
//   c TEXT                     a Bash request running TEXT
//   r TEXT / e TEXT            a Read / an Edit of the path TEXT
//   p XY                       pool rule (XY) % pool size, list by X
//   q XY                       pool request (XY) % pool size
// and, picked by a hash of the input, up to 48 more pool rules and 6 pool
// requests. Every request is decided both ways (policy_decide twice: the
// second time with the keys the policy kept; then twice more on a new
// request of the same params: what was kept, then the result kept); the
// results (decision, by, reason, rule, source) and the atoms shown to the
// person must be equal.

#include <jansson.h>
#include <string.h>

#include "fuzz.h"
#include "fuzz_requests.h"
#include "policy/policy.h"
#include "policy/policy_ref.h"
#include "policy/shcache.h"

#define ROOT "/fuzz/p"
#define HOME "/fuzz/h"
#define MAX_RULES 256
#define MAX_REQS 24

struct pool_rule {
  char *text;
  enum policy_list list;
};

static struct pool_rule *rules;
static size_t nrules, caprules;
static json_t **reqs;
static size_t nreqs, capreqs;
static const char *const protect[] = {HOME "/.config/acp-broker/settings.json"};

static void add_rule(const char *text, enum policy_list list) {
  for (size_t i = 0; i < nrules; i++)
    if (rules[i].list == list && strcmp(rules[i].text, text) == 0)
      return;
  if (nrules == caprules) {
    caprules = caprules ? 2 * caprules : 256;
    rules = realloc(rules, caprules * sizeof(*rules));
  }
  rules[nrules++] = (struct pool_rule){strdup(text), list};
}

static void add_req(json_t *params) {
  if (nreqs == capreqs) {
    capreqs = capreqs ? 2 * capreqs : 256;
    reqs = realloc(reqs, capreqs * sizeof(*reqs));
  }
  reqs[nreqs++] = params;
}

// The rules of every settings object in a case's files.
static void case_rules(json_t *files) {
  static const char *const lists[] = {"allow", "ask", "deny"};
  const char *k;
  json_t *v;
  json_object_foreach(files, k, v) {
    json_t *perm = json_object_get(v, "permissions");
    for (int l = 0; l < 3; l++) {
      json_t *a = json_object_get(perm, lists[l]), *r;
      size_t i;
      json_array_foreach(a, i, r) if (json_is_string(r))
          add_rule(json_string_value(r), (enum policy_list)l);
    }
  }
}

static void load_fixture(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "fuzz_policy_diff: %s: cannot open (run from the repo)\n",
            path);
    abort();
  }
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) > 0) {
    json_t *c = json_loads(line, 0, NULL);
    if (!c)
      continue;
    case_rules(json_object_get(c, "files"));
    json_t *rq = json_object_get(c, "request");
    if (json_is_object(rq)) {
      char *s = json_dumps(rq, JSON_COMPACT);
      char *t = fuzz_subst(s, ROOT, HOME);
      json_t *p = json_loads(t, 0, NULL);
      if (p)
        add_req(p);
      free(s);
      free(t);
    }
    json_decref(c);
  }
  free(line);
  fclose(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  (void)fuzz_requests_new; // fuzz_requests.h: the params are used here
  static const char *const files[] = {
      "tests/fixtures/policy.jsonl", "tests/fixtures/policy-extra.jsonl",
      "tests/fixtures/policy-adversarial.jsonl",
      "tests/fixtures/policy-failclosed.jsonl"};
  for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
    load_fixture(files[i]);
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++)
    add_req(fuzz_request_params(i, ROOT, HOME));
  static const char *const extra[] = {
      "Bash(git *)",   "Bash(git log:*)", "Bash(/usr/bin/git status)",
      "Bash(GIT *)",   "Bash(npm run *)", "Bash(npm run build)",
      "Bash",          "Bash(*)",         "Bash(ls)",
      "Bash(rm -rf *)", "Read(~/.ssh/**)", "Edit(//etc/**)",
      "Edit(src/**)",  "Read(*.env)",     "Edit(/SRC/**)",
      "WebFetch(domain:github.com)",      "WebFetch(domain:*.github.com)",
      "WebFetch",      "WebSearch",       "mcp__github",
      "mcp__github__get_issue",           "mcp__*",
      "*",             "Kind(switch_mode)", "Kind(other)",
      "Kind(execute)", "Read",            "Edit"};
  for (size_t i = 0; i < sizeof(extra) / sizeof(*extra); i++)
    for (int l = 0; l < 3; l++)
      add_rule(extra[i], (enum policy_list)l);
  fprintf(stderr, "fuzz_policy_diff: %zu pool rules, %zu pool requests\n",
          nrules, nreqs);
  return 0;
}

static uint32_t hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

static uint32_t next_rand(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static json_t *tool_request(const char *kind, const char *key, const char *v) {
  return json_pack("{s:s,s:[{s:s,s:s,s:s},{s:s,s:s,s:s}],s:{s:s,s:s,s:s,s:{s:"
                   "s}}}",
                   "sessionId", "s1", "options", "optionId", "allow", "name",
                   "Allow", "kind", "allow_once", "optionId", "reject", "name",
                   "Reject", "kind", "reject_once", "toolCall", "toolCallId",
                   "t1", "title", v, "kind", kind, "rawInput", key, v);
}

static void same(const struct policy_result *a, const struct policy_result *b,
                 const json_t *params) {
  if (a->decision == b->decision && a->by == b->by &&
      strcmp(a->reason, b->reason) == 0 && strcmp(a->rule, b->rule) == 0 &&
      strcmp(a->source, b->source) == 0)
    return;
  char *s = json_dumps(params, JSON_COMPACT);
  FUZZ_CHECK(false,
             "index and reference differ on %s:\n  %s %s '%s' '%s' '%s'\n  "
             "%s %s '%s' '%s' '%s'",
             s, policy_decision_name(a->decision), policy_by_name(a->by),
             a->reason, a->rule, a->source, policy_decision_name(b->decision),
             policy_by_name(b->by), b->reason, b->rule, b->source);
  free(s);
}

static void decide_both(const struct policy *p, const struct policy *mem,
                        const json_t *params) {
  struct policy_request *r = policy_request_new(params, ROOT, HOME);
  shcache_enable(0);
  struct policy_request *fresh = policy_request_new(params, ROOT, HOME);
  shcache_enable(1);
  struct policy_result a, b;
  policy_decide(p, mem, r, &a);
  policy_decide_reference(p, mem, fresh, &b);
  same(&a, &b, params);
  // Again: the policy now has the keys of r's commands (kept across
  // decisions by their analysis).
  policy_decide(p, mem, r, &a);
  same(&a, &b, params);
  // A new request of the same params (the same analysis from the cache):
  // decided from the answers, then from the result the policy kept.
  struct policy_request *again = policy_request_new(params, ROOT, HOME);
  for (int i = 0; i < 2; i++) {
    policy_decide(p, mem, again, &a);
    same(&a, &b, params);
  }
  policy_request_free(again);
  json_t *ja = policy_request_atoms(p, r), *jb = policy_request_atoms(p, fresh);
  FUZZ_CHECK(json_equal(ja, jb), "the atoms differ with the cache");
  json_decref(ja);
  json_decref(jb);
  policy_request_free(r);
  policy_request_free(fresh);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > 8192)
    return 0;
  uint32_t seed = hash(data, size) | 1;
  struct policy_rule_text t[MAX_RULES], m[MAX_RULES];
  size_t nt = 0, nm = 0;
  json_t *own[MAX_REQS];
  const json_t *req[2 * MAX_REQS];
  size_t nown = 0, nreq = 0;
  char *copy = malloc(size);
  memcpy(copy, data + 1, size - 1);
  copy[size - 1] = '\0';
  static const enum policy_list lists[] = {
      ['a'] = POLICY_LIST_ALLOW, ['s'] = POLICY_LIST_ASK,
      ['d'] = POLICY_LIST_DENY, ['m'] = POLICY_LIST_ALLOW};
  for (char *line = copy, *end; line && *line; line = end) {
    end = strchr(line, '\n');
    if (end)
      *end++ = '\0';
    char c = line[0];
    const char *text = line[0] && line[1] ? line + 2 : "";
    if ((c == 'a' || c == 's' || c == 'd') && nt < MAX_RULES)
      t[nt++] = (struct policy_rule_text){text, lists[(int)c], "fuzz"};
    else if (c == 'm' && nm < MAX_RULES)
      m[nm++] = (struct policy_rule_text){text, POLICY_LIST_ALLOW, "session"};
    else if ((c == 'c' || c == 'r' || c == 'e') && nown < MAX_REQS)
      req[nreq++] = own[nown++] =
          c == 'c'   ? tool_request("execute", "command", text)
          : c == 'r' ? tool_request("read", "file_path", text)
                     : tool_request("edit", "file_path", text);
    else if (c == 'p' && strlen(line) >= 3 && nt < MAX_RULES) {
      size_t i = ((size_t)(unsigned char)line[1] << 8 |
                  (unsigned char)line[2]) %
                 nrules;
      t[nt++] = (struct policy_rule_text){rules[i].text, rules[i].list, "pool"};
    } else if (c == 'q' && strlen(line) >= 3 && nreq < 2 * MAX_REQS) {
      req[nreq++] = reqs[((size_t)(unsigned char)line[1] << 8 |
                          (unsigned char)line[2]) %
                         nreqs];
    }
  }
  for (uint32_t k = next_rand(&seed) % 49; k > 0 && nt < MAX_RULES; k--) {
    size_t i = next_rand(&seed) % nrules;
    t[nt++] = (struct policy_rule_text){rules[i].text, rules[i].list, "pool"};
  }
  for (uint32_t k = 1 + next_rand(&seed) % 6; k > 0 && nreq < 2 * MAX_REQS;
       k--)
    req[nreq++] = reqs[next_rand(&seed) % nreqs];
  struct policy_input in = {.rules = t,
                            .nrules = nt,
                            .mode = (enum policy_mode)(data[0] % 4),
                            .yolo = data[0] & 4,
                            .root = ROOT,
                            .home = HOME,
                            .protect = protect,
                            .nprotect = 1};
  struct policy *p = policy_new(&in, NULL, NULL);
  struct policy *mem = NULL;
  if ((data[0] & 8) || nm) {
    for (uint32_t k = next_rand(&seed) % 8; k > 0 && nm < MAX_RULES; k--) {
      size_t i = next_rand(&seed) % nrules;
      m[nm++] = (struct policy_rule_text){rules[i].text, POLICY_LIST_ALLOW,
                                          "session"};
    }
    struct policy_input min = {.rules = m,
                               .nrules = nm,
                               .mode = POLICY_MODE_DEFAULT,
                               .root = ROOT,
                               .home = HOME};
    mem = policy_new(&min, NULL, NULL);
  }
  for (size_t i = 0; i < nreq; i++)
    decide_both(p, mem, req[i]);
  policy_free(p);
  policy_free(mem);
  for (size_t i = 0; i < nown; i++)
    json_decref(own[i]);
  free(copy);
  return 0;
}
