// The shell analyser's lexer: bytes become tokens and words.
//
// A word is quote-removed; an expansion ($VAR, ${..}, $(..), `..`, <(..),
// globs, braces, ~user) is kept as written and makes the word dynamic.
// Command substitutions are parsed where they stand (their atoms are
// emitted at once); backquote bodies are unescaped and parsed as scripts.
// Heredoc bodies are read at the newline that ends their command.

#include "shell_priv.h"

// ---- lexer: characters ---------------------------------------------------

// The state of the word being lexed.
struct wstate {
  struct pword *w;
  bool name_run;  // all so far is an unquoted NAME
  bool plus;      // NAME+ (before =)
  bool in_value;  // after an assignment's =
  bool tilde_ok;  // a ~ here would be expanded
  unsigned brace; // open unquoted { (brace expansion)
  bool brace_sep; // an unquoted , or .. inside them
  bool bracket;   // an unquoted [ (glob) waits for its ]
  size_t nprocsub;
  bool procsub_first; // the word began with a process substitution
  size_t procsub_len; // text length right after it
};

static void word_put(struct parser *p, struct wstate *ws, const char *s,
                     size_t n) {
  if (shell_charge(p->cx, n))
    buf_put(&ws->w->text, s, n);
}

// A part that is not plain text: quotes, escapes, expansions.
static void ws_special(struct wstate *ws) {
  ws->w->plain = false;
  ws->name_run = false;
  ws->tilde_ok = false;
}

static void ws_quoted(struct wstate *ws) {
  ws_special(ws);
  ws->w->quoted = true;
}

// An expansion, kept as written from start to the current position.
static void dyn_put(struct parser *p, struct wstate *ws, size_t start) {
  ws_special(ws);
  ws->w->dynamic = true;
  word_put(p, ws, p->s + start, p->pos - start);
}

static void lex_single(struct parser *p, struct wstate *ws) {
  size_t start = p->pos + 1;
  const char *q =
      start < p->end ? memchr(p->s + start, '\'', p->end - start) : NULL;
  ws_quoted(ws);
  if (!q) {
    shell_fail(p->cx, "unterminated quote");
    return;
  }
  word_put(p, ws, p->s + start, (size_t)(q - (p->s + start)));
  p->pos = (size_t)(q - p->s) + 1;
}

static void lex_dollar(struct parser *p, struct wstate *ws, bool in_dq);
static void lex_backtick(struct parser *p, struct wstate *ws, bool in_dq);

static void lex_double(struct parser *p, struct wstate *ws) {
  ws_quoted(ws);
  p->pos++;
  while (!p->cx->stop) {
    if (p->pos >= p->end) {
      shell_fail(p->cx, "unterminated quote");
      return;
    }
    char c = p->s[p->pos], d = at(p, p->pos + 1);
    if (c == '"') {
      p->pos++;
      return;
    }
    if (c == '\\' && d == '\n') {
      p->pos += 2;
    } else if (c == '\\' && (d == '$' || d == '`' || d == '"' || d == '\\')) {
      word_put(p, ws, &d, 1);
      p->pos += 2;
    } else if (c == '$') {
      lex_dollar(p, ws, true);
    } else if (c == '`') {
      lex_backtick(p, ws, true);
    } else {
      word_put(p, ws, &c, 1);
      p->pos++;
    }
  }
}

// ---- lexer: $'...' -------------------------------------------------------

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static void put_utf8(struct parser *p, struct wstate *ws, uint32_t u) {
  char b[4];
  size_t n;
  if (u < 0x80) {
    b[0] = (char)u;
    n = 1;
  } else if (u < 0x800) {
    b[0] = (char)(0xc0 | (u >> 6));
    b[1] = (char)(0x80 | (u & 0x3f));
    n = 2;
  } else if (u < 0x10000) {
    b[0] = (char)(0xe0 | (u >> 12));
    b[1] = (char)(0x80 | ((u >> 6) & 0x3f));
    b[2] = (char)(0x80 | (u & 0x3f));
    n = 3;
  } else {
    b[0] = (char)(0xf0 | ((u >> 18) & 0x07));
    b[1] = (char)(0x80 | ((u >> 12) & 0x3f));
    b[2] = (char)(0x80 | ((u >> 6) & 0x3f));
    b[3] = (char)(0x80 | (u & 0x3f));
    n = 4;
  }
  word_put(p, ws, b, n);
}

// Reads up to max digits of base 8 or 16 at p->pos.
static uint32_t read_num(struct parser *p, int base, int max) {
  uint32_t v = 0;
  for (int i = 0; i < max; i++) {
    int d = hexval(at(p, p->pos));
    if (d < 0 || d >= base)
      break;
    v = v * (uint32_t)base + (uint32_t)d;
    p->pos++;
  }
  return v;
}

// One escape of $'...' at p->pos (the backslash); false on a NUL byte,
// which bash would silently cut the word at.
static bool ansi_escape(struct parser *p, struct wstate *ws) {
  static const char from[] = "ntrabeEfv\\'\"?";
  static const char to[] = "\n\t\r\a\b\033\033\f\v\\'\"?";
  char d = at(p, p->pos + 1);
  const char *e = d ? strchr(from, d) : NULL;
  p->pos += 2;
  if (e) {
    word_put(p, ws, &to[e - from], 1);
    return true;
  }
  uint32_t v;
  if (d >= '0' && d <= '7') {
    p->pos--;
    v = read_num(p, 8, 3) & 0xff;
  } else if (d == 'x' || d == 'u' || d == 'U') {
    v = read_num(p, 16, d == 'x' ? 2 : d == 'u' ? 4 : 8);
  } else if (d == 'c' && at(p, p->pos) && p->pos < p->end) {
    v = (uint32_t)(at(p, p->pos++) & 0x1f);
  } else {
    word_put(p, ws, "\\", 1);
    if (d && p->pos - 1 < p->end)
      word_put(p, ws, &d, 1);
    return true;
  }
  if (v == 0)
    return false;
  if (d == 'u' || d == 'U')
    put_utf8(p, ws, v > 0x10ffff ? 0xfffd : v);
  else {
    char c = (char)v;
    word_put(p, ws, &c, 1);
  }
  return true;
}

static void lex_ansi(struct parser *p, struct wstate *ws) {
  ws_quoted(ws);
  p->pos += 2;
  while (!p->cx->stop) {
    if (p->pos >= p->end) {
      shell_fail(p->cx, "unterminated quote");
      return;
    }
    char c = p->s[p->pos];
    if (c == '\'') {
      p->pos++;
      return;
    }
    if (c == '\\') {
      if (!ansi_escape(p, ws))
        shell_fail(p->cx, "NUL byte in $'...'");
      continue;
    }
    word_put(p, ws, &c, 1);
    p->pos++;
  }
}

// ---- lexer: substitutions ------------------------------------------------

// Parses the list of $( ), <( ) or >( ) up to its ')', with the same
// parser (heredocs inside live in the same text).
static void nested_list(struct parser *p) {
  if (!shell_enter(p))
    return;
  enum lex_mode mode = p->mode;
  size_t base = p->pend_base;
  p->mode = LEX_NORMAL;
  p->pend_base = p->npend;
  shell_advance(p);
  shell_parse_list(p);
  if (!p->cx->stop && p->tok.type != T_RPAREN)
    shell_fail(p->cx, "unterminated command substitution");
  if (!p->cx->stop && p->npend > p->pend_base)
    shell_fail(p->cx, "unterminated here-document");
  p->pend_base = base;
  p->mode = mode;
  shell_leave(p);
}

static void lex_cmdsub(struct parser *p, struct wstate *ws) {
  size_t start = p->pos;
  p->pos += 2;
  nested_list(p);
  if (!p->cx->stop)
    dyn_put(p, ws, start);
}

static void lex_procsub(struct parser *p, struct wstate *ws) {
  bool first = ws->w->text.len == 0 && ws->w->plain && !ws->w->quoted;
  lex_cmdsub(p, ws);
  if (first && ws->nprocsub == 0)
    ws->procsub_first = true;
  ws->nprocsub++;
  ws->procsub_len = ws->w->text.len;
}

// `...`: the body, unescaped, is a script of its own.
static void lex_backtick(struct parser *p, struct wstate *ws, bool in_dq) {
  size_t start = p->pos++;
  struct buf body = {0};
  for (;;) {
    if (p->cx->stop || p->pos >= p->end) {
      shell_fail(p->cx, "unterminated backquote");
      free(body.s);
      return;
    }
    char c = p->s[p->pos], d = at(p, p->pos + 1);
    if (c == '`') {
      p->pos++;
      break;
    }
    if (c == '\\' &&
        (d == '$' || d == '`' || d == '\\' || (in_dq && d == '"'))) {
      buf_putc(&body, d);
      p->pos += 2;
      continue;
    }
    buf_putc(&body, c);
    p->pos++;
  }
  if (shell_charge(p->cx, body.len))
    shell_analyse_text(p->cx, buf_str(&body), body.len, p->depth + 1);
  free(body.s);
  if (!p->cx->stop)
    dyn_put(p, ws, start);
}

// ${...}: skipped to its '}', but substitutions inside are analysed.
// $HOME and ${HOME} expand to home, as a leading ~ does: the same value.
static bool home_var(struct parser *p, struct wstate *ws) {
  static const char *const forms[] = {"$HOME", "${HOME}"};
  for (size_t i = 0; p->cx->home && i < 2; i++) {
    size_t n = strlen(forms[i]);
    if (p->end - p->pos < n || memcmp(p->s + p->pos, forms[i], n) != 0 ||
        (i == 0 && is_name_char(at(p, p->pos + n))))
      continue;
    ws_special(ws);
    word_put(p, ws, p->cx->home, strlen(p->cx->home));
    p->pos += n;
    return true;
  }
  return false;
}

// A subscript that is a literal index, @ or *: nothing to evaluate.
static bool plain_subscript(const char *s, size_t n) {
  if (n == 1 && (s[0] == '@' || s[0] == '*'))
    return true;
  size_t i = n && s[0] == '-' ? 1 : 0;
  if (i == n)
    return false;
  for (; i < n; i++)
    if (!is_digit(s[i]))
      return false;
  return true;
}

// A substring offset or length made of literal numbers only.
static bool plain_offset(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!is_digit(s[i]) && !strchr(" \t-+:", s[i]))
      return false;
  return true;
}

// True when bash evaluates the text of ${raw} as code beyond the visible
// substitutions: the @P transformation (prompt expansion runs $(..) in the
// value), indirection ${!x} (x may name a[$(..)]), an array subscript or a
// substring offset that is an arithmetic expression (a variable in it may
// hold a[$(..)], whose subscript bash expands and runs). Anything it cannot
// read counts as evaluated.
static bool param_evaluates(const char *s, size_t n) {
  size_t i = 0;
  if (n > 1 && s[0] == '#')
    i = 1; // ${#x}: the length
  if (i < n && s[i] == '!') {
    size_t j = i + 1;
    while (j < n && is_name_char(s[j]))
      j++;
    if (j == i + 1)
      return true;
    const char *rest = s + j;
    size_t m = n - j;
    return !((m == 1 && (rest[0] == '*' || rest[0] == '@')) ||
             (m == 3 && rest[0] == '[' && (rest[1] == '@' || rest[1] == '*') &&
              rest[2] == ']'));
  }
  if (i < n && is_name_start(s[i])) {
    while (i < n && is_name_char(s[i]))
      i++;
  } else if (i < n && is_digit(s[i])) {
    while (i < n && is_digit(s[i]))
      i++;
  } else if (i < n && strchr("@*#?$!-", s[i])) {
    i++;
  } else {
    return n != 1 || s[0] != '#'; // ${#} alone is the count
  }
  if (i < n && s[i] == '[') {
    const char *e = memchr(s + i, ']', n - i);
    if (!e || !plain_subscript(s + i + 1, (size_t)(e - (s + i + 1))))
      return true;
    i = (size_t)(e - s) + 1;
  }
  if (i >= n)
    return false;
  if (s[i] == '@')
    return i + 1 >= n || s[i + 1] == 'P' || !strchr("QEAKakuUL", s[i + 1]);
  if (s[i] == ':' && (i + 1 >= n || !strchr("-=?+", s[i + 1])))
    return !plain_offset(s + i + 1, n - i - 1);
  return false;
}

static void lex_param(struct parser *p, struct wstate *ws, bool in_dq) {
  size_t start = p->pos;
  p->pos += 2;
  if (!shell_enter(p))
    return;
  struct pword scratch = {0};
  struct wstate sws = {.w = &scratch};
  while (!p->cx->stop) {
    if (p->pos >= p->end) {
      shell_fail(p->cx, "unterminated ${");
      break;
    }
    char c = p->s[p->pos];
    if (c == '}') {
      p->pos++;
      break;
    }
    if (c == '\\')
      p->pos += 2;
    else if (c == '\'' && in_dq)
      // Inside "${...}" a ' is sometimes a quote and sometimes not.
      shell_fail(p->cx, "quote inside \"${...}\"");
    else if (c == '\'')
      lex_single(p, &sws);
    else if (c == '"')
      lex_double(p, &sws);
    else if (c == '$')
      lex_dollar(p, &sws, in_dq);
    else if (c == '`')
      lex_backtick(p, &sws, in_dq);
    else
      p->pos++;
  }
  free(scratch.text.s);
  shell_leave(p);
  if (!p->cx->stop && p->pos >= start + 3 &&
      param_evaluates(p->s + start + 2, p->pos - start - 3))
    shell_opaque(p->cx, "a parameter expansion that evaluates code");
  if (!p->cx->stop)
    dyn_put(p, ws, start);
}

// $((...)): dynamic; substitutions inside are analysed, quoting inside is
// not modelled.
static void lex_arith(struct parser *p, struct wstate *ws) {
  size_t start = p->pos;
  p->pos += 3;
  if (!shell_enter(p))
    return;
  struct pword scratch = {0};
  struct wstate sws = {.w = &scratch};
  int depth = 2;
  while (!p->cx->stop) {
    if (p->pos >= p->end) {
      shell_fail(p->cx, "unterminated $((");
      break;
    }
    char c = p->s[p->pos];
    if (c == '(') {
      depth++;
      p->pos++;
    } else if (c == ')') {
      p->pos++;
      if (--depth > 1)
        continue;
      if (at(p, p->pos) != ')')
        shell_fail(p->cx, "ambiguous $((");
      p->pos++;
      break;
    } else if (c == '$' || c == '`') {
      // The value of a variable or a substitution is evaluated as an
      // expression: a[$(..)] in it runs. Analysed, but never allowed.
      shell_opaque(p->cx, "arithmetic on an expansion");
      if (c == '$')
        lex_dollar(p, &sws, true);
      else
        lex_backtick(p, &sws, false);
    } else if (c == '\'' || c == '"' || c == '\\') {
      shell_fail(p->cx, "quoting inside $((...))");
    } else if (is_digit(c)) { // 42, 0x1f, 16#ff, 64#@_
      while (is_name_char(at(p, p->pos)) || at(p, p->pos) == '#' ||
             at(p, p->pos) == '@')
        p->pos++;
    } else if (is_name_start(c)) {
      // A variable's value is evaluated as an expression in turn.
      shell_opaque(p->cx, "arithmetic on a variable");
      p->pos++;
    } else {
      p->pos++;
    }
  }
  free(scratch.text.s);
  shell_leave(p);
  if (!p->cx->stop)
    dyn_put(p, ws, start);
}

static void lex_dollar(struct parser *p, struct wstate *ws, bool in_dq) {
  char d = at(p, p->pos + 1);
  size_t start = p->pos;
  if (d == '(' && at(p, p->pos + 2) == '(') {
    lex_arith(p, ws);
  } else if (d == '(') {
    lex_cmdsub(p, ws);
  } else if (d == '{' && !home_var(p, ws)) {
    lex_param(p, ws, in_dq);
  } else if (d == '{') {
    return;
  } else if (d == '\'' && !in_dq) {
    lex_ansi(p, ws);
  } else if (d == '"' && !in_dq) {
    p->pos++;
    lex_double(p, ws);
  } else if (d == '[') {
    shell_fail(p->cx, "$[...] arithmetic");
  } else if (home_var(p, ws)) {
    return;
  } else if (is_name_start(d)) {
    p->pos++;
    while (is_name_char(at(p, p->pos)))
      p->pos++;
    dyn_put(p, ws, start);
  } else if (d && (is_digit(d) || strchr("@*#?$!-", d))) {
    p->pos += 2;
    dyn_put(p, ws, start);
  } else {
    word_put(p, ws, "$", 1);
    ws->name_run = false;
    ws->tilde_ok = false;
    p->pos++;
  }
}

// ---- lexer: words --------------------------------------------------------

static void lex_tilde(struct parser *p, struct wstate *ws) {
  char d = at(p, p->pos + 1);
  p->pos++;
  ws_special(ws);
  if (p->pos >= p->end || d == '/' || is_meta(d) ||
      (d == ':' && ws->in_value)) {
    if (p->cx->home) {
      word_put(p, ws, p->cx->home, strlen(p->cx->home));
      return;
    }
    ws->w->dynamic = true;
  } else if (is_name_char(d) || d == '+' || d == '-') {
    ws->w->dynamic = true; // ~user, ~+, ~-
  }
  word_put(p, ws, "~", 1);
}

// Assignment detection and the glob/brace marks of one unquoted character.
static void lex_plain_char(struct parser *p, struct wstate *ws, char c) {
  struct pword *w = ws->w;
  bool tilde = false;
  if (ws->name_run) {
    if (c == '=' && w->text.len > (ws->plus ? 1u : 0u)) {
      w->assign = true;
      w->name_len = w->text.len - (ws->plus ? 1 : 0);
      ws->name_run = false;
      ws->in_value = true;
      tilde = true;
    } else if (c == '+' && at(p, p->pos + 1) == '=' && w->text.len > 0) {
      ws->plus = true;
    } else if (!is_name_char(c) || ws->plus ||
               (w->text.len == 0 && is_digit(c))) {
      ws->name_run = false;
    }
  }
  if (c == '*' || c == '?' || (c == ']' && ws->bracket))
    w->dynamic = true;
  else if (c == '[')
    ws->bracket = true;
  else if (c == '{' && ws->brace < 64)
    ws->brace++;
  else if (ws->brace && (c == ',' || (c == '.' && at(p, p->pos + 1) == '.')))
    ws->brace_sep = true;
  else if (c == ':' && ws->in_value)
    tilde = true;
  if (c == '}' && ws->brace) {
    ws->brace--;
    w->dynamic = w->dynamic || ws->brace_sep;
  }
  word_put(p, ws, &c, 1);
  p->pos++;
  ws->tilde_ok = tilde;
}

// In regex mode ( ) | and, inside parentheses, blanks belong to the word.
static bool regex_char(const struct parser *p, int *paren, char c) {
  if (p->mode != LEX_REGEX)
    return false;
  if (c == '(') {
    ++*paren;
    return true;
  }
  if (c == ')' && *paren > 0) {
    --*paren;
    return true;
  }
  return c == '|' || ((c == ' ' || c == '\t') && *paren > 0);
}

static void lex_word(struct parser *p, struct pword *w) {
  struct wstate ws = {.w = w, .name_run = true, .tilde_ok = true};
  w->plain = true;
  shell_charge(p->cx, WORD_COST);
  size_t start = p->pos;
  int paren = 0;
  while (!p->cx->stop && p->pos < p->end) {
    char c = p->s[p->pos], d = at(p, p->pos + 1);
    if ((c == '<' || c == '>') && d == '(') {
      lex_procsub(p, &ws);
      continue;
    }
    if (regex_char(p, &paren, c)) {
      ws_special(&ws);
      word_put(p, &ws, &c, 1);
      p->pos++;
      continue;
    }
    if (is_meta(c))
      break;
    if (c == '\'') {
      lex_single(p, &ws);
    } else if (c == '"') {
      lex_double(p, &ws);
    } else if (c == '\\' && d == '\n') {
      p->pos += 2;
    } else if (c == '\\') {
      if (p->pos + 1 >= p->end) {
        shell_fail(p->cx, "backslash at the end");
        break;
      }
      ws_quoted(&ws);
      word_put(p, &ws, &d, 1);
      p->pos += 2;
    } else if (c == '$') {
      lex_dollar(p, &ws, false);
    } else if (c == '`') {
      lex_backtick(p, &ws, false);
    } else if (c == '~' && ws.tilde_ok) {
      lex_tilde(p, &ws);
    } else {
      lex_plain_char(p, &ws, c);
    }
  }
  if (!p->cx->stop && p->pos == start)
    shell_fail(p->cx, "lexer stuck"); // not reachable; a loop guard
  w->procsub =
      ws.procsub_first && ws.nprocsub == 1 && ws.procsub_len == w->text.len;
}

// ---- lexer: heredocs -----------------------------------------------------

struct body {
  size_t from, to;
  bool quoted, to_shell, to_code;
};

// Finds the end of one heredoc body at p->pos. An unquoted body joins
// backslash-newline before comparing lines with the delimiter, as bash does.
static bool heredoc_body(struct parser *p, const struct heredoc *h,
                         struct body *b) {
  b->from = p->pos;
  b->quoted = h->quoted;
  b->to_shell = h->to_shell;
  b->to_code = h->to_code;
  struct buf line = {0};
  while (p->pos < p->end) {
    size_t line_start = p->pos;
    line.len = 0;
    if (h->strip)
      while (at(p, p->pos) == '\t')
        p->pos++;
    while (p->pos < p->end && p->s[p->pos] != '\n') {
      char c = p->s[p->pos];
      if (!h->quoted && c == '\\' && p->pos + 1 < p->end) {
        if (p->s[p->pos + 1] != '\n')
          buf_put(&line, p->s + p->pos, 2);
        p->pos += 2;
        continue;
      }
      buf_putc(&line, c);
      p->pos++;
    }
    if (p->pos < p->end)
      p->pos++;
    if (strcmp(buf_str(&line), h->delim) == 0) {
      b->to = line_start;
      free(line.s);
      return true;
    }
  }
  free(line.s);
  shell_fail(p->cx, "unterminated here-document");
  return false;
}

// The expansions of an unquoted heredoc body run: analyse them.
static void heredoc_expand(struct parser *p, const struct body *b) {
  size_t end = p->end, pos = p->pos;
  p->end = b->to;
  p->pos = b->from;
  struct pword scratch = {0};
  struct wstate sws = {.w = &scratch};
  while (!p->cx->stop && p->pos < p->end) {
    char c = p->s[p->pos];
    if (c == '\\')
      p->pos += 2;
    else if (c == '$')
      lex_dollar(p, &sws, true);
    else if (c == '`')
      lex_backtick(p, &sws, false);
    else
      p->pos++;
  }
  free(scratch.text.s);
  p->end = end;
  p->pos = pos;
}

// bash <<EOF: the body is a script. Expanded (unquoted) bodies with
// expansions in them are not modelled.
static void heredoc_script(struct parser *p, const struct body *b) {
  const char *s = p->s + b->from;
  size_t n = b->to - b->from;
  if (!b->quoted &&
      (memchr(s, '$', n) || memchr(s, '`', n) || memchr(s, '\\', n)))
    shell_opaque(p->cx, "expansions in a here-document fed to a shell");
  else
    shell_analyse_text(p->cx, s, n, p->depth + 1);
}

static void read_heredocs(struct parser *p) {
  if (p->pend_base > 0) { // bash would read an outer body here
    shell_fail(p->cx, "here-document across a substitution");
    return;
  }
  if (p->npend == 0)
    return;
  struct body bodies[MAX_HEREDOCS];
  size_t n = p->npend;
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    ok = ok && heredoc_body(p, &p->pend[i], &bodies[i]);
    free(p->pend[i].delim);
  }
  p->npend = 0;
  for (size_t i = 0; ok && i < n; i++)
    if (!bodies[i].quoted)
      heredoc_expand(p, &bodies[i]);
  for (size_t i = 0; ok && i < n; i++) {
    const char *s = p->s + bodies[i].from;
    size_t len = bodies[i].to - bodies[i].from;
    if (bodies[i].to_shell)
      heredoc_script(p, &bodies[i]);
    else if (bodies[i].to_code && !bodies[i].quoted &&
             (memchr(s, '$', len) || memchr(s, '`', len)))
      shell_opaque(p->cx, "expansions spliced into an interpreter's program");
  }
}

// ---- lexer: tokens -------------------------------------------------------

static void skip_blanks(struct parser *p) {
  while (p->pos < p->end) {
    char c = p->s[p->pos];
    if (c == ' ' || c == '\t')
      p->pos++;
    else if (c == '\\' && at(p, p->pos + 1) == '\n')
      p->pos += 2;
    else if (c == '#')
      while (p->pos < p->end && p->s[p->pos] != '\n')
        p->pos++;
    else
      return;
  }
}

static void lex_redir(struct parser *p, struct token *t) {
  static const struct {
    const char *op;
    enum redir r;
  } ops[] = {
      {"<<<", R_HERESTR},    {"<<-", R_HEREDOC_STRIP},
      {"<<", R_HEREDOC},     {"<&", R_DUP_IN},
      {"<>", R_RW},          {"<", R_IN},
      {">>", R_APPEND},      {">|", R_CLOBBER},
      {">&", R_DUP_OUT},     {">", R_OUT},
      {"&>>", R_ALL_APPEND}, {"&>", R_ALL},
  };
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    size_t n = strlen(ops[i].op);
    if (p->end - p->pos >= n && memcmp(p->s + p->pos, ops[i].op, n) == 0) {
      t->type = T_REDIR;
      t->redir = ops[i].r;
      p->pos += n;
      return;
    }
  }
}

// Operators made of ; & | and their length-2/3 forms.
static enum tok_type lex_op(struct parser *p) {
  char c = p->s[p->pos], d = at(p, p->pos + 1), e = at(p, p->pos + 2);
  static const struct {
    char c, d, e;
    enum tok_type t;
  } ops[] = {
      {';', ';', '&', T_DSEMIAMP}, {';', ';', 0, T_DSEMI},
      {';', '&', 0, T_SEMIAMP},    {';', 0, 0, T_SEMI},
      {'&', '&', 0, T_AND},        {'&', 0, 0, T_AMP},
      {'|', '|', 0, T_OR},         {'|', '&', 0, T_PIPEAMP},
      {'|', 0, 0, T_PIPE},
  };
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    if (ops[i].c != c || (ops[i].d && ops[i].d != d) ||
        (ops[i].e && ops[i].e != e))
      continue;
    p->pos += 1 + (ops[i].d != 0) + (ops[i].e != 0);
    return ops[i].t;
  }
  return T_EOF;
}

// An fd number before a redirection: `2>`, `10<&`.
static bool lex_fd(struct parser *p, struct token *t) {
  size_t i = p->pos;
  while (is_digit(at(p, i)))
    i++;
  char c = at(p, i);
  if (i == p->pos || p->mode == LEX_COND || (c != '<' && c != '>'))
    return false;
  if (at(p, i + 1) == '(') {
    shell_fail(p->cx, "fd number before a process substitution");
    return true;
  }
  p->pos = i;
  lex_redir(p, t);
  return true;
}

// {NAME}>file puts a new descriptor in NAME; {a[i]}> evaluates the
// subscript (a variable in it may hold a[$(..)]): opaque.
static void named_fd(struct parser *p, size_t start) {
  size_t end = p->pos;
  char c = at(p, end);
  if (p->cx->stop || (c != '<' && c != '>') || end < start + 3 ||
      p->s[start] != '{' || p->s[end - 1] != '}')
    return;
  bool name = is_name_start(p->s[start + 1]);
  for (size_t i = start + 2; name && i < end - 1; i++)
    name = is_name_char(p->s[i]);
  if (!name)
    shell_opaque(p->cx, "a named file descriptor with a subscript");
}

static struct token next_token(struct parser *p) {
  struct token t = {.type = T_EOF};
  skip_blanks(p);
  if (p->cx->stop || p->pos >= p->end)
    return t;
  char c = p->s[p->pos], d = at(p, p->pos + 1);
  if (c == '\n') {
    p->pos++;
    t.type = T_NL;
  } else if (c == '&' && d == '>') {
    lex_redir(p, &t);
  } else if (c == ';' || c == '&' || c == '|') {
    t.type = lex_op(p);
  } else if (c == '(' && p->mode != LEX_REGEX) {
    p->pos++;
    t.type = T_LPAREN;
    t.dbl = at(p, p->pos) == '(';
  } else if (c == ')') {
    p->pos++;
    t.type = T_RPAREN;
  } else if ((c == '<' || c == '>') && d != '(') {
    lex_redir(p, &t);
  } else if (!lex_fd(p, &t)) {
    size_t start = p->pos;
    t.type = T_WORD;
    lex_word(p, &t.w);
    named_fd(p, start);
  }
  return t;
}

// Heredoc bodies start after the newline that ends their command line;
// they are read when the parser consumes that newline, so the command
// (sh <<EOF?) is known by then.
void shell_advance(struct parser *p) {
  bool newline = p->tok.type == T_NL;
  tok_free(&p->tok);
  if (newline)
    read_heredocs(p);
  struct token t = next_token(p);
  tok_free(&p->tok); // whatever a nested parse left there
  p->tok = t;
  if (p->cx->stop)
    tok_free(&p->tok);
}
