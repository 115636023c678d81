// The shell analyser's atom builder: one simple command becomes atoms.
//
// The command atom itself, with the wrappers every rule type looks past
// removed (timeout, nice, ...); for exec wrappers (sudo, env, xargs, find
// -exec, ...) also the inner command as a deny-only atom; for sh -c the
// script's atoms instead; for git with global options a deny-only atom
// without them; for known file commands their path operands as deny-only
// file atoms; and a cd moves where later relative paths may point.

#include "shell_priv.h"

#include <stdio.h>

// ---- atom builder: options -----------------------------------------------

// Options of a command, getopt style. shorts: a letter, then ':' when it
// takes an argument or '?' when it takes an optional attached one. longs:
// space separated "name", "name:" (takes an argument), "name/x" (same as
// short x, including whether it takes an argument), "name:/x". sread and
// sedit: letters (or the pseudo letter '@') whose argument is a file read
// or written.
struct optspec {
  const char *shorts;
  const char *longs;
  const char *sread;
  const char *sedit;
  bool paths_real; // its file arguments are effects an allow must cover
};

struct optstate {
  uint64_t seen; // bit per letter (opt_bit)
  bool unknown;
};

static int opt_bit(char c) {
  if (c >= 'a' && c <= 'z')
    return c - 'a';
  if (c >= 'A' && c <= 'Z')
    return 26 + c - 'A';
  if (c >= '0' && c <= '9')
    return 52 + c - '0';
  return 62;
}

static bool seen(const struct optstate *st, char c) {
  return st->seen & ((uint64_t)1 << opt_bit(c));
}

// What a command's builder needs.
struct cmd {
  struct ctx *cx;
  const struct pword *as; // leading assignments
  size_t nas;
  const struct pword *w; // w[0] is the command name
  size_t n;
  bool deny_only;
  int depth;
  bool xargs; // a bare xargs was stripped: more arguments come from stdin
};

static void opt_path(const struct cmd *c, const struct optspec *sp, char letter,
                     const char *arg, bool dyn) {
  if (!arg || !letter || strcmp(arg, "-") == 0) // "-": stdin or stdout
    return;
  bool deny_only = sp->paths_real ? c->deny_only : true;
  if (sp->sread && strchr(sp->sread, letter))
    shell_emit_path(c->cx, SHELL_READ, arg, dyn, deny_only);
  if (sp->sedit && strchr(sp->sedit, letter))
    shell_emit_path(c->cx, SHELL_EDIT, arg, dyn, deny_only);
}

// Looks up --name in sp->longs; *arg: takes an argument; *alias: its
// letter or 0.
static bool find_long(const struct optspec *sp, const char *name, size_t len,
                      bool *arg, char *alias) {
  const char *s = sp->longs ? sp->longs : "";
  while (*s) {
    while (*s == ' ')
      s++;
    size_t n = strcspn(s, " :/");
    const char *e = s + n;
    *arg = *e == ':';
    e += *arg;
    *alias = *e == '/' ? e[1] : 0;
    if (n && n == len && memcmp(s, name, len) == 0) {
      const char *d =
          *alias ? strchr(sp->shorts ? sp->shorts : "", *alias) : NULL;
      *arg = *arg || (d && d[1] == ':');
      return true;
    }
    s = e + strcspn(e, " ");
  }
  return false;
}

static size_t take_long(const struct cmd *c, size_t k, const struct optspec *sp,
                        struct optstate *st) {
  const char *name = wt(&c->w[k]) + 2, *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  bool arg;
  char alias;
  if (!find_long(sp, name, len, &arg, &alias)) {
    // An option we do not know may write the file its value names.
    st->unknown = true;
    if (eq && eq[1])
      shell_emit_path(c->cx, SHELL_EDIT, eq + 1, c->w[k].dynamic, true);
    return 1;
  }
  if (alias)
    st->seen |= (uint64_t)1 << opt_bit(alias);
  if (eq) {
    opt_path(c, sp, alias, eq + 1, c->w[k].dynamic);
    return 1;
  }
  if (!arg)
    return 1;
  if (k + 1 >= c->n)
    return 1;
  opt_path(c, sp, alias, wt(&c->w[k + 1]), c->w[k + 1].dynamic);
  return 2;
}

static size_t take_short(const struct cmd *c, size_t k,
                         const struct optspec *sp, struct optstate *st) {
  const char *t = wt(&c->w[k]);
  for (size_t i = 1; t[i]; i++) {
    const char *d = t[i] != ':' && t[i] != '?' && sp->shorts
                        ? strchr(sp->shorts, t[i])
                        : NULL;
    if (!d) {
      st->unknown = true;
      continue;
    }
    st->seen |= (uint64_t)1 << opt_bit(t[i]);
    if (d[1] == '?')
      return 1;
    if (d[1] != ':')
      continue;
    if (t[i + 1]) {
      opt_path(c, sp, t[i], t + i + 1, c->w[k].dynamic);
      return 1;
    }
    if (k + 1 >= c->n)
      return 1;
    opt_path(c, sp, t[i], wt(&c->w[k + 1]), c->w[k + 1].dynamic);
    return 2;
  }
  return 1;
}

// Consumes the option at w[k]: the number of words it takes, or 0 when
// w[k] is an operand or "--".
static size_t take_opt(const struct cmd *c, size_t k, const struct optspec *sp,
                       struct optstate *st) {
  const char *t = wt(&c->w[k]);
  if (c->w[k].dynamic || t[0] != '-' || t[1] == '\0' || strcmp(t, "--") == 0)
    return 0;
  if (t[1] == '-')
    return take_long(c, k, sp, st);
  return take_short(c, k, sp, st);
}

// Skips options from w[k]; returns the index after them (and after "--").
static size_t skip_opts(const struct cmd *c, size_t k, const struct optspec *sp,
                        struct optstate *st) {
  size_t used;
  while (k < c->n && (used = take_opt(c, k, sp, st)) > 0)
    k += used;
  if (k < c->n && wis(&c->w[k], "--"))
    k++;
  return k;
}

static bool stdin_path(const char *t);
static bool is_shell_or_interpreter(const char *name);
static bool code_assign(const char *t, size_t n, bool dynamic);
static bool assigns_code(const struct pword *w, size_t n);
struct wrapper;
static const struct wrapper *find_wrapper(const char *name);
static bool one_of(const char *s, const char *const *list, size_t n);

// ---- atom builder: command atoms -----------------------------------------

static const char *base_name(const char *s) {
  const char *b = strrchr(s, '/');
  return b && b[1] ? b + 1 : s;
}

// Wrappers at a path are trusted only in the system's own directories: a
// /tmp/x/timeout may be anything, so allow rules must not look past it.
static bool trusted_path(const char *s) {
  static const char *const dirs[] = {"/bin/",           "/usr/bin/",
                                     "/usr/local/bin/", "/sbin/",
                                     "/usr/sbin/",      "/usr/local/sbin/"};
  const char *b = strrchr(s, '/');
  if (!b)
    return true;
  size_t n = (size_t)(b - s) + 1;
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
    if (strlen(dirs[i]) == n && memcmp(s, dirs[i], n) == 0)
      return true;
  return false;
}

static bool name_is(const char *s, size_t n, const char *lit) {
  return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool name_safe(const char *s, size_t n) {
  static const char *const safe[] = {
      "LANG", "TZ", "NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "CI"};
  for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++)
    if (name_is(s, n, safe[i]))
      return true;
  return n > 3 && memcmp(s, "LC_", 3) == 0;
}

static bool ci_prefix(const char *s, size_t n, const char *pre) {
  size_t m = strlen(pre);
  if (m > n)
    return false;
  for (size_t i = 0; i < m; i++)
    if ((s[i] | 0x20) != (pre[i] | 0x20))
      return false;
  return true;
}

static bool ci_suffix(const char *s, size_t n, const char *suf) {
  size_t m = strlen(suf);
  return m <= n && ci_prefix(s + n - m, m, suf);
}

// Whether the variable name s (n bytes) is one of exact, starts with one of
// pre or ends with one of suf, case-insensitively.
static bool name_listed(const char *s, size_t n, const char *const *exact,
                        size_t nexact, const char *const *pre, size_t npre,
                        const char *const *suf, size_t nsuf) {
  for (size_t i = 0; i < nexact; i++)
    if (strlen(exact[i]) == n && ci_prefix(s, n, exact[i]))
      return true;
  for (size_t i = 0; i < npre; i++)
    if (ci_prefix(s, n, pre[i]))
      return true;
  for (size_t i = 0; i < nsuf; i++)
    if (ci_suffix(s, n, suf[i]))
      return true;
  return false;
}

// Names whose assignment, even alone (`PATH=/x; ls`), changes what the
// commands after it run. Case-insensitive: zsh ties path to PATH.
static bool name_dangerous(const char *s, size_t n) {
  static const char *const exact[] = {
      "PATH",           "HOME",       "IFS",       "ENV",      "BASH_ENV",
      "CDPATH",         "GLOBIGNORE", "SHELLOPTS", "BASHOPTS", "PS4",
      "PROMPT_COMMAND", "EDITOR",     "VISUAL",    "PAGER",    "SHELL",
      "PERL5LIB",       "PERL5OPT",   "RUBYOPT",   "RUBYLIB",  "NODE_PATH",
      "FPATH",          "ZDOTDIR",    "TMPDIR"};
  static const char *const pre[] = {
      "LD_", "DYLD_", "GIT_", "BASH_FUNC", "PYTHON", "NPM_CONFIG_", "SSH_"};
  static const char *const suf[] = {"_COMMAND", "PAGER", "_EDITOR", "_OPTIONS",
                                    "_PROXY"};
  return name_listed(s, n, exact, sizeof(exact) / sizeof(*exact), pre,
                     sizeof(pre) / sizeof(*pre), suf,
                     sizeof(suf) / sizeof(*suf));
}

static void add_assign(struct ctx *cx, struct shell_atom *a, const char *name,
                       size_t len, bool unsafe) {
  if (!shell_charge(cx, len))
    return;
  a->assign = xrealloc(a->assign, (a->nassign + 1) * sizeof(*a->assign));
  a->assign[a->nassign++] = xstrndup(name, len);
  a->unsafe_assign = a->unsafe_assign || unsafe;
}

static void set_assigns(struct ctx *cx, struct shell_atom *a,
                        const struct pword *as, size_t n) {
  for (size_t i = 0; i < n; i++)
    add_assign(cx, a, wt(&as[i]), as[i].name_len,
               as[i].dynamic || !name_safe(wt(&as[i]), as[i].name_len));
}

// A command atom of head (may be NULL) followed by w[0..n).
static struct shell_atom *emit_cmd(const struct cmd *c,
                                   const struct pword *head,
                                   const struct pword *w, size_t n,
                                   bool deny_only) {
  struct shell_atom *a = shell_push_atom(c->cx, SHELL_CMD, deny_only);
  if (!a)
    return NULL;
  size_t total = n + (head != NULL);
  a->words = xcalloc(total, sizeof(*a->words));
  for (size_t i = 0; i < total; i++) {
    const struct pword *src = head ? (i == 0 ? head : &w[i - 1]) : &w[i];
    shell_charge(c->cx, src->text.len + WORD_COST);
    a->words[i].text = xstrdup(wt(src));
    a->words[i].dynamic = src->dynamic;
  }
  a->nwords = total;
  set_assigns(c->cx, a, c->as, c->nas);
  return a;
}

static struct shell_atom *emit_main(const struct cmd *c) {
  return emit_cmd(c, NULL, c->w, c->n, c->deny_only);
}

// Analyses a script a wrapper runs (sh -c, watch, flock -c, trap); its atoms
// take the wrapper's assignments, and deny_only when asked.
static void analyse_script(const struct cmd *c, const struct pword *script,
                           bool deny_only) {
  struct ctx *cx = c->cx;
  if (script->dynamic) {
    shell_opaque(cx, "dynamic shell script");
    return;
  }
  size_t from = cx->out->natoms;
  shell_analyse_text(cx, wt(script), script->text.len, c->depth + 1);
  for (size_t i = from; i < cx->out->natoms; i++) {
    struct shell_atom *a = &cx->out->atoms[i];
    a->deny_only = a->deny_only || deny_only;
    if (a->kind == SHELL_CMD)
      set_assigns(cx, a, c->as, c->nas);
  }
}

static void build_inner(const struct cmd *c, size_t k) {
  if (k < c->n)
    shell_build_simple(c->cx, c->w + k, c->n - k, true, c->depth + 1);
}

// xargs: the inner command gets more arguments read from stdin, which no
// atom shows (the circuit breaker treats them as unknown targets); with -I
// they replace words anywhere, so a shell under it runs data as code.
static void xargs_inner(const struct cmd *c, const struct optstate *st,
                        size_t k) {
  struct ctx *cx = c->cx;
  if (k >= c->n)
    return;
  const char *name = base_name(wt(&c->w[k]));
  if ((seen(st, 'I') || seen(st, 'i')) &&
      (is_shell_or_interpreter(name) || find_wrapper(name)))
    shell_opaque(cx, "xargs -I putting data into a shell's script");
  cx->xargs++;
  build_inner(c, k);
  cx->xargs--;
}

// env NAME=value: an exported function (BASH_FUNC_x%%=() {...}) or a
// variable that holds code runs what no atom shows.
static void env_assigns(const struct cmd *c, size_t k) {
  for (; k < c->n; k++) {
    const char *t = wt(&c->w[k]), *eq = strchr(t, '=');
    if (!eq || c->w[k].dynamic)
      break;
    size_t n = (size_t)(eq - t);
    if (ci_prefix(t, n, "BASH_FUNC_") || code_assign(t, n, false))
      shell_opaque(c->cx, "an environment variable that holds code");
  }
}

// ---- atom builder: wrappers ----------------------------------------------

enum wkind { W_STRIP, W_EXEC };

enum wflag {
  WF_TIME = 1,       // positional duration (timeout)
  WF_CHROOT = 2,     // positional directory
  WF_EXEC = 4,       // exec: dynamic arguments are opaque
  WF_ENV = 8,        // env: -S is opaque
  WF_WATCH = 16,     // the rest is a script unless -x
  WF_FLOCK = 32,     // FILE, then a command or -c SCRIPT
  WF_IONICE = 64,    // -p/-P/-u: no command
  WF_COMMAND = 128,  // command -v/-V is not a wrapper
  WF_SCRIPT_C = 256, // su/runuser: -c SCRIPT
};

struct wrapper {
  const char *name;
  enum wkind kind;
  unsigned flags;
  struct optspec opts;
};

static const struct wrapper wrappers[] = {
    {"timeout",
     W_STRIP,
     WF_TIME,
     {"k:s:fpv", "kill-after:/k signal:/s foreground preserve-status verbose",
      NULL, NULL, false}},
    {"nice", W_STRIP, 0, {"n:0123456789", "adjustment:/n", NULL, NULL, false}},
    {"nohup", W_STRIP, 0, {"", "", NULL, NULL, false}},
    {"stdbuf",
     W_STRIP,
     0,
     {"i:o:e:", "input:/i output:/o error:/e", NULL, NULL, false}},
    {"time",
     W_STRIP,
     0,
     {"f:o:apqv", "format:/f output:/o append portability quiet verbose", NULL,
      "o", true}},
    {"command", W_STRIP, WF_COMMAND, {"pvV", "", NULL, NULL, false}},
    {"builtin", W_STRIP, 0, {"", "", NULL, NULL, false}},
    {"sudo",
     W_EXEC,
     0,
     {"C:D:g:p:R:r:T:t:U:u:AbEHhiKkLlnPSsVve",
      "askpass background bell close-from:/C chdir:/D preserve-env edit/e "
      "group:/g set-home help host: login remove-timestamp reset-timestamp "
      "list non-interactive preserve-groups prompt:/p chroot:/R role:/r stdin "
      "shell type:/t command-timeout:/T other-user:/U user:/u version validate",
      NULL, NULL, false}},
    {"doas", W_EXEC, 0, {"u:C:nsL", "", NULL, NULL, false}},
    {"env",
     W_EXEC,
     WF_ENV,
     {"u:C:S:i0v",
      "unset:/u chdir:/C split-string:/S ignore-environment null debug "
      "block-signal default-signal ignore-signal list-signal-handling",
      NULL, NULL, false}},
    {"exec", W_EXEC, WF_EXEC, {"a:cl", "", NULL, NULL, false}},
    {"watch",
     W_EXEC,
     WF_WATCH,
     {"n:q:s:bcCdegprtwx",
      "interval:/n equexit:/q shotsdir:/s beep color no-color differences "
      "errexit chgexit precise no-rerun no-title no-wrap exec/x",
      NULL, NULL, false}},
    {"setsid", W_EXEC, 0, {"cfw", "ctty fork wait", NULL, NULL, false}},
    {"ionice",
     W_EXEC,
     WF_IONICE,
     {"c:n:p:P:u:t", "class:/c classdata:/n pid:/p pgid:/P uid:/u ignore", NULL,
      NULL, false}},
    {"flock",
     W_EXEC,
     WF_FLOCK,
     {"c:E:w:sexnouFv",
      "command:/c conflict-exit-code:/E timeout:/w shared exclusive nonblock "
      "nb close unlock no-fork verbose fcntl",
      NULL, NULL, false}},
    {"chroot",
     W_EXEC,
     WF_CHROOT,
     {"", "userspec: groups: skip-chdir", NULL, NULL, false}},
    {"xargs",
     W_EXEC,
     0,
     {"a:d:E:I:L:n:P:s:e?i?l?0prtxo",
      "arg-file:/a delimiter:/d eof replace max-lines max-args:/n "
      "max-procs:/P max-chars:/s process-slot-var: null interactive "
      "no-run-if-empty verbose exit open-tty show-limits",
      "a", NULL, false}},
    {"busybox", W_EXEC, 0, {"", "", NULL, NULL, false}},
    {"toybox", W_EXEC, 0, {"", "", NULL, NULL, false}},
    {"su",
     W_EXEC,
     WF_SCRIPT_C,
     {"c:s:g:G:w:lmpP",
      "command:/c session-command:/c shell:/s group:/g supp-group:/G "
      "whitelist-environment:/w login preserve-environment pty",
      NULL, NULL, false}},
    {"runuser",
     W_EXEC,
     WF_SCRIPT_C,
     {"c:s:g:G:u:w:lmpP",
      "command:/c session-command:/c shell:/s group:/g supp-group:/G user:/u "
      "whitelist-environment:/w login preserve-environment pty",
      NULL, NULL, false}},
};

static const struct wrapper *find_wrapper(const char *name) {
  for (size_t i = 0; i < sizeof(wrappers) / sizeof(wrappers[0]); i++)
    if (wrappers[i].name[0] == name[0] && strcmp(wrappers[i].name, name) == 0)
      return &wrappers[i];
  return NULL;
}

// Where the wrapped command starts: after options, `--` and positionals.
static size_t wrapper_inner(const struct cmd *c, const struct wrapper *wr,
                            struct optstate *st) {
  size_t k = skip_opts(c, 1, &wr->opts, st);
  if ((wr->flags & WF_ENV) && k < c->n && wis(&c->w[k], "-"))
    k = skip_opts(c, k + 1, &wr->opts, st); // env - CMD: -i
  if (wr->flags & (WF_TIME | WF_CHROOT | WF_FLOCK))
    k++;
  if ((wr->flags & WF_COMMAND) && (seen(st, 'v') || seen(st, 'V')))
    return c->n; // command -v: a lookup, no command runs
  return k;
}

// Strips the wrappers every rule type looks past (timeout, nice, ...);
// returns the exec-style wrapper to fall back on when one has an option we
// do not know or sits at an untrusted path, else NULL.
static const struct wrapper *strip_wrappers(struct cmd *c) {
  while (c->n >= 2 && !c->w[0].dynamic) {
    const char *name = base_name(wt(&c->w[0]));
    const struct wrapper *wr = find_wrapper(name);
    bool bare_xargs = strcmp(name, "xargs") == 0 && !c->w[1].dynamic &&
                      wt(&c->w[1])[0] != '-';
    if (!wr || (wr->kind != W_STRIP && !bare_xargs))
      return NULL;
    struct optstate st = {0};
    size_t k = bare_xargs ? 1 : wrapper_inner(c, wr, &st);
    if (st.unknown || !trusted_path(wt(&c->w[0])))
      return wr;
    if (k >= c->n)
      return NULL; // nothing after it: the wrapper is the command
    c->xargs = c->xargs || bare_xargs;
    c->w += k;
    c->n -= k;
  }
  return NULL;
}

static bool any_dynamic(const struct pword *w, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (w[i].dynamic)
      return true;
  return false;
}

// watch's command words are joined into a script (it runs sh -c).
static void watch_script(const struct cmd *c, size_t k) {
  struct pword script = {0};
  for (size_t i = k; i < c->n; i++) {
    if (i > k)
      buf_putc(&script.text, ' ');
    buf_put(&script.text, wt(&c->w[i]), c->w[i].text.len);
    script.dynamic = script.dynamic || c->w[i].dynamic;
  }
  if (shell_charge(c->cx, script.text.len))
    analyse_script(c, &script, true);
  free(script.text.s);
}

// The value of an option that carries a script: -c S, -cS, --command=S.
static const struct pword *script_opt(const struct cmd *c, size_t to,
                                      struct pword *tmp) {
  for (size_t k = 1; k < to && k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    if ((strcmp(t, "-c") == 0 || strcmp(t, "--command") == 0) && k + 1 < c->n)
      return &c->w[k + 1];
    const char *v = strncmp(t, "--command=", 10) == 0      ? t + 10
                    : (t[0] == '-' && t[1] == 'c' && t[2]) ? t + 2
                                                           : NULL;
    if (v) {
      *tmp = (struct pword){.dynamic = c->w[k].dynamic};
      buf_put(&tmp->text, v, strlen(v));
      return tmp;
    }
  }
  return NULL;
}

static void exec_wrapper(const struct cmd *c, const struct wrapper *wr) {
  struct optstate st = {0};
  emit_main(c);
  if ((wr->flags & WF_EXEC) && any_dynamic(c->w + 1, c->n - 1))
    shell_opaque(c->cx, "exec with a dynamic argument");
  size_t k = wrapper_inner(c, wr, &st);
  if ((wr->flags & WF_ENV) && seen(&st, 'S'))
    shell_opaque(c->cx, "env -S");
  if ((wr->flags & WF_IONICE) &&
      (seen(&st, 'p') || seen(&st, 'P') || seen(&st, 'u')))
    return;
  struct pword tmp = {0};
  const struct pword *script = NULL;
  if (wr->flags & WF_SCRIPT_C) // su [-] [user] -c SCRIPT: anywhere
    script = script_opt(c, c->n, &tmp);
  if (wr->flags & WF_FLOCK) { // flock [opts] FILE -c SCRIPT, or -c before
    script = script_opt(c, k - 1, &tmp);
    if (!script && k + 1 < c->n &&
        (wis(&c->w[k], "-c") || wis(&c->w[k], "--command")))
      script = &c->w[k + 1];
  }
  if (wr->flags & WF_ENV)
    env_assigns(c, k);
  // sudo -s/-i, doas -s without a command, su without -c: a shell that
  // reads its commands from stdin.
  if (!script && k >= c->n &&
      (((!strcmp(wr->name, "sudo") || !strcmp(wr->name, "doas")) &&
        (seen(&st, 's') || seen(&st, 'i'))) ||
       (wr->flags & WF_SCRIPT_C)))
    c->cx->stdin_shell = true;
  if (script)
    analyse_script(c, script, true);
  else if ((wr->flags & WF_WATCH) && !seen(&st, 'x') && k < c->n)
    watch_script(c, k);
  else if (!strcmp(wr->name, "xargs"))
    xargs_inner(c, &st, k);
  else if (!(wr->flags & WF_SCRIPT_C))
    build_inner(c, k);
  free(tmp.text.s);
}

// sh|bash|... [options] -c SCRIPT: the script's atoms replace the wrapper.
// Returns false when this is not the -c form (an ordinary command).
static bool dash_c_wrapper(const struct cmd *c) {
  static const char *const longs[] = {"login",  "noprofile", "norc",
                                      "posix",  "noediting", "restricted",
                                      "verbose"};
  bool has_c = false, has_s = false;
  size_t k = 1;
  for (; k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    bool known = false;
    if (c->w[k].dynamic) {
      emit_main(c);
      shell_opaque(c->cx, "dynamic shell argument");
      return true;
    }
    if ((t[0] != '-' && t[0] != '+') || (t[0] == '+' && !t[1]))
      break;
    if (strcmp(t, "--") == 0 || strcmp(t, "-") == 0) {
      k++;
      break;
    }
    for (size_t i = 0; t[1] == '-' && i < sizeof(longs) / sizeof(longs[0]); i++)
      known = known || strcmp(t + 2, longs[i]) == 0;
    for (size_t i = 1; t[1] != '-' && t[i]; i++) {
      known = (t[i] >= 'a' && t[i] <= 'z') || (t[i] >= 'A' && t[i] <= 'Z');
      if (!known)
        break;
      has_c = has_c || (t[0] == '-' && t[i] == 'c');
      has_s = has_s || (t[0] == '-' && t[i] == 's');
      if (t[i] == 'o' || t[i] == 'O')
        k++; // -o pipefail
    }
    if (!known) {
      emit_main(c);
      shell_opaque(c->cx, "unknown shell option");
      return true;
    }
  }
  if (has_c && k >= c->n) {
    emit_main(c);
    shell_opaque(c->cx, "a shell -c without a script");
    return true;
  }
  if (!has_c && k < c->n && (c->w[k].procsub || stdin_path(wt(&c->w[k])))) {
    emit_main(c);
    if (c->w[k].procsub)
      shell_opaque(c->cx, "a shell running a process substitution");
    else
      c->cx->stdin_shell = true; // sh /dev/stdin: reads stdin
    return true;
  }
  if (!has_c && (k >= c->n || has_s))
    c->cx->stdin_shell = true; // no script operand: it reads stdin
  if (!has_c || k >= c->n)
    return false;
  bool trusted = trusted_path(wt(&c->w[0]));
  if (!trusted || c->w[k].dynamic)
    emit_main(c);
  analyse_script(c, &c->w[k], c->deny_only || !trusted);
  return true;
}

// ---- atom builder: find, git, cd, trap -----------------------------------

static bool find_exec_word(const char *t) {
  return strcmp(t, "-exec") == 0 || strcmp(t, "-execdir") == 0 ||
         strcmp(t, "-ok") == 0 || strcmp(t, "-okdir") == 0;
}

static bool find_write_word(const char *t) {
  return strcmp(t, "-fprint") == 0 || strcmp(t, "-fprint0") == 0 ||
         strcmp(t, "-fls") == 0 || strcmp(t, "-fprintf") == 0;
}

// The end of a -exec command: `;`, or `+` right after `{}`.
static size_t find_exec_end(const struct cmd *c, size_t k) {
  size_t e = k;
  while (e < c->n && !wis(&c->w[e], ";") &&
         !(wis(&c->w[e], "+") && e > k && wis(&c->w[e - 1], "{}")))
    e++;
  return e;
}

// A -exec command; find puts file names where it says {}.
static void find_exec(const struct cmd *c, size_t from, size_t to) {
  if (to <= from)
    return;
  struct pword *w = xcalloc(to - from, sizeof(*w));
  for (size_t i = from; i < to; i++) {
    w[i - from] = c->w[i];
    w[i - from].dynamic = c->w[i].dynamic || strstr(wt(&c->w[i]), "{}");
  }
  shell_build_simple(c->cx, w, to - from, true, c->depth + 1);
  free(w); // the texts still belong to c->w
}

// find -delete removes what it finds below its starting points (default
// "."). Without a narrowing -name test before it, each starting point is
// an edit (of a directory that may hold protected files); with a -path
// test or a literal -name (which can name a protected file) the files are
// unknown; a -name glob such as '*.o' adds no edit atom.
static void find_deletes(const struct cmd *c) {
  static const char *const names[] = {"-name", "-iname"};
  static const char *const paths[] = {"-path",       "-ipath", "-wholename",
                                      "-iwholename", "-regex", "-iregex"};
  static const char *const branch[] = {"-o", "-or", "!", "-not", ",", "("};
  bool del = false, glob_name = false, unknown = false, branchy = false;
  size_t end = c->n;
  for (size_t k = 1; k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    if (end == c->n && (t[0] == '-' || t[0] == '(' || t[0] == '!'))
      end = k;
    branchy = branchy || one_of(t, branch, 6);
    if (del)
      continue;
    del = !strcmp(t, "-delete");
    if (k + 1 < c->n && one_of(t, names, 2) &&
        shell_pattern_narrows(wt(&c->w[k + 1]))) {
      const char *v = wt(&c->w[k + 1]);
      if (strpbrk(v, "*?[") && !c->w[k + 1].dynamic)
        glob_name = true;
      else
        unknown = true;
    }
    if (k + 1 < c->n && one_of(t, paths, 6))
      unknown = true;
  }
  if (!del || (glob_name && !branchy && !unknown))
    return;
  bool dyn = unknown && !branchy && !glob_name;
  if (end == 1)
    shell_emit_path(c->cx, SHELL_EDIT, ".", dyn, true);
  for (size_t k = 1; k < end; k++)
    shell_emit_path(c->cx, SHELL_EDIT, wt(&c->w[k]), dyn || c->w[k].dynamic,
                    true);
}

static void find_cmd(const struct cmd *c) {
  bool never = false;
  for (size_t k = 1; k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    never = never || c->w[k].dynamic || find_exec_word(t) ||
            find_write_word(t) || strcmp(t, "-delete") == 0;
  }
  struct shell_atom *a = emit_main(c);
  if (a)
    a->never_allow = never;
  find_deletes(c);
  for (size_t k = 1; k < c->n && !c->cx->stop; k++) {
    const char *t = wt(&c->w[k]);
    if (find_write_word(t) && k + 1 < c->n) {
      shell_emit_path(c->cx, SHELL_EDIT, wt(&c->w[k + 1]), c->w[k + 1].dynamic,
                      true);
    } else if (!c->w[k].dynamic && find_exec_word(t)) {
      size_t e = find_exec_end(c, k + 1);
      find_exec(c, k + 1, e);
      k = e;
    }
  }
}

static const struct optspec git_opts = {
    "C:c:pP",
    "git-dir: work-tree: namespace: config-env: super-prefix: list-cmds: "
    "attr-source: exec-path no-pager paginate bare no-replace-objects "
    "literal-pathspecs glob-pathspecs noglob-pathspecs icase-pathspecs "
    "no-optional-locks no-advice html-path man-path info-path",
    NULL, NULL, false};

// git -c KEY=VALUE with a key whose value is never run as a command.
static bool git_safe_key(const char *kv) {
  static const char *const pre[] = {"color.", "advice.", "column."};
  static const char *const exact[] = {
      "user.name",          "user.email",    "core.quotepath", "core.autocrlf",
      "init.defaultbranch", "core.abbrev",   "log.date",       "diff.noprefix",
      "diff.renames",       "core.safecrlf", "pull.rebase",    "push.default",
      "commit.gpgsign",     "tag.gpgsign",   "core.filemode"};
  size_t n = strcspn(kv, "=");
  for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
    if (ci_prefix(kv, n, pre[i]))
      return true;
  for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
    if (strlen(exact[i]) == n && ci_prefix(kv, n, exact[i]))
      return true;
  return false;
}

// A path a git subcommand writes, relative to git -C DIR when there is one.
static void git_path(const struct cmd *c, const struct pword *dir,
                     const char *path, bool dynamic) {
  if (!dir || path[0] == '/') {
    shell_emit_path(c->cx, SHELL_EDIT, path, dynamic, true);
    return;
  }
  size_t n = dir->text.len + strlen(path) + 2;
  char *j = xmalloc(n);
  snprintf(j, n, "%s/%s", wt(dir), path);
  shell_emit_path(c->cx, SHELL_EDIT, j, dynamic || dir->dynamic, true);
  free(j);
}

// The value of --NAME=V or --NAME V at w[k] (NULL when w[k] is not it).
static const char *long_value(const struct cmd *c, size_t k, const char *name,
                              size_t *used) {
  const char *t = wt(&c->w[k]);
  size_t n = strlen(name);
  *used = 1;
  if (strncmp(t, name, n) != 0)
    return NULL;
  if (t[n] == '=')
    return t + n + 1;
  if (t[n] || k + 1 >= c->n)
    return NULL;
  *used = 2;
  return wt(&c->w[k + 1]);
}

// What a git subcommand writes or runs beyond its own atom: --output files,
// format-patch -o, the paths restore/checkout write; grep -O, rebase -x,
// submodule foreach, filter-branch, ext:: transports and upload-pack
// programs run commands (opaque).
static void git_sub(const struct cmd *c, size_t k, const struct pword *dir) {
  static const char *const runs[] = {"--exec",
                                     "--upload-pack",
                                     "--receive-pack",
                                     "--extcmd",
                                     "--open-files-in-pager",
                                     "--tree-filter",
                                     "--index-filter",
                                     "--msg-filter",
                                     "--env-filter",
                                     "--commit-filter",
                                     "--parent-filter",
                                     "--tag-name-filter",
                                     "--pathspec-from-file"};
  static const char *const url_subs[] = {"clone",     "fetch",  "pull",
                                         "push",      "remote", "ls-remote",
                                         "submodule", "archive"};
  const char *sub = wt(&c->w[k]);
  bool paths = !strcmp(sub, "restore") || !strcmp(sub, "checkout");
  bool url_sub = one_of(sub, url_subs, 8), has_dd = false;
  for (size_t i = k + 1; i < c->n; i++)
    has_dd = has_dd || wis(&c->w[i], "--");
  if (!strcmp(sub, "apply") || !strcmp(sub, "am")) // writes what the patch
    git_path(c, dir, ".", false);                  // names
  bool dd = false;
  if (!strcmp(sub, "filter-branch") || !strcmp(sub, "difftool") ||
      !strcmp(sub, "mergetool") ||
      (!strcmp(sub, "submodule") && k + 1 < c->n &&
       wis(&c->w[k + 1], "foreach")))
    shell_opaque(c->cx, "a git subcommand that runs commands");
  for (size_t i = k + 1; i < c->n; i++) {
    const struct pword *w = &c->w[i];
    const char *t = wt(w);
    size_t used;
    const char *v;
    if (w->dynamic && t[0] == '-')
      shell_opaque(c->cx, "a dynamic git option");
    if (url_sub && strstr(t, "::"))
      shell_opaque(c->cx, "a git remote helper transport");
    for (size_t r = 0; !dd && r < sizeof(runs) / sizeof(runs[0]); r++)
      if (!strncmp(t, runs[r], strlen(runs[r])))
        shell_opaque(c->cx, "a git option that runs a command");
    if (!dd && t[0] == '-' && t[1] != '-' &&
        ((!strcmp(sub, "grep") && strchr(t, 'O')) ||
         (!strcmp(sub, "rebase") && strchr(t, 'x'))))
      shell_opaque(c->cx, "a git option that runs a command");
    if (!dd && ((v = long_value(c, i, "--output", &used)) ||
                (!strcmp(sub, "format-patch") &&
                 ((v = long_value(c, i, "--output-directory", &used)) ||
                  (wis(w, "-o") && i + 1 < c->n && (v = wt(&c->w[i + 1])) &&
                   (used = 2)))))) {
      git_path(c, dir, v, c->w[i + used - 1].dynamic);
      i += used - 1;
      continue;
    }
    if (!dd && wis(w, "--")) {
      dd = true;
      continue;
    }
    if (!paths)
      continue;
    if (!dd && (wis(w, "-b") || wis(w, "-B") || wis(w, "--orphan") ||
                wis(w, "-s") || wis(w, "--source"))) {
      i++; // takes a value
      continue;
    }
    if (dd || ((t[0] != '-' || w->dynamic) && !has_dd))
      git_path(c, dir, t, w->dynamic); // before --: a revision or a path
  }
}

// git config: setting a key whose value can run a command (alias.x=!cmd,
// core.pager, ...) is opaque; so is --edit (an editor), a dynamic word and
// a config file named with -f (that file is written).
static void git_config(const struct cmd *c, size_t k) {
  const struct pword *ops[3] = {NULL, NULL, NULL};
  size_t nops = 0;
  bool set = false;
  for (size_t i = k + 1; i < c->n; i++) {
    const struct pword *w = &c->w[i];
    const char *t = wt(w);
    if (w->dynamic) {
      shell_opaque(c->cx, "git config with a dynamic word");
      return;
    }
    if (t[0] != '-') {
      if (nops < 3)
        ops[nops] = w;
      nops++;
    } else if (!strcmp(t, "-e") || !strcmp(t, "--edit")) {
      shell_opaque(c->cx, "git config --edit runs an editor");
    } else if (!strcmp(t, "-f") || !strcmp(t, "--file") ||
               !strcmp(t, "--blob") || !strcmp(t, "--type") ||
               !strcmp(t, "--default") || !strcmp(t, "--comment")) {
      if (i + 1 < c->n && (!strcmp(t, "-f") || !strcmp(t, "--file")))
        shell_emit_path(c->cx, SHELL_EDIT, wt(&c->w[i + 1]),
                        c->w[i + 1].dynamic, true);
      i++;
    } else if (!strncmp(t, "--file=", 7)) {
      shell_emit_path(c->cx, SHELL_EDIT, t + 7, w->dynamic, true);
    } else if (!strcmp(t, "--add") || !strcmp(t, "--replace-all") ||
               !strcmp(t, "--append")) {
      set = true;
    }
  }
  if ((set || nops >= 2) && ops[0] && !git_safe_key(wt(ops[0])))
    shell_opaque(c->cx, "git config stores a value that can run commands");
  if (nops >= 2 && ops[0] && !strcmp(wt(ops[0]), "set") && ops[1] &&
      !git_safe_key(wt(ops[1])))
    shell_opaque(c->cx, "git config stores a value that can run commands");
}

// git: global options may run commands (-c core.pager=..., alias.x=!...,
// --config-env, --exec-path=); deny/ask also see the command without them.
static void git_cmd(const struct cmd *c) {
  emit_main(c);
  struct optstate st = {0};
  const struct pword *dir = NULL;
  struct pword tree = {0};
  size_t k = 1, used;
  while (k < c->n && (used = take_opt(c, k, &git_opts, &st)) > 0) {
    const char *t = wt(&c->w[k]);
    const struct pword *v = used == 2 ? &c->w[k + 1] : NULL;
    if (!strcmp(t, "-c") && v && (v->dynamic || !git_safe_key(wt(v))))
      shell_opaque(c->cx, "git -c with a key that can run commands");
    else if (!strncmp(t, "-c", 2) && t[2] &&
             (c->w[k].dynamic || !git_safe_key(t + 2)))
      shell_opaque(c->cx, "git -c with a key that can run commands");
    if (!strncmp(t, "--config-env", 12) || !strncmp(t, "--exec-path=", 12))
      shell_opaque(c->cx, "git configuration from the environment");
    if ((!strcmp(t, "-C") || !strcmp(t, "--work-tree")) && v)
      dir = v; // restore/checkout paths are relative to it
    if (!strncmp(t, "--work-tree=", 12)) {
      free(tree.text.s);
      tree = (struct pword){.dynamic = c->w[k].dynamic};
      buf_put(&tree.text, t + 12, strlen(t + 12));
      dir = &tree;
    }
    k += used;
  }
  if (k > 1 && k < c->n)
    emit_cmd(c, &c->w[0], c->w + k, c->n - k, true);
  if (k < c->n && !c->w[k].dynamic) {
    if (wis(&c->w[k], "config"))
      git_config(c, k);
    git_sub(c, k, dir);
  }
  free(tree.text.s);
}

// cd/pushd/popd move where later relative paths point.
static void cd_cmd(const struct cmd *c, const char *name) {
  struct ctx *cx = c->cx;
  size_t k = 1;
  while (k < c->n && !c->w[k].dynamic && wt(&c->w[k])[0] == '-' &&
         wt(&c->w[k])[1]) {
    if (wis(&c->w[k++], "--"))
      break;
  }
  const struct pword *t = k < c->n ? &c->w[k] : NULL;
  const char *dir = t ? wt(t) : cx->home;
  if (cx->loop_depth > 0 || strcmp(name, "popd") == 0 || !dir ||
      (t && (t->dynamic || !*dir || strcmp(dir, "-") == 0)) ||
      (strcmp(name, "pushd") == 0 && (!t || dir[0] == '+' || dir[0] == '-')))
    cx->base_unknown = true;
  else
    shell_add_base(cx, dir);
}

// trap ACTION SIGNAL...: the action runs in this shell later.
static void trap_cmd(const struct cmd *c) {
  size_t k = 1;
  if (k < c->n && wis(&c->w[k], "--"))
    k++;
  if (k + 1 >= c->n)
    return;
  const struct pword *a = &c->w[k];
  const char *t = wt(a);
  if (a->dynamic || (*t && strcmp(t, "-") != 0 && t[0] != '-'))
    analyse_script(c, a, c->deny_only);
}

// export/declare/...: assigning PATH and the like is like a bare assignment.
static void declare_cmd(const struct cmd *c) {
  struct shell_atom *a = emit_main(c);
  for (size_t k = 1; a && k < c->n; k++) {
    const struct pword *w = &c->w[k];
    if (w->assign && (w->dynamic || name_dangerous(wt(w), w->name_len)))
      add_assign(c->cx, a, wt(w), w->name_len, true);
  }
}

// ---- atom builder: file commands -----------------------------------------

enum fmode {
  F_READ, // every operand is read
  F_GREP, // the first operand is the pattern unless -e/-f
  F_SED,  // the first operand is the script unless -e/-f; -i edits
  F_AWK,  // the first operand is the program unless -f/-e; NAME=v skipped
  F_EDIT, // every operand is written
  F_MODE, // chmod/chown: the first operand is the mode unless --reference
  F_COPY, // cp: sources read, the last operand written (or -t DIR)
  F_MOVE, // mv: sources read and removed, the last operand written
  F_LINK, // ln: targets read, the link name written
  F_DD,   // if= read, of= written
  F_UNIQ, // uniq: the first operand is read, the second written
  F_NONE, // the operands are not files (URLs): only option arguments are
};

struct filecmd {
  const char *name;
  enum fmode mode;
  struct optspec opts;
};

static const char grep_longs[] =
    "regexp:/e file:/f max-count:/m after-context:/A before-context:/B "
    "context:/C directories:/d devices:/D recursive/r "
    "dereference-recursive/R include: exclude: exclude-from: exclude-dir: "
    "label: binary-files: group-separator: color colour ignore-case "
    "invert-match word-regexp line-regexp count files-with-matches "
    "files-without-match only-matching quiet silent no-messages byte-offset "
    "with-filename no-filename line-number initial-tab null null-data text "
    "extended-regexp fixed-strings basic-regexp perl-regexp no-ignore-case "
    "line-buffered no-group-separator";
static const char grep_shorts[] =
    "e:f:m:A:B:C:d:D:EFGPiywxcLloqsbHhnTZzrRaIvUV0123456789";

static const struct filecmd filecmds[] = {
    {"cat", F_READ, {"AbeEnstTuv", "", NULL, NULL, false}},
    {"head",
     F_READ,
     {"c:n:qvz0123456789",
      "bytes:/c lines:/n quiet silent verbose zero-terminated", NULL, NULL,
      false}},
    {"tail",
     F_READ,
     {"c:n:s:fFqvz0123456789",
      "bytes:/c lines:/n sleep-interval:/s follow retry pid: "
      "max-unchanged-stats: quiet silent verbose zero-terminated",
      NULL, NULL, false}},
    {"less",
     F_READ,
     {"b:h:j:k:o:O:p:P:t:T:x:y:z:#:aAcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX", "", "kT",
      "oO", false}},
    {"more", F_READ, {"n:dflcpsu0123456789", "", NULL, NULL, false}},
    {"grep", F_GREP, {grep_shorts, grep_longs, "f", NULL, false}},
    {"egrep", F_GREP, {grep_shorts, grep_longs, "f", NULL, false}},
    {"fgrep", F_GREP, {grep_shorts, grep_longs, "f", NULL, false}},
    {"sed",
     F_SED,
     {"e:f:l:i?nrEsuzb",
      "expression:/e file:/f line-length:/l in-place/i quiet silent "
      "regexp-extended separate unbuffered null-data posix debug sandbox "
      "follow-symlinks binary",
      "f", NULL, false}},
    {"awk",
     F_AWK,
     {"f:v:F:e:i:l:E:bcCd?D?ghLMnNo?Op?PrsStV",
      "file:/f assign:/v field-separator:/F source:/e include:/i exec:/E",
      "fiE", NULL, false}},
    {"gawk",
     F_AWK,
     {"f:v:F:e:i:l:E:bcCd?D?ghLMnNo?Op?PrsStV",
      "file:/f assign:/v field-separator:/F source:/e include:/i exec:/E",
      "fiE", NULL, false}},
    {"mawk", F_AWK, {"f:v:F:W:", "", "f", NULL, false}},
    {"nawk", F_AWK, {"f:v:F:", "", "f", NULL, false}},
    {"sort",
     F_READ,
     {"bcCdfghiMmnrRsuVzk:o:S:t:T:",
      "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort "
      "ignore-nonprinting month-sort human-numeric-sort numeric-sort "
      "random-sort reverse version-sort check merge stable unique "
      "zero-terminated debug key:/k output:/o buffer-size:/S "
      "field-separator:/t temporary-directory:/T parallel: random-source: "
      "sort: files0-from: batch-size: compress-program:",
      NULL, "o", false}},
    {"uniq",
     F_UNIQ,
     {"cdDf:is:uw:z",
      "count repeated all-repeated group ignore-case skip-fields:/f "
      "skip-chars:/s unique check-chars:/w zero-terminated",
      NULL, NULL, false}},
    {"cp",
     F_COPY,
     {"t:S:abdfHilLnPprsuvxTR",
      "target-directory:/t suffix:/S backup preserve no-preserve: sparse: "
      "reflink attributes-only copy-contents dereference force interactive "
      "link no-clobber no-dereference parents recursive remove-destination "
      "strip-trailing-slashes symbolic-link update verbose one-file-system "
      "no-target-directory archive debug",
      NULL, "t", false}},
    {"mv",
     F_MOVE,
     {"t:S:bfinuvTZ",
      "target-directory:/t suffix:/S backup force interactive no-clobber "
      "update verbose strip-trailing-slashes no-target-directory context "
      "exchange no-copy debug",
      NULL, "t", false}},
    {"rm",
     F_EDIT,
     {"fiIrRdv",
      "force interactive one-file-system no-preserve-root preserve-root "
      "recursive dir verbose",
      NULL, NULL, false}},
    {"tee",
     F_EDIT,
     {"aip", "append ignore-interrupts output-error", NULL, NULL, false}},
    {"touch",
     F_EDIT,
     {"acd:fhmr:t:", "date:/d reference:/r time: no-create no-dereference", "r",
      NULL, false}},
    {"truncate",
     F_EDIT,
     {"cor:s:", "no-create io-blocks reference:/r size:/s", "r", NULL, false}},
    {"chmod",
     F_MODE,
     {"cfvR",
      "changes silent quiet verbose no-preserve-root preserve-root "
      "reference:/@ recursive",
      "@", NULL, false}},
    {"chown",
     F_MODE,
     {"cfvhRHLP",
      "changes silent quiet verbose dereference no-dereference from: "
      "no-preserve-root preserve-root reference:/@ recursive",
      "@", NULL, false}},
    {"ln",
     F_LINK,
     {"t:S:bdfFinLPrsTv",
      "target-directory:/t suffix:/S backup directory force interactive "
      "logical no-dereference physical relative symbolic no-target-directory "
      "verbose",
      NULL, "t", false}},
    {"dd", F_DD, {"", "", NULL, NULL, false}},
    // Installers and downloaders that write files named by their
    // arguments: an allow cannot see what they write, but deny/ask rules
    // and the protected paths must.
    {"install",
     F_COPY,
     {"bcCdDg:m:o:pst:TvS:Z",
      "backup compare directory group:/g mode:/m owner:/o "
      "preserve-timestamps strip strip-program: suffix:/S "
      "target-directory:/t no-target-directory verbose preserve-context "
      "context",
      NULL, "t", false}},
    {"rsync",
     F_COPY,
     {"avzrlptgoDhPnqcuSxHAXWRbe:f:B:T:",
      "archive verbose compress recursive delete exclude: include: "
      "exclude-from: include-from: rsh:/e filter:/f partial progress "
      "dry-run checksum update temp-dir:/T block-size:/B",
      NULL, NULL, false}},
    {"curl",
     F_NONE,
     {"d:H:X:u:A:e:b:c:D:T:F:K:m:x:w:r:y:Y:z:E:o:U:C:Q:t:sSLkfvIiOJRgGNq#",
      "output:/o cookie-jar:/c dump-header:/D upload-file:/T config:/K "
      "data: data-binary: data-raw: header:/H request:/X user:/u "
      "user-agent:/A referer:/e cookie:/b form:/F max-time:/m proxy:/x "
      "write-out:/w silent/s show-error/S location/L insecure/k fail/f "
      "verbose/v head/I include/i remote-name/O create-dirs "
      "output-dir:/% url:",
      "TK", "ocD%", false}},
    {"wget",
     F_NONE,
     {"O:o:a:P:i:e:t:T:U:qvcNnrlkpmbS",
      "output-document:/O output-file:/o append-output:/a "
      "directory-prefix:/P input-file:/i execute:/e tries:/t timeout:/T "
      "user-agent:/U quiet/q verbose/v continue/c",
      "i", "OoaP", false}},
    {"unlink", F_EDIT, {"", "", NULL, NULL, false}},
    {"shred",
     F_EDIT,
     {"fn:s:uvxz",
      "force iterations:/n random-source: size:/s remove remove: verbose exact "
      "zero",
      NULL, NULL, false}},
    {"mkdir",
     F_EDIT,
     {"m:pvZ", "mode:/m parents verbose context", NULL, NULL, false}},
    {"rmdir",
     F_EDIT,
     {"pv", "ignore-fail-on-non-empty parents verbose", NULL, NULL, false}},
};

// chmod -w FILE: the -w is a mode, not an option.
static bool is_mode_word(const char *t) {
  return t[0] == '-' && t[1] && strspn(t + 1, "rwxXst") == strlen(t + 1);
}

static void operand(const struct cmd *c, const struct pword *w,
                    enum shell_atom_kind kind) {
  if (!wis(w, "-") && !w->procsub) // stdin; a pipe, analysed as a command
    shell_emit_path(c->cx, kind, wt(w), w->dynamic, true);
}

static void dd_operands(const struct cmd *c, const size_t *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const struct pword *w = &c->w[ops[i]];
    const char *t = wt(w);
    if (strncmp(t, "if=", 3) == 0)
      shell_emit_path(c->cx, SHELL_READ, t + 3, w->dynamic, true);
    else if (strncmp(t, "of=", 3) == 0)
      shell_emit_path(c->cx, SHELL_EDIT, t + 3, w->dynamic, true);
  }
}

// Where the operands that are paths start (after a pattern, script, mode).
static size_t first_path(const struct filecmd *fc, const struct optstate *st) {
  switch (fc->mode) {
  case F_GREP:
  case F_SED:
    return seen(st, 'e') || seen(st, 'f') ? 0 : 1;
  case F_AWK:
    return seen(st, 'f') || seen(st, 'e') || seen(st, 'E') ? 0 : 1;
  case F_MODE:
    return seen(st, '@') ? 0 : 1;
  default:
    return 0;
  }
}

static void file_operand(const struct cmd *c, const struct filecmd *fc,
                         const struct pword *w, bool dest, bool in_place) {
  bool read = false, edit = false;
  switch (fc->mode) {
  case F_SED:
    read = true;
    edit = in_place;
    break;
  case F_EDIT:
  case F_MODE:
    edit = true;
    break;
  case F_COPY:
    read = !dest;
    edit = dest;
    break;
  case F_LINK: // a write through the link writes its target too
    read = !dest;
    edit = true;
    break;
  case F_MOVE: // the source goes away: read and written
    read = !dest;
    edit = true;
    break;
  case F_NONE:
    break;
  default:
    read = true;
  }
  if (read)
    operand(c, w, SHELL_READ);
  if (edit)
    operand(c, w, SHELL_EDIT);
}

static void file_operands(const struct cmd *c, const struct filecmd *fc,
                          const size_t *ops, size_t n,
                          const struct optstate *st) {
  bool has_dest =
      (fc->mode == F_COPY || fc->mode == F_MOVE || fc->mode == F_LINK) &&
      !seen(st, 't') && n >= 2;
  for (size_t i = first_path(fc, st); i < n && !c->cx->stop; i++) {
    const struct pword *w = &c->w[ops[i]];
    if (fc->mode == F_AWK && w->assign)
      continue; // awk's NAME=value operands
    if (fc->mode == F_UNIQ && i > 0) {
      if (i == 1)
        operand(c, w, SHELL_EDIT);
      continue;
    }
    file_operand(c, fc, w, has_dest && i == n - 1, seen(st, 'i'));
  }
}

static void file_cmd(const struct cmd *c, const struct filecmd *fc) {
  emit_main(c);
  size_t *ops = xcalloc(c->n, sizeof(*ops));
  size_t n = 0, k = 1, used;
  bool done = false;
  struct optstate st = {0};
  while (k < c->n) {
    const char *t = wt(&c->w[k]);
    if (!done && wis(&c->w[k], "--")) {
      done = true;
      k++;
    } else if (!done && !(fc->mode == F_MODE && is_mode_word(t)) &&
               (used = take_opt(c, k, &fc->opts, &st)) > 0) {
      k += used;
    } else {
      ops[n++] = k++;
    }
  }
  if (fc->mode == F_DD)
    dd_operands(c, ops, n);
  else
    file_operands(c, fc, ops, n, &st);
  // grep -r without a file searches the current directory.
  if (fc->mode == F_GREP && n <= first_path(fc, &st) &&
      (seen(&st, 'r') || seen(&st, 'R')))
    shell_emit_path(c->cx, SHELL_READ, ".", false, true);
  free(ops);
}

static const struct filecmd *find_filecmd(const char *name) {
  for (size_t i = 0; i < sizeof(filecmds) / sizeof(filecmds[0]); i++)
    if (filecmds[i].name[0] == name[0] && strcmp(filecmds[i].name, name) == 0)
      return &filecmds[i];
  return NULL;
}

// ---- atom builder: one simple command ------------------------------------

// The first byte first: these tables are looked at for every command (the
// loops of strcmp were 40% of an analysis).
static bool one_of(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[0] == list[i][0] && strcmp(s, list[i]) == 0)
      return true;
  return false;
}

// NAME=v alone: fine, unless NAME changes what later commands run.
static void bare_assign(struct ctx *cx, const struct pword *w, size_t n,
                        bool deny_only) {
  bool bad = false;
  for (size_t i = 0; i < n; i++)
    bad = bad || name_dangerous(wt(&w[i]), w[i].name_len);
  if (assigns_code(w, n))
    shell_opaque(cx, "a variable that holds code");
  if (!bad)
    return;
  struct shell_atom *a = shell_push_atom(cx, SHELL_CMD, deny_only);
  if (!a)
    return;
  for (size_t i = 0; i < n; i++)
    add_assign(cx, a, wt(&w[i]), w[i].name_len, true);
}

// ---- atom builder: code hidden in data -----------------------------------

static bool has_char(const struct pword *w, char ch) {
  return strchr(wt(w), ch) != NULL;
}

// A word that is an integer literal (what bash's arithmetic can read
// without looking up a variable), or $# / $?.
static bool int_literal(const struct pword *w) {
  const char *t = wt(w);
  if (w->dynamic) // $#, $?, ${#NAME}: numbers bash computes itself
    return strcmp(t, "$#") == 0 || strcmp(t, "$?") == 0 ||
           (strncmp(t, "${#", 3) == 0 && t[3] && is_name_start(t[3]) &&
            strspn(t + 3, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789_") == strlen(t + 3) - 1 &&
            t[strlen(t) - 1] == '}');
  size_t i = t[0] == '-' || t[0] == '+' ? 1 : 0;
  return t[i] && strspn(t + i, "0123456789") == strlen(t + i);
}

// [[ ]]: -eq and friends evaluate both sides as arithmetic (a variable
// there may hold a[$(..)]), -v evaluates a subscript.
static const char *cond_evaluates(const struct cmd *c) {
  static const char *const arith[] = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"};
  for (size_t k = 1; k < c->n; k++) {
    const struct pword *w = &c->w[k];
    if (w->dynamic)
      continue;
    if (one_of(wt(w), arith, 6) &&
        (!int_literal(&c->w[k - 1]) || k + 1 >= c->n ||
         !int_literal(&c->w[k + 1])))
      return "arithmetic comparison in [[ ]]";
    if ((wis(w, "-v") || wis(w, "-R")) && k + 1 < c->n &&
        (c->w[k + 1].dynamic || has_char(&c->w[k + 1], '[')))
      return "[[ -v ]] on an array element";
  }
  return NULL;
}

// Any argument after the name that is dynamic or holds a subscript: a
// variable name bash would evaluate (read 'a[$(..)]', unset, printf -v).
static bool subscript_arg(const struct cmd *c, size_t from) {
  for (size_t k = from; k < c->n; k++)
    if (c->w[k].dynamic || has_char(&c->w[k], '['))
      return true;
  return false;
}

// An option word (-xyz or +xyz) holding one of the letters.
static bool opt_letter(const struct cmd *c, const char *letters) {
  for (size_t k = 1; k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    if (!c->w[k].dynamic && (t[0] == '-' || t[0] == '+') && t[1] != '-' &&
        strpbrk(t + 1, letters))
      return true;
  }
  return false;
}

static const char *printf_evaluates(const struct cmd *c) {
  for (size_t k = 1; k < c->n; k++) {
    const struct pword *w = &c->w[k];
    const char *t = wt(w);
    if (w->dynamic && k == 1)
      return "printf with a dynamic option";
    if (strcmp(t, "-v") == 0 && k + 1 < c->n &&
        (c->w[k + 1].dynamic || has_char(&c->w[k + 1], '[')))
      return "printf -v into an array element";
    if (strncmp(t, "-v", 2) == 0 && t[2] && (w->dynamic || strchr(t, '[')))
      return "printf -v into an array element";
    if (t[0] != '-' || strcmp(t, "--") == 0)
      break;
  }
  return NULL;
}

// Builtins that evaluate their arguments as code: the reason, or NULL.
static const char *builtin_evaluates(const struct cmd *c, const char *word) {
  static const char *const decl[] = {"declare", "typeset", "local", "export",
                                     "readonly"};
  static const char *const always[] = {"let",      "alias", "enable", "compgen",
                                       "complete", "bind",  "fc",     "coproc"};
  if (one_of(word, always, 8))
    return "a builtin that evaluates its arguments";
  if (!strcmp(word, "shopt")) {
    for (size_t k = 1; k < c->n; k++)
      if (c->w[k].dynamic || wis(&c->w[k], "expand_aliases") ||
          wis(&c->w[k], "extdebug"))
        return "shopt that changes how commands run";
    return NULL;
  }
  if (!strcmp(word, "[["))
    return cond_evaluates(c);
  if (!strcmp(word, "test") || !strcmp(word, "[")) {
    for (size_t k = 1; k + 1 < c->n; k++)
      if ((wis(&c->w[k], "-v") || wis(&c->w[k], "-R")) &&
          (c->w[k + 1].dynamic || has_char(&c->w[k + 1], '[')))
        return "test -v on an array element";
    return NULL;
  }
  if (one_of(word, decl, 5)) {
    if (strcmp(word, "export") && strcmp(word, "readonly") &&
        opt_letter(c, "in"))
      return "declare -i/-n: later values are evaluated";
    for (size_t k = 1; k < c->n; k++) {
      const struct pword *w = &c->w[k];
      if (w->assign && code_assign(wt(w), w->name_len, w->dynamic))
        return "a variable that holds code";
      if ((w->dynamic && !w->assign) || has_char(w, '[') ||
          (w->assign && wt(w)[w->name_len + 1] == '('))
        return "declare of an array element";
    }
    return NULL;
  }
  if (!strcmp(word, "printf"))
    return printf_evaluates(c);
  if (!strcmp(word, "read") || !strcmp(word, "unset"))
    return subscript_arg(c, 1) ? "a variable name with a subscript" : NULL;
  if (!strcmp(word, "mapfile") || !strcmp(word, "readarray"))
    return opt_letter(c, "C") || subscript_arg(c, 1) ? "mapfile -C" : NULL;
  if (!strcmp(word, "hash") && opt_letter(c, "p"))
    return "hash -p: a name runs another program";
  return NULL;
}

// Variables whose value is run as code (a prompt, a function, a pager,
// git's configuration): assigning one hides a command. A few harmless
// values of the pager and editor kind are known.
static bool code_var(const char *s, size_t n) {
  static const char *const exact[] = {"PS0",           "PS1",
                                      "PS2",           "PS3",
                                      "PS4",           "PROMPT_COMMAND",
                                      "BASH_ENV",      "ENV",
                                      "EDITOR",        "VISUAL",
                                      "LESSOPEN",      "LESSCLOSE",
                                      "SSH_ASKPASS",   "GIT_SSH",
                                      "GIT_ASKPASS",   "GIT_EXTERNAL_DIFF",
                                      "GIT_EXEC_PATH", "LD_PRELOAD",
                                      "LD_AUDIT",      "PERL5OPT",
                                      "NODE_OPTIONS",  "RUBYOPT",
                                      "PYTHONSTARTUP", "BASH_LOADABLES_PATH",
                                      "BROWSER",       "GIT_TEMPLATE_DIR",
                                      "LESS",          "MORE",
                                      "MANOPT",        "CDPATH"};
  static const char *const pre[] = {"BASH_FUNC_", "GIT_CONFIG"};
  static const char *const suf[] = {"_COMMAND", "PAGER", "_EDITOR"};
  return name_listed(s, n, exact, sizeof(exact) / sizeof(*exact), pre,
                     sizeof(pre) / sizeof(*pre), suf,
                     sizeof(suf) / sizeof(*suf));
}

static bool harmless_code_value(const char *v) {
  static const char *const ok[] = {"",          "cat",  "less", "more",
                                   "true",      ":",    "-R",   "less -R",
                                   "less -FRX", "-FRX", "-FRSX"};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    if (strcmp(v, ok[i]) == 0)
      return true;
  return false;
}

// NAME=value (as written in w, NAME n bytes long) puts code in a variable.
static bool code_assign(const char *t, size_t n, bool dynamic) {
  return code_var(t, n) && (dynamic || !harmless_code_value(t + n + 1));
}

static bool assigns_code(const struct pword *w, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (w[i].assign && code_assign(wt(&w[i]), w[i].name_len, w[i].dynamic))
      return true;
  return false;
}

static const char *const shell_names[] = {
    "sh",    "bash",  "zsh",  "dash", "ksh",  "rbash", "ash", "mksh",
    "ksh93", "pdksh", "lksh", "oksh", "yash", "posh",  "bosh"};
enum { NSHELLS = sizeof(shell_names) / sizeof(shell_names[0]) };

// Shells whose syntax is not the POSIX/bash one, and interpreters: with a
// script they are ordinary commands, without one they read code from
// stdin.
static const char *const interpreters[] = {
    "python",    "python2", "python3", "perl",    "ruby", "node",   "nodejs",
    "php",       "lua",     "tclsh",   "wish",    "fish", "csh",    "tcsh",
    "irb",       "deno",    "bun",     "Rscript", "R",    "jshell", "pwsh",
    "osascript", "guile",   "racket",  "sbcl",    "ghci", "julia",  "expect"};
enum { NINTERP = sizeof(interpreters) / sizeof(interpreters[0]) };

static bool is_interpreter(const char *name) {
  if (one_of(name, interpreters, NINTERP))
    return true;
  // python3.12, perl5.36, ...
  static const char *const pre[] = {"python", "perl", "ruby", "lua", "php"};
  for (size_t i = 0; i < 5; i++) {
    size_t n = strlen(pre[i]);
    if (strncmp(name, pre[i], n) == 0 &&
        strspn(name + n, "0123456789.") == strlen(name + n))
      return true;
  }
  return false;
}

static bool is_shell_or_interpreter(const char *name) {
  return one_of(name, shell_names, NSHELLS) || is_interpreter(name) ||
         !strcmp(name, "busybox") || !strcmp(name, "toybox");
}

// An operand naming the stdin of the command, or another file descriptor.
static bool stdin_path(const char *t) {
  return !strcmp(t, "-") || !strcmp(t, "/dev/stdin") ||
         !strncmp(t, "/dev/fd/", 8) || !strncmp(t, "/proc/", 6);
}

// An interpreter with no script operand (or with - or /dev/stdin) reads
// its program from stdin; -c/-e and friends carry it visibly.
static void interpreter_cmd(const struct cmd *c) {
  emit_main(c);
  bool code = false;
  for (size_t k = 1; k < c->n; k++) {
    const char *t = wt(&c->w[k]);
    if (t[0] == '-' && t[1] != '-' && strpbrk(t + 1, "ceEpr"))
      // perl -e 'system(...)' is awk's system(): opaque
      shell_opaque(c->cx, "an interpreter running code from its arguments");
    code = code || (t[0] == '-' && t[1] != '-' && strpbrk(t + 1, "ceEmprVh")) ||
           !strcmp(t, "--version") || !strcmp(t, "--help");
  }
  for (size_t k = 1; k < c->n; k++) {
    const struct pword *w = &c->w[k];
    const char *t = wt(w);
    if (w->dynamic || w->procsub) {
      shell_opaque(c->cx, "an interpreter with a dynamic argument");
      return;
    }
    if (t[0] == '-' && t[1])
      continue; // options, -c/-e and their programs: handled above
    if (stdin_path(t))
      break;
    if (!code)
      return; // a script file: an ordinary command
  }
  if (!code)
    c->cx->stdin_code = true;
}

// Programs that run other commands (from their operands, a script, a
// schedule or an editor's command line) in ways not modelled: opaque.
static const char *const runners[] = {"strace",      "ltrace",
                                      "valgrind",    "gdb",
                                      "lldb",        "unshare",
                                      "nsenter",     "firejail",
                                      "bwrap",       "systemd-run",
                                      "chrt",        "taskset",
                                      "numactl",     "prlimit",
                                      "fakeroot",    "proot",
                                      "schroot",     "pkexec",
                                      "sg",          "newgrp",
                                      "script",      "at",
                                      "batch",       "crontab",
                                      "parallel",    "dbus-run-session",
                                      "xvfb-run",    "torsocks",
                                      "proxychains", "proxychains4",
                                      "catchsegv",   "perf",
                                      "tmux",        "screen",
                                      "vi",          "vim",
                                      "nvim",        "view",
                                      "ex",          "vimdiff",
                                      "gvim",        "rvim",
                                      "emacs",       "emacsclient",
                                      "ed",          "expect",
                                      "sshpass",     "entr",
                                      "watchexec",   "cgexec",
                                      "capsh",       "setpriv",
                                      "runcon",      "ssh-agent"};
enum { NRUNNERS = sizeof(runners) / sizeof(runners[0]) };

static void dispatch(struct cmd *c, const struct wrapper *fallback) {
  static const char *const declares[] = {"export", "declare", "typeset",
                                         "local", "readonly"};
  const char *word = wt(&c->w[0]), *name = base_name(word);
  const struct wrapper *wr = fallback ? fallback : find_wrapper(name);
  const struct filecmd *fc = find_filecmd(name);
  const char *why = c->w[0].dynamic ? NULL : builtin_evaluates(c, word);
  if (why)
    shell_opaque(c->cx, why);
  if (assigns_code(c->as, c->nas))
    shell_opaque(c->cx, "a variable that holds code");
  if (!c->w[0].dynamic && (why = shell_option_runs(c->w, c->n, name)))
    shell_opaque(c->cx, why);
  if (!c->w[0].dynamic && (!strcmp(name, "make") || !strcmp(name, "gmake")))
    for (size_t k = 1; k + 1 < c->n; k++)
      if ((wis(&c->w[k], "-f") || wis(&c->w[k], "--file")) &&
          stdin_path(wt(&c->w[k + 1])))
        shell_opaque(c->cx, "make reading its recipes from stdin");
  if (!c->w[0].dynamic && one_of(name, runners, NRUNNERS))
    shell_opaque(c->cx, "a program that runs commands the analyser does not "
                        "model");
  if (c->w[0].dynamic) {
    emit_main(c);
    shell_opaque(c->cx, "dynamic command name");
  } else if (!strcmp(name, "eval") || !strcmp(name, "source") ||
             !strcmp(word, ".")) {
    emit_main(c);
    shell_opaque(c->cx, strcmp(name, "eval") ? "source" : "eval");
  } else if (wr && (fallback || wr->kind == W_EXEC)) {
    exec_wrapper(c, wr);
  } else if (one_of(name, shell_names, NSHELLS) && dash_c_wrapper(c)) {
    return;
  } else if (is_interpreter(name)) {
    interpreter_cmd(c);
  } else if (!strcmp(name, "find")) {
    find_cmd(c);
  } else if (!strcmp(name, "git")) {
    git_cmd(c);
  } else if (!strcmp(name, "patch")) {
    // A patch names the files it writes: any of them, below -d DIR.
    emit_main(c);
    shell_emit_path(c->cx, SHELL_EDIT, ".", false, true);
    shell_writers(c->cx, c->w, c->n, name);
  } else if (shell_writers(c->cx, NULL, 0, name)) {
    emit_main(c);
    shell_writers(c->cx, c->w, c->n, name);
  } else if (!strcmp(name, "tar")) {
    emit_main(c);
    shell_tar(c->cx, c->w, c->n);
  } else if (!strcmp(name, "zip") || !strcmp(name, "unzip")) {
    emit_main(c);
    shell_zip(c->cx, c->w, c->n, name[0] == 'u');
  } else if (fc) {
    file_cmd(c, fc);
    if (fc->mode == F_SED)
      shell_sed(c->cx, c->w, c->n);
    else if (fc->mode == F_AWK)
      shell_awk(c->cx, c->w, c->n);
    else if (!strcmp(name, "wget"))
      shell_wget(c->cx, c->w, c->n);
  } else if (one_of(word, declares, 5)) {
    declare_cmd(c);
  } else {
    emit_main(c);
    if (!c->deny_only &&
        one_of(word, (const char *const[]){"cd", "pushd", "popd"}, 3))
      cd_cmd(c, word);
    if (!strcmp(word, "trap"))
      trap_cmd(c);
  }
}

void shell_build_simple(struct ctx *cx, const struct pword *w, size_t n,
                        bool deny_only, int depth) {
  if (cx->stop || n == 0)
    return;
  if (depth > MAX_DEPTH) {
    shell_fail(cx, "nested too deeply");
    return;
  }
  size_t na = 0;
  while (na < n && w[na].assign)
    na++;
  if (na == n) {
    bare_assign(cx, w, n, deny_only);
    return;
  }
  struct cmd c = {.cx = cx,
                  .as = w,
                  .nas = na,
                  .w = w + na,
                  .n = n - na,
                  .deny_only = deny_only,
                  .depth = depth};
  const struct wrapper *fallback = strip_wrappers(&c);
  cx->xargs += c.xargs;
  dispatch(&c, fallback);
  cx->xargs -= c.xargs;
}
