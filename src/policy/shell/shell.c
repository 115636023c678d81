// The shell analyser (permission-rules §5.3): a command line becomes atoms.
//
// Three layers: the lexer (shell_lex.c) turns bytes into tokens and words
// (quote removal, expansions, heredocs), the parser (here) walks the
// POSIX/bash grammar and collects simple commands and redirections, and
// the atom builder (shell_cmd.c) turns one simple command into atoms
// (wrappers, sh -c, git, file operands, cd). shell_match.c matches them.
//
// Everything that is not modelled fails closed: the result is opaque. A
// syntax error stops the analysis; a semantic surprise (eval, a dynamic
// command name, /dev/tcp) marks the result opaque and goes on, so deny
// rules still see the other atoms. Atoms are in no particular order.

#include "shell_priv.h"

#include <stdio.h>

// ---- context, failure, atoms ---------------------------------------------

void shell_opaque(struct ctx *cx, const char *reason) {
  if (cx->out->opaque)
    return;
  cx->out->opaque = true;
  snprintf(cx->out->reason, sizeof(cx->out->reason), "%s", reason);
}

void shell_fail(struct ctx *cx, const char *reason) {
  shell_opaque(cx, reason);
  cx->stop = true;
}

bool shell_charge(struct ctx *cx, size_t n) {
  cx->bytes += n;
  if (cx->bytes > MAX_BYTES)
    shell_fail(cx, "command too large");
  return !cx->stop;
}

struct shell_atom *shell_push_atom(struct ctx *cx, enum shell_atom_kind kind,
                                   bool deny_only) {
  struct shell_result *r = cx->out;
  if (cx->stop)
    return NULL;
  if (r->natoms >= MAX_ATOMS) {
    shell_fail(cx, "too many commands");
    return NULL;
  }
  if (r->natoms == cx->cap) {
    cx->cap = cx->cap ? 2 * cx->cap : 8;
    r->atoms = xrealloc(r->atoms, cx->cap * sizeof(*r->atoms));
  }
  struct shell_atom *a = &r->atoms[r->natoms++];
  *a = (struct shell_atom){
      .kind = kind, .deny_only = deny_only, .more_args = cx->xargs > 0};
  return a;
}

static void path_atom(struct ctx *cx, enum shell_atom_kind kind,
                      const char *path, bool dynamic, bool deny_only) {
  if (!shell_charge(cx, strlen(path)))
    return;
  struct shell_atom *a = shell_push_atom(cx, kind, deny_only);
  if (!a)
    return;
  a->path = xstrdup(path);
  a->path_dynamic = dynamic;
}

static char *path_join(const char *dir, const char *rel) {
  size_t dn = strlen(dir), rn = strlen(rel);
  char *s = xmalloc(dn + rn + 2);
  memcpy(s, dir, dn);
  size_t k = dn;
  if (dn && dir[dn - 1] != '/')
    s[k++] = '/';
  memcpy(s + k, rel, rn + 1);
  return s;
}

// A file atom. A relative path after a `cd` is also reported where the cd
// may have taken it (or as unknowable), since the caller resolves relative
// paths against the session cwd.
void shell_emit_path(struct ctx *cx, enum shell_atom_kind kind,
                     const char *path, bool dynamic, bool deny_only) {
  if (!dynamic && !*path)
    return; // an empty name fails in the shell
  path_atom(cx, kind, path, dynamic, deny_only);
  if (dynamic || path[0] == '/')
    return;
  for (size_t i = 0; i < cx->nbases; i++) {
    char *j = path_join(cx->bases[i], path);
    path_atom(cx, kind, j, false, deny_only);
    free(j);
  }
  if (cx->base_unknown)
    path_atom(cx, kind, path, true, deny_only);
}

static void add_base_one(struct ctx *cx, char *s) {
  for (size_t i = 0; i < cx->nbases; i++) {
    if (strcmp(cx->bases[i], s) == 0) {
      free(s);
      return;
    }
  }
  if (cx->nbases == MAX_BASES) {
    cx->base_unknown = true;
    free(s);
    return;
  }
  cx->bases[cx->nbases++] = s;
}

// `cd dir` ran, or did not (it may fail, or sit in a subshell): every base
// so far stays possible and each also moves by dir.
void shell_add_base(struct ctx *cx, const char *dir) {
  size_t n = cx->nbases;
  if (dir[0] != '/') {
    for (size_t i = 0; i < n && !cx->base_unknown; i++)
      add_base_one(cx, path_join(cx->bases[i], dir));
  }
  add_base_one(cx, xstrdup(dir));
}

bool shell_enter(struct parser *p) {
  if (++p->depth > MAX_DEPTH)
    shell_fail(p->cx, "nested too deeply");
  return !p->cx->stop;
}

static void parse_command(struct parser *p);

// ---- parser: helpers -----------------------------------------------------

static bool tok_is(const struct parser *p, const char *kw) {
  return p->tok.type == T_WORD && p->tok.w.plain &&
         strcmp(wt(&p->tok.w), kw) == 0;
}

static bool tok_closes(const struct parser *p) {
  static const char *const closers[] = {"then", "elif", "else", "fi",
                                        "do",   "done", "esac", "}"};
  for (size_t i = 0; i < sizeof(closers) / sizeof(closers[0]); i++)
    if (tok_is(p, closers[i]))
      return true;
  return false;
}

static bool starts_command(const struct parser *p) {
  if (p->cx->stop)
    return false;
  return (p->tok.type == T_WORD && !tok_closes(p)) || p->tok.type == T_LPAREN ||
         p->tok.type == T_REDIR;
}

static void syntax_error(struct parser *p) {
  shell_fail(p->cx, "syntax error");
}

static void expect_kw(struct parser *p, const char *kw) {
  if (!tok_is(p, kw))
    syntax_error(p);
  else
    shell_advance(p);
}

static void expect(struct parser *p, enum tok_type t) {
  if (p->tok.type != t)
    syntax_error(p);
  else
    shell_advance(p);
}

static void skip_nl(struct parser *p) {
  while (p->tok.type == T_NL)
    shell_advance(p);
}

// Moves the current word token out (the caller owns its text).
static struct pword take_word(struct parser *p) {
  struct pword w = p->tok.w;
  p->tok = (struct token){.type = T_EOF};
  shell_advance(p);
  return w;
}

struct words {
  struct pword *v;
  size_t n, cap;
};

static void words_push(struct words *ws, struct pword w) {
  if (ws->n == ws->cap) {
    ws->cap = ws->cap ? 2 * ws->cap : 8;
    ws->v = xrealloc(ws->v, ws->cap * sizeof(*ws->v));
  }
  ws->v[ws->n++] = w;
}

static void words_free(struct words *ws) {
  for (size_t i = 0; i < ws->n; i++)
    free(ws->v[i].text.s);
  free(ws->v);
  *ws = (struct words){0};
}

// ---- parser: redirections ------------------------------------------------

static bool is_fd_word(const struct pword *w) {
  const char *s = wt(w);
  if (w->dynamic)
    return false;
  if (strcmp(s, "-") == 0)
    return true;
  size_t i = 0;
  while (is_digit(s[i]))
    i++;
  return i > 0 && (s[i] == '\0' || (s[i] == '-' && s[i + 1] == '\0'));
}

static bool exempt_target(const char *s) {
  static const char *const ok[] = {"/dev/null", "/dev/stdout", "/dev/stderr",
                                   "/dev/stdin"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    if (strcmp(s, ok[i]) == 0)
      return true;
  return false;
}

static void redir_target(struct ctx *cx, enum shell_atom_kind kind,
                         const struct pword *w) {
  const char *s = wt(w);
  if (w->procsub)
    return; // a pipe, analysed as a command
  if (strstr(s, "dev/tcp/") || strstr(s, "dev/udp/")) {
    shell_opaque(cx, "network redirection");
    return;
  }
  if (!w->dynamic && exempt_target(s))
    return;
  shell_emit_path(cx, kind, s, w->dynamic, false);
}

// Pending file atoms of a simple command, emitted after its command atom,
// and what feeds its stdin.
struct targets {
  enum shell_atom_kind *kind;
  struct words w;
  struct pword herestr; // <<< WORD
  bool has_herestr;
  bool has_input; // < FILE, <> FILE, <&N
};

static void parse_redir(struct parser *p, struct targets *tg) {
  enum redir r = p->tok.redir;
  shell_advance(p);
  if (p->tok.type != T_WORD) {
    syntax_error(p);
    return;
  }
  struct pword *w = &p->tok.w;
  enum shell_atom_kind kind = r == R_IN ? SHELL_READ : SHELL_EDIT;
  if (r == R_HEREDOC || r == R_HEREDOC_STRIP) {
    if (p->npend == MAX_HEREDOCS) {
      shell_fail(p->cx, "too many here-documents");
      return;
    }
    p->pend[p->npend++] = (struct heredoc){.delim = xstrdup(wt(w)),
                                           .quoted = w->quoted,
                                           .strip = r == R_HEREDOC_STRIP};
    shell_advance(p);
    return;
  }
  if (tg && (r == R_IN || r == R_RW || r == R_DUP_IN))
    tg->has_input = true;
  if (r == R_HERESTR && tg) {
    free(tg->herestr.text.s);
    tg->herestr = take_word(p);
    tg->has_herestr = true;
    return;
  }
  if (r == R_HERESTR || ((r == R_DUP_IN || r == R_DUP_OUT) && is_fd_word(w))) {
    shell_advance(p);
    return;
  }
  if (r == R_DUP_IN) {
    shell_fail(p->cx, "<& with a file name");
    return;
  }
  if (!tg) {
    redir_target(p->cx, kind, w);
    shell_advance(p);
    return;
  }
  size_t n = tg->w.n;
  words_push(&tg->w, take_word(p));
  tg->kind = xrealloc(tg->kind, tg->w.cap * sizeof(*tg->kind));
  tg->kind[n] = kind;
}

static void parse_redirs(struct parser *p) {
  while (!p->cx->stop && p->tok.type == T_REDIR)
    parse_redir(p, NULL);
}

// ---- parser: compound commands -------------------------------------------

static void parse_subshell(struct parser *p) {
  if (p->tok.dbl) {
    shell_fail(p->cx, "arithmetic command (( ))");
    return;
  }
  shell_advance(p);
  shell_parse_list(p);
  expect(p, T_RPAREN);
  parse_redirs(p);
}

static void parse_group(struct parser *p) {
  shell_advance(p);
  shell_parse_list(p);
  expect_kw(p, "}");
  parse_redirs(p);
}

static void parse_if(struct parser *p) {
  shell_advance(p);
  shell_parse_list(p);
  expect_kw(p, "then");
  shell_parse_list(p);
  while (!p->cx->stop && tok_is(p, "elif")) {
    shell_advance(p);
    shell_parse_list(p);
    expect_kw(p, "then");
    shell_parse_list(p);
  }
  if (tok_is(p, "else")) {
    shell_advance(p);
    shell_parse_list(p);
  }
  expect_kw(p, "fi");
  parse_redirs(p);
}

static void parse_do_done(struct parser *p) {
  expect_kw(p, "do");
  p->cx->loop_depth++;
  shell_parse_list(p);
  p->cx->loop_depth--;
  expect_kw(p, "done");
  parse_redirs(p);
}

static void parse_while(struct parser *p) {
  shell_advance(p);
  p->cx->loop_depth++;
  shell_parse_list(p);
  p->cx->loop_depth--;
  parse_do_done(p);
}

// for NAME [in WORDS] ; do LIST done (also select); for (( )) is opaque.
static void parse_for(struct parser *p) {
  shell_advance(p);
  if (p->tok.type == T_LPAREN) {
    shell_fail(p->cx, "arithmetic for (( ))");
    return;
  }
  if (p->tok.type != T_WORD || !p->tok.w.plain) {
    syntax_error(p);
    return;
  }
  shell_advance(p);
  skip_nl(p);
  if (tok_is(p, "in")) {
    shell_advance(p);
    while (p->tok.type == T_WORD) // expansions already analysed
      shell_advance(p);
    if (p->tok.type != T_SEMI && p->tok.type != T_NL) {
      syntax_error(p);
      return;
    }
    shell_advance(p);
  } else if (p->tok.type == T_SEMI) {
    shell_advance(p);
  }
  skip_nl(p);
  parse_do_done(p);
}

static void parse_case_item(struct parser *p) {
  if (p->tok.type == T_LPAREN)
    shell_advance(p);
  expect(p, T_WORD);
  while (!p->cx->stop && p->tok.type == T_PIPE) {
    shell_advance(p);
    expect(p, T_WORD);
  }
  expect(p, T_RPAREN);
  shell_parse_list(p);
}

static void parse_case(struct parser *p) {
  shell_advance(p);
  expect(p, T_WORD);
  skip_nl(p);
  expect_kw(p, "in");
  skip_nl(p);
  while (!p->cx->stop && !tok_is(p, "esac")) {
    parse_case_item(p);
    if (p->tok.type == T_DSEMI || p->tok.type == T_SEMIAMP ||
        p->tok.type == T_DSEMIAMP) {
      shell_advance(p);
      skip_nl(p);
    } else if (!tok_is(p, "esac")) {
      syntax_error(p);
    }
  }
  expect_kw(p, "esac");
  parse_redirs(p);
}

// A function body: parsed (its commands may run whenever it is called).
static void parse_function_body(struct parser *p) {
  static const char *const starts[] = {"{",   "if",   "while",  "until",
                                       "for", "case", "select", "[["};
  skip_nl(p);
  bool ok = p->tok.type == T_LPAREN;
  for (size_t i = 0; !ok && i < sizeof(starts) / sizeof(starts[0]); i++)
    ok = tok_is(p, starts[i]);
  if (!ok) {
    syntax_error(p);
    return;
  }
  p->cx->loop_depth++;
  parse_command(p);
  p->cx->loop_depth--;
}

static void parse_function(struct parser *p) {
  shell_advance(p);
  expect(p, T_WORD);
  if (p->tok.type == T_LPAREN) {
    shell_advance(p);
    expect(p, T_RPAREN);
  }
  parse_function_body(p);
}

static void push_synthetic(struct words *ws, const char *s) {
  struct pword w = {.plain = true};
  buf_put(&w.text, s, strlen(s));
  words_push(ws, w);
}

// [[ ... ]]: one command atom; && || ( ) < > inside are plain words.
static void parse_cond(struct parser *p) {
  static const char *const names[] = {
      [T_LPAREN] = "(", [T_RPAREN] = ")", [T_AND] = "&&", [T_OR] = "||"};
  struct words ws = {0};
  words_push(&ws, (struct pword){0});
  buf_put(&ws.v[0].text, "[[", 2);
  p->mode = LEX_COND;
  shell_advance(p);
  while (!p->cx->stop) {
    enum tok_type t = p->tok.type;
    if (tok_is(p, "]]")) {
      push_synthetic(&ws, "]]");
      p->mode = LEX_NORMAL;
      shell_advance(p);
      break;
    }
    if (t == T_WORD) {
      bool regex = tok_is(p, "=~");
      p->mode = regex ? LEX_REGEX : LEX_COND;
      words_push(&ws, take_word(p));
      continue;
    }
    p->mode = LEX_COND;
    if (t == T_LPAREN || t == T_RPAREN || t == T_AND || t == T_OR)
      push_synthetic(&ws, names[t]);
    else if (t == T_REDIR && (p->tok.redir == R_IN || p->tok.redir == R_OUT))
      push_synthetic(&ws, p->tok.redir == R_IN ? "<" : ">");
    else
      syntax_error(p);
    shell_advance(p);
  }
  p->mode = LEX_NORMAL;
  if (!p->cx->stop)
    shell_build_simple(p->cx, ws.v, ws.n, false, p->depth);
  words_free(&ws);
  parse_redirs(p);
}

// ---- parser: simple commands, pipelines, lists ---------------------------

// A shell that reads its script from stdin: a literal here-string or
// heredoc is that script; a pipe or the inherited stdin cannot be known.
static void feed_shell(struct parser *p, const struct targets *tg,
                       size_t pend_from) {
  if (tg->has_herestr && tg->herestr.dynamic)
    shell_opaque(p->cx, "dynamic here-string fed to a shell");
  else if (tg->has_herestr)
    shell_analyse_text(p->cx, wt(&tg->herestr), tg->herestr.text.len,
                       p->depth + 1);
  else if (p->npend > pend_from)
    for (size_t i = pend_from; i < p->npend; i++)
      p->pend[i].to_shell = true;
  else
    shell_opaque(p->cx, "a shell reading commands from a pipe or a file");
}

// An interpreter that reads its program from stdin: python3 <<'EOF' is a
// program in plain sight, like python3 -c; from a pipe, a file, or with
// expansions spliced into it, it is one no atom shows.
static void feed_code(struct parser *p, const struct targets *tg,
                      size_t pend_from) {
  if (tg->has_herestr && tg->herestr.dynamic)
    shell_opaque(p->cx, "a dynamic program fed to an interpreter");
  else if (!tg->has_herestr && p->npend == pend_from)
    shell_opaque(p->cx, "an interpreter reading its program from a pipe or "
                        "a file");
  for (size_t i = pend_from; i < p->npend; i++)
    p->pend[i].to_code = true;
}

static void parse_simple(struct parser *p) {
  struct words ws = {0};
  struct targets tg = {0};
  size_t pend_from = p->npend;
  while (!p->cx->stop) {
    if (p->tok.type == T_WORD) {
      words_push(&ws, take_word(p));
    } else if (p->tok.type == T_REDIR) {
      parse_redir(p, &tg);
    } else if (p->tok.type == T_LPAREN && ws.n == 1 && tg.w.n == 0 &&
               !ws.v[0].assign && !ws.v[0].dynamic) {
      shell_advance(p); // NAME ( ) body
      expect(p, T_RPAREN);
      parse_function_body(p);
      goto done;
    } else {
      break;
    }
  }
  p->cx->stdin_shell = p->cx->stdin_code = false;
  shell_build_simple(p->cx, ws.v, ws.n, false, p->depth);
  if (p->cx->stdin_shell)
    feed_shell(p, &tg, pend_from);
  else if (p->cx->stdin_code)
    feed_code(p, &tg, pend_from);
  p->cx->stdin_shell = p->cx->stdin_code = false;
  for (size_t i = 0; i < tg.w.n; i++)
    redir_target(p->cx, tg.kind[i], &tg.w.v[i]);
done:
  words_free(&ws);
  words_free(&tg.w);
  free(tg.kind);
  free(tg.herestr.text.s);
}

static void parse_command(struct parser *p) {
  static const struct {
    const char *kw;
    void (*fn)(struct parser *);
  } compound[] = {
      {"{", parse_group},     {"if", parse_if},   {"while", parse_while},
      {"until", parse_while}, {"for", parse_for}, {"select", parse_for},
      {"case", parse_case},   {"[[", parse_cond}, {"function", parse_function},
  };
  if (!shell_enter(p))
    return;
  if (p->tok.type == T_LPAREN) {
    parse_subshell(p);
    shell_leave(p);
    return;
  }
  if (tok_is(p, "coproc")) {
    shell_fail(p->cx, "coproc");
    shell_leave(p);
    return;
  }
  for (size_t i = 0; i < sizeof(compound) / sizeof(compound[0]); i++) {
    if (tok_is(p, compound[i].kw)) {
      compound[i].fn(p);
      shell_leave(p);
      return;
    }
  }
  parse_simple(p);
  shell_leave(p);
}

// `time` is the keyword unless an option other than -p follows (then, as
// in posix mode, it is the time program, a wrapper).
static bool time_keyword(const struct parser *p) {
  size_t i = p->pos;
  while (at(p, i) == ' ' || at(p, i) == '\t')
    i++;
  if (at(p, i) != '-')
    return true;
  char o = at(p, i + 1), e = at(p, i + 2);
  return (o == 'p' || o == '-') && (is_meta(e) || i + 2 >= p->end);
}

static void parse_pipeline(struct parser *p) {
  bool prefix = false;
  for (;;) {
    if (tok_is(p, "!")) {
      shell_advance(p);
    } else if (tok_is(p, "time") && time_keyword(p)) {
      shell_advance(p);
      if (tok_is(p, "-p") || tok_is(p, "--"))
        shell_advance(p);
    } else {
      break;
    }
    prefix = true;
  }
  if (!starts_command(p)) {
    if (!prefix)
      syntax_error(p);
    return;
  }
  parse_command(p);
  while (!p->cx->stop && (p->tok.type == T_PIPE || p->tok.type == T_PIPEAMP)) {
    shell_advance(p);
    skip_nl(p);
    while (tok_is(p, "!")) // not bash syntax here, but never hide b in ! b
      shell_advance(p);
    if (!starts_command(p)) {
      syntax_error(p);
      return;
    }
    parse_command(p);
  }
}

static void parse_and_or(struct parser *p) {
  parse_pipeline(p);
  while (!p->cx->stop && (p->tok.type == T_AND || p->tok.type == T_OR)) {
    shell_advance(p);
    skip_nl(p);
    if (!starts_command(p)) {
      syntax_error(p);
      return;
    }
    parse_pipeline(p);
  }
}

// Commands separated by ; & and newlines, up to a token that cannot start
// one (EOF, ')', ';;', a closing reserved word): the caller checks it.
void shell_parse_list(struct parser *p) {
  for (;;) {
    skip_nl(p);
    if (!starts_command(p))
      return;
    parse_and_or(p);
    if (p->tok.type == T_SEMI || p->tok.type == T_AMP)
      shell_advance(p);
    else if (p->tok.type != T_NL)
      return;
  }
}

void shell_analyse_text(struct ctx *cx, const char *s, size_t len, int depth) {
  struct parser p = {.cx = cx, .s = s, .end = len, .depth = depth};
  if (depth > MAX_DEPTH) {
    shell_fail(cx, "nested too deeply");
    return;
  }
  shell_advance(&p);
  shell_parse_list(&p);
  if (!cx->stop && p.tok.type != T_EOF)
    syntax_error(&p);
  if (!cx->stop && p.npend)
    shell_fail(cx, "unterminated here-document");
  tok_free(&p.tok);
  for (size_t i = 0; i < p.npend; i++)
    free(p.pend[i].delim);
}

// ---- files written and run by the same line -------------------------------

static const char *strip_dot(const char *p) {
  while (p[0] == '.' && p[1] == '/')
    p += 2;
  return p;
}

static bool written(const struct shell_result *r, const char *path) {
  for (size_t i = 0; i < r->natoms; i++) {
    const struct shell_atom *a = &r->atoms[i];
    if (a->kind == SHELL_EDIT && a->path &&
        (a->path_dynamic || strcmp(strip_dot(a->path), strip_dot(path)) == 0))
      return true;
  }
  return false;
}

// A program the same line writes and then runs (printf ... > s.sh; ./s.sh,
// or bash s.sh): what it runs and writes is in no atom.
static void written_and_run(struct ctx *cx) {
  const struct shell_result *r = cx->out;
  for (size_t i = 0; i < r->natoms && !r->opaque; i++) {
    const struct shell_atom *a = &r->atoms[i];
    if (a->kind != SHELL_CMD || !a->nwords)
      continue;
    static const char *const runs[] = {
        "sh",     "bash",    "dash", "zsh",  "ksh",  "rbash", "ash",  "mksh",
        "python", "python3", "perl", "node", "ruby", "php",   "make", "awk"};
    const char *b = strrchr(a->words[0].text, '/');
    b = b ? b + 1 : a->words[0].text;
    bool runner = false;
    for (size_t j = 0; j < sizeof(runs) / sizeof(runs[0]); j++)
      runner = runner || (b[0] == runs[j][0] && strcmp(b, runs[j]) == 0);
    for (size_t k = 0; k < a->nwords && k < 2; k++) {
      const struct shell_word *w = &a->words[k];
      if (!w->dynamic && (k == 1 ? runner : strchr(w->text, '/') != NULL) &&
          w->text[0] != '-' && written(r, w->text)) {
        shell_opaque(cx, "runs a file the same command writes");
        break;
      }
    }
  }
}

// ---- public ---------------------------------------------------------------

int shell_analyse(const char *script, const char *home,
                  struct shell_result *out) {
  *out = (struct shell_result){0};
  struct ctx cx = {.home = home, .out = out};
  size_t len = script ? strnlen(script, (size_t)MAX_INPUT + 1) : 0;
  if (!script)
    shell_fail(&cx, "no command");
  else if (len > MAX_INPUT)
    shell_fail(&cx, "command too long");
  else if (strspn(script, " \t\r\n") == len)
    shell_fail(&cx, "empty command");
  else
    shell_analyse_text(&cx, script, len, 0);
  if (!cx.stop)
    written_and_run(&cx);
  for (size_t i = 0; i < cx.nbases; i++)
    free(cx.bases[i]);
  return out->opaque ? -1 : 0;
}

void shell_result_free(struct shell_result *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->natoms; i++) {
    struct shell_atom *a = &r->atoms[i];
    for (size_t j = 0; j < a->nwords; j++)
      free(a->words[j].text);
    free(a->words);
    for (size_t j = 0; j < a->nassign; j++)
      free(a->assign[j]);
    free(a->assign);
    free(a->path);
  }
  free(r->atoms);
  *r = (struct shell_result){0};
}
