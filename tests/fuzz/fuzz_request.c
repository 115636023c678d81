// The request extractor (request_init, policy_request_new) and what the
// policy builds on it: paths, narrow rules, decisions, the option answered.
//
// Input: a session/request_permission params object as JSON text (inputs
// that do not parse are skipped). The session cwd is /fuzz/p, home /fuzz/h
// (neither exists: path_resolve finds nothing to follow there, but a path
// elsewhere is resolved against this machine's filesystem, read only).
// Properties:
//  * the atoms are well formed: at most REQUEST_ATOMS_MAX; a known path has
//    a normal lexical and resolved form, a glob a normal pattern; a command
//    atom its shell atom; MCP, fetch and kind atoms their name; opaque has a
//    reason;
//  * policy_request_paths are absolute strings;
//  * every narrow rule (and every suggested one, project-relative, and its
//    broader alternative) passes policy_rule_check_list for the allow list,
//    an opaque request has none, and remembered for the session they allow
//    the request, unless the decision without them came from a step no allow
//    rule passes (same decision and reason then);
//  * the suggested sets equal policy_request_suggest_reference's (each set
//    checked by compiling it as a policy);
//  * the sets kept with the result the policy keeps for the atoms
//    (policy_request_suggestions_kept, made then found) are those made each
//    time without the rules that are not UTF-8;
//  * policy_pick_option never turns ask or deny into allow;
//  * the reading equals the one of the extractor before its arena
//    (tests/unit/request_ref.c), field by field; also within an epoch
//    (path.c's remembered walks) and with a small first chunk of the
//    caller's (request_init_in).

#include <string.h>

#include "base/utf8.h"
#include "fuzz.h"
#include "policy/path.h"
#include "policy/policy.h"
#include "policy/policy_ref.h"
#include "policy/request.h"

#include "../unit/request_ref.c"
#include "../unit/sets_same.h"

#define CWD "/fuzz/p"
#define HOME "/fuzz/h"

static struct policy *none, *yolo;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  struct policy_input in = {.root = CWD, .home = HOME};
  none = policy_new(&in, NULL, NULL);
  in.yolo = true;
  yolo = policy_new(&in, NULL, NULL);
  return 0;
}

static bool normal(const char *p) {
  if (!p || p[0] != '/' || strstr(p, "//") ||
      (p[1] && p[strlen(p) - 1] == '/'))
    return false;
  for (const char *s = p; *s;) {
    while (*s == '/')
      s++;
    size_t k = strcspn(s, "/");
    if ((k == 1 && s[0] == '.') || (k == 2 && s[0] == '.' && s[1] == '.'))
      return false;
    s += k;
  }
  return true;
}

static void check_atoms(const struct request *r) {
  FUZZ_CHECK(r->kind != NULL, "no kind");
  FUZZ_CHECK(!r->opaque || r->reason[0], "opaque without a reason");
  FUZZ_CHECK(r->natoms <= REQUEST_ATOMS_MAX, "%zu atoms", r->natoms);
  FUZZ_CHECK(!r->cwd || normal(r->cwd), "cwd %s", r->cwd);
  for (size_t i = 0; i < r->natoms; i++) {
    const struct request_atom *a = &r->atoms[i];
    switch (a->cls) {
    case REQUEST_BASH:
      FUZZ_CHECK(a->cmd && a->cmd->kind == SHELL_CMD, "bash atom %zu", i);
      for (size_t j = 0; j < a->ntargets; j++) {
        const struct request_target *t = &a->targets[j];
        FUZZ_CHECK(t->where == REQUEST_UNKNOWN ||
                       (normal(t->lex) &&
                        (t->where == REQUEST_GLOB || normal(t->res))),
                   "target %s / %s", t->lex ? t->lex : "NULL",
                   t->res ? t->res : "NULL");
      }
      break;
    case REQUEST_READ:
    case REQUEST_EDIT:
      if (a->where == REQUEST_KNOWN)
        FUZZ_CHECK(normal(a->lex) && normal(a->res), "path %s / %s",
                   a->lex ? a->lex : "NULL", a->res ? a->res : "NULL");
      else if (a->where == REQUEST_GLOB)
        FUZZ_CHECK(normal(a->lex), "glob %s", a->lex ? a->lex : "NULL");
      break;
    case REQUEST_FETCH:
    case REQUEST_MCP:
      FUZZ_CHECK(a->name && a->name[0], "atom %zu without a name", i);
      break;
    case REQUEST_KIND:
      FUZZ_CHECK(a->kind, "kind atom without kind");
      break;
    case REQUEST_SEARCH:
      break;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *params = json_loadb((const char *)data, size, 0, NULL);
  if (!params)
    return 0;

  struct request rq, ref;
  request_init(&rq, params, CWD, HOME);
  check_atoms(&rq);
  bool opaque = rq.opaque;
  request_ref_init(&ref, params, CWD, HOME);
  char why[1024];
  FUZZ_CHECK(request_same(&rq, &ref, why, sizeof(why)),
             "differs from the reference: %s", why);
  request_clear(&rq);
  // Within an epoch (path.c remembers the walk over the cwd and home), with
  // a small first chunk of the caller's: the same reading.
  static uint64_t epoch;
  static max_align_t lent[256 / sizeof(max_align_t)];
  path_cache_epoch(++epoch);
  request_init_in(&rq, request_tool_call(params), CWD, HOME, lent,
                  sizeof(lent));
  FUZZ_CHECK(request_same(&rq, &ref, why, sizeof(why)),
             "differs from the reference within an epoch: %s", why);
  request_clear(&rq);
  path_cache_epoch(0);
  request_ref_clear(&ref);

  struct policy_request *r = policy_request_new(params, CWD, HOME);
  policy_request_command(r);
  json_t *paths = policy_request_paths(r);
  size_t i;
  json_t *v;
  json_array_foreach(paths, i, v) {
    FUZZ_CHECK(json_is_string(v) && json_string_value(v)[0] == '/',
               "path %zu", i);
  }
  json_decref(paths);

  struct policy_result base, with, y;
  policy_decide(none, NULL, r, &base);
  policy_decide(yolo, NULL, r, &y);
  const json_t *options = json_object_get(
      params, "options"); // may be anything: pick_option must cope
  for (int k = 0; k < 2; k++) {
    enum policy_decision d = k ? y.decision : base.decision, d0 = d;
    policy_pick_option(options, &d);
    FUZZ_CHECK(d0 == POLICY_ALLOW || d == d0, "pick_option: %s -> %s",
               policy_decision_name(d0), policy_decision_name(d));
  }

  // The narrow rules, and the suggested ones (anchored on the project and
  // home) and their broader alternative.
  for (int variant = 0; variant < 3; variant++) {
    size_t n = 0;
    char **narrow = variant == 0
                        ? policy_request_narrow_rules(r, &n)
                        : policy_request_suggest(r, CWD, HOME, variant == 2, &n);
    FUZZ_CHECK(!opaque || n == 0, "%zu narrow rules for an opaque request", n);
    FUZZ_CHECK(!n == !narrow, "narrow %zu rules, %p", n, (void *)narrow);
    // The same set as the path that checked it by compiling a policy.
    size_t m = 0;
    char **ref = variant == 0 ? policy_request_suggest_reference(r, NULL, NULL,
                                                                 false, &m)
                              : policy_request_suggest_reference(
                                    r, CWD, HOME, variant == 2, &m);
    FUZZ_CHECK(m == n, "suggested %zu rules, the reference %zu (variant %d)",
               n, m, variant);
    for (size_t k = 0; k < m; k++) {
      FUZZ_CHECK(strcmp(narrow[k], ref[k]) == 0,
                 "suggested rule %zu: %s, the reference %s", k, narrow[k],
                 ref[k]);
      free(ref[k]);
    }
    free(ref);
    if (!n)
      continue;
    struct policy_rule_text *t = calloc(n, sizeof(*t));
    for (size_t k = 0; k < n; k++) {
      char err[512];
      FUZZ_CHECK(narrow[k] && policy_rule_check_list(narrow[k],
                                                     POLICY_LIST_ALLOW, err,
                                                     sizeof(err)) == 0,
                 "narrow rule %s: %s", narrow[k], err);
      t[k] = (struct policy_rule_text){narrow[k], POLICY_LIST_ALLOW,
                                       "session"};
    }
    struct policy_input in = {
        .rules = t, .nrules = n, .root = CWD, .home = HOME};
    size_t nw = 0;
    struct policy *mem = policy_new(&in, NULL, &nw);
    FUZZ_CHECK(nw == 0, "%zu warnings for the narrow rules", nw);
    policy_decide(none, mem, r, &with);
    FUZZ_CHECK(with.decision == POLICY_ALLOW ||
                   (with.decision == base.decision &&
                    strcmp(with.reason, base.reason) == 0),
               "remembered rules (variant %d): %s (%s), without: %s (%s)",
               variant, policy_decision_name(with.decision), with.reason,
               policy_decision_name(base.decision), base.reason);
    policy_free(mem);
    free(t);
    for (size_t k = 0; k < n; k++)
      free(narrow[k]);
    free(narrow);
  }
  // The sets kept with the result the policy keeps for these atoms (the
  // third decision keeps one, when it keeps any): made, then found.
  policy_decide(none, NULL, r, &with);
  policy_decide(none, NULL, r, &with);
  struct policy_suggestions sg;
  policy_request_suggestions(r, CWD, HOME, &sg);
  for (int twice = 0; twice < 2; twice++) {
    struct policy_sets *s = policy_request_suggestions_kept(none, r, CWD, HOME);
    FUZZ_CHECK(same_utf8(s ? s->narrow : NULL, s ? s->nnarrow : 0, sg.narrow,
                         sg.nnarrow) &&
                   same_utf8(s ? s->broad : NULL, s ? s->nbroad : 0, sg.broad,
                             sg.nbroad),
               "kept sets (%s) differ from those made", twice ? "found" : "made");
    free(s);
  }
  for (size_t k = 0; k < sg.nnarrow; k++)
    free(sg.narrow[k]);
  for (size_t k = 0; k < sg.nbroad; k++)
    free(sg.broad[k]);
  free(sg.narrow);
  free(sg.broad);
  policy_request_free(r);
  json_decref(params);
  return 0;
}
