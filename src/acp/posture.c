#include "posture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The last path component of s.
static const char *base(const char *s) {
  const char *slash = strrchr(s, '/');
  return slash ? slash + 1 : s;
}

// True when s (a base name or an npm package spec such as
// "@zed-industries/claude-agent-acp@0.23.1") names pkg: equal, or pkg
// followed by "@version".
static bool names(const char *s, const char *pkg) {
  size_t n = strlen(pkg);
  return strncmp(s, pkg, n) == 0 && (s[n] == '\0' || s[n] == '@');
}

static enum posture_family from_word(const char *w) {
  const char *b = base(w);
  if (names(b, "claude-agent-acp") || names(b, "claude-code-acp"))
    return POSTURE_CLAUDE;
  if (names(b, "gemini") || names(b, "gemini-cli"))
    return POSTURE_GEMINI;
  if (names(b, "codex-acp"))
    return POSTURE_CODEX;
  if (names(b, "acp-demo-agent"))
    return POSTURE_DEMO;
  return POSTURE_UNKNOWN;
}

// Launchers whose first non-option argument is the program they run.
static bool is_launcher(const char *w) {
  static const char *const launchers[] = {"node", "nodejs", "npx", "bunx",
                                          "bun",  "pnpx",   "env"};
  const char *b = base(w);
  for (size_t i = 0; i < sizeof(launchers) / sizeof(*launchers); i++)
    if (strcmp(b, launchers[i]) == 0)
      return true;
  return false;
}

enum posture_family posture_family_from_argv(const char *const *argv) {
  if (!argv || !argv[0])
    return POSTURE_UNKNOWN;
  enum posture_family f = from_word(argv[0]);
  if (f != POSTURE_UNKNOWN || !is_launcher(argv[0]))
    return f;
  for (size_t i = 1; argv[i]; i++) {
    if (argv[i][0] == '-' || strchr(argv[i], '=')) // options, env's K=V
      continue;
    return from_word(argv[i]);
  }
  return POSTURE_UNKNOWN;
}

enum posture_family posture_family_from_info(const char *name) {
  if (!name)
    return POSTURE_UNKNOWN;
  if (strcmp(name, "@zed-industries/claude-agent-acp") == 0 ||
      strcmp(name, "@zed-industries/claude-code-acp") == 0 ||
      strcmp(name, "claude-agent-acp") == 0 ||
      strcmp(name, "claude-code-acp") == 0)
    return POSTURE_CLAUDE;
  if (strcmp(name, "gemini-cli") == 0)
    return POSTURE_GEMINI;
  if (strcmp(name, "codex-acp") == 0)
    return POSTURE_CODEX;
  if (strcmp(name, "acp-demo-agent") == 0)
    return POSTURE_DEMO;
  return POSTURE_UNKNOWN;
}

const char *posture_family_name(enum posture_family f) {
  switch (f) {
  case POSTURE_CLAUDE:
    return "claude";
  case POSTURE_GEMINI:
    return "gemini";
  case POSTURE_CODEX:
    return "codex";
  case POSTURE_DEMO:
    return "demo";
  case POSTURE_UNKNOWN:
    break;
  }
  return "unknown";
}

size_t posture_spawn_args(enum posture_family f, const char *policy_file,
                          const char **out) {
  size_t n = 0;
  switch (f) {
  case POSTURE_GEMINI:
    // The CLI flag outranks general.defaultApprovalMode of every settings
    // file (an auto_edit mode skips the policy engine for edits); the
    // admin tier outranks tools.allowed and user/workspace policies.
    out[n++] = "--approval-mode";
    out[n++] = "default";
    if (policy_file) {
      out[n++] = "--admin-policy";
      out[n++] = policy_file;
    }
    break;
  case POSTURE_CODEX:
    // -c overrides outrank ~/.codex/config.toml, profiles and a trusted
    // project's .codex/config.toml: the read-only preset (asks before a
    // patch and before any command that leaves the read-only sandbox).
    out[n++] = "-c";
    out[n++] = "approval_policy=\"on-request\"";
    out[n++] = "-c";
    out[n++] = "sandbox_mode=\"read-only\"";
    break;
  case POSTURE_CLAUDE:
  case POSTURE_DEMO:
  case POSTURE_UNKNOWN:
    break;
  }
  out[n] = NULL;
  return n;
}

const char *posture_gemini_policy(void) {
  return "# Written by acp-broker: Gemini CLI asks the broker before every\n"
         "# write, edit, command and fetch, whatever other settings allow.\n"
         "[[rule]]\n"
         "toolName = [\"write_file\", \"replace\", \"run_shell_command\", "
         "\"web_fetch\", \"mcp_*\"]\n"
         "decision = \"ask_user\"\n"
         "priority = 999\n";
}

// Claude Code's tools that write, run or fetch: a whole-tool ask rule for
// each outranks every allow rule, acceptEdits and a PreToolUse hook's
// allow.
static const char *const claude_ask[] = {
    "Bash",         "Edit",     "Write",     "MultiEdit",
    "NotebookEdit", "WebFetch", "WebSearch", "KillShell",
};

json_t *posture_session_meta(enum posture_family f) {
  if (f != POSTURE_CLAUDE)
    return NULL;
  json_t *ask = json_array();
  for (size_t i = 0; i < sizeof(claude_ask) / sizeof(*claude_ask); i++)
    json_array_append_new(ask, json_string(claude_ask[i]));
  json_t *settings =
      json_pack("{s:{s:o,s:s,s:s},s:{s:b}}", "permissions", "ask", ask,
                "defaultMode", "default", "disableBypassPermissionsMode",
                "disable", "sandbox", "autoAllowBashIfSandboxed", 0);
  char *text = settings ? json_dumps(settings, JSON_COMPACT) : NULL;
  json_decref(settings);
  if (!text)
    return NULL;
  json_t *meta = json_pack("{s:{s:{s:{s:s}}}}", "claudeCode", "options",
                           "extraArgs", "settings", text);
  free(text);
  return meta;
}

const char *posture_asking_mode(enum posture_family f) {
  switch (f) {
  case POSTURE_CLAUDE:
  case POSTURE_GEMINI:
  case POSTURE_DEMO:
    return "default";
  case POSTURE_CODEX:
    return "read-only";
  case POSTURE_UNKNOWN:
    break;
  }
  return NULL;
}

bool posture_mode_ok(enum posture_family f, const char *mode) {
  const char *asking = posture_asking_mode(f);
  if (!asking || !mode)
    return false;
  if (strcmp(mode, asking) == 0)
    return true;
  if (f == POSTURE_DEMO && strcmp(mode, "ask") == 0)
    return true; // the demo scenarios' asking mode
  return f != POSTURE_CODEX && strcmp(mode, "plan") == 0;
}

static bool offered(const json_t *modes, const char *id) {
  const json_t *list = json_object_get(modes, "availableModes");
  for (size_t i = 0; i < json_array_size(list); i++) {
    const char *m =
        json_string_value(json_object_get(json_array_get(list, i), "id"));
    if (m && strcmp(m, id) == 0)
      return true;
  }
  return false;
}

const char *posture_default_mode(enum posture_family f, const json_t *modes) {
  const char *asking = posture_asking_mode(f);
  if (asking && offered(modes, asking))
    return asking;
  if (f == POSTURE_DEMO && offered(modes, "ask"))
    return "ask";
  if (f == POSTURE_UNKNOWN && offered(modes, "default"))
    return "default"; // what such an agent calls its default
  return NULL;
}

enum posture_verdict posture_check(enum posture_family f, const json_t *modes,
                                   char *reason, size_t len) {
  const char *asking = posture_asking_mode(f);
  if (!asking) {
    snprintf(reason, len,
             "acp-broker does not know how to keep this agent asking: its "
             "own settings may approve tool calls without asking you");
    return POSTURE_UNVERIFIED;
  }
  const char *cur = json_string_value(json_object_get(modes, "currentModeId"));
  if (!cur && f == POSTURE_DEMO)
    return POSTURE_ASKING; // no modes, no settings of its own: it asks
  if (!cur) {
    snprintf(reason, len,
             "the agent reported no session mode, so its asking mode cannot "
             "be checked");
    return POSTURE_UNVERIFIED;
  }
  if (posture_mode_ok(f, cur))
    return POSTURE_ASKING;
  if (!offered(modes, asking)) {
    snprintf(reason, len,
             "the agent started in its mode '%.100s' and offers no '%s' mode "
             "to set it back to",
             cur, asking);
    return POSTURE_UNVERIFIED;
  }
  snprintf(reason, len, "the agent started in its mode '%.100s'", cur);
  return POSTURE_SET_MODE;
}
