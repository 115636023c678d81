#include "request.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"
#include "path.h"
#include "rules.h"

static const char *const known_kinds[] = {
    "read",    "edit",  "delete", "move",        "search",
    "execute", "think", "fetch",  "switch_mode", "other"};

static const char *const shells[] = {"bash", "sh", "zsh", "dash", "ksh"};

// Commands whose operands the circuit breaker checks (the last three only
// with -R).
static const char *const removers[] = {"rm",    "rmdir", "unlink",
                                       "chmod", "chown", "chgrp"};

// find's actions that remove or run, and tests that narrow what they touch
// (a find with a test is not a removal of everything below its start).
static const char *const find_actions[] = {"-delete", "-exec", "-execdir",
                                           "-ok", "-okdir"};
static const char *const find_tests[] = {
    "-name",  "-iname", "-path", "-ipath", "-regex", "-iregex", "-type",
    "-newer", "-mtime", "-mmin", "-size",  "-empty", "-user",   "-perm"};

// Rawinput fields that carry the new content of a file (Claude Write, Edit,
// MultiEdit, NotebookEdit; codex patches).
static const char *const edit_fields[] = {
    "old_string", "new_string", "content", "edits", "new_source", "changes"};

// Rawinput fields that carry a path (Claude tools, Gemini parameters).
static const char *const path_fields[] = {"file_path", "notebook_path", "path",
                                          "dir_path", "absolute_path"};

// Where a script's relative paths may point: the directory it starts in
// and every place a `cd` may have taken it (a cd may also fail).
struct bases {
  char *dir[16];
  size_t n;
  bool unknown; // a cd to somewhere that cannot be known
};

struct paths {
  const char *v[REQUEST_PATHS_MAX + 1];
  size_t n;
};

struct ctx {
  struct request *r;
  const json_t *tc, *ri;
  const char *home;
  size_t cap;
};

static void extract(struct ctx *c);
static const char *infer_kind(struct ctx *c);
static void from_command(struct ctx *c, const json_t *cmd);
static void from_script(struct ctx *c, char *script, const char *cwd);
static void cd_bases(const struct shell_result *sh, const char *cwd,
                     const char *home, struct bases *b);
static void add_shell_atom(struct ctx *c, const struct shell_atom *a,
                           const char *cwd, const struct bases *b);
static void add_targets(struct request_atom *at, const struct shell_atom *a,
                        const struct bases *b, const char *home);
static void find_targets(struct request_atom *at, const struct shell_atom *a,
                         const struct bases *b, const char *home);
static void remove_targets(struct request_atom *at, const struct shell_atom *a,
                           const char *name, const struct bases *b,
                           const char *home);
static bool operand(const char *w, bool *opts);
static void add_target(struct request_atom *at, const struct shell_word *w,
                       const struct bases *b, const char *home);
static void push_target(struct request_atom *at, const char *text, bool dynamic,
                        const char *dir, const char *home);
static void from_paths(struct ctx *c, enum request_class cls, const char *kind);
static void collect_paths(const struct ctx *c, struct paths *ps);
static void push_path(struct paths *ps, const char *s);
static void from_fetch(struct ctx *c);
static bool is_mcp(struct ctx *c);
static struct request_atom *add(struct ctx *c, enum request_class cls,
                                const char *kind);
static void set_where(const char *text, bool dynamic, const char *cwd,
                      const char *home, enum request_where *where, char **lex,
                      char **res);
static void opaque(struct request *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *tool_hint(const json_t *tc);
static const char *str(const json_t *o, const char *key);
static const char *kind_of(struct request *r, const char *k);
static char *argv_script(const json_t *argv);
static char *gemini_cwd(const json_t *tc);
static char *url_host(const char *url, size_t n);
static const char *base_name(const char *p);
static bool in_list(const char *s, const char *const *v, size_t n);
static bool read_only(const struct shell_atom *a);
static json_t *unconst(const json_t *j);
static const char *find_http(const char *s);

void request_init(struct request *r, const json_t *params, const char *cwd,
                  const char *home) {
  *r = (struct request){0};
  r->cwd = cwd && cwd[0] == '/' ? path_normalize(NULL, cwd, NULL) : NULL;
  const json_t *tc = json_object_get(params, "toolCall");
  if (!json_is_object(tc)) {
    r->kind = xstrdup("other");
    opaque(r, "the request has no toolCall");
    return;
  }
  const json_t *ri = json_object_get(tc, "rawInput");
  struct ctx c = {.r = r,
                  .tc = tc,
                  .ri = json_is_object(ri) ? ri : NULL,
                  .home = home && home[0] == '/' ? home : NULL};
  r->tool = tool_hint(tc);
  const char *k = str(tc, "kind");
  r->kind = xstrdup(k && *k ? k : "other");
  extract(&c);
}

void request_clear(struct request *r) {
  for (size_t i = 0; i < r->natoms; i++) {
    struct request_atom *a = &r->atoms[i];
    free(a->lex);
    free(a->res);
    free(a->text);
    free(a->name);
    for (size_t j = 0; j < a->ntargets; j++) {
      free(a->targets[j].lex);
      free(a->targets[j].res);
      free(a->targets[j].text);
    }
    free(a->targets);
  }
  free(r->atoms);
  if (r->analysed)
    shell_result_free(&r->sh);
  free(r->kind);
  free(r->tool);
  free(r->command);
  free(r->cwd);
  *r = (struct request){0};
}

// Picks the extractor: a command wins over everything (it is what runs),
// then MCP tools, then the kind (inferred when absent or "other").
static void extract(struct ctx *c) {
  struct request *r = c->r;
  const json_t *cmd = c->ri ? json_object_get(c->ri, "command") : NULL;
  if (cmd) {
    from_command(c, cmd);
    return;
  }
  if (is_mcp(c))
    return;
  enum rules_class cls;
  if (r->tool && rules_tool_class(r->tool, &cls) && cls == RULES_WEBSEARCH) {
    add(c, REQUEST_SEARCH, "fetch");
    return;
  }
  const char *k = strcmp(r->kind, "other") == 0 ? infer_kind(c) : r->kind;
  bool edits = false;
  for (size_t i = 0; c->ri && i < sizeof(edit_fields) / sizeof(*edit_fields);
       i++)
    edits = edits || json_object_get(c->ri, edit_fields[i]);
  if (edits && (strcmp(k, "read") == 0 || strcmp(k, "search") == 0))
    k = "edit"; // new content is an edit, whatever the kind says
  if (strcmp(k, "execute") == 0) {
    const char *title = str(c->tc, "title");
    bool gemini = r->tool && (strcmp(r->tool, "run_shell_command") == 0 ||
                              strcmp(r->tool, "ShellTool") == 0);
    if (gemini && title && *title)
      from_script(c, xstrdup(title), NULL);
    else
      opaque(r, "command text unavailable");
  } else if (strcmp(k, "read") == 0 || strcmp(k, "search") == 0) {
    from_paths(c, REQUEST_READ, kind_of(r, k));
  } else if (strcmp(k, "edit") == 0 || strcmp(k, "delete") == 0 ||
             strcmp(k, "move") == 0) {
    from_paths(c, REQUEST_EDIT, kind_of(r, k));
  } else if (strcmp(k, "fetch") == 0) {
    from_fetch(c);
  } else {
    struct request_atom *a = add(c, REQUEST_KIND, kind_of(r, k));
    const char *title = str(c->tc, "title");
    if (a && (r->tool || title))
      a->name = xstrdup(r->tool ? r->tool : title);
  }
}

// A kind for requests without one (claude-code-acp 0.16, kind "other"):
// from the tool's name, else from the rawInput fields (Claude adapter).
static const char *infer_kind(struct ctx *c) {
  static const char *const by_class[] = {[RULES_BASH] = "execute",
                                         [RULES_READ] = "read",
                                         [RULES_EDIT] = "edit",
                                         [RULES_WEBFETCH] = "fetch",
                                         [RULES_WEBSEARCH] = "fetch"};
  enum rules_class cls;
  if (c->r->tool && rules_tool_class(c->r->tool, &cls) &&
      cls <= RULES_WEBSEARCH)
    return by_class[cls];
  if (!c->ri)
    return "other";
  if (str(c->ri, "file_path") || str(c->ri, "notebook_path"))
    return "read"; // extract() turns it into an edit when content comes
  if (str(c->ri, "url"))
    return "fetch";
  return "other";
}

// rawInput.command: a string (Claude) or an argv (codex-acp).
static void from_command(struct ctx *c, const json_t *cmd) {
  const char *cwd = str(c->ri, "cwd");
  if (json_is_string(cmd)) {
    from_script(c, xstrdup(json_string_value(cmd)), cwd);
    return;
  }
  char *script = json_is_array(cmd) ? argv_script(cmd) : NULL;
  if (!script) {
    opaque(c->r, "rawInput.command is neither a string nor an argv");
    return;
  }
  from_script(c, script, cwd);
}

// Analyses script (taken); relative paths are resolved against cwd when it
// is absolute (the command's own directory), else the session cwd.
static void from_script(struct ctx *c, char *script, const char *cwd) {
  struct request *r = c->r;
  r->command = script;
  char *gcwd = cwd ? NULL : gemini_cwd(c->tc);
  const char *dir = cwd && cwd[0] == '/' ? cwd : gcwd ? gcwd : r->cwd;
  if (strlen(script) > REQUEST_COMMAND_MAX) {
    opaque(r, "command too long");
    free(gcwd);
    return;
  }
  shell_analyse(script, c->home, &r->sh);
  r->analysed = true;
  if (r->sh.opaque)
    opaque(r, "opaque command: %s", r->sh.reason[0] ? r->sh.reason : "?");
  // The analyser places file atoms after a cd itself; the breaker's
  // operands are placed here.
  struct bases b;
  cd_bases(&r->sh, dir, c->home, &b);
  for (size_t i = 0; i < r->sh.natoms; i++)
    add_shell_atom(c, &r->sh.atoms[i], dir, &b);
  for (size_t i = 0; i < b.n; i++)
    free(b.dir[i]);
  free(gcwd);
}

// The directories a script's cd/pushd/popd may lead to (in any order: the
// atoms do not say which runs first, so every combination is kept).
static void cd_bases(const struct shell_result *sh, const char *cwd,
                     const char *home, struct bases *b) {
  *b = (struct bases){.unknown = !cwd};
  if (cwd)
    b->dir[b->n++] = xstrdup(cwd);
  for (size_t i = 0; i < sh->natoms; i++) {
    const struct shell_atom *a = &sh->atoms[i];
    const char *name =
        a->kind == SHELL_CMD && a->nwords ? base_name(a->words[0].text) : "";
    if (!in_list(name, (const char *const[]){"cd", "pushd", "popd"}, 3))
      continue;
    size_t k = 1;
    while (k < a->nwords && a->words[k].text[0] == '-' && a->words[k].text[1] &&
           strcmp(a->words[k++].text, "--") != 0)
      ;
    const struct shell_word *w = k < a->nwords ? &a->words[k] : NULL;
    const char *to = w ? w->text : home;
    if (!to || strcasecmp(name, "popd") == 0 || (w && w->dynamic) ||
        strcmp(to, "-") == 0) {
      b->unknown = true;
      continue;
    }
    for (size_t j = 0, n = b->n; j < n; j++) {
      char *d = path_normalize(b->dir[j], to, home);
      if (d && b->n < sizeof(b->dir) / sizeof(*b->dir))
        b->dir[b->n++] = d;
      else {
        b->unknown = true;
        free(d);
      }
    }
  }
}

static void add_shell_atom(struct ctx *c, const struct shell_atom *a,
                           const char *cwd, const struct bases *b) {
  enum request_class cls = a->kind == SHELL_CMD    ? REQUEST_BASH
                           : a->kind == SHELL_READ ? REQUEST_READ
                                                   : REQUEST_EDIT;
  static const char *const kinds[] = {"execute", "read", "edit"};
  struct request_atom *at = add(c, cls, kinds[cls]);
  if (!at)
    return;
  at->deny_only = a->deny_only;
  if (cls == REQUEST_BASH) {
    at->cmd = a;
    at->read_only = read_only(a);
    add_targets(at, a, b, c->home);
    return;
  }
  at->text = xstrdup(a->path ? a->path : "");
  // The analyser places a literal relative path after a cd itself, but not
  // a glob: where that one points is unknown.
  bool moved = b->n > 1 || b->unknown;
  if (moved && a->path_dynamic && a->path && a->path[0] != '/')
    return;
  set_where(a->path, a->path_dynamic, cwd, c->home, &at->where, &at->lex,
            &at->res);
}

// The operands the circuit breaker looks at (permission-rules §5.6).
static void add_targets(struct request_atom *at, const struct shell_atom *a,
                        const struct bases *b, const char *home) {
  const char *name = a->nwords ? base_name(a->words[0].text) : "";
  if (strcasecmp(name, "find") == 0 && a->more_args)
    push_target(at, "(starting points read from stdin by xargs)", true, NULL,
                home);
  if (strcasecmp(name, "find") == 0)
    find_targets(at, a, b, home);
  else if (in_list(name, removers, 6) || strcasecmp(name, "mv") == 0)
    remove_targets(at, a, name, b, home);
}

// A -name/-path pattern that narrows what find matches: it has a character
// that is not a glob character, a bracket expression or a dot (`*.o` does,
// `*`, `?*`, `.*`, `[a-z]*` do not).
static bool narrow_pattern(const char *p) {
  for (size_t i = 0; p[i]; i++) {
    if (p[i] == '[') {
      const char *e = strchr(p + i + 1, ']');
      if (!e)
        return false;
      i = (size_t)(e - p);
    } else if (p[i] == '\\' && p[i + 1]) {
      return true;
    } else if (!strchr("*?.{},", p[i])) {
      return true;
    }
  }
  return false;
}

// find -delete: its starting points (default "."), unless a -name/-path
// test with a narrowing pattern comes before it and no -o, ! or group can
// route around that test. -exec/-ok: unless one of the usual tests comes
// first (the command they run has its own atom, and {} is unknown there).
static void find_targets(struct request_atom *at, const struct shell_atom *a,
                         const struct bases *b, const char *home) {
  static const char *const names[] = {"-name",  "-iname",     "-path",
                                      "-ipath", "-wholename", "-iwholename"};
  static const char *const branch[] = {"-o", "-or", "!", "-not", ",", "("};
  bool acts = false, filtered = false, deletes = false, narrowed = false,
       branchy = false;
  size_t end = a->nwords;
  for (size_t i = 1; i < a->nwords; i++) {
    const char *w = a->words[i].text;
    if (end == a->nwords && (w[0] == '-' || w[0] == '(' || w[0] == '!'))
      end = i;
    if (strcmp(w, "-delete") == 0)
      deletes = true;
    else if (in_list(w, find_actions, 5))
      acts = true;
    if (!acts && !deletes) {
      filtered = filtered || in_list(w, find_tests, 14);
      narrowed = narrowed || (in_list(w, names, 6) && i + 1 < a->nwords &&
                              !a->words[i + 1].dynamic &&
                              narrow_pattern(a->words[i + 1].text));
    }
    branchy = branchy || in_list(w, branch, 6);
  }
  if (!(deletes && (!narrowed || branchy)) && (!acts || filtered))
    return;
  char here[] = ".";
  if (end == 1)
    add_target(at, &(struct shell_word){.text = here}, b, home);
  for (size_t i = 1; i < end; i++)
    add_target(at, &a->words[i], b, home);
}

// rm, rmdir, unlink: every operand; mv: the sources; chmod/chown/chgrp
// only with -R, and not their mode or owner operand.
static void remove_targets(struct request_atom *at, const struct shell_atom *a,
                           const char *name, const struct bases *b,
                           const char *home) {
  bool own = in_list(name, removers + 3, 3), mv = strcasecmp(name, "mv") == 0;
  bool recursive = false, to_dir = false, no_mode_operand = false;
  size_t n = 0;
  bool opts = true;
  for (size_t i = 1; i < a->nwords; i++) {
    const char *w = a->words[i].text;
    if (operand(w, &opts)) {
      n++;
      continue;
    }
    recursive = recursive || strcmp(w, "--recursive") == 0 ||
                (w[1] != '-' && strchr(w, 'R'));
    to_dir = to_dir || strncmp(w, "-t", 2) == 0 ||
             strncmp(w, "--target-directory", 18) == 0;
    // chmod -w (a mode written as an option) or --reference: no mode operand
    no_mode_operand =
        no_mode_operand || strncmp(w, "--reference", 11) == 0 ||
        (w[1] != '-' && strspn(w + 1, "rwxXstugoa") == strlen(w + 1));
  }
  if (own && !recursive)
    return;
  // Run by xargs: more operands come from stdin, and none can be known.
  if (a->more_args)
    push_target(at, "(operands read from stdin by xargs)", true, NULL, home);
  size_t skip = own && !no_mode_operand ? 1 : 0, seen = 0;
  size_t keep = mv && !to_dir && n ? n - 1 : n;
  opts = true;
  for (size_t i = 1; i < a->nwords; i++)
    if (operand(a->words[i].text, &opts) && seen++ >= skip && seen <= keep)
      add_target(at, &a->words[i], b, home);
}

// True for an operand; options end at "--" (which is neither).
static bool operand(const char *w, bool *opts) {
  if (*opts && strcmp(w, "--") == 0) {
    *opts = false;
    return false;
  }
  return !(*opts && w[0] == '-' && w[1]);
}

// An operand, placed from every directory a cd may have led to.
static void add_target(struct request_atom *at, const struct shell_word *w,
                       const struct bases *b, const char *home) {
  bool relative = w->text[0] != '/' && w->text[0] != '~';
  for (size_t i = 0; i < (relative ? b->n : 1); i++)
    push_target(at, w->text, w->dynamic, relative ? b->dir[i] : "/", home);
  if (relative && b->unknown)
    push_target(at, w->text, true, NULL, home);
}

static void push_target(struct request_atom *at, const char *text, bool dynamic,
                        const char *dir, const char *home) {
  if (at->ntargets >= REQUEST_PATHS_MAX) {
    // Too many to list: one that cannot be known stands for the rest.
    at->targets[at->ntargets - 1].where = REQUEST_UNKNOWN;
    return;
  }
  at->targets =
      xrealloc(at->targets, (at->ntargets + 1) * sizeof(*at->targets));
  struct request_target *t = &at->targets[at->ntargets++];
  *t = (struct request_target){.text = xstrdup(text)};
  set_where(text, dynamic, dir, home, &t->where, &t->lex, &t->res);
}

// Read or Edit atoms on the request's paths: rawInput path fields, codex
// patch keys, diff content and locations.
static void from_paths(struct ctx *c, enum request_class cls,
                       const char *kind) {
  struct paths ps = {.n = 0};
  collect_paths(c, &ps);
  if (ps.n > REQUEST_PATHS_MAX) {
    opaque(c->r, "too many paths");
    return;
  }
  if (!ps.n && cls == REQUEST_READ && strcmp(kind, "search") == 0 && c->r->cwd)
    ps.v[ps.n++] = c->r->cwd; // a search without a path searches the cwd
  if (!ps.n) {
    struct request_atom *a = add(c, cls, kind);
    if (a)
      a->where = REQUEST_UNKNOWN;
    return;
  }
  for (size_t j = 0; j < ps.n; j++) {
    char *lex = path_normalize(c->r->cwd, ps.v[j], c->home);
    bool dup = false;
    for (size_t k = 0; lex && k < c->r->natoms; k++)
      dup = dup || (c->r->atoms[k].lex && strcmp(c->r->atoms[k].lex, lex) == 0);
    free(lex);
    struct request_atom *a = dup ? NULL : add(c, cls, kind);
    if (!a)
      continue;
    a->text = xstrdup(ps.v[j]);
    set_where(ps.v[j], false, c->r->cwd, c->home, &a->where, &a->lex, &a->res);
  }
}

// The paths a tool call names (borrowed); more than REQUEST_PATHS_MAX
// leaves ps->n above it.
static void collect_paths(const struct ctx *c, struct paths *ps) {
  for (size_t i = 0; c->ri && i < sizeof(path_fields) / sizeof(*path_fields);
       i++)
    push_path(ps, str(c->ri, path_fields[i]));
  const json_t *changes = c->ri ? json_object_get(c->ri, "changes") : NULL;
  for (void *it = json_object_iter(unconst(changes)); it;
       it = json_object_iter_next(unconst(changes), it)) {
    push_path(ps, json_object_iter_key(it));
    push_path(ps, str(json_object_iter_value(it), "move_path"));
  }
  size_t i;
  const json_t *val;
  json_array_foreach(json_object_get(c->tc, "content"), i, val) {
    const char *type = str(val, "type");
    if (type && strcmp(type, "diff") == 0)
      push_path(ps, str(val, "path"));
  }
  json_array_foreach(json_object_get(c->tc, "locations"), i, val)
      push_path(ps, str(val, "path"));
}

static void push_path(struct paths *ps, const char *s) {
  if (s && *s && ps->n <= REQUEST_PATHS_MAX)
    ps->v[ps->n++] = s;
}

// WebFetch: rawInput.url (Claude), else every URL in the title and the text
// content (Gemini); none found is opaque. A web search is its own atom.
static void from_fetch(struct ctx *c) {
  if (c->ri && str(c->ri, "query") && !str(c->ri, "url")) {
    add(c, REQUEST_SEARCH, "fetch");
    return;
  }
  const char *texts[2 + REQUEST_URLS_MAX];
  size_t nt = 0;
  const char *url = c->ri ? str(c->ri, "url") : NULL;
  if (url) {
    texts[nt++] = url;
  } else {
    texts[nt++] = str(c->tc, "title");
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(c->tc, "content"), i, v) {
      const json_t *inner = json_object_get(v, "content");
      if (nt < sizeof(texts) / sizeof(*texts) && str(inner, "text"))
        texts[nt++] = str(inner, "text");
    }
  }
  size_t found = 0;
  for (size_t i = 0; i < nt && !c->r->opaque; i++) {
    for (const char *p = texts[i]; p && *p;) {
      const char *h = find_http(p);
      if (!h)
        break;
      size_t n = strcspn(h, " \t\r\n\"'<>`");
      p = h + (n ? n : 1);
      if (strncasecmp(h, "http://", 7) && strncasecmp(h, "https://", 8))
        continue;
      char *host = url_host(h, n);
      if (!host || ++found > REQUEST_URLS_MAX) {
        opaque(c->r, host ? "too many URLs" : "cannot tell the host of %.*s",
               (int)(n > 80 ? 80 : n), h);
        free(host);
        return;
      }
      struct request_atom *a = add(c, REQUEST_FETCH, "fetch");
      if (!a) {
        free(host);
        return;
      }
      a->name = host;
    }
  }
  if (!found && !c->r->opaque)
    opaque(c->r, "no URL in the fetch request");
}

// MCP tools: the name from toolCall.name, _meta.claudeCode.toolName or the
// toolCallId (Gemini), else a title that is an MCP name (Claude adapter).
static bool is_mcp(struct ctx *c) {
  const char *name = c->r->tool;
  const char *title = str(c->tc, "title");
  if (!name && title && strncmp(title, "mcp__", 5) == 0 &&
      !strpbrk(title, " \t\n") && strcmp(c->r->kind, "other") == 0)
    name = title;
  if (!name || strncmp(name, "mcp_", 4) != 0)
    return false;
  struct request_atom *a = add(c, REQUEST_MCP, kind_of(c->r, c->r->kind));
  if (a) {
    a->name = xstrdup(name);
    a->gemini_name = strncmp(name, "mcp__", 5) != 0;
  }
  return true;
}

static struct request_atom *add(struct ctx *c, enum request_class cls,
                                const char *kind) {
  struct request *r = c->r;
  if (r->natoms >= REQUEST_ATOMS_MAX) {
    opaque(r, "too many parts");
    return NULL;
  }
  if (r->natoms == c->cap) {
    c->cap = c->cap ? c->cap * 2 : 8;
    r->atoms = xrealloc(r->atoms, c->cap * sizeof(*r->atoms));
  }
  struct request_atom *a = &r->atoms[r->natoms++];
  *a =
      (struct request_atom){.cls = cls, .kind = kind, .where = REQUEST_UNKNOWN};
  return a;
}

// Places a path: known (normalised and resolved), a glob, or unknown.
static void set_where(const char *text, bool dynamic, const char *cwd,
                      const char *home, enum request_where *where, char **lex,
                      char **res) {
  *where = REQUEST_UNKNOWN;
  if (!text || !*text)
    return;
  // A variable, a substitution, ~user or braces can be anything; so can a
  // word the analyser calls dynamic for a reason not in its text.
  if (dynamic &&
      (strpbrk(text, "$`{") || text[0] == '~' || !strpbrk(text, "*?[")))
    return;
  *lex = path_normalize(cwd, text, home);
  if (!*lex)
    return;
  if (dynamic) {
    *where = REQUEST_GLOB;
    return;
  }
  // Resolve the path as written, not the collapsed one: in link/../x the
  // kernel follows link first, so x may be far from where `..` suggests.
  char *raw = path_absolute(cwd, text, home);
  *res = raw ? path_resolve_cached(raw) : NULL;
  free(raw);
  if (!*res) {
    free(*lex);
    *lex = NULL;
    return;
  }
  *where = REQUEST_KNOWN;
}

static void opaque(struct request *r, const char *fmt, ...) {
  if (r->opaque)
    return; // the first reason is the one to show
  r->opaque = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
  va_end(ap);
}

// The tool's name: toolCall.name (unstable ACP), the Claude adapter's
// _meta.claudeCode.toolName, or Gemini's toolCallId "<tool>__<id>" or
// "<tool>-<ms>-<n>" when it names a known tool or an MCP tool.
static char *tool_hint(const json_t *tc) {
  const char *s = str(tc, "name");
  if (!s)
    s = str(json_object_get(json_object_get(tc, "_meta"), "claudeCode"),
            "toolName");
  if (s && *s)
    return xstrdup(s);
  const char *id = str(tc, "toolCallId");
  if (!id)
    return NULL;
  enum rules_class cls;
  for (const char *sep = id; (sep = strstr(sep, "__")) != NULL; sep++) {
    char *name = xstrndup(id, (size_t)(sep - id));
    const char *rest = sep + 2;
    if (!strstr(rest, "__") &&
        (strncmp(name, "mcp_", 4) == 0 || rules_tool_class(name, &cls)))
      return name;
    free(name);
  }
  char *name = xstrndup(id, strcspn(id, "-"));
  if (id[strlen(name)] == '-' && rules_tool_class(name, &cls))
    return name;
  free(name);
  return NULL;
}

static const char *str(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

// A static spelling of a known kind, or the request's own string.
static const char *kind_of(struct request *r, const char *k) {
  for (size_t i = 0; i < sizeof(known_kinds) / sizeof(*known_kinds); i++)
    if (strcmp(k, known_kinds[i]) == 0)
      return known_kinds[i];
  return r->kind;
}

// codex-acp's argv: `<shell> -lc SCRIPT` is the script; any other argv is
// quoted word by word so that the analyser sees exactly those words.
static char *argv_script(const json_t *argv) {
  size_t n = json_array_size(argv), len = 1;
  for (size_t i = 0; i < n; i++) {
    const char *w = json_string_value(json_array_get(argv, i));
    if (!w || strlen(w) > REQUEST_COMMAND_MAX)
      return NULL;
    len += 4 * strlen(w) + 3;
  }
  if (!n || len > 4 * REQUEST_COMMAND_MAX)
    return NULL;
  const char *a0 = json_string_value(json_array_get(argv, 0));
  const char *a1 = n == 3 ? json_string_value(json_array_get(argv, 1)) : "";
  size_t l1 = strlen(a1);
  if (n == 3 && in_list(base_name(a0), shells, 5) && a1[0] == '-' && l1 > 1 &&
      a1[l1 - 1] == 'c' &&
      strspn(a1 + 1, "abcdefghijklmnopqrstuvwxyz") == l1 - 1)
    return xstrdup(json_string_value(json_array_get(argv, 2)));
  char *s = xmalloc(len), *o = s;
  for (size_t i = 0; i < n; i++) {
    const char *w = json_string_value(json_array_get(argv, i));
    bool plain = *w && strspn(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"
                                 "RSTUVWXYZ0123456789_./=:@%+,-") == strlen(w);
    if (i)
      *o++ = ' ';
    if (!plain)
      *o++ = '\'';
    for (const char *p = w; *p; p++) {
      if (!plain && *p == '\'') {
        memcpy(o, "'\\''", 4);
        o += 4;
      } else {
        *o++ = *p;
      }
    }
    if (!plain)
      *o++ = '\'';
  }
  *o = '\0';
  return s;
}

// Gemini's shell request says where it runs in its text content:
// "[current working directory /p] (...)".
static char *gemini_cwd(const json_t *tc) {
  static const char tag[] = "[current working directory ";
  const json_t *first = json_array_get(json_object_get(tc, "content"), 0);
  const char *text = str(json_object_get(first, "content"), "text");
  if (!text || strncmp(text, tag, sizeof(tag) - 1) != 0)
    return NULL;
  const char *dir = text + sizeof(tag) - 1;
  size_t n = strcspn(dir, "]\n");
  if (dir[n] != ']' || dir[0] != '/')
    return NULL;
  char *d = xstrndup(dir, n);
  char *r = path_normalize(NULL, d, NULL);
  free(d);
  return r;
}

// The host of an http(s) URL: lower case, no trailing dot, no port or user
// info. NULL when it is not a plain host name or address.
static char *url_host(const char *url, size_t n) {
  const char *p = strstr(url, "://");
  if (!p || (size_t)(p - url) >= n)
    return NULL;
  p += 3;
  size_t an = strcspn(p, "/?#\\ \t\r\n\"'<>`");
  if ((size_t)(p - url) + an > n)
    an = n - (size_t)(p - url);
  const char *at = NULL;
  for (size_t i = 0; i < an; i++)
    if (p[i] == '@')
      at = p + i;
  if (at) {
    an -= (size_t)(at + 1 - p);
    p = at + 1;
  }
  size_t hn = p[0] == '[' ? strcspn(p, "]") + 1 : strcspn(p, ":");
  if (hn > an)
    hn = an;
  while (hn && p[hn - 1] == '.')
    hn--;
  if (!hn || hn > 253)
    return NULL;
  char *h = xstrndup(p, hn);
  for (char *c = h; *c; c++) {
    if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
    if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789.-_[]:", *c)) {
      free(h);
      return NULL;
    }
  }
  return h;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static bool in_list(const char *s, const char *const *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcasecmp(s, v[i]) == 0)
      return true;
  return false;
}

// jansson's iterators take a mutable object; they do not modify it.
static json_t *unconst(const json_t *j) {
  return (json_t *)(uintptr_t)j;
}

static const char *find_http(const char *s) {
  for (; *s; s++)
    if (strncasecmp(s, "http", 4) == 0)
      return s;
  return NULL;
}

// Commands plan mode lets run: they read, never write or run others. A
// command is read-only only with options from its known-safe set (an
// option not listed, or a dynamic one, makes it not read-only) and no more
// operands than it reads. shorts: flag letters; vals: letters that take a
// value; longs: space-separated names, with or without =VALUE; max: the
// operands allowed (-1: any). A NULL shorts means options are not checked
// (echo, printf, test: their options never write).
struct ro_spec {
  const char *name, *shorts, *vals, *longs;
  int max;
};

static const char grep_ro_longs[] =
    " regexp file max-count after-context before-context context "
    "directories devices recursive dereference-recursive include exclude "
    "exclude-from exclude-dir label binary-files group-separator color colour "
    "ignore-case invert-match word-regexp line-regexp count "
    "files-with-matches files-without-match only-matching quiet silent "
    "no-messages byte-offset with-filename no-filename line-number "
    "initial-tab null null-data text extended-regexp fixed-strings "
    "basic-regexp perl-regexp no-ignore-case line-buffered "
    "no-group-separator help version ";

static const struct ro_spec ro_specs[] = {
    {"echo", NULL, NULL, NULL, -1},
    {"printf", NULL, NULL, NULL, -1},
    {"true", NULL, NULL, NULL, -1},
    {"false", NULL, NULL, NULL, -1},
    {"test", NULL, NULL, NULL, -1},
    {"[", NULL, NULL, NULL, -1},
    {"pwd", NULL, NULL, NULL, -1},
    {"cd", NULL, NULL, NULL, -1},
    {"basename", NULL, NULL, NULL, -1},
    {"dirname", NULL, NULL, NULL, -1},
    {"which", NULL, NULL, NULL, -1},
    {"type", NULL, NULL, NULL, -1},
    {"whoami", "", "", " help version ", 0},
    {"id", "gGnruzZa", "",
     " group groups name real user zero context help "
     "version ",
     -1},
    {"uname", "asnrvmpio", "",
     " all kernel-name nodename kernel-release "
     "kernel-version machine processor "
     "hardware-platform operating-system help "
     "version ",
     0},
    {"hostname", "afdisAIy", "",
     " alias fqdn long domain ip-address "
     "all-ip-addresses all-fqdns short yp nis "
     "help version ",
     0},
    {"ls", "aAbBcCdfFgGhHiklLmnNopqQrRsStuUvwxXZ1", "ITw",
     " all almost-all author escape block-size ignore-backups color directory "
     "dired classify file-type format full-time group-directories-first "
     "no-group human-readable si dereference-command-line "
     "dereference-command-line-symlink-to-dir hide hyperlink indicator-style "
     "inode ignore kibibytes dereference numeric-uid-gid literal "
     "hide-control-chars show-control-chars quote-name quoting-style reverse "
     "recursive size sort time time-style tabsize width context zero help "
     "version ",
     -1},
    {"cat", "AbeEnstTuv", "",
     " show-all number-nonblank show-ends number "
     "squeeze-blank show-tabs show-nonprinting help "
     "version ",
     -1},
    {"head", "qvz0123456789", "cn",
     " bytes lines quiet silent verbose "
     "zero-terminated help version ",
     -1},
    {"tail", "fFqvz0123456789", "cns",
     " bytes lines follow retry pid quiet "
     "silent sleep-interval verbose "
     "max-unchanged-stats zero-terminated "
     "help version ",
     -1},
    {"less", "aAbBcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX", "hjpPtTxyz#", "", -1},
    {"more", "dflcpsu0123456789", "n", "", -1},
    {"grep", "EFGPiywxcLloqsbHhnTZzrRaIvUV0123456789", "efmABCdD",
     grep_ro_longs, -1},
    {"egrep", "EFGPiywxcLloqsbHhnTZzrRaIvUV0123456789", "efmABCdD",
     grep_ro_longs, -1},
    {"fgrep", "EFGPiywxcLloqsbHhnTZzrRaIvUV0123456789", "efmABCdD",
     grep_ro_longs, -1},
    {"rg", "iSsFwxvcloHnNLuUzaq0", "egtTmACBfjMr",
     " regexp file type type-not glob iglob hidden no-ignore follow count "
     "count-matches files files-with-matches files-without-match json "
     "line-number no-line-number column no-heading heading color colors "
     "smart-case case-sensitive ignore-case fixed-strings word-regexp "
     "line-regexp max-count context before-context after-context multiline "
     "multiline-dotall unrestricted type-list max-depth max-filesize sort "
     "sortr trim vimgrep only-matching replace no-filename with-filename null "
     "invert-match quiet stats passthru text threads encoding "
     "max-columns help version ",
     -1},
    {"wc", "clmwL", "",
     " bytes chars lines words max-line-length "
     "files0-from total help version ",
     -1},
    {"stat", "LfZt", "c",
     " dereference file-system format printf terse "
     "cached help version ",
     -1},
    {"file", "bcEhiklLNnrsSvz0", "eFfmP",
     " brief mime mime-type mime-encoding dereference no-dereference "
     "keep-going list raw special-files uncompress uncompress-noreport "
     "exclude exclude-quiet extension apple print0 separator files-from "
     "magic-file parameter help version ",
     -1},
    {"du", "0abcDhHklLmPsSx", "dBtX",
     " null all apparent-size block-size bytes total dereference-args "
     "human-readable inodes dereference count-links max-depth separate-dirs "
     "si summarize threshold time time-style exclude exclude-from "
     "one-file-system files0-from help version ",
     -1},
    {"df", "ahHiklPTx", "Bt",
     " all block-size human-readable si inodes local output portability "
     "print-type type exclude-type total sync no-sync help version ",
     -1},
    {"tree", "adfFilpsugDqNQrtvUxACJSLPIhn", "LPIH",
     " dirsfirst noreport prune du gitignore charset sort filelimit timefmt "
     "matchdirs ignore-case help version ",
     -1},
    {"cut", "nsz", "bcdf",
     " bytes characters delimiter fields complement "
     "only-delimited output-delimiter zero-terminated "
     "help version ",
     -1},
    {"tr", "cCdst", "",
     " complement delete squeeze-repeats truncate-set1 "
     "help version ",
     2},
    {"nl", "p", "bdfhilnsvw", "", -1},
    {"realpath", "eLmPqsz", "",
     " canonicalize-existing canonicalize-missing "
     "logical physical quiet relative-to "
     "relative-base strip no-symlinks zero help "
     "version ",
     -1},
    {"readlink", "efmnqsvz", "",
     " canonicalize canonicalize-existing "
     "canonicalize-missing no-newline quiet "
     "silent verbose zero help version ",
     -1},
    {"diff", "abBcdeEfilnNpqrsStTuwyZ", "CDFILSUWxX",
     " brief report-identical-files context unified ed normal rcs "
     "side-by-side width left-column suppress-common-lines show-c-function "
     "show-function-line label expand-tabs initial-tab tabsize "
     "suppress-blank-empty new-file unidirectional-new-file ignore-case "
     "ignore-tab-expansion ignore-trailing-space ignore-space-change "
     "ignore-all-space ignore-blank-lines ignore-matching-lines text "
     "strip-trailing-cr recursive no-dereference exclude exclude-from "
     "starting-file from-file to-file minimal horizon-lines "
     "speed-large-files color palette help version ",
     -1},
    {"cmp", "blsn", "i",
     " print-bytes ignore-initial verbose quiet silent "
     "bytes help version ",
     4},
    {"sort", "bcCdfghiMmnrRsuVz", "ktST",
     " ignore-leading-blanks dictionary-order ignore-case "
     "general-numeric-sort ignore-nonprinting month-sort human-numeric-sort "
     "numeric-sort random-sort reverse version-sort check merge stable unique "
     "zero-terminated key field-separator buffer-size temporary-directory "
     "parallel debug files0-from random-source help version ",
     -1},
};

static bool ro_long(const char *longs, const char *w) {
  size_t n = strcspn(w, "=");
  for (const char *s = strstr(longs, " "); s && s[1]; s = strchr(s + 1, ' '))
    if (strncmp(s + 1, w, n) == 0 && s[1 + n] == ' ')
      return true;
  return false;
}

// Every option of the atom is in sp's safe set, and it has at most sp->max
// operands.
static bool ro_options(const struct ro_spec *sp, const struct shell_atom *a) {
  if (!sp->shorts)
    return true;
  int operands = 0;
  bool opts = true;
  for (size_t i = 1; i < a->nwords; i++) {
    const char *w = a->words[i].text;
    if (opts && strcmp(w, "--") == 0) {
      opts = false;
      continue;
    }
    if (!opts || w[0] != '-' || !w[1]) {
      operands++;
      continue;
    }
    size_t name_len = strcspn(w, "=");
    if (a->words[i].dynamic &&
        (w[1] != '-' || strcspn(w, "$`*?[{~") < name_len))
      return false; // an option that cannot be known (--x=*.c can be)
    if (w[1] == '-') {
      if (!ro_long(sp->longs, w + 2))
        return false;
      continue;
    }
    for (size_t j = 1; w[j]; j++) {
      if (strchr(sp->vals, w[j])) {
        i += w[j + 1] ? 0 : 1; // -n5 or -n 5
        break;
      }
      if (!strchr(sp->shorts, w[j]))
        return false;
    }
  }
  return sp->max < 0 || operands <= sp->max;
}

// find without actions that write or run; git's read-only subcommands
// without options that write or run (--output, --ext-diff, grep -O).
static bool ro_find_git(const struct shell_atom *a, bool git) {
  static const char *const find_bad[] = {"-exec",  "-execdir", "-ok",
                                         "-okdir", "-delete",  "-fprint",
                                         "-fls",   "-fprintf", "-fprint0"};
  static const char *const git_bad[] = {"--output", "--ext-diff",
                                        "--open-files-in-pager", "--exec",
                                        "--textconv"};
  static const char *const git_ro[] = {
      "status", "log",      "diff",     "show", "ls-files", "rev-parse",
      "blame",  "describe", "shortlog", "grep", "ls-tree",  "cat-file"};
  if (git && !(a->nwords > 1 && in_list(a->words[1].text, git_ro, 12)))
    return false;
  for (size_t i = 1; i < a->nwords; i++) {
    const char *w = a->words[i].text;
    if (git && a->words[i].dynamic && w[0] == '-')
      return false;
    for (size_t j = 0; !git && j < sizeof(find_bad) / sizeof(*find_bad); j++)
      if (strcmp(w, find_bad[j]) == 0)
        return false;
    for (size_t j = 0; git && j < sizeof(git_bad) / sizeof(*git_bad); j++)
      if (strncmp(w, git_bad[j], strlen(git_bad[j])) == 0)
        return false;
    if (git && strcmp(a->words[1].text, "grep") == 0 && w[0] == '-' &&
        w[1] != '-' && strchr(w, 'O'))
      return false;
  }
  return true;
}

static bool read_only(const struct shell_atom *a) {
  if (!a->nwords)
    return !a->unsafe_assign;
  if (a->never_allow || a->unsafe_assign || a->words[0].dynamic)
    return false;
  const char *name = a->words[0].text;
  if (strcmp(name, "find") == 0 || strcmp(name, "git") == 0)
    return ro_find_git(a, name[0] == 'g');
  for (size_t i = 0; i < sizeof(ro_specs) / sizeof(*ro_specs); i++)
    if (strcmp(name, ro_specs[i].name) == 0)
      return ro_options(&ro_specs[i], a);
  return false;
}
