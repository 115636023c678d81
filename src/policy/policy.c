#include "policy.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"
#include "base/utf8.h"
#include "path.h"
#include "policy/shell/shell.h"
#include "policy/shell/shell_match.h"
#include "policy_ref.h"
#include "request.h"
#include "ruleidx.h"
#include "rules.h"
#include "shcache.h"

#define POLICY_RULES_MAX 16384 // rules past this are ignored with a warning
#define NARROW_MAX 32          // more narrow rules: none (too wide a request)
// bash_cannot_match leaves longer patterns x texts to the matcher: far
// below the work past which it answers "maybe" (shell_match.c, 1 << 24).
#define PREFILTER_WORK_MAX (1 << 16)

struct prule {
  struct rules_rule r;
  enum policy_list list;
  char *text;
  char *source;
  char *suffix; // " (" source as shown by owner (shown()) ")": a reason's end
  size_t ntext, nsource, nsuffix; // their lengths
  const struct policy *owner;
  char *pat; // READ, EDIT with a specifier: the absolute pattern
  // BASH: the pattern's literal start (before its first `*`, a trailing
  // `:*` read as ` *`) and the pattern's length, for bash_cannot_match.
  char *lit;
  size_t nlit, npat;
  char *mpat; // BASH: the pattern ("*" without one), a trailing `:*` as ` *`
  // BASH: mpat has no `*` but (maybe) its last byte: the matcher compares
  // its bytes to the text's first ones (shell_match.c, literal_run), which
  // is what bash_cannot_match would do first.
  bool lrun;
};

struct protect {
  char *pat;
  int tier; // 1: always ask; 2: ask unless yolo
  // The `<root>/**/<name>/**` (dir) and `<root>/**/<name>` patterns, when
  // neither root nor name holds a glob character: name (borrowed from the
  // tables), matched segment by segment (tier_of_pattern), else NULL.
  const char *name;
  bool dir;
  // Any other pattern with no glob character but a final `/**` (a file or
  // a directory in home, the broker's own files): the length of its
  // literal part, matched segment by segment (tier_of_pattern), else 0.
  size_t nlit;
  bool tree;  // the literal part is followed by `/**`
  bool plain; // nlit, and the literal part has single slashes, none last
  // plain, and the literal part starts with home and a `/`: a path that
  // does not (case folded) cannot match it
  bool in_home;
  size_t nname; // strlen(name)
};

#define INDEX_CLASSES 5   // REQUEST_BASH .. REQUEST_SEARCH: tool-name globs
#define BASH_KEY_MAX 4096 // longer literal starts: always a candidate

struct first_word {
  char *w; // folded
  size_t n;
  uint32_t rule;
};

// The rules of one list by what an atom must show for them to match (keys
// in one table, by tag: 'b' the command name, 'r' and 'e' a Read or Edit
// path prefix, 'h' a host, 't' a tool name, 'k' an ACP kind), and those
// that any atom of a class may meet. A superset of the rules that can
// match an atom: they are still matched one by one, in their order.
struct lindex {
  struct ruleidx *keys;        // the policy's table (shared by the three lists)
  int list;                    // this list's lists in it
  struct ruleidx_vec bash_all; // every Bash rule
  struct ruleidx_vec bash_rest; // Bash rules without a literal first word
  // Bash rules whose literal start holds a space: by their first word
  // ('f'), by their complete words ('b', "git push"), and by first word in
  // byte order (for a command whose second word is dynamic).
  struct first_word *first;
  size_t nfirst;
  size_t bash_key_max;                            // the longest 'b' key
  size_t path_key_max[2];                         // the longest 'r' and 'e' key
  struct ruleidx_vec path_all[2], path_nospec[2]; // Read, Edit
  struct ruleidx_vec host_rest; // WebFetch rules without an exact host
  struct ruleidx_vec search;    // WebSearch
  struct ruleidx_vec tool_cls[INDEX_CLASSES]; // tool globs a class may meet
  struct ruleidx_vec tool_glob;               // tool-name globs with a `*`
  struct ruleidx_vec tool_all;                // every tool-name rule
  size_t nkind;                               // Kind rules ('k' keys)
};

struct keep;

struct policy {
  struct prule *rules;
  size_t nrules;
  // The rules of each list (indices into rules, in order): a decision
  // looks at one list at a time.
  size_t *of_list[3];
  size_t nof_list[3];
  enum policy_mode mode;
  bool yolo;
  char *root, *home;
  struct protect *prot;
  size_t nprot;
  // Protected places by their exact path (the pattern-free ones): an edit
  // of a directory that CONTAINS one of them (rm -rf ~/.config, mv .acp x,
  // cp -r evil/.acp .) could replace it, so it is protected too.
  struct protect *locs;
  size_t nlocs;
  // The index of the rules (ruleidx.h), per list; their keys in one table.
  struct lindex idx[3];
  struct ruleidx *keys;
  size_t bash_npat_max;   // the longest Bash pattern (bash_cannot_match)
  size_t bash_key_all;    // the longest 'b' key of the three lists
  size_t path_key_all[2]; // the longest 'r' and 'e' key of the three lists
  int root_segs;          // the root's segments; -1: a glob character in it
  bool allow_switch_mode; // an allow rule Kind(switch_mode)
  // The keys each Bash atom of a cached shell analysis met (memo_keys),
  // kept across decisions (NULL: no index). *keep is allocated by the
  // first decision that keeps one (a session's memory never does) and
  // written by policy_decide.
  struct keep **keep;
  struct results *res; // the results kept (decide)
  // The 'r' and 'e' keys of the project root's own segments (memo_path):
  // a path inside the root starts from them.
  struct root_keys {
    bool set;     // worked out (an index, a root, few enough keys)
    bool stopped; // the walk stopped inside the root (a longer segment)
    char *text;   // the root's segments, case folded: "/a/b"
    size_t n;     // strlen(text)
    uint64_t h;   // the hash of (tag, text)
    uint32_t nslot;
    const struct ruleidx_slot *slot[16];
  } root_keys[2];
  size_t root_len; // strlen(root)
  // The shown text of Bash atoms (policy_request_atom), kept by their
  // analysis's serial and place in it; *described is allocated by the
  // first one kept.
  struct described **described;
};

// A Bash atom's text as policy_request_atom shows it (describe, cut to
// valid UTF-8), which depends on the atom and the policy's home alone:
// agents repeat commands, and the `decided` event shows every atom of a
// command with more than one. Direct-mapped; a longer text is not kept.
#define DESCRIBED_SLOTS 64
#define DESCRIBED_TEXT 120
struct described {
  struct described_slot {
    unsigned long long serial; // shcache_serial (0: empty)
    uint32_t atom;             // its index in the analysis
    bool ok;                   // valid UTF-8 (else "(not UTF-8)" is shown)
    char text[DESCRIBED_TEXT]; // NUL-terminated
  } slot[DESCRIBED_SLOTS];
};

struct policy_request {
  struct request r;
  // Unique for the process (a block reused gets a new one, never 0): what
  // a policy's results remember of the last request decided
  // (results.last).
  unsigned long long serial;
};

// The keys of the rules' index that an atom meets, looked up once per
// decision for the three lists (the table is shared): the slots found,
// memo.slot[b .. b + n). A Bash atom's keys are its text as bash_text looks
// it up (its name or the name's basename, then the other words, case
// folded) up to each space; a path's are its leading segments, as
// path_cands looks them up.
struct memo_keys {
  uint32_t b, n;
};

// What one decision learnt about one atom, so that no step asks twice
// (policy_decide only; the reference asks every time).
struct memo_atom {
  uint8_t done; // MEMO_COV, MEMO_TIER, MEMO_KEYS
  bool cov_mem; // covered()
  bool keys;    // k looked up (else gather looks up as before)
  bool base;    // a Bash name with a basename: k[1] is the basename's
  int tier;     // tier_of()
  const struct prule *cov;
  size_t tn;             // Bash: the length of the whole text (prefilter)
  struct memo_keys k[2]; // Bash: the name's, the basename's; a path: k[0]
  // Bash, keys: per list (deny, ask: for_allow false; allow: true),
  // bash_one_list's answer (one_ok bit 1 << list) and its list.
  uint8_t one_ok;
  struct ruleidx_list one[3];
  uint32_t boff; // Bash, base: where the name's basename starts in it
  // Bash: its place in the policy's keep (kept_mine), or NULL.
  struct kept *kp;
  unsigned long long serial;
  uint32_t atom;
  // fold_kept: the atom's place in the keep when it was the atom's (kq_of
  // checks it still is), or NULL.
  const struct kept *kq;
  unsigned long long kq_serial;
  uint32_t kq_atom;
};

enum {
  MEMO_COV = 1,
  MEMO_TIER = 2,
  MEMO_KEYS = 4,
};

#define MEMO_ATOMS 64  // atoms past this are looked up again at each step
#define MEMO_SLOTS 256 // keys found, then gather looks up as before

// What memo_keys_build found for one Bash atom of a shell analysis (the
// atom's words and the policy's table are all it depends on), kept by the
// policy across decisions: agents send the same commands again, and the
// shell cache hands out the same analysis for them. An entry is the
// analysis's serial (shcache_serial: never reused, unlike its address) and
// the atom's index in it; direct-mapped, a newer atom takes the place.
#define KEEP_ENTRIES 512 // a power of two
#define KEEP_SLOTS 6     // atoms that met more keys are not kept

struct kept {
  unsigned long long serial; // 0: empty
  uint32_t atom;
  bool ok;        // memo_keys_build's answer
  bool base;      // memo_atom.base
  uint8_t n[2];   // slots of k[0], k[1]
  uint8_t one_ok; // memo_atom.one_ok
  bool kind;      // the atom had an ACP kind (bash_one_list)
  uint32_t boff;  // memo_atom.boff
  size_t tn;      // memo_atom.tn
  const struct ruleidx_slot *slot[KEEP_SLOTS];
  struct ruleidx_list one[3]; // memo_atom.one
  // What the walk of one[list] answered (answered bit 1 << list): for deny
  // and ask the first candidate giving SHELL_YES and the first giving
  // SHELL_MAYBE before it; for allow the first that allows the atom
  // (yes). UINT32_MAX: none. The atom, its one list and the rules are
  // all they depend on.
  uint8_t answered;
  uint32_t yes[3], maybe[3];
};

// The result of a request of Bash atoms of one analysis and of Read and
// Edit atoms (decide): with no breaker target among them, not opaque, not
// in plan mode and no session memory with rules, the steps read only the
// policy, the Bash atoms' analysis (the shell atom, deny_only) and the
// path atoms' class, kind, place, paths and deny_only, so the same atoms
// get the same result. The path atoms are kept as those fields, in key
// (compared byte for byte). Direct-mapped by the analysis's serial
// (struct results).
#define KEEP_RESULTS 32 // a power of two
#define RESULT_ATOMS 8  // requests of more atoms are decided each time
#define RESULT_KEY 384  // path atoms' fields past this: decided each time

struct kept_result {
  unsigned long long serial; // 0: empty
  unsigned long long seen;   // the last analysis not found here
  uint8_t natoms;
  uint8_t atom[RESULT_ATOMS]; // the atoms' indices in the analysis
  uint8_t deny_only;          // bit j: atom j is deny_only
  uint16_t nkey;
  char key[RESULT_KEY]; // the path atoms' fields (path_key)
  enum policy_decision decision;
  enum policy_by by;
  uint16_t n[3]; // strlen of reason, rule, source
  char reason[sizeof(((struct policy_result *)0)->reason)];
  char rule[sizeof(((struct policy_result *)0)->rule)];
  char source[sizeof(((struct policy_result *)0)->source)];
  // The sets a prompt suggests for these atoms (struct sg_kept), or NULL:
  // kept by policy_request_suggestions_kept while the result is.
  void *sg;
  // New (results.stamps) each time the key above is written.
  unsigned long long stamp;
};

struct keep {
  struct kept e[KEEP_ENTRIES];
};

// The results kept by a policy (every policy has one; the table is
// allocated by its second request that could keep one).
struct results {
  unsigned asked;
  struct kept_result *v; // KEEP_RESULTS, or NULL
  unsigned long long stamps;
  // The last request (policy_request.serial, 0: none) whose decision found
  // its key in v[slot] or wrote it there, and that place's stamp then:
  // while the stamp is the same, the place still holds the request's key
  // (its sets are found without building the key again).
  struct {
    unsigned long long req, stamp;
    size_t slot;
  } last;
};

struct memo {
  // first_hit per policy (0: the rules, 1: the session's memory) and list
  // (0: deny, 1: ask): the lowest rule over the atoms giving SHELL_YES and
  // SHELL_MAYBE (UINT32_MAX: none), and the first atom giving it; both
  // found in one walk of each atom's candidates (atom_hits).
  bool hits_done[2][2];
  uint32_t best[2][2][2]; // [policy][list][0: yes, 1: maybe]
  size_t best_atom[2][2][2];
  struct memo_atom a[MEMO_ATOMS];
  const struct ruleidx_slot *slot[MEMO_SLOTS];
  uint32_t nslot;
  unsigned long long serial; // kept_of's answer: the atom's analysis
  uint32_t atom;             // and its index there
  bool kq;                   // fold_kept set a[j].kq for every atom
};

// One decision in progress.
struct eval {
  const struct policy *p, *mem;
  const struct request *r;
  struct policy_result *out;
  bool naive;        // every rule looked at (policy_decide_reference)
  struct memo *memo; // NULL: nothing kept (the reference, narrow_covers)
  // With a memo: the classes of the request's atoms (1 << cls), and
  // whether one has a target of the circuit breaker: the steps about
  // edits, kinds and targets skip requests without them.
  unsigned classes;
  bool targets;
  unsigned long long rserial; // policy_request.serial (0: none)
};

struct warnings {
  char **v;
  size_t n;
};

// Tier 1: files that govern permissions (an agent writing them could
// loosen its own rules). Under the project root at any depth, and in home.
static const char *const tier1_dirs[] = {".gemini", ".claude", ".codex",
                                         ".acp"};
static const char *const tier1_home[] = {".gemini/**", ".claude/**",
                                         ".codex/**"};
// Tier 2: files that run code or hold secrets (Claude Code's protected
// directories, shell start-up files, ssh).
static const char *const tier2_dirs[] = {".git",   ".vscode", ".idea",
                                         ".husky", ".cargo",  ".devcontainer",
                                         ".yarn",  ".mvn"};
static const char *const tier2_home[] = {
    ".bashrc", ".bash_profile", ".bash_login",    ".bash_logout",   ".profile",
    ".zshrc",  ".zshenv",       ".zprofile",      ".zlogin",        ".zlogout",
    ".ssh/**", ".gitconfig",    ".config/git/**", ".config/fish/**"};

static void compile_rule(struct policy *p, const struct policy_rule_text *t,
                         struct warnings *w);
static void root_keys_build(struct policy *p, int c);
static void compile_protect(struct policy *p, const struct policy_input *in);
static void add_protect(struct policy *p, const char *a, const char *b,
                        const char *c, const char *d, int tier);
static void warn(struct warnings *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool step_deny(struct eval *e);
static bool step_ask(struct eval *e);
static bool step_opaque(struct eval *e);
static bool step_protected(struct eval *e);
static bool step_switch_mode(struct eval *e);
static bool step_plan(struct eval *e);
static bool step_breaker(struct eval *e);
static bool step_allow(struct eval *e);
struct tally;
static void count(const struct eval *e, struct tally *t);
static void step_default(struct eval *e);
static void index_rule(struct policy *p, uint32_t i);
static void index_done(struct lindex *x);
static void index_free(struct lindex *x);
static inline const struct prule *
first_hit(const struct eval *e, const struct policy *p, enum policy_list list,
          const struct request *r, enum shell_match want,
          const struct request_atom **atom);
// How a candidate rule is matched (hit, allows): as the reference does
// (the prefilter, then the matcher), as one of a list scanned (the
// prefilter rejects most), or as one the index found by its literal start
// (the prefilter would only repeat the matcher's compares).
enum how { HOW_REF, HOW_SCAN, HOW_KEYED };
static enum shell_match hit(const struct prule *pr,
                            const struct request_atom *a, size_t tn,
                            enum how how);
static bool bash_cannot_match(const struct prule *pr,
                              const struct shell_atom *cmd, bool for_allow,
                              size_t tn);
static bool allows(const struct prule *pr, const struct request_atom *a,
                   const char *path, size_t tn, enum how how);
static const struct prule *find_allow(const struct eval *e,
                                      const struct request_atom *a,
                                      const char *const *paths, size_t np,
                                      bool *memory);
static const struct prule *covered(const struct eval *e,
                                   const struct request_atom *a, bool *memory);
static const struct prule *cover(const struct eval *e,
                                 const struct request_atom *a, bool *memory);
static bool mode_covers(const struct eval *e, const struct request_atom *a);
static bool needs_cover(const struct request_atom *a);
static bool names_match(const char *glob, const struct request_atom *a,
                        bool for_allow);
static int tier_of(const struct policy *p, const struct request_atom *a,
                   bool naive);
static int tier_of_path(const struct policy *p, const char *path, bool naive);
static int tier_of_pattern(const struct policy *p, const char *path,
                           bool naive);
static const char *critical(const struct policy *p, const char *path);
static const char *glob_critical(const struct policy *p, const char *glob,
                                 char *buf, size_t n);
static size_t cat(char *buf, size_t n, size_t at, const char *str);
static void result(struct eval *e, enum policy_decision d, enum policy_by by,
                   const struct prule *pr, const char *source, const char *fmt,
                   ...) __attribute__((format(printf, 6, 7)));
static size_t describe(const struct eval *e, const struct request_atom *a,
                       char *buf, size_t n);
// A piece of a reason, and the result from pieces (result's way for the
// reasons of rules, without a format: the lengths are known).
struct piece {
  const char *s;
  size_t n;
};
static void result_n(struct eval *e, enum policy_decision d, enum policy_by by,
                     const struct prule *pr, const struct piece *pc, size_t k);
static const char *shown(const struct policy *p, const char *path, char *buf,
                         size_t n);
static void command_text(const struct shell_atom *a, char *buf, size_t n);
static size_t quoted_command(const struct shell_atom *a, const char *home,
                             char *buf, size_t n);
struct anchors;
static char *narrow_rule(const struct request_atom *a, const char *path,
                         const struct anchors *an, bool broad);
static bool narrow_covers(char **rules, size_t n, const struct request *r,
                          const struct anchors *an);
static bool quick_covers(char **rules, size_t n, const struct request *r,
                         const struct anchors *an);

struct policy *policy_new(const struct policy_input *in, char ***warnings,
                          size_t *nwarnings) {
  struct policy *p = xcalloc(1, sizeof(*p));
  struct warnings w = {0};
  p->mode = in->mode;
  p->yolo = in->yolo || in->mode == POLICY_MODE_YOLO;
  p->root = in->root ? path_normalize(NULL, in->root, NULL) : NULL;
  p->home = in->home ? path_normalize(NULL, in->home, NULL) : NULL;
  size_t n = in->nrules;
  if (n > POLICY_RULES_MAX) {
    warn(&w, "%zu rules: only the first %d are used", n, POLICY_RULES_MAX);
    n = POLICY_RULES_MAX;
  }
  p->rules = xcalloc(n, sizeof(*p->rules));
  for (size_t i = 0; i < n; i++)
    compile_rule(p, &in->rules[i], &w);
  for (int l = 0; l < 3; l++)
    p->of_list[l] = xcalloc(p->nrules + 1, sizeof(size_t));
  for (size_t i = 0; i < p->nrules; i++) {
    enum policy_list l = p->rules[i].list;
    p->of_list[l][p->nof_list[l]++] = i;
  }
  for (size_t i = 0; i < p->nrules; i++)
    index_rule(p, (uint32_t)i);
  for (int l = 0; l < 3; l++) {
    index_done(&p->idx[l]);
    if (p->idx[l].bash_key_max > p->bash_key_all)
      p->bash_key_all = p->idx[l].bash_key_max;
    for (int c = 0; c < 2; c++)
      if (p->idx[l].path_key_max[c] > p->path_key_all[c])
        p->path_key_all[c] = p->idx[l].path_key_max[c];
  }
  compile_protect(p, in);
  if (p->keys)
    p->keep = xcalloc(1, sizeof(*p->keep)); // the place of the pointer
  p->described = xcalloc(1, sizeof(*p->described));
  p->res = xcalloc(1, sizeof(*p->res));
  for (int c = 0; c < 2; c++)
    root_keys_build(p, c);
  if (warnings)
    *warnings = w.v;
  else {
    for (size_t i = 0; i < w.n; i++)
      free(w.v[i]);
    free(w.v);
  }
  if (nwarnings)
    *nwarnings = w.n;
  return p;
}

void policy_free(struct policy *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->nrules; i++) {
    rules_rule_free(&p->rules[i].r);
    free(p->rules[i].text);
    free(p->rules[i].source);
    free(p->rules[i].suffix);
    free(p->rules[i].pat);
    free(p->rules[i].lit);
    free(p->rules[i].mpat);
  }
  for (size_t i = 0; i < p->nprot; i++)
    free(p->prot[i].pat);
  for (size_t i = 0; i < p->nlocs; i++)
    free(p->locs[i].pat);
  free(p->rules);
  for (int l = 0; l < 3; l++) {
    free(p->of_list[l]);
    index_free(&p->idx[l]);
  }
  ruleidx_free(p->keys);
  for (size_t i = 0; p->res->v && i < KEEP_RESULTS; i++)
    free(p->res->v[i].sg);
  free(p->res->v);
  free(p->res);
  if (p->keep)
    free(*p->keep);
  free(p->keep);
  if (p->described)
    free(*p->described);
  free(p->described);
  free(p->root_keys[0].text);
  free(p->root_keys[1].text);
  free(p->prot);
  free(p->locs);
  free(p->root);
  free(p->home);
  free(p);
}

int policy_rule_check(const char *text, char *err, size_t errlen) {
  struct rules_rule r;
  if (rules_parse(text, &r, err, errlen) != 0)
    return -1;
  rules_rule_free(&r);
  return 0;
}

int policy_rule_check_list(const char *text, enum policy_list list, char *err,
                           size_t errlen) {
  struct rules_rule r;
  if (rules_parse(text, &r, err, errlen) != 0)
    return -1;
  int rc = 0;
  if (list == POLICY_LIST_ALLOW && r.unanchored) {
    snprintf(err, errlen,
             "an allow rule cannot use a tool-name pattern "
             "unless it starts with mcp__<server>__");
    rc = -1;
  } else if (list == POLICY_LIST_ALLOW && r.no_allow) {
    snprintf(err, errlen, "PowerShell rules are for deny and ask only");
    rc = -1;
  }
  rules_rule_free(&r);
  return rc;
}

// One malloc for the request and the first chunk of its arena (request.h),
// small enough for glibc's per-thread cache.
#define REQUEST_BLOCK 1024
#define REQUEST_AT                                                             \
  ((sizeof(struct policy_request) + _Alignof(max_align_t) - 1) &               \
   ~(_Alignof(max_align_t) - 1))
_Static_assert(REQUEST_AT + 512 <= REQUEST_BLOCK, "room for a first chunk");

struct policy_request *policy_request_new(const json_t *params, const char *cwd,
                                          const char *home) {
  return policy_request_new_tc(request_tool_call(params), cwd, home);
}

// The block of the last request freed, kept for the next one: a request
// is read, decided and freed before the next comes (one block, so a
// malloc and a free, ~140 instructions, per request are saved). Like the
// shell cache, one per process (the broker's loop is single-threaded).
static struct policy_request *spare_request;

struct policy_request *policy_request_new_tc(const json_t *tc, const char *cwd,
                                             const char *home) {
  struct policy_request *r = spare_request; // request_init sets every field
  spare_request = NULL;
  if (!r)
    r = xmalloc(REQUEST_BLOCK);
  static unsigned long long serials;
  r->serial = ++serials;
  request_init_in(&r->r, tc, cwd, home, (char *)r + REQUEST_AT,
                  REQUEST_BLOCK - REQUEST_AT);
  return r;
}

void policy_request_free(struct policy_request *r) {
  if (!r)
    return;
  request_clear(&r->r);
  if (!spare_request)
    spare_request = r;
  else
    free(r);
}

const char *policy_request_command(const struct policy_request *r) {
  return r->r.command;
}

void policy_request_tc_strings(const struct policy_request *r, const char **id,
                               const char **kind, const char **title) {
  *id = r->r.tc_id;
  *kind = r->r.tc_kind;
  *title = r->r.tc_title;
}

bool policy_request_raw_command(const struct policy_request *r) {
  return r->r.raw_command;
}

json_t *policy_request_paths(const struct policy_request *r) {
  json_t *a = json_array();
  size_t n;
  const char **v = policy_request_path_list(r, &n);
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string(v[i]));
  free(v);
  return a;
}

const char **policy_request_path_list(const struct policy_request *r,
                                      size_t *n) {
  return policy_request_path_list_in(r, NULL, 0, n);
}

const char **policy_request_path_list_in(const struct policy_request *r,
                                         const char **buf, size_t cap,
                                         size_t *n) {
  *n = 0;
  const char **v = NULL;
  for (size_t i = 0; i < r->r.natoms; i++) {
    const struct request_atom *at = &r->r.atoms[i];
    const char *p[2] = {at->lex, at->res};
    for (size_t k = 0; k < 2; k++) {
      // Listed once (as the JSON array did, whose strings are UTF-8).
      bool dup = !p[k];
      for (size_t j = 0; !dup && j < *n; j++)
        dup = strcmp(v[j], p[k]) == 0;
      if (dup)
        continue;
      if (!v)
        v = 2 * r->r.natoms <= cap ? buf : xcalloc(2 * r->r.natoms, sizeof(*v));
      v[(*n)++] = p[k];
    }
  }
  return v;
}

// A command's words as a shell would need them typed: a word with a
// character outside a safe set is single-quoted (a dynamic word is shown
// as the analyser saw it, expansion and all). Returns strlen(buf).
static size_t quoted_command(const struct shell_atom *a, const char *home,
                             char *buf, size_t n) {
  // The bytes shown without quotes: a-z A-Z 0-9 @%+=:,./_- (not NUL)
  static const bool safe[256] = {
      ['@'] = 1, ['%'] = 1, ['+'] = 1, ['='] = 1, [':'] = 1, [','] = 1,
      ['.'] = 1, ['/'] = 1, ['_'] = 1, ['-'] = 1, ['0'] = 1, ['1'] = 1,
      ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1,
      ['8'] = 1, ['9'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1,
      ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
      ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1,
      ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1,
      ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1, ['A'] = 1, ['B'] = 1,
      ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1,
      ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1, ['N'] = 1,
      ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
      ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1};
  size_t used = 0, hl = home ? strlen(home) : 0;
  bool cut = false;
#define PUT(c)                                                                 \
  do {                                                                         \
    if (used + 4 < n)                                                          \
      buf[used++] = (c);                                                       \
    else                                                                       \
      cut = true;                                                              \
  } while (0)
  for (size_t i = 0; i < a->nwords && !cut; i++) {
    const char *w = a->words[i].text;
    const unsigned char *e = (const unsigned char *)w;
    while (safe[*e])
      e++;
    bool plain = !*e && *w; // e: the word's end when plain
    if (i)
      PUT(' ');
    // The analyser expanded a leading ~: show it as typed.
    if (plain && hl > 1 && w[0] == home[0] && strncmp(w, home, hl) == 0 &&
        (w[hl] == '/' || !w[hl])) {
      PUT('~');
      w += hl;
    }
    if (plain && !cut) {
      // e is the word's end: all of it, when it fits (PUT's bound for
      // its last byte), else byte by byte as below.
      size_t wn = (size_t)((const char *)e - w);
      if (used + wn + 3 < n) {
        memcpy(buf + used, w, wn);
        used += wn;
        continue;
      }
    }
    if (!plain && !a->words[i].dynamic)
      PUT('\'');
    for (const char *c = w; *c && !cut; c++) {
      if (*c == '\'' && !plain && !a->words[i].dynamic) {
        PUT('\'');
        PUT('\\');
        PUT('\'');
      }
      PUT(*c);
    }
    if (!plain && !a->words[i].dynamic)
      PUT('\'');
  }
#undef PUT
  if (cut) {
    // Never end inside a UTF-8 sequence: drop its bytes, then say "...".
    while (used > 0 && ((unsigned char)buf[used - 1] & 0xC0) == 0x80)
      used--;
    if (used > 0 && ((unsigned char)buf[used - 1] & 0x80))
      used--;
    memcpy(buf + used, "...", 3); // used + 4 <= n: PUT kept the room
    used += 3;
  }
  buf[used] = '\0';
  if (!a->nwords)
    return (size_t)snprintf(buf, n, "(assignment)");
  return used;
}

size_t policy_request_natoms(const struct policy_request *r) {
  return r->r.natoms < POLICY_ATOMS_SHOWN ? r->r.natoms : POLICY_ATOMS_SHOWN;
}

void policy_request_atom(const struct policy *p,
                         const struct policy_request *rq, size_t i,
                         struct policy_atom_view *out) {
  static const char *const cls_name[] = {
      [REQUEST_BASH] = "command",  [REQUEST_READ] = "read",
      [REQUEST_EDIT] = "edit",     [REQUEST_FETCH] = "fetch",
      [REQUEST_SEARCH] = "search", [REQUEST_MCP] = "mcp",
      [REQUEST_KIND] = "other",
  };
  const struct request_atom *at = &rq->r.atoms[i];
  out->kind = cls_name[at->cls];
  out->inner = at->deny_only;
  // A Bash atom of an analysis: its text may be kept.
  struct described_slot *slot = NULL;
  unsigned long long serial = 0;
  uint32_t idx = 0;
  if (at->cls == REQUEST_BASH && p && p->described) {
    const struct shell_result *sh[2] = {rq->r.sh, rq->r.alt_sh};
    for (int k = 0; k < 2 && !serial; k++) {
      uintptr_t off = sh[k] ? (uintptr_t)at->cmd - (uintptr_t)sh[k]->atoms : 0;
      if (sh[k] && off < sh[k]->natoms * sizeof(*sh[k]->atoms) &&
          off % sizeof(*sh[k]->atoms) == 0) {
        serial = shcache_serial(sh[k]);
        idx = (uint32_t)(off / sizeof(*sh[k]->atoms));
      }
    }
    if (serial) {
      if (!*p->described)
        *p->described = xcalloc(1, sizeof(**p->described));
      slot = &(*p->described)->slot[(serial * 7 + idx) & (DESCRIBED_SLOTS - 1)];
      if (slot->serial == serial && slot->atom == idx) {
        out->text = slot->ok ? strcpy(out->buf, slot->text) : "(not UTF-8)";
        return;
      }
    }
  }
  struct eval e = {.p = p, .r = &rq->r};
  describe(&e, at, out->buf, sizeof(out->buf));
  // Only valid UTF-8 goes into an event: a word the agent sent that is
  // not, or a text cut inside a character, loses its last bytes.
  size_t full = strlen(out->buf), len = full;
  bool ok = utf8_valid(out->buf, len);
  while (!ok && len > 0 && full - len < 4)
    ok = utf8_valid(out->buf, --len);
  out->buf[len] = '\0';
  out->text = ok ? out->buf : "(not UTF-8)";
  if (slot && len < DESCRIBED_TEXT) {
    slot->serial = serial;
    slot->atom = idx;
    slot->ok = ok;
    memcpy(slot->text, out->buf, len + 1);
  }
}

json_t *policy_request_atoms(const struct policy *p,
                             const struct policy_request *rq) {
  json_t *a = json_array();
  struct policy_atom_view v;
  for (size_t i = 0; i < policy_request_natoms(rq); i++) {
    policy_request_atom(p, rq, i, &v);
    json_t *o = json_object();
    // Both are UTF-8: a static name, and a text policy_request_atom cut
    // to valid UTF-8 (or "(not UTF-8)").
    json_object_set_new_nocheck(o, "kind", json_string_nocheck(v.kind));
    json_object_set_new_nocheck(o, "text", json_string_nocheck(v.text));
    if (v.inner)
      json_object_set_new_nocheck(o, "inner", json_true());
    json_array_append_new(a, o);
  }
  return a;
}

char **policy_request_narrow_rules(const struct policy_request *rq, size_t *n) {
  return policy_request_suggest(rq, NULL, NULL, false, n);
}

// Where a suggested path rule is anchored: the project root (`/rel`), home
// (`~/rel`), else the filesystem root (`//abs`).
struct anchors {
  const char *root, *home;
};

// One set being built: its rules (malloc'd), whether it still holds, and
// whether a rule is broader than the narrow one (broad sets).
struct sset {
  char **v;
  size_t k;
  bool ok, wider;
};

// Adds rule (taken; NULL: the atom has none, so the set fails) unless the
// set has a rule of the same text.
static void sset_add(struct sset *s, char *rule) {
  bool dup = !rule;
  for (size_t j = 0; rule && j < s->k && !dup; j++)
    dup = strcmp(s->v[j], rule) == 0;
  s->ok = rule && (dup || s->k < NARROW_MAX);
  if (s->ok && !dup)
    s->v[s->k++] = rule;
  else
    free(rule);
}

// The set as the caller gets it (a malloc'd array, *n rules), or NULL
// when it does not hold or does not cover the request (its rules freed).
static char **sset_take(struct sset *s, bool holds, const struct request *r,
                        const struct anchors *an, size_t *n) {
  *n = 0;
  if (!s->ok || !s->k || !holds || !quick_covers(s->v, s->k, r, an)) {
    for (size_t i = 0; i < s->k; i++)
      free(s->v[i]);
    return NULL;
  }
  char **v = xmalloc(s->k * sizeof(*v)); // every slot written below
  memcpy(v, s->v, s->k * sizeof(*v));
  *n = s->k;
  return v;
}

// The narrow set (want & 1) and the broad one (want & 2) in one walk of
// the atoms: an atom's narrow rule is built once for both. Each set is
// what policy_request_suggest_reference gives.
static void suggest_sets(const struct policy_request *rq, const char *root,
                         const char *home, int want,
                         struct policy_suggestions *out) {
  const struct request *r = &rq->r;
  *out = (struct policy_suggestions){0};
  if (r->opaque)
    return;
  // An anchor that is not a plain absolute directory is not used: its glob
  // characters would widen the rule.
  struct anchors an = {0};
  if (root && root[0] == '/' && root[1] && !strpbrk(root, "*?[]\\"))
    an.root = root;
  if (home && home[0] == '/' && home[1] && !strpbrk(home, "*?[]\\"))
    an.home = home;
  char *nv[NARROW_MAX], *bv[NARROW_MAX];
  struct sset s[2] = {{nv, 0, want & 1, false}, {bv, 0, want & 2, false}};
  for (size_t i = 0; (s[0].ok || s[1].ok) && i < r->natoms; i++) {
    const struct request_atom *a = &r->atoms[i];
    if (!needs_cover(a))
      continue;
    bool twice = (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) &&
                 a->where == REQUEST_KNOWN && strcmp(a->lex, a->res) != 0;
    for (int t = 0; (s[0].ok || s[1].ok) && t < (twice ? 2 : 1); t++) {
      const char *path = t ? a->res : a->lex;
      // The broader rule of an atom that has none is its narrow one.
      char *b = s[1].ok ? narrow_rule(a, path, &an, true) : NULL;
      s[1].wider = s[1].wider || b;
      char *nr =
          s[0].ok || (s[1].ok && !b) ? narrow_rule(a, path, &an, false) : NULL;
      if (s[1].ok && !b && !s[0].ok) {
        sset_add(&s[1], nr);
        nr = NULL;
      } else if (s[1].ok) {
        sset_add(&s[1], b ? b : nr ? xstrdup(nr) : NULL);
      }
      if (s[0].ok)
        sset_add(&s[0], nr);
      else
        free(nr);
    }
  }
  if (want & 1)
    out->narrow = sset_take(&s[0], true, r, &an, &out->nnarrow);
  else
    sset_take(&s[0], false, r, &an, &out->nnarrow);
  if (want & 2)
    out->broad = sset_take(&s[1], s[1].wider, r, &an, &out->nbroad);
  else
    sset_take(&s[1], false, r, &an, &out->nbroad);
}

char **policy_request_suggest(const struct policy_request *rq, const char *root,
                              const char *home, bool broad, size_t *n) {
  struct policy_suggestions sg;
  suggest_sets(rq, root, home, broad ? 2 : 1, &sg);
  *n = broad ? sg.nbroad : sg.nnarrow;
  return broad ? sg.broad : sg.narrow;
}

void policy_request_suggestions(const struct policy_request *rq,
                                const char *root, const char *home,
                                struct policy_suggestions *out) {
  suggest_sets(rq, root, home, 3, out);
}

bool policy_rules_cover(const struct policy_request *rq, char **rules, size_t n,
                        const char *root, const char *home, bool reference) {
  struct anchors an = {root, home};
  return reference ? narrow_covers(rules, n, &rq->r, &an)
                   : quick_covers(rules, n, &rq->r, &an);
}

// The same, each set checked by compiling it as a policy (policy_new).
char **policy_request_suggest_reference(const struct policy_request *rq,
                                        const char *root, const char *home,
                                        bool broad, size_t *n) {
  const struct request *r = &rq->r;
  *n = 0;
  if (r->opaque)
    return NULL;
  // An anchor that is not a plain absolute directory is not used: its glob
  // characters would widen the rule.
  struct anchors an = {0};
  if (root && root[0] == '/' && root[1] && !strpbrk(root, "*?[]\\"))
    an.root = root;
  if (home && home[0] == '/' && home[1] && !strpbrk(home, "*?[]\\"))
    an.home = home;
  char **v = xcalloc(NARROW_MAX, sizeof(*v));
  size_t k = 0;
  bool ok = true, wider = false;
  for (size_t i = 0; ok && i < r->natoms; i++) {
    const struct request_atom *a = &r->atoms[i];
    if (!needs_cover(a))
      continue;
    bool twice = (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) &&
                 a->where == REQUEST_KNOWN && strcmp(a->lex, a->res) != 0;
    for (int t = 0; ok && t < (twice ? 2 : 1); t++) {
      const char *path = t ? a->res : a->lex;
      // The broader rule of an atom that has none is its narrow one.
      char *rule = broad ? narrow_rule(a, path, &an, true) : NULL;
      wider = wider || rule;
      if (!rule)
        rule = narrow_rule(a, path, &an, false);
      bool dup = !rule;
      for (size_t j = 0; rule && j < k && !dup; j++)
        dup = strcmp(v[j], rule) == 0;
      ok = rule && (dup || k < NARROW_MAX);
      if (ok && !dup)
        v[k++] = rule;
      else
        free(rule);
    }
  }
  if (!ok || !k || (broad && !wider) || !narrow_covers(v, k, r, &an)) {
    for (size_t i = 0; i < k; i++)
      free(v[i]);
    free(v);
    return NULL;
  }
  *n = k;
  return v;
}

static void fold_kept(struct eval *e);
static bool atom_of(const struct request *r, const struct request_atom *a,
                    unsigned long long *serial, uint32_t *atom);

// Appends the fields of path atom a (READ, EDIT) that a decision reads to
// key[*n]; false when they do not fit.
static bool path_key(const struct request_atom *a, char *key, size_t *n) {
  const char *f[4] = {a->kind, a->lex, a->res, a->text};
  size_t at = *n;
  if (at + 3 > RESULT_KEY)
    return false;
  key[at++] = (char)('0' + a->cls);
  key[at++] = (char)('0' + a->where);
  key[at++] = (char)('0' + a->guessed);
  for (int i = 0; i < 4; i++) {
    size_t len = f[i] ? strlen(f[i]) : 0;
    if (at + len + 2 > RESULT_KEY)
      return false;
    key[at++] = f[i] ? 'y' : 'n'; // NULL and "" apart
    memcpy(key + at, f[i] ? f[i] : "", len);
    at += len;
    key[at++] = '\0';
  }
  *n = at;
  return true;
}

// What a kept result is keyed by (struct kept_result): the serial of the
// analysis of the request's Bash atoms, their indices there, the atoms'
// deny_only bits and the path atoms' fields.
struct rkey {
  unsigned long long serial;
  size_t natoms, nkey;
  uint8_t deny_only, atom[RESULT_ATOMS];
  char key[RESULT_KEY];
};

// The key of r's atoms; false when its atoms are not of the kinds a result
// is kept for (Bash atoms of one analysis, at least one, and Read and Edit
// atoms; no breaker target; at most RESULT_ATOMS; not opaque).
static bool result_key(const struct request *r, struct rkey *k) {
  if (r->opaque || r->natoms > RESULT_ATOMS)
    return false;
  bool bash = false;
  k->serial = 0;
  k->natoms = r->natoms;
  k->nkey = 0;
  k->deny_only = 0;
  for (size_t j = 0; j < r->natoms; j++) {
    const struct request_atom *a = &r->atoms[j];
    unsigned long long sj;
    uint32_t aj;
    if (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) {
      if (!path_key(a, k->key, &k->nkey))
        return false;
      k->atom[j] = UINT8_MAX;
    } else if (a->ntargets || !atom_of(r, a, &sj, &aj) ||
               (bash && sj != k->serial) || aj >= UINT8_MAX) {
      return false; // atom_of: a Bash atom (else another class)
    } else {
      k->serial = sj;
      bash = true;
      k->atom[j] = (uint8_t)aj;
    }
    k->deny_only |= (uint8_t)(a->deny_only << j);
  }
  return bash;
}

static bool key_same(const struct kept_result *x, const struct rkey *k) {
  return x->natoms == k->natoms && x->deny_only == k->deny_only &&
         memcmp(x->atom, k->atom, k->natoms) == 0 && x->nkey == k->nkey &&
         memcmp(x->key, k->key, k->nkey) == 0;
}

// The result kept for the request's atoms (struct kept_result): true when
// it was found and written to e->out; else *kr is the place to keep this
// decision's (NULL: not one to keep) under the serial *ks.
static bool result_kept(struct eval *e, struct kept_result **kr,
                        unsigned long long *ks) {
  const struct request *r = e->r;
  struct results *res = e->p->res;
  const unsigned paths = 1u << REQUEST_READ | 1u << REQUEST_EDIT;
  *kr = NULL;
  if (!res || (e->mem && e->mem->nrules) ||
      (e->classes & ~(paths | 1u << REQUEST_BASH)) || e->targets || r->opaque ||
      e->p->mode == POLICY_MODE_PLAN || r->natoms > RESULT_ATOMS)
    return false;
  struct rkey k;
  if (!result_key(r, &k))
    return false;
  unsigned long long serial = k.serial;
  if (!res->v && ++res->asked < 2)
    return false; // a policy that decides once keeps nothing
  if (!res->v)
    res->v = xcalloc(KEEP_RESULTS, sizeof(*res->v));
  size_t slot = serial & (KEEP_RESULTS - 1);
  struct kept_result *x = &res->v[slot];
  bool same = x->serial == serial && key_same(x, &k);
  if (!same && x->seen != serial) {
    x->seen = serial; // kept the next time: most commands come once
    return false;
  }
  if (!same)
    x->stamp = ++res->stamps; // the key written below
  // x holds this request's key (or will, below: result_keep follows).
  res->last.req = e->rserial;
  res->last.stamp = x->stamp;
  res->last.slot = slot;
  if (!same) {
    x->serial = 0; // set by result_keep
    x->natoms = (uint8_t)k.natoms;
    x->deny_only = k.deny_only;
    memcpy(x->atom, k.atom, k.natoms);
    x->nkey = (uint16_t)k.nkey;
    memcpy(x->key, k.key, k.nkey);
    free(x->sg); // another request's
    x->sg = NULL;
    *kr = x;
    *ks = serial;
    return false;
  }
  struct policy_result *out = e->out;
  out->decision = x->decision;
  out->by = x->by;
  memcpy(out->reason, x->reason, x->n[0] + 1u);
  memcpy(out->rule, x->rule, x->n[1] + 1u);
  memcpy(out->source, x->source, x->n[2] + 1u);
  return true;
}

static void result_keep(struct kept_result *x, unsigned long long serial,
                        const struct eval *e) {
  const struct policy_result *out = e->out;
  x->decision = out->decision;
  x->by = out->by;
  x->n[0] = (uint16_t)strlen(out->reason);
  x->n[1] = (uint16_t)strlen(out->rule);
  x->n[2] = (uint16_t)strlen(out->source);
  memcpy(x->reason, out->reason, x->n[0] + 1u);
  memcpy(x->rule, out->rule, x->n[1] + 1u);
  memcpy(x->source, out->source, x->n[2] + 1u);
  x->serial = serial;
}

// The suggested sets kept with a result (kept_result.sg): a copy of the
// block policy_request_suggestions_kept gave out, and the anchors it was
// made with (root, home: NULL or strings in this allocation).
struct sg_kept {
  struct policy_sets *sets; // in this allocation; NULL: no rule
  const char *root, *home;
};

#define SG_KEEP_MAX 4096 // bytes of sets and anchors: more are made each time

// Leaves in v (n rules) those that are UTF-8 (the others freed); adds the
// bytes they take to *bytes. Returns how many are left.
static size_t utf8_only(char **v, size_t n, size_t *bytes) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(v[i]);
    if (utf8_valid(v[i], len)) {
      v[k++] = v[i];
      *bytes += len + 1;
    } else {
      free(v[i]);
    }
  }
  return k;
}

// d, a byte copy of s elsewhere, pointing into itself.
static void sets_place(struct policy_sets *d, const struct policy_sets *s) {
  char **ptrs = (char **)(d + 1);
  const char *const *sp = (const char *const *)(s + 1);
  for (size_t i = 0; i < d->nnarrow + d->nbroad; i++)
    ptrs[i] = (char *)d + (sp[i] - (const char *)s);
  d->narrow = d->nnarrow ? ptrs : NULL;
  d->broad = d->nbroad ? ptrs + d->nnarrow : NULL;
}

// sg's UTF-8 rules as one block (sg's arrays and strings freed), or NULL.
static struct policy_sets *sets_pack(struct policy_suggestions *sg) {
  size_t bytes = 0;
  size_t nn = utf8_only(sg->narrow, sg->nnarrow, &bytes);
  size_t nb = utf8_only(sg->broad, sg->nbroad, &bytes);
  struct policy_sets *s = NULL;
  if (nn + nb) {
    size_t size = sizeof(*s) + (nn + nb) * sizeof(char *) + bytes;
    s = xmalloc(size);
    char **ptrs = (char **)(s + 1);
    char *at = (char *)(ptrs + nn + nb);
    *s = (struct policy_sets){nn ? ptrs : NULL, nb ? ptrs + nn : NULL, nn, nb,
                              size};
    for (size_t i = 0; i < nn + nb; i++) {
      const char *rule = i < nn ? sg->narrow[i] : sg->broad[i - nn];
      size_t len = strlen(rule);
      memcpy(at, rule, len + 1);
      ptrs[i] = at;
      at += len + 1;
    }
  }
  for (size_t i = 0; i < nn; i++)
    free(sg->narrow[i]);
  for (size_t i = 0; i < nb; i++)
    free(sg->broad[i]);
  free(sg->narrow);
  free(sg->broad);
  return s;
}

static struct policy_sets *sets_copy(const struct policy_sets *s) {
  struct policy_sets *d = xmalloc(s->size);
  memcpy(d, s, s->size);
  sets_place(d, s);
  return d;
}

// s (NULL: no rule) made with root and home, as kept; NULL when too large.
static struct sg_kept *sg_new(const struct policy_sets *s, const char *root,
                              const char *home) {
  size_t size = s ? s->size : 0;
  size_t nr = root ? strlen(root) + 1 : 0, nh = home ? strlen(home) + 1 : 0;
  if (size + nr + nh > SG_KEEP_MAX)
    return NULL;
  struct sg_kept *k = xmalloc(sizeof(*k) + size + nr + nh);
  char *at = (char *)(k + 1);
  k->sets = NULL;
  if (s) {
    k->sets = (struct policy_sets *)(void *)at;
    memcpy(at, s, size);
    sets_place(k->sets, s);
    at += size;
  }
  k->root = root ? memcpy(at, root, nr) : NULL;
  k->home = home ? memcpy(at + nr, home, nh) : NULL;
  return k;
}

static bool same_str(const char *a, const char *b) {
  return a == b || (a && b && strcmp(a, b) == 0);
}

struct policy_sets *
policy_request_suggestions_kept(const struct policy *p,
                                const struct policy_request *rq,
                                const char *root, const char *home) {
  if (!rq)
    return NULL;
  // The result p keeps for these atoms (result_kept's place and key): the
  // sets depend on the atoms, root and home alone (not on the rules or
  // the mode), and the key holds every field of the atoms they read.
  // The request just decided (the prompt's case) finds the place its
  // decision found or wrote its key in without building the key again,
  // while nothing wrote another key there since (the place's stamp).
  struct kept_result *x = NULL;
  struct rkey k;
  const struct results *res = p ? p->res : NULL;
  if (res && res->v && rq->serial && res->last.req == rq->serial &&
      res->v[res->last.slot].stamp == res->last.stamp &&
      res->v[res->last.slot].serial) {
    x = &res->v[res->last.slot];
  } else if (res && res->v && result_key(&rq->r, &k)) {
    x = &res->v[k.serial & (KEEP_RESULTS - 1)];
    if (x->serial != k.serial || !key_same(x, &k))
      x = NULL; // no result kept for them
  }
  const struct sg_kept *kp = x ? x->sg : NULL;
  if (kp && same_str(kp->root, root) && same_str(kp->home, home))
    return kp->sets ? sets_copy(kp->sets) : NULL;
  struct policy_suggestions sg;
  suggest_sets(rq, root, home, 3, &sg);
  struct policy_sets *s = sets_pack(&sg);
  if (x) {
    free(x->sg);
    x->sg = sg_new(s, root, home);
  }
  return s;
}

static void decide(const struct policy *p, const struct policy *memory,
                   const struct policy_request *r, struct policy_result *out,
                   bool naive) {
  static const struct policy none = {0}; // read-only: a policy of no rules
  out->decision = POLICY_ASK;
  out->by = POLICY_BY_DEFAULT;
  out->reason[0] = out->rule[0] = out->source[0] = '\0';
  if (!r) {
    snprintf(out->reason, sizeof(out->reason), "no request");
    return;
  }
  struct memo memo;
  struct eval e = {.p = p ? p : &none,
                   .mem = memory,
                   .r = &r->r,
                   .out = out,
                   .naive = naive,
                   .memo = naive ? NULL : &memo,
                   .rserial = r->serial};
  for (size_t i = 0; !naive && i < r->r.natoms; i++) {
    const struct request_atom *a = &r->r.atoms[i];
    if (i < MEMO_ATOMS)
      memo.a[i].done = 0;
    e.classes |= 1u << a->cls;
    e.targets = e.targets || a->ntargets;
  }
  memo.nslot = 0;
  memo.kq = false;
  memset(memo.hits_done, 0, sizeof(memo.hits_done));
  struct kept_result *kr = NULL;
  unsigned long long ks = 0;
  if (!naive) {
    if (result_kept(&e, &kr, &ks))
      return;
    fold_kept(&e);
  }
  if (!(step_deny(&e) || step_ask(&e) || step_opaque(&e) ||
        step_protected(&e) || step_switch_mode(&e) || step_plan(&e) ||
        step_breaker(&e) || step_allow(&e)))
    step_default(&e);
  if (kr)
    result_keep(kr, ks, &e);
}

void policy_decide(const struct policy *p, const struct policy *memory,
                   const struct policy_request *r, struct policy_result *out) {
  decide(p, memory, r, out, false);
}

void policy_decide_reference(const struct policy *p,
                             const struct policy *memory,
                             const struct policy_request *r,
                             struct policy_result *out) {
  decide(p, memory, r, out, true);
}

// How an option of this kind answers decision d: 1 the kind wanted first
// (allow_once; reject_once), 2 the one wanted when there is none of those
// (reject_always), 0 never.
static int pick_rank(const char *kind, enum policy_decision d) {
  if (!kind)
    return 0;
  // The first byte before the library call (most kinds are not wanted).
  switch (d) {
  case POLICY_ALLOW:
    return kind[0] == 'a' && strcmp(kind, "allow_once") == 0;
  case POLICY_DENY:
    if (kind[0] != 'r' || strncmp(kind, "reject_", 7) != 0)
      return 0;
    return strcmp(kind + 7, "once") == 0     ? 1
           : strcmp(kind + 7, "always") == 0 ? 2
                                             : 0;
  case POLICY_ASK:
    break;
  }
  return 0;
}

// What both pickers end with: the second choice when there was no first
// one, and never a silent allow_always.
static const char *picked(const char *second, enum policy_decision *decision) {
  if (!second && *decision == POLICY_ALLOW)
    *decision = POLICY_ASK;
  return second;
}

const char *policy_pick_option_of(const char *const *ids,
                                  const char *const *kinds, size_t n,
                                  enum policy_decision *decision) {
  if ((unsigned)*decision > POLICY_DENY)
    *decision = POLICY_ASK;
  const char *second = NULL;
  for (size_t i = 0; *decision != POLICY_ASK && i < n; i++) {
    int rank = ids[i] ? pick_rank(kinds[i], *decision) : 0;
    if (rank == 1)
      return ids[i];
    if (rank == 2 && !second)
      second = ids[i];
  }
  return picked(second, decision);
}

// An option's kind and optionId (NULL when absent or not a string), in one
// walk of its few members (two lookups by hash cost more).
static void option_fields(const json_t *o, const char **kind,
                          const char **oid) {
  json_t *ko = NULL, *io = NULL, *obj = (json_t *)(uintptr_t)o;
  // A key of the length compared in place (one load), any other as
  // strcmp does (up to a NUL the key may hold).
  for (void *it = json_object_iter(obj); it;
       it = json_object_iter_next(obj, it)) {
    const char *k = json_object_iter_key(it);
    size_t kn = json_object_iter_key_len(it);
    if (k[0] == 'k' && (kn == 4 ? memcmp(k, "kind", 4) == 0
                                : kn > 4 && strcmp(k, "kind") == 0))
      ko = json_object_iter_value(it);
    else if (k[0] == 'o' && (kn == 8 ? memcmp(k, "optionId", 8) == 0
                                     : kn > 8 && strcmp(k, "optionId") == 0))
      io = json_object_iter_value(it);
  }
  *kind = json_string_value(ko);
  *oid = json_string_value(io);
}

const char *policy_pick_option(const json_t *options,
                               enum policy_decision *decision) {
  // One walk, no copy.
  if ((unsigned)*decision > POLICY_DENY)
    *decision = POLICY_ASK;
  const char *second = NULL;
  size_t n = *decision == POLICY_ASK ? 0 : json_array_size(options);
  for (size_t i = 0; i < n; i++) {
    const char *kind, *oid;
    option_fields(json_array_get(options, i), &kind, &oid);
    int rank = pick_rank(kind, *decision);
    const char *id = rank ? oid : NULL;
    if (id && rank == 1)
      return id;
    if (id && rank == 2 && !second)
      second = id;
  }
  return picked(second, decision);
}

void policy_pick_options(const json_t *options, const char **allow,
                         const char **reject) {
  const char *second = NULL;
  *allow = *reject = NULL;
  size_t n = json_array_size(options);
  for (size_t i = 0; i < n && !(*allow && *reject); i++) {
    const char *kind, *oid;
    option_fields(json_array_get(options, i), &kind, &oid);
    if (!oid)
      continue;
    if (!*allow && pick_rank(kind, POLICY_ALLOW) == 1)
      *allow = oid;
    int rank = *reject ? 0 : pick_rank(kind, POLICY_DENY);
    if (rank == 1)
      *reject = oid;
    else if (rank == 2 && !second)
      second = oid;
  }
  if (!*reject)
    *reject = second;
}

const char *policy_decision_name(enum policy_decision d) {
  static const char *const names[] = {"allow", "ask", "deny"};
  return (unsigned)d < 3 ? names[d] : "ask";
}

const char *policy_mode_name(enum policy_mode m) {
  static const char *const names[] = {"default", "acceptEdits", "plan", "yolo"};
  return (unsigned)m < 4 ? names[m] : "default";
}

const char *policy_by_name(enum policy_by b) {
  static const char *const names[] = {"rule", "memory", "mode", "yolo",
                                      "default"};
  return (unsigned)b < 5 ? names[b] : "default";
}

int policy_mode_parse(const char *s, enum policy_mode *out) {
  static const struct {
    const char *name;
    enum policy_mode mode;
  } modes[] = {{"default", POLICY_MODE_DEFAULT},
               {"acceptEdits", POLICY_MODE_ACCEPT_EDITS},
               {"plan", POLICY_MODE_PLAN},
               {"yolo", POLICY_MODE_YOLO},
               {"bypassPermissions", POLICY_MODE_YOLO}};
  for (size_t i = 0; s && i < sizeof(modes) / sizeof(*modes); i++) {
    if (strcmp(s, modes[i].name) == 0) {
      *out = modes[i].mode;
      return 0;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Compiling

static void compile_rule(struct policy *p, const struct policy_rule_text *t,
                         struct warnings *w) {
  const char *src = t->source ? t->source : "?";
  char err[512];
  struct prule pr = {.list = t->list};
  if (rules_parse(t->text, &pr.r, err, sizeof(err)) != 0) {
    warn(w, "%s: %s (%s)", t->text ? t->text : "(null)", err, src);
    return;
  }
  if (pr.r.note)
    warn(w, "%s: %s (%s)", t->text, pr.r.note, src);
  const char *skip = NULL;
  if (t->list == POLICY_LIST_ALLOW && pr.r.unanchored)
    skip = "allow rules take tool-name patterns only after a literal "
           "mcp__<server>__; ignored";
  else if (t->list == POLICY_LIST_ALLOW && pr.r.no_allow)
    skip = "PowerShell rules are for deny and ask only; ignored";
  else if ((pr.r.cls == RULES_READ || pr.r.cls == RULES_EDIT) && pr.r.spec &&
           !(pr.pat = path_rule_pattern(pr.r.spec, p->root, p->home,
                                        t->list == POLICY_LIST_ALLOW, err,
                                        sizeof(err))))
    skip = err;
  if (skip) {
    warn(w, "%s: %s (%s)", t->text, skip, src);
    rules_rule_free(&pr.r);
    return;
  }
  if (pr.r.cls == RULES_BASH) {
    const char *pat = pr.r.spec ? pr.r.spec : "*";
    pr.npat = strlen(pat);
    pr.nlit = strcspn(pat, "*");
    pr.lit = xstrndup(pat, pr.nlit);
    if (pr.nlit > 0 && pr.nlit + 1 == pr.npat && pat[pr.nlit - 1] == ':')
      pr.lit[pr.nlit - 1] = ' '; // `git log:*` is `git log *`
    pr.mpat = xstrdup(pat);
    if (pr.npat >= 2 && pat[pr.npat - 1] == '*' && pat[pr.npat - 2] == ':')
      pr.mpat[pr.npat - 2] = ' '; // as shell_pattern_match reads it
    pr.lrun = pr.nlit + 1 >= pr.npat;
  }
  pr.text = xstrdup(t->text);
  pr.source = xstrdup(src);
  char buf[PATH_LEN_MAX + 1];
  const char *sh = shown(p, src, buf, sizeof(buf));
  size_t n = strlen(sh) + 4;
  pr.suffix = xmalloc(n);
  pr.nsuffix =
      cat(pr.suffix, n, cat(pr.suffix, n, cat(pr.suffix, n, 0, " ("), sh), ")");
  pr.ntext = strlen(pr.text);
  pr.nsource = strlen(pr.source);
  pr.owner = p;
  p->rules[p->nrules++] = pr;
}

// Marks the pattern just added (<root>/**/name, /** after it when dir) for
// the segment matcher of tier_of_pattern, when root has no glob character.
static void add_anydepth(struct policy *p, const char *name, bool dir) {
  if (p->root_segs < 0 || strpbrk(name, "*?[\\"))
    return;
  p->prot[p->nprot - 1].name = name;
  p->prot[p->nprot - 1].dir = dir;
}

static void add_loc(struct policy *p, const char *dir, const char *name,
                    int tier) {
  char *s = name[0] ? path_normalize(dir, name, NULL) : xstrdup(dir);
  if (s)
    p->locs[p->nlocs++] = (struct protect){.pat = s, .tier = tier};
}

// The name of a tier-1 home pattern without its "/**".
static void home_dir_of(const char *pattern, char *out, size_t len) {
  size_t n = strcspn(pattern, "/");
  snprintf(out, len, "%.*s", (int)n, pattern);
}

static void compile_protect(struct policy *p, const struct policy_input *in) {
  size_t n1 = sizeof(tier1_dirs) / sizeof(*tier1_dirs);
  size_t n2 = sizeof(tier2_dirs) / sizeof(*tier2_dirs);
  size_t h1 = sizeof(tier1_home) / sizeof(*tier1_home);
  size_t h2 = sizeof(tier2_home) / sizeof(*tier2_home);
  size_t np = in->protect ? in->nprotect : 0;
  p->prot = xcalloc(n1 + n2 + h1 + h2 + 1 + 2 * np, sizeof(*p->prot));
  p->locs = xcalloc(n1 + n2 + h1 + 1 + 2 * np, sizeof(*p->locs));
  p->root_segs = -1;
  if (p->root && !strpbrk(p->root, "*?[\\")) {
    p->root_segs = 0;
    for (const char *r = p->root; *r; r++)
      p->root_segs += r[0] == '/' && r[1] && r[1] != '/';
  }
  for (size_t i = 0; p->root && i < n1; i++) {
    add_protect(p, p->root, "/**/", tier1_dirs[i], "/**", 1);
    add_anydepth(p, tier1_dirs[i], true);
    add_loc(p, p->root, tier1_dirs[i], 1);
  }
  for (size_t i = 0; p->home && i < h1; i++) {
    char dir[64];
    add_protect(p, p->home, "/", tier1_home[i], "", 1);
    home_dir_of(tier1_home[i], dir, sizeof(dir));
    add_loc(p, p->home, dir, 1);
  }
  // The broker's own files, and the whole directories that hold them: a
  // copy into the directory or a move of it replaces the file as surely as
  // a write to it does.
  for (size_t i = 0; i < np; i++) {
    char *lex =
        in->protect[i] ? path_normalize(NULL, in->protect[i], NULL) : NULL;
    char *dir = lex ? path_normalize(lex, "..", NULL) : NULL;
    char *esc = lex ? path_escape(lex) : NULL;
    char *desc = dir ? path_escape(dir) : NULL;
    if (esc)
      add_protect(p, esc, "", "", "", 1);
    if (desc && strcmp(dir, "/") != 0) {
      add_protect(p, desc, "/**", "", "", 1);
      add_loc(p, dir, "", 1);
    }
    free(esc);
    free(desc);
    free(dir);
    free(lex);
  }
  for (size_t i = 0; p->root && i < n2; i++) {
    add_protect(p, p->root, "/**/", tier2_dirs[i], "/**", 2);
    add_anydepth(p, tier2_dirs[i], true);
    add_loc(p, p->root, tier2_dirs[i], 2);
  }
  if (p->root) {
    add_protect(p, p->root, "/**/", ".envrc", "", 2);
    add_anydepth(p, ".envrc", false);
  }
  for (size_t i = 0; p->home && i < h2; i++)
    add_protect(p, p->home, "/", tier2_home[i], "", 2);
  if (p->home)
    add_loc(p, p->home, ".ssh", 2);
  for (size_t i = 0; i < p->nprot; i++) {
    struct protect *pr = &p->prot[i];
    size_t n = strlen(pr->pat);
    pr->tree = n >= 3 && strcmp(pr->pat + n - 3, "/**") == 0;
    if (pr->tree)
      n -= 3;
    if (!pr->name && pr->pat[0] == '/' && n > 0 && !memchr(pr->pat, '*', n) &&
        !memchr(pr->pat, '?', n) && !memchr(pr->pat, '[', n) &&
        !memchr(pr->pat, '\\', n))
      pr->nlit = n;
    pr->plain = pr->nlit > 1 && pr->pat[pr->nlit - 1] != '/';
    for (size_t k = 1; pr->plain && k < pr->nlit; k++)
      pr->plain = !(pr->pat[k] == '/' && pr->pat[k - 1] == '/');
    size_t hl = p->home ? strlen(p->home) : 0;
    pr->in_home = pr->plain && hl > 1 && pr->nlit > hl &&
                  strncmp(pr->pat, p->home, hl) == 0 && pr->pat[hl] == '/';
    pr->nname = pr->name ? strlen(pr->name) : 0;
  }
}

// path_match(pattern, path, true, true) for a pattern whose first n bytes
// are literal (no glob character), followed by `/**` when tree: the
// path's segments are the pattern's, case folded, and more only for tree.
static bool literal_match(const char *pat, size_t n, bool tree,
                          const char *path) {
  if (!path || path[0] != '/')
    return false;
  const char *a = pat, *ae = pat + n, *b = path;
  for (;;) {
    while (a < ae && *a == '/')
      a++;
    while (*b == '/')
      b++;
    if (a == ae)
      return tree || !*b;
    if (!*b)
      return false;
    size_t la = 0, lb = strcspn(b, "/");
    while (a + la < ae && a[la] != '/')
      la++;
    if (la != lb || strncasecmp(a, b, la) != 0)
      return false;
    a += la;
    b += lb;
  }
}

static void add_protect(struct policy *p, const char *a, const char *b,
                        const char *c, const char *d, int tier) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + strlen(d) + 1;
  char *s = xmalloc(n);
  snprintf(s, n, "%s%s%s%s", a, b, c, d);
  p->prot[p->nprot++] = (struct protect){.pat = s, .tier = tier};
}

static void warn(struct warnings *w, const char *fmt, ...) {
  char buf[RULES_TEXT_MAX + 1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  w->v = xrealloc(w->v, (w->n + 1) * sizeof(*w->v));
  w->v[w->n++] = xstrdup(buf);
}

// ---------------------------------------------------------------------------
// The index: which rules an atom can meet

static char fold_c(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
}

static void fold_copy(char *dst, const char *src, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = fold_c(src[i]);
}

// The literal leading segments of an absolute pattern, case folded, as
// "/a/b" (path_match splits at runs of `/`): a path it matches starts with
// them, whatever the rest. A segment with a glob character ends them.
static size_t pattern_key(const char *pat, char *buf, size_t cap) {
  size_t n = 0;
  for (const char *s = pat; *s;) {
    while (*s == '/')
      s++;
    size_t len = strcspn(s, "/");
    if (!len || strcspn(s, "*?[\\") < len || n + 1 + len > cap)
      break;
    buf[n++] = '/';
    fold_copy(buf + n, s, len);
    n += len;
    s += len;
  }
  return n;
}

// A tool-name glob that one of the names of an atom class may match (case
// folded: a superset of what allow rules match).
static bool tool_meets_class(const char *glob, int cls) {
  static const enum rules_class cls_of[INDEX_CLASSES] = {
      [REQUEST_BASH] = RULES_BASH,
      [REQUEST_READ] = RULES_READ,
      [REQUEST_EDIT] = RULES_EDIT,
      [REQUEST_FETCH] = RULES_WEBFETCH,
      [REQUEST_SEARCH] = RULES_WEBSEARCH};
  if (strcmp(glob, "*") == 0)
    return true;
  const char *names[16];
  size_t n = rules_class_names(cls_of[cls], names, 16);
  for (size_t i = 0; i < n; i++)
    if (rules_glob(glob, names[i], true))
      return true;
  return false;
}

#define SCAN_MAX 8 // lists this short are scanned, not looked up

static void index_rule(struct policy *p, uint32_t i) {
  const struct prule *pr = &p->rules[i];
  struct lindex *x = &p->idx[pr->list];
  const char *spec = pr->r.spec;
  char key[PATH_LEN_MAX + 1];
  if (pr->r.cls == RULES_BASH && pr->npat > p->bash_npat_max)
    p->bash_npat_max = pr->npat;
  if (pr->r.cls == RULES_KIND && pr->list == POLICY_LIST_ALLOW &&
      strcmp(spec, "switch_mode") == 0)
    p->allow_switch_mode = true;
  // A short list is scanned (gather): no index to build. Policies of a few
  // rules are compiled often (the suggested rules of every prompt are
  // checked with one, each session's memory is one).
  if (p->nof_list[pr->list] <= SCAN_MAX)
    return;
  if (!p->keys)
    p->keys = ruleidx_new();
  x->keys = p->keys;
  x->list = pr->list;
  switch (pr->r.cls) {
  case RULES_BASH: {
    ruleidx_vec_push(&x->bash_all, i);
    // "git log *" (literal start "git log "): bash_cannot_match rejects it
    // unless the command's text starts with "git log" then a space or its
    // end (see bash_cands).
    const char *sp = pr->lit ? memchr(pr->lit, ' ', pr->nlit) : NULL;
    size_t f = sp ? (size_t)(sp - pr->lit) : 0, k = 0;
    for (size_t j = f; sp && j < pr->nlit; j++)
      k = pr->lit[j] == ' ' ? j : k; // the last space
    if (f > 0 && k < BASH_KEY_MAX) {
      fold_copy(key, pr->lit, k);
      ruleidx_add(x->keys, x->list, 'b', key, k, i);
      x->bash_key_max = k > x->bash_key_max ? k : x->bash_key_max;
      ruleidx_add(x->keys, x->list, 'f', key, f, i);
      ruleidx_aux_max(x->keys, 'f', key, f, k); // the longest 'b' key after f
      x->first = xrealloc(x->first, (x->nfirst + 1) * sizeof(*x->first));
      x->first[x->nfirst++] =
          (struct first_word){xstrndup(key, f), f, (uint32_t)i};
    } else {
      ruleidx_vec_push(&x->bash_rest, i);
    }
    return;
  }
  case RULES_READ:
  case RULES_EDIT: {
    int c = pr->r.cls == RULES_EDIT;
    ruleidx_vec_push(&x->path_all[c], i);
    if (!spec || !pr->pat)
      ruleidx_vec_push(&x->path_nospec[c], i);
    else {
      size_t n = pattern_key(pr->pat, key, sizeof(key));
      ruleidx_add(x->keys, x->list, c ? 'e' : 'r', key, n, i);
      x->path_key_max[c] = n > x->path_key_max[c] ? n : x->path_key_max[c];
    }
    return;
  }
  case RULES_WEBFETCH:
    if (spec && !strchr(spec, '*'))
      ruleidx_add(x->keys, x->list, 'h', spec, strlen(spec), i);
    else
      ruleidx_vec_push(&x->host_rest, i);
    return;
  case RULES_WEBSEARCH:
    ruleidx_vec_push(&x->search, i);
    return;
  case RULES_TOOL:
    ruleidx_vec_push(&x->tool_all, i);
    for (int c = 0; c < INDEX_CLASSES; c++)
      if (tool_meets_class(spec, c))
        ruleidx_vec_push(&x->tool_cls[c], i);
    if (strchr(spec, '*') || strlen(spec) >= sizeof(key)) {
      ruleidx_vec_push(&x->tool_glob, i);
    } else {
      fold_copy(key, spec, strlen(spec));
      ruleidx_add(x->keys, x->list, 't', key, strlen(spec), i);
    }
    return;
  case RULES_KIND:
    ruleidx_add(x->keys, x->list, 'k', spec, strlen(spec), i);
    x->nkind++;
    return;
  }
}

static int first_cmp(const void *a, const void *b) {
  const struct first_word *x = a, *y = b;
  int c = memcmp(x->w, y->w, x->n < y->n ? x->n : y->n);
  if (c)
    return c;
  if (x->n != y->n)
    return x->n < y->n ? -1 : 1;
  return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static void index_done(struct lindex *x) {
  if (x->nfirst)
    qsort(x->first, x->nfirst, sizeof(*x->first), first_cmp);
}

static void index_free(struct lindex *x) {
  for (size_t i = 0; i < x->nfirst; i++)
    free(x->first[i].w);
  free(x->first);
  struct ruleidx_vec *v[] = {
      &x->bash_all,       &x->bash_rest,      &x->path_all[0], &x->path_all[1],
      &x->path_nospec[0], &x->path_nospec[1], &x->host_rest,   &x->search,
      &x->tool_glob,      &x->tool_all};
  for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++)
    ruleidx_vec_free(v[i]);
  for (int c = 0; c < INDEX_CLASSES; c++)
    ruleidx_vec_free(&x->tool_cls[c]);
}

#define CANDS_MAX 64 // more lists: every rule of the list is a candidate

// The candidate rules of one atom: ascending lists, merged as they are
// read (cands_next), or every rule of the list.
struct cands {
  struct ruleidx_list l[CANDS_MAX];
  size_t at[CANDS_MAX];
  size_t n;
  bool all;
  size_t pos;            // all: the next position in of_list
  uint32_t scratch[256]; // lists made for this atom (bash_prefixed)
  size_t nscratch;
};

static void cands_add(struct cands *c, struct ruleidx_list l) {
  if (!l.n || c->all)
    return;
  if (c->n == CANDS_MAX) {
    c->all = true;
    return;
  }
  c->at[c->n] = 0;
  c->l[c->n++] = l;
}

static inline void cands_vec(struct cands *c, const struct ruleidx_vec *v) {
  if (v->n)
    cands_add(c, (struct ruleidx_list){v->v, v->n});
}

static void cands_key(struct cands *c, const struct lindex *x, char tag,
                      const char *key, size_t n) {
  cands_add(c, ruleidx_get(x->keys, x->list, tag, key, n));
}

// The next candidate (ascending, each once), or UINT32_MAX.
static uint32_t cands_next(const struct policy *p, enum policy_list list,
                           struct cands *c) {
  if (c->all)
    return c->pos < p->nof_list[list] ? (uint32_t)p->of_list[list][c->pos++]
                                      : UINT32_MAX;
  if (c->n <= 1) // nothing to merge
    return c->n && c->at[0] < c->l[0].n ? c->l[0].v[c->at[0]++] : UINT32_MAX;
  uint32_t min = UINT32_MAX;
  for (size_t i = 0; i < c->n; i++)
    if (c->at[i] < c->l[i].n && c->l[i].v[c->at[i]] < min)
      min = c->l[i].v[c->at[i]];
  for (size_t i = 0; i < c->n; i++)
    if (c->at[i] < c->l[i].n && c->l[i].v[c->at[i]] == min)
      c->at[i]++;
  return min;
}

// Back to the first candidate.
static void cands_rewind(struct cands *c) {
  c->pos = 0;
  for (size_t i = 0; i < c->n; i++)
    c->at[i] = 0;
}

static int u32_cmp(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

// The keyed rules whose first word starts with w[0..n).
static void bash_prefixed(const struct lindex *x, const char *w, size_t n,
                          struct cands *c) {
  size_t lo = 0, hi = x->nfirst;
  while (lo < hi) { // the first entry not below w
    size_t mid = lo + (hi - lo) / 2;
    const struct first_word *f = &x->first[mid];
    int cmp = memcmp(f->w, w, f->n < n ? f->n : n);
    if (cmp < 0 || (cmp == 0 && f->n < n))
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t start = c->nscratch;
  for (size_t i = lo;
       i < x->nfirst && x->first[i].n >= n && memcmp(x->first[i].w, w, n) == 0;
       i++) {
    if (c->nscratch == sizeof(c->scratch) / sizeof(*c->scratch)) {
      c->all = true;
      return;
    }
    c->scratch[c->nscratch++] = x->first[i].rule;
  }
  qsort(c->scratch + start, c->nscratch - start, sizeof(*c->scratch), u32_cmp);
  cands_add(c, (struct ruleidx_list){c->scratch + start, c->nscratch - start});
}

// The keyed Bash rules that bash_cannot_match lets through for a command
// named name (the command's first word, or its basename), words[1..d) not
// dynamic. lit_rejects walks the text (the name, then each word after a
// space) against the rule's literal start until a byte differs (reject),
// the literal ends, or a dynamic word comes (no reject). So with no dynamic
// word, the rule's complete words must be the text up to one of its spaces
// or its end; with one at d >= 2, the first words must be equal; at d == 1,
// the rule's first word must start with the name.
static void bash_text(const struct lindex *x, const struct shell_atom *cmd,
                      const char *name, size_t d, struct cands *c) {
  if (!x->nfirst)
    return; // no keyed rule
  // What the keys can meet: the longest key and the space after it, or the
  // whole first word (for 'f' and bash_prefixed).
  char t[BASH_KEY_MAX + 2];
  size_t nl = strlen(name), need = x->bash_key_max + 1;
  size_t n = 0, cap = nl + 1 > need ? nl + 1 : need;
  cap = cap < sizeof(t) - 1 ? cap : sizeof(t) - 1;
  bool cut = false;
  for (size_t i = 0; i < d && !cut; i++) {
    const char *w = i ? cmd->words[i].text : name;
    if (i && n == cap) {
      cut = true;
      break;
    }
    if (i)
      t[n++] = ' ';
    size_t wn = i ? strlen(w) : nl;
    if (wn > cap - n) {
      wn = cap - n;
      cut = true;
    }
    fold_copy(t + n, w, wn);
    n += wn;
    cut = cut || (n == cap && i + 1 < d);
  }
  size_t f = 0;
  while (f < n && t[f] != ' ')
    f++;
  if (d < cmd->nwords) {
    if (f == n && (cut || d > 1)) {
      c->all = true; // cannot happen: a space follows the first word
      return;
    }
    if (d == 1 && (cut || f < n))
      c->all = true; // a name with a space: a rule may end inside it
    else if (d == 1)
      bash_prefixed(x, t, n, c);
    else
      cands_key(c, x, 'f', t, f);
    return;
  }
  uint64_t h = ruleidx_hash_start('b');
  for (size_t j = 1, done = 0; j <= n && j <= x->bash_key_max; j++) {
    if (j == n ? !cut : t[j] == ' ') {
      h = ruleidx_hash_more(h, t + done, j - done);
      done = j;
      cands_add(c, ruleidx_get_hashed(x->keys, x->list, h, 'b', t, j));
    }
  }
}

// Bash rules: those without a literal word (bash_rest), and the keyed ones
// bash_text finds for the name (deny, ask: also its basename). Where
// bash_cannot_match does not look (a dynamic name, a text too long for its
// prefilter), every Bash rule.
static void bash_cands(const struct policy *p, const struct lindex *x,
                       const struct shell_atom *cmd, bool for_allow,
                       struct cands *c) {
  bool fast = cmd && cmd->kind == SHELL_CMD && cmd->nwords > 0 &&
              !cmd->words[0].dynamic;
  if (fast && !for_allow) {
    size_t tn = 0;
    for (size_t i = 0; i < cmd->nwords; i++)
      tn += (i ? 1 : 0) + strlen(cmd->words[i].text);
    fast = p->bash_npat_max + 1 <= PREFILTER_WORK_MAX / (tn + 1);
  }
  if (!fast) {
    cands_vec(c, &x->bash_all);
    return;
  }
  size_t d = 1;
  while (d < cmd->nwords && !cmd->words[d].dynamic)
    d++;
  const char *name = cmd->words[0].text;
  bash_text(x, cmd, name, d, c);
  const char *base = strrchr(name, '/');
  if (!for_allow && base && base[1])
    bash_text(x, cmd, base + 1, d, c);
  cands_vec(c, &x->bash_rest);
}

// The lists of list in the slots k found (memo_keys).
static void cands_slots(struct cands *c, const struct memo *m,
                        const struct memo_keys *k, int list) {
  for (uint32_t i = k->b; i < k->b + k->n; i++)
    cands_add(c, ruleidx_slot_list(m->slot[i], list));
}

// bash_cands from the keys looked up once (memo_keys): the same lists.
static void bash_memo_cands(const struct policy *p, const struct lindex *x,
                            const struct memo *m, const struct memo_atom *ma,
                            bool for_allow, struct cands *c) {
  if (!for_allow && p->bash_npat_max + 1 > PREFILTER_WORK_MAX / (ma->tn + 1)) {
    cands_vec(c, &x->bash_all);
    return;
  }
  cands_slots(c, m, &ma->k[0], x->list);
  if (!for_allow && ma->base)
    cands_slots(c, m, &ma->k[1], x->list);
  cands_vec(c, &x->bash_rest);
}

// The next key of a path's walk (path_cands, the memo's path keys): the
// next segment after *s appended to buf[*n] as "/segment" (folded), its
// hash carried on in *h. False at the end of the path, or when the key
// would be longer than max (no key is longer).
static inline bool path_key_next(const char **sp, char *buf, size_t *np,
                                 size_t max, uint64_t *h) {
  const char *s = *sp;
  size_t n = *np;
  while (*s == '/')
    s++;
  size_t len = strcspn(s, "/");
  if (!len || n + 1 + len > max)
    return false;
  buf[n] = '/';
  fold_copy(buf + n + 1, s, len);
  *h = ruleidx_hash_more(*h, buf + n, len + 1);
  *np = n + len + 1;
  *sp = s + len;
  return true;
}

// Read/Edit rules by the literal start of their pattern: one key per
// leading run of the path's segments (and the empty one).
static void path_cands(const struct lindex *x, char tag, const char *path,
                       struct cands *c) {
  char buf[PATH_LEN_MAX + 1];
  size_t n = 0, max = x->path_key_max[tag == 'e'];
  uint64_t h = ruleidx_hash_start(tag);
  cands_add(c, ruleidx_get_hashed(x->keys, x->list, h, tag, "", 0));
  for (const char *s = path; path_key_next(&s, buf, &n, max, &h);)
    cands_add(c, ruleidx_get_hashed(x->keys, x->list, h, tag, buf, n));
}

// The rules of list that can match atom a (a superset, see lindex).
static void gather(const struct policy *p, enum policy_list list,
                   const struct request_atom *a, bool for_allow,
                   const struct memo *m, const struct memo_atom *ma,
                   struct cands *c) {
  const struct lindex *x = &p->idx[list];
  c->n = 0;
  c->all = p->nof_list[list] <= SCAN_MAX; // a short list: scanned
  c->pos = 0;
  c->nscratch = 0;
  if (c->all)
    return;
  if (a->kind && x->nkind)
    cands_key(c, x, 'k', a->kind, strlen(a->kind));
  if (a->cls < INDEX_CLASSES)
    cands_vec(c, &x->tool_cls[a->cls]);
  char key[RULES_TEXT_MAX + 8];
  size_t n = a->name && a->cls >= REQUEST_FETCH ? strlen(a->name) : 0;
  switch (a->cls) {
  case REQUEST_BASH:
    if (ma)
      bash_memo_cands(p, x, m, ma, for_allow, c);
    else
      bash_cands(p, x, a->cmd, for_allow, c);
    return;
  case REQUEST_READ:
  case REQUEST_EDIT: {
    int k = a->cls == REQUEST_EDIT;
    if (a->where != REQUEST_KNOWN) {
      cands_vec(c, &x->path_all[k]);
      return;
    }
    cands_vec(c, &x->path_nospec[k]);
    if (ma) {
      cands_slots(c, m, &ma->k[0], x->list);
      return;
    }
    path_cands(x, k ? 'e' : 'r', a->lex, c);
    if (a->res && strcmp(a->res, a->lex) != 0) // the same keys otherwise
      path_cands(x, k ? 'e' : 'r', a->res, c);
    return;
  }
  case REQUEST_FETCH:
    if (a->name)
      cands_key(c, x, 'h', a->name, n);
    cands_vec(c, &x->host_rest);
    return;
  case REQUEST_SEARCH:
    cands_vec(c, &x->search);
    return;
  case REQUEST_MCP:
  case REQUEST_KIND:
    if (a->cls == REQUEST_MCP && a->gemini_name) {
      cands_vec(c, &x->tool_all); // split at every `_` (names_match)
      return;
    }
    if (a->name && n < sizeof(key)) {
      fold_copy(key, a->name, n);
      cands_key(c, x, 't', key, n);
    } else if (a->name) {
      cands_vec(c, &x->tool_all);
    }
    cands_vec(c, &x->tool_glob);
    return;
  }
}

// ---------------------------------------------------------------------------
// Deciding (permission-rules §5.6, in this order)

static bool step_deny(struct eval *e) {
  const struct request_atom *a;
  const struct policy *ps[2] = {e->p, e->mem};
  for (int i = 0; i < 2; i++) {
    const struct prule *pr =
        first_hit(e, ps[i], POLICY_LIST_DENY, e->r, SHELL_YES, &a);
    if (pr) {
      char what[160];
      size_t nw = describe(e, a, what, sizeof(what));
      enum policy_by by = i ? POLICY_BY_MEMORY : POLICY_BY_RULE;
      if (e->naive)
        result(e, POLICY_DENY, by, pr, NULL, "denied by %s: %s", pr->text,
               what);
      else
        result_n(e, POLICY_DENY, by, pr,
                 (const struct piece[]){{"denied by ", 10},
                                        {pr->text, pr->ntext},
                                        {": ", 2},
                                        {what, nw}},
                 4);
      return true;
    }
  }
  return false;
}

// An ask rule that matches, or a deny or ask rule that might match.
static bool step_ask(struct eval *e) {
  static const struct {
    enum policy_list list;
    enum shell_match want;
  } order[] = {{POLICY_LIST_ASK, SHELL_YES},
               {POLICY_LIST_DENY, SHELL_MAYBE},
               {POLICY_LIST_ASK, SHELL_MAYBE}};
  const struct policy *ps[2] = {e->p, e->mem};
  for (size_t k = 0; k < sizeof(order) / sizeof(*order); k++) {
    for (int i = 0; i < 2; i++) {
      const struct request_atom *a;
      const struct prule *pr =
          first_hit(e, ps[i], order[k].list, e->r, order[k].want, &a);
      if (!pr)
        continue;
      char what[160];
      size_t nw = describe(e, a, what, sizeof(what));
      enum policy_by by = i ? POLICY_BY_MEMORY : POLICY_BY_RULE;
      if (e->naive && k == 0)
        result(e, POLICY_ASK, by, pr, NULL, "ask rule %s: %s", pr->text, what);
      else if (e->naive)
        result(e, POLICY_ASK, by, pr, NULL, "might match %s rule %s: %s",
               k == 1 ? "deny" : "ask", pr->text, what);
      else if (k == 0)
        result_n(
            e, POLICY_ASK, by, pr,
            (const struct piece[]){
                {"ask rule ", 9}, {pr->text, pr->ntext}, {": ", 2}, {what, nw}},
            4);
      else
        result_n(
            e, POLICY_ASK, by, pr,
            (const struct piece[]){{"might match ", 12},
                                   {k == 1 ? "deny" : "ask", k == 1 ? 4 : 3},
                                   {" rule ", 6},
                                   {pr->text, pr->ntext},
                                   {": ", 2},
                                   {what, nw}},
            6);
      return true;
    }
  }
  return false;
}

static bool step_opaque(struct eval *e) {
  if (!e->r->opaque)
    return false;
  result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "", "%s", e->r->reason);
  return true;
}

// True when the circuit breaker fires for this request (nothing written).
static bool breaker_fires(const struct eval *e) {
  struct policy_result scratch;
  struct eval probe = *e;
  probe.out = &scratch;
  return step_breaker(&probe);
}

// tier_of the request's atom i, asked once per decision.
static int atom_tier(const struct eval *e, size_t i) {
  const struct request_atom *a = &e->r->atoms[i];
  struct memo_atom *m = e->memo && i < MEMO_ATOMS ? &e->memo->a[i] : NULL;
  if (m && (m->done & MEMO_TIER))
    return m->tier;
  int t = tier_of(e->p, a, e->naive);
  if (m) {
    m->done |= MEMO_TIER;
    m->tier = t;
  }
  return t;
}

// An edit of a protected path: tier 1 always asks, tier 2 unless yolo.
static bool step_protected(struct eval *e) {
  if (e->memo && !(e->classes & 1u << REQUEST_EDIT))
    return false;
  for (int tier = 1; tier <= 2; tier++) {
    if (tier == 2 && e->p->yolo)
      break;
    for (size_t i = 0; i < e->r->natoms; i++) {
      const struct request_atom *a = &e->r->atoms[i];
      if (a->cls != REQUEST_EDIT || atom_tier(e, i) != tier)
        continue;
      // Only protected because it holds a protected place (rm -rf ~): when
      // the circuit breaker asks anyway, its reason says more, and plan
      // mode still denies first.
      if (a->where == REQUEST_KNOWN &&
          !tier_of_pattern(e->p, a->lex, e->naive) &&
          !tier_of_pattern(e->p, a->res, e->naive) && breaker_fires(e))
        continue;
      char buf[PATH_LEN_MAX + 1];
      if (a->where != REQUEST_KNOWN)
        result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "",
               "writes to %s, which could be a protected file",
               a->text && *a->text ? a->text : "a path that cannot be known");
      else
        result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "",
               "protected path %s%s%s", shown(e->p, a->lex, buf, sizeof(buf)),
               tier_of_pattern(e->p, a->lex, e->naive) ||
                       tier_of_pattern(e->p, a->res, e->naive)
                   ? ""
                   : " (it holds protected files)",
               tier == 1 ? " (permission settings: always asked)"
                         : " (asked unless yolo)");
      return true;
    }
  }
  return false;
}

static bool step_switch_mode(struct eval *e) {
  if (e->memo && !(e->classes & 1u << REQUEST_KIND))
    return false;
  bool mode_change = false;
  for (size_t i = 0; i < e->r->natoms; i++)
    mode_change =
        mode_change || (e->r->atoms[i].cls == REQUEST_KIND &&
                        strcmp(e->r->atoms[i].kind, "switch_mode") == 0);
  if (!mode_change)
    return false;
  const struct policy *ps[2] = {e->p, e->mem};
  for (int i = 0; !e->naive && i < 2; i++)
    if (ps[i] && ps[i]->allow_switch_mode)
      return false;
  for (int i = 0; e->naive && i < 2; i++)
    for (size_t j = 0; ps[i] && j < ps[i]->nrules; j++) {
      const struct prule *pr = &ps[i]->rules[j];
      if (pr->list == POLICY_LIST_ALLOW && pr->r.cls == RULES_KIND &&
          strcmp(pr->r.spec, "switch_mode") == 0)
        return false;
    }
  result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "",
         "mode change (switch_mode): always asked unless "
         "Kind(switch_mode) is allowed");
  return true;
}

// Plan mode denies edits and commands that are not read-only, before any
// allow rule is looked at.
static bool step_plan(struct eval *e) {
  if (e->p->mode != POLICY_MODE_PLAN)
    return false;
  for (size_t i = 0; i < e->r->natoms; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    if (a->guessed)
      continue;
    if (a->cls == REQUEST_EDIT || (a->cls == REQUEST_BASH && !a->read_only)) {
      char what[160];
      describe(e, a, what, sizeof(what));
      result(e, POLICY_DENY, POLICY_BY_MODE, NULL, "plan", "plan mode: %s (%s)",
             a->cls == REQUEST_EDIT ? "no edits" : "not a read-only command",
             what);
      return true;
    }
  }
  // What is only guessed to write (an MCP or unknown tool's path or
  // command: it may only read) is asked.
  for (size_t i = 0; i < e->r->natoms; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    if (a->guessed &&
        (a->cls == REQUEST_EDIT || (a->cls == REQUEST_BASH && !a->read_only))) {
      char what[160];
      const char *tool = e->r->tool;
      for (size_t j = 0; !tool && j < e->r->natoms; j++)
        tool = e->r->atoms[j].cls == REQUEST_MCP ? e->r->atoms[j].name : NULL;
      describe(e, a, what, sizeof(what));
      result(e, POLICY_ASK, POLICY_BY_MODE, NULL, "plan",
             "plan mode: %s may write (%s)", tool ? tool : "the tool", what);
      return true;
    }
  }
  return false;
}

// rm, rmdir, mv, chmod -R, chown -R, chgrp -R, find -delete/-exec whose
// target is /, $HOME, the project root or a parent of them: asked in every
// mode, whatever the rules say.
static bool step_breaker(struct eval *e) {
  if (e->memo && !e->targets)
    return false;
  for (size_t i = 0; i < e->r->natoms; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    for (size_t j = 0; j < a->ntargets; j++) {
      const struct request_target *t = &a->targets[j];
      const char *what = NULL;
      char desc[128];
      if (t->where == REQUEST_UNKNOWN)
        what = "a target that cannot be known";
      else if (t->where == REQUEST_GLOB)
        what = glob_critical(e->p, t->lex, desc, sizeof(desc));
      else if (!(what = critical(e->p, t->lex)))
        what = critical(e->p, t->res);
      if (!what)
        continue;
      char cmd[120], buf[PATH_LEN_MAX + 1];
      command_text(a->cmd, cmd, sizeof(cmd));
      result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "",
             "circuit breaker: %s: %s (%s)", cmd, what,
             t->where == REQUEST_KNOWN ? shown(e->p, t->lex, buf, sizeof(buf))
                                       : t->text);
      return true;
    }
  }
  return false;
}

// How the atoms of a request are covered.
struct tally {
  size_t need, by_mode, by_mem;
  bool all;
  const struct prule *first;
  size_t used;     // strlen(rules)
  char rules[256]; // the covering rules, ", "-separated
};

static void count(const struct eval *e, struct tally *t) {
  t->need = t->by_mode = t->by_mem = t->used = 0;
  t->all = true;
  t->first = NULL;
  t->rules[0] = '\0';
  for (size_t i = 0; i < e->r->natoms && t->all; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    if (!needs_cover(a))
      continue;
    t->need++;
    bool mem = false;
    const struct prule *pr = covered(e, a, &mem);
    if (!pr) {
      t->all = mode_covers(e, a);
      t->by_mode += t->all;
      continue;
    }
    t->by_mem += mem;
    t->first = t->first ? t->first : pr;
    size_t used = t->used, len;
    if ((used ? !strstr(t->rules, pr->text) : pr->text[0] != '\0') &&
        used + (len = pr->ntext) + 3 < sizeof(t->rules)) {
      if (used) {
        memcpy(t->rules + used, ", ", 2);
        used += 2;
      }
      memcpy(t->rules + used, pr->text, len + 1);
      t->used = used + len;
    }
  }
}

// True when the request holds a tool nobody knows (kind other, not MCP)
// that no rule names: not understood, so at most ask — yolo included.
static bool unknown_tool(struct eval *e) {
  for (size_t i = 0; i < e->r->natoms; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    bool mem;
    if (a->cls == REQUEST_KIND && strcmp(a->kind, "other") == 0 &&
        !covered(e, a, &mem))
      return true;
  }
  return false;
}

// Every atom covered by allow rules (or the session's memory); else yolo
// (for what is understood); else every atom covered by rules or by the
// mode (reads inside the project; edits inside it in acceptEdits).
static bool step_allow(struct eval *e) {
  struct tally t;
  count(e, &t);
  bool all = t.all && t.need;
  if (all && !t.by_mode && !e->naive) {
    result_n(e, POLICY_ALLOW, t.by_mem ? POLICY_BY_MEMORY : POLICY_BY_RULE,
             t.first,
             (const struct piece[]){{"allowed by ", 11}, {t.rules, t.used}}, 2);
  } else if (all && !t.by_mode) {
    result(e, POLICY_ALLOW, t.by_mem ? POLICY_BY_MEMORY : POLICY_BY_RULE,
           t.first, NULL, "allowed by %s", t.rules);
  } else if (e->p->yolo && !unknown_tool(e)) {
    result(e, POLICY_ALLOW, POLICY_BY_YOLO, NULL, "yolo", "yolo");
  } else if (all && !t.first) {
    result(e, POLICY_ALLOW, POLICY_BY_MODE, NULL, policy_mode_name(e->p->mode),
           e->p->mode == POLICY_MODE_ACCEPT_EDITS
               ? "%s inside the project (acceptEdits)"
               : "%s inside the project",
           e->p->mode == POLICY_MODE_ACCEPT_EDITS ? "edits and reads"
                                                  : "reads");
  } else if (all) {
    result(e, POLICY_ALLOW, POLICY_BY_MODE, t.first, NULL,
           "allowed by %s, the rest inside the project (%s)", t.rules,
           policy_mode_name(e->p->mode));
  } else {
    return false;
  }
  if (t.first && all) {
    // t.rules is shorter than the rule's field (count)
    memcpy(e->out->rule, t.rules, t.used + 1);
  }
  return true;
}

static void step_default(struct eval *e) {
  for (size_t i = 0; i < e->r->natoms; i++) {
    const struct request_atom *a = &e->r->atoms[i];
    bool mem;
    if (!needs_cover(a) || covered(e, a, &mem) || mode_covers(e, a))
      continue;
    char what[160];
    describe(e, a, what, sizeof(what));
    if (a->cls == REQUEST_KIND && strcmp(a->kind, "other") == 0)
      result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "", "unknown tool: %s",
             a->name ? a->name : "?");
    else
      result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "", "no rule matched: %s",
             what);
    return;
  }
  result(e, POLICY_ASK, POLICY_BY_DEFAULT, NULL, "", "no rule matched");
}

// ---------------------------------------------------------------------------
// Matching

// Keeps a slot found for k (none: nothing to keep); false when full.
static inline bool memo_found(struct memo *m, struct memo_keys *k,
                              const struct ruleidx_slot *s) {
  if (!s)
    return true;
  if (m->nslot == MEMO_SLOTS)
    return false;
  m->slot[m->nslot++] = s;
  k->n++;
  return true;
}

// dst = src[0..n) case folded (A-Z only, as fold_c), eight bytes at a
// time; true when it holds a space.
static inline bool fold_word(char *dst, const char *src, size_t n) {
  const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
  uint64_t sp = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, l;
    memcpy(&x, src + i, 8);
    l = x & ~high; // each byte's low 7 bits: no carry between bytes below
    // 'A' <= l <= 'Z' and the byte below 0x80: set its 0x20 bit.
    x |= ((l + 0x3f * ones) & ~(l + 0x25 * ones) & ~x & high) >> 2;
    uint64_t y = x ^ (0x20 * ones); // a space is a zero byte
    sp |= (y - ones) & ~y & high;
    memcpy(dst + i, &x, 8);
  }
  bool space = false;
  for (; i < n; i++) {
    unsigned char c = (unsigned char)src[i];
    c = (unsigned char)(c | (unsigned char)((unsigned char)(c - 'A') < 26)
                                << 5);
    space |= c == ' ';
    dst[i] = (char)c;
  }
  return space || sp != 0;
}

#define MEMO_LENS 32 // words measured ahead (memo_keys_build)

// Looks up the keys bash_text looks up for a command named name (its first
// word or the basename of it, nn bytes): the text name, then a space and
// each other word, case folded, and each key it can meet: the text up to a
// space, or the whole text. A key ('b', see index_rule) is a rule's
// literal start up to a space, so its first segment (up to its first
// space) is the rule's first word ('f'), whose slot holds the longest
// such key (aux): a text whose first segment is no rule's first word meets
// no key, and one that is is built up to that key's length and the byte
// after it. One pass: each byte folded, stored and hashed. lens: the
// lengths of the first words (MEMO_LENS). The slots found are kept in k;
// false when the memo is full.
static bool memo_text(struct memo *m, const struct ruleidx *keys,
                      const struct shell_atom *cmd, const size_t *lens,
                      const char *name, size_t nn, struct memo_keys *k) {
  char t[BASH_KEY_MAX + 1];
  k->b = m->nslot;
  k->n = 0;
  // The first segment (a longer one is no key's: keys are shorter).
  size_t n0 = nn < BASH_KEY_MAX ? nn : BASH_KEY_MAX;
  bool space = fold_word(t, name, n0);
  const char *sp = space ? memchr(t, ' ', n0) : NULL;
  size_t f = sp ? (size_t)(sp - t) : n0;
  // Its hashes as an 'f' key and as the start of a 'b' one, in one pass.
  uint64_t hf = ruleidx_hash_start('f'), h = ruleidx_hash_start('b');
  for (size_t i = 0; i < f; i++) {
    hf = ruleidx_hash_byte(hf, t[i]);
    h = ruleidx_hash_byte(h, t[i]);
  }
  const struct ruleidx_slot *first =
      f ? ruleidx_find_hashed(keys, hf, 'f', t, f) : NULL;
  if (!first || first->aux >= BASH_KEY_MAX)
    return true; // no key
  size_t max = first->aux, cap = max + 1, n = 0;
  if (!space) // the name is the first segment (f <= max < cap): hashed
    n = f;
  else
    h = ruleidx_hash_start('b');
  for (size_t i = n ? 1 : 0; i < cmd->nwords && n < cap; i++) {
    if (i) { // the space between two words
      if (n >= 1 && !memo_found(m, k, ruleidx_find_hashed(keys, h, 'b', t, n)))
        return false;
      t[n++] = ' ';
      h = ruleidx_hash_byte(h, ' ');
    }
    size_t wn = !i ? nn : i < MEMO_LENS ? lens[i] : strlen(cmd->words[i].text);
    wn = wn < cap - n ? wn : cap - n;
    if (i) // the name is folded already
      space = fold_word(t + n, cmd->words[i].text, wn);
    if (!space) {
      h = ruleidx_hash_more(h, t + n, wn);
      n += wn;
      continue;
    }
    for (size_t e = n + wn; n < e; n++) { // a key also ends at a space
      if (t[n] == ' ' && n >= 1 && n <= max &&
          !memo_found(m, k, ruleidx_find_hashed(keys, h, 'b', t, n)))
        return false;
      h = ruleidx_hash_byte(h, t[n]);
    }
  }
  return !(n < cap && n >= 1) ||
         memo_found(m, k, ruleidx_find_hashed(keys, h, 'b', t, n));
}

// Looks up the keys path_cands looks up for path (tag 'r' or 'e'), up to
// max bytes (the longest key of the three lists); the slots found are kept
// in k. False when the memo is full.
static bool memo_path(struct memo *m, const struct policy *p, int c,
                      const char *path, struct memo_keys *k) {
  char buf[PATH_LEN_MAX + 1], tag = c ? 'e' : 'r';
  size_t n = 0, max = p->path_key_all[c];
  const struct ruleidx *keys = p->keys;
  uint64_t h = ruleidx_hash_start(tag);
  const struct root_keys *rk = &p->root_keys[c];
  const char *s = path;
  if (rk->set && strncmp(path, p->root, p->root_len) == 0 &&
      (path[p->root_len] == '/' || !path[p->root_len])) {
    // Inside the root: its segments are the path's first ones (both are
    // normalised), their keys found when the policy was compiled.
    for (uint32_t i = 0; i < rk->nslot; i++)
      if (!memo_found(m, k, rk->slot[i]))
        return false;
    if (rk->stopped)
      return true;
    memcpy(buf, rk->text, rk->n);
    n = rk->n;
    h = rk->h;
    s += p->root_len;
  } else if (!memo_found(m, k, ruleidx_find_hashed(keys, h, tag, "", 0))) {
    return false;
  }
  while (path_key_next(&s, buf, &n, max, &h))
    if (!memo_found(m, k, ruleidx_find_hashed(keys, h, tag, buf, n)))
      return false;
  return true;
}

// The keys memo_path meets on the root's own segments ('r': c 0, 'e': 1),
// the same walk.
static void root_keys_build(struct policy *p, int c) {
  struct root_keys *rk = &p->root_keys[c];
  char buf[PATH_LEN_MAX + 1], tag = c ? 'e' : 'r';
  size_t n = 0, max = p->path_key_all[c];
  if (!p->keys || !p->root || p->root[0] != '/' || !p->root[1])
    return;
  p->root_len = strlen(p->root);
  uint64_t h = ruleidx_hash_start(tag);
  const struct ruleidx_slot *f = ruleidx_find_hashed(p->keys, h, tag, "", 0);
  size_t cap = sizeof(rk->slot) / sizeof(*rk->slot);
  if (f)
    rk->slot[rk->nslot++] = f;
  const char *s = p->root;
  while (path_key_next(&s, buf, &n, max, &h))
    if ((f = ruleidx_find_hashed(p->keys, h, tag, buf, n))) {
      if (rk->nslot == cap)
        return; // not set: memo_path walks the root too
      rk->slot[rk->nslot++] = f;
    }
  // Stopped by a segment too long for any key, not by the end of the root.
  rk->stopped = s[strspn(s, "/")] != '\0';
  rk->text = xstrndup(buf, n);
  rk->n = n;
  rk->h = h;
  rk->set = true;
}

// Looks up the keys of a Bash atom (memo_text) or of a known path
// (memo_path) once for the three lists of the rules. False for another
// atom (gather looks its keys up), a Bash atom that bash_text reads
// otherwise (a dynamic word), or a memo full.
static bool memo_keys_build(struct memo *m, const struct policy *p,
                            const struct request_atom *a,
                            struct memo_atom *ma) {
  if (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) {
    if (a->where != REQUEST_KNOWN)
      return false;
    int c = a->cls == REQUEST_EDIT;
    ma->k[0] = (struct memo_keys){m->nslot, 0};
    return memo_path(m, p, c, a->lex, &ma->k[0]) &&
           (!a->res || strcmp(a->res, a->lex) == 0 || // the same keys
            memo_path(m, p, c, a->res, &ma->k[0]));
  }
  const struct shell_atom *cmd = a->cls == REQUEST_BASH ? a->cmd : NULL;
  if (!cmd || cmd->kind != SHELL_CMD || cmd->nwords == 0 ||
      cmd->words[0].dynamic || p->bash_key_all >= BASH_KEY_MAX)
    return false;
  size_t tn = 0, lens[MEMO_LENS];
  for (size_t i = 0; i < cmd->nwords; i++) {
    if (i && cmd->words[i].dynamic)
      return false; // bash_text's other ways (first word, prefix)
    size_t n = strlen(cmd->words[i].text);
    if (i < MEMO_LENS)
      lens[i] = n;
    tn += (i ? 1 : 0) + n;
  }
  const char *name = cmd->words[0].text, *base = strrchr(name, '/');
  base = base ? base + 1 : NULL;
  ma->tn = tn;
  ma->base = base && *base;
  ma->boff = ma->base ? (uint32_t)(base - name) : 0;
  return memo_text(m, p->keys, cmd, lens, name, lens[0], &ma->k[0]) &&
         (!ma->base || memo_text(m, p->keys, cmd, lens, base,
                                 lens[0] - (size_t)(base - name), &ma->k[1]));
}

// The place in p's keep of a Bash atom of a cached analysis (its serial
// and index into memo->serial, memo->atom), or NULL for another atom.
static inline struct kept *kept_of(const struct policy *p,
                                   const struct request *r,
                                   const struct request_atom *a,
                                   struct memo *m) {
  if (!p->keep || !atom_of(r, a, &m->serial, &m->atom))
    return NULL;
  // Serials are handed out in order: the atoms of the last KEEP_ENTRIES /
  // 8 analyses (up to 8 atoms each) have places of their own.
  if (!*p->keep)
    *p->keep = xcalloc(1, sizeof(**p->keep));
  return &(*p->keep)->e[(m->serial * 8 + m->atom) & (KEEP_ENTRIES - 1)];
}

// A Bash atom of the request's cached analysis (or of its second one): the
// analysis's serial and the atom's index in it; false for another atom.
static bool atom_of(const struct request *r, const struct request_atom *a,
                    unsigned long long *serial, uint32_t *atom) {
  if (a->cls != REQUEST_BASH || !a->cmd)
    return false;
  const struct shell_result *sh[2] = {r->sh, r->alt_sh};
  uintptr_t at = (uintptr_t)a->cmd;
  for (int i = 0; i < 2; i++) {
    uintptr_t b = sh[i] ? (uintptr_t)sh[i]->atoms : 0;
    if (!b || at < b || at >= b + sh[i]->natoms * sizeof(*sh[i]->atoms))
      continue;
    *serial = shcache_serial(sh[i]);
    *atom = (uint32_t)((at - b) / sizeof(*sh[i]->atoms));
    return true;
  }
  return false;
}

static inline bool bash_one_list(const struct policy *p, enum policy_list list,
                                 const struct memo *m,
                                 const struct memo_atom *ma,
                                 const struct request_atom *a, bool for_allow,
                                 struct ruleidx_list *out);

// memo_keys's work, the first time a decision asks about atom j: the
// keys kept by an earlier decision (kept_of), else looked up and kept.
__attribute__((noinline)) static void memo_keys_slow(const struct eval *e,
                                                     const struct policy *p,
                                                     size_t j,
                                                     struct memo_atom *ma) {
  struct memo *m = e->memo;
  const struct request_atom *a = &e->r->atoms[j];
  uint32_t start = m->nslot;
  ma->done |= MEMO_KEYS;
  struct kept *kp = kept_of(p, e->r, a, m);
  if (kp && kp->serial == m->serial && kp->atom == m->atom &&
      kp->kind == (a->kind != NULL) && start + KEEP_SLOTS <= MEMO_SLOTS) {
    // Found by an earlier decision: the same slots and lists.
    ma->kp = kp;
    ma->serial = m->serial;
    ma->atom = m->atom;
    ma->keys = kp->ok;
    ma->base = kp->base;
    ma->tn = kp->tn;
    ma->one_ok = kp->one_ok;
    ma->boff = kp->boff;
    memcpy(ma->one, kp->one, sizeof(ma->one));
    if (kp->one_ok == 7) { // the slots are only read by gather
      ma->k[0] = ma->k[1] = (struct memo_keys){start, 0};
      return;
    }
    ma->k[0] = (struct memo_keys){start, kp->n[0]};
    ma->k[1] = (struct memo_keys){start + kp->n[0], kp->n[1]};
    for (uint32_t i = 0; i < (uint32_t)kp->n[0] + kp->n[1]; i++)
      m->slot[m->nslot++] = kp->slot[i];
    return;
  }
  ma->base = false;
  ma->tn = 0;
  ma->boff = 0;
  ma->one_ok = 0;
  ma->kp = NULL;
  ma->keys = memo_keys_build(m, p, a, ma);
  if (!ma->keys)
    m->nslot = start; // what did not fit is looked up by gather
  for (int l = 0; ma->keys && a->cls == REQUEST_BASH && l < 3; l++)
    if (bash_one_list(p, (enum policy_list)l, m, ma, a, l == POLICY_LIST_ALLOW,
                      &ma->one[l]))
      ma->one_ok |= (uint8_t)(1u << l);
  uint32_t n0 = ma->keys ? ma->k[0].n : 0;
  uint32_t n1 = ma->keys && ma->base ? ma->k[1].n : 0;
  if (kp && n0 + n1 <= KEEP_SLOTS) {
    *kp = (struct kept){.serial = m->serial,
                        .atom = m->atom,
                        .ok = ma->keys,
                        .base = ma->base,
                        .n = {(uint8_t)n0, (uint8_t)n1},
                        .one_ok = ma->one_ok,
                        .kind = a->kind != NULL,
                        .boff = ma->boff,
                        .tn = ma->tn};
    ma->kp = kp;
    ma->serial = m->serial;
    ma->atom = m->atom;
    memcpy(kp->one, ma->one, sizeof(kp->one));
    for (uint32_t i = 0; i < n0; i++)
      kp->slot[i] = m->slot[ma->k[0].b + i];
    for (uint32_t i = 0; i < n1; i++)
      kp->slot[n0 + i] = m->slot[ma->k[1].b + i];
  }
}

// The memo of atom j's keys for p's index, built at its first use (or
// found in the keep); NULL when there is none (no memo, another policy,
// memo_keys_build false).
static inline const struct memo_atom *
memo_keys(const struct eval *e, const struct policy *p, size_t j) {
  if (!e->memo || p != e->p || j >= MEMO_ATOMS || !p->keys)
    return NULL;
  struct memo_atom *ma = &e->memo->a[j];
  if (!(ma->done & MEMO_KEYS))
    memo_keys_slow(e, p, j, ma);
  return ma->keys ? ma : NULL;
}

// The candidates of a Bash atom whose keys are in the memo, when they are
// one list or none (the usual case: the rules that share the command's
// first words): what gather would find, without merging. False when
// gather must (several lists, a short list scanned, Kind rules, a text too
// long for the prefilter).
static inline bool bash_one_list(const struct policy *p, enum policy_list list,
                                 const struct memo *m,
                                 const struct memo_atom *ma,
                                 const struct request_atom *a, bool for_allow,
                                 struct ruleidx_list *out) {
  const struct lindex *x = &p->idx[list];
  if (p->nof_list[list] <= SCAN_MAX || (a->kind && x->nkind) ||
      (!for_allow && p->bash_npat_max + 1 > PREFILTER_WORK_MAX / (ma->tn + 1)))
    return false;
  const struct ruleidx_vec *cls = &x->tool_cls[REQUEST_BASH];
  struct ruleidx_list one = {cls->v, cls->n};
  bool have = one.n > 0;
  uint32_t end = ma->k[0].b + ma->k[0].n;
  if (!for_allow && ma->base)
    end = ma->k[1].b + ma->k[1].n; // k[1] follows k[0]
  for (uint32_t i = ma->k[0].b; i < end; i++) {
    const struct ruleidx_vec *v = &m->slot[i]->rules[list];
    if (!v->n)
      continue;
    if (have)
      return false;
    one = (struct ruleidx_list){v->v, v->n};
    have = true;
  }
  if (x->bash_rest.n) {
    if (have)
      return false;
    one = (struct ruleidx_list){x->bash_rest.v, x->bash_rest.n};
  }
  *out = one;
  return true;
}

// hit (for_allow: allows) of a candidate of a Bash atom's one list
// (HOW_KEYED), with what the memo knows of the atom: a literal pattern
// goes to the matcher with the text's length and the name's basename.
static inline enum shell_match hit_kept(const struct prule *pr,
                                        const struct request_atom *a,
                                        const struct memo_atom *ma,
                                        bool for_allow) {
  if (pr->r.cls == RULES_BASH && pr->lrun) {
    const struct shell_atom *cmd = a->cmd;
    return shell_match_literal(pr->mpat, pr->npat, cmd, for_allow, ma->tn,
                               ma->base ? cmd->words[0].text + ma->boff : NULL);
  }
  if (for_allow)
    return allows(pr, a, NULL, ma->tn, HOW_KEYED) ? SHELL_YES : SHELL_NO;
  return hit(pr, a, ma->tn, HOW_KEYED);
}

// The place of a Bash atom in the policy's keep, while it is the atom's
// (a later atom of the same decision may have taken it), else NULL.
static inline struct kept *kept_mine(const struct memo_atom *ma) {
  struct kept *kp = ma->kp;
  return kp && kp->serial == ma->serial && kp->atom == ma->atom ? kp : NULL;
}

// Atom j's place in p's keep as fold_kept found it, while it is still the
// atom's (an atom of this decision may have taken it since), else NULL.
static inline const struct kept *kq_of(const struct eval *e,
                                       const struct policy *p, size_t j) {
  const struct memo *m = e->memo;
  if (!m || !m->kq || p != e->p || j >= MEMO_ATOMS)
    return NULL;
  const struct memo_atom *ma = &m->a[j];
  const struct kept *kq = ma->kq;
  return kq && kq->serial == ma->kq_serial && kq->atom == ma->kq_atom ? kq
                                                                      : NULL;
}

// The answers y and m of a walk of the whole list: kept with the atom's
// keys (kp, when not NULL), and given out as the walk up to limit would
// have found them (a maybe comes before a yes, so m < y when both are).
static void list_answer(struct kept *kp, enum policy_list list, uint32_t y,
                        uint32_t m, uint32_t limit, uint32_t *yes,
                        uint32_t *maybe) {
  if (kp) {
    kp->yes[list] = y;
    kp->maybe[list] = m;
    kp->answered |= (uint8_t)(1u << list);
  }
  *yes = y < limit ? y : UINT32_MAX;
  *maybe = m < limit ? m : UINT32_MAX;
}

// The first candidate of list (the index) below limit giving SHELL_YES on
// a, and the first giving SHELL_MAYBE (UINT32_MAX: none), in one walk:
// deny and ask lists are asked both (step_deny, then step_ask). A Bash
// atom's answers for its one list are kept with its keys (struct kept).

static void atom_hits(const struct eval *e, const struct policy *p,
                      enum policy_list list, const struct request_atom *a,
                      size_t j, uint32_t limit, uint32_t *yes,
                      uint32_t *maybe) {
  const struct kept *kq = kq_of(e, p, j);
  if (kq && (kq->answered >> list & 1)) { // fold_kept found it
    list_answer(NULL, list, kq->yes[list], kq->maybe[list], limit, yes, maybe);
    return;
  }
  const struct memo_atom *ma = memo_keys(e, p, j);
  *yes = *maybe = UINT32_MAX;
  struct kept *kp = ma ? kept_mine(ma) : NULL;
  if (kp && (kp->answered >> list & 1)) { // an earlier decision's walk
    list_answer(NULL, list, kp->yes[list], kp->maybe[list], limit, yes, maybe);
    return;
  }
  if (ma && (ma->one_ok >> list & 1)) {
    uint32_t y = UINT32_MAX, m = UINT32_MAX;
    // The whole list (the limit applied after), when the answer is kept.
    struct ruleidx_list one = ma->one[list];
    uint32_t lim = kp ? UINT32_MAX : limit;
    for (size_t i = 0; i < one.n && one.v[i] < lim; i++) {
      uint32_t k = one.v[i];
      enum shell_match h = hit_kept(&p->rules[k], a, ma, false);
      if (h == SHELL_YES) {
        y = k;
        break; // a later maybe is not asked for (list_hits)
      }
      if (h == SHELL_MAYBE && m == UINT32_MAX)
        m = k;
    }
    list_answer(kp, list, y, m, limit, yes, maybe);
    return;
  }
  struct cands c;
  size_t tn = ma && a->cls == REQUEST_BASH ? ma->tn : SIZE_MAX;
  gather(p, list, a, false, e->memo, ma, &c);
  // A kept atom's answer is kept too (the whole list, the limit after).
  uint32_t lim = kp ? UINT32_MAX : limit, y = UINT32_MAX, m = UINT32_MAX;
  for (uint32_t k = cands_next(p, list, &c); k < lim;
       k = cands_next(p, list, &c)) {
    enum shell_match h = hit(&p->rules[k], a, tn, c.all ? HOW_SCAN : HOW_KEYED);
    if (h == SHELL_YES) {
      y = k;
      break;
    }
    if (h == SHELL_MAYBE && m == UINT32_MAX)
      m = k;
  }
  list_answer(kp, list, y, m, limit, yes, maybe);
}

// The first rule of list (in order) that gives want on some atom, every
// rule against every atom (the reference).
static const struct prule *first_hit_naive(const struct policy *p,
                                           enum policy_list list,
                                           const struct request *r,
                                           enum shell_match want,
                                           const struct request_atom **atom) {
  for (size_t i = 0; i < p->nof_list[list]; i++) {
    const struct prule *pr = &p->rules[p->of_list[list][i]];
    for (size_t j = 0; j < r->natoms; j++) {
      if (hit(pr, &r->atoms[j], SIZE_MAX, HOW_REF) == want) {
        *atom = &r->atoms[j];
        return pr;
      }
    }
  }
  return NULL;
}

// For list: the lowest rule over the atoms giving SHELL_YES (bests[0]) and
// SHELL_MAYBE (bests[1]), UINT32_MAX for none, and the first atom giving
// it (at): for each atom the first of its candidates (the index) that does.
// Once a rule gives SHELL_YES, the maybes are not asked for (bests[1] is
// then incomplete): a deny rule that matches decides before any "might
// match", and so does an ask rule (step_deny, step_ask); and the later
// atoms are only asked about the rules before it.
static void list_hits(const struct eval *e, const struct policy *p,
                      enum policy_list list, const struct request *r,
                      uint32_t bests[2], size_t at[2]) {
  bests[0] = bests[1] = UINT32_MAX;
  at[0] = at[1] = 0;
  for (size_t j = 0; j < r->natoms; j++) {
    uint32_t yes, maybe;
    atom_hits(e, p, list, &r->atoms[j], j, bests[0], &yes, &maybe);
    if (yes < bests[0]) {
      bests[0] = yes;
      at[0] = j;
    }
    if (maybe < bests[1]) {
      bests[1] = maybe;
      at[1] = j;
    }
  }
}

// The answers kept with the request's Bash atoms (struct kept): what
// list_hits finds for a list whose answers every atom has kept, and what
// covered finds for an atom whose allow answer is kept, are functions of
// those answers, folded here into the memo without the keys' slots
// (memo_keys_slow) or the walks; the steps then read the memo as usual.
// A list not answered by every atom is walked by list_hits, which still
// takes a kept atom's answer from a[j].kq (atom_hits). Nothing is written
// for a session's memory with rules or more atoms than the memo holds.
static void fold_kept(struct eval *e) {
  const struct policy *p = e->p;
  const struct request *r = e->r;
  struct memo *m = e->memo;
  if ((e->mem && e->mem->nrules) || !p->keep || !*p->keep || !p->keys ||
      r->natoms > MEMO_ATOMS || !r->natoms)
    return;
  const struct kept *kps[MEMO_ATOMS];
  unsigned all = 7; // the lists every atom has answered (1 << list)
  for (size_t j = 0; j < r->natoms; j++) {
    const struct request_atom *a = &r->atoms[j];
    const struct kept *kp = kept_of(p, r, a, m);
    if (kp && (kp->serial != m->serial || kp->atom != m->atom ||
               kp->kind != (a->kind != NULL)))
      kp = NULL;
    m->a[j].kq = kps[j] = kp;
    m->a[j].kq_serial = m->serial;
    m->a[j].kq_atom = m->atom;
    all &= kp ? kp->answered : 0;
  }
  m->kq = true;
  // list_hits: the later atoms are asked about the rules before the first
  // yes only.
  for (int li = 0; li < 2; li++) { // the memo's order: deny, ask
    int l = li ? POLICY_LIST_ASK : POLICY_LIST_DENY;
    if (!(all >> l & 1))
      continue;
    uint32_t best[2] = {UINT32_MAX, UINT32_MAX};
    size_t at[2] = {0, 0};
    for (size_t j = 0; j < r->natoms; j++) {
      uint32_t lim = best[0], y = kps[j]->yes[l], mb = kps[j]->maybe[l];
      if (y < lim) {
        best[0] = y;
        at[0] = j;
      }
      if (mb < lim && mb < best[1]) {
        best[1] = mb;
        at[1] = j;
      }
    }
    memcpy(m->best[0][li], best, sizeof(best));
    memcpy(m->best_atom[0][li], at, sizeof(at));
    m->hits_done[0][li] = true;
    if (e->mem) { // a memory of no rules
      m->best[1][li][0] = m->best[1][li][1] = UINT32_MAX;
      m->hits_done[1][li] = true;
    }
  }
  for (size_t j = 0; j < r->natoms; j++) {
    if (!kps[j] || !(kps[j]->answered >> POLICY_LIST_ALLOW & 1))
      continue;
    uint32_t y = kps[j]->yes[POLICY_LIST_ALLOW];
    m->a[j].done = MEMO_COV;
    m->a[j].cov = y == UINT32_MAX ? NULL : &p->rules[y];
    m->a[j].cov_mem = false;
  }
}

// The first rule of list (in order) that gives want on some atom (for one
// rule, the first atom). list_hits answers for both wants: kept in the
// memo, deny and ask are walked once per decision.
static inline const struct prule *
first_hit(const struct eval *e, const struct policy *p, enum policy_list list,
          const struct request *r, enum shell_match want,
          const struct request_atom **atom) {
  if (!p)
    return NULL;
  if (e->naive)
    return first_hit_naive(p, list, r, want, atom);
  int pi = p == e->p ? 0 : 1, li = list == POLICY_LIST_ASK;
  int wi = want == SHELL_YES ? 0 : 1;
  uint32_t own[2], *bests = own;
  size_t own_at[2], *at = own_at;
  if (e->memo) {
    bests = e->memo->best[pi][li];
    at = e->memo->best_atom[pi][li];
    if (!e->memo->hits_done[pi][li])
      list_hits(e, p, list, r, bests, at);
    e->memo->hits_done[pi][li] = true;
  } else {
    list_hits(e, p, list, r, bests, at);
  }
  if (bests[wi] == UINT32_MAX)
    return NULL;
  *atom = &r->atoms[at[wi]];
  return &p->rules[bests[wi]];
}

// A deny or ask rule against an atom: the wide semantics (every atom,
// either path of a symlink, case folded, unknown paths "maybe").
static enum shell_match hit(const struct prule *pr,
                            const struct request_atom *a, size_t tn,
                            enum how how) {
  const char *spec = pr->r.spec;
  switch (pr->r.cls) {
  case RULES_BASH:
    if (a->cls != REQUEST_BASH || ((how != HOW_KEYED || !pr->lrun) &&
                                   bash_cannot_match(pr, a->cmd, false, tn)))
      return SHELL_NO;
    if (how != HOW_REF && pr->lrun)
      return shell_pattern_match_lit(pr->mpat, pr->npat, a->cmd, false, tn);
    return shell_pattern_match_n(pr->mpat, pr->npat, a->cmd, false, tn);
  case RULES_READ:
  case RULES_EDIT:
    if (a->cls != (pr->r.cls == RULES_READ ? REQUEST_READ : REQUEST_EDIT))
      return SHELL_NO;
    if (!spec)
      return SHELL_YES;
    if (a->where != REQUEST_KNOWN)
      return SHELL_MAYBE;
    return path_match(pr->pat, a->lex, true, true) ||
                   path_match(pr->pat, a->res, true, true)
               ? SHELL_YES
               : SHELL_NO;
  case RULES_WEBFETCH:
    return a->cls == REQUEST_FETCH && (!spec || rules_host_match(spec, a->name))
               ? SHELL_YES
               : SHELL_NO;
  case RULES_WEBSEARCH:
    return a->cls == REQUEST_SEARCH ? SHELL_YES : SHELL_NO;
  case RULES_TOOL:
    return names_match(spec, a, false) ? SHELL_YES : SHELL_NO;
  case RULES_KIND:
    return strcmp(spec, a->kind) == 0 ? SHELL_YES : SHELL_NO;
  }
  return SHELL_NO;
}

// True when pr's literal start cannot match the command, so that
// shell_pattern_match would answer SHELL_NO: a policy has many rules and
// most are about other commands, and this test costs a few compares where
// the matcher builds the atom's text and runs its glob.
//
// It follows shell_match.c. The text is the command name, then each word
// after one space; the name is compared case-folded for deny and ask. The
// pattern's bytes before its first `*` can only meet the text's first bytes
// one to one: a literal byte that differs makes the answer SHELL_NO, one
// that meets a dynamic word "maybe" (then nothing is decided here), and
// the end of the text only matches the space of a trailing ` *`. Deny and
// ask also try the name's basename, folded. Long patterns and texts are
// left to the matcher, which answers "maybe" when a glob is too much work.
static bool lit_rejects(const struct prule *pr, const struct shell_atom *a,
                        const char *name, bool fold) {
  size_t k = 0;
  for (size_t i = 0; i < a->nwords; i++) {
    if (i > 0 && a->words[i].dynamic)
      return false;
    if (i > 0 && k < pr->nlit && pr->lit[k++] != ' ')
      return true;
    for (const char *c = i == 0 ? name : a->words[i].text; *c; c++) {
      if (k == pr->nlit)
        return false;
      char p = pr->lit[k++], t = *c;
      if (fold && i == 0 && p >= 'A' && p <= 'Z')
        p = (char)(p + 'a' - 'A');
      if (fold && i == 0 && t >= 'A' && t <= 'Z')
        t = (char)(t + 'a' - 'A');
      if (p != t)
        return true;
    }
  }
  return k < pr->nlit && !(pr->lit[k] == ' ' && k + 2 == pr->npat);
}

static bool bash_cannot_match(const struct prule *pr,
                              const struct shell_atom *cmd, bool for_allow,
                              size_t tn) {
  if (!pr->lit || pr->nlit == 0 || !cmd || cmd->kind != SHELL_CMD ||
      cmd->nwords == 0 || cmd->words[0].dynamic)
    return false;
  const char *name = cmd->words[0].text;
  if (!lit_rejects(pr, cmd, name, !for_allow))
    return false;
  if (for_allow)
    return true;        // "maybe" (too much work) does not allow either
  if (tn == SIZE_MAX) { // not measured by the caller (memo_keys)
    tn = strlen(name);
    for (size_t i = 1; i < cmd->nwords; i++)
      tn += 1 + strlen(cmd->words[i].text);
  }
  if (pr->npat + 1 > PREFILTER_WORK_MAX / (tn + 1))
    return false;
  const char *base = strrchr(name, '/');
  return !(base && base[1]) || lit_rejects(pr, cmd, base + 1, true);
}

// An allow rule against an atom (path: the lexical or the resolved path of
// a Read/Edit atom, or NULL): the narrow semantics.
static bool allows(const struct prule *pr, const struct request_atom *a,
                   const char *path, size_t tn, enum how how) {
  const char *spec = pr->r.spec;
  if (pr->list != POLICY_LIST_ALLOW)
    return false;
  if (a->cls == REQUEST_BASH && a->cmd->never_allow)
    return false; // find -exec/-delete: no allow rule covers it
  switch (pr->r.cls) {
  case RULES_BASH:
    if (a->cls != REQUEST_BASH || ((how != HOW_KEYED || !pr->lrun) &&
                                   bash_cannot_match(pr, a->cmd, true, tn)))
      return false;
    return (how != HOW_REF && pr->lrun
                ? shell_pattern_match_lit(pr->mpat, pr->npat, a->cmd, true, tn)
                : shell_pattern_match_n(pr->mpat, pr->npat, a->cmd, true,
                                        tn)) == SHELL_YES;
  case RULES_READ:
  case RULES_EDIT:
    if (a->cls != (pr->r.cls == RULES_READ ? REQUEST_READ : REQUEST_EDIT))
      return false;
    return !spec || (path && path_match(pr->pat, path, false, false));
  case RULES_WEBFETCH:
    return a->cls == REQUEST_FETCH &&
           (!spec || rules_host_match(spec, a->name));
  case RULES_WEBSEARCH:
    return a->cls == REQUEST_SEARCH;
  case RULES_TOOL:
    return !pr->r.unanchored && names_match(spec, a, true);
  case RULES_KIND:
    if (strcmp(spec, a->kind) != 0)
      return false;
    return a->cls != REQUEST_BASH ||
           shell_pattern_match("*", a->cmd, true) == SHELL_YES;
  }
  return false;
}

// The first allow rule (the rules', then the memory's) that allows a with
// each of paths[0..np) (a Read/Edit atom's paths, else one NULL), or NULL
// when one has none; the rule returned is the first path's. Each policy's
// candidates are gathered once for all the paths.
static const struct prule *find_allow(const struct eval *e,
                                      const struct request_atom *a,
                                      const char *const *paths, size_t np,
                                      bool *memory) {
  const struct policy *ps[2] = {e->p, e->mem};
  size_t j = e->memo ? (size_t)(a - e->r->atoms) : MEMO_ATOMS;
  struct kept *kpa = NULL; // the rules' answer is kept there
  if (a->cls == REQUEST_BASH && !e->naive) {
    // Its one list of candidates, when it has one (bash_one_list).
    const struct memo_atom *ma = memo_keys(e, e->p, j);
    struct kept *kp = ma ? kept_mine(ma) : NULL;
    if (kp && !(kp->answered >> POLICY_LIST_ALLOW & 1) &&
        !(ma->one_ok >> POLICY_LIST_ALLOW & 1))
      kpa = kp; // the candidates gathered below
    else if (ma && (kp || (ma->one_ok >> POLICY_LIST_ALLOW & 1))) {
      uint32_t y = UINT32_MAX;
      if (kp && (kp->answered >> POLICY_LIST_ALLOW & 1)) {
        y = kp->yes[POLICY_LIST_ALLOW];
      } else {
        struct ruleidx_list one = ma->one[POLICY_LIST_ALLOW];
        for (size_t i = 0; i < one.n && y == UINT32_MAX; i++)
          if (hit_kept(&e->p->rules[one.v[i]], a, ma, true) == SHELL_YES)
            y = one.v[i];
        if (kp) {
          kp->yes[POLICY_LIST_ALLOW] = y;
          kp->answered |= 1u << POLICY_LIST_ALLOW;
        }
      }
      if (y != UINT32_MAX)
        return &e->p->rules[y];
      if (!e->mem)
        return NULL;
      ps[0] = NULL; // the memory's rules, as below
    }
  }
  struct cands c[2];
  bool have[2] = {false, false};
  const struct prule *first = NULL;
  for (size_t n = 0; n < np; n++) {
    const struct prule *found = NULL;
    for (int i = 0; i < 2 && !found; i++) {
      if (!ps[i])
        continue;
      const struct memo_atom *ma = e->naive ? NULL : memo_keys(e, ps[i], j);
      if (have[i])
        cands_rewind(&c[i]);
      else if (e->naive)
        c[i] = (struct cands){.all = true};
      else
        gather(ps[i], POLICY_LIST_ALLOW, a, true, e->memo, ma, &c[i]);
      have[i] = true;
      size_t tn = ma && a->cls == REQUEST_BASH ? ma->tn : SIZE_MAX;
      for (uint32_t k = cands_next(ps[i], POLICY_LIST_ALLOW, &c[i]);
           k != UINT32_MAX && !found;
           k = cands_next(ps[i], POLICY_LIST_ALLOW, &c[i])) {
        const struct prule *pr = &ps[i]->rules[k];
        enum how how = e->naive ? HOW_REF : c[i].all ? HOW_SCAN : HOW_KEYED;
        if (allows(pr, a, paths[n], tn, how)) {
          *memory = *memory || i == 1;
          found = pr;
        }
      }
      if (i == 0 && kpa) { // a Bash atom: one path (NULL)
        kpa->yes[POLICY_LIST_ALLOW] =
            found ? (uint32_t)(found - e->p->rules) : UINT32_MAX;
        kpa->answered |= 1u << POLICY_LIST_ALLOW;
      }
    }
    if (!found)
      return NULL;
    first = n ? first : found;
  }
  return first;
}

// The allow rule that covers an atom, or NULL. A known path needs both its
// lexical and its resolved form allowed (a symlink and its target).
static const struct prule *covered(const struct eval *e,
                                   const struct request_atom *a, bool *memory) {
  size_t j = e->memo ? (size_t)(a - e->r->atoms) : MEMO_ATOMS;
  struct memo_atom *m = j < MEMO_ATOMS ? &e->memo->a[j] : NULL;
  if (m && (m->done & MEMO_COV)) {
    *memory = m->cov_mem;
    return m->cov;
  }
  const struct prule *pr = cover(e, a, memory);
  if (m) {
    m->done |= MEMO_COV;
    m->cov = pr;
    m->cov_mem = *memory;
  }
  return pr;
}

static const struct prule *cover(const struct eval *e,
                                 const struct request_atom *a, bool *memory) {
  *memory = false;
  bool path = a->cls == REQUEST_READ || a->cls == REQUEST_EDIT;
  const char *paths[2] = {NULL, NULL};
  if (!path || a->where != REQUEST_KNOWN)
    return find_allow(e, a, paths, 1, memory);
  paths[0] = a->lex;
  paths[1] = a->res;
  return find_allow(e, a, paths, 2, memory);
}

// Reads inside the project, in every mode; edits inside it in acceptEdits.
static bool mode_covers(const struct eval *e, const struct request_atom *a) {
  const struct policy *p = e->p;
  bool read = a->cls == REQUEST_READ;
  bool edit = a->cls == REQUEST_EDIT && p->mode == POLICY_MODE_ACCEPT_EDITS;
  return (read || edit) && a->where == REQUEST_KNOWN && p->root &&
         path_within(a->lex, p->root) && path_within(a->res, p->root);
}

// Atoms an allow must cover: not the deny-only ones (the full command
// carries the allow), nor a harmless bare assignment.
static bool needs_cover(const struct request_atom *a) {
  if (a->deny_only)
    return false;
  return !(a->cls == REQUEST_BASH && !a->cmd->nwords && !a->cmd->unsafe_assign);
}

// A tool-name glob against an atom's names. A Gemini MCP name
// mcp_<server>_<tool> splits at any `_`: deny needs one split to match,
// allow every split.
static bool names_match(const char *glob, const struct request_atom *a,
                        bool for_allow) {
  if (strcmp(glob, "*") == 0)
    return !for_allow;
  if (a->cls == REQUEST_MCP && a->gemini_name) {
    const char *rest = a->name + 4;
    bool any = false, all = true;
    for (const char *u = strchr(rest, '_'); u; u = strchr(u + 1, '_')) {
      char name[RULES_TEXT_MAX + 8];
      snprintf(name, sizeof(name), "mcp__%.*s__%s", (int)(u - rest), rest,
               u + 1);
      bool m = u > rest && u[1] && rules_glob(glob, name, !for_allow);
      any = any || m;
      all = all && m;
    }
    return for_allow ? any && all : any;
  }
  if (a->cls == REQUEST_MCP || a->cls == REQUEST_KIND)
    return a->name && rules_glob(glob, a->name, !for_allow);
  static const enum rules_class cls_of[] = {[REQUEST_BASH] = RULES_BASH,
                                            [REQUEST_READ] = RULES_READ,
                                            [REQUEST_EDIT] = RULES_EDIT,
                                            [REQUEST_FETCH] = RULES_WEBFETCH,
                                            [REQUEST_SEARCH] = RULES_WEBSEARCH};
  const char *names[16];
  size_t n = rules_class_names(cls_of[a->cls], names, 16);
  for (size_t i = 0; i < n; i++)
    if (rules_glob(glob, names[i], !for_allow))
      return true;
  return false;
}

// The protection tier of an Edit atom (0: none). An unknown path could be
// anything (tier 1); a glob is probed with its wildcard segments replaced
// by a plain name, since a shell glob never matches a leading dot.
static int tier_of(const struct policy *p, const struct request_atom *a,
                   bool naive) {
  if (a->where == REQUEST_UNKNOWN)
    return 1;
  if (a->where == REQUEST_KNOWN) {
    int t1 = tier_of_path(p, a->lex, naive);
    int t2 =
        !naive && a->res && (a->res == a->lex || strcmp(a->res, a->lex) == 0)
            ? t1 // the same path
            : tier_of_path(p, a->res, naive);
    return t1 && t2 ? (t1 < t2 ? t1 : t2) : t1 ? t1 : t2;
  }
  char probe[PATH_LEN_MAX + 1] = "";
  size_t n = 0;
  for (const char *s = a->lex; *s;) {
    while (*s == '/')
      s++;
    size_t len = strcspn(s, "/");
    bool glob = strcspn(s, "*?[") < len;
    if (glob && s[0] == '.')
      return 1;
    if (len && n + len + 2 < sizeof(probe))
      n += (size_t)snprintf(probe + n, sizeof(probe) - n, "/%.*s",
                            glob ? 1 : (int)len, glob ? "x" : s);
    s += len;
  }
  return tier_of_path(p, n ? probe : "/", naive);
}

static int tier_of_path(const struct policy *p, const char *path, bool naive) {
  int best = tier_of_pattern(p, path, naive);
  // A directory holding a protected place, up to the filesystem root:
  // path_within(loc, path), path's length measured once.
  size_t n = path ? strlen(path) : 0;
  while (n > 1 && path[n - 1] == '/')
    n--;
  for (size_t i = 0; path && i < p->nlocs; i++) {
    const char *loc = p->locs[i].pat;
    if (best && p->locs[i].tier >= best)
      continue;
    if (naive ? path_within(loc, path)
        : n == 1 && path[0] == '/'
            ? loc[0] == '/'
            : strncmp(loc, path, n) == 0 && (loc[n] == '\0' || loc[n] == '/'))
      best = p->locs[i].tier;
  }
  return best;
}

// The tier of path from the protected patterns alone (not what it holds).
// The `<root>/**/<name>...` ones are matched as path_match would: the
// path's first segments are the root's, then one segment is name (the last
// one, unless dir), case folded.
static int tier_of_pattern(const struct policy *p, const char *path,
                           bool naive) {
  enum { SEGS = 128 };
  struct pseg {
    const char *s;
    size_t n;
  } seg[SEGS];
  size_t nseg = 0, k = 0;
  bool fast = !naive && path && path[0] == '/' && p->root_segs >= 0;
  for (const char *s = path; fast && *s;) {
    while (*s == '/')
      s++;
    size_t len = strcspn(s, "/");
    if (!len)
      break;
    if (nseg == SEGS)
      fast = false; // deep: path_match for all
    else
      seg[nseg++] = (struct pseg){s, len};
    s += len;
  }
  // Below the root: its segments, folded (path_match folds the pattern's
  // literal root too).
  bool under = fast && nseg >= (size_t)p->root_segs;
  for (const char *r = p->root; under && r && *r && k < nseg;) {
    while (*r == '/')
      r++;
    size_t len = strcspn(r, "/");
    if (!len)
      break;
    under = seg[k].n == len && strncasecmp(seg[k].s, r, len) == 0;
    k++;
    r += len;
  }
  // A path with single slashes and no trailing one: a literal pattern of
  // the same kind (plain) matches it when their bytes are the same, case
  // folded, up to the pattern's end, then the path ends (or goes on, for
  // a tree): literal_match's answer without splitting segments.
  bool plain = !naive && path && path[0] == '/' && path[1] &&
               !strstr(path, "//") && path[strlen(path) - 1] != '/';
  // Such a path inside home (case folded): else no pattern in_home
  // matches it (its bytes up to home's `/` are home's).
  int in_home = -1; // not known yet
  int best = 0;
  for (size_t i = 0; path && i < p->nprot; i++) {
    const struct protect *pr = &p->prot[i];
    if (best && pr->tier >= best)
      continue;
    bool m = false;
    if (plain && pr->plain) {
      if (pr->in_home && in_home < 0) {
        size_t hl = strlen(p->home);
        in_home = strncasecmp(path, p->home, hl) == 0 && path[hl] == '/';
      }
      m = (!pr->in_home || in_home) &&
          strncasecmp(path, pr->pat, pr->nlit) == 0 &&
          (path[pr->nlit] == '\0' || (pr->tree && path[pr->nlit] == '/'));
    } else if (fast && pr->name) {
      size_t nl = pr->nname;
      for (size_t j = pr->dir ? k
                      : nseg  ? nseg - 1
                              : 0;
           under && j < nseg && j >= k && !m; j++)
        m = seg[j].n == nl && strncasecmp(seg[j].s, pr->name, nl) == 0;
    } else if (!naive && pr->nlit) {
      m = literal_match(pr->pat, pr->nlit, pr->tree, path);
    } else {
      m = path_match(pr->pat, path, true, true);
    }
    if (m)
      best = pr->tier;
  }
  return best;
}

// What a target path is, when the breaker must fire for it.
static const char *critical(const struct policy *p, const char *path) {
  if (!path)
    return NULL;
  if (strcmp(path, "/") == 0)
    return "the filesystem root";
  if (p->root && strcmp(path, p->root) == 0)
    return "the project root";
  if (p->home && strcmp(path, p->home) == 0)
    return "the home directory";
  if (path_within(p->root, path))
    return "a parent of the project root";
  if (path_within(p->home, path))
    return "a parent of the home directory";
  return NULL;
}

// A glob segment that matches (nearly) every name: nothing in it but glob
// characters, bracket expressions, braces and dots (`*`, `?*`, `.[!.]*`,
// `[a-z]*`, `*.*`, `{.,}*`).
static bool segment_all(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '[') {
      const char *e = memchr(s + i + 1, ']', n - i - 1);
      if (!e)
        return false;
      i = (size_t)(e - s);
    } else if (!strchr("*?.{},", s[i])) {
      return false;
    }
  }
  return true;
}

// A glob below a critical directory whose every segment after its literal
// part matches nearly everything (~/?*, ~/*/*, ./[!.]*): it empties that
// directory. Returns the description (into buf), or NULL.
static const char *glob_everything(const struct policy *p, const char *glob,
                                   char *buf, size_t n) {
  size_t lit = 0, i = 0;
  bool globbed = false, all = true;
  while (glob[i]) {
    while (glob[i] == '/')
      i++;
    size_t e = i + strcspn(glob + i, "/");
    if (e == i)
      break;
    bool g = memchr(glob + i, '*', e - i) || memchr(glob + i, '?', e - i) ||
             memchr(glob + i, '[', e - i);
    if (!globbed && !g)
      lit = e;
    globbed = globbed || g;
    if (globbed && !segment_all(glob + i, e - i))
      all = false;
    i = e;
  }
  if (!globbed || !all || lit >= PATH_LEN_MAX)
    return NULL;
  char dir[PATH_LEN_MAX + 1];
  snprintf(dir, sizeof(dir), "%.*s", lit ? (int)lit : 1, lit ? glob : "/");
  const char *what = critical(p, dir);
  if (!what)
    return NULL;
  snprintf(buf, n, "everything in %s", what);
  return buf;
}

// A glob target is critical when it can match a critical directory, or
// when its last segment is a bare `*` (or `.*`) in one: everything in it.
// Returns the description (into buf), or NULL.
static const char *glob_critical(const struct policy *p, const char *glob,
                                 char *buf, size_t n) {
  const char *dirs[3] = {p->root, p->home, "/"};
  const char *last = strrchr(glob, '/');
  bool all = last && (strcmp(last, "/*") == 0 || strcmp(last, "/.*") == 0 ||
                      strcmp(last, "/**") == 0);
  char parent[PATH_LEN_MAX + 1];
  snprintf(parent, sizeof(parent), "%.*s",
           last && last != glob ? (int)(last - glob) : 1, glob);
  for (int i = 0; i < 3; i++) {
    // Every ancestor of the root and of home (and / itself) is critical.
    char c[PATH_LEN_MAX + 1];
    snprintf(c, sizeof(c), "%s", dirs[i] ? dirs[i] : "/");
    for (;;) {
      bool self = path_match(glob, c, false, false);
      if (self || (all && path_match(parent, c, false, false))) {
        snprintf(buf, n, "%s%s", self ? "" : "everything in ", critical(p, c));
        return buf;
      }
      char *s = strrchr(c, '/');
      if (!s || c[1] == '\0')
        break;
      s[s == c ? 1 : 0] = '\0';
    }
  }
  return glob_everything(p, glob, buf, n);
}

// ---------------------------------------------------------------------------
// Results and texts

// Appends str to buf (n bytes) at at, as snprintf would write it there:
// what fits before the last byte, then a NUL. Returns the new end. The
// texts of a decision are built with it: snprintf costs more than the rest.
static size_t cat(char *buf, size_t n, size_t at, const char *str) {
  if (at + 1 >= n) {
    if (at < n)
      buf[at] = '\0';
    return at;
  }
  size_t len = strlen(str);
  if (len > n - 1 - at)
    len = n - 1 - at;
  memcpy(buf + at, str, len);
  buf[at + len] = '\0';
  return at + len;
}

// vsnprintf(buf, n, fmt, ap) for a format whose only conversions are %s
// (every reason's), without the printf machinery; any other conversion
// goes to vsnprintf.
static size_t format_s(char *buf, size_t n, const char *fmt, va_list ap) {
  va_list all;
  va_copy(all, ap);
  size_t at = 0;
  for (const char *f = fmt; *f;) {
    const char *pc = strchr(f, '%');
    if (pc && pc[1] != 's') {
      // Not ours: the whole reason as printf writes it (no reason of this
      // file takes this way).
      vsnprintf(buf, n, fmt, all);
      va_end(all);
      return strlen(buf);
    }
    size_t lit = pc ? (size_t)(pc - f) : strlen(f);
    if (at + 1 < n) {
      size_t k = lit < n - 1 - at ? lit : n - 1 - at;
      memcpy(buf + at, f, k);
    }
    at += lit;
    if (!pc)
      break;
    const char *arg = va_arg(ap, const char *);
    if (!arg)
      arg = "(null)"; // as glibc's printf shows it
    size_t len = strlen(arg);
    if (at + 1 < n) {
      size_t k = len < n - 1 - at ? len : n - 1 - at;
      memcpy(buf + at, arg, k);
    }
    at += len;
    f = pc + 2;
  }
  at = at < n ? at : n - 1;
  buf[at] = '\0';
  va_end(all);
  return at;
}

static void result(struct eval *e, enum policy_decision d, enum policy_by by,
                   const struct prule *pr, const char *source, const char *fmt,
                   ...) {
  struct policy_result *out = e->out;
  out->decision = d;
  out->by = by;
  va_list ap;
  va_start(ap, fmt);
  size_t len; // strlen(out->reason)
  if (e->naive) {
    vsnprintf(out->reason, sizeof(out->reason), fmt, ap);
    len = strlen(out->reason);
  } else {
    len = format_s(out->reason, sizeof(out->reason), fmt, ap);
  }
  va_end(ap);
  cat(out->rule, sizeof(out->rule), 0, pr ? pr->text : "");
  cat(out->source, sizeof(out->source), 0,
      source ? source
      : pr   ? pr->source
             : "");
  if (pr && !e->naive && pr->owner == e->p) {
    // The same text, built when the rule was compiled.
    cat(out->reason, sizeof(out->reason), len, pr->suffix);
  } else if (pr) {
    char buf[PATH_LEN_MAX + 1];
    size_t n = len, sz = sizeof(out->reason);
    n = cat(out->reason, sz, n, " (");
    n = cat(out->reason, sz, n, shown(e->p, pr->source, buf, sizeof(buf)));
    cat(out->reason, sz, n, ")");
  }
}

static void result_n(struct eval *e, enum policy_decision d, enum policy_by by,
                     const struct prule *pr, const struct piece *pc, size_t k) {
  struct policy_result *out = e->out;
  out->decision = d;
  out->by = by;
  // What result's format_s writes: the pieces, cut at the reason's size.
  size_t at = 0, cap = sizeof(out->reason) - 1;
  for (size_t i = 0; i < k && at < cap; i++) {
    size_t n = pc[i].n < cap - at ? pc[i].n : cap - at;
    memcpy(out->reason + at, pc[i].s, n);
    at += n;
  }
  out->reason[at] = '\0';
  size_t n =
      pr->ntext < sizeof(out->rule) - 1 ? pr->ntext : sizeof(out->rule) - 1;
  memcpy(out->rule, pr->text, n);
  out->rule[n] = '\0';
  n = pr->nsource < sizeof(out->source) - 1 ? pr->nsource
                                            : sizeof(out->source) - 1;
  memcpy(out->source, pr->source, n);
  out->source[n] = '\0';
  if (pr->owner == e->p) {
    n = pr->nsuffix < cap - at ? pr->nsuffix : cap - at;
    memcpy(out->reason + at, pr->suffix, n);
    out->reason[at + n] = '\0';
  } else {
    char buf[PATH_LEN_MAX + 1];
    size_t sz = sizeof(out->reason);
    at = cat(out->reason, sz, at, " (");
    at = cat(out->reason, sz, at, shown(e->p, pr->source, buf, sizeof(buf)));
    cat(out->reason, sz, at, ")");
  }
}

// A short text for an atom, for reasons; returns strlen(buf).
static size_t describe(const struct eval *e, const struct request_atom *a,
                       char *buf, size_t n) {
  switch (a->cls) {
  case REQUEST_BASH:
    return quoted_command(a->cmd, e->p ? e->p->home : NULL, buf, n);
  case REQUEST_READ:
  case REQUEST_EDIT: {
    char path[PATH_LEN_MAX + 1];
    const char *where = a->where == REQUEST_KNOWN
                            ? shown(e->p, a->lex, path, sizeof(path))
                        : a->text && *a->text ? a->text
                                              : "(path unknown)";
    return cat(buf, n,
               cat(buf, n, 0, a->cls == REQUEST_READ ? "read " : "edit "),
               where);
  }
  case REQUEST_FETCH:
    return cat(buf, n, cat(buf, n, 0, "fetch "), a->name ? a->name : "(null)");
  case REQUEST_SEARCH:
    return cat(buf, n, 0, "web search");
  case REQUEST_MCP:
    return cat(buf, n, 0, a->name ? a->name : "(null)");
  case REQUEST_KIND:
    return cat(buf, n, cat(buf, n, cat(buf, n, 0, a->kind), a->name ? " " : ""),
               a->name ? a->name : "");
  }
  buf[0] = '\0';
  return 0;
}

// A path as a person reads it: relative to the project root, ~/ for home.
static const char *shown(const struct policy *p, const char *path, char *buf,
                         size_t n) {
  const char *dirs[2] = {p->root, p->home};
  for (int i = 0; path && i < 2; i++) {
    size_t len = dirs[i] ? strlen(dirs[i]) : 0;
    if (len > 1 && path_within(path, dirs[i])) {
      if (!i && path[len] == '/')
        cat(buf, n, 0, path + len + 1);
      else
        cat(buf, n, cat(buf, n, 0, i ? "~" : "."), path + len);
      return buf;
    }
  }
  cat(buf, n, 0, path ? path : "?");
  return buf;
}

static void command_text(const struct shell_atom *a, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < a->nwords && used + 4 < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? " " : "",
                             a->words[i].text);
  if (used >= n - 1 && n > 4)
    memcpy(buf + n - 4, "...", 4);
  if (!a->nwords)
    snprintf(buf, n, "(assignment)");
}

// ---------------------------------------------------------------------------
// Narrow rules

// Programs whose every use `X *` would allow is too much to suggest: they
// run other commands or code, remove, move or reach other machines. Their
// broader rule keeps the subcommand (`git status *`), or there is none.
// In strcmp order (looked up with bsearch).
static const char *const wide_programs[] = {
    "awk",     "bash",    "builtin", "cargo",   "chgrp",   "chmod", "chown",
    "command", "cp",      "curl",    "dash",    "dd",      "doas",  "docker",
    "env",     "eval",    "exec",    "find",    "fish",    "git",   "go",
    "ksh",     "kubectl", "ln",      "lua",     "make",    "mv",    "nice",
    "node",    "nohup",   "npm",     "npx",     "perl",    "php",   "pip",
    "pip3",    "pnpm",    "python",  "python3", "rm",      "rmdir", "rsync",
    "ruby",    "scp",     "sed",     "sh",      "sqlite3", "ssh",   "su",
    "sudo",    "time",    "timeout", "wget",    "xargs",   "yarn",  "zsh",
};

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// A word that reads as a subcommand (`status`, `run`, `test:unit`): no
// option, path, assignment or pattern.
static bool subcommand_word(const struct shell_word *w) {
  if (w->dynamic || !isalnum((unsigned char)w->text[0]))
    return false;
  for (const char *c = w->text; *c; c++)
    if (!isalnum((unsigned char)*c) && !strchr("_:-", *c))
      return false;
  return true;
}

// path (absolute) as a rule path: `/rel` inside the project, `~/rel` in
// home, else `//abs`; escaped. suffix (e.g. "/**") is appended unescaped.
// False when it does not fit.
static bool rule_path(const char *path, const struct anchors *an,
                      const char *suffix, char *buf, size_t n) {
  const char *lead = "/", *rest = path;
  size_t rl = an->root ? strlen(an->root) : 0;
  size_t hl = an->home ? strlen(an->home) : 0;
  if (rl && strncmp(path, an->root, rl) == 0 && path[rl] == '/')
    lead = "", rest = path + rl; // "/rel"
  else if (hl && strncmp(path, an->home, hl) == 0 && path[hl] == '/')
    lead = "~", rest = path + hl; // "~" + "/rel"
  else
    lead = "/"; // "/" + "/abs"
  char *esc = path_escape(rest);
  int w = snprintf(buf, n, "%s%s%s", lead, esc, suffix);
  free(esc);
  return w >= 0 && (size_t)w < n;
}

// The exact rule for one atom (path: for Read/Edit, the path to name), or
// NULL when no rule can name exactly this. broad: the broader alternative
// instead (`Bash(git status *)`, `Edit(/src/**)`), NULL when it has none.
static char *narrow_rule(const struct request_atom *a, const char *path,
                         const struct anchors *an, bool broad) {
  char buf[RULES_TEXT_MAX + 1];
  size_t used = 0;
  switch (a->cls) {
  case REQUEST_BASH: {
    if (a->cmd->never_allow || !a->cmd->nwords)
      return NULL;
    size_t nw = a->cmd->nwords;
    if (broad) {
      const struct shell_word *w = a->cmd->words;
      const char *prog = w[0].text;
      const char *slash = strrchr(prog, '/');
      const char *base = slash ? slash + 1 : prog;
      bool wide = bsearch(&base, wide_programs,
                          sizeof(wide_programs) / sizeof(*wide_programs),
                          sizeof(*wide_programs), str_cmp) != NULL;
      nw = nw > 1 && subcommand_word(&w[1]) ? 2 : 1;
      if (nw == 1 && wide) // `X *` of a program that can do anything
        return NULL;
    }
    // `Bash(` and the words, a space between each, then `)` or ` *)`:
    // none when a word is dynamic (it has no exact text) or has a `*` (it
    // would widen the rule), or when the text would not leave 3 bytes
    // for a rule of RULES_TEXT_MAX bytes (as a snprintf into buf would).
    used = 5 + nw - 1;
    for (size_t i = 0; i < nw; i++) {
      const struct shell_word *w = &a->cmd->words[i];
      size_t len = strlen(w->text);
      if (w->dynamic || memchr(w->text, '*', len))
        return NULL;
      used += len;
    }
    if (used + 4 > sizeof(buf))
      return NULL;
    char *out = xmalloc(used + (broad ? 4 : 2));
    memcpy(out, "Bash(", 5);
    size_t at = 5;
    for (size_t i = 0; i < nw; i++) {
      size_t len = strlen(a->cmd->words[i].text);
      if (i)
        out[at++] = ' ';
      memcpy(out + at, a->cmd->words[i].text, len);
      at += len;
    }
    memcpy(out + at, broad ? " *)" : ")", broad ? 4 : 2);
    return out;
  }
  case REQUEST_READ:
  case REQUEST_EDIT: {
    if (a->where != REQUEST_KNOWN)
      return NULL;
    char spec[RULES_TEXT_MAX - 8];
    bool fits = true;
    if (broad) {
      // The file's directory and below, for a directory inside the project
      // (not the whole project; never one elsewhere: /etc/**, ~/.ssh/**).
      char *dir = path_normalize(path, "..", NULL);
      size_t rl = an->root ? strlen(an->root) : 0;
      bool top =
          !dir || !rl || strncmp(dir, an->root, rl) != 0 || dir[rl] != '/';
      if (!top)
        fits = rule_path(dir, an, "/**", spec, sizeof(spec));
      free(dir);
      if (top)
        return NULL;
    } else {
      fits = rule_path(path, an, "", spec, sizeof(spec));
    }
    if (!fits)
      return NULL;
    size_t at =
        cat(buf, sizeof(buf), 0, a->cls == REQUEST_READ ? "Read(" : "Edit(");
    cat(buf, sizeof(buf), cat(buf, sizeof(buf), at, spec), ")");
    return xstrdup(buf);
  }
  case REQUEST_FETCH:
    if (broad)
      return NULL;
    snprintf(buf, sizeof(buf), "WebFetch(domain:%s)", a->name);
    return xstrdup(buf);
  case REQUEST_SEARCH:
    return broad ? NULL : xstrdup("WebSearch");
  case REQUEST_MCP:
    return broad ? NULL : xstrdup(a->name);
  case REQUEST_KIND:
    if (broad || strcmp(a->kind, "other") == 0)
      return NULL; // Kind(other) would allow every unknown tool
    snprintf(buf, sizeof(buf), "Kind(%s)", a->kind);
    return xstrdup(buf);
  }
  return NULL;
}

// True when the rules, compiled as allow rules, cover every atom that
// needs it (so a rule that would not parse or not match is never offered).
static bool narrow_covers(char **rules, size_t n, const struct request *r,
                          const struct anchors *an) {
  struct policy_rule_text *t = xcalloc(n, sizeof(*t));
  // An anchor only when a rule names a path from it (compiling one costs
  // more than the rest).
  bool from_root = false, from_home = false;
  for (size_t i = 0; i < n; i++) {
    t[i] = (struct policy_rule_text){rules[i], POLICY_LIST_ALLOW, "session"};
    const char *o = strchr(rules[i], '(');
    from_root = from_root || (o && o[1] == '/' && o[2] != '/');
    from_home = from_home || (o && o[1] == '~');
  }
  struct policy_input in = {.rules = t,
                            .nrules = n,
                            .root = from_root ? an->root : NULL,
                            .home = from_home ? an->home : NULL};
  size_t nw = 0;
  struct policy *p = policy_new(&in, NULL, &nw);
  struct eval e = {.p = p, .r = r};
  bool ok = nw == 0 && p->nrules == n;
  for (size_t i = 0; ok && i < r->natoms; i++) {
    bool mem;
    ok = !needs_cover(&r->atoms[i]) || covered(&e, &r->atoms[i], &mem);
  }
  policy_free(p);
  free(t);
  return ok;
}

#define QUICK_ATOMS 256 // more atoms: narrow_covers

// The pattern rules_parse gives a rule `Bash(spec)` whose spec has no
// parenthesis and no space at either end (so nothing to trim and nothing
// to refuse), as bash_spec writes it (`*` alone: every command, `x:*`:
// `x *`), copied to buf (RULES_TEXT_MAX + 1 bytes); NULL for any other
// text (rules_parse reads it). test_suggest compares both on every rule.
static bool trim_space(char c) { // rules.c's is_space: what it trims
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static const char *plain_bash(const char *text, char *buf) {
  if (strncmp(text, "Bash(", 5) != 0)
    return NULL;
  const char *spec = text + 5;
  size_t n = strcspn(spec, "()");
  if (spec[n] != ')' || spec[n + 1] || !n || 5 + n + 1 > RULES_TEXT_MAX ||
      trim_space(spec[0]) || trim_space(spec[n - 1]))
    return NULL;
  if (n == 1 && spec[0] == '*')
    return "*";
  memcpy(buf, spec, n);
  buf[n] = '\0';
  if (n >= 2 && buf[n - 2] == ':' && buf[n - 1] == '*')
    buf[n - 2] = ' ';
  return buf;
}

// What narrow_covers answers, without compiling a policy: each rule is
// parsed and built as compile_rule builds what allows() reads (one at a
// time, on the stack), refused where compile_rule would warn or skip it,
// and matched with allows() against the paths of the atoms still
// uncovered (every rule of a list this short is a candidate of the index,
// so the answer is the same). The protected tiers play no part in it.
// Requests with more atoms take narrow_covers.
static bool quick_covers(char **rules, size_t n, const struct request *r,
                         const struct anchors *an) {
  if (r->natoms > QUICK_ATOMS)
    return narrow_covers(rules, n, r, an);
  // Which of each atom's paths still need a rule: bit 0 its lexical path
  // (or none), bit 1 its resolved one; bit 2: it has both.
  uint8_t need[QUICK_ATOMS];
  size_t left = 0;
  for (size_t i = 0; i < r->natoms; i++) {
    const struct request_atom *a = &r->atoms[i];
    bool two = (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) &&
               a->where == REQUEST_KNOWN;
    need[i] = !needs_cover(a) ? 0 : two ? 7 : 1;
    left += !need[i] ? 0 : two ? 2 : 1;
  }
  // The anchors policy_new would have normalised: only when a rule names
  // a path from one (as narrow_covers passes them).
  bool from_root = false, from_home = false;
  for (size_t i = 0; i < n; i++) {
    const char *o = strchr(rules[i], '(');
    from_root = from_root || (o && o[1] == '/' && o[2] != '/');
    from_home = from_home || (o && o[1] == '~');
  }
  char root[PATH_LEN_MAX + 1], home[PATH_LEN_MAX + 1];
  bool has_root = from_root && an->root &&
                  path_normalize_into(NULL, an->root, NULL, root) > 0;
  bool has_home = from_home && an->home &&
                  path_normalize_into(NULL, an->home, NULL, home) > 0;
  char lit[RULES_TEXT_MAX + 1], mpat[RULES_TEXT_MAX + 1];
  char bpat[RULES_TEXT_MAX + 1];
  bool ok = true;
  for (size_t i = 0; ok && i < n; i++) {
    char err[512];
    struct prule pr = {.list = POLICY_LIST_ALLOW};
    // What rules_parse reads in a plain `Bash(spec)` (every Bash rule a
    // prompt suggests), without it; any other text is parsed.
    const char *bash = plain_bash(rules[i], bpat);
    if (bash) {
      pr.r.cls = RULES_BASH;
    } else if (rules_parse(rules[i], &pr.r, err, sizeof(err)) != 0) {
      return false;
    }
    ok = !pr.r.note && !pr.r.unanchored && !pr.r.no_allow;
    if (ok && (pr.r.cls == RULES_READ || pr.r.cls == RULES_EDIT) && pr.r.spec)
      ok = (pr.pat = path_rule_pattern(pr.r.spec, has_root ? root : NULL,
                                       has_home ? home : NULL, true, err,
                                       sizeof(err))) != NULL;
    if (ok && pr.r.cls == RULES_BASH) {
      const char *pat = bash ? bash : pr.r.spec ? pr.r.spec : "*";
      pr.npat = strlen(pat);
      pr.nlit = strcspn(pat, "*");
      ok = pr.npat < sizeof(mpat);
      if (ok) {
        memcpy(lit, pat, pr.nlit);
        lit[pr.nlit] = '\0';
        if (pr.nlit > 0 && pr.nlit + 1 == pr.npat && pat[pr.nlit - 1] == ':')
          lit[pr.nlit - 1] = ' '; // `git log:*` is `git log *`
        memcpy(mpat, pat, pr.npat + 1);
        if (pr.npat >= 2 && pat[pr.npat - 1] == '*' && pat[pr.npat - 2] == ':')
          mpat[pr.npat - 2] = ' ';
        pr.lit = lit;
        pr.mpat = mpat;
      }
    }
    for (size_t j = 0; ok && left && j < r->natoms; j++) {
      const struct request_atom *a = &r->atoms[j];
      for (int t = 0; t < 2; t++) {
        if (!(need[j] & (1 << t)))
          continue;
        const char *path = !(need[j] & 4) ? NULL : t ? a->res : a->lex;
        if (allows(&pr, a, path, SIZE_MAX, HOW_REF)) {
          need[j] &= (uint8_t) ~(1 << t);
          left--;
        }
      }
    }
    rules_rule_free(&pr.r);
    free(pr.pat);
  }
  return ok && left == 0;
}
