// Settings sources, trust and yolo (design §6), the trust store and its
// SHA-256. Each test gets a fresh HOME with XDG dirs inside it and a project
// in T/p.

#define _XOPEN_SOURCE 700 // nftw
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/mem.h"
#include "check.h"
#include "policy/settings.h"
#include "policy/trust.h"

static char T[512], P[600], H[600];

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

// A fresh T with T/p/.git and T/h; HOME and XDG_* point into T/h.
static void fresh(void) {
  if (T[0])
    nftw(T, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  const char *tmp = getenv("TMPDIR");
  snprintf(T, sizeof(T), "%s/acp-settings.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(T))
    abort();
  char *real = realpath(T, NULL);
  snprintf(T, sizeof(T), "%s", real);
  free(real);
  snprintf(P, sizeof(P), "%s/p", T);
  snprintf(H, sizeof(H), "%s/h", T);
  char dir[700];
  snprintf(dir, sizeof(dir), "%s/.git", P);
  files_mkdirs(dir);
  files_mkdirs(H);
  setenv("HOME", H, 1);
  snprintf(dir, sizeof(dir), "%s/.config", H);
  setenv("XDG_CONFIG_HOME", dir, 1);
  snprintf(dir, sizeof(dir), "%s/.local/state", H);
  setenv("XDG_STATE_HOME", dir, 1);
}

// Writes text to T/rel (parents created).
static void put(const char *rel, const char *text) {
  char path[800];
  snprintf(path, sizeof(path), "%s/%s", T, rel);
  int rc = files_replace(path, text, strlen(text), 0644);
  if (rc != 0)
    printf("# put %s: %s\n", rel, strerror(rc));
}

// The contents of T/rel, or "" (a static buffer).
static const char *get(const char *rel) {
  static char buf[4096];
  char path[800];
  snprintf(path, sizeof(path), "%s/%s", T, rel);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  buf[n] = '\0';
  if (f)
    fclose(f);
  return buf;
}

// Whether s has rule text in list, from a source ending in src.
static bool has(const struct settings *s, const char *text,
                enum policy_list list, const char *src) {
  for (size_t i = 0; i < s->nrules; i++) {
    const struct settings_rule *r = &s->rules[i];
    size_t a = strlen(r->source), b = strlen(src);
    if (!strcmp(r->text, text) && r->list == list && a >= b &&
        !strcmp(r->source + a - b, src))
      return true;
  }
  return false;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p++)
    n++;
  return n;
}

static bool ends(const char *s, const char *suffix) {
  size_t a = s ? strlen(s) : 0, b = strlen(suffix);
  return s && a >= b && !strcmp(s + a - b, suffix);
}

static void load(struct settings *s) {
  settings_load(P, NULL, s);
}

static bool trust_p(void) {
  char err[512];
  int rc = settings_trust(P, err, sizeof(err));
  if (rc != 0)
    printf("# trust: %s\n", err);
  return rc == 0;
}

// The trust hash is the trust store's format: these digests were computed
// by earlier versions (and agree with sha256sum), so trust records written
// then still match.
static void test_trust_hash(void) {
  static const struct {
    const char *json, *hex;
  } v[] = {
      {"{}",
       "f3bba840d7e70c46b80fe727b7bc6adcf2051707b1afc96088379f9271df5534"},
      {"{\".acp/settings.json\":{\"allow\":[\"Bash(make:*)\",\"Read\"],"
       "\"yolo\":true},\".claude/settings.json\":{\"defaultMode\":"
       "\"acceptEdits\"}}",
       "51287c4bcce88a613dcf33afd000313419e2987e792e5c8e457ea30b1062c106"},
      {"{\".gemini/settings.json\":{\"allow\":[\"Read(/caf\\u00e9/**)\"]}}",
       "d53af0353dbbd1b1d56f2ca0a9173ae44ae77a620960b5fb60b972aeeef9ab61"},
  };
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    json_t *j = json_loads(v[i].json, 0, NULL);
    char *hex = trust_hash(j);
    is_str(hex, v[i].hex, v[i].json);
    free(hex);
    json_decref(j);
  }
  // A record written before: the project whose permissive content is the
  // second vector is trusted by it.
  fresh();
  put("p/.acp/settings.json",
      "{\"permissions\": {\"allow\": [\"Read\", \"Bash(make:*)\", \"Read\"]},"
      " \"yolo\": true}");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"acceptEdits\"}}");
  char rec[1200];
  snprintf(rec, sizeof(rec), "{\n  \"%s\": \"%s\"\n}\n", P, v[1].hex);
  put("h/.local/state/acp-broker/trust.json", rec);
  struct settings s;
  load(&s);
  ok(s.trusted && s.yolo && s.mode == POLICY_MODE_ACCEPT_EDITS,
     "a trust record of the earlier format still matches");
  settings_free(&s);
}

// The files settings_load reads, in precedence order, then the trust store.
static void test_files_list(void) {
  fresh();
  char *f[SETTINGS_FILES_MAX];
  size_t n = settings_files(P, f);
  static const char *const want[] = {"h/.gemini/settings.json",
                                     "h/.claude/settings.json",
                                     "h/.config/acp-broker/settings.json",
                                     "p/.gemini/settings.json",
                                     "p/.claude/settings.json",
                                     "p/.acp/settings.json",
                                     "p/.claude/settings.local.json",
                                     "h/.local/state/acp-broker/trust.json"};
  bool same = n == sizeof(want) / sizeof(*want);
  for (size_t i = 0; i < n; i++) {
    char w[800];
    snprintf(w, sizeof(w), "%s/%s", T, same ? want[i] : "");
    same &= !strcmp(f[i], w);
    free(f[i]);
  }
  ok(same, "settings_files: every source file, then the trust store");
  // A project in HOME: its .claude and .gemini files are the user's.
  n = settings_files(H, f);
  same =
      n == 5 && ends(f[3], "h/.acp/settings.json") && ends(f[4], "/trust.json");
  for (size_t i = 0; i < n; i++)
    free(f[i]);
  ok(same, "settings_files: a project in HOME adds only .acp");
  unsetenv("HOME");
  unsetenv("XDG_CONFIG_HOME");
  unsetenv("XDG_STATE_HOME");
  n = settings_files(P, f);
  same = n == 4 && ends(f[0], "p/.gemini/settings.json");
  for (size_t i = 0; i < n; i++)
    free(f[i]);
  ok(same, "settings_files: no HOME, only the project's files");
  char *r = settings_rule_file(P, false);
  ok(r == NULL, "settings_rule_file: no HOME, no user file");
  fresh();
  r = settings_rule_file(P, true);
  ok(ends(r, "p/.acp/settings.json"), "settings_rule_file: the project's");
  free(r);
  r = settings_rule_file(P, false);
  ok(ends(r, "h/.config/acp-broker/settings.json"),
     "settings_rule_file: the user's");
  free(r);
}

static void test_find_root(void) {
  fresh();
  char dir[800];
  snprintf(dir, sizeof(dir), "%s/src/deep", P);
  files_mkdirs(dir);
  char *root = settings_find_root(dir);
  is_str(root, P, "root: nearest ancestor with .git");
  free(root);
  snprintf(dir, sizeof(dir), "%s/src/deep/.claude", P);
  files_mkdirs(dir);
  snprintf(dir, sizeof(dir), "%s/src/deep", P);
  root = settings_find_root(dir);
  is_str(root, dir, "root: .claude marks a project too");
  free(root);
  // HOME's .claude and .gemini are the user's settings, not a project.
  snprintf(dir, sizeof(dir), "%s/.claude", H);
  files_mkdirs(dir);
  snprintf(dir, sizeof(dir), "%s/work/x", H);
  files_mkdirs(dir);
  root = settings_find_root(dir);
  is_str(root, dir, "root: HOME's .claude does not make HOME the root");
  free(root);
  // Each mark, looked for in a directory with and without a trailing /.
  static const char *const marks[] = {".acp", ".gemini", ".git"};
  for (size_t i = 0; i < sizeof(marks) / sizeof(*marks); i++) {
    char want[700];
    snprintf(want, sizeof(want), "%s/m%zu", P, i);
    snprintf(dir, sizeof(dir), "%s/%s", want, marks[i]);
    files_mkdirs(dir);
    snprintf(dir, sizeof(dir), "%s/a/b", want);
    files_mkdirs(dir);
    root = settings_find_root(dir);
    ok(root && !strcmp(root, want), "root: %s marks a project", marks[i]);
    free(root);
    snprintf(dir, sizeof(dir), "%s/a/", want);
    root = settings_find_root(dir);
    ok(root && !strcmp(root, want), "root: %s from a cwd ending in /",
       marks[i]);
    free(root);
  }
  root = settings_find_root("/");
  is_str(root, "/", "root: / stays /");
  free(root);
}

static void test_user_sources(void) {
  fresh();
  put("h/.config/acp-broker/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(npm test)\"], \"ask\": "
      "[\"Bash(git push *)\"], \"deny\": [\"Read(./.env)\"], \"defaultMode\": "
      "\"acceptEdits\"}, \"agents\": {\"gemini\": {\"yolo\": true}, "
      "\"codex\": {\"yolo\": false}}}\n");
  put("h/.claude/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(make)\"], \"deny\": "
      "[\"WebFetch\"]}}\n");
  put("h/.gemini/settings.json",
      "{\"tools\": {\"allowed\": [\"run_shell_command(git)\"], \"exclude\": "
      "[\"run_shell_command(rm)\"], \"confirmationRequired\": "
      "[\"run_shell_command(curl)\"]}}\n");
  struct settings s;
  load(&s);
  ok(has(&s, "Bash(npm test)", POLICY_LIST_ALLOW,
         "/.config/acp-broker/settings.json"),
     "user file: permissions.allow");
  ok(has(&s, "Bash(git push *)", POLICY_LIST_ASK, "acp-broker/settings.json"),
     "user file: permissions.ask");
  ok(has(&s, "Read(./.env)", POLICY_LIST_DENY, "acp-broker/settings.json"),
     "user file: permissions.deny");
  is_int(s.mode, POLICY_MODE_ACCEPT_EDITS, "user file: defaultMode");
  ok(ends(s.mode_source, "acp-broker/settings.json"), "mode source");
  ok(json_is_true(json_object_get(s.agents_yolo, "gemini")) &&
         json_object_size(s.agents_yolo) == 1,
     "user file: agents.<name>.yolo, only the ones that are on");
  ok(has(&s, "Bash(make)", POLICY_LIST_ALLOW, "/.claude/settings.json") &&
         has(&s, "WebFetch", POLICY_LIST_DENY, "/.claude/settings.json"),
     "~/.claude: permissions.allow and deny");
  ok(has(&s, "run_shell_command(git)", POLICY_LIST_ALLOW,
         "/.gemini/settings.json"),
     "~/.gemini: tools.allowed is allow");
  ok(has(&s, "run_shell_command(rm)", POLICY_LIST_DENY,
         "/.gemini/settings.json"),
     "~/.gemini: tools.exclude is deny");
  ok(has(&s, "run_shell_command(curl)", POLICY_LIST_ASK,
         "/.gemini/settings.json"),
     "~/.gemini: tools.confirmationRequired is ask");
  ok(s.trusted && !s.has_permissive, "no project content: trusted");
  is_size(s.nerrors, 0, "no errors");
  is_size(s.nprotect, 2, "two protected files");
  ok(s.nprotect == 2 && ends(s.protect[0], "/acp-broker/settings.json") &&
         ends(s.protect[1], "/acp-broker/trust.json"),
     "protected: the user settings file and the trust store");
  struct policy_rule_text *texts;
  struct policy_input in = settings_policy_input(&s, &texts);
  ok(in.nrules == s.nrules && in.rules == texts && in.nrules > 0 &&
         in.rules[0].text == s.rules[0].text && in.mode == s.mode &&
         !strcmp(in.root, P) && !strcmp(in.home, H) && in.nprotect == 2,
     "policy input mirrors the settings");
  free(texts);
  settings_free(&s);

  put("h/.gemini/settings.json",
      "{\"general\": {\"defaultApprovalMode\": \"auto_edit\"}}\n");
  put("h/.config/acp-broker/settings.json", "{}");
  load(&s);
  is_int(s.mode, POLICY_MODE_ACCEPT_EDITS, "~/.gemini auto_edit: acceptEdits");
  settings_free(&s);
  put("h/.gemini/settings.json",
      "{\"general\": {\"defaultApprovalMode\": \"yolo\"}}\n");
  load(&s);
  ok(!s.yolo && s.mode == POLICY_MODE_DEFAULT && s.nwarnings == 1,
     "~/.gemini defaultApprovalMode yolo: ignored with a warning");
  settings_free(&s);
  put("h/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"bypassPermissions\"}}\n");
  load(&s);
  ok(s.yolo && ends(s.yolo_source, "/.claude/settings.json"),
     "~/.claude bypassPermissions: yolo");
  settings_free(&s);
}

static void test_setup(void) {
  fresh();
  json_t *setup =
      json_pack("{s:{s:[s], s:[s], s:s}, s:b, s:{s:{s:b}}}", "permissions",
                "allow", "Bash(ls)", "deny", "Bash(rm *)", "defaultMode",
                "plan", "yolo", 1, "agents", "claude", "yolo", 1);
  struct settings s;
  settings_load(P, setup, &s);
  ok(has(&s, "Bash(ls)", POLICY_LIST_ALLOW, "setup") &&
         has(&s, "Bash(rm *)", POLICY_LIST_DENY, "setup"),
     "setup: rules with source setup");
  is_int(s.mode, POLICY_MODE_PLAN, "setup: defaultMode");
  ok(s.yolo && !strcmp(s.yolo_source, "setup"), "setup: yolo");
  ok(json_is_true(json_object_get(s.agents_yolo, "claude")), "setup: agents");
  settings_free(&s);
  // The user file's false overrides setup's per-agent true (:AcpYolo off).
  put("h/.config/acp-broker/settings.json",
      "{\"agents\": {\"claude\": {\"yolo\": false}}, \"yolo\": false}");
  settings_load(P, setup, &s);
  ok(!json_object_get(s.agents_yolo, "claude"), "user agents false wins");
  // "yolo": false is no request and no veto: setup's request stands.
  ok(s.yolo && !strcmp(s.yolo_source, "setup"),
     "user \"yolo\": false does not undo setup's yolo");
  settings_free(&s);
  json_decref(setup);
  setup = json_pack("{s:[s]}", "permissions", "Bash(ls)");
  settings_load(P, setup, &s);
  ok(s.nerrors == 1 &&
         !strcmp(s.errors[0], "setup: permissions: expected an object"),
     "setup of the wrong shape: one error, skipped");
  settings_free(&s);
  json_decref(setup);
}

static void test_project_trust(void) {
  fresh();
  put("p/.acp/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(npm run lint)\"], \"deny\": "
      "[\"Bash(rm *)\"], \"ask\": [\"Bash(git push *)\"]}}\n");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(npm test)\"]}}\n");
  put("p/.claude/settings.local.json",
      "{\"permissions\": {\"allow\": [\"Bash(make)\"]}}\n");
  put("p/.gemini/settings.json",
      "{\"tools\": {\"allowed\": [\"run_shell_command(git)\"], \"exclude\": "
      "[\"run_shell_command(curl)\"]}}\n");
  struct settings s;
  load(&s);
  ok(!s.trusted && s.has_permissive, "untrusted project");
  ok(!has(&s, "Bash(npm run lint)", POLICY_LIST_ALLOW, ""),
     "untrusted: .acp allow ignored");
  ok(!has(&s, "Bash(npm test)", POLICY_LIST_ALLOW, ""),
     "untrusted: .claude allow ignored");
  ok(!has(&s, "run_shell_command(git)", POLICY_LIST_ALLOW, ""),
     "untrusted: .gemini tools.allowed ignored");
  ok(has(&s, "Bash(rm *)", POLICY_LIST_DENY, "/p/.acp/settings.json") &&
         has(&s, "Bash(git push *)", POLICY_LIST_ASK, "/p/.acp/settings.json"),
     "untrusted: deny and ask apply");
  ok(has(&s, "run_shell_command(curl)", POLICY_LIST_DENY,
         "/p/.gemini/settings.json"),
     "untrusted: .gemini tools.exclude applies");
  json_t *acp = json_object_get(s.permissive, ".acp/settings.json");
  ok(json_array_size(json_object_get(acp, "allow")) == 1 &&
         json_object_size(s.permissive) == 4,
     "permissive content listed per file");
  settings_free(&s);

  ok(trust_p(), "trust");
  load(&s);
  ok(s.trusted, "trusted after trust");
  ok(has(&s, "Bash(npm run lint)", POLICY_LIST_ALLOW,
         "/p/.acp/settings.json") &&
         has(&s, "Bash(npm test)", POLICY_LIST_ALLOW,
             "/p/.claude/settings.json") &&
         has(&s, "Bash(make)", POLICY_LIST_ALLOW,
             "/p/.claude/settings.local.json") &&
         has(&s, "run_shell_command(git)", POLICY_LIST_ALLOW,
             "/p/.gemini/settings.json"),
     "trusted: every project allow applies");
  settings_free(&s);

  // Restrictive additions and reordering keep the trust.
  put("p/.acp/settings.json",
      "{\"permissions\": {\"deny\": [\"Bash(rm *)\", \"Bash(curl *)\"], "
      "\"allow\": [\"Bash(npm run lint)\", \"Bash(npm run lint)\"], "
      "\"defaultMode\": \"plan\"}, \"other\": 1}\n");
  load(&s);
  ok(s.trusted,
     "restrictive-only change (deny, plan, dropped ask) keeps trust");
  is_int(s.mode, POLICY_MODE_PLAN, "plan applies");
  settings_free(&s);

  put("p/.claude/settings.local.json",
      "{\"permissions\": {\"allow\": [\"Bash(make)\", \"Bash(make *)\"]}}\n");
  load(&s);
  ok(!s.trusted, "a permissive change loses trust");
  ok(!has(&s, "Bash(make)", POLICY_LIST_ALLOW, ""),
     "and every project allow is ignored again");
  settings_free(&s);

  // Nothing permissive: trusted without asking.
  fresh();
  put("p/.acp/settings.json", "{\"permissions\": {\"deny\": [\"Bash\"]}}");
  load(&s);
  ok(s.trusted && !s.has_permissive, "no permissive content: trusted");
  settings_free(&s);

  // A malformed trust store trusts nothing and says so.
  put("p/.acp/settings.json", "{\"yolo\": true}");
  ok(trust_p(), "trust yolo");
  put("h/.local/state/acp-broker/trust.json", "{\"x\": ");
  load(&s);
  ok(!s.trusted && !s.yolo && s.nerrors == 1 &&
         strstr(s.errors[0], "trust.json:1:"),
     "malformed trust store: untrusted, one error with line:col");
  settings_free(&s);
  char err[256];
  ok(settings_trust(P, err, sizeof(err)) == -1 &&
         !strcmp(get("h/.local/state/acp-broker/trust.json"), "{\"x\": "),
     "a malformed trust store is not overwritten");
}

// The trust store is read as settings files are (settings_read_object).
static void test_trust_store(void) {
  fresh();
  struct settings s;
  char err[512];
  const char *store = "h/.local/state/acp-broker/trust.json";
  put("p/.acp/settings.json", "{\"yolo\": true}");
  put(store, " \n");
  ok(trust_p() && strstr(get(store), "\"/"), "a blank store is empty");
  load(&s);
  ok(s.trusted && s.yolo, "and the record written to it counts");
  settings_free(&s);
  put(store, "[]");
  load(&s);
  ok(!s.trusted && s.nerrors == 1 &&
         strstr(s.errors[0], "trust.json: expected a JSON object"),
     "a store that is not an object: untrusted, said so");
  settings_free(&s);
  ok(settings_trust(P, err, sizeof(err)) == -1 && !strcmp(get(store), "[]"),
     "and it is not overwritten");
  char path[800];
  snprintf(path, sizeof(path), "%s/%s", T, store);
  unlink(path);
  symlink("gone.json", path);
  load(&s);
  ok(!s.trusted && s.nerrors == 1 && strstr(s.errors[0], "dangling"),
     "a dangling symlink for a store: untrusted, said so");
  settings_free(&s);
  struct stat st;
  ok(settings_trust(P, err, sizeof(err)) == -1 && lstat(path, &st) == 0 &&
         S_ISLNK(st.st_mode),
     "and it is not replaced");
}

static void test_modes(void) {
  fresh();
  put("h/.config/acp-broker/settings.json",
      "{\"permissions\": {\"defaultMode\": \"acceptEdits\"}}");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"plan\"}}");
  struct settings s;
  load(&s);
  is_int(s.mode, POLICY_MODE_PLAN, "untrusted project plan wins over user");
  ok(ends(s.mode_source, "/p/.claude/settings.json"), "plan's source");
  settings_free(&s);
  put("p/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"default\"}}");
  load(&s);
  is_int(s.mode, POLICY_MODE_DEFAULT, "project default overrides user");
  settings_free(&s);
  put("h/.config/acp-broker/settings.json", "{}");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"acceptEdits\"}}");
  load(&s);
  is_int(s.mode, POLICY_MODE_DEFAULT, "untrusted acceptEdits: not applied");
  settings_free(&s);
  ok(trust_p(), "trust acceptEdits");
  load(&s);
  is_int(s.mode, POLICY_MODE_ACCEPT_EDITS, "trusted acceptEdits");
  settings_free(&s);
  put("p/.claude/settings.local.json",
      "{\"permissions\": {\"defaultMode\": \"default\"}}");
  load(&s);
  ok(s.mode == POLICY_MODE_DEFAULT && s.trusted,
     "settings.local.json beats settings.json");
  settings_free(&s);
  put("p/.claude/settings.local.json",
      "{\"permissions\": {\"defaultMode\": \"dontAsk\"}}");
  load(&s);
  ok(s.mode == POLICY_MODE_DEFAULT && s.nwarnings == 1,
     "dontAsk: default with a warning");
  settings_free(&s);
  put("p/.gemini/settings.json",
      "{\"general\": {\"defaultApprovalMode\": \"plan\"}}");
  load(&s);
  is_int(s.mode, POLICY_MODE_PLAN, "project .gemini plan");
  settings_free(&s);
}

static void test_yolo(void) {
  fresh();
  put("p/.gemini/settings.json",
      "{\"security\": {\"disableYoloMode\": false}}");
  struct settings s;
  load(&s);
  ok(!s.yolo && !s.trusted, "untrusted .gemini disableYoloMode false: no yolo");
  settings_free(&s);
  ok(trust_p(), "trust it");
  load(&s);
  ok(s.yolo && ends(s.yolo_source, "/p/.gemini/settings.json"),
     "trusted .gemini disableYoloMode false: yolo");
  settings_free(&s);

  fresh();
  put("p/.gemini/settings.json", "{\"security\": {}}");
  load(&s);
  ok(!s.yolo && !s.has_permissive, ".gemini without disableYoloMode: no yolo");
  settings_free(&s);
  put("p/.acp/settings.json", "{\"yolo\": true}");
  load(&s);
  ok(!s.yolo, "untrusted .acp yolo: off");
  settings_free(&s);
  ok(trust_p(), "trust .acp yolo");
  load(&s);
  ok(s.yolo && ends(s.yolo_source, "/p/.acp/settings.json"), ".acp yolo: on");
  settings_free(&s);

  put("h/.gemini/settings.json", "{\"security\": {\"disableYoloMode\": true}}");
  load(&s);
  ok(!s.yolo && s.veto && ends(s.veto_source, "/h/.gemini/settings.json"),
     "veto from the user ~/.gemini");
  settings_free(&s);

  fresh();
  put("h/.config/acp-broker/settings.json", "{\"yolo\": true}");
  load(&s);
  ok(s.yolo && ends(s.yolo_source, "acp-broker/settings.json"),
     "user file yolo needs no trust");
  settings_free(&s);
  put("p/.gemini/settings.json", "{\"security\": {\"disableYoloMode\": true}}");
  load(&s);
  ok(!s.yolo && s.veto && ends(s.veto_source, "/p/.gemini/settings.json") &&
         s.trusted,
     "veto from an untrusted project .gemini");
  settings_free(&s);
  put("p/.gemini/settings.json", "{}");
  put("p/.acp/settings.json", "{\"yolo\": false}");
  load(&s);
  ok(s.yolo && !s.veto,
     "project \"yolo\": false neither vetoes nor undoes another request");
  settings_free(&s);
}

static void test_malformed(void) {
  fresh();
  put("h/.config/acp-broker/settings.json",
      "{\"permissions\": {\"deny\": [\"Bash(rm *)\"]}}");
  put("p/.acp/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(npm run build)\"],\n");
  char err[512];
  ok(settings_trust(P, err, sizeof(err)) == -1 &&
         strstr(err, "trust is suspended") &&
         strstr(err, "/.acp/settings.json:2:1"),
     "trust is refused while a file is malformed, naming it");
  struct settings s;
  load(&s);
  char want[800];
  snprintf(want, sizeof(want),
           "%s/.acp/settings.json:2:1: string or '}' expected near end of "
           "file",
           P);
  ok(s.nerrors == 1 && !strcmp(s.errors[0], want),
     "invalid JSON: one error with file:line:column");
  if (s.nerrors)
    printf("# %s\n", s.errors[0]);
  ok(!has(&s, "Bash(npm run build)", POLICY_LIST_ALLOW, ""),
     "the malformed file's allow rule does not apply");
  ok(has(&s, "Bash(rm *)", POLICY_LIST_DENY, "settings.json"),
     "other files still load");
  ok(s.nbroken == 1 && !s.broken[0].user && !strcmp(s.broken[0].error, want) &&
         ends(s.broken[0].file, "/p/.acp/settings.json"),
     "the malformed file is broken, for the project");
  settings_free(&s);

  put("p/.acp/settings.json",
      "{\n  \"permissions\": {\n    \"deny\": [\"Bash(curl *)\"],\n"
      "    \"allow\": \"Bash\"\n  }\n}\n");
  load(&s);
  snprintf(want, sizeof(want),
           "%s/.acp/settings.json:4:5: permissions.allow: expected an array",
           P);
  ok(s.nerrors == 1 && !strcmp(s.errors[0], want),
     "wrong type: one error pointing at the key");
  if (s.nerrors)
    printf("# %s\n", s.errors[0]);
  ok(has(&s, "Bash(curl *)", POLICY_LIST_DENY, "/p/.acp/settings.json") &&
         s.nbroken == 1,
     "a file of the wrong shape is broken, but its deny rules still apply");
  settings_free(&s);

  put("p/.gemini/settings.json",
      "{\"security\": {\"disableYoloMode\": \"false\"}}");
  put("p/.acp/settings.json", "[]");
  load(&s);
  ok(!s.yolo && !s.veto && s.nerrors == 2 && s.nbroken == 2,
     ".gemini with a string disableYoloMode: error, no yolo; array: error");
  settings_free(&s);

  // Gemini files may hold comments, as Gemini CLI reads them.
  put("p/.gemini/settings.json",
      "{\n  // no yolo here\n  \"security\": {/* veto */ "
      "\"disableYoloMode\": true}, \"x\": \"a // b /* c\"\n}\n");
  put("p/.acp/settings.json",
      "{\"permissions\": {\"allow\": [\"Bash(ls)\", 7, \"((\"]}}");
  load(&s);
  ok(s.veto && s.nerrors == 0, "comments in a Gemini file");
  ok(s.nwarnings == 2 && s.nbroken == 0,
     "a non-string and an invalid allow rule: warnings, skipped");
  for (size_t i = 0; i < s.nwarnings; i++)
    printf("# %s\n", s.warnings[i]);
  settings_free(&s);

  // A deny or ask rule that cannot be read is a rule nobody can see: the
  // file is broken (the first one is its error, with line and column).
  put("p/.acp/settings.json",
      "{\"permissions\": {\n  \"deny\": [\"Bash(rm *)\", 7, \"((\"]}}");
  load(&s);
  snprintf(want, sizeof(want),
           "%s/.acp/settings.json:2:3: permissions.deny: entry 1 is not a "
           "string (a rule that restricts cannot be ignored)",
           P);
  ok(s.nbroken == 1 && s.nerrors == 1 && !strcmp(s.errors[0], want) &&
         s.nwarnings == 1 &&
         has(&s, "Bash(rm *)", POLICY_LIST_DENY, "/p/.acp/settings.json"),
     "a non-string deny entry breaks the file; its valid deny rule applies");
  if (s.nerrors)
    printf("# %s\n", s.errors[0]);
  settings_free(&s);
  put("h/.gemini/settings.json",
      "{\"tools\": {\"exclude\": [\"run_shell_command(git push\"]}}");
  put("p/.acp/settings.json", "{}");
  load(&s);
  ok(s.nbroken == 1 && s.broken[0].user && strstr(s.errors[0], "tools.exclude"),
     "an invalid Gemini exclude entry breaks the user file (everywhere)");
  if (s.nerrors)
    printf("# %s\n", s.errors[0]);
  settings_free(&s);
  put("h/.gemini/settings.json", "{}");
}

// ---- failing closed (design §6) ----

// Ways a settings file can exist and yet not be usable.
enum breakage {
  B_SYNTAX,   // a trailing comma
  B_TYPE,     // valid JSON, not an object
  B_DIR,      // a directory in its place
  B_DANGLING, // a symlink to nothing
  B_LOOP,     // a symlink to itself
  B_LARGE,    // valid JSON, larger than the limit
  B_FIFO,     // must not block
  B_PARENT,   // its directory is a symlink to nothing
  B_EACCES,   // no permission (only when not root: root reads anyway)
  NBREAKAGE
};

static const char *const breakage_names[] = {
    "a trailing comma", "not an object", "a directory", "a dangling symlink",
    "a symlink loop",   "too large",     "a FIFO",      "a dangling parent",
    "no permission"};

// Breaks T/rel the way b says; false when b cannot be made here.
static bool breaks(const char *rel, enum breakage b) {
  char path[800], dir[800];
  snprintf(path, sizeof(path), "%s/%s", T, rel);
  snprintf(dir, sizeof(dir), "%s", path);
  *strrchr(dir, '/') = '\0';
  if (b != B_PARENT)
    files_mkdirs(dir);
  switch (b) {
  case B_SYNTAX:
    put(rel, "{\"permissions\": {\"deny\": [\"Bash(rm *)\"]},}\n");
    return true;
  case B_TYPE:
    put(rel, "[\"Bash(rm *)\"]\n");
    return true;
  case B_DIR:
    return mkdir(path, 0755) == 0;
  case B_DANGLING:
    return symlink("no-such-file.json", path) == 0;
  case B_LOOP:
    return symlink(path, path) == 0;
  case B_LARGE: {
    size_t n = (1 << 20) + 10;
    char *big = xmalloc(n + 1);
    memset(big, ' ', n);
    memcpy(big, "{}", 2);
    big[n] = '\0';
    put(rel, big);
    free(big);
    return true;
  }
  case B_FIFO:
    return mkfifo(path, 0644) == 0;
  case B_PARENT: {
    char up[800];
    snprintf(up, sizeof(up), "%s", dir);
    *strrchr(up, '/') = '\0';
    files_mkdirs(up);
    return symlink("no-such-dir", dir) == 0;
  }
  case B_EACCES:
    if (geteuid() == 0)
      return false;
    put(rel, "{}");
    return chmod(path, 0) == 0;
  case NBREAKAGE:
    break;
  }
  return false;
}

// The decision for a shell command or a read of T/p/x under s.
static enum policy_decision decide(const struct settings *s, const char *cmd,
                                   char *reason, size_t reasonlen) {
  struct policy_rule_text *texts;
  struct policy_input in = settings_policy_input(s, &texts);
  struct policy *p = policy_new(&in, NULL, NULL);
  char file[700];
  snprintf(file, sizeof(file), "%s/x", P);
  json_t *params =
      cmd ? json_pack("{s:s, s:{s:s, s:s, s:s, s:{s:s}}}", "sessionId", "s",
                      "toolCall", "toolCallId", "t", "title", cmd, "kind",
                      "execute", "rawInput", "command", cmd)
          : json_pack("{s:s, s:{s:s, s:s, s:s, s:{s:s}, s:[{s:s}]}}",
                      "sessionId", "s", "toolCall", "toolCallId", "t", "title",
                      "Read x", "kind", "read", "rawInput", "file_path", file,
                      "locations", "path", file);
  struct policy_request *r = policy_request_new(params, P, H);
  struct policy_result res;
  policy_decide(p, NULL, r, &res);
  settings_fail_closed(s, &res);
  if (reason)
    snprintf(reason, reasonlen, "%s", res.reason);
  policy_request_free(r);
  json_decref(params);
  policy_free(p);
  free(texts);
  return res.decision;
}

// Every file that could carry deny or ask rules, broken every way, under
// yolo and under acceptEdits (from setup(), which is always readable, as is
// its deny rule): yolo, acceptEdits, allow rules and trust are gone, deny
// rules elsewhere still deny, and what nothing denies is asked.
static void test_fail_closed(void) {
  static const struct {
    const char *rel;
    bool user;
  } files[] = {
      {"p/.acp/settings.json", false},
      {"p/.claude/settings.json", false},
      {"p/.claude/settings.local.json", false},
      {"p/.gemini/settings.json", false},
      {"h/.config/acp-broker/settings.json", true},
      {"h/.claude/settings.json", true},
      {"h/.gemini/settings.json", true},
  };
  json_t *yolo =
      json_pack("{s:b, s:{s:[s], s:[s]}}", "yolo", 1, "permissions", "allow",
                "Bash(npm test)", "deny", "Bash(git push *)");
  json_t *edits = json_pack("{s:{s:s, s:[s], s:[s]}}", "permissions",
                            "defaultMode", "acceptEdits", "allow",
                            "Bash(npm test)", "deny", "Bash(git push *)");
  for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++)
    for (int b = 0; b < NBREAKAGE; b++) {
      fresh();
      // A trusted project with permissive content of its own.
      if (strcmp(files[f].rel, "p/.acp/settings.json") != 0)
        put("p/.acp/settings.json",
            "{\"yolo\": true, \"permissions\": {\"allow\": [\"Bash(ls)\"]}}");
      if (!trust_p() || !breaks(files[f].rel, (enum breakage)b))
        continue;
      struct settings s;
      settings_load(P, yolo, &s);
      char reason[256], want[900];
      snprintf(want, sizeof(want), "%s/%s", T, files[f].rel);
      // (A dangling .claude breaks both files in it.)
      bool named = false;
      for (size_t i = 0; i < s.nbroken; i++)
        named |= !strcmp(s.broken[i].file, want) &&
                 !strncmp(s.broken[i].error, want, strlen(want)) &&
                 s.broken[i].user == files[f].user;
      bool suspended = !s.yolo && !s.trusted && s.mode == POLICY_MODE_DEFAULT &&
                       json_object_size(s.agents_yolo) == 0;
      for (size_t i = 0; i < s.nrules; i++)
        suspended &= s.rules[i].list != POLICY_LIST_ALLOW;
      enum policy_decision push =
          decide(&s, "git push --force origin main", NULL, 0);
      enum policy_decision npm = decide(&s, "npm test", reason, sizeof(reason));
      enum policy_decision rd = decide(&s, NULL, NULL, 0);
      ok(named && suspended && push == POLICY_DENY && npm == POLICY_ASK &&
             rd == POLICY_ASK && strstr(reason, s.broken[0].file),
         "yolo: %s %s: %s, push denied, npm test and a read asked",
         files[f].rel, breakage_names[b],
         named ? "named, yolo, allow rules and trust suspended" : "NOT NAMED");
      if (s.nbroken)
        printf("# %s\n", s.broken[0].error);
      char *msg = settings_closed_message(&s);
      ok(msg && strstr(msg, want) &&
             strstr(msg, files[f].user ? "suspended everywhere"
                                       : "suspended for this project"),
         "the message names the file and the scope");
      free(msg);
      settings_free(&s);

      settings_load(P, edits, &s);
      ok(s.mode == POLICY_MODE_DEFAULT && !s.yolo && s.nbroken >= 1 &&
             decide(&s, "npm test", NULL, 0) == POLICY_ASK &&
             decide(&s, "git push origin x", NULL, 0) == POLICY_DENY,
         "acceptEdits: %s %s: suspended", files[f].rel, breakage_names[b]);
      settings_free(&s);
    }
  json_decref(yolo);
  json_decref(edits);

  // Restrictive content of a readable file still applies: plan from the
  // user's Claude file, the veto; and what a broken file says that could
  // be read (a valid JSON object with a key of the wrong type).
  fresh();
  put("h/.claude/settings.json",
      "{\"permissions\": {\"defaultMode\": \"plan\"}}");
  put("h/.gemini/settings.json", "{\"security\": {\"disableYoloMode\": true}}");
  put("p/.acp/settings.json",
      "{\"permissions\": {\"deny\": [\"Bash(curl *)\"], \"ask\": "
      "[\"Bash(make *)\"], \"allow\": 7}, \"yolo\": true}");
  struct settings s;
  load(&s);
  ok(s.mode == POLICY_MODE_PLAN && s.veto && !s.yolo && s.nbroken == 1 &&
         has(&s, "Bash(curl *)", POLICY_LIST_DENY, "/p/.acp/settings.json") &&
         has(&s, "Bash(make *)", POLICY_LIST_ASK, "/p/.acp/settings.json"),
     "plan and the veto of readable files, and the broken file's readable "
     "deny and ask rules, still apply");
  settings_free(&s);

  // A trusted project whose other file breaks: trust is suspended, and
  // comes back unchanged once the file is fixed.
  fresh();
  put("p/.acp/settings.json",
      "{\"yolo\": true, \"permissions\": {\"allow\": [\"Bash(npm test)\"]}}");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"deny\": [\"Read(.env)\"]}}");
  ok(trust_p(), "trusted");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"deny\": [\"Read(.env)\"],}}");
  load(&s);
  ok(!s.trusted && s.trust_matches && !s.yolo &&
         !has(&s, "Bash(npm test)", POLICY_LIST_ALLOW, ""),
     "trusted project, a broken file: trust, yolo and allow rules suspended");
  settings_free(&s);
  char err[512];
  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "Bash(make)", err,
                       sizeof(err)) == 0,
     "an allow rule can still be added (it waits for the fix)");
  put("p/.claude/settings.json",
      "{\"permissions\": {\"deny\": [\"Read(.env)\"]}}");
  load(&s);
  ok(s.trusted && s.yolo && has(&s, "Bash(npm test)", POLICY_LIST_ALLOW, "") &&
         has(&s, "Bash(make)", POLICY_LIST_ALLOW, "") && s.nbroken == 0,
     "fixed: trusted again (the person's rule kept it so), yolo and allow "
     "rules back");
  settings_free(&s);

  // Malformed setup() options fail closed everywhere, too.
  fresh();
  json_t *bad = json_pack("{s:b, s:{s:s, s:[s]}}", "yolo", 1, "permissions",
                          "allow", "Bash", "deny", "Bash(rm *)");
  settings_load(P, bad, &s);
  ok(s.nbroken == 1 && s.broken[0].user && !s.yolo &&
         has(&s, "Bash(rm *)", POLICY_LIST_DENY, "setup"),
     "malformed setup(): broken everywhere, its deny rules apply");
  settings_free(&s);
  json_decref(bad);

  // to_json reports it.
  fresh();
  put("p/.gemini/settings.json", "{\"tools\": ");
  load(&s);
  json_t *j = settings_to_json(&s);
  json_t *fc = json_object_get(j, "failClosed");
  ok(json_is_object(fc) &&
         !strcmp(json_string_value(json_object_get(fc, "scope")), "project") &&
         json_array_size(json_object_get(fc, "files")) == 1 &&
         strstr(json_string_value(json_object_get(fc, "message")),
                "/p/.gemini/settings.json:1:"),
     "to_json: failClosed with scope, files and a message");
  json_decref(j);
  settings_free(&s);
  fresh();
  load(&s);
  j = settings_to_json(&s);
  ok(json_is_null(json_object_get(j, "failClosed")),
     "to_json: failClosed null");
  json_decref(j);
  settings_free(&s);
}

static void test_add_rule(void) {
  fresh();
  char err[512];
  put("p/.acp/settings.json",
      "{\"note\": \"keep me\", \"permissions\": {\"deny\": [\"Bash(rm *)\"]}}");
  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "Bash(npm test)", err,
                       sizeof(err)) == 0,
     "add_rule: project allow");
  struct settings s;
  load(&s);
  ok(s.trusted &&
         has(&s, "Bash(npm test)", POLICY_LIST_ALLOW, "/p/.acp/settings.json"),
     "the person's rule is trusted and applies");
  settings_free(&s);
  ok(strstr(get("p/.acp/settings.json"), "\"note\": \"keep me\"") &&
         strstr(get("p/.acp/settings.json"), "\"Bash(rm *)\""),
     "existing content kept");
  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "Bash(npm test)", err,
                       sizeof(err)) == 0 &&
         count(get("p/.acp/settings.json"), "npm test") == 1,
     "adding it again changes nothing");
  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "Bash(make)", err,
                       sizeof(err)) == 0,
     "second allow");
  ok(settings_add_rule(P, true, POLICY_LIST_DENY, "WebFetch", err,
                       sizeof(err)) == 0,
     "a deny");
  load(&s);
  ok(s.trusted && has(&s, "Bash(make)", POLICY_LIST_ALLOW, "") &&
         has(&s, "WebFetch", POLICY_LIST_DENY, ""),
     "still trusted, both rules apply");
  settings_free(&s);

  // Untrusted permissive content stays untrusted when a rule is added.
  put("p/.claude/settings.json", "{\"permissions\": {\"allow\": [\"Bash\"]}}");
  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "Bash(ls)", err,
                       sizeof(err)) == 0,
     "add to an untrusted project");
  load(&s);
  ok(!s.trusted && !has(&s, "Bash", POLICY_LIST_ALLOW, ""),
     "adding a rule never trusts someone else's content");
  settings_free(&s);

  ok(settings_add_rule(P, true, POLICY_LIST_ALLOW, "((", err, sizeof(err)) ==
         -1,
     "an invalid rule is refused");
  printf("# %s\n", err);
  put("p/.acp/settings.json", "{\"permissions\": ");
  ok(settings_add_rule(P, true, POLICY_LIST_DENY, "Bash(x)", err,
                       sizeof(err)) == -1 &&
         !strcmp(get("p/.acp/settings.json"), "{\"permissions\": "),
     "a malformed file is refused, not overwritten");
  printf("# %s\n", err);
  // Valid JSON that loading skips (a key of the wrong type): adding to it
  // would write a rule that never applies (found by fuzz_settings).
  put("p/.acp/settings.json", "{\"permissions\": {\"allow\": \"notalist\"}}");
  ok(settings_add_rule(P, true, POLICY_LIST_DENY, "Bash(x)", err,
                       sizeof(err)) == -1 &&
         strstr(err, "fix it first") && strstr(err, "expected an array") &&
         !strcmp(get("p/.acp/settings.json"),
                 "{\"permissions\": {\"allow\": \"notalist\"}}"),
     "a file that loading skips is refused, with the reason");
  printf("# %s\n", err);

  ok(settings_add_rule(P, false, POLICY_LIST_ASK, "Bash(git push *)", err,
                       sizeof(err)) == 0,
     "add_rule: user file");
  load(&s);
  ok(has(&s, "Bash(git push *)", POLICY_LIST_ASK, "acp-broker/settings.json"),
     "user rule applies");
  settings_free(&s);

  ok(settings_set_agent_yolo("gemini", true, err, sizeof(err)) == 0,
     "set agent yolo");
  load(&s);
  ok(json_object_size(s.agents_yolo) == 0 &&
         has(&s, "Bash(git push *)", POLICY_LIST_ASK, ""),
     "per-agent yolo is suspended while a project file is broken");
  settings_free(&s);
  put("p/.acp/settings.json", "{}");
  load(&s);
  ok(json_is_true(json_object_get(s.agents_yolo, "gemini")) &&
         has(&s, "Bash(git push *)", POLICY_LIST_ASK, ""),
     "agent yolo on once the file is fixed, the user file's rules kept");
  settings_free(&s);
  ok(settings_set_agent_yolo("gemini", false, err, sizeof(err)) == 0,
     "agent yolo off");
  load(&s);
  ok(json_object_size(s.agents_yolo) == 0, "agent yolo off");
  settings_free(&s);
}

static void test_to_json(void) {
  fresh();
  put("p/.acp/settings.json",
      "{\"permissions\": {\"deny\": [\"Bash(rm *)\"], \"allow\": [\"Bash\"]}}");
  struct settings s;
  load(&s);
  json_t *j = settings_to_json(&s);
  const char *keys[] = {"root",       "mode",   "modeSource", "yolo",
                        "yoloSource", "veto",   "vetoSource", "trusted",
                        "rules",      "errors", "warnings",   "permissive"};
  bool all = true;
  for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
    all &= json_object_get(j, keys[i]) != NULL;
  ok(all, "to_json has every documented key");
  json_t *r = json_array_get(json_object_get(j, "rules"), 0);
  ok(json_array_size(json_object_get(j, "rules")) == 1 &&
         !strcmp(json_string_value(json_object_get(r, "list")), "deny") &&
         !strcmp(json_string_value(json_object_get(r, "rule")), "Bash(rm *)"),
     "to_json rules: {rule, list, source}");
  ok(json_is_false(json_object_get(j, "trusted")) &&
         !strcmp(json_string_value(json_object_get(j, "mode")), "default") &&
         json_is_null(json_object_get(j, "modeSource")),
     "to_json: trusted false, mode default, modeSource null");
  json_decref(j);
  settings_free(&s);
}

int main(void) {
  test_trust_hash();
  test_trust_store();
  test_files_list();
  test_find_root();
  test_user_sources();
  test_setup();
  test_project_trust();
  test_modes();
  test_yolo();
  test_malformed();
  test_fail_closed();
  test_add_rule();
  test_to_json();
  nftw(T, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  return done_testing();
}
