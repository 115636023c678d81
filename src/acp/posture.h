#pragma once
// The asking posture: what the broker does to each agent it knows so that
// the agent sends session/request_permission for every write, edit, delete,
// move, command and fetch — whatever the project's own agent settings say —
// and how it checks that the agent is still in its asking mode.
//
// Pure: no I/O, no globals. The per-agent knowledge was read from the
// pinned packages (tests/agents) and is explained in doc/acp.txt
// ("Posture"):
//   claude  `_meta.claudeCode.options.extraArgs.settings` on session/new
//           and session/load: flag settings whose `ask` rules name every
//           writing tool (Claude Code checks a whole-tool ask rule before
//           the tool's own allow rules and before acceptEdits or bypass);
//           asking mode `default`.
//   gemini  `--approval-mode default --admin-policy FILE` at spawn: an
//           admin-tier policy whose `ask_user` rule outranks every
//           workspace/user allow (tools.allowed, policies); asking mode
//           `default`.
//   codex   `-c approval_policy="on-request" -c sandbox_mode="read-only"`
//           at spawn (outranks ~/.codex and a trusted project's
//           .codex/config.toml); asking mode `read-only`.
//   demo    the bundled demo agent; asking mode `default`.

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum posture_family {
  POSTURE_UNKNOWN,
  POSTURE_CLAUDE,
  POSTURE_GEMINI,
  POSTURE_CODEX,
  POSTURE_DEMO,
};

// The family of the agent started with argv (NULL-terminated): the
// executable's base name, or the package a launcher (node, npx, bunx, …)
// runs. POSTURE_UNKNOWN when nothing matches.
enum posture_family posture_family_from_argv(const char *const *argv);
// The family named by initialize's agentInfo.name (NULL: unknown).
enum posture_family posture_family_from_info(const char *name);
// A short name ("claude", "gemini", "codex", "demo", "unknown").
const char *posture_family_name(enum posture_family f);

// Arguments appended to the agent's command line at spawn (a
// NULL-terminated static list; empty for none). For gemini the policy
// file's path is put in place of the NULL slot: pass it in policy_file
// (the list is then written to out, which must hold POSTURE_MAX_ARGS + 1).
#define POSTURE_MAX_ARGS 8
size_t posture_spawn_args(enum posture_family f, const char *policy_file,
                          const char **out);
// The Gemini admin policy (TOML) written to policy_file.
const char *posture_gemini_policy(void);

// session/new and session/load `_meta` for f (a new reference), or NULL.
json_t *posture_session_meta(enum posture_family f);

// The agent's asking mode (its own session mode id), or NULL when the
// family has none.
const char *posture_asking_mode(enum posture_family f);
// True when mode is one the broker leaves the agent in: the asking mode,
// or `plan` (it restricts; not for codex, which has none). The demo agent
// also asks in its scenarios' mode `ask`.
bool posture_mode_ok(enum posture_family f, const char *mode);

// The mode id among modes' availableModes (borrowed, may be NULL) that
// the broker's `default` policy mode stands for: the asking mode when the
// agent offers it (the demo agent's `ask` too; an unknown agent's own
// `default`), else NULL. A static string.
const char *posture_default_mode(enum posture_family f, const json_t *modes);

enum posture_verdict {
  POSTURE_ASKING,     // the agent is in its asking mode
  POSTURE_SET_MODE,   // send session/set_mode to the asking mode, then asking
  POSTURE_UNVERIFIED, // cannot be brought into posture; reason says why
};
// Judges a session/new|load answer's `modes` (borrowed, may be NULL) for a
// family; reason (len bytes) says why when unverified.
enum posture_verdict posture_check(enum posture_family f, const json_t *modes,
                                   char *reason, size_t len);
