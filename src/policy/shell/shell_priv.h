#pragma once
// The shell analyser's internals, shared by its files (not a public API):
//   shell.c        shell_analyse, the context, atoms and the parser
//   shell_lex.c    the lexer: words, quotes, expansions, heredocs, tokens
//   shell_cmd.c    the atom builder: one simple command becomes atoms
//   shell_match.c  shell_pattern_match

#include "shell.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

enum {
  MAX_INPUT = 1 << 20, // bytes of one command line
  MAX_BYTES = 8 << 20, // bytes of words and atoms made from it
  MAX_DEPTH = 64,      // nesting of substitutions, blocks and wrappers
  MAX_ATOMS = 4096,
  MAX_HEREDOCS = 64, // pending on one line
  MAX_BASES = 16,    // directories a `cd` may have moved to
  WORD_COST = 32,    // bytes charged per word besides its text (allocation)
};

// ---- buffers and words

struct buf {
  char *s;
  size_t len, cap;
};

static inline void buf_put(struct buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 32;
    while (cap < b->len + n + 1)
      cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}

static inline void buf_putc(struct buf *b, char c) {
  buf_put(b, &c, 1);
}

static inline const char *buf_str(const struct buf *b) {
  return b->s ? b->s : "";
}

// A word as the parser sees it.
struct pword {
  struct buf text; // quote-removed; expansions kept as written
  bool dynamic;    // see struct shell_word
  bool plain;      // no quote, escape or expansion: may be a reserved word
  bool quoted;     // some part was quoted or escaped (heredoc delimiters)
  bool procsub;    // the word is exactly one <(..) or >(..)
  bool assign;     // starts with an unquoted NAME= or NAME+=
  size_t name_len; // length of NAME when assign
};

static inline const char *wt(const struct pword *w) {
  return buf_str(&w->text);
}

static inline bool wis(const struct pword *w, const char *s) {
  return !w->dynamic && strcmp(wt(w), s) == 0;
}

// ---- characters

static inline bool is_meta(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' ||
         c == '|' || c == '<' || c == '>' || c == '(' || c == ')';
}

static inline bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static inline bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

static inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// ---- the context of one shell_analyse call

// What every nested parser of one shell_analyse call shares.
struct ctx {
  const char *home;
  struct shell_result *out;
  size_t cap;   // of out->atoms
  bool stop;    // a syntax error or a limit: stop everything
  size_t bytes; // charged against MAX_BYTES
  // Where a literal `cd` may have moved the shell (relative to the session
  // cwd or absolute); base_unknown when it may be anywhere.
  char *bases[MAX_BASES];
  size_t nbases;
  bool base_unknown;
  int loop_depth;   // inside a loop or function body
  int xargs;        // building a command xargs runs (more_args)
  bool stdin_code;  // ... an interpreter that reads its program from stdin
  bool stdin_shell; // the builder saw a shell that reads its script from
                    // stdin (sh, bash -s): the parser looks at what feeds it
};

// Marks the result opaque (the first reason is kept) and goes on.
void shell_opaque(struct ctx *cx, const char *reason);
// Marks it opaque and stops the analysis (syntax errors, limits).
void shell_fail(struct ctx *cx, const char *reason);
// Counts n more bytes against MAX_BYTES; false once stopped.
bool shell_charge(struct ctx *cx, size_t n);
// A new zeroed atom in cx->out, or NULL when stopped or full.
struct shell_atom *shell_push_atom(struct ctx *cx, enum shell_atom_kind kind,
                                   bool deny_only);
// A file atom for path (and its copies under where a cd may have gone).
void shell_emit_path(struct ctx *cx, enum shell_atom_kind kind,
                     const char *path, bool dynamic, bool deny_only);
// A literal `cd dir` ran (or did not): later relative paths may be there.
void shell_add_base(struct ctx *cx, const char *dir);

// ---- the parser

enum tok_type {
  T_EOF,
  T_WORD,
  T_NL,
  T_SEMI,
  T_AMP,
  T_AND,
  T_OR,
  T_PIPE,
  T_PIPEAMP,
  T_LPAREN,
  T_RPAREN,
  T_DSEMI,
  T_SEMIAMP,
  T_DSEMIAMP,
  T_REDIR,
};

enum redir {
  R_IN,
  R_OUT,
  R_APPEND,
  R_CLOBBER,
  R_RW,
  R_HEREDOC,
  R_HEREDOC_STRIP,
  R_HERESTR,
  R_ALL,
  R_ALL_APPEND,
  R_DUP_IN,
  R_DUP_OUT,
};

struct token {
  enum tok_type type;
  enum redir redir;
  bool dbl; // T_LPAREN immediately followed by another '('
  struct pword w;
};

struct heredoc {
  char *delim;
  bool quoted, strip;
  bool to_shell; // the body is the script of a shell (bash <<EOF)
  bool to_code;  // the body is a program of an interpreter (python3 <<EOF)
};

enum lex_mode {
  LEX_NORMAL,
  LEX_COND,  // inside [[ ]]: no fd numbers before < >
  LEX_REGEX, // the right side of =~: ( ) | are word characters
};

struct parser {
  struct ctx *cx;
  const char *s;
  size_t pos, end;
  int depth;
  enum lex_mode mode;
  struct token tok;
  struct heredoc pend[MAX_HEREDOCS];
  size_t npend;
  size_t pend_base; // heredocs pending outside the current substitution
};

static inline void tok_free(struct token *t) {
  if (t->type == T_WORD)
    free(t->w.text.s);
  *t = (struct token){.type = T_EOF};
}

// The byte at i, or NUL past the end of the text being parsed.
static inline char at(const struct parser *p, size_t i) {
  return i < p->end ? p->s[i] : '\0';
}

static inline void shell_leave(struct parser *p) {
  p->depth--;
}

// Counts one level of nesting; false (and stopped) past MAX_DEPTH.
bool shell_enter(struct parser *p);
// Makes the next token current (shell_lex.c).
void shell_advance(struct parser *p);
// Parses commands up to a token that cannot start one (shell.c).
void shell_parse_list(struct parser *p);
// Analyses a whole script, e.g. a backquote body or an sh -c argument.
void shell_analyse_text(struct ctx *cx, const char *s, size_t len, int depth);
// Turns one simple command (leading NAME=v words included) into atoms
// (shell_cmd.c).
void shell_build_simple(struct ctx *cx, const struct pword *w, size_t n,
                        bool deny_only, int depth);

// Programs inside arguments (shell_prog.c): each adds the file atoms or the
// opacity of one simple command w[0..n) whose atom is already emitted.
void shell_sed(struct ctx *cx, const struct pword *w, size_t n);
void shell_awk(struct ctx *cx, const struct pword *w, size_t n);
void shell_tar(struct ctx *cx, const struct pword *w, size_t n);
void shell_wget(struct ctx *cx, const struct pword *w, size_t n);
void shell_zip(struct ctx *cx, const struct pword *w, size_t n, bool unzip);
// Compressors, split, mktemp, ssh-keygen, patch -o: the files they write
// (with w NULL: whether name is one of them).
bool shell_writers(struct ctx *cx, const struct pword *w, size_t n,
                   const char *name);
// Why an option of the command named name runs a program, or NULL.
const char *shell_option_runs(const struct pword *w, size_t n,
                              const char *name);
