#pragma once
// Permission decisions: rules in Claude Code syntax, modes, yolo, protected
// paths and the circuit breaker, applied to one session/request_permission
// (permission-rules §5; the project's README and doc/acp.txt describe it
// for users).
//
// policy_decide does no I/O and its answer depends on its arguments alone;
// it keeps, in the policy, what it found for the commands of cached shell
// analyses (their index keys and the rules' answers, by the analysis's
// serial), so one policy is decided by one thread at a time (the broker's
// loop). policy_request_new is the only place that looks at the filesystem
// (to resolve symlinks in request paths).

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum policy_decision { POLICY_ALLOW, POLICY_ASK, POLICY_DENY };

enum policy_list { POLICY_LIST_ALLOW, POLICY_LIST_ASK, POLICY_LIST_DENY };

enum policy_mode {
  POLICY_MODE_DEFAULT,
  POLICY_MODE_ACCEPT_EDITS, // edits inside the project root are allowed
  POLICY_MODE_PLAN,         // edits and non-read-only commands are denied
  POLICY_MODE_YOLO,         // allowed unless deny/ask/opaque/tier-1/breaker
};

// Who or what made a decision (the audit log's `by`).
enum policy_by {
  POLICY_BY_RULE,    // a rule from a settings file or setup()
  POLICY_BY_MEMORY,  // a rule remembered for the session
  POLICY_BY_MODE,    // acceptEdits, plan, reads inside the project
  POLICY_BY_YOLO,    // yolo
  POLICY_BY_DEFAULT, // nothing allowed it: ask (opaque, protected, no rule)
};

// One rule as settings provide it.
struct policy_rule_text {
  const char *text;      // e.g. "Bash(npm run test:*)"
  enum policy_list list; // allow, ask or deny
  const char *source;    // the file it came from, "setup", "session", ...
};

struct policy_input {
  const struct policy_rule_text *rules;
  size_t nrules;
  enum policy_mode mode;
  bool yolo;        // effective yolo (already vetoed or not by settings)
  const char *root; // the project root (absolute, no trailing slash)
  const char *home; // $HOME
  // Extra tier-1 protected files (absolute): the broker's own user
  // settings and trust store. May be NULL.
  const char *const *protect;
  size_t nprotect;
};

struct policy;

// Compiles the input. Invalid rules are skipped; each gets a line in
// *warnings (a malloc'd array of malloc'd "rule: reason" strings, or NULL;
// the caller frees them). Never fails.
struct policy *policy_new(const struct policy_input *in, char ***warnings,
                          size_t *nwarnings);
// Frees a compiled policy.
void policy_free(struct policy *p);
// Checks one rule's syntax: 0, or -1 with the reason in err (for commands
// that add rules: an invalid rule is refused as it is typed).
int policy_rule_check(const char *text, char *err, size_t errlen);
// The same for a rule meant for list: an allow rule is also refused when
// allow lists ignore it (a tool-name pattern such as `*` or `mcp__*`).
int policy_rule_check_list(const char *text, enum policy_list list, char *err,
                           size_t errlen);

struct policy_request;

// Extracts the atoms of a session/request_permission params object (kind,
// title, rawInput, content, locations; permission-rules §5.5). cwd is the
// session cwd. Never fails: what cannot be understood makes it opaque.
struct policy_request *policy_request_new(const json_t *params, const char *cwd,
                                          const char *home);
// The same from params.toolCall alone (NULL: none).
struct policy_request *policy_request_new_tc(const json_t *tc, const char *cwd,
                                             const char *home);
// Frees a request.
void policy_request_free(struct policy_request *r);
// The shell command of the request, or NULL (for the audit log).
const char *policy_request_command(const struct policy_request *r);
// The toolCall's toolCallId, kind and title as sent (NULL when absent or
// not a string), as json_string_value gives them: they point into the tree
// the request was read from, and live as long as it.
void policy_request_tc_strings(const struct policy_request *r, const char **id,
                               const char **kind, const char **title);
// Whether the request's rawInput.command is a string or an array (the
// agent's own command: an approval can be held to it).
bool policy_request_raw_command(const struct policy_request *r);
// The paths of the request, normalised (a new JSON array of strings).
json_t *policy_request_paths(const struct policy_request *r);
// The same paths without JSON: a new array (free it) of *n strings
// borrowed from r (valid until policy_request_free), or NULL when none.
// Strings that are not UTF-8 are listed (the JSON array leaves them out).
const char **policy_request_path_list(const struct policy_request *r,
                                      size_t *n);
// The same in buf (cap entries) when they may not be more (twice the
// request's atoms), else in a new array as above: free the answer when it
// is not buf. NULL when none.
const char **policy_request_path_list_in(const struct policy_request *r,
                                         const char **buf, size_t cap,
                                         size_t *n);
// The narrowest rules that allow exactly this request: the exact command
// per shell atom (`Bash(npm test)`), the exact path (`Edit(//abs/path)`),
// the host (`WebFetch(domain:h)`). A malloc'd array of malloc'd strings;
// *n = 0 and NULL when the request cannot be covered by rules (opaque).
char **policy_request_narrow_rules(const struct policy_request *r, size_t *n);
// The rules a prompt offers to remember. Paths are anchored as a person
// would share them: inside root (the project root) `Edit(/src/main.c)`,
// inside home `Edit(~/notes.md)`, else `Edit(//abs)` (root, home: absolute,
// or NULL). broad: the broader alternative instead, each atom's where it
// has one (`Bash(git status *)` for `git status`, `Edit(/src/**)` for
// src/main.c: a directory inside root only), else its narrow rule; NULL when no
// atom has one. Either set, compiled with the same root and home, covers the
// request (checked).
char **policy_request_suggest(const struct policy_request *r, const char *root,
                              const char *home, bool broad, size_t *n);
// Both sets at once, as policy_request_suggest gives each (a prompt offers
// both): an atom's narrow rule is built once.
struct policy_suggestions {
  char **narrow, **broad; // malloc'd arrays of malloc'd strings, or NULL
  size_t nnarrow, nbroad;
};
void policy_request_suggestions(const struct policy_request *r,
                                const char *root, const char *home,
                                struct policy_suggestions *out);

// Both sets as a prompt offers them (the rules that are not UTF-8 left
// out, as an event could not carry them) in one malloc'd block: free() it.
struct policy_sets {
  char **narrow, **broad; // into the block; NULL when the set has no rule
  size_t nnarrow, nbroad;
  size_t size; // of the block
};
// policy_request_suggestions's sets, UTF-8 only; NULL when neither has a
// rule. p (may be NULL) keeps them with the result it keeps for r's atoms
// (policy_decide), for the same root and home: another request of the
// same atoms (the same command's analysis, the same paths) gets a copy.
// Emptied with the policy (policy_free) and when the result's place is
// taken by other atoms.
struct policy_sets *
policy_request_suggestions_kept(const struct policy *p,
                                const struct policy_request *r,
                                const char *root, const char *home);

#define POLICY_ATOMS_SHOWN 64 // atoms listed by policy_request_atoms

// What the policy judged, for a person: a new JSON array of
// {kind: "command"|"read"|"edit"|"fetch"|"search"|"mcp"|"other", text,
// inner: true for atoms only deny and ask rules look at}, one per atom in
// the order of the request (at most POLICY_ATOMS_SHOWN). Paths are shown
// relative to p's project root or home.
json_t *policy_request_atoms(const struct policy *p,
                             const struct policy_request *r);
// The same atoms without JSON: how many policy_request_atoms lists, and
// atom i of them (kind, text as valid UTF-8 in buf, inner).
struct policy_atom_view {
  const char *kind; // "command", "read", ... (static)
  const char *text; // buf, or "(not UTF-8)"
  bool inner;
  char buf[512];
};
size_t policy_request_natoms(const struct policy_request *r);
void policy_request_atom(const struct policy *p, const struct policy_request *r,
                         size_t i, struct policy_atom_view *out);

struct policy_result {
  enum policy_decision decision;
  enum policy_by by;
  char reason[256]; // for a person: "denied by Bash(rm *)", "no rule
                    // matched", "opaque command: eval", "protected path"
  char rule[256];   // the rule that decided, or ""
  char source[512]; // its source (file, "session"), or the mode, or ""
};

// Decides. memory (may be NULL) holds the rules remembered for this
// session; they count as allow rules with by = POLICY_BY_MEMORY.
void policy_decide(const struct policy *p, const struct policy *memory,
                   const struct policy_request *r, struct policy_result *out);

// The option to answer with: for ALLOW the first offered allow_once (when
// there is none, *decision becomes POLICY_ASK and NULL is returned); for
// DENY the first reject_once, else reject_always, else NULL (outcome
// cancelled). Options of unknown kinds are never chosen. The returned
// string is borrowed from options.
const char *policy_pick_option(const json_t *options,
                               enum policy_decision *decision);
// Both options a prompt offers to answer with, in one walk of options:
// *allow as policy_pick_option picks for ALLOW, *reject for DENY.
void policy_pick_options(const json_t *options, const char **allow,
                         const char **reject);
// The same over n options given as their optionIds and kinds (a NULL one
// is never picked).
const char *policy_pick_option_of(const char *const *ids,
                                  const char *const *kinds, size_t n,
                                  enum policy_decision *decision);

// Names used in settings files, output and the audit log.
const char *policy_decision_name(enum policy_decision d); // "allow", ...
const char *policy_mode_name(enum policy_mode m);         // "acceptEdits"
const char *policy_by_name(enum policy_by b);             // "rule", ...
// Parses a mode name ("default", "acceptEdits", "plan", "yolo",
// "bypassPermissions"); returns -1 when unknown.
int policy_mode_parse(const char *s, enum policy_mode *out);
