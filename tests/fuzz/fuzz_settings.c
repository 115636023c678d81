// The settings loader (settings_load through settings_src_file: reading,
// comment stripping, validation, rules, modes, yolo, trust, merging) and
// the project-file editor (settings_trust, settings_add_rule).
//
// Input: byte 0 selects the file and the steps; the rest is the text of one
// project settings file: .acp/settings.json, .gemini/settings.json,
// .claude/settings.json or .claude/settings.local.json (byte 0 & 3). The
// project is a private directory under $TMPDIR with HOME and the XDG
// directories beside it, empty, and no trust store: the file is untrusted.
// The file (and whatever a step wrote) is removed after each input.
//
// Properties, untrusted:
//  * every error names the file with a line and a column ("file:L:C: "),
//    and there is at most one;
//  * nothing permissive applies: no allow rule, no yolo, no acceptEdits;
//    trusted is true only when there is nothing permissive to trust and
//    no file is broken (a file with an error is broken: it fails closed);
//  * every rule kept passes policy_rule_check;
//  * fail closed: every request of fuzz_requests.h that is asked with no
//    settings file is asked or denied, never allowed (requests with an edit
//    atom are sampled: one, for a quarter of the inputs); requests that are
//    never allowed stay so.
// Then (byte 0 & 4) trusting the content makes it trusted, and keeps every
// rule the untrusted load had (trust is refused while the file is broken); (byte 0 & 8) a deny rule added with
// settings_add_rule is in effect after a reload, or the call failed and the
// file (when it is the edited one) is unchanged; the trust state is kept.
//
// tests/fuzz/regressions/settings-add-rule-malformed.bin: a rule added to a
// .acp/settings.json that loading skips as malformed (another key of the
// wrong type) used to be written and never applied; it is refused now.

#define _XOPEN_SOURCE 700 // nftw

#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_requests.h"
#include "policy/policy.h"
#include "policy/settings.h"

static const char *const files[] = {".acp/settings.json",
                                    ".gemini/settings.json",
                                    ".claude/settings.json",
                                    ".claude/settings.local.json"};
static char T[4096], P[4200], H[4200], STORE[4400];
static struct policy_request *reqs[FUZZ_NREQUESTS];
static enum policy_decision base[FUZZ_NREQUESTS];
static size_t edit_reqs[FUZZ_NREQUESTS], nedit;

static uint32_t hash(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 16777619u;
  return h;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  if (T[0])
    nftw(T, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mk(const char *fmt, const char *a) {
  char d[4400];
  snprintf(d, sizeof(d), fmt, a);
  if (mkdir(d, 0700) != 0) {
    perror(d);
    abort();
  }
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "write %s",
             path);
}

// The contents of path (malloc'd, *n bytes), or NULL.
static char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *buf = malloc(1 << 20);
  *n = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

static bool is_source(const char *source, const char *rel) {
  size_t a = strlen(source), b = strlen(rel);
  return a > b && strcmp(source + a - b, rel) == 0 && source[a - b - 1] == '/';
}

static bool has_rule(const struct settings *s, const char *text,
                     enum policy_list list) {
  for (size_t i = 0; i < s->nrules; i++)
    if (s->rules[i].list == list && strcmp(s->rules[i].text, text) == 0)
      return true;
  return false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *tmp = getenv("TMPDIR");
  char tpl[4096];
  snprintf(tpl, sizeof(tpl), "%s/acp-fuzz-settings.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(tpl)) {
    perror(tpl);
    abort();
  }
  char *real = realpath(tpl, NULL);
  snprintf(T, sizeof(T), "%s", real);
  free(real);
  atexit(cleanup);
  snprintf(P, sizeof(P), "%s/p", T);
  snprintf(H, sizeof(H), "%s/h", T);
  mk("%s/p", T);
  mk("%s/.git", P);
  mk("%s/.acp", P);
  mk("%s/.gemini", P);
  mk("%s/.claude", P);
  mk("%s/h", T);
  mk("%s/.config", H);
  mk("%s/.local", H);
  mk("%s/.local/state", H);
  char v[4400];
  setenv("HOME", H, 1);
  snprintf(v, sizeof(v), "%s/.config", H);
  setenv("XDG_CONFIG_HOME", v, 1);
  snprintf(v, sizeof(v), "%s/.local/state", H);
  setenv("XDG_STATE_HOME", v, 1);
  snprintf(v, sizeof(v), "%s/.local/share", H);
  setenv("XDG_DATA_HOME", v, 1);
  snprintf(v, sizeof(v), "%s/.cache", H);
  setenv("XDG_CACHE_HOME", v, 1);
  snprintf(STORE, sizeof(STORE), "%s/.local/state/acp-broker/trust.json", H);

  fuzz_requests_new(reqs, P, H);
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++)
    if (fuzz_request_defs[i].edits)
      edit_reqs[nedit++] = i;
  struct settings s;
  settings_load(P, NULL, &s);
  FUZZ_CHECK(s.nerrors == 0 && s.nrules == 0 && !s.yolo, "empty settings");
  struct policy_rule_text *texts;
  struct policy_input in = settings_policy_input(&s, &texts);
  struct policy *p = policy_new(&in, NULL, NULL);
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
    struct policy_result res;
    policy_decide(p, NULL, reqs[i], &res);
    base[i] = res.decision;
  }
  FUZZ_CHECK(base[0] == POLICY_ASK && base[5] == POLICY_ALLOW,
             "unexpected baseline");
  policy_free(p);
  free(texts);
  settings_free(&s);
  return 0;
}

// Every error is "<file>:<line>:<column>: ...".
static void check_errors(const struct settings *s, const char *file) {
  FUZZ_CHECK(s->nerrors <= 1, "%zu errors", s->nerrors);
  for (size_t i = 0; i < s->nerrors; i++) {
    const char *e = s->errors[i];
    size_t n = strlen(file);
    FUZZ_CHECK(strncmp(e, file, n) == 0 && e[n] == ':',
               "error without the file: %s", e);
    const char *q = e + n + 1;
    size_t d1 = strspn(q, "0123456789");
    size_t d2 = d1 && q[d1] == ':' ? strspn(q + d1 + 1, "0123456789") : 0;
    FUZZ_CHECK(d1 && d2 && q[d1 + 1 + d2] == ':',
               "error without line and column: %s", e);
  }
}

static void check_untrusted(const struct settings *s, const uint8_t *data,
                            size_t size) {
  FUZZ_CHECK(s->trusted == (!s->has_permissive && !s->nbroken),
             "trusted %d, permissive %d, broken %zu", s->trusted,
             s->has_permissive, s->nbroken);
  FUZZ_CHECK(s->nbroken == s->nerrors, "%zu broken, %zu errors", s->nbroken,
             s->nerrors);
  FUZZ_CHECK(!s->yolo && s->mode != POLICY_MODE_ACCEPT_EDITS,
             "untrusted yolo %d or mode %s", s->yolo,
             policy_mode_name(s->mode));
  for (size_t i = 0; i < s->nrules; i++) {
    char err[512];
    FUZZ_CHECK(s->rules[i].list != POLICY_LIST_ALLOW,
               "untrusted allow rule %s", s->rules[i].text);
    FUZZ_CHECK(policy_rule_check(s->rules[i].text, err, sizeof(err)) == 0,
               "invalid rule kept: %s", s->rules[i].text);
  }
  json_t *j = settings_to_json(s);
  FUZZ_CHECK(j != NULL, "settings_to_json");
  json_decref(j);

  struct policy_rule_text *texts;
  struct policy_input in = settings_policy_input(s, &texts);
  char **w = NULL;
  size_t nw = 0;
  struct policy *p = policy_new(&in, &w, &nw);
  for (size_t i = 0; i < nw; i++)
    free(w[i]);
  free(w);
  uint32_t h = hash(data, size);
  size_t edit = (h >> 24) % 4 == 0 ? edit_reqs[h % nedit] : SIZE_MAX;
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
    if (fuzz_request_defs[i].edits && i != edit)
      continue;
    struct policy_result res;
    policy_decide(p, NULL, reqs[i], &res);
    FUZZ_CHECK(res.decision != POLICY_ALLOW || base[i] == POLICY_ALLOW,
               "untrusted settings allowed request %zu (asked without): %s",
               i, res.reason);
    FUZZ_CHECK(!fuzz_request_defs[i].never_allow ||
                   res.decision != POLICY_ALLOW,
               "request %zu allowed: %s", i, res.reason);
  }
  policy_free(p);
  free(texts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  unsigned sel = data[0];
  char file[4400];
  snprintf(file, sizeof(file), "%s/%s", P, files[sel & 3]);
  write_file(file, data + 1, size - 1);

  struct settings s;
  settings_load(P, NULL, &s);
  check_errors(&s, file);
  check_untrusted(&s, data + 1, size - 1);
  bool trusted = s.trusted;

  char err[4600];
  if ((sel & 4) && s.nbroken) {
    FUZZ_CHECK(settings_trust(P, err, sizeof(err)) == -1 &&
                   strstr(err, "trust is suspended"),
               "trusted with a broken file");
  } else if (sel & 4) {
    int rc = settings_trust(P, err, sizeof(err));
    FUZZ_CHECK(rc == 0, "trust: %s", err);
    struct settings t;
    settings_load(P, NULL, &t);
    FUZZ_CHECK(t.trusted, "not trusted after settings_trust");
    for (size_t i = 0; i < s.nrules; i++)
      FUZZ_CHECK(has_rule(&t, s.rules[i].text, s.rules[i].list),
                 "trusting dropped %s", s.rules[i].text);
    trusted = true;
    settings_free(&t);
  }

  if (sel & 8) {
    static const char rule[] = "Bash(fuzz-added *)";
    char acp[4400];
    snprintf(acp, sizeof(acp), "%s/.acp/settings.json", P);
    size_t n0 = 0, n1 = 0;
    char *before = read_file(acp, &n0);
    int rc = settings_add_rule(P, true, POLICY_LIST_DENY, rule, err,
                               sizeof(err));
    struct settings a;
    settings_load(P, NULL, &a);
    if (rc == 0) {
      bool found = false;
      for (size_t i = 0; i < a.nrules; i++)
        found |= a.rules[i].list == POLICY_LIST_DENY &&
                 strcmp(a.rules[i].text, rule) == 0 &&
                 is_source(a.rules[i].source, ".acp/settings.json");
      FUZZ_CHECK(found, "added deny rule not in effect (errors: %s)",
                 a.nerrors ? a.errors[0] : "none");
      FUZZ_CHECK(a.trusted == trusted, "trust %d after adding, was %d",
                 a.trusted, trusted);
    } else {
      char *after = read_file(acp, &n1);
      FUZZ_CHECK(!before == !after &&
                     (!before || (n0 == n1 && memcmp(before, after, n0) == 0)),
                 "refused (%s) but the file changed", err);
      free(after);
    }
    free(before);
    settings_free(&a);
  }
  settings_free(&s);

  for (size_t i = 0; i < 4; i++) {
    snprintf(file, sizeof(file), "%s/%s", P, files[i]);
    unlink(file);
  }
  unlink(STORE);
  return 0;
}
