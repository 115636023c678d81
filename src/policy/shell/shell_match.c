// The Bash rule matcher (permission-rules §5.3): a pattern against the
// canonical string of a command atom, its words joined by one space.
//
// A glob over the text and a per-byte mask, evaluated for every alignment
// at once (dynamic programming, no exponential backtracking). A dynamic
// word's bytes may only be covered by a `*`; a literal pattern byte that
// meets one makes the answer "maybe". The work is bounded; running out is
// "maybe" too (deny/ask: ask; allow: no).

#include "shell_match.h"
#include "shell.h"

#include "base/mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
  WORK_LIMIT = 1 << 24, // pattern bytes times text bytes
  SMALL = 512,          // texts and patterns shorter than this: no malloc
};

enum {
  M_DYN = 1,  // a byte of a dynamic word
  M_FOLD = 2, // compared case-insensitively (deny/ask command name)
  M_SEP = 4,  // the space between two words
};

// Results in a row: their order is also their strength.
enum { R_NO, R_MAYBE, R_YES };

struct glob {
  const char *p; // the pattern, a trailing `:*` already ` *`
  size_t pn;
  bool trail; // the pattern ends in ` *`, which also matches the end
  const char *t;
  const unsigned char *mask;
  size_t tn;
};

static char lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c + 'a' - 'A') : c;
}

static unsigned char best(unsigned char a, unsigned char b) {
  return a > b ? a : b;
}

// The row past the pattern's end: the text must be used up, or be only
// dynamic words and the spaces between them (they may expand to nothing).
static void last_row(const struct glob *g, unsigned char *row) {
  bool rest_dynamic = true;
  row[g->tn] = R_YES;
  for (size_t ti = g->tn; ti-- > 0;) {
    rest_dynamic = rest_dynamic && (g->mask[ti] & (M_DYN | M_SEP));
    row[ti] = rest_dynamic ? R_MAYBE : R_NO;
  }
}

// row[ti] = how p[pi..] matches t[ti..], from next = the same for pi + 1.
static void one_row(const struct glob *g, size_t pi, const unsigned char *next,
                    unsigned char *row) {
  char c = g->p[pi];
  if (c == '*') {
    row[g->tn] = next[g->tn];
    for (size_t ti = g->tn; ti-- > 0;)
      row[ti] = best(next[ti], row[ti + 1]);
    return;
  }
  // `ls *` also matches `ls`: the trailing space may meet the end.
  row[g->tn] = g->trail && pi + 2 == g->pn ? R_YES : R_NO;
  for (size_t ti = 0; ti < g->tn; ti++) {
    unsigned char m = g->mask[ti];
    char t = g->t[ti];
    if (m & M_DYN)
      row[ti] = R_MAYBE; // a literal against an unknown word
    else if (m & M_FOLD ? lower(c) == lower(t) : c == t)
      row[ti] = next[ti + 1];
    else
      row[ti] = R_NO;
  }
}

// Every alignment of pattern and text, one pattern byte at a time from the
// end: O(pattern x text) with two rows, whatever the `*` do.
static enum shell_match run(const struct glob *g) {
  if (g->pn + 1 > WORK_LIMIT / (g->tn + 1))
    return SHELL_MAYBE; // too much work: unknown
  unsigned char next_s[SMALL], row_s[SMALL];
  bool small = g->tn < SMALL;
  unsigned char *next = small ? next_s : xmalloc(g->tn + 1);
  unsigned char *row = small ? row_s : xmalloc(g->tn + 1);
  last_row(g, next);
  for (size_t pi = g->pn; pi-- > 0;) {
    one_row(g, pi, next, row);
    unsigned char *tmp = next;
    next = row;
    row = tmp;
  }
  unsigned char r = next[0];
  if (!small) {
    free(next);
    free(row);
  }
  return r == R_YES ? SHELL_YES : r == R_MAYBE ? SHELL_MAYBE : SHELL_NO;
}

// The canonical string, with name in place of the first word: into t_s
// and m_s (SMALL bytes) when it fits, else into new buffers.
static void build_text(const struct shell_atom *a, const char *name, bool fold,
                       char *t_s, unsigned char *m_s, char **text,
                       unsigned char **mask, size_t *len) {
  size_t n = strlen(name);
  for (size_t i = 1; i < a->nwords; i++)
    n += 1 + strlen(a->words[i].text);
  char *t = n < SMALL ? t_s : xmalloc(n + 1);
  unsigned char *m = n < SMALL ? m_s : xmalloc(n + 1);
  memset(m, 0, n + 1);
  size_t k = 0;
  for (size_t i = 0; i < a->nwords; i++) {
    const char *w = i == 0 ? name : a->words[i].text;
    size_t wn = strlen(w);
    if (i > 0) {
      m[k] = M_SEP;
      t[k++] = ' ';
    }
    memcpy(t + k, w, wn);
    unsigned char bits =
        (a->words[i].dynamic ? M_DYN : 0) | (i == 0 && fold ? M_FOLD : 0);
    memset(m + k, bits, wn);
    k += wn;
  }
  t[k] = '\0';
  *text = t;
  *mask = m;
  *len = k;
}

// The length of the canonical string with name as the first word.
static size_t text_len(const struct shell_atom *a, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 1; i < a->nwords; i++)
    n += 1 + strlen(a->words[i].text);
  return n;
}

// The same answer as run() for a pattern whose only `*` (if any) is its
// last byte (`git diff *`, `git push --force*`, `make`): most rules. With
// no `*` before the end, a row of the glob only reads the next row one
// byte further, so the answer for the whole text follows one diagonal:
// the pattern's bytes against the text's first bytes, read from the words
// as they are, without building the text. tn: text_len (within the work
// bound, checked by the caller).
static enum shell_match literal_run(const char *p, size_t pn, bool trail,
                                    const struct shell_atom *a,
                                    const char *name, bool fold) {
  bool star = pn > 0 && p[pn - 1] == '*';
  size_t ln = star ? pn - 1 : pn; // the literal bytes (with trail's space)
  size_t i = 0;                   // the word
  const char *c = name;           // in word i
  size_t pi = 0;
  for (;;) {
    // The bytes of word i against the pattern's, a word at a time.
    if (*c && pi < ln) {
      if (a->words[i].dynamic)
        return SHELL_MAYBE; // a literal against an unknown word
      if (i == 0 && fold) {
        for (; *c && pi < ln; c++, pi++)
          if (lower(p[pi]) != lower(*c))
            return SHELL_NO;
      } else {
        for (; *c && pi < ln; c++, pi++)
          if (p[pi] != *c)
            return SHELL_NO;
      }
    }
    if (pi == ln)
      break;
    // The end of word i: the end of the text, or a space.
    if (i + 1 == a->nwords)
      return trail && pi + 2 == pn ? SHELL_YES : SHELL_NO;
    if (p[pi++] != ' ')
      return SHELL_NO;
    c = a->words[++i].text;
  }
  if (star)
    return SHELL_YES; // a final `*` takes the rest, or nothing
  // The text must be used up, or be only dynamic words and the spaces
  // between them from here (last_row).
  if (!*c && i + 1 == a->nwords)
    return SHELL_YES;
  if (*c && !a->words[i].dynamic)
    return SHELL_NO;
  for (size_t k = i + 1; k < a->nwords; k++)
    if (!a->words[k].dynamic && a->words[k].text[0])
      return SHELL_NO;
  return SHELL_MAYBE;
}

// tn: text_len(a, name), or SIZE_MAX when the caller did not measure it.
// glob_only: 1 the glob for every pattern, 2 a pattern known to have no
// `*` but (maybe) its last byte, 0 look.
static enum shell_match match_name(const char *pattern, size_t pn, bool trail,
                                   const struct shell_atom *a, const char *name,
                                   bool fold, int glob_only, size_t tn) {
  if (glob_only != 1) {
    const char *star =
        glob_only == 2 ? NULL : (const char *)memchr(pattern, '*', pn);
    if (!star || star == pattern + pn - 1) {
      if (tn == SIZE_MAX)
        tn = text_len(a, name);
      if (pn + 1 > WORK_LIMIT / (tn + 1))
        return SHELL_MAYBE; // too much work for run(): the same answer
      return literal_run(pattern, pn, trail, a, name, fold);
    }
  }
  struct glob g = {.p = pattern, .pn = pn, .trail = trail};
  char *text, t_s[SMALL];
  unsigned char *mask, m_s[SMALL];
  build_text(a, name, fold, t_s, m_s, &text, &mask, &g.tn);
  g.t = text;
  g.mask = mask;
  enum shell_match r = run(&g);
  if (text != t_s) {
    free(text);
    free(mask);
  }
  return r;
}

static int rank(enum shell_match m) {
  return m == SHELL_YES ? 2 : m == SHELL_MAYBE ? 1 : 0;
}

static enum shell_match pattern_match(const char *pattern, size_t pn,
                                      const struct shell_atom *atom,
                                      bool for_allow, int glob_only,
                                      size_t tn) {
  if (!pattern || !atom || atom->kind != SHELL_CMD || atom->nwords == 0)
    return SHELL_NO;
  const struct shell_word *cmd = &atom->words[0];
  if (for_allow && (atom->deny_only || atom->unsafe_assign ||
                    atom->never_allow || cmd->dynamic))
    return SHELL_NO;
  bool trail = pn >= 2 && pattern[pn - 1] == '*' &&
               (pattern[pn - 2] == ' ' || pattern[pn - 2] == ':');
  // A trailing `:*` is ` *`: on a copy (a pattern that already has the
  // space is read as it is).
  char p_s[SMALL], *own = NULL;
  const char *p = pattern;
  if (trail && pattern[pn - 2] == ':') {
    own = pn < SMALL ? p_s : xmalloc(pn + 1);
    memcpy(own, pattern, pn);
    own[pn] = '\0';
    own[pn - 2] = ' ';
    p = own;
  }
  enum shell_match r =
      match_name(p, pn, trail, atom, cmd->text, !for_allow, glob_only, tn);
  const char *base = !for_allow && r != SHELL_YES && !cmd->dynamic
                         ? strrchr(cmd->text, '/')
                         : NULL;
  if (base && base[1]) {
    enum shell_match b =
        match_name(p, pn, trail, atom, base + 1, true, glob_only, SIZE_MAX);
    r = rank(b) > rank(r) ? b : r;
  }
  if (own && own != p_s)
    free(own);
  if (for_allow && r != SHELL_YES)
    return SHELL_NO;
  return r;
}

enum shell_match shell_pattern_match(const char *pattern,
                                     const struct shell_atom *atom,
                                     bool for_allow) {
  return pattern_match(pattern, pattern ? strlen(pattern) : 0, atom, for_allow,
                       0, SIZE_MAX);
}

enum shell_match shell_pattern_match_n(const char *pattern, size_t pn,
                                       const struct shell_atom *atom,
                                       bool for_allow, size_t tn) {
  return pattern_match(pattern, pn, atom, for_allow, 0, tn);
}

enum shell_match shell_pattern_match_lit(const char *pattern, size_t pn,
                                         const struct shell_atom *atom,
                                         bool for_allow, size_t tn) {
  return pattern_match(pattern, pn, atom, for_allow, 2, tn);
}

enum shell_match shell_match_literal(const char *p, size_t pn,
                                     const struct shell_atom *atom,
                                     bool for_allow, size_t tn,
                                     const char *base) {
  if (!p || !atom || atom->kind != SHELL_CMD || atom->nwords == 0)
    return SHELL_NO;
  const struct shell_word *cmd = &atom->words[0];
  if (for_allow && (atom->deny_only || atom->unsafe_assign ||
                    atom->never_allow || cmd->dynamic))
    return SHELL_NO;
  bool trail = pn >= 2 && p[pn - 1] == '*' && p[pn - 2] == ' ';
  if (pn >= 2 && p[pn - 1] == '*' && p[pn - 2] == ':') // not turned yet
    return pattern_match(p, pn, atom, for_allow, 2, tn);
  // match_name's way for a literal pattern, with tn given.
  enum shell_match r =
      pn + 1 > WORK_LIMIT / (tn + 1)
          ? SHELL_MAYBE
          : literal_run(p, pn, trail, atom, cmd->text, !for_allow);
  if (for_allow)
    return r == SHELL_YES ? SHELL_YES : SHELL_NO;
  if (r != SHELL_YES && !cmd->dynamic && base && *base) {
    // The basename's text: the name's bytes before it are left out.
    size_t bn = tn - (size_t)(base - cmd->text);
    enum shell_match b = pn + 1 > WORK_LIMIT / (bn + 1)
                             ? SHELL_MAYBE
                             : literal_run(p, pn, trail, atom, base, true);
    r = rank(b) > rank(r) ? b : r;
  }
  return r;
}

enum shell_match shell_pattern_match_glob(const char *pattern,
                                          const struct shell_atom *atom,
                                          bool for_allow) {
  return pattern_match(pattern, pattern ? strlen(pattern) : 0, atom, for_allow,
                       1, SIZE_MAX);
}

bool shell_pattern_narrows(const char *p) {
  for (size_t i = 0; p[i]; i++) {
    if (p[i] == '[') {
      const char *e = strchr(p + i + 1, ']');
      if (!e)
        return false;
      i = (size_t)(e - p);
    } else if (p[i] == '\\' || !strchr("*?.{},", p[i])) {
      return true;
    }
  }
  return false;
}
