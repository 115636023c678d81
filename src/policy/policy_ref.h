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
