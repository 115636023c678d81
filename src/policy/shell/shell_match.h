#pragma once
// The Bash rule matcher's entry for the compiled policy (policy.c), which
// knows more about the atom than shell.h's callers: see shell.h for the
// matcher itself.

#include <stdbool.h>
#include <stddef.h>

#include "policy/shell/shell.h"

// shell_pattern_match_lit(pattern, pn, atom, for_allow, tn), the same
// answer, for a SHELL_CMD atom with words whose text (its words joined by
// one space) is tn bytes long, measured: base is the basename of its first
// word (the bytes after its last `/`), or NULL when it has none (no `/`,
// or nothing after the last one). Nothing is measured or searched again.
enum shell_match shell_match_literal(const char *pattern, size_t pn,
                                     const struct shell_atom *atom,
                                     bool for_allow, size_t tn,
                                     const char *base);
