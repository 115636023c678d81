// The shell analyser (shell_analyse) and the Bash rule matcher
// (shell_pattern_match).
//
// Input: a script, optionally followed by a NUL and a Bash rule pattern.
// Properties:
//  * the result is well formed: rc matches opaque, an opaque result has a
//    reason, a command atom has words (none NULL) and no path, a file atom a
//    path and no words;
//  * an allow match is never SHELL_MAYBE; what a pattern allows, the same
//    pattern as a deny/ask rule matches too (the wide semantics contain the
//    narrow ones); an atom marked deny_only, never_allow or unsafe_assign,
//    or with a dynamic command name, is never allowed; every other command
//    atom is allowed by `*`, and by its own exact text when it has no
//    dynamic word and no `*` (what the "allow exactly this" rules rely on;
//    up to 2000 bytes, below the matcher's work bound);
//  * the pattern matched byte by byte (no `*` before its end) answers as
//    the glob (shell_pattern_match_glob) for both semantics;
//  * an unmodelled construct that a cheap, conservative scan finds (`eval`
//    in command position, a redirection to /dev/tcp or /dev/udp, a `$NAME`
//    command name at the very start, $HOME excepted) is never allowed by `Bash(*)`: the
//    result is opaque or some command atom an allow must cover is refused.

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "policy/shell/shell.h"

#define HOME "/h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

static bool plain(const char *s) {
  // No quoting, expansion, comment, grouping, glob or here-document: in
  // such a script every token is what it looks like.
  for (const char *p = s; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr(" \t\n_./:=,+%@^-;&|<>", *p))
      return false;
  return strstr(s, "<<") == NULL;
}

static bool word_end(char c) {
  return c == '\0' || strchr(" \t\n;&|<>", c) != NULL;
}

// `eval` as a command name: at the start, or right after a control
// operator (; newline & | && || |&, but not the & of >& <& nor the | of >|).
static bool has_eval(const char *s) {
  if (!plain(s))
    return false;
  for (const char *p = s; (p = strstr(p, "eval")); p++) {
    if (!word_end(p[4]))
      continue;
    const char *q = p;
    while (q > s && (q[-1] == ' ' || q[-1] == '\t'))
      q--;
    if (q == s)
      return true;
    char c = q[-1];
    char before = q - 1 > s ? q[-2] : '\0';
    if (c == ';' || c == '\n' ||
        ((c == '&' || c == '|') && before != '>' && before != '<'))
      return true;
  }
  return false;
}

// A word starting with /dev/tcp/ or /dev/udp/ right after >, >>, <, <>,
// >|, &>, &>> or >& (not <&, which bash refuses for a file name).
static bool has_net_redirect(const char *s) {
  if (!plain(s))
    return false;
  static const char *const nets[] = {"/dev/tcp/", "/dev/udp/"};
  for (int k = 0; k < 2; k++) {
    for (const char *p = s; (p = strstr(p, nets[k])); p++) {
      const char *q = p;
      while (q > s && (q[-1] == ' ' || q[-1] == '\t'))
        q--;
      if (q == s)
        continue;
      char c = q[-1], before = q - 1 > s ? q[-2] : '\0';
      if (c == '>' || c == '<' || ((c == '|' || c == '&') && before == '>'))
        return true;
    }
  }
  return false;
}

// `$NAME` as the first word ($HOME excepted: it is expanded to home).
static bool dynamic_start(const char *s) {
  if (s[0] != '$' || !(isalpha((unsigned char)s[1]) || s[1] == '_'))
    return false;
  size_t n = 1;
  while (isalnum((unsigned char)s[n]) || s[n] == '_')
    n++;
  return !(n == 5 && memcmp(s + 1, "HOME", 4) == 0);
}

static bool allowable(const struct shell_atom *a) {
  return !a->deny_only && !a->never_allow && !a->unsafe_assign &&
         a->nwords > 0 && !a->words[0].dynamic;
}

// Matches pattern both ways; returns the allow answer.
static enum shell_match both(const char *pattern, const struct shell_atom *a) {
  enum shell_match allow = shell_pattern_match(pattern, a, true);
  enum shell_match wide = shell_pattern_match(pattern, a, false);
  FUZZ_CHECK(allow == shell_pattern_match_glob(pattern, a, true) &&
                 wide == shell_pattern_match_glob(pattern, a, false),
             "[%s]: the literal matcher and the glob differ", pattern);
  FUZZ_CHECK(allow == SHELL_NO || allow == SHELL_YES,
             "allow match %d for pattern [%s]", (int)allow, pattern);
  FUZZ_CHECK(allow != SHELL_YES || wide == SHELL_YES,
             "[%s] allows but does not match as deny/ask (%d)", pattern,
             (int)wide);
  FUZZ_CHECK(allow == SHELL_NO || allowable(a),
             "[%s] allows an atom no allow may cover", pattern);
  return allow;
}

// The atom's words joined by spaces, when exact (no dynamic word, no `*`).
static char *exact_text(const struct shell_atom *a) {
  size_t n = 0;
  for (size_t i = 0; i < a->nwords; i++) {
    if (a->words[i].dynamic || strchr(a->words[i].text, '*'))
      return NULL;
    n += strlen(a->words[i].text) + 1;
  }
  char *t = malloc(n + 1), *p = t;
  for (size_t i = 0; i < a->nwords; i++)
    p += sprintf(p, "%s%s", i ? " " : "", a->words[i].text);
  return t;
}

static void check_atom(const struct shell_atom *a, const char *pattern) {
  if (a->kind != SHELL_CMD) {
    FUZZ_CHECK(a->kind == SHELL_READ || a->kind == SHELL_EDIT, "kind %d",
               (int)a->kind);
    FUZZ_CHECK(a->path && a->nwords == 0 && a->nassign == 0,
               "file atom without path or with words");
    FUZZ_CHECK(shell_pattern_match("*", a, false) == SHELL_NO,
               "a file atom matched a Bash pattern");
    return;
  }
  FUZZ_CHECK(!a->path, "command atom with a path");
  FUZZ_CHECK(a->nwords == 0 || a->words, "words NULL");
  for (size_t i = 0; i < a->nwords; i++)
    FUZZ_CHECK(a->words[i].text, "word %zu NULL", i);
  for (size_t i = 0; i < a->nassign; i++)
    FUZZ_CHECK(a->assign && a->assign[i], "assignment %zu NULL", i);
  if (a->nwords == 0) {
    FUZZ_CHECK(shell_pattern_match("*", a, false) == SHELL_NO,
               "an atom without words matched");
    return;
  }

  enum shell_match star = both("*", a);
  FUZZ_CHECK((star == SHELL_YES) == allowable(a), "`*` allow %d, allowable %d",
             (int)star, allowable(a));
  char *t = exact_text(a);
  if (t && strlen(t) > 2000) { // past the matcher's work bound: "maybe"
    free(t);
    t = NULL;
  }
  if (t) {
    enum shell_match m = both(t, a);
    FUZZ_CHECK(m == SHELL_YES || !allowable(a), "exact text [%s] not allowed",
               t);
    free(t);
  }
  size_t n0 = strlen(a->words[0].text);
  char *first = malloc(n0 + 3);
  memcpy(first, a->words[0].text, n0);
  memcpy(first + n0, " *", 3);
  both(first, a);
  memcpy(first + n0, ":*", 3);
  both(first, a);
  free(first);
  if (pattern)
    both(pattern, a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // The script ends at the first NUL; a pattern may follow it.
  char *buf = malloc(size + 2);
  memcpy(buf, data, size);
  buf[size] = buf[size + 1] = '\0';
  const char *script = buf;
  size_t sn = strlen(script);
  const char *pattern = sn < size ? buf + sn + 1 : NULL;

  struct shell_result r;
  int rc = shell_analyse(script, HOME, &r);
  FUZZ_CHECK(rc == (r.opaque ? -1 : 0), "rc %d, opaque %d", rc, r.opaque);
  FUZZ_CHECK(memchr(r.reason, '\0', sizeof(r.reason)), "reason unterminated");
  FUZZ_CHECK(!r.opaque || r.reason[0], "opaque without a reason");
  FUZZ_CHECK(r.natoms == 0 || r.atoms, "atoms NULL");
  FUZZ_CHECK(r.natoms <= 4096, "%zu atoms", r.natoms);

  bool all_star = !r.opaque;
  for (size_t i = 0; i < r.natoms; i++) {
    const struct shell_atom *a = &r.atoms[i];
    check_atom(a, pattern);
    if (a->kind == SHELL_CMD && !a->deny_only &&
        shell_pattern_match("*", a, true) != SHELL_YES)
      all_star = false;
  }
  const char *why = has_eval(script)           ? "eval"
                    : has_net_redirect(script) ? "network redirection"
                    : dynamic_start(script)    ? "dynamic command name"
                                               : NULL;
  FUZZ_CHECK(!why || !all_star, "%s allowed by Bash(*): [%s]", why, script);

  shell_result_free(&r);
  free(buf);
  return 0;
}
