#include "request.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"
#include "path.h"
#include "rules.h"
#include "shcache.h"
#include "url.h"

static const char *const known_kinds[] = {
    "read",    "edit",  "delete", "move",        "search",
    "execute", "think", "fetch",  "switch_mode", "other"};
// The kinds by index in known_kinds (K_CUSTOM: any other, the request's own
// string), and their lengths.
enum {
  K_READ,
  K_EDIT,
  K_DELETE,
  K_MOVE,
  K_SEARCH,
  K_EXECUTE,
  K_THINK,
  K_FETCH,
  K_SWITCH_MODE,
  K_OTHER,
  K_CUSTOM
};
static const unsigned char known_len[] = {4, 4, 6, 4, 6, 7, 5, 5, 11, 5};
#define KBIT(k) (1u << (k))

// The kinds of a shell atom's request atom (by class: BASH, READ, EDIT).
static const char *const shell_kinds[] = {"execute", "read", "edit"};

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
// (ri_keys with RI_EDIT, and RI_CHANGES.)

// Where a script's relative paths may point: the directory it starts in
// and every place a `cd` may have taken it (a cd may also fail).
struct bases {
  char *dir[16]; // malloc'd, but for the cwd itself (borrowed)
  size_t n;
  bool unknown;  // a cd to somewhere that cannot be known
  bool borrowed; // dir[0] is the cwd
};

struct paths {
  char *v[REQUEST_PATHS_MAX + 1]; // in the request's arena
  size_t n;
};

// The toolCall's fields and rawInput's, each read once (one walk over
// each object instead of a lookup per use).
struct tc_fields {
  const json_t *name, *meta, *id, *kind, *title, *ri, *content, *locations;
  // The strings among them (NULL when not a string) and their lengths (as
  // strlen gives them: a request with a NUL byte is opaque, and its strings
  // are read up to it, as everywhere else).
  const char *name_s, *id_s, *kind_s, *title_s;
  size_t name_n, id_n, kind_n, title_n;
};

// rawInput's url_keys, in that order (fetch_reading).
#define URL_KEYS 7
struct ri_fields {
  const json_t *command, *cwd, *file_path, *notebook_path, *query, *prompt,
      *changes;
  const json_t *url[URL_KEYS];
  bool edit;    // one of edit_fields is there (any value)
  bool any_url; // one of url is set
  // The lists (key_class) and values of the first RI_LISTS keys, in the
  // object's order, for collect_paths (nkeys: how many keys in all; read
  // up to it, the last fields are not zeroed).
  size_t nkeys;
#define RI_LISTS 16
  unsigned char lists[RI_LISTS];
  const json_t *vals[RI_LISTS];
};

// What is kept with a cached analysis (shcache_memo): each atom's facts,
// and for a plain command (every atom a command without operands for the
// breaker, MEMO_ATOMS at most) its atoms as add_shell_atom makes them. A
// request that reads such a command first refers to these atoms instead
// of building its own (they depend on the analysis alone: no path, no
// cwd); add copies them when the request has more.
#define MEMO_ATOMS 16
struct sh_memo {
  bool plain;                 // atoms holds the request's atoms for the command
  bool needs_bases;           // a file atom or an operand: cd_bases places them
  struct request_atom *atoms; // in this block (plain), or NULL
  unsigned char facts[];      // facts() of each atom
};

struct ctx {
  struct request *r;
  const json_t *tc, *ri;
  struct tc_fields t;
  struct ri_fields f;
  const char *home;
  size_t cap;
  int rkind; // r->kind's index (K_CUSTOM: none of known_kinds)
  // r->atoms is a cached analysis's (struct sh_memo), not the request's:
  // add copies it into the arena first.
  bool shared;
  bool nul; // a string of the request holds a NUL byte
};

// ---- the request's arena (request.h: chunks) ----

struct request_chunk {
  struct request_chunk *next;
  size_t cap;
  max_align_t data[]; // cap bytes
};

#define CHUNK_GROW_MAX ((size_t)1 << 20) // later chunks double up to this

static void *ar_alloc(struct request *r, size_t n, size_t align) {
  struct request_chunk *ch = r->chunks;
  size_t at = (r->chunk_used + align - 1) & ~(align - 1);
  if (!ch || at > ch->cap || ch->cap - at < n) {
    // After the caller's chunk, the first of our own.
    size_t cap = ch && ch != r->lent ? 2 * (ch->cap + sizeof(*ch)) - sizeof(*ch)
                                     : REQUEST_CHUNK - sizeof(*ch);
    if (cap > CHUNK_GROW_MAX)
      cap = CHUNK_GROW_MAX;
    if (cap < n)
      cap = n;
    ch = xmalloc(sizeof(*ch) + cap);
    ch->cap = cap;
    ch->next = r->chunks;
    r->chunks = ch;
    at = 0;
  }
  r->chunk_used = at + n;
  return (char *)ch->data + at;
}

static char *ar_strndup(struct request *r, const char *s, size_t n) {
  char *p = ar_alloc(r, n + 1, 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

static char *ar_strdup(struct request *r, const char *s) {
  return ar_strndup(r, s, strlen(s));
}

// A string from path.c (malloc'd, or NULL) moved into the arena.
static char *ar_take(struct request *r, char *s) {
  if (!s)
    return NULL;
  char *p = ar_strdup(r, s);
  free(s);
  return p;
}

static void extract(struct ctx *c);
static int infer_kind(struct ctx *c, int tool_cls);
static void from_command(struct ctx *c, const json_t *cmd);
static void from_script(struct ctx *c, const char *script, size_t len,
                        bool lent, const char *cwd);
static size_t str_len(const struct ctx *c, const json_t *v);
static unsigned char facts(const struct shell_atom *a);
static const struct sh_memo *memo_of(const struct shell_result *sh);
static void cd_bases(const struct shell_result *sh, const unsigned char *memo,
                     const char *cwd, const char *home, struct bases *b);
static void add_shell_atom(struct ctx *c, const struct shell_atom *a,
                           unsigned char facts, const char *cwd,
                           const struct bases *b);
static void add_targets(struct request *r, struct request_atom *at,
                        const struct shell_atom *a, const struct bases *b,
                        const char *home);
static void find_targets(struct request *r, struct request_atom *at,
                         const struct shell_atom *a, const struct bases *b,
                         const char *home);
static void remove_targets(struct request *r, struct request_atom *at,
                           const struct shell_atom *a, const char *name,
                           const struct bases *b, const char *home);
static bool operand(const char *w, bool *opts);
static void add_target(struct request *r, struct request_atom *at,
                       const struct shell_word *w, const struct bases *b,
                       const char *home);
static void push_target(struct request *r, struct request_atom *at,
                        const char *text, bool dynamic, const char *dir,
                        const char *home);
static void shell_reading(struct ctx *c, const json_t *cmd, bool mcp);
static void title_reading(struct ctx *c, const char *cmd, size_t cn);
static void path_reading(struct ctx *c, int k, int tool_cls, bool shell,
                         bool mcp);
static void from_paths(struct ctx *c, const struct paths *ps,
                       enum request_class cls, const char *kind, bool own,
                       bool guessed);
static bool collect_paths(const struct ctx *c, struct paths *ps, bool deep);
static void scan_paths(const struct ctx *c, const json_t *v, int depth,
                       size_t *budget, struct paths *ps);
static bool looks_like_path(const char *s);
static void push_path(struct request *r, struct paths *ps, const char *s);
static json_t *gemini_args(struct ctx *c);
static void fetch_reading(struct ctx *c, int k, int tool_cls);
static size_t js_space(const char *p);
static void scan_urls(struct ctx *c, const char *text, bool whole,
                      size_t *found);
static void read_url(struct ctx *c, const char *s, size_t n, bool from_text,
                     size_t *found);
static void add_host(struct ctx *c, const char *host, size_t *found);
static bool has_scheme_sep(const char *w, size_t n);
static bool is_mcp(struct ctx *c);
static struct request_atom *add(struct ctx *c, enum request_class cls,
                                const char *kind);
static void set_where(struct request *r, const char *text, bool dynamic,
                      const char *cwd, const char *home,
                      enum request_where *where, char **lex, char **res);
static void opaque_cat(struct request *r, const char *a, const char *b);
static void opaque(struct request *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *tool_hint(struct ctx *c);
static bool known_tool(const char *s, size_t n);
static char lower_c(char c);
static const char *str(const json_t *o, const char *key);
static const char *kind_of(const struct ctx *c, int kind);
static char *argv_script(struct request *r, const json_t *argv);
static char *gemini_cwd(const json_t *content);
static const char *base_name(const char *p);
static bool in_list(const char *s, const char *const *v, size_t n);
static bool read_only(const struct shell_atom *a);
static json_t *unconst(const json_t *j);
static bool has_nul(const json_t *v, int depth);
static char *normal_cwd(struct request *r, const char *cwd);
static bool read_tc(const json_t *tc, struct tc_fields *t);
static bool read_ri(const json_t *ri, struct ri_fields *f);
static int kind_index(const char *k, size_t n);
static int kind_exact(const char *k, size_t n);

void request_init(struct request *r, const json_t *params, const char *cwd,
                  const char *home) {
  request_init_tc(r, request_tool_call(params), cwd, home);
}

// One walk of params (sessionId, toolCall, options): cheaper than hashing
// the key for json_object_get.
const json_t *request_tool_call(const json_t *params) {
  json_t *o = json_is_object(params) ? unconst(params) : NULL;
  for (void *it = o ? json_object_iter(o) : NULL; it;
       it = json_object_iter_next(o, it))
    if (json_object_iter_key_len(it) == 8 &&
        memcmp(json_object_iter_key(it), "toolCall", 8) == 0)
      return json_object_iter_value(it);
  return NULL;
}

void request_init_tc(struct request *r, const json_t *tc, const char *cwd,
                     const char *home) {
  request_init_in(r, tc, cwd, home, NULL, 0);
}

// Every field empty, field by field: the reason's 192 bytes need only
// their first (a field added to struct request is set here too).
static void request_empty(struct request *r) {
  r->kind = r->tool = r->command = r->cwd = r->alt_command = NULL;
  r->opaque = r->raw_command = false;
  r->reason[0] = '\0';
  r->sh = r->alt_sh = NULL;
  r->atoms = NULL;
  r->natoms = 0;
  r->chunks = r->lent = NULL;
  r->chunk_used = 0;
  r->tc_id = r->tc_kind = r->tc_title = NULL;
}

void request_init_in(struct request *r, const json_t *tc, const char *cwd,
                     const char *home, void *mem, size_t n) {
  request_empty(r);
  if (mem && n > sizeof(struct request_chunk) + 64) {
    struct request_chunk *ch = mem;
    ch->next = NULL;
    ch->cap = n - sizeof(*ch);
    r->chunks = r->lent = ch;
  }
  r->cwd = cwd && cwd[0] == '/' ? normal_cwd(r, cwd) : NULL;
  if (!json_is_object(tc)) {
    r->kind = (char *)(uintptr_t)known_kinds[K_OTHER];
    opaque(r, "the request has no toolCall");
    return;
  }
  // Not zeroed whole: read_ri sets c.f.
  struct ctx c;
  c.r = r;
  c.tc = tc;
  c.ri = NULL;
  c.t = (struct tc_fields){0};
  c.home = home && home[0] == '/' ? home : NULL;
  c.cap = 0;
  c.shared = false;
  c.rkind = K_OTHER;
  c.nul = false;
  bool nul = read_tc(tc, &c.t);
  r->tc_id = c.t.id_s;
  r->tc_kind = c.t.kind_s;
  r->tc_title = c.t.title_s;
  const json_t *ri = c.t.ri;
  if (ri && !json_is_object(ri) && !json_is_null(ri))
    opaque(r, "rawInput is not an object");
  c.ri = json_is_object(ri) ? ri : NULL;
  // read_tc left rawInput's values to this walk.
  nul = read_ri(c.ri, &c.f) || nul;
  r->raw_command = json_is_string(c.f.command) || json_is_array(c.f.command);
  // C strings end at a NUL byte where the agent's do not (a URL parser
  // strips it, a prompt goes on after it): such a request cannot be read.
  c.nul = nul;
  if (nul) {
    opaque(r, "a string of the request holds a NUL byte");
    struct tc_fields *t = &c.t;
    t->name_n = t->name_s ? strlen(t->name_s) : 0;
    t->id_n = t->id_s ? strlen(t->id_s) : 0;
    t->kind_n = t->kind_s ? strlen(t->kind_s) : 0;
    t->title_n = t->title_s ? strlen(t->title_s) : 0;
  }
  r->tool = tool_hint(&c);
  // A known kind as sent is its static spelling (the same bytes), any
  // other a copy.
  int k =
      c.t.kind_s && c.t.kind_n ? kind_exact(c.t.kind_s, c.t.kind_n) : K_OTHER;
  if (k < K_CUSTOM) {
    r->kind = (char *)(uintptr_t)known_kinds[k];
  } else {
    r->kind = ar_strndup(r, c.t.kind_s, c.t.kind_n);
    k = kind_index(r->kind, c.t.kind_n);
  }
  c.rkind = k;
  extract(&c);
}

// The last cwd normal_cwd found normal (a session sends the same one with
// every request): compared instead of searched again.
static struct {
  size_t n; // 0: none
  char s[256];
} normal_last;

// The session cwd, normalised: most are normal already (a copy then).
static char *normal_cwd(struct request *r, const char *cwd) {
  size_t n = strlen(cwd);
  if (n == normal_last.n && memcmp(cwd, normal_last.s, n) == 0)
    return ar_strndup(r, cwd, n);
  bool normal = n <= PATH_LEN_MAX && (n == 1 || cwd[n - 1] != '/');
  // Without "//" and "/." every segment is a name (the usual cwd).
  if (normal && !strstr(cwd, "//") && !strstr(cwd, "/.")) {
    if (n < sizeof(normal_last.s)) {
      memcpy(normal_last.s, cwd, n);
      normal_last.n = n;
    }
    return ar_strndup(r, cwd, n);
  }
  // Each segment (after a '/'): not empty, "." or "..".
  for (const char *s = cwd, *end = cwd + n;
       normal && (s = memchr(s, '/', (size_t)(end - s))) != NULL;) {
    s++;
    normal = !(s[0] == '/' || (s[0] == '.' && (!s[1] || s[1] == '/')) ||
               (s[0] == '.' && s[1] == '.' && (!s[2] || s[2] == '/')));
  }
  if (normal)
    return ar_strndup(r, cwd, n);
  return ar_take(r, path_normalize(NULL, cwd, NULL));
}

// The toolCall's fields, in one walk that also looks for NUL bytes (true
// when a string holds one; rawInput's values, when it is an object, are
// read_ri's to look at).
static bool read_tc(const json_t *tc, struct tc_fields *t) {
  bool nul = false;
  json_t *o = unconst(tc);
  for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
    const char *k = json_object_iter_key(it);
    size_t kn = json_object_iter_key_len(it);
    const json_t *v = json_object_iter_value(it);
    const char *sv = NULL;
    size_t sn = 0;
    if (json_is_string(v)) {
      sv = json_string_value(v);
      sn = json_string_length(v);
      nul = nul || memchr(sv, '\0', sn) != NULL;
    }
    switch (kn) {
    case 4:
      if (memcmp(k, "name", 4) == 0)
        t->name = v, t->name_s = sv, t->name_n = sn;
      else if (memcmp(k, "kind", 4) == 0)
        t->kind = v, t->kind_s = sv, t->kind_n = sn;
      break;
    case 5:
      if (memcmp(k, "title", 5) == 0)
        t->title = v, t->title_s = sv, t->title_n = sn;
      else if (memcmp(k, "_meta", 5) == 0)
        t->meta = v;
      break;
    case 7:
      if (memcmp(k, "content", 7) == 0)
        t->content = v;
      break;
    case 8:
      if (memcmp(k, "rawInput", 8) == 0) {
        t->ri = v;
        if (json_is_object(v))
          continue; // read_ri looks at its values
      }
      break;
    case 9:
      if (memcmp(k, "locations", 9) == 0)
        t->locations = v;
      break;
    case 10:
      if (memcmp(k, "toolCallId", 10) == 0)
        t->id = v, t->id_s = sv, t->id_n = sn;
      break;
    default:
      break;
    }
    if (!sv)
      nul = nul || has_nul(v, 1);
  }
  return nul;
}

// rawInput's keys: what read_ri reads (slot) and what collect_paths and
// scan_paths make of them (lists), found by a perfect hash (key_find).
enum {
  RI_NONE,
  RI_URL0, // url_keys[0..URL_KEYS-1]
  RI_COMMAND = RI_URL0 + URL_KEYS,
  RI_CWD,
  RI_FILE_PATH,
  RI_NOTEBOOK_PATH,
  RI_QUERY,
  RI_PROMPT,
  RI_CHANGES, // also an edit field
  RI_EDIT,    // one of the fields of new content (Claude Write, Edit,
              // MultiEdit, NotebookEdit)
};

// RawInput keys, by what their value is (a key may be in several lists).
enum {
  // where something is moved or written to (an edit there)
  KEY_DEST = 1,
  // a path, whatever it looks like
  KEY_PATH = 2,
  // a path when it looks like one (has a `/`, or starts with `.` or `~`):
  // `to`, `target`... are often not paths
  KEY_MAYBE = 4,
  // a list of paths
  KEY_LIST = 8,
  // content, not a place (never scanned for paths)
  KEY_TEXT = 16,
};

struct ri_key {
  const char *name;
  unsigned char n, slot, lists;
};

// Sorted by name; key_at below is made from this list (see key_find).
static const struct ri_key ri_keys[] = {
    {"absolute_path", 13, RI_NONE, KEY_PATH},
    {"body", 4, RI_NONE, KEY_TEXT},
    {"changes", 7, RI_CHANGES, 0},
    {"cmd", 3, RI_NONE, KEY_TEXT},
    {"code", 4, RI_NONE, KEY_TEXT},
    {"command", 7, RI_COMMAND, KEY_TEXT},
    {"comment", 7, RI_NONE, KEY_TEXT},
    {"content", 7, RI_EDIT, KEY_TEXT},
    {"cwd", 3, RI_CWD, KEY_TEXT},
    {"data", 4, RI_NONE, KEY_TEXT},
    {"description", 11, RI_NONE, KEY_TEXT},
    {"dest", 4, RI_NONE, KEY_DEST},
    {"destination", 11, RI_NONE, KEY_DEST},
    {"destination_path", 16, RI_NONE, KEY_DEST},
    {"diff", 4, RI_NONE, KEY_TEXT},
    {"dir", 3, RI_NONE, KEY_PATH},
    {"dir_path", 8, RI_NONE, KEY_PATH},
    {"directory", 9, RI_NONE, KEY_PATH},
    {"dst", 3, RI_NONE, KEY_DEST},
    {"edits", 5, RI_EDIT, 0},
    {"endpoint", 8, RI_URL0 + 6, 0},
    {"explanation", 11, RI_NONE, KEY_TEXT},
    {"file", 4, RI_NONE, KEY_PATH},
    {"filePath", 8, RI_NONE, KEY_PATH},
    {"filePaths", 9, RI_NONE, KEY_LIST},
    {"file_path", 9, RI_FILE_PATH, KEY_PATH},
    {"file_paths", 10, RI_NONE, KEY_LIST},
    {"filename", 8, RI_NONE, KEY_PATH},
    {"filepath", 8, RI_NONE, KEY_PATH},
    {"files", 5, RI_NONE, KEY_LIST},
    {"folder", 6, RI_NONE, KEY_PATH},
    {"from", 4, RI_NONE, KEY_MAYBE},
    {"from_path", 9, RI_NONE, KEY_PATH},
    {"glob", 4, RI_NONE, KEY_TEXT},
    {"href", 4, RI_URL0 + 4, 0},
    {"input_path", 10, RI_NONE, KEY_PATH},
    {"links", 5, RI_URL0 + 5, 0},
    {"location", 8, RI_NONE, KEY_MAYBE},
    {"message", 7, RI_NONE, KEY_TEXT},
    {"move_path", 9, RI_NONE, KEY_DEST},
    {"newPath", 7, RI_NONE, KEY_DEST},
    {"newText", 7, RI_NONE, KEY_TEXT},
    {"new_file_path", 13, RI_NONE, KEY_DEST},
    {"new_path", 8, RI_NONE, KEY_DEST},
    {"new_source", 10, RI_EDIT, KEY_TEXT},
    {"new_string", 10, RI_EDIT, KEY_TEXT},
    {"notebook_path", 13, RI_NOTEBOOK_PATH, KEY_PATH},
    {"oldPath", 7, RI_NONE, KEY_PATH},
    {"oldText", 7, RI_NONE, KEY_TEXT},
    {"old_path", 8, RI_NONE, KEY_PATH},
    {"old_string", 10, RI_EDIT, KEY_TEXT},
    {"out", 3, RI_NONE, KEY_MAYBE},
    {"outfile", 7, RI_NONE, KEY_DEST},
    {"output", 6, RI_NONE, KEY_MAYBE},
    {"output_file", 11, RI_NONE, KEY_DEST},
    {"output_path", 11, RI_NONE, KEY_DEST},
    {"patch", 5, RI_NONE, KEY_TEXT},
    {"path", 4, RI_NONE, KEY_PATH},
    {"paths", 5, RI_NONE, KEY_LIST},
    {"pattern", 7, RI_NONE, KEY_TEXT},
    {"plan", 4, RI_NONE, KEY_TEXT},
    {"prompt", 6, RI_PROMPT, KEY_TEXT},
    {"query", 5, RI_QUERY, KEY_TEXT},
    {"reason", 6, RI_NONE, KEY_TEXT},
    {"regex", 5, RI_NONE, KEY_TEXT},
    {"save_path", 9, RI_NONE, KEY_DEST},
    {"script", 6, RI_NONE, KEY_TEXT},
    {"source", 6, RI_NONE, KEY_MAYBE},
    {"source_path", 11, RI_NONE, KEY_PATH},
    {"src", 3, RI_NONE, KEY_MAYBE},
    {"src_path", 8, RI_NONE, KEY_PATH},
    {"summary", 7, RI_NONE, KEY_TEXT},
    {"target", 6, RI_NONE, KEY_MAYBE},
    {"target_file", 11, RI_NONE, KEY_DEST},
    {"target_path", 11, RI_NONE, KEY_DEST},
    {"text", 4, RI_NONE, KEY_TEXT},
    {"title", 5, RI_NONE, KEY_TEXT},
    {"to", 2, RI_NONE, KEY_MAYBE},
    {"to_path", 7, RI_NONE, KEY_DEST},
    {"uri", 3, RI_URL0 + 2, 0},
    {"uris", 4, RI_URL0 + 3, 0},
    {"url", 3, RI_URL0, 0},
    {"urls", 4, RI_URL0 + 1, 0},
};

// key_hash_words(name) -> 1 + the name's index in ri_keys (0: no key there).
// Made by trying multipliers until the names of ri_keys fell into distinct
// slots (a script of a few lines); test_request checks every name against
// the reference reader. A name added to ri_keys needs a new table.
static const unsigned char key_at[512] = {
    [6] = 10,   [29] = 53,  [36] = 35,  [39] = 19,  [45] = 44,  [46] = 24,
    [49] = 2,   [64] = 36,  [68] = 63,  [69] = 65,  [77] = 7,   [84] = 69,
    [88] = 47,  [89] = 6,   [95] = 68,  [96] = 76,  [100] = 22, [107] = 81,
    [118] = 12, [125] = 71, [126] = 72, [127] = 67, [130] = 79, [134] = 4,
    [143] = 51, [147] = 1,  [154] = 11, [167] = 3,  [169] = 43, [172] = 46,
    [174] = 21, [178] = 80, [187] = 56, [196] = 40, [202] = 64, [203] = 8,
    [205] = 55, [206] = 13, [209] = 70, [223] = 15, [224] = 41, [229] = 16,
    [233] = 30, [245] = 27, [267] = 38, [280] = 42, [293] = 17, [306] = 18,
    [308] = 62, [309] = 77, [316] = 29, [317] = 14, [320] = 78, [323] = 45,
    [336] = 48, [337] = 61, [340] = 25, [353] = 60, [364] = 54, [366] = 66,
    [369] = 73, [372] = 33, [375] = 5,  [391] = 58, [392] = 49, [394] = 50,
    [397] = 39, [404] = 28, [411] = 83, [413] = 52, [418] = 75, [428] = 23,
    [436] = 74, [439] = 31, [454] = 37, [459] = 9,  [466] = 34, [471] = 59,
    [476] = 57, [482] = 82, [492] = 20, [493] = 32, [505] = 26,
};

// A key's first and last 8 bytes (zero-padded, little-endian): all of it
// for keys of up to 16 bytes (the names of ri_keys are).
struct key_words {
  uint64_t w1, w2;
};

static struct key_words key_words_of(const char *k, size_t n) {
  uint64_t w1 = 0, w2;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  if (n >= 4 && n < 8) { // two 4-byte loads, not a memcpy of n bytes
    uint32_t lo, hi;
    memcpy(&lo, k, 4);
    memcpy(&hi, k + n - 4, 4);
    w1 = (uint64_t)lo | (uint64_t)hi << (8 * (n - 4));
  } else
#endif
    memcpy(&w1, k, n < 8 ? n : 8);
  if (n >= 8)
    memcpy(&w2, k + n - 8, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w1 = __builtin_bswap64(w1);
  if (n >= 8)
    w2 = __builtin_bswap64(w2);
#endif
  if (n < 8)
    w2 = w1;
  return (struct key_words){w1, w2};
}

// The words with the length, multiplied: the top 9 bits.
static unsigned key_hash_words(struct key_words w, size_t n) {
  return (unsigned)(((w.w1 ^ (w.w2 >> 1) ^ n) * 0x449fd49b12840ea1u) >> 55);
}

#define RI_KEYS (sizeof(ri_keys) / sizeof(*ri_keys))
#define KEY_MAX 16 // the longest name of ri_keys

// A key of up to KEY_MAX bytes equals a name of its length when their words
// do: compared as words (made from ri_keys on first use), not by memcmp. (A
// longer name added to ri_keys would never be found: test_request reads
// every name.)
static struct key_words ri_words[RI_KEYS];
static bool ri_words_made;

static const struct ri_key *key_find(const char *k, size_t n) {
  if (n > KEY_MAX || !n)
    return NULL;
  if (!ri_words_made) {
    for (size_t i = 0; i < RI_KEYS; i++)
      ri_words[i] = key_words_of(ri_keys[i].name, ri_keys[i].n);
    ri_words_made = true;
  }
  struct key_words w = key_words_of(k, n);
  unsigned i = key_at[key_hash_words(w, n)];
  if (!i || ri_keys[i - 1].n != n)
    return NULL;
  const struct key_words *e = &ri_words[i - 1];
  return e->w1 == w.w1 && e->w2 == w.w2 ? &ri_keys[i - 1] : NULL;
}

// The lists key (of length n: strlen, as a key is read everywhere but in
// read_ri) is in (0: none).
static unsigned key_class(const char *key, size_t n) {
  const struct ri_key *e = key_find(key, n);
  return e ? e->lists : 0;
}

// rawInput's fields (ri: an object or NULL); true when a string among its
// values holds a NUL byte.
static bool read_ri(const json_t *ri, struct ri_fields *f) {
  memset(f, 0, offsetof(struct ri_fields, lists));
  bool nul = false;
  size_t i = 0;
  json_t *o = unconst(ri);
  for (void *it = o ? json_object_iter(o) : NULL; it;
       it = json_object_iter_next(o, it)) {
    const char *k = json_object_iter_key(it);
    size_t kn = json_object_iter_key_len(it);
    const json_t *v = json_object_iter_value(it);
    if (json_is_string(v))
      nul = nul || memchr(json_string_value(v), '\0', json_string_length(v));
    else
      nul = nul || has_nul(v, 2);
    const struct ri_key *e = key_find(k, kn);
    unsigned slot = e ? e->slot : RI_NONE;
    if (i < RI_LISTS) { // a key as strlen reads it, as collect_paths would
      // A key found has no NUL (its kn bytes equal a name's).
      f->lists[i] = e ? e->lists
                    : memchr(k, '\0', kn)
                        ? (unsigned char)key_class(k, strlen(k))
                        : 0;
      f->vals[i] = v;
    }
    f->nkeys = ++i;
    switch (slot) {
    case RI_NONE:
      break;
    case RI_COMMAND:
      f->command = v;
      break;
    case RI_CWD:
      f->cwd = v;
      break;
    case RI_FILE_PATH:
      f->file_path = v;
      break;
    case RI_NOTEBOOK_PATH:
      f->notebook_path = v;
      break;
    case RI_QUERY:
      f->query = v;
      break;
    case RI_PROMPT:
      f->prompt = v;
      break;
    case RI_CHANGES:
      f->changes = v;
      f->edit = true; // an edit field too
      break;
    case RI_EDIT:
      f->edit = true;
      break;
    default: // RI_URL0 ..
      f->url[slot - RI_URL0] = v;
      f->any_url = true;
      break;
    }
  }
  return nul;
}

// True when a string in v holds a NUL byte, or v nests too deep to look.
static bool has_nul(const json_t *v, int depth) {
  if (depth > 64)
    return true;
  switch (json_typeof(v)) {
  case JSON_STRING:
    return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
  case JSON_ARRAY:
    for (size_t i = 0, n = json_array_size(v); i < n; i++)
      if (has_nul(json_array_get(v, i), depth + 1))
        return true;
    return false;
  case JSON_OBJECT: {
    json_t *o = unconst(v);
    for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it))
      if (has_nul(json_object_iter_value(it), depth + 1))
        return true;
    return false;
  }
  default:
    return false;
  }
}

void request_clear(struct request *r) {
  shcache_release(r->sh);
  shcache_release(r->alt_sh);
  for (struct request_chunk *ch = r->chunks, *next; ch; ch = next) {
    next = ch->next;
    if (ch != r->lent)
      free(ch);
  }
  request_empty(r);
}

// Every reading of the request the agent might act on, whatever its kind
// and title say (permission-rules §5.5): what runs (rawInput.command, a
// shell tool's title, a title that is another command), the MCP tool, the
// paths it names (with new content or a destination it is an edit), the
// URLs it fetches. All of them are judged; a label (the kind) never hides
// a field that acts.
static void extract(struct ctx *c) {
  struct request *r = c->r;
  enum rules_class cls;
  int tool_cls = r->tool && rules_tool_class(r->tool, &cls) ? (int)cls : -1;
  bool mcp = is_mcp(c);
  int k = c->rkind; // `Execute` is execute
  if (!mcp && k == K_OTHER)
    k = infer_kind(c, tool_cls);
  json_t *gemini = NULL;
  if (mcp && !c->ri) {
    c->ri = gemini = gemini_args(c);
    read_ri(c->ri, &c->f);
  }
  size_t first = r->natoms;
  const json_t *cmd = c->f.command;
  if (mcp && !json_is_string(cmd) && !json_is_array(cmd))
    cmd = NULL; // an MCP tool's `command` of another type is not a shell's
  bool shell = cmd || (!mcp && (k == K_EXECUTE || tool_cls == (int)RULES_BASH));
  if (shell)
    shell_reading(c, cmd, mcp);
  path_reading(c, k, tool_cls, shell, mcp);
  if (!mcp)
    fetch_reading(c, k, tool_cls);
  // A kind known only by its name (think, switch_mode, other, a custom
  // kind) is an atom of its own when nothing else must be allowed; a mode
  // change always is.
  bool covered = false;
  for (size_t i = first; i < r->natoms; i++)
    covered = covered || !r->atoms[i].deny_only;
  bool by_kind =
      !(KBIT(k) & (KBIT(K_READ) | KBIT(K_EDIT) | KBIT(K_DELETE) | KBIT(K_MOVE) |
                   KBIT(K_SEARCH) | KBIT(K_EXECUTE) | KBIT(K_FETCH)));
  if (!mcp && by_kind && (!covered || k == K_SWITCH_MODE)) {
    struct request_atom *a = add(c, REQUEST_KIND, kind_of(c, k));
    const char *title = c->t.title_s;
    if (a && (r->tool || title))
      a->name =
          r->tool ? ar_strdup(r, r->tool) : ar_strndup(r, title, c->t.title_n);
  }
  if (!r->natoms)
    opaque(r, "nothing in the request to judge");
  json_decref(gemini);
}

// A kind for requests without one (claude-code-acp 0.16, kind "other"):
// from the tool's name, else from the rawInput fields (Claude adapter).
static int infer_kind(struct ctx *c, int tool_cls) {
  static const int by_class[] = {[RULES_BASH] = K_EXECUTE,
                                 [RULES_READ] = K_READ,
                                 [RULES_EDIT] = K_EDIT,
                                 [RULES_WEBFETCH] = K_FETCH,
                                 [RULES_WEBSEARCH] = K_FETCH};
  if (tool_cls >= 0 && tool_cls <= (int)RULES_WEBSEARCH)
    return by_class[tool_cls];
  if (!c->ri)
    return K_OTHER;
  if (c->f.command)
    return K_EXECUTE;
  if (json_is_string(c->f.file_path) || json_is_string(c->f.notebook_path))
    return K_READ; // path_reading makes it an edit when content comes
  if (json_is_string(c->f.url[0]))
    return K_FETCH;
  return K_OTHER;
}

// What runs: rawInput.command (a string or codex's argv), else a Gemini
// shell tool's title. A title that shows another command than
// rawInput.command is a second reading, judged as well. An MCP tool that
// takes a command (a terminal tool) runs it: its atoms must be allowed as
// any command's are, besides the tool.
static void shell_reading(struct ctx *c, const json_t *cmd, bool mcp) {
  struct request *r = c->r;
  if (cmd) {
    from_command(c, cmd);
    if (!mcp && json_is_string(cmd))
      title_reading(c, json_string_value(cmd), str_len(c, cmd));
  } else {
    const char *title = c->t.title_s;
    bool gemini = r->tool && (strcmp(r->tool, "run_shell_command") == 0 ||
                              strcmp(r->tool, "ShellTool") == 0);
    if (gemini && title && *title)
      from_script(c, title, c->t.title_n, true, NULL);
    else
      opaque(r, "command text unavailable");
  }
}

// strchr(" \t\r\n", c) for a byte of a string (never its NUL).
static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// The title as a command, when it is not rawInput.command (cmd, cn bytes)
// as the Claude adapters show it (the command itself, or in backticks with
// ` escaped).
static void title_reading(struct ctx *c, const char *cmd, size_t cn) {
  const char *t = c->t.title_s;
  if (!t)
    return;
  size_t tn = c->t.title_n;
  while (tn && is_space(t[tn - 1]))
    tn--;
  while (tn && is_space(*t))
    t++, tn--;
  while (cn && is_space(cmd[cn - 1]))
    cn--;
  while (cn && is_space(*cmd))
    cmd++, cn--;
  bool ticks = tn >= 2 && t[0] == '`' && t[tn - 1] == '`';
  if (!ticks && tn == cn && memcmp(t, cmd, tn) == 0)
    return; // the title is the command (the loop below would copy it)
  char *plain = ar_alloc(c->r, tn + 1, 1);
  size_t n = 0;
  for (size_t i = ticks; i < tn - ticks; i++) {
    if (ticks && t[i] == '\\' && t[i + 1] == '`' && i + 1 < tn - 1)
      i++;
    plain[n++] = t[i];
  }
  plain[n] = '\0';
  if (!n || (n == cn && memcmp(plain, cmd, n) == 0) ||
      (n == 8 && memcmp(plain, "Terminal", 8) == 0))
    return;
  from_script(c, plain, n, false, json_string_value(c->f.cwd));
}

// rawInput.command: a string (Claude) or an argv (codex-acp).
static void from_command(struct ctx *c, const json_t *cmd) {
  const char *cwd = json_string_value(c->f.cwd);
  if (json_is_string(cmd)) {
    from_script(c, json_string_value(cmd), str_len(c, cmd), true, cwd);
    return;
  }
  char *script = json_is_array(cmd) ? argv_script(c->r, cmd) : NULL;
  if (!script) {
    opaque(c->r, "rawInput.command is neither a string nor an argv");
    return;
  }
  from_script(c, script, strlen(script), false, cwd);
}

// The length of a JSON string as strlen sees it: jansson's when the request
// holds no NUL byte (read_tc and read_ri looked at every string).
static size_t str_len(const struct ctx *c, const json_t *v) {
  return c->nul ? strlen(json_string_value(v)) : json_string_length(v);
}

// Analyses script (len bytes: the request's when lent, else in its arena);
// relative paths are resolved against cwd when it is absolute (the
// command's own directory), else the session cwd. A second script (the
// title read as a command) is kept beside the first. A lent script is
// copied, unless the shell cache keeps it: the request holds that entry.
static void from_script(struct ctx *c, const char *script, size_t len,
                        bool lent, const char *cwd) {
  struct request *r = c->r;
  bool alt = r->command != NULL;
  if (alt && r->alt_command) // only one second reading
    return;
  char **slot = alt ? &r->alt_command : &r->command;
  char *gcwd = cwd ? NULL : gemini_cwd(c->t.content);
  const char *dir = cwd && cwd[0] == '/' ? cwd : gcwd ? gcwd : r->cwd;
  if (len > REQUEST_COMMAND_MAX) {
    *slot = lent ? ar_strndup(r, script, len) : (char *)(uintptr_t)script;
    opaque(r, "command too long");
    free(gcwd);
    return;
  }
  const struct shell_result *sh = shcache_analyse_len(script, len, c->home);
  *(alt ? &r->alt_sh : &r->sh) = sh;
  const char *kept = lent ? shcache_script(sh) : script;
  *slot = kept ? (char *)(uintptr_t)kept : ar_strndup(r, script, len);
  if (sh->opaque)
    opaque_cat(r, "opaque command: ", sh->reason[0] ? sh->reason : "?");
  const struct sh_memo *m = memo_of(sh);
  if (m->plain && r->natoms == 0) {
    // The atoms as the memo lists them (add_shell_atom's, see memo_of).
    r->atoms = m->atoms;
    r->natoms = sh->natoms;
    c->shared = true;
    free(gcwd);
    return;
  }
  // The analyser places file atoms after a cd itself; the breaker's
  // operands are placed here (only those need the directories).
  struct bases b = {.n = 0, .unknown = false, .borrowed = false};
  if (m->needs_bases)
    cd_bases(sh, m->facts, dir, c->home, &b);
  for (size_t i = 0; i < sh->natoms; i++)
    add_shell_atom(c, &sh->atoms[i], m->facts[i], dir, &b);
  for (size_t i = b.borrowed; i < b.n; i++)
    free(b.dir[i]);
  free(gcwd);
}

// What an atom of the analysis is, worked out once per cached analysis
// (shcache_memo): FACT_DONE always, and
enum {
  FACT_DONE = 1,
  FACT_READ_ONLY = 2, // read_only()
  FACT_CD = 4,        // cd, pushd or popd (cd_bases)
  FACT_TARGETS = 8,   // find, mv or a remover (add_targets)
};

static unsigned char facts(const struct shell_atom *a) {
  unsigned char f = FACT_DONE;
  if (a->kind != SHELL_CMD)
    return f;
  const char *name = a->nwords ? base_name(a->words[0].text) : "";
  if (read_only(a))
    f |= FACT_READ_ONLY;
  if (a->nwords &&
      in_list(name, (const char *const[]){"cd", "pushd", "popd"}, 3))
    f |= FACT_CD;
  if (strcasecmp(name, "find") == 0 || in_list(name, removers, 6) ||
      strcasecmp(name, "mv") == 0)
    f |= FACT_TARGETS;
  return f;
}

static size_t memo_atoms_at(size_t natoms) {
  size_t at = sizeof(struct sh_memo) + natoms,
         al = _Alignof(struct request_atom);
  return (at + al - 1) & ~(al - 1);
}

static const struct sh_memo *memo_of(const struct shell_result *sh) {
  size_t n = sh->natoms, at = memo_atoms_at(n);
  bool small = n && n <= MEMO_ATOMS;
  struct sh_memo *m =
      shcache_memo(sh, at + (small ? n * sizeof(struct request_atom) : 0));
  if (n && m->facts[0]) // facts() is never 0: worked out already
    return m;
  bool plain = small;
  m->needs_bases = false;
  for (size_t i = 0; i < n; i++) {
    const struct shell_atom *a = &sh->atoms[i];
    unsigned char f = facts(a);
    m->facts[i] = f;
    if (a->kind != SHELL_CMD || (f & FACT_TARGETS))
      plain = false, m->needs_bases = true;
  }
  m->plain = plain;
  m->atoms = plain ? (struct request_atom *)(void *)((char *)m + at) : NULL;
  for (size_t i = 0; plain && i < n; i++) // as add and add_shell_atom
    m->atoms[i] =
        (struct request_atom){.cls = REQUEST_BASH,
                              .kind = shell_kinds[REQUEST_BASH],
                              .where = REQUEST_UNKNOWN,
                              .deny_only = sh->atoms[i].deny_only,
                              .cmd = &sh->atoms[i],
                              .read_only = m->facts[i] & FACT_READ_ONLY};
  return m;
}

// The directories a script's cd/pushd/popd may lead to (in any order: the
// atoms do not say which runs first, so every combination is kept).
static void cd_bases(const struct shell_result *sh, const unsigned char *memo,
                     const char *cwd, const char *home, struct bases *b) {
  b->n = 0; // dir is read up to n
  b->unknown = !cwd;
  b->borrowed = cwd != NULL;
  if (cwd)
    b->dir[b->n++] = (char *)(uintptr_t)cwd;
  for (size_t i = 0; i < sh->natoms; i++) {
    const struct shell_atom *a = &sh->atoms[i];
    if (!(memo[i] & FACT_CD))
      continue;
    const char *name = base_name(a->words[0].text);
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
                           unsigned char facts, const char *cwd,
                           const struct bases *b) {
  enum request_class cls = a->kind == SHELL_CMD    ? REQUEST_BASH
                           : a->kind == SHELL_READ ? REQUEST_READ
                                                   : REQUEST_EDIT;
  struct request_atom *at = add(c, cls, shell_kinds[cls]);
  if (!at)
    return;
  at->deny_only = a->deny_only;
  if (cls == REQUEST_BASH) {
    at->cmd = a;
    at->read_only = facts & FACT_READ_ONLY;
    if (facts & FACT_TARGETS)
      add_targets(c->r, at, a, b, c->home);
    return;
  }
  at->text = ar_strdup(c->r, a->path ? a->path : "");
  // The analyser places a literal relative path after a cd itself, but not
  // a glob: where that one points is unknown.
  bool moved = b->n > 1 || b->unknown;
  if (moved && a->path_dynamic && a->path && a->path[0] != '/')
    return;
  set_where(c->r, a->path, a->path_dynamic, cwd, c->home, &at->where, &at->lex,
            &at->res);
}

// The operands the circuit breaker looks at (permission-rules §5.6).
static void add_targets(struct request *r, struct request_atom *at,
                        const struct shell_atom *a, const struct bases *b,
                        const char *home) {
  const char *name = a->nwords ? base_name(a->words[0].text) : "";
  // The first byte before the library calls.
  char c0 = lower_c(name[0]);
  bool find = c0 == 'f' && strcasecmp(name, "find") == 0;
  if (find && a->more_args)
    push_target(r, at, "(starting points read from stdin by xargs)", true, NULL,
                home);
  if (find)
    find_targets(r, at, a, b, home);
  else if (in_list(name, removers, 6) ||
           (c0 == 'm' && strcasecmp(name, "mv") == 0))
    remove_targets(r, at, a, name, b, home);
}

// find -delete: its starting points (default "."), unless a -name/-path
// test with a narrowing pattern comes before it and no -o, ! or group can
// route around that test. -exec/-ok: unless one of the usual tests comes
// first (the command they run has its own atom, and {} is unknown there).
static void find_targets(struct request *r, struct request_atom *at,
                         const struct shell_atom *a, const struct bases *b,
                         const char *home) {
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
                              shell_pattern_narrows(a->words[i + 1].text));
    }
    branchy = branchy || in_list(w, branch, 6);
  }
  if (!(deletes && (!narrowed || branchy)) && (!acts || filtered))
    return;
  char here[] = ".";
  if (end == 1)
    add_target(r, at, &(struct shell_word){.text = here}, b, home);
  for (size_t i = 1; i < end; i++)
    add_target(r, at, &a->words[i], b, home);
}

// rm, rmdir, unlink: every operand; mv: the sources; chmod/chown/chgrp
// only with -R, and not their mode or owner operand.
static void remove_targets(struct request *r, struct request_atom *at,
                           const struct shell_atom *a, const char *name,
                           const struct bases *b, const char *home) {
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
    push_target(r, at, "(operands read from stdin by xargs)", true, NULL, home);
  size_t skip = own && !no_mode_operand ? 1 : 0, seen = 0;
  size_t keep = mv && !to_dir && n ? n - 1 : n;
  opts = true;
  for (size_t i = 1; i < a->nwords; i++)
    if (operand(a->words[i].text, &opts) && seen++ >= skip && seen <= keep)
      add_target(r, at, &a->words[i], b, home);
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
static void add_target(struct request *r, struct request_atom *at,
                       const struct shell_word *w, const struct bases *b,
                       const char *home) {
  bool relative = w->text[0] != '/' && w->text[0] != '~';
  for (size_t i = 0; i < (relative ? b->n : 1); i++)
    push_target(r, at, w->text, w->dynamic, relative ? b->dir[i] : "/", home);
  if (relative && b->unknown)
    push_target(r, at, w->text, true, NULL, home);
}

static void push_target(struct request *r, struct request_atom *at,
                        const char *text, bool dynamic, const char *dir,
                        const char *home) {
  if (at->ntargets >= REQUEST_PATHS_MAX) {
    // Too many to list: one that cannot be known stands for the rest.
    at->targets[at->ntargets - 1].where = REQUEST_UNKNOWN;
    return;
  }
  size_t n = at->ntargets;
  if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) { // full: 4, 8, 16, ...
    struct request_target *v = ar_alloc(r, (n ? 2 * n : 4) * sizeof(*v),
                                        _Alignof(struct request_target));
    if (n)
      memcpy(v, at->targets, n * sizeof(*v));
    at->targets = v;
  }
  struct request_target *t = &at->targets[at->ntargets++];
  *t = (struct request_target){.text = ar_strdup(r, text)};
  set_where(r, text, dynamic, dir, home, &t->where, &t->lex, &t->res);
}

// Read or Edit atoms on the paths a request names. With new content, a
// diff, a patch or a destination, or an edit/delete/move kind or tool, they
// are edits; with a read/search kind or tool, reads. They are the request's
// own atoms unless something else acts: next to a command (the command is
// what runs) or for an MCP tool (its allow rule carries them) they are
// checked by deny and ask rules, the protected paths and plan mode only.
// A path on a tool of any other kind (think, fetch, other...) is taken as
// an edit, a guessed one.
static void path_reading(struct ctx *c, int k, int tool_cls, bool shell,
                         bool mcp) {
  struct request *r = c->r;
  struct paths ps;
  ps.n = 0; // v is read up to n
  bool deep = mcp || (!shell && tool_cls < 0 && k == K_OTHER);
  bool edit_signal = collect_paths(c, &ps, deep);
  bool edit_kind = (KBIT(k) & (KBIT(K_EDIT) | KBIT(K_DELETE) | KBIT(K_MOVE))) ||
                   tool_cls == (int)RULES_EDIT;
  bool read_kind = ((KBIT(k) & (KBIT(K_READ) | KBIT(K_SEARCH))) &&
                    tool_cls != (int)RULES_WEBSEARCH) ||
                   tool_cls == (int)RULES_READ;
  enum request_class cls =
      read_kind && !edit_kind && !edit_signal ? REQUEST_READ : REQUEST_EDIT;
  bool guessed = !edit_kind && !edit_signal && !read_kind;
  bool own = !mcp && !guessed && (!shell || edit_signal);
  int kind = edit_signal && !edit_kind ? K_EDIT : guessed || mcp ? c->rkind : k;
  if (ps.n > REQUEST_PATHS_MAX) {
    opaque(r, "too many paths");
  } else if (ps.n) {
    // A guess is both: the tool may read the path, or write it.
    if (guessed)
      from_paths(c, &ps, REQUEST_READ, kind_of(c, kind), false, false);
    from_paths(c, &ps, cls, kind_of(c, kind), own, guessed);
  } else if (own) {
    // No path: a search searches the cwd; any other file tool works on a
    // path nobody can know. (A web search is no file search.)
    if (cls == REQUEST_READ && k == K_SEARCH && r->cwd) {
      ps.v[ps.n++] = r->cwd;
      from_paths(c, &ps, cls, kind_of(c, k), true, false);
    } else {
      struct request_atom *a = add(c, cls, kind_of(c, kind));
      if (a)
        a->where = REQUEST_UNKNOWN;
    }
  }
}

static void from_paths(struct ctx *c, const struct paths *ps,
                       enum request_class cls, const char *kind, bool own,
                       bool guessed) {
  for (size_t j = 0; j < ps->n; j++) {
    const char *p = ps->v[j];
    char lex[PATH_LEN_MAX + 1];
    bool normal =
        (c->r->cwd ? path_normalize_under(c->r->cwd, strlen(c->r->cwd), p,
                                          c->home, lex)
                   : path_normalize_into(NULL, p, c->home, lex)) > 0;
    bool dup = false;
    for (size_t k = 0; normal && k < c->r->natoms; k++) {
      const struct request_atom *o = &c->r->atoms[k];
      dup = dup || (o->cls == cls && o->deny_only == !own && o->lex &&
                    strcmp(o->lex, lex) == 0);
    }
    struct request_atom *a = dup ? NULL : add(c, cls, kind);
    if (!a)
      continue;
    a->deny_only = !own;
    a->guessed = guessed && cls == REQUEST_EDIT;
    a->text = ar_strdup(c->r, p);
    // The same absolute path placed already (a Read beside an Edit): no
    // second resolution.
    const struct request_atom *same = NULL;
    bool anchored = p[0] == '/' || (p[0] == '~' && (!p[1] || p[1] == '/'));
    for (size_t k = 0; anchored && !same && k + 1 < c->r->natoms; k++) {
      const struct request_atom *o = &c->r->atoms[k];
      if ((o->cls == REQUEST_READ || o->cls == REQUEST_EDIT) && o->text &&
          o->where == REQUEST_KNOWN && strcmp(o->text, p) == 0)
        same = o;
    }
    if (same) {
      a->where = REQUEST_KNOWN;
      a->lex = same->lex; // the arena's strings are shared, never freed alone
      a->res = same->res;
      continue;
    }
    // `~user/...` or a variable: where it points cannot be known.
    bool dynamic = strchr(p, '$') || (p[0] == '~' && p[1] && p[1] != '/');
    set_where(c->r, p, dynamic, c->r->cwd, c->home, &a->where, &a->lex,
              &a->res);
  }
}

// The paths a tool call names (copies): rawInput path keys (for MCP and
// unknown tools, deep: any string that looks like a path, at any depth),
// codex patch keys and move_path, diff content and locations. More than
// REQUEST_PATHS_MAX leaves ps->n above it. True when the request carries
// new content, a diff, a patch or a destination: it writes.
static bool collect_paths(const struct ctx *c, struct paths *ps, bool deep) {
  const json_t *ri = c->ri;
  bool writes = c->f.edit;
  if (deep) {
    size_t budget = 1024;
    scan_paths(c, ri, 0, &budget, ps);
  }
  const char *key;
  const json_t *val;
  // read_ri classified the keys (a rawInput with more is walked again).
  bool kept = c->f.nkeys <= RI_LISTS;
  void *it = kept ? NULL : json_object_iter(unconst(ri));
  for (size_t at = 0; kept ? at < c->f.nkeys : it != NULL; at++) {
    unsigned lists;
    if (kept) {
      val = c->f.vals[at];
      lists = c->f.lists[at];
    } else {
      key = json_object_iter_key(it);
      val = json_object_iter_value(it);
      lists = key_class(key, strlen(key));
      it = json_object_iter_next(unconst(ri), it);
    }
    const char *s = json_string_value(val);
    bool dest = lists & KEY_DEST;
    if (s && *s &&
        (dest || (lists & KEY_PATH) ||
         ((lists & KEY_MAYBE) &&
          (strchr(s, '/') || s[0] == '.' || s[0] == '~')))) {
      push_path(c->r, ps, s);
      writes = writes || dest;
    }
    size_t i;
    const json_t *e;
    if (lists & KEY_LIST)
      json_array_foreach(val, i, e) push_path(c->r, ps, json_string_value(e));
  }
  // codex patches: {path: {type, content|unified_diff, move_path}}, or a
  // list of {path, move_path}; anything else cannot be read.
  const json_t *changes = c->f.changes;
  if (json_is_object(changes)) {
    json_object_foreach(unconst(changes), key, val) {
      push_path(c->r, ps, key);
      push_path(c->r, ps, str(val, "move_path"));
    }
  } else if (json_is_array(changes)) {
    size_t i;
    json_array_foreach(changes, i, val) {
      push_path(c->r, ps, str(val, "path"));
      push_path(c->r, ps, str(val, "move_path"));
      if (!str(val, "path"))
        opaque(c->r, "a change without a path");
    }
  } else if (changes) {
    opaque(c->r, "rawInput.changes cannot be read");
  }
  size_t i;
  json_array_foreach(c->t.content, i, val) {
    const char *type = str(val, "type");
    if (type && strcmp(type, "diff") == 0) {
      push_path(c->r, ps, str(val, "path"));
      writes = true;
    }
  }
  json_array_foreach(c->t.locations, i, val)
      push_path(c->r, ps, str(val, "path"));
  return writes;
}

// Every string in v that is a path: under a path key, or one that looks
// like a path (absolute, ~, ./, ../, file://). Deeper than 8 levels or more
// than 1024 objects and arrays: opaque.
static void scan_paths(const struct ctx *c, const json_t *v, int depth,
                       size_t *budget, struct paths *ps) {
  if (!v || json_is_string(v) || json_is_number(v) || json_is_boolean(v) ||
      json_is_null(v))
    return;
  if (depth > 8 || !*budget) { // not looked at: it may hold a path
    opaque(c->r, "the tool's arguments nest too deep or are too many");
    return;
  }
  (*budget)--;
  const char *key;
  const json_t *e;
  size_t i;
  if (json_is_array(v)) {
    json_array_foreach(v, i, e) {
      const char *s = json_string_value(e);
      if (s && looks_like_path(s))
        push_path(c->r, ps, s);
      else
        scan_paths(c, e, depth + 1, budget, ps);
    }
    return;
  }
  json_object_foreach(unconst(v), key, e) {
    unsigned lists = key_class(key, strlen(key));
    if (lists & KEY_TEXT)
      continue;
    const char *s = json_string_value(e);
    if (s && *s && (looks_like_path(s) || (depth > 0 && (lists & KEY_PATH))))
      push_path(c->r, ps, s);
    else
      scan_paths(c, e, depth + 1, budget, ps);
  }
}

static bool looks_like_path(const char *s) {
  return !strpbrk(s, "\n\r") &&
         (s[0] == '/' || s[0] == '~' || strncmp(s, "./", 2) == 0 ||
          strncmp(s, "../", 3) == 0 || strncasecmp(s, "file:", 5) == 0);
}

// A copy of s into ps; a file: URL becomes its (percent-decoded) path.
static void push_path(struct request *r, struct paths *ps, const char *s) {
  if (!s || !*s || ps->n > REQUEST_PATHS_MAX)
    return;
  char *p = NULL;
  if (strncasecmp(s, "file:", 5) == 0) {
    const char *q = s + 5;
    if (strncmp(q, "//", 2) == 0) {
      q += 2;
      q += strcspn(q, "/"); // a host (localhost or any): the path follows
    }
    p = ar_alloc(r, strlen(q) + 2, 1);
    size_t n = 0;
    for (; *q && *q != '?' && *q != '#'; q++) {
      int hi = q[1] ? url_hex_value(q[1]) : -1,
          lo = hi >= 0 ? url_hex_value(q[2]) : -1;
      if (*q == '%' && hi >= 0 && lo >= 0 && (hi || lo)) {
        p[n++] = (char)(hi * 16 + lo);
        q += 2;
      } else {
        p[n++] = *q;
      }
    }
    p[n] = '\0';
    if (!n)
      return;
  } else {
    p = ar_strdup(r, s);
  }
  for (size_t i = 0; i < ps->n; i++)
    if (strcmp(ps->v[i], p) == 0)
      return;
  ps->v[ps->n++] = p;
}

// Gemini's MCP request shows the tool's arguments only as its text content:
// their JSON (or "[Payload omitted due to length ...]", which hides them).
static json_t *gemini_args(struct ctx *c) {
  const json_t *first = json_array_get(c->t.content, 0);
  const char *text = str(json_object_get(first, "content"), "text");
  if (!text)
    return NULL;
  if (strncmp(text, "[Payload omitted", 16) == 0) {
    opaque(c->r, "the MCP tool's arguments are not shown (too long)");
    return NULL;
  }
  json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(j)) {
    json_decref(j);
    if (text[strspn(text, " \t\r\n")] == '{')
      opaque(c->r, "the MCP tool's arguments cannot be read");
    return NULL;
  }
  return j;
}

// The URLs a request fetches: rawInput.url (Claude's WebFetch fetches that
// field and nothing else) and other URL fields (urls, uri, ...), else every
// URL in the title, the text content
// and rawInput.prompt (Gemini's web_fetch fetches every URL of its prompt,
// which its title shows). A title that shows a URL is a reading too: when
// fields disagree, every host must be allowed. None found is opaque; a web
// search is its own atom.
static void fetch_reading(struct ctx *c, int k, int tool_cls) {
  // rawInput fields that hold URLs: a string, or a list of strings.
  static const char *const url_keys[URL_KEYS] = {
      "url", "urls", "uri", "uris", "href", "links", "endpoint"};
  bool fetch = k == K_FETCH || tool_cls == (int)RULES_WEBFETCH;
  size_t found = 0, fields = 0;
  for (size_t i = 0; c->f.any_url && i < URL_KEYS; i++) {
    const json_t *v = c->f.url[i], *e;
    size_t j;
    if (json_is_string(v)) {
      fields++;
      read_url(c, json_string_value(v), json_string_length(v), false, &found);
    }
    json_array_foreach(v, j, e) {
      fields++;
      if (json_is_string(e))
        read_url(c, json_string_value(e), json_string_length(e), false, &found);
      else
        opaque(c->r, "rawInput.%s holds something else than URLs", url_keys[i]);
    }
  }
  bool search = tool_cls == (int)RULES_WEBSEARCH ||
                (fetch && !fields && json_is_string(c->f.query));
  if (search)
    add(c, REQUEST_SEARCH, "fetch");
  if (!fields && (!fetch || search))
    return;
  // With a URL field, that is what is fetched: a title cut short hides
  // nothing then.
  scan_urls(c, json_string_value(c->t.title), !fields, &found);
  if (!fields) {
    size_t i;
    const json_t *v;
    json_array_foreach(c->t.content, i, v)
        scan_urls(c, str(json_object_get(v, "content"), "text"), true, &found);
    scan_urls(c, json_string_value(c->f.prompt), true, &found);
  }
  if (!found)
    opaque(c->r, "no URL in the fetch request");
}

// A run of white space as JavaScript's \s sees it (Gemini splits its prompt
// on /\s+/): its length in bytes at p, or 0.
static size_t js_space(const char *p) {
  static const char *const wide[] = {
      "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\xa8", "\xe2\x80\xa9",
      "\xe2\x80\xaf", "\xe2\x81\x9f", "\xe3\x80\x80", "\xef\xbb\xbf"};
  unsigned char c = (unsigned char)*p;
  if (c < 0x80)
    return c && strchr(" \t\n\v\f\r", c) ? 1 : 0;
  if (c != 0xc2 && c != 0xe1 && c != 0xe2 && c != 0xe3 && c != 0xef)
    return 0;
  for (size_t i = 0; i < sizeof(wide) / sizeof(*wide); i++)
    if (strncmp(p, wide[i], strlen(wide[i])) == 0)
      return strlen(wide[i]);
  // U+2000..U+200A
  if ((unsigned char)p[0] == 0xe2 && (unsigned char)p[1] == 0x80 &&
      (unsigned char)p[2] >= 0x80 && (unsigned char)p[2] <= 0x8a)
    return 3;
  return 0;
}

// Every URL in a text: each white-space-separated word that holds "://" or
// starts with http: or https:, read whole (as Gemini reads its prompt).
// When the text must show every URL (whole), a text cut short ("..." at its
// end, as Gemini cuts its title at 100 characters) may hide more: opaque.
static void scan_urls(struct ctx *c, const char *text, bool whole,
                      size_t *found) {
  static const char gemini[] =
      "Processing URLs and instructions from prompt: \"";
  if (!text)
    return;
  size_t n = strlen(text);
  if (strncmp(text, gemini, sizeof(gemini) - 1) == 0 && n >= sizeof(gemini) &&
      text[n - 1] == '"') {
    text += sizeof(gemini) - 1;
    n -= sizeof(gemini);
  }
  bool cut = whole && n >= 3 &&
             (strncmp(text + n - 3, "...", 3) == 0 ||
              strncmp(text + n - 3, "\xe2\x80\xa6", 3) == 0);
  for (size_t i = 0; i < n;) {
    size_t sp = js_space(text + i);
    if (sp) {
      i += sp;
      continue;
    }
    size_t e = i;
    while (e < n && !js_space(text + e))
      e++;
    const char *w = text + i;
    size_t wn = e - i;
    bool url = (wn >= 5 && strncasecmp(w, "http:", 5) == 0) ||
               (wn >= 6 && strncasecmp(w, "https:", 6) == 0) ||
               has_scheme_sep(w, wn);
    if (url && !(cut && e == n)) // the last word of a cut text is partial
      read_url(c, w, wn, true, found);
    i = e;
  }
  if (cut) // deny rules still saw the hosts before the cut
    opaque(c->r, "the text of the fetch request is cut short");
}

static bool has_scheme_sep(const char *w, size_t n) {
  for (size_t i = 0; i + 3 <= n; i++)
    if (w[i] == ':' && w[i + 1] == '/' && w[i + 2] == '/')
      return true;
  return false;
}

// One URL: an http(s) host is a FETCH atom. Another scheme can never be
// allowed by a WebFetch rule (opaque), though deny rules still see its
// host; a URL that cannot be read is opaque.
static void read_url(struct ctx *c, const char *s, size_t n, bool from_text,
                     size_t *found) {
  struct url u;
  enum url_status st = url_parse(s, n, &u);
  int shown = (int)(n > 80 ? 80 : n);
  if (st != URL_OK) {
    opaque(c->r, "cannot tell the host of %.*s", shown, s);
    return;
  }
  bool web = strcmp(u.scheme, "http") == 0 || strcmp(u.scheme, "https") == 0;
  if (!web)
    opaque(c->r, "a %s: URL (only http and https can be allowed)", u.scheme);
  if (u.host) {
    add_host(c, u.host, found);
    // Gemini fetches a GitHub blob from raw.githubusercontent.com.
    if (from_text && web && strcmp(u.host, "github.com") == 0 &&
        strstr(u.path, "/blob/"))
      add_host(c, "raw.githubusercontent.com", found);
  }
  url_clear(&u);
}

static void add_host(struct ctx *c, const char *host, size_t *found) {
  size_t n = strlen(host);
  while (n && host[n - 1] == '.')
    n--; // rules compare hosts without their trailing dots
  if (!n) {
    opaque(c->r, "a URL with an empty host");
    return;
  }
  for (size_t i = 0; i < c->r->natoms; i++) {
    const struct request_atom *a = &c->r->atoms[i];
    if (a->cls == REQUEST_FETCH && strlen(a->name) == n &&
        strncmp(a->name, host, n) == 0)
      return;
  }
  if (++*found > REQUEST_URLS_MAX) {
    opaque(c->r, "too many URLs");
    return;
  }
  struct request_atom *a = add(c, REQUEST_FETCH, "fetch");
  if (a)
    a->name = ar_strndup(c->r, host, n);
}

// MCP tools: the name from toolCall.name, _meta.claudeCode.toolName or the
// toolCallId (Gemini), else a title that is an MCP name (Claude adapter).
static bool is_mcp(struct ctx *c) {
  const char *name = c->r->tool;
  const char *title = c->t.title_s;
  // The first byte before the library calls (every request comes here).
  if (!name && title && title[0] == 'm' && strncmp(title, "mcp__", 5) == 0 &&
      !strpbrk(title, " \t\n") && strcmp(c->r->kind, "other") == 0)
    name = title;
  if (!name || name[0] != 'm' || strncmp(name, "mcp_", 4) != 0)
    return false;
  struct request_atom *a = add(c, REQUEST_MCP, kind_of(c, c->rkind));
  if (a) {
    a->name = ar_strdup(c->r, name);
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
  if (r->natoms == c->cap || c->shared) {
    size_t cap = c->cap ? c->cap * 2 : 4;
    while (cap <= r->natoms) // the shared atoms (c->cap 0) and one more
      cap *= 2;
    struct request_atom *v =
        ar_alloc(r, cap * sizeof(*v), _Alignof(struct request_atom));
    if (r->natoms)
      memcpy(v, r->atoms, r->natoms * sizeof(*v));
    r->atoms = v;
    c->cap = cap;
    c->shared = false;
  }
  struct request_atom *a = &r->atoms[r->natoms++];
  *a =
      (struct request_atom){.cls = cls, .kind = kind, .where = REQUEST_UNKNOWN};
  return a;
}

// Places a path: known (normalised and resolved), a glob, or unknown.
static void set_where(struct request *r, const char *text, bool dynamic,
                      const char *cwd, const char *home,
                      enum request_where *where, char **lex, char **res) {
  *where = REQUEST_UNKNOWN;
  if (!text || !*text)
    return;
  // A variable, a substitution, ~user or braces can be anything; so can a
  // word the analyser calls dynamic for a reason not in its text.
  if (dynamic &&
      (strpbrk(text, "$`{") || text[0] == '~' || !strpbrk(text, "*?[")))
    return;
  char buf[PATH_LEN_MAX + 1];
  // The session cwd is normal (normal_cwd): a plain relative path is joined.
  size_t n = cwd && cwd == r->cwd
                 ? path_normalize_under(cwd, strlen(cwd), text, home, buf)
                 : path_normalize_into(cwd, text, home, buf);
  if (!n)
    return;
  if (dynamic) {
    *lex = ar_strndup(r, buf, n);
    *where = REQUEST_GLOB;
    return;
  }
  // Resolve the path as written, not the collapsed one: in link/../x the
  // kernel follows link first, so x may be far from where `..` suggests.
  char rbuf[PATH_LEN_MAX + 1];
  size_t rn = path_resolve_cached_into(cwd, text, home, rbuf);
  if (!rn)
    return;
  *lex = ar_strndup(r, buf, n);
  // Most paths are their own resolution: one string for both.
  *res = rn == n && memcmp(rbuf, buf, n) == 0 ? *lex : ar_strndup(r, rbuf, rn);
  *where = REQUEST_KNOWN;
}

// opaque(r, "%s%s", a, b) without vsnprintf (what it writes: a and b, cut
// to the reason's size).
static void opaque_cat(struct request *r, const char *a, const char *b) {
  if (r->opaque)
    return;
  r->opaque = true;
  size_t n = 0, cap = sizeof(r->reason) - 1;
  for (const char *s = a; *s && n < cap; s++)
    r->reason[n++] = *s;
  for (const char *s = b; *s && n < cap; s++)
    r->reason[n++] = *s;
  r->reason[n] = '\0';
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
static char *tool_hint(struct ctx *c) {
  const char *s = c->t.name_s;
  size_t sn = c->t.name_n;
  if (!s && c->t.meta) {
    s = str(json_object_get(c->t.meta, "claudeCode"), "toolName");
    sn = s ? strlen(s) : 0;
  }
  if (s && *s)
    return ar_strndup(c->r, s, sn);
  const char *id = c->t.id_s;
  size_t idn = c->t.id_n;
  if (!id)
    return NULL;
  // The tool is before a "__" with no other "__" after it: the last one,
  // or the one a byte before it ("a___b": "a" and "a_" are tried).
  size_t last = idn;
  for (size_t i = idn > 1 && memchr(id, '_', idn) ? idn - 1 : 0;
       i-- > 0 && last == idn;)
    if (id[i] == '_' && id[i + 1] == '_')
      last = i;
  for (size_t k = 0; last < idn && k < 2; k++) {
    size_t n = k == 0 ? last - 1 : last;
    if (k == 0 && (last == 0 || id[last - 1] != '_'))
      continue;
    if ((n >= 4 && strncmp(id, "mcp_", 4) == 0) || known_tool(id, n))
      return ar_strndup(c->r, id, n);
  }
  const char *dash = memchr(id, '-', idn);
  size_t n = dash ? (size_t)(dash - id) : idn;
  if (dash && known_tool(id, n))
    return ar_strndup(c->r, id, n);
  return NULL;
}

// The first n bytes of s (none of them NUL) name a tool rules.c knows.
// The last name known_tool looked up (an agent's tool calls name the same
// few tools, and rules.c's table never changes): compared, not looked up.
static struct {
  size_t n; // 0: none
  char s[32];
  bool known;
} known_last;

static bool known_tool(const char *s, size_t n) {
  if (n && n == known_last.n && memcmp(s, known_last.s, n) == 0)
    return known_last.known;
  enum rules_class cls;
  bool known = rules_tool_class_n(s, n, &cls);
  if (n && n <= sizeof(known_last.s)) {
    memcpy(known_last.s, s, n);
    known_last.n = n;
    known_last.known = known;
  }
  return known;
}

static const char *str(const json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

// A static spelling of a known kind (in any case), or the request's own
// string.
static const char *kind_of(const struct ctx *c, int kind) {
  return kind < K_CUSTOM ? known_kinds[kind] : c->r->kind;
}

// The index in known_kinds of k (n bytes) as sent, or K_CUSTOM: by
// length, then the bytes (memcmp of a constant size is a compare of words).
static int kind_exact(const char *k, size_t n) {
  switch (n) {
  case 4:
    if (memcmp(k, "read", 4) == 0)
      return K_READ;
    if (memcmp(k, "edit", 4) == 0)
      return K_EDIT;
    if (memcmp(k, "move", 4) == 0)
      return K_MOVE;
    break;
  case 5:
    if (memcmp(k, "think", 5) == 0)
      return K_THINK;
    if (memcmp(k, "fetch", 5) == 0)
      return K_FETCH;
    if (memcmp(k, "other", 5) == 0)
      return K_OTHER;
    break;
  case 6:
    if (memcmp(k, "delete", 6) == 0)
      return K_DELETE;
    if (memcmp(k, "search", 6) == 0)
      return K_SEARCH;
    break;
  case 7:
    if (memcmp(k, "execute", 7) == 0)
      return K_EXECUTE;
    break;
  case 11:
    if (memcmp(k, "switch_mode", 11) == 0)
      return K_SWITCH_MODE;
    break;
  default:
    break;
  }
  return K_CUSTOM;
}

// The index in known_kinds of k (n bytes, no NUL), in any case (as
// strcasecmp compares), or K_CUSTOM.
static int kind_index(const char *k, size_t n) {
  int e = kind_exact(k, n);
  if (e < K_CUSTOM || !(n >= 4 && n <= 11))
    return e;
  char c0 = lower_c(k[0]);
  for (int i = 0; i < K_CUSTOM; i++) {
    if (known_len[i] != n || known_kinds[i][0] != c0)
      continue;
    if (memcmp(k, known_kinds[i], n) == 0) // as sent, mostly
      return i;
    size_t j = 1;
    while (j < n && lower_c(k[j]) == known_kinds[i][j])
      j++;
    if (j == n)
      return i;
  }
  return K_CUSTOM;
}

// codex-acp's argv: `<shell> -lc SCRIPT` is the script; any other argv is
// quoted word by word so that the analyser sees exactly those words.
static char *argv_script(struct request *r, const json_t *argv) {
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
    return ar_strdup(r, json_string_value(json_array_get(argv, 2)));
  char *s = ar_alloc(r, len, 1), *o = s;
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
static char *gemini_cwd(const json_t *content) {
  static const char tag[] = "[current working directory ";
  if (!json_is_array(content))
    return NULL;
  const json_t *first = json_array_get(content, 0);
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

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static char lower_c(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
}

// Case folded; the lists are lower case (of ASCII, no entry empty). The
// first two bytes are compared first (as strcasecmp folds them: the broker
// keeps the "C" locale): these lists are looked at for every command of
// every request, and for each word of a find, whose entries all start with
// '-'. s[1] is read only when s[0] is not the NUL.
static bool in_list(const char *s, const char *const *v, size_t n) {
  char c = lower_c(s[0]), c1 = c ? lower_c(s[1]) : '\0';
  for (size_t i = 0; i < n; i++)
    if (c == v[i][0] && c1 == v[i][1] && strcasecmp(s, v[i]) == 0)
      return true;
  return false;
}

// jansson's iterators take a mutable object; they do not modify it.
static json_t *unconst(const json_t *j) {
  return (json_t *)(uintptr_t)j;
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
    if (name[0] == ro_specs[i].name[0] && strcmp(name, ro_specs[i].name) == 0)
      return ro_options(&ro_specs[i], a);
  return false;
}
