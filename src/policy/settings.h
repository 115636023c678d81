#pragma once
// Settings: every source of rules, modes and yolo, pooled (design: the
// README's "Permissions" section and doc/acp.txt describe them for users),
// and the trust store that keeps a repository from loosening its own
// permissions.
//
// Sources: setup() options (passed in as JSON), the user files
// $XDG_CONFIG_HOME/acp-broker/settings.json, ~/.claude/settings.json and
// ~/.gemini/settings.json, and the project files .acp/settings.json,
// .claude/settings.json, .claude/settings.local.json and
// .gemini/settings.json. HOME and the XDG variables decide where the user
// files are. Project content is split into restrictive (deny and ask rules,
// disableYoloMode: true, plan) which always applies, and permissive (allow
// rules, a yolo request, acceptEdits) which applies only when the person
// trusted exactly that content (a hash kept per project root in
// $XDG_STATE_HOME/acp-broker/trust.json).

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "policy.h"

struct settings_rule {
  char *text;            // the rule as written
  enum policy_list list; // allow, ask, deny
  char *source;          // the file (absolute path) or "setup"
};

// A settings file that exists but cannot be used: it cannot be read (a
// directory, a dangling symlink, a symlink loop, no permission, too large,
// not a regular file) or parsed, or has a key of the wrong type. It might
// hold deny or ask rules or a veto nobody can see, so its scope fails
// closed (design §6).
struct settings_broken {
  char *file;  // absolute path, or "setup"
  char *error; // "file:line:col: message" or "file: reason"
  bool user;   // a user file (or setup()): everywhere; else this project
};

struct settings {
  char *root;                  // the project root
  char *home;                  // $HOME
  struct settings_rule *rules; // effective rules (untrusted permissive
  size_t nrules;               // project content already left out)
  enum policy_mode mode;
  char *mode_source;   // where the mode came from, or NULL for the default
  bool yolo;           // effective: requested and not vetoed
  char *yolo_source;   // what requested it, or NULL
  bool veto;           // security.disableYoloMode: true in a Gemini file
  char *veto_source;   // that file
  bool trusted;        // the project's permissive content is trusted (true
                       // when it has none); false while failing closed
  bool trust_matches;  // the trust store's hash matches the permissive
                       // content (trusted, were nothing broken)
  bool has_permissive; // the project has permissive content
  json_t *permissive;  // that content, as trusting would enable it
                       // (for :AcpTrust to show); owned
  json_t *agents_yolo; // {"name": true} from the user settings; owned
  char **errors;       // "file:line:col: message" per malformed file
  size_t nerrors;      // (and an unreadable trust store)
  // Broken files: while there is one, the settings fail closed: yolo,
  // acceptEdits, every allow rule and trust are suspended (left out of
  // the fields above) and whatever nothing denies is asked
  // (settings_fail_closed). Deny and ask rules, plan and the veto of
  // every readable file still apply.
  struct settings_broken *broken;
  size_t nbroken;
  char **warnings; // e.g. an invalid rule, with its file
  size_t nwarnings;
  char **protect; // the broker's own files, tier-1 protected
  size_t nprotect;
};

// The most files settings_files lists.
#define SETTINGS_FILES_MAX 8
// The environment variables the paths of settings_files depend on.
#define SETTINGS_NENV 3
extern const char *const settings_env[SETTINGS_NENV];

// The files settings_load reads for the project at root, lowest precedence
// first, then the trust store: what a cache of loaded settings must watch
// (with setup()'s options and settings_env). Paths that cannot be formed
// (no HOME) are left out. Fills out with new strings; returns how many.
size_t settings_files(const char *root, char *out[SETTINGS_FILES_MAX]);
// The file settings_add_rule edits: the project's .acp/settings.json, or
// the user settings file. A new string, or NULL without HOME.
char *settings_rule_file(const char *root, bool project);

// The project root for cwd: the nearest ancestor (cwd included) holding
// .git, .acp, .gemini or .claude, else cwd itself. Returns a new string.
char *settings_find_root(const char *cwd);
// What is at a settings file's path.
enum settings_file {
  SETTINGS_ABSENT, // no such file, and no dangling symlink on the way
  SETTINGS_FILE,   // a regular file (*st is its stat)
  SETTINGS_BROKEN, // anything else: why says what
};
// Looks at path without opening it: a directory, a FIFO, a dangling
// symlink (the file or a directory on its way), a symlink loop or a stat()
// error are broken. st (may be NULL) gets stat()'s answer for the file;
// when it is absent, stat()'s answer for the deepest directory on its way
// that exists, and *exists (may be NULL) the length of that prefix of path
// (0 when none): nothing can appear on the way without changing it.
enum settings_file settings_file_probe(const char *path, struct stat *st,
                                       size_t *exists, char *why,
                                       size_t whylen);
// The most a settings file may hold; a larger one is broken.
#define SETTINGS_FILE_MAX ((size_t)1 << 20)
// Reads a settings file whole, never blocking on a FIFO or a device (the
// gate's cache reads through it too): 0 with *text (a new string, NULL
// when there is no such file) and *len, or -1 with a reason in err (what
// settings_file_probe calls broken, a read error, more than
// SETTINGS_FILE_MAX bytes).
int settings_slurp(const char *path, char **text, size_t *len, char *err,
                   size_t errlen);
// Loads every source for the project at root. setup (may be NULL) is the
// JSON of setup()'s {permissions, yolo, agents}. Never fails: a file that
// cannot be read or parsed is reported in errors and broken, and the
// settings fail closed (see struct settings).
void settings_load(const char *root, const json_t *setup, struct settings *s);
// Frees what settings_load allocated.
void settings_free(struct settings *s);
// The policy input for these settings (borrowing from s). *texts is a new
// array the caller frees with free(); its strings belong to s.
struct policy_input settings_policy_input(const struct settings *s,
                                          struct policy_rule_text **texts);
// Applies failing closed to a decision: while s has a broken file, an
// allow (by a rule remembered for the session, or a read inside the
// project) becomes ask, and an ask that no rule made says why nothing
// allowed it; both name the file. Returns true when it changed res.
bool settings_fail_closed(const struct settings *s, struct policy_result *res);
// While s has a broken file: one message for a person naming each broken
// file (with line and column, or the reason it cannot be read) and what is
// suspended where. A new string, or NULL when nothing is broken.
char *settings_closed_message(const struct settings *s);
// The reason `what` ("yolo", "acceptEdits", "trust") is refused while s
// fails closed, in err; false when nothing is broken.
bool settings_refuse(const struct settings *s, const char *what, char *err,
                     size_t errlen);
// Trusts the project's current permissive content (writes trust.json).
// Returns 0, or -1 with a reason in err (also while a settings file is
// broken: trust is suspended until it is fixed).
int settings_trust(const char *root, char *err, size_t errlen);
// Adds rule to the allow/ask/deny list of the project's .acp/settings.json
// (project = true) or of the user file; keeps the project trusted when it
// was (the hash is updated). Returns 0, or -1 with a reason in err (an
// invalid rule, an unwritable file).
int settings_add_rule(const char *root, bool project, enum policy_list list,
                      const char *rule, char *err, size_t errlen);
// Sets "agents": {"<name>": {"yolo": on}} in the user settings file.
int settings_set_agent_yolo(const char *name, bool on, char *err,
                            size_t errlen);
// The effective settings as JSON, for `acp-broker rules` and :AcpRules:
// {root, mode, modeSource, yolo, yoloSource, veto, vetoSource, trusted,
//  hasPermissive, permissive, agents, rules: [{rule, list, source}],
//  protect: [...], errors: [...], warnings: [...], failClosed}, where
// failClosed is null or {scope: "project"|"everywhere", files: [{file,
// error, scope: "project"|"user"}], suspended: [...], message}.
json_t *settings_to_json(const struct settings *s);
// The failClosed value of settings_to_json (a new reference; null when
// nothing is broken).
json_t *settings_closed_json(const struct settings *s);
