#pragma once
// The shell analyser: a command line becomes atoms (permission-rules §5.3).
//
// Pure: no I/O, no globals. Each simple command, each redirect target and
// each path operand of a known file command is an atom. Anything the
// analyser does not model makes the whole result opaque, and opaque is never
// allowed by a rule or by yolo: the analyser fails closed.

#include <stdbool.h>
#include <stddef.h>

enum shell_atom_kind {
  SHELL_CMD,  // a simple command
  SHELL_READ, // a file read: `< f`, or an operand of cat/head/grep/...
  SHELL_EDIT, // a file write: `> f`, `>> f`, or an operand of rm/cp/mv/...
};

struct shell_word {
  char *text;   // quote-removed text; a leading ~ or ~/ (and $HOME,
                // ${HOME}) expanded to home
  bool dynamic; // holds an unquoted $VAR, ${..}, $(..), `..`, ~user, glob
                // char or brace expansion: only a `*` in a pattern covers it
};

struct shell_atom {
  enum shell_atom_kind kind;
  // True for atoms only deny and ask rules look at: the inner command of an
  // exec wrapper (sudo, env, xargs, find -exec, ...), a git command with its
  // global options removed, the path operands of known file commands. An
  // allow rule never has to cover them (the full atom carries the allow).
  bool deny_only;
  // SHELL_CMD: the words after leading assignments and after the wrappers
  // that are stripped for every rule type (timeout, time, nice, nohup,
  // stdbuf, command, bare xargs).
  struct shell_word *words;
  size_t nwords;
  char **assign; // names of the leading NAME=value assignments
  size_t nassign;
  bool unsafe_assign; // an assignment can change what runs (PATH, LD_*,
                      // not on the safe list) or its value is dynamic
  bool never_allow;   // no allow rule may cover it (find -exec/-delete/-ok)
  bool more_args;     // run by xargs: more arguments come from stdin
  // SHELL_READ / SHELL_EDIT: the path as written, quote-removed, ~ expanded
  // (relative paths are left relative: the caller resolves them).
  char *path;
  bool path_dynamic; // the path holds an expansion: it cannot be known
};

struct shell_result {
  struct shell_atom *atoms;
  size_t natoms;
  bool opaque;      // something was not modelled: never allow
  char reason[160]; // why it is opaque ("eval", "unterminated quote", ...)
};

// Analyses a command line; home expands a leading ~. Always fills *out
// (free with shell_result_free). Returns 0, or -1 when out->opaque.
int shell_analyse(const char *script, const char *home,
                  struct shell_result *out);
// Frees what shell_analyse allocated.
void shell_result_free(struct shell_result *r);

enum shell_match {
  SHELL_NO,    // the pattern does not match
  SHELL_YES,   // it matches
  SHELL_MAYBE, // it might, depending on a dynamic word (deny/ask: ask)
};

// Matches a Bash rule specifier (the text inside `Bash(...)`, trailing `:*`
// already meaning ` *`) against a SHELL_CMD atom. for_allow selects the
// narrow, literal semantics of allow rules (exact command name, case
// sensitive, no basename, unsafe assignments never match, dynamic words
// only under `*`); otherwise the wide semantics of deny/ask (basename of a
// path-qualified name, case folded, assignments ignored).
enum shell_match shell_pattern_match(const char *pattern,
                                     const struct shell_atom *atom,
                                     bool for_allow);
// The same for a pattern of pn bytes (strlen(pattern)) on an atom whose
// text (its words joined by one space) is tn bytes long, or SIZE_MAX when
// not measured: for the compiled policy, which knows both.
enum shell_match shell_pattern_match_n(const char *pattern, size_t pn,
                                       const struct shell_atom *atom,
                                       bool for_allow, size_t tn);
// The same for a pattern known to hold no `*` but (maybe) its last byte
// (the policy's compiled Bash rules): it is not looked at again.
enum shell_match shell_pattern_match_lit(const char *pattern, size_t pn,
                                         const struct shell_atom *atom,
                                         bool for_allow, size_t tn);
// The same, always through the glob (patterns with a `*` before their end
// take it anyway; the others are matched byte by byte): for tests, which
// check that both answer the same.
enum shell_match shell_pattern_match_glob(const char *pattern,
                                          const struct shell_atom *atom,
                                          bool for_allow);

// True when a find -name/-path pattern narrows what it matches: it has a
// character that is not a glob character, a bracket expression or a dot
// (`*.o` and `a*` do; `*`, `?*`, `.*`, `[a-z]*`, `{a,b}` do not).
bool shell_pattern_narrows(const char *pattern);
