#include "path.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hash.h"
#include "base/mem.h"

#define LINKS_MAX 40
#define SEGS_MAX (PATH_LEN_MAX / 2 + 1)

struct seg {
  const char *s;
  size_t n;
};

struct buf {
  char s[PATH_LEN_MAX + 1];
  size_t n;
  bool over;
};

// Where a walk over a path's components stands: the path resolved so far,
// its hash, whether a component was missing (the rest is appended as
// written) and how many links were followed.
struct walk {
  struct buf out;
  uint64_t h;
  bool missing;
  int links;
};

static bool collapse(const char *in, struct buf *out);
static void buf_add(struct buf *b, const char *s, size_t n);
static void buf_pop(struct buf *b);
static size_t split(const char *p, struct seg *v, size_t max);
static size_t slashes(const char *p);
static bool one_match(const char *p, size_t pn, char c, bool classes, bool fold,
                      size_t *adv);
static bool class_match(const char *p, size_t pn, char c, bool fold,
                        size_t *adv);
static bool is_starstar(struct seg g);
static char *relative_pattern(const char *spec, const char *root,
                              bool for_allow);
static char *join3(const char *a, const char *b, const char *c);

char *path_absolute(const char *base, const char *p, const char *home) {
  if (!p || !*p)
    return NULL;
  if (home && p[0] == '~' && (p[1] == '/' || !p[1]))
    return join3(home, "/", p + 1);
  if (p[0] == '/')
    return xstrdup(p);
  if (base && base[0] == '/')
    return join3(base, "/", p);
  return NULL;
}

char *path_normalize(const char *base, const char *p, const char *home) {
  char *full = path_absolute(base, p, home);
  if (!full)
    return NULL;
  struct buf b; // on the stack: a malloc this large costs more than the rest
  char *r = collapse(full, &b) ? xstrdup(b.s) : NULL;
  free(full);
  return r;
}

// path_absolute into full (FULL_MAX + 1 bytes): its length, or 0 (none, or
// longer: the caller takes path_absolute's malloc'd way then).
#define FULL_MAX (2 * PATH_LEN_MAX)

static size_t absolute_into(const char *base, const char *p, const char *home,
                            char *full, bool *longer) {
  *longer = false;
  if (!p || !*p)
    return 0;
  const char *a = NULL, *c = p;
  if (home && p[0] == '~' && (p[1] == '/' || !p[1]))
    a = home, c = p + 1;
  else if (p[0] != '/' && base && base[0] == '/')
    a = base;
  else if (p[0] != '/')
    return 0;
  size_t na = a ? strlen(a) : 0, nc = strlen(c), n = na + (a ? 1 : 0) + nc;
  if (n > FULL_MAX) {
    *longer = true;
    return 0;
  }
  if (a) {
    memcpy(full, a, na);
    full[na] = '/';
  }
  memcpy(full + n - nc, c, nc + 1);
  return n;
}

size_t path_normalize_into(const char *base, const char *p, const char *home,
                           char *out) {
  char full[FULL_MAX + 1];
  bool longer;
  struct buf b;
  if (!absolute_into(base, p, home, full, &longer)) {
    char *r = longer ? path_normalize(base, p, home) : NULL;
    size_t n = r ? strlen(r) : 0;
    memcpy(out, r ? r : "", n + 1);
    free(r);
    return n;
  }
  if (!collapse(full, &b))
    return 0;
  memcpy(out, b.s, b.n + 1);
  return b.n;
}

// True when p (relative, n bytes) has no segment that normalising would
// change: none empty, "." or "..", no trailing '/' (a '.' after a '/' is
// taken as one: "a/.x" goes the long way).
static bool plain_relative(const char *p, size_t n) {
  if (!n || p[0] == '/' || p[0] == '.' || p[0] == '~' || p[n - 1] == '/')
    return false;
  for (size_t i = 0; i + 1 < n; i++)
    if (p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '.'))
      return false;
  return true;
}

size_t path_normalize_under(const char *base, size_t bn, const char *p,
                            const char *home, char *out) {
  size_t pn = strlen(p);
  if (!base || !plain_relative(p, pn))
    return path_normalize_into(base, p, home, out);
  size_t sep = bn > 1 ? 1 : 0; // "/" + p under the root
  size_t n = (bn > 1 ? bn : 0) + 1 + pn;
  if (n > PATH_LEN_MAX)
    return 0;
  if (sep)
    memcpy(out, base, bn);
  out[n - pn - 1] = '/';
  memcpy(out + n - pn, p, pn + 1);
  return n;
}

// ---- what lstat and readlink said, remembered for one epoch ----

#define PROBE_SLOTS 256

struct probe {
  uint64_t epoch; // 0: empty
  uint64_t hash;
  char *path; // kept from epoch to epoch (cap bytes), the slot's own
  size_t cap, len;
  int kind;     // PROBE_MISSING, PROBE_OTHER or PROBE_LINK
  char *target; // PROBE_LINK: readlink's answer
};

enum { PROBE_MISSING, PROBE_OTHER, PROBE_LINK, PROBE_FAILED };

static struct probe probes[PROBE_SLOTS];
static uint64_t probe_epoch;

void path_cache_epoch(uint64_t epoch) {
  probe_epoch = epoch;
}

// lstat (and readlink for a link) of path (n bytes), from the cache when
// `cached` and looked at in this epoch; h is path's hash (fnv64, from
// FNV64_OFFSET). target gets a link's target.
static int probe(const char *path, size_t n, uint64_t h, bool cached,
                 char *target, size_t cap) {
  struct probe *slot = NULL;
  if (cached && probe_epoch) {
    slot = &probes[h % PROBE_SLOTS];
    if (slot->epoch == probe_epoch && slot->hash == h && slot->len == n &&
        memcmp(slot->path, path, n) == 0) {
      if (slot->kind == PROBE_LINK)
        snprintf(target, cap, "%s", slot->target);
      return slot->kind;
    }
  }
  struct stat st;
  int kind = PROBE_OTHER;
  if (lstat(path, &st) != 0) {
    kind = PROBE_MISSING;
  } else if (S_ISLNK(st.st_mode)) {
    ssize_t tn = readlink(path, target, cap - 1);
    if (tn <= 0)
      return PROBE_FAILED;
    target[tn] = '\0';
    kind = PROBE_LINK;
  }
  if (slot) {
    // Every epoch looks at the same directories again: the slot's buffer
    // is reused.
    if (n >= slot->cap) {
      free(slot->path);
      slot->cap = n + 1 > 64 ? n + 1 : 64;
      slot->path = xmalloc(slot->cap);
    }
    memcpy(slot->path, path, n + 1);
    free(slot->target);
    slot->epoch = probe_epoch;
    slot->hash = h;
    slot->len = n;
    slot->kind = kind;
    slot->target = kind == PROBE_LINK ? xstrdup(target) : NULL;
  }
  return kind;
}

static void prefixes_clear(void);

void path_cache_free(void) {
  for (size_t i = 0; i < PROBE_SLOTS; i++) {
    free(probes[i].path);
    free(probes[i].target);
    probes[i] = (struct probe){0};
  }
  prefixes_clear();
}

static bool resolve(const char *abs, bool cached, struct walk *w);

char *path_resolve(const char *abs) {
  struct walk w;
  return resolve(abs, false, &w) ? xstrdup(w.out.s) : NULL;
}

char *path_resolve_cached(const char *abs) {
  struct walk w;
  return resolve(abs, true, &w) ? xstrdup(w.out.s) : NULL;
}

static void walk_start(struct walk *w) {
  w->out.s[0] = '\0';
  w->out.n = 0;
  w->out.over = false;
  w->h = FNV64_OFFSET;
  w->missing = false;
  w->links = 0;
}

// Walks the components of path (its leading '/' or none: each component is
// taken relative to what was walked before); false on a link that cannot
// be read, too many links, or a result over PATH_LEN_MAX.
static bool walk(struct walk *w, const char *path, bool cached) {
  // The components still to walk, as a path: links are spliced in front
  // (todo: a malloc'd copy once a link was followed).
  char *todo = NULL;
  struct buf *out = &w->out;
  const char *rest = path;
  while (*rest && !out->over) {
    while (*rest == '/')
      rest++;
    size_t n = 0;
    while (rest[n] && rest[n] != '/')
      n++;
    if (!n)
      break;
    const char *name = rest;
    rest += n;
    if (n == 1 && name[0] == '.')
      continue;
    if (n == 2 && name[0] == '.' && name[1] == '.') {
      buf_pop(out);
      w->h = fnv64_more(FNV64_OFFSET, out->s, out->n);
      continue;
    }
    size_t mark = out->n;
    if (out->n + 1 + n > PATH_LEN_MAX) { // what buf_add would say
      out->over = true;
      continue;
    }
    out->s[mark] = '/';
    memcpy(out->s + mark + 1, name, n);
    out->n = mark + 1 + n;
    out->s[out->n] = '\0';
    if (w->missing)
      continue;
    // The hash of the path so far, grown by the component (FNV-1a runs left
    // to right): each prefix is not hashed again from its start.
    w->h = fnv64_more(w->h, out->s + mark, out->n - mark);
    char target[PATH_LEN_MAX + 1];
    int kind = probe(out->s, out->n, w->h, cached, target, sizeof(target));
    if (kind == PROBE_MISSING) {
      w->missing = true; // a new file (or unreadable): the rest as written
      continue;
    }
    if (kind == PROBE_OTHER)
      continue;
    if (kind == PROBE_FAILED || ++w->links > LINKS_MAX) {
      free(todo);
      return false;
    }
    out->n = target[0] == '/' ? 0 : mark;
    out->s[out->n] = '\0';
    w->h = fnv64_more(FNV64_OFFSET, out->s, out->n);
    char *next = join3(target, "/", rest);
    free(todo);
    todo = next;
    rest = next;
  }
  free(todo);
  return !out->over;
}

static size_t walk_end(struct walk *w, char *out) {
  if (!w->out.n) {
    w->out.s[0] = '/';
    w->out.s[1] = '\0';
    w->out.n = 1;
  }
  memcpy(out, w->out.s, w->out.n + 1);
  return w->out.n;
}

// The walk over a base directory (the session cwd, home), remembered
// within an epoch: the paths of a request are mostly below one of them,
// and its components need not be walked again. The walk's state after the
// base is what walking base + "/" + p reaches before p's first component
// (a link's target is spliced in front of what is left, so p's components
// always come after everything base led to).
#define PREFIX_SLOTS 4
#define PREFIX_MAX 512 // longer bases, or bases resolved longer, are walked

static struct prefix {
  uint64_t epoch; // 0: empty
  size_t bn, n;
  bool ok, missing;
  int links;
  uint64_t h;
  char base[PREFIX_MAX], res[PREFIX_MAX];
} prefixes[PREFIX_SLOTS];
static unsigned prefix_next;

static void prefixes_clear(void) {
  for (size_t i = 0; i < PREFIX_SLOTS; i++)
    prefixes[i].epoch = 0;
}

static bool walk_base(struct walk *w, const char *base, size_t bn) {
  for (size_t i = 0; i < PREFIX_SLOTS; i++) {
    const struct prefix *x = &prefixes[i];
    if (x->epoch == probe_epoch && x->bn == bn &&
        memcmp(x->base, base, bn) == 0) {
      memcpy(w->out.s, x->res, x->n + 1);
      w->out.n = x->n;
      w->h = x->h;
      w->missing = x->missing;
      w->links = x->links;
      return x->ok;
    }
  }
  bool ok = walk(w, base, true);
  if (bn < PREFIX_MAX && w->out.n < PREFIX_MAX) {
    struct prefix *x = &prefixes[prefix_next++ % PREFIX_SLOTS];
    *x = (struct prefix){.epoch = probe_epoch,
                         .bn = bn,
                         .n = w->out.n,
                         .ok = ok,
                         .missing = w->missing,
                         .links = w->links,
                         .h = w->h};
    memcpy(x->base, base, bn);
    memcpy(x->res, w->out.s, w->out.n + 1);
  }
  return ok;
}

size_t path_resolve_cached_into(const char *base, const char *p,
                                const char *home, char *out) {
  if (!p || !*p)
    return 0;
  const char *a = NULL, *c = p;
  if (home && p[0] == '~' && (p[1] == '/' || !p[1]))
    a = home, c = p + 1;
  else if (p[0] != '/' && base && base[0] == '/')
    a = base;
  else if (p[0] != '/')
    return 0;
  if (!a || !probe_epoch) {
    char full[FULL_MAX + 1];
    bool longer;
    struct walk w;
    // Longer than FULL_MAX is longer than PATH_LEN_MAX: resolve refuses it.
    if (!absolute_into(base, p, home, full, &longer) ||
        !resolve(full, true, &w))
      return 0;
    memcpy(out, w.out.s, w.out.n + 1);
    return w.out.n;
  }
  // a + "/" + c, walked as resolve would: a from the memo when it can be.
  size_t an = strlen(a);
  if (an + 1 + strlen(c) > PATH_LEN_MAX || a[0] != '/')
    return 0;
  struct walk w;
  walk_start(&w);
  if (!walk_base(&w, a, an) || !walk(&w, c, true))
    return 0;
  return walk_end(&w, out);
}

// The resolved path into w->out (true), or false.
static bool resolve(const char *abs, bool cached, struct walk *w) {
  if (!abs || abs[0] != '/' || strlen(abs) > PATH_LEN_MAX)
    return false;
  walk_start(w);
  if (!walk(w, abs, cached))
    return false;
  if (!w->out.n) {
    w->out.s[0] = '/';
    w->out.s[1] = '\0';
    w->out.n = 1;
  }
  return true;
}

bool path_within(const char *path, const char *dir) {
  if (!path || !dir)
    return false;
  size_t n = strlen(dir);
  while (n > 1 && dir[n - 1] == '/')
    n--;
  if (n == 1 && dir[0] == '/')
    return path[0] == '/';
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool path_match(const char *pattern, const char *path, bool fold,
                bool dir_self) {
  if (!pattern || !path || pattern[0] != '/' || path[0] != '/')
    return false;
  // Sized by the slashes (a segment follows at least one): most paths fit
  // on the stack, and nothing is zeroed that split() fills anyway.
  enum { SMALL = 64 };
  struct seg pv_s[SMALL], sv_s[SMALL];
  bool cur_s[SMALL + 1], next_s[SMALL + 1];
  size_t pmax = slashes(pattern), smax = slashes(path);
  if (pmax > SEGS_MAX)
    pmax = SEGS_MAX;
  if (smax > SEGS_MAX)
    smax = SEGS_MAX;
  struct seg *pv = pmax <= SMALL ? pv_s : xmalloc(pmax * sizeof(*pv));
  struct seg *sv = smax <= SMALL ? sv_s : xmalloc(smax * sizeof(*sv));
  size_t m = split(pattern, pv, pmax), n = split(path, sv, smax);
  bool *cur = n <= SMALL ? cur_s : xmalloc((n + 1) * sizeof(*cur));
  bool *next = n <= SMALL ? next_s : xmalloc((n + 1) * sizeof(*next));
  memset(cur, 0, (n + 1) * sizeof(*cur));
  memset(next, 0, (n + 1) * sizeof(*next));
  bool *cur0 = cur, *next0 = next;
  // cur[j]: the pattern segments so far match the first j path segments.
  cur[0] = true;
  for (size_t i = 0; i < m; i++) {
    if (is_starstar(pv[i])) {
      // Zero or more segments; a trailing one needs at least one.
      bool need_one = i + 1 == m && !dir_self, any = false;
      for (size_t j = 0; j <= n; j++) {
        if (need_one)
          next[j] = any;
        any = any || cur[j];
        if (!need_one)
          next[j] = any;
      }
    } else {
      next[0] = false;
      for (size_t j = 0; j < n; j++)
        next[j + 1] = cur[j] && path_glob_segment(pv[i].s, pv[i].n, sv[j].s,
                                                  sv[j].n, true, fold);
    }
    bool *t = cur;
    cur = next;
    next = t;
  }
  bool r = cur[n];
  if (pv != pv_s)
    free(pv);
  if (sv != sv_s)
    free(sv);
  if (cur0 != cur_s)
    free(cur0);
  if (next0 != next_s)
    free(next0);
  return r;
}

char *path_rule_pattern(const char *spec, const char *root, const char *home,
                        bool for_allow, char *err, size_t errlen) {
  const char *why = NULL;
  char *pat = NULL;
  if (!spec || !*spec)
    why = "empty path";
  else if (strlen(spec) > PATH_LEN_MAX)
    why = "path too long";
  else if (spec[0] == '/' && spec[1] == '/')
    pat = xstrdup(spec + 1);
  else if (spec[0] == '~' && (spec[1] == '/' || !spec[1])) {
    if (home && home[0] == '/')
      pat = join3(home, "", spec + 1);
    else
      why = "no home directory for ~/";
  } else if (spec[0] == '~')
    why = "~user is not supported: write ~/path or //absolute/path";
  else if (!root || root[0] != '/')
    why = "no project root for a root-relative path";
  else if (spec[0] == '/')
    pat = join3(root, "", spec);
  else
    pat = relative_pattern(spec, root, for_allow);
  if (why) {
    snprintf(err, errlen, "%s", why);
    return NULL;
  }
  // A trailing slash names a directory: everything below it.
  size_t n = strlen(pat);
  if (n && pat[n - 1] == '/') {
    pat[n - 1] = '\0';
    char *t = join3(pat, "/", "**");
    free(pat);
    pat = t;
  }
  struct buf *b = xmalloc(sizeof(*b));
  char *r = collapse(pat, b) ? xstrdup(b->s) : NULL;
  free(b);
  free(pat);
  if (!r)
    snprintf(err, errlen, "path too long");
  return r;
}

char *path_escape(const char *path) {
  size_t n = strlen(path);
  char *r = xmalloc(2 * n + 1), *o = r;
  for (const char *p = path; *p; p++) {
    if (strchr("*?[]\\", *p))
      *o++ = '\\';
    *o++ = *p;
  }
  *o = '\0';
  return r;
}

// Collapses "//", "." and ".." of an absolute path into out.
static bool collapse(const char *in, struct buf *out) {
  out->n = 0;
  out->over = false;
  out->s[0] = '\0';
  if (in[0] != '/')
    return false;
  for (const char *p = in; *p;) {
    while (*p == '/')
      p++;
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.')
      buf_pop(out);
    else if (n && !(n == 1 && p[0] == '.')) {
      buf_add(out, "/", 1);
      buf_add(out, p, n);
    }
    p += n;
  }
  if (!out->n)
    buf_add(out, "/", 1);
  return !out->over;
}

static void buf_add(struct buf *b, const char *s, size_t n) {
  if (b->over || b->n + n > PATH_LEN_MAX) {
    b->over = true;
    return;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

// Drops the last component ("/a/b" -> "/a"; "/a" -> "").
static void buf_pop(struct buf *b) {
  while (b->n && b->s[b->n - 1] != '/')
    b->n--;
  if (b->n)
    b->n--;
  b->s[b->n] = '\0';
}

// The number of '/' in p: a bound on its segments.
static size_t slashes(const char *p) {
  size_t n = 0;
  for (; *p; p++)
    n += *p == '/';
  return n;
}

static size_t split(const char *p, struct seg *v, size_t max) {
  size_t n = 0;
  while (*p && n < max) {
    while (*p == '/')
      p++;
    size_t len = strcspn(p, "/");
    if (len)
      v[n++] = (struct seg){p, len};
    p += len;
  }
  return n;
}

static bool is_starstar(struct seg g) {
  return g.n == 2 && g.s[0] == '*' && g.s[1] == '*';
}

// `*` backtracks to the last star.
bool path_glob_segment(const char *p, size_t pn, const char *s, size_t sn,
                       bool classes, bool fold) {
  size_t pi = 0, si = 0, star = SIZE_MAX, star_s = 0;
  while (si < sn) {
    size_t adv = 0;
    if (pi < pn && p[pi] == '*') {
      star = ++pi;
      star_s = si;
    } else if (pi < pn &&
               one_match(p + pi, pn - pi, s[si], classes, fold, &adv)) {
      pi += adv;
      si++;
    } else if (star != SIZE_MAX) {
      pi = star;
      si = ++star_s;
    } else {
      return false;
    }
  }
  while (pi < pn && p[pi] == '*')
    pi++;
  return pi == pn;
}

static char lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

// The pattern character at p (with classes: `?`, a class or an escape)
// against c; *adv is how many pattern bytes it took.
static bool one_match(const char *p, size_t pn, char c, bool classes, bool fold,
                      size_t *adv) {
  *adv = 1;
  char want = p[0];
  if (classes) {
    if (p[0] == '?')
      return true;
    if (p[0] == '[' && class_match(p, pn, c, fold, adv))
      return true;
    if (p[0] == '[' && *adv > 1)
      return false; // a well-formed class that does not hold c
    *adv = 1;
    if (p[0] == '\\' && pn > 1) {
      want = p[1];
      *adv = 2;
    }
  }
  return fold ? lower(want) == lower(c) : want == c;
}

// A bracket class at p. *adv is its length when it is well formed (else 1:
// the `[` is then literal).
static bool class_match(const char *p, size_t pn, char c, bool fold,
                        size_t *adv) {
  size_t i = 1;
  bool neg = i < pn && (p[i] == '!' || p[i] == '^');
  if (neg)
    i++;
  bool hit = false;
  size_t first = i;
  for (; i < pn && (p[i] != ']' || i == first); i++) {
    char lo = p[i], hi = lo;
    if (i + 2 < pn && p[i + 1] == '-' && p[i + 2] != ']') {
      hi = p[i + 2];
      i += 2;
    }
    char x = fold ? lower(c) : c;
    if ((c >= lo && c <= hi) || (fold && x >= lower(lo) && x <= lower(hi)))
      hit = true;
  }
  if (i >= pn) {
    *adv = 1;
    return false;
  }
  *adv = i + 1;
  return hit != neg;
}

// A relative specifier (`./x` or bare `x`) made absolute under root.
static char *relative_pattern(const char *spec, const char *root,
                              bool for_allow) {
  while (spec[0] == '.' && spec[1] == '/')
    spec += 2;
  char *s = xstrdup(spec);
  size_t n = strlen(s);
  bool dir = false;
  while (n && s[n - 1] == '/') {
    s[--n] = '\0';
    dir = true;
  }
  if (dir) {
    char *t = join3(s, "/", "**");
    free(s);
    s = t;
  }
  char *slash = strchr(s, '/');
  bool single_dir = slash && strcmp(slash, "/**") == 0 && slash != s;
  const char *mid = "/";
  if (!*s)
    mid = "/**";
  else if (!slash || (single_dir && !for_allow))
    mid = "/**/";
  char *r = join3(root, mid, s);
  free(s);
  return r;
}

static char *join3(const char *a, const char *b, const char *c) {
  size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
  char *r = xmalloc(na + nb + nc + 1);
  memcpy(r, a, na);
  memcpy(r + na, b, nb);
  memcpy(r + na + nb, c, nc + 1);
  return r;
}
