#include "settings_priv.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/files.h"
#include "base/mem.h"
#include "trust.h"

// Where a source lives.
enum src_where { AT_SETUP, AT_USER_FILE, AT_HOME, AT_ROOT };

static const char *const list_names[] = {"allow", "ask", "deny"};

static char *join(const char *a, const char *b);
static char *user_file(void);
static void merge(struct settings *s, struct src *srcs, size_t n);
static json_t *edit_child(json_t *parent, const char *key, json_type type,
                          const char *path, char *err, size_t errlen);

char *settings_find_root(const char *cwd) {
  char *start = realpath(cwd, NULL);
  if (!start)
    start = xstrdup(cwd);
  const char *home = getenv("HOME");
  char *dir = xstrdup(start);
  // Walking up never makes / a project root, and in HOME .gemini and .claude
  // hold the person's own settings, not a project's.
  while (strcmp(dir, "/") != 0) {
    static const char *const marks[] = {".git", ".acp", ".gemini", ".claude"};
    size_t nmarks = home && strcmp(dir, home) == 0 ? 2 : 4;
    // dir/mark on the stack (looked for once per epoch, broker.c
    // gate_fresh), unless dir is longer than a path can be.
    char buf[PATH_MAX + 16];
    size_t dn = strlen(dir);
    bool fits = dn + 16 <= sizeof(buf);
    if (fits) {
      memcpy(buf, dir, dn);
      if (!dn || dir[dn - 1] != '/')
        buf[dn++] = '/';
    }
    for (size_t i = 0; i < nmarks; i++) {
      char *p = fits ? buf : join(dir, marks[i]);
      if (fits)
        memcpy(buf + dn, marks[i], strlen(marks[i]) + 1);
      struct stat st;
      bool found = lstat(p, &st) == 0;
      if (!fits)
        free(p);
      if (found) {
        free(start);
        return dir;
      }
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
      break;
    slash[slash == dir ? 1 : 0] = '\0';
  }
  free(dir);
  return start;
}

// The sources, lowest precedence first: setup < user < project <
// project-local. settings_files lists the files among them for a cache.
static const struct {
  enum src_kind kind;
  enum src_where where;
  const char *rel;
} sources[] = {
    {SRC_ACP, AT_SETUP, NULL},
    {SRC_GEMINI, AT_HOME, ".gemini/settings.json"},
    {SRC_CLAUDE, AT_HOME, ".claude/settings.json"},
    {SRC_ACP, AT_USER_FILE, NULL},
    {SRC_GEMINI, AT_ROOT, ".gemini/settings.json"},
    {SRC_CLAUDE, AT_ROOT, ".claude/settings.json"},
    {SRC_ACP, AT_ROOT, ".acp/settings.json"},
    {SRC_CLAUDE, AT_ROOT, ".claude/settings.local.json"},
};
enum { NSOURCES = sizeof(sources) / sizeof(sources[0]) };
// Every file source and the trust store fit in settings_files' array.
_Static_assert(NSOURCES <= SETTINGS_FILES_MAX, "SETTINGS_FILES_MAX");

const char *const settings_env[SETTINGS_NENV] = {"HOME", "XDG_CONFIG_HOME",
                                                 "XDG_STATE_HOME"};

// root resolved (a new string), as settings_load keeps it.
static char *real_root(const char *root) {
  char *r = realpath(root, NULL);
  return r ? r : xstrdup(root);
}

// $HOME when it is absolute, else "".
static const char *home_dir(void) {
  const char *home = getenv("HOME");
  return home && home[0] == '/' ? home : "";
}

// The file of sources[i] for the resolved root (a new string), or NULL
// when there is none to read: setup(), no HOME, or a project in HOME,
// whose .claude and .gemini files are the user's.
static char *source_path(size_t i, const char *root, const char *home,
                         const char *user) {
  switch (sources[i].where) {
  case AT_SETUP:
    return NULL;
  case AT_USER_FILE:
    return user ? xstrdup(user) : NULL;
  case AT_HOME:
    return *home ? join(home, sources[i].rel) : NULL;
  case AT_ROOT:
    break;
  }
  bool root_is_home = *home && strcmp(root, home) == 0;
  return !root_is_home || sources[i].kind == SRC_ACP
             ? join(root, sources[i].rel)
             : NULL;
}

size_t settings_files(const char *root, char *out[SETTINGS_FILES_MAX]) {
  char *real = real_root(root), *user = user_file();
  size_t n = 0;
  for (size_t i = 0; i < NSOURCES; i++) {
    char *p = source_path(i, real, home_dir(), user);
    if (p)
      out[n++] = p;
  }
  char *store = trust_store_path(); // is_trusted reads it
  if (store)
    out[n++] = store;
  free(user);
  free(real);
  return n;
}

void settings_load(const char *root, const json_t *setup, struct settings *s) {
  memset(s, 0, sizeof(*s));
  s->root = real_root(root);
  s->home = xstrdup(home_dir());
  char *user = user_file();
  char *store = trust_store_path();
  s->protect = xcalloc(2, sizeof(*s->protect));
  if (user)
    s->protect[s->nprotect++] = xstrdup(user);
  if (store)
    s->protect[s->nprotect++] = store;

  struct src srcs[NSOURCES];
  size_t n = 0;
  for (size_t i = 0; i < NSOURCES; i++) {
    struct src *src = &srcs[n];
    bool at_setup = sources[i].where == AT_SETUP;
    *src =
        (struct src){.kind = sources[i].kind, .mode = MODE_UNSET, .yolo = -1};
    src->label = at_setup ? (setup ? xstrdup("setup") : NULL)
                          : source_path(i, s->root, s->home, user);
    src->rel = sources[i].where == AT_ROOT ? sources[i].rel : NULL;
    // Loaded or broken: a broken source stays, for what it restricts.
    bool loaded = src->label && (at_setup ? settings_src_setup(s, src, setup)
                                          : settings_src_file(s, src));
    if (loaded)
      n++;
    else
      settings_src_free(src);
  }
  merge(s, srcs, n);
  for (size_t i = 0; i < n; i++)
    settings_src_free(&srcs[i]);
  free(user);
}

void settings_free(struct settings *s) {
  for (size_t i = 0; i < s->nrules; i++) {
    free(s->rules[i].text);
    free(s->rules[i].source);
  }
  free(s->rules);
  for (size_t i = 0; i < s->nerrors; i++)
    free(s->errors[i]);
  free(s->errors);
  for (size_t i = 0; i < s->nwarnings; i++)
    free(s->warnings[i]);
  free(s->warnings);
  for (size_t i = 0; i < s->nbroken; i++) {
    free(s->broken[i].file);
    free(s->broken[i].error);
  }
  free(s->broken);
  for (size_t i = 0; i < s->nprotect; i++)
    free(s->protect[i]);
  free(s->protect);
  free(s->root);
  free(s->home);
  free(s->mode_source);
  free(s->yolo_source);
  free(s->veto_source);
  json_decref(s->permissive);
  json_decref(s->agents_yolo);
  memset(s, 0, sizeof(*s));
}

struct policy_input settings_policy_input(const struct settings *s,
                                          struct policy_rule_text **texts) {
  struct policy_rule_text *t = xcalloc(s->nrules, sizeof(*t));
  for (size_t i = 0; i < s->nrules; i++)
    t[i] = (struct policy_rule_text){.text = s->rules[i].text,
                                     .list = s->rules[i].list,
                                     .source = s->rules[i].source};
  *texts = t;
  return (struct policy_input){
      .rules = t,
      .nrules = s->nrules,
      .mode = s->mode,
      .yolo = s->yolo,
      .root = s->root,
      .home = s->home,
      .protect = (const char *const *)s->protect,
      .nprotect = s->nprotect,
  };
}

bool settings_fail_closed(const struct settings *s, struct policy_result *res) {
  bool allow = res->decision == POLICY_ALLOW;
  bool unruled = res->decision == POLICY_ASK && res->by == POLICY_BY_DEFAULT;
  if (!s->nbroken || !(allow || unruled))
    return false;
  const struct settings_broken *b = &s->broken[0];
  char why[sizeof(res->reason)];
  snprintf(why, sizeof(why),
           "%s cannot be used, so allow rules, yolo and acceptEdits are "
           "suspended %s until it is fixed",
           b->file, b->user ? "everywhere" : "in this project");
  if (allow) {
    res->decision = POLICY_ASK;
    res->by = POLICY_BY_DEFAULT;
    res->rule[0] = '\0';
    snprintf(res->reason, sizeof(res->reason), "asked: %.240s", why);
  } else {
    // Say why yolo or a rule did not allow it.
    size_t n = strlen(res->reason);
    snprintf(res->reason + n, sizeof(res->reason) - n, "; %s", why);
  }
  snprintf(res->source, sizeof(res->source), "%s", b->file);
  return true;
}

// "for this project", "everywhere": where the broken files suspend things.
static bool closed_everywhere(const struct settings *s) {
  for (size_t i = 0; i < s->nbroken; i++)
    if (s->broken[i].user)
      return true;
  return false;
}

// The broken files' errors joined with "; ", then suffix.
static char *broken_list(const struct settings *s, const char *prefix,
                         const char *suffix) {
  size_t n = strlen(prefix) + strlen(suffix) + 1;
  for (size_t i = 0; i < s->nbroken; i++)
    n += strlen(s->broken[i].error) + 2;
  char *out = xmalloc(n);
  strcpy(out, prefix);
  for (size_t i = 0; i < s->nbroken; i++) {
    if (i)
      strcat(out, "; ");
    strcat(out, s->broken[i].error);
  }
  strcat(out, suffix);
  return out;
}

char *settings_closed_message(const struct settings *s) {
  if (!s->nbroken)
    return NULL;
  char suffix[400];
  snprintf(suffix, sizeof(suffix),
           ". Until %s fixed, yolo, acceptEdits, allow rules and trust are "
           "suspended %s: deny and ask rules of the other files still apply "
           "and everything else is asked",
           s->nbroken == 1 ? "it is" : "they are",
           closed_everywhere(s) ? "everywhere" : "for this project");
  return broken_list(s,
                     s->nbroken == 1 ? "settings file cannot be used: "
                                     : "settings files cannot be used: ",
                     suffix);
}

bool settings_refuse(const struct settings *s, const char *what, char *err,
                     size_t errlen) {
  if (!s->nbroken)
    return false;
  char prefix[128];
  snprintf(prefix, sizeof(prefix), "%s is suspended until %s fixed: ", what,
           s->nbroken == 1 ? "this settings file is"
                           : "these settings files are");
  char *msg = broken_list(s, prefix, "");
  snprintf(err, errlen, "%s", msg);
  free(msg);
  return true;
}

// Writes the hash of the project's permissive content as s sees it.
static int trust_write(const struct settings *s, char *err, size_t errlen) {
  char *hash = trust_hash(s->permissive);
  int rc = trust_put(s->root, hash, err, errlen);
  free(hash);
  return rc;
}

int settings_trust(const char *root, char *err, size_t errlen) {
  struct settings s;
  settings_load(root, NULL, &s);
  int rc = settings_refuse(&s, "trust", err, errlen)
               ? -1
               : trust_write(&s, err, errlen);
  settings_free(&s);
  return rc;
}

// The error for which settings_load found path broken, or NULL.
static const char *file_error(const struct settings *s, const char *path) {
  size_t n = strlen(path);
  for (size_t i = 0; i < s->nerrors; i++)
    if (strncmp(s->errors[i], path, n) == 0 && s->errors[i][n] == ':')
      return s->errors[i];
  return NULL;
}

int settings_add_rule(const char *root, bool project, enum policy_list list,
                      const char *rule, char *err, size_t errlen) {
  char why[256];
  if (policy_rule_check(rule, why, sizeof(why)) != 0) {
    snprintf(err, errlen, "invalid rule %s: %s", rule, why);
    return -1;
  }
  char *path = settings_rule_file(root, project);
  if (!path) {
    snprintf(err, errlen, "HOME is not set: no user settings file");
    return -1;
  }
  // The person's own rule keeps a trusted project trusted: the hash is
  // renewed only when the content before the edit was trusted. A file that
  // loading skips as malformed would take the rule and never apply it:
  // refuse, and say what to fix.
  struct settings s;
  settings_load(root, NULL, &s);
  // (A project trusted but for another broken file: the hash still
  // follows the person's own rule.)
  bool retrust = project && s.trust_matches && list == POLICY_LIST_ALLOW;
  const char *broken = file_error(&s, path);
  if (broken)
    snprintf(err, errlen, "%s cannot be used; fix it first (%s)", path, broken);
  settings_free(&s);
  if (broken) {
    free(path);
    return -1;
  }
  int rc = -1;
  json_t *doc = settings_read_object(path, SETTINGS_FILE_MAX, err, errlen);
  json_t *perms =
      doc ? edit_child(doc, "permissions", JSON_OBJECT, path, err, errlen)
          : NULL;
  json_t *arr =
      perms ? edit_child(perms, list_names[list], JSON_ARRAY, path, err, errlen)
            : NULL;
  if (arr) {
    bool present = false;
    for (size_t i = 0; i < json_array_size(arr); i++)
      present |= json_is_string(json_array_get(arr, i)) &&
                 !strcmp(json_string_value(json_array_get(arr, i)), rule);
    rc = present ? 0 : json_array_append_new(arr, json_string(rule));
    if (rc == 0 && !present)
      rc = settings_write_object(path, doc, JSON_INDENT(2), 0644, err, errlen);
  }
  if (rc == 0 && retrust) {
    struct settings now;
    settings_load(root, NULL, &now);
    rc = trust_write(&now, err, errlen);
    settings_free(&now);
  }
  json_decref(doc);
  free(path);
  return rc;
}

int settings_set_agent_yolo(const char *name, bool on, char *err,
                            size_t errlen) {
  if (!name || !*name) {
    snprintf(err, errlen, "no agent name");
    return -1;
  }
  char *path = user_file();
  if (!path) {
    snprintf(err, errlen, "HOME is not set: no user settings file");
    return -1;
  }
  int rc = -1;
  json_t *doc = settings_read_object(path, SETTINGS_FILE_MAX, err, errlen);
  json_t *agents =
      doc ? edit_child(doc, "agents", JSON_OBJECT, path, err, errlen) : NULL;
  json_t *agent =
      agents ? edit_child(agents, name, JSON_OBJECT, path, err, errlen) : NULL;
  // Off is written as false, not removed: it must override setup()'s true.
  if (agent && json_object_set_new(agent, "yolo", json_boolean(on)) == 0)
    rc = settings_write_object(path, doc, JSON_INDENT(2), 0644, err, errlen);
  json_decref(doc);
  free(path);
  return rc;
}

json_t *settings_to_json(const struct settings *s) {
  json_t *rules = json_array();
  for (size_t i = 0; i < s->nrules; i++)
    json_array_append_new(rules,
                          json_pack("{s:s, s:s, s:s}", "rule", s->rules[i].text,
                                    "list", list_names[s->rules[i].list],
                                    "source", s->rules[i].source));
  json_t *errors = json_array(), *warnings = json_array();
  for (size_t i = 0; i < s->nerrors; i++)
    json_array_append_new(errors, json_string(s->errors[i]));
  for (size_t i = 0; i < s->nwarnings; i++)
    json_array_append_new(warnings, json_string(s->warnings[i]));
  json_t *protect = json_array();
  for (size_t i = 0; i < s->nprotect; i++)
    json_array_append_new(protect, json_string(s->protect[i]));
  return json_pack(
      "{s:s, s:s, s:s?, s:b, s:s?, s:b, s:s?, s:b, s:b, s:O, s:O, s:o, s:o, "
      "s:o, s:o, s:o}",
      "root", s->root, "mode", policy_mode_name(s->mode), "modeSource",
      s->mode_source, "yolo", s->yolo, "yoloSource", s->yolo_source, "veto",
      s->veto, "vetoSource", s->veto_source, "trusted", s->trusted,
      "hasPermissive", s->has_permissive, "permissive", s->permissive, "agents",
      s->agents_yolo, "rules", rules, "protect", protect, "errors", errors,
      "warnings", warnings, "failClosed", settings_closed_json(s));
}

json_t *settings_closed_json(const struct settings *s) {
  if (!s->nbroken)
    return json_null();
  json_t *files = json_array();
  for (size_t i = 0; i < s->nbroken; i++)
    json_array_append_new(
        files, json_pack("{s:s, s:s, s:s}", "file", s->broken[i].file, "error",
                         s->broken[i].error, "scope",
                         s->broken[i].user ? "user" : "project"));
  char *msg = settings_closed_message(s);
  json_t *j = json_pack("{s:s, s:o, s:[s,s,s,s], s:s}", "scope",
                        closed_everywhere(s) ? "everywhere" : "project",
                        "files", files, "suspended", "yolo", "acceptEdits",
                        "allow rules", "trust", "message", msg);
  free(msg);
  return j ? j : json_null();
}

// ---------------------------------------------------------------------------
// Paths

// a/b (a's own trailing slash kept alone); a new string.
static char *join(const char *a, const char *b) {
  size_t an = strlen(a), bn = strlen(b);
  char *p = xmalloc(an + bn + 2);
  memcpy(p, a, an);
  if (!an || a[an - 1] != '/')
    p[an++] = '/';
  memcpy(p + an, b, bn + 1);
  return p;
}

static char *user_file(void) {
  return files_xdg_path("XDG_CONFIG_HOME", ".config",
                        "acp-broker/settings.json");
}

char *settings_rule_file(const char *root, bool project) {
  return project ? join(root, ".acp/settings.json") : user_file();
}

// ---------------------------------------------------------------------------
// Pooling the sources

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The allow rules of arr sorted, without duplicates: the order of a list
// changes nothing it allows, so it does not change the trust hash either.
static json_t *sorted_set(const json_t *arr) {
  size_t n = json_array_size(arr);
  const char **v = xcalloc(n, sizeof(*v));
  for (size_t i = 0; i < n; i++)
    v[i] = json_string_value(json_array_get(arr, i));
  qsort(v, n, sizeof(*v), cmp_str);
  json_t *out = json_array();
  for (size_t i = 0; i < n; i++)
    if (i == 0 || strcmp(v[i], v[i - 1]) != 0)
      json_array_append_new(out, json_string(v[i]));
  free(v);
  return out;
}

// What trusting the project enables, per file: {"<rel>": {"allow": [...],
// "defaultMode": "acceptEdits", "yolo": true}}. It is both what :AcpTrust
// shows and what the trust hash covers.
static json_t *permissive_of(const struct src *srcs, size_t n) {
  json_t *all = json_object();
  for (size_t i = 0; i < n; i++) {
    if (!srcs[i].rel || srcs[i].broken)
      continue;
    json_t *p = json_object();
    if (json_array_size(srcs[i].rules[POLICY_LIST_ALLOW]))
      json_object_set_new(p, "allow",
                          sorted_set(srcs[i].rules[POLICY_LIST_ALLOW]));
    if (srcs[i].mode == POLICY_MODE_ACCEPT_EDITS)
      json_object_set_new(p, "defaultMode", json_string("acceptEdits"));
    if (srcs[i].yolo == 1)
      json_object_set_new(p, "yolo", json_true());
    if (json_object_size(p))
      json_object_set_new(all, srcs[i].rel, p);
    else
      json_decref(p);
  }
  return all;
}

static bool is_trusted(struct settings *s) {
  if (!s->has_permissive)
    return true;
  char err[512], *stored = NULL;
  if (trust_get(s->root, &stored, err, sizeof(err)) != 0) {
    settings_push(&s->errors, &s->nerrors, "%s", err);
    return false;
  }
  char *hash = trust_hash(s->permissive);
  bool same = stored && strcmp(stored, hash) == 0;
  free(hash);
  free(stored);
  return same;
}

static void add_rule(struct settings *s, const char *text,
                     enum policy_list list, const char *source) {
  s->rules = xrealloc(s->rules, (s->nrules + 1) * sizeof(*s->rules));
  s->rules[s->nrules++] = (struct settings_rule){
      .text = xstrdup(text), .list = list, .source = xstrdup(source)};
}

// Precedence (design §6; Claude's scalar order, with trust):
//  * rules are pooled from every source; a project's allow rules only when
//    the project is trusted;
//  * mode: plan from any source, trusted or not, wins (it is restrictive).
//    Otherwise the latest source in the order setup < ~/.gemini < ~/.claude
//    < user file < .gemini < .claude/settings.json < .acp <
//    .claude/settings.local.json that sets a mode decides, except that a
//    project's acceptEdits counts only when trusted (its "default" always
//    counts: it only restricts);
//  * yolo is on when any source requests it (design: the project's
//    .gemini or .acp, the user file, setup()): a project's request (yolo:
//    true, bypassPermissions, .gemini disableYoloMode: false) only when
//    trusted. "yolo": false is no request, not a veto: only
//    security.disableYoloMode: true in any Gemini file vetoes yolo.
// A broken source fails closed (design §6): while there is one, no allow
// rule, yolo, acceptEdits or per-agent yolo applies and nothing is trusted;
// what could be read of it that restricts (deny and ask rules, plan, the
// veto) applies like any other file's.
static void merge(struct settings *s, struct src *srcs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (srcs[i].broken) {
      s->broken = xrealloc(s->broken, (s->nbroken + 1) * sizeof(*s->broken));
      s->broken[s->nbroken++] =
          (struct settings_broken){.file = xstrdup(srcs[i].label),
                                   .error = xstrdup(srcs[i].error),
                                   .user = srcs[i].rel == NULL};
    }
  bool closed = s->nbroken > 0;
  s->permissive = permissive_of(srcs, n);
  s->has_permissive = json_object_size(s->permissive) > 0;
  s->trust_matches = is_trusted(s);
  s->trusted = s->trust_matches && !closed;
  for (size_t i = 0; i < n; i++)
    for (int l = POLICY_LIST_ALLOW; l <= POLICY_LIST_DENY; l++)
      if (!(l == POLICY_LIST_ALLOW && (closed || (srcs[i].rel && !s->trusted))))
        for (size_t j = 0; j < json_array_size(srcs[i].rules[l]); j++)
          add_rule(s, json_string_value(json_array_get(srcs[i].rules[l], j)),
                   (enum policy_list)l, srcs[i].label);
  const struct src *mode = NULL, *plan = NULL, *yolo = NULL, *veto = NULL;
  s->agents_yolo = json_object();
  for (size_t i = 0; i < n; i++) {
    const struct src *c = &srcs[i];
    bool applies = !closed && (!c->rel || s->trusted);
    if (c->mode == POLICY_MODE_PLAN)
      plan = c;
    if (c->mode != MODE_UNSET &&
        (c->mode != POLICY_MODE_ACCEPT_EDITS || applies))
      mode = c;
    if (c->yolo == 1 && applies && !yolo)
      yolo = c;
    if (c->veto && !veto)
      veto = c;
    if (!closed)
      json_object_update(s->agents_yolo, c->agents);
  }
  mode = plan ? plan : mode;
  s->mode = mode ? (enum policy_mode)mode->mode : POLICY_MODE_DEFAULT;
  s->mode_source = mode ? xstrdup(mode->label) : NULL;
  s->veto = veto != NULL;
  s->veto_source = veto ? xstrdup(veto->label) : NULL;
  s->yolo = yolo && yolo->yolo == 1 && !veto;
  s->yolo_source = s->yolo ? xstrdup(yolo->label) : NULL;
  // Only the agents that are on: {"name": true}.
  const char *name;
  json_t *on, *tmp;
  json_object_foreach_safe(s->agents_yolo, tmp, name, on) {
    if (!json_is_true(on))
      json_object_del(s->agents_yolo, name);
  }
}

// ---------------------------------------------------------------------------
// Editing files

// parent[key], created when missing; NULL with err when it has another type.
static json_t *edit_child(json_t *parent, const char *key, json_type type,
                          const char *path, char *err, size_t errlen) {
  json_t *v = json_object_get(parent, key);
  if (!v) {
    v = type == JSON_ARRAY ? json_array() : json_object();
    json_object_set_new(parent, key, v);
  }
  if (json_typeof(v) != type) {
    snprintf(err, errlen, "%s: %s: expected %s", path, key,
             type == JSON_ARRAY ? "an array" : "an object");
    return NULL;
  }
  return v;
}

int settings_write_object(const char *path, const json_t *doc, size_t flags,
                          int mode, char *err, size_t errlen) {
  char *text = json_dumps(doc, flags);
  size_t n = strlen(text);
  text = xrealloc(text, n + 2);
  text[n++] = '\n';
  int rc = files_replace(path, text, n, mode);
  if (rc != 0)
    snprintf(err, errlen, "%s: %s", path, strerror(rc));
  free(text);
  return rc ? -1 : 0;
}
