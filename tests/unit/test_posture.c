// posture: which agent is which, the arguments and _meta that keep each
// one asking, and the judgement of the modes a session reports.

#include "acp/posture.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_family_from_argv(void) {
  static const struct {
    const char *argv[5];
    enum posture_family want;
  } rows[] = {
      {{"gemini", "--acp", NULL}, POSTURE_GEMINI},
      {{"/opt/x/node_modules/.bin/gemini", "--acp", "--model", "m", NULL},
       POSTURE_GEMINI},
      {{"claude-agent-acp", NULL}, POSTURE_CLAUDE},
      {{"claude-code-acp", NULL}, POSTURE_CLAUDE},
      {{"npx", "-y", "@zed-industries/claude-agent-acp@0.23.1", NULL},
       POSTURE_CLAUDE},
      {{"/usr/bin/node", "/x/claude-agent-acp", NULL}, POSTURE_CLAUDE},
      {{"codex-acp", NULL}, POSTURE_CODEX},
      {{"/x/codex-acp-linux-x64/bin/codex-acp", NULL}, POSTURE_CODEX},
      {{"env", "A=1", "codex-acp", NULL}, POSTURE_CODEX},
      {{"acp-demo-agent", "--scenario", "s.json", NULL}, POSTURE_DEMO},
      {{"my-agent", NULL}, POSTURE_UNKNOWN},
      {{"geminix", NULL}, POSTURE_UNKNOWN},
      {{"codex", NULL}, POSTURE_UNKNOWN}, // the CLI, not the ACP adapter
      {{"sh", "-c", "gemini --acp", NULL}, POSTURE_UNKNOWN},
      {{"node", "--inspect", NULL}, POSTURE_UNKNOWN},
      {{"my-agent", "gemini", NULL}, POSTURE_UNKNOWN},
      {{NULL}, POSTURE_UNKNOWN},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    char desc[160];
    snprintf(desc, sizeof(desc), "family of [%s %s]",
             rows[i].argv[0] ? rows[i].argv[0] : "",
             rows[i].argv[0] && rows[i].argv[1] ? rows[i].argv[1] : "");
    is_int(posture_family_from_argv(rows[i].argv), rows[i].want, desc);
  }
  is_int(posture_family_from_argv(NULL), POSTURE_UNKNOWN, "no argv");
}

static void test_family_from_info(void) {
  is_int(posture_family_from_info("@zed-industries/claude-agent-acp"),
         POSTURE_CLAUDE, "claude-agent-acp's agentInfo");
  is_int(posture_family_from_info("gemini-cli"), POSTURE_GEMINI,
         "Gemini CLI's agentInfo");
  is_int(posture_family_from_info("codex-acp"), POSTURE_CODEX,
         "codex-acp's agentInfo");
  is_int(posture_family_from_info("acp-demo-agent"), POSTURE_DEMO,
         "the demo agent");
  is_int(posture_family_from_info("Gemini CLI"), POSTURE_UNKNOWN,
         "a title is not a name");
  is_int(posture_family_from_info(NULL), POSTURE_UNKNOWN, "no agentInfo");
  is_str(posture_family_name(POSTURE_UNKNOWN), "unknown", "name of unknown");
  is_str(posture_family_name(POSTURE_CODEX), "codex", "name of codex");
}

// The spawn arguments as one space-separated string.
static void args_are(enum posture_family f, const char *file, const char *want,
                     const char *desc) {
  const char *out[POSTURE_MAX_ARGS + 1];
  memset(out, 0xff, sizeof(out));
  size_t n = posture_spawn_args(f, file, out);
  char got[512] = "";
  for (size_t i = 0; i < n; i++) {
    if (i)
      strcat(got, " ");
    strcat(got, out[i]);
  }
  ok(n <= POSTURE_MAX_ARGS && out[n] == NULL, "%s: NULL-terminated", desc);
  is_str(got, want, desc);
}

static void test_spawn_args(void) {
  args_are(POSTURE_GEMINI, "/s/gemini-policy.toml",
           "--approval-mode default --admin-policy /s/gemini-policy.toml",
           "gemini: approval mode and the admin policy");
  args_are(POSTURE_GEMINI, NULL, "--approval-mode default",
           "gemini without a policy file");
  args_are(POSTURE_CODEX, NULL,
           "-c approval_policy=\"on-request\" -c sandbox_mode=\"read-only\"",
           "codex: config overrides of the read-only preset");
  args_are(POSTURE_CLAUDE, "/f", "", "claude: nothing at spawn");
  args_are(POSTURE_DEMO, NULL, "", "demo: nothing");
  args_are(POSTURE_UNKNOWN, NULL, "", "unknown: nothing");
  const char *pol = posture_gemini_policy();
  ok(strstr(pol, "decision = \"ask_user\"") != NULL, "policy asks");
  ok(strstr(pol, "priority = 999") != NULL, "at the top of its tier");
  static const char *const tools[] = {"\"write_file\"", "\"replace\"",
                                      "\"run_shell_command\"", "\"web_fetch\""};
  for (size_t i = 0; i < 4; i++)
    ok(strstr(pol, tools[i]) != NULL, "policy names %s", tools[i]);
}

static void test_session_meta(void) {
  ok(posture_session_meta(POSTURE_GEMINI) == NULL, "no _meta for gemini");
  ok(posture_session_meta(POSTURE_CODEX) == NULL, "no _meta for codex");
  ok(posture_session_meta(POSTURE_UNKNOWN) == NULL, "no _meta for unknown");
  json_t *meta = posture_session_meta(POSTURE_CLAUDE);
  const char *text = json_string_value(json_object_get(
      json_object_get(
          json_object_get(json_object_get(meta, "claudeCode"), "options"),
          "extraArgs"),
      "settings"));
  ok(text != NULL, "claude: claudeCode.options.extraArgs.settings");
  json_t *settings = text ? json_loads(text, 0, NULL) : NULL;
  json_t *perms = json_object_get(settings, "permissions");
  json_t *ask = json_object_get(perms, "ask");
  static const char *const want[] = {"Bash",     "Edit",      "Write",
                                     "WebFetch", "MultiEdit", "NotebookEdit"};
  for (size_t w = 0; w < sizeof(want) / sizeof(*want); w++) {
    bool found = false;
    for (size_t i = 0; i < json_array_size(ask); i++)
      found |= strcmp(json_string_value(json_array_get(ask, i)), want[w]) == 0;
    ok(found, "the flag settings ask for %s", want[w]);
  }
  is_str(json_string_value(json_object_get(perms, "defaultMode")), "default",
         "defaultMode default");
  is_str(
      json_string_value(json_object_get(perms, "disableBypassPermissionsMode")),
      "disable", "bypassPermissions disabled");
  ok(json_object_get(perms, "allow") == NULL, "no allow rule of its own");
  ok(json_is_false(json_object_get(json_object_get(settings, "sandbox"),
                                   "autoAllowBashIfSandboxed")),
     "sandboxed Bash is not auto-allowed");
  json_decref(settings);
  json_decref(meta);
}

static json_t *modes(const char *cur, const char *const *avail) {
  json_t *list = json_array();
  for (size_t i = 0; avail[i]; i++)
    json_array_append_new(
        list, json_pack("{s:s,s:s}", "id", avail[i], "name", avail[i]));
  return json_pack("{s:s?,s:o}", "currentModeId", cur, "availableModes", list);
}

static void test_modes(void) {
  is_str(posture_asking_mode(POSTURE_CLAUDE), "default",
         "claude asks in default");
  is_str(posture_asking_mode(POSTURE_GEMINI), "default",
         "gemini asks in default");
  is_str(posture_asking_mode(POSTURE_CODEX), "read-only",
         "codex asks in read-only");
  ok(posture_asking_mode(POSTURE_UNKNOWN) == NULL, "unknown: no asking mode");
  ok(posture_mode_ok(POSTURE_CLAUDE, "plan"), "plan restricts: kept");
  ok(!posture_mode_ok(POSTURE_CLAUDE, "acceptEdits"),
     "acceptEdits is not kept");
  ok(!posture_mode_ok(POSTURE_CLAUDE, "dontAsk"), "dontAsk is not kept");
  ok(!posture_mode_ok(POSTURE_CLAUDE, "bypassPermissions"),
     "bypass is not kept");
  ok(!posture_mode_ok(POSTURE_GEMINI, "autoEdit"), "autoEdit is not kept");
  ok(!posture_mode_ok(POSTURE_GEMINI, "yolo"), "yolo is not kept");
  ok(!posture_mode_ok(POSTURE_CODEX, "auto"), "codex auto is not kept");
  ok(!posture_mode_ok(POSTURE_CODEX, "full-access"), "full-access is not kept");
  ok(!posture_mode_ok(POSTURE_CODEX, "plan"), "codex has no plan mode");
  ok(posture_mode_ok(POSTURE_DEMO, "ask"), "the demo scenarios' ask mode");
  ok(!posture_mode_ok(POSTURE_UNKNOWN, "default"), "unknown: nothing is ok");
  ok(!posture_mode_ok(POSTURE_CLAUDE, NULL), "no mode is not ok");

  static const char *const claude[] = {"default", "acceptEdits", "plan",
                                       "dontAsk", NULL};
  static const char *const codex[] = {"read-only", "auto", "full-access", NULL};
  static const char *const odd[] = {"yolo", "auto", NULL};
  static const struct {
    enum posture_family f;
    const char *cur;
    const char *const *avail;
    enum posture_verdict want;
    const char *why; // a word of the reason, when unverified
  } rows[] = {
      {POSTURE_CLAUDE, "default", claude, POSTURE_ASKING, NULL},
      {POSTURE_CLAUDE, "plan", claude, POSTURE_ASKING, NULL},
      {POSTURE_CLAUDE, "acceptEdits", claude, POSTURE_SET_MODE, "acceptEdits"},
      {POSTURE_CLAUDE, "dontAsk", claude, POSTURE_SET_MODE, "dontAsk"},
      {POSTURE_CODEX, "read-only", codex, POSTURE_ASKING, NULL},
      {POSTURE_CODEX, "full-access", codex, POSTURE_SET_MODE, "full-access"},
      {POSTURE_GEMINI, "yolo", odd, POSTURE_UNVERIFIED, "offers no"},
      {POSTURE_GEMINI, NULL, odd, POSTURE_UNVERIFIED, "no session mode"},
      {POSTURE_UNKNOWN, "default", claude, POSTURE_UNVERIFIED, "does not know"},
      {POSTURE_DEMO, NULL, odd, POSTURE_ASKING, NULL},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    json_t *m = modes(rows[i].cur, rows[i].avail);
    char reason[400] = "";
    char desc[160];
    snprintf(desc, sizeof(desc), "%s in %s", posture_family_name(rows[i].f),
             rows[i].cur ? rows[i].cur : "(none)");
    is_int(posture_check(rows[i].f, m, reason, sizeof(reason)), rows[i].want,
           desc);
    if (rows[i].why)
      ok(strstr(reason, rows[i].why) != NULL, "%s: reason '%s'", desc, reason);
    json_decref(m);
  }
  char reason[400];
  is_int(posture_check(POSTURE_CLAUDE, NULL, reason, sizeof(reason)),
         POSTURE_UNVERIFIED, "claude without modes");
  is_int(posture_check(POSTURE_DEMO, NULL, reason, sizeof(reason)),
         POSTURE_ASKING, "the demo agent without modes");
  char small[8];
  is_int(posture_check(POSTURE_UNKNOWN, NULL, small, sizeof(small)),
         POSTURE_UNVERIFIED, "a small reason buffer");
  is_size(strlen(small), sizeof(small) - 1, "the reason is cut to fit");
}

// The mode :AcpMode default sets: the offered mode that asks.
static void test_default_mode(void) {
  static const char *const claude[] = {"default", "acceptEdits", "plan", NULL};
  static const char *const codex[] = {"read-only", "auto", "full-access", NULL};
  static const char *const demo[] = {"ask", "code", "plan", NULL};
  static const char *const odd[] = {"yolo", "auto", NULL};
  static const struct {
    enum posture_family f;
    const char *const *avail;
    const char *want;
  } rows[] = {
      {POSTURE_CLAUDE, claude, "default"}, {POSTURE_GEMINI, claude, "default"},
      {POSTURE_CODEX, codex, "read-only"}, {POSTURE_DEMO, demo, "ask"},
      {POSTURE_DEMO, claude, "default"},   {POSTURE_UNKNOWN, claude, "default"},
      {POSTURE_GEMINI, odd, NULL},         {POSTURE_UNKNOWN, demo, NULL},
      {POSTURE_CODEX, claude, NULL},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    json_t *m = modes("plan", rows[i].avail);
    const char *got = posture_default_mode(rows[i].f, m);
    char desc[160];
    snprintf(desc, sizeof(desc), "default mode of %s (%s, ...)",
             posture_family_name(rows[i].f), rows[i].avail[0]);
    if (rows[i].want)
      is_str(got ? got : "(none)", rows[i].want, desc);
    else
      ok(got == NULL, "%s: none", desc);
    json_decref(m);
  }
  ok(posture_default_mode(POSTURE_CLAUDE, NULL) == NULL, "no modes: none");
}

int main(void) {
  test_family_from_argv();
  test_family_from_info();
  test_spawn_args();
  test_session_meta();
  test_modes();
  test_default_mode();
  return done_testing();
}
