#include "settings_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/mem.h"

enum ftype { F_OBJECT, F_ARRAY, F_STRING, F_BOOL };

// The keys read from each kind of file, parents first. Any other key is
// left alone (the files are shared with other tools); one of these with
// another type makes the whole file malformed.
struct field {
  const char *path;
  enum ftype type;
};

static const struct field acp_fields[] = {
    {"permissions", F_OBJECT},
    {"permissions.allow", F_ARRAY},
    {"permissions.ask", F_ARRAY},
    {"permissions.deny", F_ARRAY},
    {"permissions.defaultMode", F_STRING},
    {"yolo", F_BOOL},
    {"agents", F_OBJECT},
    {NULL, F_OBJECT},
};

static const struct field claude_fields[] = {
    {"permissions", F_OBJECT},
    {"permissions.allow", F_ARRAY},
    {"permissions.ask", F_ARRAY},
    {"permissions.deny", F_ARRAY},
    {"permissions.defaultMode", F_STRING},
    {NULL, F_OBJECT},
};

static const struct field gemini_fields[] = {
    {"tools", F_OBJECT},        {"tools.allowed", F_ARRAY},
    {"tools.exclude", F_ARRAY}, {"tools.confirmationRequired", F_ARRAY},
    {"security", F_OBJECT},     {"security.disableYoloMode", F_BOOL},
    {"general", F_OBJECT},      {"general.defaultApprovalMode", F_STRING},
    {NULL, F_OBJECT},
};

static const char *const list_names[] = {"allow", "ask", "deny"};
static const char *const type_names[] = {"an object", "an array", "a string",
                                         "true or false"};

static json_t *file_load(struct settings *s, const char *path,
                         enum src_kind kind, bool *broken, char **text);
static bool validate(struct settings *s, const char *label, const char *text,
                     const json_t *doc, enum src_kind kind);
static void src_read(struct settings *s, struct src *src, json_t *doc,
                     const char *text);

// Marks src broken with the error validate or file_load pushed last.
static void set_broken(struct settings *s, struct src *src) {
  src->broken = true;
  src->error = xstrdup(s->nerrors ? s->errors[s->nerrors - 1] : src->label);
}

bool settings_src_file(struct settings *s, struct src *src) {
  bool broken = false;
  char *text = NULL;
  json_t *doc = file_load(s, src->label, src->kind, &broken, &text);
  if (broken)
    set_broken(s, src);
  if (doc)
    src_read(s, src, doc, text);
  free(text);
  json_decref(doc);
  return doc != NULL || broken;
}

bool settings_src_setup(struct settings *s, struct src *src,
                        const json_t *setup) {
  if (!validate(s, "setup", NULL, setup, SRC_ACP))
    set_broken(s, src);
  if (!json_is_object(setup))
    return true;
  json_t *doc = json_deep_copy(setup);
  src_read(s, src, doc, NULL);
  json_decref(doc);
  return true;
}

void settings_push(char ***v, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *line = xmalloc((size_t)(len > 0 ? len : 0) + 1);
  va_start(ap, fmt);
  vsnprintf(line, (size_t)(len > 0 ? len : 0) + 1, fmt, ap);
  va_end(ap);
  *v = xrealloc(*v, (*n + 1) * sizeof(**v));
  (*v)[(*n)++] = line;
}

void settings_src_free(struct src *src) {
  free(src->label);
  free(src->error);
  for (size_t i = 0; i < 3; i++)
    json_decref(src->rules[i]);
  json_decref(src->agents);
}

enum settings_file settings_file_probe(const char *path, struct stat *st,
                                       size_t *exists, char *why,
                                       size_t whylen) {
  struct stat tmp;
  size_t len_tmp;
  st = st ? st : &tmp;
  exists = exists ? exists : &len_tmp;
  memset(st, 0, sizeof(*st));
  *exists = 0;
  if (whylen)
    why[0] = '\0';
  if (stat(path, st) == 0) {
    if (S_ISREG(st->st_mode))
      return SETTINGS_FILE;
    snprintf(why, whylen, "%s",
             S_ISDIR(st->st_mode) ? "is a directory" : "is not a regular file");
    return SETTINGS_BROKEN;
  }
  if (errno != ENOENT && errno != ENOTDIR) { // ELOOP, EACCES, EIO, ...
    snprintf(why, whylen, "%s", strerror(errno));
    return SETTINGS_BROKEN;
  }
  // Nothing there, unless the deepest thing that is there on the way is a
  // symlink to nothing: the file, or the directory it would be in.
  enum settings_file r = SETTINGS_ABSENT;
  char *p = xstrdup(path);
  for (;;) {
    struct stat lst, tst;
    if (lstat(p, &lst) == 0) {
      if (S_ISLNK(lst.st_mode) && stat(p, &tst) != 0) {
        char to[256];
        ssize_t n = readlink(p, to, sizeof(to) - 1);
        to[n > 0 ? n : 0] = '\0';
        if (strcmp(p, path) == 0)
          snprintf(why, whylen, "is a dangling symbolic link (to %s)", to);
        else
          snprintf(why, whylen, "%s is a dangling symbolic link (to %s)", p,
                   to);
        r = SETTINGS_BROKEN;
      } else if (stat(p, st) == 0) {
        *exists = strlen(p);
      } else {
        memset(st, 0, sizeof(*st));
      }
      break;
    }
    char *slash = strrchr(p, '/');
    if (!slash || slash == p)
      break;
    *slash = '\0';
  }
  free(p);
  return r;
}

// settings_slurp with a limit of max bytes.
static int slurp(const char *path, size_t max, char **text, size_t *len,
                 char *err, size_t errlen) {
  *text = NULL;
  *len = 0;
  char why[512];
  struct stat st;
  enum settings_file what =
      settings_file_probe(path, &st, NULL, why, sizeof(why));
  if (what == SETTINGS_ABSENT)
    return 0;
  if (what == SETTINGS_BROKEN) {
    snprintf(err, errlen, "%s: %s", path, why);
    return -1;
  }
  int rc = files_slurp(path, max, text, len);
  if (rc == ENOENT) // gone since it was looked at
    return 0;
  if (rc == EFBIG)
    snprintf(err, errlen, "%s: is larger than %zu MiB", path, max >> 20);
  else if (rc != 0)
    snprintf(err, errlen, "%s: %s", path,
             rc == EISDIR || rc == EINVAL ? "is not a regular file"
                                          : strerror(rc));
  return rc ? -1 : 0;
}

int settings_slurp(const char *path, char **text, size_t *len, char *err,
                   size_t errlen) {
  return slurp(path, SETTINGS_FILE_MAX, text, len, err, errlen);
}

// text (len bytes, NUL-terminated) as JSON; blank text is an empty object,
// as in Claude Code and Gemini CLI. NULL with "path:line:col: message" in
// err when it is not JSON.
static json_t *parse(const char *path, const char *text, size_t len, char *err,
                     size_t errlen) {
  if (strspn(text, " \t\r\n") == len)
    return json_object();
  json_error_t jerr;
  json_t *doc = json_loadb(text, len, 0, &jerr);
  if (!doc)
    snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line,
             jerr.column > 0 ? jerr.column : 1, jerr.text);
  return doc;
}

json_t *settings_read_object(const char *path, size_t max, char *err,
                             size_t errlen) {
  char *text;
  size_t len;
  if (slurp(path, max, &text, &len, err, errlen) != 0)
    return NULL;
  json_t *doc = text ? parse(path, text, len, err, errlen) : json_object();
  free(text);
  if (doc && !json_is_object(doc)) {
    snprintf(err, errlen, "%s: expected a JSON object", path);
    json_decref(doc);
    doc = NULL;
  }
  return doc;
}

// Gemini CLI reads its settings through strip-json-comments: // and /* */
// comments outside strings become spaces (newlines stay, so line and column
// numbers still point into the file).
static void strip_comments(char *t) {
  bool in_str = false;
  for (char *p = t; *p; p++) {
    if (in_str) {
      if (*p == '\\' && p[1])
        p++;
      else if (*p == '"')
        in_str = false;
    } else if (*p == '"') {
      in_str = true;
    } else if (p[0] == '/' && p[1] == '/') {
      for (; *p && *p != '\n'; p++)
        *p = ' ';
      if (!*p)
        return;
    } else if (p[0] == '/' && p[1] == '*') {
      *p++ = ' ';
      *p = ' ';
      for (p++; *p && !(p[0] == '*' && p[1] == '/'); p++)
        if (*p != '\n')
          *p = ' ';
      if (!*p)
        return;
      *p++ = ' ';
      *p = ' ';
    }
  }
}

// Loads and validates one file: a new object, or NULL when it does not exist
// or cannot be read or parsed. When it cannot be used whole, *broken is set
// and one error says where; a valid JSON object with a key of the wrong
// type is still returned (its restrictive content counts). *textp gets the
// text read (the caller frees it), for locating later errors.
static json_t *file_load(struct settings *s, const char *path,
                         enum src_kind kind, bool *broken, char **textp) {
  char *text, err[1024];
  size_t len = 0;
  *broken = false;
  *textp = NULL;
  if (settings_slurp(path, &text, &len, err, sizeof(err)) != 0) {
    settings_push(&s->errors, &s->nerrors, "%s", err);
    *broken = true;
    return NULL;
  }
  if (!text)
    return NULL;
  if (kind == SRC_GEMINI)
    strip_comments(text);
  *textp = text;
  json_t *doc = parse(path, text, len, err, sizeof(err));
  if (!doc) {
    settings_push(&s->errors, &s->nerrors, "%s", err);
    *broken = true;
  } else if (!validate(s, path, text, doc, kind)) {
    *broken = true;
    if (!json_is_object(doc)) {
      json_decref(doc);
      doc = NULL;
    }
  }
  return doc;
}

// The value at a dotted path, or NULL.
static json_t *dig(const json_t *doc, const char *dotted) {
  char key[64];
  json_t *v = (json_t *)(uintptr_t)doc; // jansson's getters are not const
  for (const char *p = dotted; v && *p;) {
    size_t n = strcspn(p, ".");
    snprintf(key, sizeof(key), "%.*s", (int)n, p);
    v = json_is_object(v) ? json_object_get(v, key) : NULL;
    p += n + (p[n] == '.');
  }
  return v;
}

// Where a dotted key is written: each component searched for as "key" after
// the previous one. Good enough to point a person at the right line.
static void locate(const char *text, const char *dotted, int *line, int *col) {
  const char *at = text;
  char key[72];
  for (const char *p = dotted; at && *p;) {
    size_t n = strcspn(p, ".");
    snprintf(key, sizeof(key), "\"%.*s\"", (int)n, p);
    const char *hit = strstr(at, key);
    at = hit ? hit : at;
    p += n + (p[n] == '.');
  }
  *line = 1;
  *col = 1;
  for (const char *p = text; p < at; p++) {
    if (*p == '\n') {
      ++*line;
      *col = 1;
    } else if (((unsigned char)*p & 0xc0) != 0x80) {
      ++*col;
    }
  }
}

static bool type_ok(const json_t *v, enum ftype t) {
  switch (t) {
  case F_OBJECT:
    return json_is_object(v);
  case F_ARRAY:
    return json_is_array(v);
  case F_STRING:
    return json_is_string(v);
  case F_BOOL:
    return json_is_boolean(v);
  }
  return false;
}

static void type_error(struct settings *s, const char *label, const char *text,
                       const char *key, enum ftype t) {
  if (!text) {
    settings_push(&s->errors, &s->nerrors, "%s: %s: expected %s", label, key,
                  type_names[t]);
    return;
  }
  int line, col;
  locate(text, key, &line, &col);
  settings_push(&s->errors, &s->nerrors, "%s:%d:%d: %s: expected %s", label,
                line, col, key, type_names[t]);
}

// Checks the types of the keys read. text (may be NULL) locates errors.
static bool validate(struct settings *s, const char *label, const char *text,
                     const json_t *doc, enum src_kind kind) {
  if (!json_is_object(doc)) {
    settings_push(&s->errors, &s->nerrors, "%s%s: expected a JSON object",
                  label, text ? ":1:1" : "");
    return false;
  }
  const struct field *f = kind == SRC_GEMINI   ? gemini_fields
                          : kind == SRC_CLAUDE ? claude_fields
                                               : acp_fields;
  for (; f->path; f++) {
    const json_t *v = dig(doc, f->path);
    if (v && !type_ok(v, f->type)) {
      type_error(s, label, text, f->path, f->type);
      return false;
    }
  }
  if (kind != SRC_ACP)
    return true;
  const char *name;
  json_t *agent;
  json_object_foreach(dig(doc, "agents"), name, agent) {
    char key[300];
    snprintf(key, sizeof(key), "agents.%s", name);
    if (!json_is_object(agent)) {
      type_error(s, label, text, key, F_OBJECT);
      return false;
    }
    json_t *yolo = json_object_get(agent, "yolo");
    if (yolo && !json_is_boolean(yolo)) {
      snprintf(key, sizeof(key), "agents.%s.yolo", name);
      type_error(s, label, text, key, F_BOOL);
      return false;
    }
  }
  return true;
}

// A deny or ask entry that cannot be read is a rule nobody can see: the
// first one breaks its source (an error at its key), like a syntax error.
static bool unreadable_rule(struct settings *s, struct src *src,
                            const char *doc_text, const char *key,
                            const char *what) {
  if (src->broken)
    return false; // one error per file; the rest are warnings
  if (doc_text) {
    int line, col;
    locate(doc_text, key, &line, &col);
    settings_push(&s->errors, &s->nerrors,
                  "%s:%d:%d: %s: %s (a rule that restricts cannot be ignored)",
                  src->label, line, col, key, what);
  } else {
    settings_push(&s->errors, &s->nerrors,
                  "%s: %s: %s (a rule that restricts cannot be ignored)",
                  src->label, key, what);
  }
  set_broken(s, src);
  return true;
}

// Adds the valid rules of arr (may be NULL) to list. An invalid allow rule
// is warned about and skipped; an invalid deny or ask rule breaks the
// source (unreadable_rule). doc_text (may be NULL) locates errors.
static void read_rules(struct settings *s, struct src *src, const char *key,
                       enum policy_list list, const json_t *arr,
                       const char *doc_text) {
  for (size_t i = 0; i < json_array_size(arr); i++) {
    const char *text = json_string_value(json_array_get(arr, i));
    char why[256], what[600];
    if (!text) {
      snprintf(what, sizeof(what), "entry %zu is not a string", i);
      if (list == POLICY_LIST_ALLOW ||
          !unreadable_rule(s, src, doc_text, key, what))
        settings_push(&s->warnings, &s->nwarnings,
                      "%s: %s[%zu]: not a string, ignored", src->label, key, i);
      continue;
    }
    if (policy_rule_check(text, why, sizeof(why)) != 0) {
      snprintf(what, sizeof(what), "rule %.300s: %s", text, why);
      if (list == POLICY_LIST_ALLOW ||
          !unreadable_rule(s, src, doc_text, key, what))
        settings_push(&s->warnings, &s->nwarnings,
                      "%s: %s: rule %s: %s, ignored", src->label, key, text,
                      why);
      continue;
    }
    if (!src->rules[list])
      src->rules[list] = json_array();
    json_array_append_new(src->rules[list], json_string(text));
  }
}

// Claude's permissions.defaultMode (also the broker's files and setup).
static void read_claude_mode(struct settings *s, struct src *src,
                             const char *m) {
  if (!strcmp(m, "default"))
    src->mode = POLICY_MODE_DEFAULT;
  else if (!strcmp(m, "acceptEdits"))
    src->mode = POLICY_MODE_ACCEPT_EDITS;
  else if (!strcmp(m, "plan"))
    src->mode = POLICY_MODE_PLAN;
  else if (!strcmp(m, "bypassPermissions") || !strcmp(m, "yolo"))
    src->yolo = src->yolo < 0 ? 1 : src->yolo; // "yolo": false wins
  else if (!strcmp(m, "dontAsk") || !strcmp(m, "auto")) {
    // dontAsk (ask becomes deny) and auto (a model classifier) have no
    // broker equivalent; default asks, which loosens nothing.
    src->mode = POLICY_MODE_DEFAULT;
    settings_push(&s->warnings, &s->nwarnings,
                  "%s: defaultMode %s is not supported, default is used",
                  src->label, m);
  } else
    settings_push(&s->warnings, &s->nwarnings,
                  "%s: unknown defaultMode %s, ignored", src->label, m);
}

// Gemini's general.defaultApprovalMode.
static void read_gemini_mode(struct settings *s, struct src *src,
                             const char *m) {
  if (!strcmp(m, "default"))
    src->mode = POLICY_MODE_DEFAULT;
  else if (!strcmp(m, "auto_edit"))
    src->mode = POLICY_MODE_ACCEPT_EDITS;
  else if (!strcmp(m, "plan"))
    src->mode = POLICY_MODE_PLAN;
  else
    // Gemini CLI discards "yolo" here too: yolo is never enabled this way.
    settings_push(&s->warnings, &s->nwarnings,
                  "%s: general.defaultApprovalMode %s is ignored", src->label,
                  m);
}

// Reads what a document says into src. In a broken one (a key of the
// wrong type) what has the wrong type is left out. text (may be NULL) is
// the document's text, to locate errors.
static void src_read(struct settings *s, struct src *src, json_t *doc,
                     const char *text) {
  if (src->kind == SRC_GEMINI) {
    read_rules(s, src, "tools.allowed", POLICY_LIST_ALLOW,
               dig(doc, "tools.allowed"), text);
    read_rules(s, src, "tools.confirmationRequired", POLICY_LIST_ASK,
               dig(doc, "tools.confirmationRequired"), text);
    read_rules(s, src, "tools.exclude", POLICY_LIST_DENY,
               dig(doc, "tools.exclude"), text);
    json_t *dym = dig(doc, "security.disableYoloMode");
    src->veto = json_is_true(dym);
    // Only a project file's false is a yolo request (design §6); in the
    // user file the key is a veto and nothing else.
    if (json_is_false(dym) && src->rel)
      src->yolo = 1;
    json_t *m = dig(doc, "general.defaultApprovalMode");
    if (json_is_string(m))
      read_gemini_mode(s, src, json_string_value(m));
    return;
  }
  for (int l = POLICY_LIST_ALLOW; l <= POLICY_LIST_DENY; l++) {
    char key[32];
    snprintf(key, sizeof(key), "permissions.%s", list_names[l]);
    read_rules(s, src, key, (enum policy_list)l, dig(doc, key), text);
  }
  json_t *yolo = src->kind == SRC_ACP ? dig(doc, "yolo") : NULL;
  if (yolo)
    src->yolo = json_is_true(yolo);
  json_t *m = dig(doc, "permissions.defaultMode");
  if (json_is_string(m))
    read_claude_mode(s, src, json_string_value(m));
  if (src->kind != SRC_ACP)
    return;
  json_t *agents = dig(doc, "agents");
  if (agents && src->rel) {
    settings_push(&s->warnings, &s->nwarnings,
                  "%s: agents is read from the user settings only, ignored",
                  src->label);
    return;
  }
  const char *name;
  json_t *agent;
  json_object_foreach(agents, name, agent) {
    json_t *y = json_object_get(agent, "yolo");
    if (y) {
      if (!src->agents)
        src->agents = json_object();
      json_object_set(src->agents, name, y);
    }
  }
}
