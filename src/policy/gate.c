#include "gate.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "path.h"
#include "settings.h"
#include "shcache.h"

#define GATE_MAX_PROJECTS 256 // projects with runtime state
#define GATE_MAX_MEMORY 1024  // rules remembered per session
#define GATE_SNAPSHOTS 8      // projects whose loaded settings are kept
// File times advance by clock ticks (up to 2 s on some filesystems): a
// file changed within this long of when it was read may keep its times.
#define GATE_RACY_NS ((int64_t)2000000000)

// Runtime state of one project, for the life of the broker.
struct project {
  char *root;
  int yolo; // -1: as the settings say; 0: off; 1: on (:AcpYolo)
  int mode; // -1: as the settings say; else an enum policy_mode (:AcpMode)
};

// Rules the person allowed for one session ("allow for the session").
struct memory {
  char *agent;
  char *session;
  char **rules;
  size_t nrules;
  struct policy *compiled; // rebuilt when rules change
  struct memory *next;
};

// What one of the files settings_load reads (settings_files) was when it
// was read: what is there (absent, a file or broken, and why, as
// settings_file_probe tells them apart: a dangling symlink or a directory
// in its place is not an absent file), stat()'s answer, and the content,
// for when its times cannot tell a change (see file_fresh).
struct file_id {
  char *path;
  enum settings_file what;
  char why[300];  // what is broken
  struct stat st; // the file's; when absent, its deepest existing directory's
  size_t exists;  // absent: the length of that directory's path (or 0)
  char *data;     // the content (NULL: absent, unreadable or too large)
  size_t len;
  int64_t read_ns; // CLOCK_REALTIME before it was read
};

// A project's settings as settings_load found them, with the policy
// compiled from them. Valid while every file is as it was, the setup()
// options and the environment are the same, and the gate wrote nothing.
struct snapshot {
  char *root;
  char *env[SETTINGS_NENV]; // settings_env's values (NULL: unset)
  uint64_t gen;             // the gate's generation when loaded
  uint64_t used;            // for evicting the least recently used
  uint64_t checked;         // the epoch its files were last found unchanged
  struct file_id files[SETTINGS_FILES_MAX];
  size_t nfiles;
  struct settings s;
  struct policy_rule_text *texts;
  struct policy_input in; // as the settings say (no runtime state)
  struct policy *policy;  // compiled for policy_mode and policy_yolo
  enum policy_mode policy_mode;
  bool policy_yolo;
};

struct gate {
  json_t *setup; // setup() options, or NULL
  struct project projects[GATE_MAX_PROJECTS];
  size_t nprojects;
  struct memory *memory;
  uint64_t gen; // bumped by whatever may change settings: setup(), writes
  uint64_t clock;
  uint64_t epoch; // gate_epoch: files are looked at once per epoch
  struct snapshot *snaps[GATE_SNAPSHOTS];
  // The project root of the last cwd, found in root_epoch (gen root_gen),
  // and whether it is UTF-8 (root_utf8: root, else NULL); $HOME as home()
  // said then.
  char *root_cwd, *root, *home;
  const char *root_utf8;
  uint64_t root_epoch, root_gen;
  // Where root's snapshot and runtime state are (1 + the index in snaps
  // and projects; 0: not known), for snapshot_get and project called with
  // root itself (the string root_of gave): the name compares are left out.
  // Set when one is found there, 0 when root_of finds another root or the
  // place is given to another root (snaps) or moved (projects).
  size_t root_slot, root_proj;
};

struct gate *gate_new(void) {
  return xcalloc(1, sizeof(struct gate));
}

static void memory_free(struct memory *m) {
  for (size_t i = 0; i < m->nrules; i++)
    free(m->rules[i]);
  free(m->rules);
  policy_free(m->compiled);
  free(m->agent);
  free(m->session);
  free(m);
}

static void snapshot_free(struct snapshot *sn);

void gate_free(struct gate *g) {
  path_cache_free();
  shcache_clear();
  for (size_t i = 0; i < GATE_SNAPSHOTS; i++)
    snapshot_free(g->snaps[i]);
  for (size_t i = 0; i < g->nprojects; i++)
    free(g->projects[i].root);
  for (struct memory *m = g->memory, *next; m; m = next) {
    next = m->next;
    memory_free(m);
  }
  json_decref(g->setup);
  free(g->root_cwd);
  free(g->root);
  free(g->home);
  free(g);
}

void gate_epoch(struct gate *g, uint64_t epoch) {
  g->epoch = epoch;
  path_cache_epoch(epoch);
}

void gate_configure(struct gate *g, json_t *setup) {
  g->gen++;
  json_decref(g->setup);
  g->setup = json_is_object(setup) ? setup : NULL;
  if (!g->setup)
    json_decref(setup);
}

static const char *home(void) {
  const char *h = getenv("HOME");
  return h ? h : "/";
}

// The runtime state of root (created on first use; when the table is full
// the oldest is reused — it only holds overrides, never permissions).
static struct project *project(struct gate *g, const char *root) {
  bool ours = root == g->root; // root_of's string (g->root_proj)
  if (ours && g->root_proj)
    return &g->projects[g->root_proj - 1];
  for (size_t i = 0; i < g->nprojects; i++)
    if (strcmp(g->projects[i].root, root) == 0) {
      if (ours)
        g->root_proj = i + 1;
      return &g->projects[i];
    }
  if (g->nprojects == GATE_MAX_PROJECTS) {
    free(g->projects[0].root);
    memmove(g->projects, g->projects + 1,
            (GATE_MAX_PROJECTS - 1) * sizeof(g->projects[0]));
    g->nprojects--;
    g->root_proj = 0; // moved
  }
  struct project *p = &g->projects[g->nprojects++];
  *p = (struct project){xstrdup(root), -1, -1};
  if (ours)
    g->root_proj = g->nprojects;
  return p;
}

// Per-agent yolo (agents.<name>.yolo). settings_load has merged setup()
// and the user settings file, the file winning, so that `:AcpYolo off`
// (which writes false there) also ends a yolo that setup() turned on.
static bool agent_yolo(const struct settings *s, const char *agent) {
  // Most settings trust no agent: no key to hash then.
  return agent && json_object_size(s->agents_yolo) &&
         json_is_true(json_object_get(s->agents_yolo, agent));
}

// ---- the settings cache ----
//
// Loading a project's settings reads up to SETTINGS_FILES_MAX files and
// compiling its rules costs far more than deciding, so both are kept per
// project root and done again only when something they come from changed.
// Settings name the files (settings_files: a source added there is watched
// here too) and the environment variables behind their paths. Before each
// use every file settings_load reads is looked at again with stat(),
// absent ones included: a file that appeared, went, became broken (a
// directory, a dangling symlink: settings_file_probe) or whose device,
// inode, size, mode, mtime or ctime (nanoseconds) changed means a reload.
// An absent file is looked at through the deepest directory on its way
// that exists: nothing appears on the way without changing that.
// Times advance by clock ticks, so a file written again within one tick
// can keep them all; a file whose mtime or ctime is that recent ("racy",
// as git calls it) has its content compared too, until it is older. The
// setup() options and those variables are part of the key, and
// whatever the gate itself writes (rules, trust, per-agent yolo) bumps a
// generation that invalidates every snapshot.

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t ts_ns(struct timespec t) {
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static char *env_dup(const char *name) {
  const char *v = getenv(name);
  return v ? xstrdup(v) : NULL;
}

static bool env_same(const struct snapshot *sn) {
  for (size_t i = 0; i < SETTINGS_NENV; i++) {
    const char *v = getenv(settings_env[i]);
    if (!v != !sn->env[i] || (v && strcmp(v, sn->env[i]) != 0))
      return false;
  }
  return true;
}

// The content of path (a new string in *data), read as settings_load
// reads it, or false when it cannot be read whole.
static bool read_all(const char *path, char **data, size_t *len) {
  char err[512];
  return settings_slurp(path, data, len, err, sizeof(err)) == 0 && *data;
}

static void file_read(struct file_id *f) {
  f->read_ns = realtime_ns();
  f->what =
      settings_file_probe(f->path, &f->st, &f->exists, f->why, sizeof(f->why));
  if (f->what == SETTINGS_FILE)
    read_all(f->path, &f->data, &f->len);
}

static bool same_stat(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
         a->st_size == b->st_size && a->st_mode == b->st_mode &&
         ts_ns(a->st_mtim) == ts_ns(b->st_mtim) &&
         ts_ns(a->st_ctim) == ts_ns(b->st_ctim);
}

// stat() of directories during one look at a snapshot's files: most share
// the project root or HOME, so each is asked once.
struct dir_memo {
  struct {
    const char *path; // its first n bytes are the directory
    size_t n;
    int rc;
    struct stat st;
  } m[SETTINGS_FILES_MAX];
  size_t n;
};

static int dir_stat(struct dir_memo *dm, const char *path, size_t n,
                    struct stat *st) {
  for (size_t i = 0; i < dm->n; i++)
    if (dm->m[i].n == n && memcmp(dm->m[i].path, path, n) == 0) {
      *st = dm->m[i].st;
      return dm->m[i].rc;
    }
  char buf[PATH_MAX + 1]; // the directory on the stack when it fits
  char *dir = buf;
  if (n < sizeof(buf)) {
    memcpy(buf, path, n);
    buf[n] = '\0';
  } else {
    dir = xstrndup(path, n);
  }
  int rc = stat(dir, st);
  if (dir != buf)
    free(dir);
  if (dm->n < SETTINGS_FILES_MAX) {
    dm->m[dm->n].path = path;
    dm->m[dm->n].n = n;
    dm->m[dm->n].rc = rc;
    dm->m[dm->n++].st = *st;
  }
  return rc;
}

// True when f is still what was read. A racy file is read again and
// compared; when it is unchanged it counts as read now.
static bool file_fresh(struct file_id *f, struct dir_memo *dm) {
  int64_t now = realtime_ns();
  struct stat st;
  if (f->what == SETTINGS_ABSENT && f->exists) {
    // Cheap: nothing was created or removed in the deepest directory on
    // its way since it was looked at — neither the file, nor a directory
    // or a dangling symlink on its way — unless that directory changed
    // within a clock tick of it (then its times cannot tell).
    int64_t since = f->read_ns - GATE_RACY_NS;
    if (dir_stat(dm, f->path, f->exists, &st) == 0 && same_stat(&st, &f->st) &&
        ts_ns(st.st_mtim) < since && ts_ns(st.st_ctim) < since)
      return true;
  }
  char why[sizeof(f->why)];
  size_t exists;
  enum settings_file what =
      settings_file_probe(f->path, &st, &exists, why, sizeof(why));
  if (what != f->what || strcmp(why, f->why) != 0)
    return false;
  if (what == SETTINGS_ABSENT) { // the answer is the same: look from here
    f->st = st;
    f->exists = exists;
    f->read_ns = now;
  }
  if (what != SETTINGS_FILE)
    return true; // still absent, or still broken the same way
  if (!same_stat(&st, &f->st))
    return false;
  int64_t since = f->read_ns - GATE_RACY_NS;
  if (ts_ns(st.st_mtim) < since && ts_ns(st.st_ctim) < since)
    return true;
  char *data;
  size_t len;
  bool readable = read_all(f->path, &data, &len);
  bool same = readable == (f->data != NULL) &&
              (!readable || (len == f->len && memcmp(data, f->data, len) == 0));
  free(data);
  if (same)
    f->read_ns = now;
  return same;
}

static void snapshot_free(struct snapshot *sn) {
  if (!sn)
    return;
  for (size_t i = 0; i < sn->nfiles; i++) {
    free(sn->files[i].path);
    free(sn->files[i].data);
  }
  for (size_t i = 0; i < SETTINGS_NENV; i++)
    free(sn->env[i]);
  policy_free(sn->policy);
  free(sn->texts);
  settings_free(&sn->s);
  free(sn->root);
  free(sn);
}

// Loads root's settings. The files are read (for their identity) before
// settings_load reads them: a change in between makes the snapshot look
// stale next time, never fresh.
static struct snapshot *snapshot_load(struct gate *g, const char *root) {
  struct snapshot *sn = xcalloc(1, sizeof(*sn));
  sn->root = xstrdup(root);
  sn->gen = g->gen;
  for (size_t i = 0; i < SETTINGS_NENV; i++)
    sn->env[i] = env_dup(settings_env[i]);
  char *paths[SETTINGS_FILES_MAX];
  sn->nfiles = settings_files(root, paths);
  for (size_t i = 0; i < sn->nfiles; i++) {
    sn->files[i].path = paths[i];
    file_read(&sn->files[i]);
  }
  settings_load(root, g->setup, &sn->s);
  sn->in = settings_policy_input(&sn->s, &sn->texts);
  return sn;
}

static bool snapshot_fresh(const struct gate *g, struct snapshot *sn) {
  if (sn->gen != g->gen)
    return false;
  if (g->epoch && sn->checked == g->epoch)
    return true; // already looked at in this epoch
  if (!env_same(sn))
    return false;
  struct dir_memo dm;
  dm.n = 0;
  for (size_t i = 0; i < sn->nfiles; i++)
    if (!file_fresh(&sn->files[i], &dm))
      return false;
  sn->checked = g->epoch;
  return true;
}

// root's settings, loaded again when anything they come from changed.
static struct snapshot *snapshot_get(struct gate *g, const char *root) {
  size_t slot = 0;
  bool hit = false; // slot holds root's (else another root's, or none)
  bool ours = root == g->root; // root_of's string (g->root_slot)
  if (ours && g->root_slot) {
    slot = g->root_slot - 1;
    hit = true;
  }
  for (size_t i = 0; !hit && i < GATE_SNAPSHOTS; i++) {
    struct snapshot *sn = g->snaps[i];
    if (sn && strcmp(sn->root, root) == 0) {
      slot = i;
      hit = true;
      break;
    }
    // Otherwise the free slot, else the least recently used one.
    if (!sn || (g->snaps[slot] && sn->used < g->snaps[slot]->used))
      slot = i;
  }
  struct snapshot *sn = g->snaps[slot];
  if (sn && (!hit || !snapshot_fresh(g, sn))) {
    snapshot_free(sn);
    sn = NULL;
  }
  if (!sn)
    sn = g->snaps[slot] = snapshot_load(g, root);
  sn->used = ++g->clock;
  if (ours)
    g->root_slot = slot + 1;
  else if (g->root_slot == slot + 1)
    g->root_slot = 0; // the place of another root now
  return sn;
}

static struct policy *compile(const struct policy_input *in);

// The policy for the effective input (the runtime state changes its mode
// and yolo), compiled once per snapshot and state.
static struct policy *snapshot_policy(struct snapshot *sn,
                                      const struct policy_input *in) {
  if (!sn->policy || sn->policy_mode != in->mode ||
      sn->policy_yolo != in->yolo) {
    policy_free(sn->policy);
    sn->policy = compile(in);
    sn->policy_mode = in->mode;
    sn->policy_yolo = in->yolo;
  }
  return sn->policy;
}

// ---- effective settings: the files plus the runtime state ----

struct effective {
  struct snapshot *snap;
  const struct settings *s; // the snapshot's
  struct policy_input in;
  const char *yolo_source; // what turned yolo on, or NULL
};

// root's settings with the runtime state on top; borrowed from the cache,
// valid until the next call.
static void effective_load(struct gate *g, const char *root, const char *agent,
                           struct effective *e) {
  memset(e, 0, sizeof(*e));
  e->snap = snapshot_get(g, root);
  e->s = &e->snap->s;
  e->in = e->snap->in;
  struct project *pr = project(g, root);
  if (pr->mode >= 0)
    e->in.mode = (enum policy_mode)pr->mode;
  bool yolo = e->s->yolo || e->in.mode == POLICY_MODE_YOLO;
  e->yolo_source = e->s->yolo ? e->s->yolo_source : yolo ? "mode yolo" : NULL;
  if (agent_yolo(e->s, agent)) {
    yolo = true;
    e->yolo_source = "agent trusted (per-agent yolo)";
  }
  if (pr->yolo >= 0) {
    yolo = pr->yolo == 1;
    e->yolo_source = yolo ? ":AcpYolo on" : NULL;
  }
  // The veto wins over every way of turning yolo on; so does a settings
  // file that cannot be used (it might hold a veto), which also suspends
  // acceptEdits set with :AcpMode. Plan stays: it restricts.
  if (e->s->veto || e->s->nbroken) {
    yolo = false;
    e->yolo_source = NULL;
  }
  if (e->s->nbroken && e->in.mode == POLICY_MODE_ACCEPT_EDITS)
    e->in.mode = POLICY_MODE_DEFAULT;
  e->in.yolo = yolo;
  if (e->in.mode == POLICY_MODE_YOLO && !yolo)
    e->in.mode = POLICY_MODE_DEFAULT;
}

static struct policy *compile(const struct policy_input *in) {
  char **warnings = NULL;
  size_t n = 0;
  struct policy *p = policy_new(in, &warnings, &n);
  for (size_t i = 0; i < n; i++) {
    LOG_D("policy: %s", warnings[i]);
    free(warnings[i]);
  }
  free(warnings);
  return p;
}

static struct memory *memory_find(struct gate *g, const char *agent,
                                  const char *session, bool create) {
  for (struct memory *m = g->memory; m; m = m->next)
    if (strcmp(m->agent, agent) == 0 && strcmp(m->session, session) == 0)
      return m;
  if (!create)
    return NULL;
  struct memory *m = xcalloc(1, sizeof(*m));
  m->agent = xstrdup(agent);
  m->session = xstrdup(session);
  m->next = g->memory;
  g->memory = m;
  return m;
}

// Adds rules to a session's memory and recompiles it.
static int memory_add(struct gate *g, const char *agent, const char *session,
                      const char *root, const char *const *rules, size_t n,
                      char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++)
    if (policy_rule_check(rules[i], err, errlen) != 0)
      return -1;
  struct memory *m = memory_find(g, agent, session, true);
  if (m->nrules + n > GATE_MAX_MEMORY) {
    snprintf(err, errlen, "too many rules remembered for this session");
    return -1;
  }
  m->rules = xrealloc(m->rules, (m->nrules + n) * sizeof(char *));
  for (size_t i = 0; i < n; i++)
    m->rules[m->nrules++] = xstrdup(rules[i]);
  struct policy_rule_text *texts = xcalloc(m->nrules, sizeof(*texts));
  for (size_t i = 0; i < m->nrules; i++)
    texts[i] =
        (struct policy_rule_text){m->rules[i], POLICY_LIST_ALLOW, "session"};
  struct policy_input in = {.rules = texts,
                            .nrules = m->nrules,
                            .mode = POLICY_MODE_DEFAULT,
                            .root = root,
                            .home = home()};
  policy_free(m->compiled);
  m->compiled = compile(&in);
  free(texts);
  return 0;
}

void gate_forget(struct gate *g, const char *agent) {
  for (struct memory **pp = &g->memory; *pp;) {
    struct memory *m = *pp;
    if (strcmp(m->agent, agent) == 0) {
      *pp = m->next;
      memory_free(m);
    } else {
      pp = &m->next;
    }
  }
}

static const char *utf8_or_null(const char *s);
static const char *utf8_or_null_n(const char *s, size_t n);

// The rules of a prompt (borrowed) as a JSON array.
static json_t *rules_json(char *const *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string_nocheck(v[i]));
  return a;
}

static const char *by_name(const struct policy_result *res) {
  return policy_by_name(res->by);
}

// obj[key] = s, a string already known to be UTF-8 (utf8_or_null, or a
// static name), unless s is NULL.
static void set_valid(json_t *obj, const char *key, const char *s) {
  if (s)
    json_object_set_new_nocheck(obj, key, json_string_nocheck(s));
}

// obj[key] = v (a new reference), unless v is NULL.
static void set_json(json_t *obj, const char *key, json_t *v) {
  if (v)
    json_object_set_nocheck(obj, key, v);
}

// s when it is a string JSON can hold (UTF-8), else NULL: the verdict's
// fields are what its JSON would have held.
static const char *utf8_or_null(const char *s) {
  return s ? utf8_or_null_n(s, strlen(s)) : NULL;
}

// The same for s of n bytes.
static const char *utf8_or_null_n(const char *s, size_t n) {
  // Most are ASCII: sixteen bytes at a time, then eight, and the last
  // eight overlapping those already looked at (four and four for a short
  // one); utf8_valid only past ASCII.
  uint64_t high = 0;
  if (n >= 8) {
    uint64_t w, x;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      memcpy(&w, s + i, 8);
      memcpy(&x, s + i + 8, 8);
      high |= w | x;
    }
    if (i + 8 <= n) {
      memcpy(&w, s + i, 8);
      high |= w;
    }
    memcpy(&w, s + n - 8, 8);
    high = (high | w) & 0x8080808080808080ULL;
  } else if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, s, 4);
    memcpy(&b, s + n - 4, 4);
    high = (a | b) & 0x80808080U;
  } else {
    for (size_t i = 0; i < n; i++)
      high |= (unsigned char)s[i] & 0x80;
  }
  return !high || utf8_valid(s, n) ? s : NULL;
}

// cwd's project root (settings_find_root), looked for once per epoch, as
// $HOME is (g->home, what home() says then): borrowed, valid until the
// next call.
static const char *root_of(struct gate *g, const char *cwd) {
  if (!g->epoch || g->root_epoch != g->epoch || g->root_gen != g->gen ||
      strcmp(g->root_cwd, cwd) != 0) {
    free(g->root_cwd);
    free(g->root);
    free(g->home);
    g->root_cwd = xstrdup(cwd);
    g->root = settings_find_root(cwd);
    g->root_slot = g->root_proj = 0;
    g->root_utf8 = utf8_or_null(g->root);
    g->home = xstrdup(home());
    g->root_epoch = g->epoch;
    g->root_gen = g->gen;
  }
  return g->root;
}

// s (a text of the verdict's result, n bytes), ended within them, when
// it is UTF-8, else NULL. (The result was decided in the verdict: copying
// its texts there cost ~40 instructions a decision.)
static const char *text_utf8(char *s, size_t n) {
  s[n - 1] = '\0';
  return utf8_or_null_n(s, strlen(s));
}

static const char *pick(const json_t *options, const struct gate_options *ov,
                        enum policy_decision *decision) {
  return ov ? policy_pick_option_of(ov->ids, ov->kinds, ov->n, decision)
            : policy_pick_option(options, decision);
}

static void decide(struct gate *g, const char *agent, const char *session,
                   const char *cwd, json_t *tc, const json_t *options,
                   const struct gate_options *ov, struct gate_verdict *v);

// Up to this many members, params' toolCall and options are found in one
// walk of them (two lookups by hash cost ~320 instructions for the three
// members an agent sends); a larger object is looked up.
#define PARAMS_WALK 8

void gate_decide(struct gate *g, const char *agent, const char *session,
                 const char *cwd, json_t *params, struct gate_verdict *v) {
  json_t *tc = NULL, *options = NULL;
  if (json_object_size(params) > PARAMS_WALK) {
    tc = json_object_get(params, "toolCall");
    options = json_object_get(params, "options");
  } else {
    // Keys compared with their lengths, as json_object_get compares them.
    for (void *it = json_object_iter(params); it;
         it = json_object_iter_next(params, it)) {
      const char *k = json_object_iter_key(it);
      size_t kn = json_object_iter_key_len(it);
      if (kn == 8 && memcmp(k, "toolCall", 8) == 0)
        tc = json_object_iter_value(it);
      else if (kn == 7 && memcmp(k, "options", 7) == 0)
        options = json_object_iter_value(it);
    }
  }
  decide(g, agent, session, cwd, tc, options, NULL, v);
}

void gate_decide_tc(struct gate *g, const char *agent, const char *session,
                    const char *cwd, json_t *tc,
                    const struct gate_options *options,
                    struct gate_verdict *v) {
  decide(g, agent, session, cwd, tc, NULL, options, v);
}

static void decide(struct gate *g, const char *agent, const char *session,
                   const char *cwd, json_t *tc, const json_t *options,
                   const struct gate_options *ov, struct gate_verdict *v) {
  const char *root = root_of(g, cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  struct policy *p = snapshot_policy(e.snap, &e.in);
  struct policy_request *r = policy_request_new_tc(tc, cwd, g->home);
  struct memory *m = memory_find(g, agent, session, false);
  // Decided in the verdict (after its head, which is cleared below).
  struct policy_result *res = &v->res;
  policy_decide(p, m ? m->compiled : NULL, r, res);
  settings_fail_closed(e.s, res); // what nothing denies is asked
  enum policy_decision d = res->decision;
  const char *option_id = NULL;
  if (d != POLICY_ASK)
    option_id = pick(options, ov, &d);
  if (d == POLICY_ASK && res->decision == POLICY_ALLOW)
    snprintf(res->reason, sizeof(res->reason),
             "allowed, but the agent offered no allow-once option");
  // A C struct: most requests are decided without asking, and a prompt
  // is packed from it too (broker/prompt.h); only the unasked watch and
  // the fs/terminal services ask for the verdict as JSON.
  memset(v, 0, offsetof(struct gate_verdict, res));
  v->decision = d;
  v->option_id = option_id;
  v->req = r;
  v->policy = p;
  // tc's toolCallId, kind and title, as the request's one walk of tc's
  // members found them (a second walk here cost ~150 instructions).
  policy_request_tc_strings(r, &v->tool_call_id, &v->kind, &v->title);
  v->tc = tc;
  v->root = g->root_utf8;
  v->agent = utf8_or_null(agent);
  v->session = utf8_or_null(session);
  v->command = utf8_or_null(policy_request_command(r));
  v->decision_name = policy_decision_name(d);
  v->by = d == POLICY_ASK ? "person" : by_name(res);
  v->reason = text_utf8(res->reason, sizeof(res->reason));
  v->rule = text_utf8(res->rule, sizeof(res->rule));
  v->source = text_utf8(res->source, sizeof(res->source));
  size_t n;
  v->paths = policy_request_path_list_in(
      r, v->path_buf, sizeof(v->path_buf) / sizeof(*v->path_buf), &n);
  for (size_t i = 0; i < n; i++)
    if (utf8_or_null(v->paths[i]))
      v->paths[v->npaths++] = v->paths[i];
  if (d != POLICY_ASK)
    return;
  // Only a prompt offers to remember the request (its narrow rules, and a
  // broader alternative); working them out for every decision would cost
  // more than deciding.
  // Both sets anchored on the project root and home as they are written
  // to its settings (broad: the broader alternative).
  // A request of the same atoms as one the policy keeps a result for
  // gets the sets kept with it (policy_request_suggestions_kept).
  struct policy_sets *sets =
      policy_request_suggestions_kept(p, r, root, g->home);
  if (sets) {
    v->sets = sets;
    v->narrow = sets->narrow;
    v->nnarrow = sets->nnarrow;
    v->broad = sets->broad;
    v->nbroad = sets->nbroad;
  }
  // The options :AcpAllow, :AcpDeny and the prompt's allow/reject keys
  // answer with: the policy's own choice (policy_pick_option).
  // Both in one walk of the tree's options (policy_pick_options).
  const char *allow, *reject;
  if (ov) {
    enum policy_decision want = POLICY_ALLOW;
    allow = pick(options, ov, &want);
    want = POLICY_DENY;
    reject = pick(options, ov, &want);
  } else {
    policy_pick_options(options, &allow, &reject);
  }
  v->allow_option = utf8_or_null(allow);
  v->reject_option = utf8_or_null(reject);
}

json_t *gate_verdict_info(struct gate_verdict *v) {
  if (v->info || !v->req)
    return v->info;
  json_t *tc = v->tc;
  json_t *kind = json_object_get(tc, "kind");
  json_t *title = json_object_get(tc, "title");
  // Built key by key (json_pack would parse its format on every request);
  // a value that is absent or not UTF-8 is left out, as json_pack's "s?"
  // would have left it (and "s" failed the whole object).
  json_t *info = v->info = json_object();
  // Every string of the verdict went through utf8_or_null.
  set_valid(info, "root", v->root);
  set_valid(info, "agent", v->agent);
  set_valid(info, "session", v->session);
  set_json(info, "toolCallId", json_object_get(tc, "toolCallId"));
  set_json(info, "kind", json_is_string(kind) ? kind : NULL);
  set_json(info, "title", json_is_string(title) ? title : NULL);
  set_valid(info, "command", v->command);
  json_object_set_new_nocheck(info, "atoms",
                              policy_request_atoms(v->policy, v->req));
  json_t *paths = json_array();
  for (size_t i = 0; i < v->npaths; i++)
    json_array_append_new(paths, json_string_nocheck(v->paths[i]));
  json_object_set_new_nocheck(info, "paths", paths);
  set_valid(info, "decision", v->decision_name);
  set_valid(info, "by", v->by);
  set_valid(info, "reason", v->reason);
  set_valid(info, "rule", v->rule);
  set_valid(info, "source", v->source);
  if (v->decision == POLICY_ASK) {
    json_object_set_new_nocheck(info, "narrow",
                                rules_json(v->narrow, v->nnarrow));
    json_object_set_new_nocheck(info, "broad", rules_json(v->broad, v->nbroad));
    set_valid(info, "allowOption", v->allow_option);
    set_valid(info, "rejectOption", v->reject_option);
  }
  return info;
}

size_t gate_verdict_natoms(const struct gate_verdict *v) {
  return v->req ? policy_request_natoms(v->req) : 0;
}

void gate_verdict_atom(const struct gate_verdict *v, size_t i,
                       struct policy_atom_view *out) {
  policy_request_atom(v->policy, v->req, i, out);
}

void gate_verdict_clear(struct gate_verdict *v) {
  policy_request_free(v->req);
  if (v->paths != v->path_buf)
    free(v->paths);
  free(v->sets);
  json_decref(v->info);
  memset(v, 0, offsetof(struct gate_verdict, res));
}

void gate_verdict_to_info(struct gate_verdict *v) {
  gate_verdict_info(v);
  json_t *info = v->info;
  enum policy_decision d = v->decision;
  const char *option_id = v->option_id;
  v->info = NULL;
  gate_verdict_clear(v);
  v->decision = d;
  v->option_id = option_id;
  v->info = info;
}

int gate_remember(struct gate *g, const char *scope, bool broad,
                  const char *agent, const char *session, const char *cwd,
                  const char *const *rules, size_t n, char *err,
                  size_t errlen) {
  g->gen++; // whatever is written below changes settings
  if (strcmp(scope, "agent") == 0)
    return settings_set_agent_yolo(agent, true, err, errlen);
  if (n == 0) {
    snprintf(err, errlen,
             broad ? "this request has no broader rule"
                   : "this request cannot be remembered as rules");
    return -1;
  }
  char *root = settings_find_root(cwd);
  int r = -1;
  if (strcmp(scope, "session") == 0) {
    r = memory_add(g, agent, session, root, rules, n, err, errlen);
  } else if (strcmp(scope, "project") == 0) {
    r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
      r = settings_add_rule(root, true, POLICY_LIST_ALLOW, rules[i], err,
                            errlen);
  } else {
    snprintf(err, errlen, "unknown scope '%s'", scope);
  }
  free(root);
  return r;
}

static int parse_list(const char *list, enum policy_list *out) {
  static const char *const names[] = {"allow", "ask", "deny"};
  for (int i = 0; i < 3; i++)
    if (strcmp(list, names[i]) == 0) {
      *out = (enum policy_list)i;
      return 0;
    }
  return -1;
}

int gate_add_rule(struct gate *g, const char *scope, const char *list,
                  const char *rule, const char *agent, const char *session,
                  const char *cwd, char *file, size_t filelen, char *err,
                  size_t errlen) {
  enum policy_list l;
  if (parse_list(list, &l) != 0) {
    snprintf(err, errlen, "unknown list '%s'", list);
    return -1;
  }
  if (policy_rule_check(rule, err, errlen) != 0)
    return -1;
  g->gen++; // a project or user file may be written below
  char *root = settings_find_root(cwd);
  int r = -1;
  if (strcmp(scope, "session") == 0) {
    if (l != POLICY_LIST_ALLOW)
      snprintf(err, errlen,
               "only allow rules can be kept for a session; "
               "use the project or user scope");
    else if (!session || !agent)
      snprintf(err, errlen, "no session: start an agent first");
    else
      r = memory_add(g, agent, session, root, &rule, 1, err, errlen);
    snprintf(file, filelen, "session");
  } else if (strcmp(scope, "project") == 0 || strcmp(scope, "user") == 0) {
    bool proj = strcmp(scope, "project") == 0;
    r = settings_add_rule(root, proj, l, rule, err, errlen);
    char *path = settings_rule_file(root, proj);
    snprintf(file, filelen, "%s", path ? path : "");
    free(path);
  } else {
    snprintf(err, errlen, "unknown scope '%s' (session, project or user)",
             scope);
  }
  free(root);
  return r;
}

int gate_yolo(struct gate *g, const char *cwd, const char *action,
              const char *agent, char *err, size_t errlen) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  struct project *pr = project(g, root);
  bool on = e.in.yolo;
  int r = 0;
  if (strcmp(action, "toggle") == 0)
    action = on ? "off" : "on";
  if (strcmp(action, "on") == 0) {
    if (settings_refuse(e.s, "yolo", err, errlen)) {
      r = -1;
    } else if (e.s->veto) {
      snprintf(err, errlen,
               "yolo is vetoed by security.disableYoloMode: true in %s",
               e.s->veto_source ? e.s->veto_source : "a Gemini settings file");
      r = -1;
    } else {
      pr->yolo = 1;
    }
  } else if (strcmp(action, "off") == 0) {
    pr->yolo = 0;
    if (agent && agent_yolo(e.s, agent)) {
      r = settings_set_agent_yolo(agent, false, err, errlen);
      g->gen++;
    }
  } else if (strcmp(action, "status") != 0) {
    snprintf(err, errlen, "unknown action '%s' (on, off or toggle)", action);
    r = -1;
  }
  free(root);
  return r;
}

int gate_mode(struct gate *g, const char *cwd, const char *mode, char *err,
              size_t errlen) {
  if (!mode)
    return 0;
  enum policy_mode m;
  if (policy_mode_parse(mode, &m) != 0) {
    snprintf(err, errlen,
             "unknown mode '%s' (default, acceptEdits, plan or yolo)", mode);
    return -1;
  }
  char *root = settings_find_root(cwd);
  int r = 0;
  if ((m == POLICY_MODE_ACCEPT_EDITS || m == POLICY_MODE_YOLO) &&
      settings_refuse(&snapshot_get(g, root)->s, policy_mode_name(m), err,
                      errlen))
    r = -1;
  else
    project(g, root)->mode = (int)m;
  free(root);
  return r;
}

int gate_trust(struct gate *g, const char *cwd, json_t **enabled, char *err,
               size_t errlen) {
  g->gen++; // trust.json is written below
  char *root = settings_find_root(cwd);
  struct settings s;
  settings_load(root, NULL, &s);
  *enabled = s.permissive ? json_incref(s.permissive) : json_object();
  settings_free(&s);
  int r = settings_trust(root, err, errlen);
  free(root);
  if (r != 0) {
    json_decref(*enabled);
    *enabled = NULL;
  }
  return r;
}

static json_t *strings(char **v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

json_t *gate_settings(struct gate *g, const char *cwd, const char *agent) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  json_t *d =
      json_pack("{s:s,s:s,s:b,s:s?,s:b,s:s?,s:b,s:b,s:O?,s:o,s:o,s:o}", "root",
                root, "mode", policy_mode_name(e.in.mode), "yolo", e.in.yolo,
                "yoloSource", e.yolo_source, "veto", e.s->veto, "vetoSource",
                e.s->veto_source, "trusted", e.s->trusted, "hasPermissive",
                e.s->has_permissive, "permissive", e.s->permissive, "errors",
                strings(e.s->errors, e.s->nerrors), "warnings",
                strings(e.s->warnings, e.s->nwarnings), "failClosed",
                settings_closed_json(e.s));
  free(root);
  return d;
}

json_t *gate_rules(struct gate *g, const char *cwd, const char *agent) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  json_t *d = settings_to_json(e.s);
  json_object_set_new(d, "mode", json_string(policy_mode_name(e.in.mode)));
  json_object_set_new(d, "yolo", json_boolean(e.in.yolo));
  json_object_set_new(d, "yoloSource",
                      e.yolo_source ? json_string(e.yolo_source) : json_null());
  json_t *mem = json_array();
  for (struct memory *m = g->memory; m; m = m->next)
    for (size_t i = 0; i < m->nrules; i++)
      json_array_append_new(mem, json_pack("{s:s,s:s,s:s}", "agent", m->agent,
                                           "session", m->session, "rule",
                                           m->rules[i]));
  json_object_set_new(d, "memory", mem);
  free(root);
  return d;
}
