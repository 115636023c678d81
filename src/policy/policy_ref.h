#pragma once
// The policy without its index, for the tests and the differential fuzz
// target (tests/fuzz/fuzz_policy_diff.c): every rule of a list is matched
// against every atom, in order, as before the index existed. Its decisions
// must equal policy_decide's.

#include "policy.h"

void policy_decide_reference(const struct policy *p,
                             const struct policy *memory,
                             const struct policy_request *r,
                             struct policy_result *out);

// policy_request_suggest as it was: each set checked by compiling it as a
// small policy (policy_new) and asking it to cover the request. Its
// answers must equal policy_request_suggest's (test_policy, fuzz_request).
char **policy_request_suggest_reference(const struct policy_request *r,
                                        const char *root, const char *home,
                                        bool broad, size_t *n);

// The check both make of a set: whether rules, as allow rules anchored on
// root and home (used as given), cover every atom of r that needs an allow
// rule. reference: by compiling them as a policy (narrow_covers), else as
// policy_request_suggest checks them (quick_covers). For the tests: both
// must answer the same for any rules, not only suggested ones.
bool policy_rules_cover(const struct policy_request *r, char **rules, size_t n,
                        const char *root, const char *home, bool reference);
