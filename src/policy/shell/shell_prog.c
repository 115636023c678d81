// The shell analyser's programs inside arguments: sed scripts, awk
// programs, tar's modes and the options of other commands that write files
// or run commands (threat model: doc/threat-model.md).
//
// Each function looks at one simple command (w[0] is its name) whose atom
// the builder has already emitted, and adds what the command does beyond
// it: file atoms for what it writes, or opaque for what runs code no atom
// shows. Anything not understood is opaque.

#include "shell_priv.h"

#include <stdio.h>
#include <strings.h>

static void edit_path(struct ctx *cx, const char *path, bool dynamic) {
  if (!dynamic && (strcmp(path, "/dev/stdout") == 0 ||
                   strcmp(path, "/dev/stderr") == 0 || strcmp(path, "-") == 0))
    return;
  shell_emit_path(cx, SHELL_EDIT, path, dynamic, true);
}

// ---- sed -----------------------------------------------------------------

// Skips a regex or replacement up to the delimiter d; false when it never
// comes.
static bool skip_delim(const char *s, size_t *i, char d) {
  while (s[*i] && s[*i] != d) {
    if (s[*i] == '\\' && s[*i + 1])
      (*i)++;
    (*i)++;
  }
  if (!s[*i])
    return false;
  (*i)++;
  return true;
}

static size_t line_end(const char *s, size_t i) {
  while (s[i] && s[i] != '\n')
    i++;
  return i;
}

// A file name of w/W/r/R or of the w flag: the rest of the line.
static void sed_file(struct ctx *cx, const char *s, size_t *i, bool write) {
  while (s[*i] == ' ' || s[*i] == '\t')
    (*i)++;
  size_t e = line_end(s, *i);
  char *name = xstrndup(s + *i, e - *i);
  if (!*name)
    shell_opaque(cx, "sed w without a file name");
  else if (write)
    edit_path(cx, name, false);
  else
    shell_emit_path(cx, SHELL_READ, name, false, true);
  free(name);
  *i = e;
}

static bool sed_address(const char *s, size_t *i) {
  if (is_digit(s[*i])) {
    while (is_digit(s[*i]) || s[*i] == '~')
      (*i)++;
  } else if (s[*i] == '$') {
    (*i)++;
  } else if (s[*i] == '/' || (s[*i] == '\\' && s[*i + 1])) {
    char d = s[*i] == '\\' ? s[++*i] : '/';
    (*i)++;
    if (!skip_delim(s, i, d))
      return false;
    while (s[*i] == 'I' || s[*i] == 'M')
      (*i)++;
  }
  return true;
}

// One sed script: w/W and the w flag write files, r/R read them, e and the
// e flag run commands (opaque), and a command not known is opaque.
static void sed_script(struct ctx *cx, const char *s) {
  size_t i = 0;
  while (s[i] && !cx->out->opaque) {
    while (s[i] && strchr(" \t\n;", s[i]))
      i++;
    if (!s[i])
      break;
    if (s[i] == '#') {
      i = line_end(s, i);
      continue;
    }
    bool ok = sed_address(s, &i);
    while (ok && (s[i] == ' ' || s[i] == '\t'))
      i++;
    if (ok && s[i] == ',') {
      i++;
      while (s[i] == ' ' || s[i] == '\t')
        i++;
      if (s[i] == '+' || s[i] == '~')
        for (i++; is_digit(s[i]); i++)
          ;
      else
        ok = sed_address(s, &i);
    }
    while (ok && (s[i] == ' ' || s[i] == '\t' || s[i] == '!'))
      i++;
    char c = ok ? s[i] : '\0';
    if (c)
      i++;
    if (c && strchr("{}=dDgGhHnNpPxzF", c)) {
      continue;
    } else if (c && strchr("lLqQ", c)) {
      while (s[i] == ' ' || is_digit(s[i]))
        i++;
    } else if (c && strchr(":btTv", c)) {
      while (s[i] && s[i] != '\n' && s[i] != ';')
        i++;
    } else if (c && strchr("aic", c)) {
      while (s[i] && s[i] != '\n')
        i += s[i] == '\\' && s[i + 1] ? 2 : 1;
    } else if (c == 'r' || c == 'R' || c == 'w' || c == 'W') {
      sed_file(cx, s, &i, c == 'w' || c == 'W');
    } else if (c == 's' || c == 'y') {
      char d = s[i];
      if (!d || d == '\n' || d == '\\') {
        shell_opaque(cx, "a sed command not modelled");
        return;
      }
      i++;
      if (!skip_delim(s, &i, d) || !skip_delim(s, &i, d)) {
        shell_opaque(cx, "a sed command not modelled");
        return;
      }
      while (c == 's' && s[i] && strchr("gpiImMe0123456789w", s[i])) {
        if (s[i] == 'e')
          shell_opaque(cx, "sed's e flag runs the pattern space");
        if (s[i++] == 'w') {
          sed_file(cx, s, &i, true);
          break;
        }
      }
    } else if (c == 'e') {
      shell_opaque(cx, "sed's e command runs a command");
    } else {
      shell_opaque(cx, "a sed command not modelled");
    }
  }
}

void shell_sed(struct ctx *cx, const struct pword *w, size_t n) {
  bool have = false, done = false;
  for (size_t k = 1; k < n && !cx->stop; k++) {
    const char *t = wt(&w[k]), *v = NULL;
    bool dyn = w[k].dynamic;
    if (done || t[0] != '-' || !t[1] || dyn) {
      if (!have) { // the first operand is the script
        v = t;
        have = true;
      } else {
        continue;
      }
    } else if (!strcmp(t, "--")) {
      done = true;
      continue;
    } else if (!strncmp(t, "--expression", 12)) {
      v = t[12] == '=' ? t + 13 : k + 1 < n ? wt(&w[++k]) : "";
      dyn = dyn || (t[12] != '=' && w[k].dynamic);
      have = true;
    } else if (!strncmp(t, "--file", 6)) {
      shell_opaque(cx, "sed -f: a script no atom shows");
      return;
    } else if (!strncmp(t, "--line-length", 13) && !t[13]) {
      k++;
      continue;
    } else if (t[1] == '-') {
      continue;
    } else {
      for (size_t i = 1; t[i] && !v; i++) {
        if (t[i] == 'f') {
          shell_opaque(cx, "sed -f: a script no atom shows");
          return;
        }
        if (t[i] == 'i' || t[i] == 'l')
          break; // -iSUFFIX, -lN
        if (t[i] == 'e') {
          v = t[i + 1] ? t + i + 1 : k + 1 < n ? wt(&w[++k]) : "";
          dyn = dyn || (!t[i + 1] && w[k].dynamic);
          have = true;
        }
      }
      if (!v)
        continue;
    }
    if (dyn) {
      shell_opaque(cx, "a dynamic sed script");
      return;
    }
    sed_script(cx, v);
  }
}

// ---- awk -----------------------------------------------------------------

// An awk program: system(), pipes (print | "cmd", "cmd" | getline) and
// extensions run commands; print > "file" writes one. Both are opaque: the
// analyser does not evaluate awk expressions.
static void awk_program(struct ctx *cx, const char *s) {
  bool str = false, print = false;
  int paren = 0;
  char last = '\0'; // the last character that is not a blank
  for (size_t i = 0; s[i]; i++) {
    char c = s[i];
    if (str) {
      if (c == '\\' && s[i + 1])
        i++;
      else if (c == '"')
        str = false;
      continue;
    }
    if (c == '/' && (!last || strchr("(,{};~!&|=?:\n", last))) {
      // a regex literal (/a|b/), not a division: skip it
      for (i++; s[i] && s[i] != '/'; i++)
        if (s[i] == '\\' && s[i + 1])
          i++;
      if (!s[i]) {
        shell_opaque(cx, "an unterminated awk regex");
        break;
      }
      last = '/';
      continue;
    }
    if (c != ' ' && c != '\t')
      last = c;
    if (c == '"') {
      str = true;
    } else if (c == '|' && s[i + 1] == '|') {
      i++;
    } else if (c == '|') {
      shell_opaque(cx, "an awk pipe runs a command");
    } else if (c == '>' && print && paren == 0) {
      shell_opaque(cx, "awk output redirection writes a file");
    } else if (c == '@') {
      shell_opaque(cx, "an awk extension");
    } else if (c == '(') {
      paren++;
    } else if (c == ')') {
      paren--;
    } else if (strchr(";{}\n", c)) {
      print = false;
      paren = 0;
    } else if (is_name_start(c) && (i == 0 || !is_name_char(s[i - 1]))) {
      size_t e = i;
      while (is_name_char(s[e]))
        e++;
      size_t len = e - i;
      if ((len == 5 && !memcmp(s + i, "print", 5)) ||
          (len == 6 && !memcmp(s + i, "printf", 6)))
        print = true;
      if (len == 6 && !memcmp(s + i, "system", 6))
        shell_opaque(cx, "awk system() runs a command");
      i = e - 1;
    }
  }
}

void shell_awk(struct ctx *cx, const struct pword *w, size_t n) {
  bool have = false;
  for (size_t k = 1; k < n; k++) {
    const char *t = wt(&w[k]), *v = NULL;
    bool dyn = w[k].dynamic;
    if (dyn || t[0] != '-' || !t[1]) {
      if (have)
        return; // operands: files and NAME=value
      v = t;
    } else if (!strcmp(t, "--")) {
      if (!have && k + 1 < n) {
        v = wt(&w[k + 1]);
        dyn = w[++k].dynamic;
      } else {
        return;
      }
    } else if (!strncmp(t, "--source", 8)) {
      v = t[8] == '=' ? t + 9 : k + 1 < n ? wt(&w[++k]) : "";
      dyn = dyn || (t[8] != '=' && w[k].dynamic);
    } else if (t[1] == '-' &&
               (!strncmp(t, "--file", 6) || !strncmp(t, "--include", 9) ||
                !strncmp(t, "--load", 6) || !strncmp(t, "--exec", 6))) {
      shell_opaque(cx, "awk -f/-i/-l: a program no atom shows");
      return;
    } else if (t[1] == '-') {
      continue;
    } else if (strchr("filE", t[1])) {
      shell_opaque(cx, "awk -f/-i/-l: a program no atom shows");
      return;
    } else if (t[1] == 'e') {
      v = t[2] ? t + 2 : k + 1 < n ? wt(&w[++k]) : "";
      dyn = dyn || (!t[2] && w[k].dynamic);
    } else {
      if (strchr("vF", t[1]) && !t[2])
        k++; // -v NAME=value, -F SEP
      continue;
    }
    have = true;
    if (dyn) {
      shell_opaque(cx, "a dynamic awk program");
      return;
    }
    awk_program(cx, v);
  }
}

// ---- tar -----------------------------------------------------------------

enum { TAR_VALUES = 16 };

struct tar_values {
  char *v[TAR_VALUES];
  bool dyn[TAR_VALUES], dir[TAR_VALUES];
  size_t n;
  bool extract, create, has_dir;
};

static void tar_value(struct ctx *cx, struct tar_values *tv, const char *v,
                      bool dyn, bool dir) {
  if (tv->n == TAR_VALUES) {
    shell_opaque(cx, "too many tar options");
    return;
  }
  tv->v[tv->n] = xstrdup(v);
  tv->dyn[tv->n] = dyn;
  tv->dir[tv->n++] = dir;
  tv->has_dir = tv->has_dir || dir;
}

static bool tar_long(struct ctx *cx, struct tar_values *tv,
                     const struct pword *w, size_t n, size_t *k) {
  static const char *const runs[] = {
      "--to-command",  "--checkpoint-action", "--use-compress-program",
      "--info-script", "--new-volume-script", "--rsh-command",
      "--rmt-command", "--absolute-names",    "--files-from",
      "--index-file"};
  const char *t = wt(&w[*k]), *eq = strchr(t, '=');
  for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++)
    if (!strncmp(t, runs[r], strlen(runs[r])))
      shell_opaque(cx, "a tar option that runs a program or writes outside "
                       "its directory");
  tv->extract = tv->extract || !strcmp(t, "--extract") || !strcmp(t, "--get");
  tv->create = tv->create || !strcmp(t, "--create") || !strcmp(t, "--append") ||
               !strcmp(t, "--update") || !strcmp(t, "--concatenate");
  bool dir = !strncmp(t, "--directory", 11), file = !strncmp(t, "--file", 6);
  if (!dir && !file)
    return true;
  if (eq) {
    tar_value(cx, tv, eq + 1, w[*k].dynamic, dir);
  } else if (*k + 1 < n) {
    ++*k;
    tar_value(cx, tv, wt(&w[*k]), w[*k].dynamic, dir);
  }
  return true;
}

// tar: extraction writes below -C DIR (or the current directory), creation
// writes the archive; options that run programs are opaque.
void shell_tar(struct ctx *cx, const struct pword *w, size_t n) {
  static const char args[] = "fCbFgHIKLNTVX"; // short options with a value
  struct tar_values tv = {.n = 0};
  for (size_t k = 1; k < n && !cx->stop; k++) {
    const char *t = wt(&w[k]);
    if (w[k].dynamic && t[0] == '-') {
      shell_opaque(cx, "a dynamic tar option");
      break;
    }
    if (t[0] == '-' && t[1] == '-') {
      tar_long(cx, &tv, w, n, &k);
      continue;
    }
    bool old = k == 1 && t[0] != '-'; // tar xvf A: the old style
    if (t[0] != '-' && !old)
      continue;
    size_t next = k + 1;
    for (size_t i = old ? 0 : 1; t[i]; i++) {
      char c = t[i];
      tv.extract = tv.extract || c == 'x';
      tv.create = tv.create || strchr("cruA", c);
      if (strchr("IFPT", c))
        shell_opaque(cx, "a tar option that runs a program or writes "
                         "outside its directory");
      if (!strchr(args, c))
        continue;
      if (!old && t[i + 1]) { // -fFILE, -CDIR
        if (c == 'C' || c == 'f')
          tar_value(cx, &tv, t + i + 1, w[k].dynamic, c == 'C');
        break;
      }
      if (next < n && (c == 'C' || c == 'f'))
        tar_value(cx, &tv, wt(&w[next]), w[next].dynamic, c == 'C');
      next += next < n;
    }
    k = next - 1;
  }
  for (size_t i = 0; i < tv.n; i++) {
    if (tv.dir[i] && tv.extract)
      shell_emit_path(cx, SHELL_EDIT, tv.v[i], tv.dyn[i], true);
    else if (!tv.dir[i] && tv.create)
      edit_path(cx, tv.v[i], tv.dyn[i]);
    free(tv.v[i]);
  }
  if (tv.extract && !tv.has_dir)
    shell_emit_path(cx, SHELL_EDIT, ".", false, true);
}

// ---- options that run commands -------------------------------------------

// Options of other commands that run a program or read a configuration
// that can: "-X" is a short option letter (also in a bundle), "--x" a long
// option prefix, "+" any word starting with +.
static const struct {
  const char *name;
  const char *opts[6];
} runners[] = {
    {"rsync", {"-e", "--rsh", "--rsync-path", NULL}},
    {"ssh", {"-F", NULL}},
    {"scp", {"-S", "-F", NULL}},
    {"sftp", {"-S", "-F", "-D", NULL}},
    {"zip", {"--unzip-command", "-TT", NULL}},
    {"man", {"-P", "-H", "--pager", "--html", NULL}},
    {"sort", {"--compress-program", NULL}},
    {"curl", {"-K", "--config", NULL}},
    {"wget", {"-e", "--execute", "--config", "--use-askpass", NULL}},
    {"less", {"+", NULL}},
    {"more", {"+", NULL}},
};

static bool short_in(const char *t, char letter) {
  return t[0] == '-' && t[1] && t[1] != '-' && strchr(t + 1, letter);
}

// Why an option of w[0] (named name) runs code, or NULL.
const char *shell_option_runs(const struct pword *w, size_t n,
                              const char *name) {
  for (size_t r = 0; r < sizeof(runners) / sizeof(runners[0]); r++) {
    if (runners[r].name[0] != name[0] || strcmp(runners[r].name, name) != 0)
      continue;
    for (size_t k = 1; k < n; k++) {
      const char *t = wt(&w[k]);
      if (!strcmp(t, "--"))
        break;
      for (size_t o = 0; runners[r].opts[o]; o++) {
        const char *op = runners[r].opts[o];
        bool hit = !strcmp(op, "+")  ? t[0] == '+'
                   : op[1] == '-'    ? !strncmp(t, op, strlen(op))
                   : strlen(op) == 3 ? !strncmp(t, op, 3)
                                     : short_in(t, op[1]);
        if (hit)
          return "an option that runs a program";
      }
    }
  }
  if (!strcmp(name, "ssh") || !strcmp(name, "scp") || !strcmp(name, "sftp")) {
    for (size_t k = 1; k < n; k++) {
      const char *t = wt(&w[k]), *v = NULL;
      if (!strcmp(t, "-o") && k + 1 < n)
        v = wt(&w[k + 1]);
      else if (!strncmp(t, "-o", 2))
        v = t + 2;
      for (size_t i = 0; v && v[i]; i++)
        if (!strncasecmp(v + i, "command", 7) ||
            !strncasecmp(v + i, "include", 7))
          return "an ssh option that runs a local command";
    }
  }
  return NULL;
}

// wget saves each URL under its last path segment unless -O names a file
// (or -r/-m/-p fetch many: then anything below the prefix).
void shell_wget(struct ctx *cx, const struct pword *w, size_t n) {
  const char *prefix = NULL;
  bool prefix_dyn = false, many = false;
  size_t first = 0;
  for (size_t k = 1; k < n; k++) {
    const char *t = wt(&w[k]);
    if (short_in(t, 'O') || !strncmp(t, "--output-document", 17) ||
        !strcmp(t, "--spider"))
      return;
    if (short_in(t, 'r') || short_in(t, 'm') || short_in(t, 'p') ||
        !strcmp(t, "--recursive") || !strcmp(t, "--mirror") ||
        !strcmp(t, "--page-requisites"))
      many = true;
    if (!strcmp(t, "-P") && k + 1 < n) {
      prefix = wt(&w[k + 1]);
      prefix_dyn = w[k + 1].dynamic;
    } else if (!strncmp(t, "--directory-prefix=", 19)) {
      prefix = t + 19;
      prefix_dyn = w[k].dynamic;
    }
    if (!first && t[0] != '-' && strstr(t, "://"))
      first = k;
  }
  if (many) {
    shell_emit_path(cx, SHELL_EDIT, prefix ? prefix : ".", prefix_dyn, true);
    return;
  }
  for (size_t k = first ? first : n; k < n; k++) {
    const char *t = wt(&w[k]), *u = strstr(t, "://");
    if (!u)
      continue;
    size_t end = strcspn(u + 3, "?#") + (size_t)(u + 3 - t);
    const char *slash = NULL;
    for (const char *q = u + 3; q < t + end; q++)
      if (*q == '/')
        slash = q;
    if (!slash || slash + 1 == t + end)
      continue; // index.html
    size_t ln = (size_t)(t + end - slash - 1);
    char *name = xmalloc(ln + (prefix ? strlen(prefix) + 1 : 0) + 1);
    if (prefix)
      sprintf(name, "%s/%.*s", prefix, (int)ln, slash + 1);
    else
      sprintf(name, "%.*s", (int)ln, slash + 1);
    shell_emit_path(cx, SHELL_EDIT, name, w[k].dynamic || prefix_dyn, true);
    free(name);
  }
}

// unzip extracts into -d DIR or the current directory (-l, -t, -p, -v,
// -Z only list, test or print); zip writes its archive, the first operand.
void shell_zip(struct ctx *cx, const struct pword *w, size_t n, bool unzip) {
  bool extract = unzip;
  for (size_t k = 1; k < n; k++) {
    const char *t = wt(&w[k]);
    if (t[0] == '-' && t[1] != '-' && t[1]) {
      if (unzip && strpbrk(t + 1, "ltpvZ"))
        extract = false;
      if (unzip && t[1] == 'd' && (t[2] || k + 1 < n)) {
        bool dyn = t[2] ? w[k].dynamic : w[k + 1].dynamic;
        shell_emit_path(cx, SHELL_EDIT, t[2] ? t + 2 : wt(&w[++k]), dyn, true);
        return;
      }
      continue;
    }
    if (!unzip && t[0] != '-') {
      edit_path(cx, t, w[k].dynamic);
      return;
    }
  }
  if (extract)
    shell_emit_path(cx, SHELL_EDIT, ".", false, true);
}

// ---- more programs that write files --------------------------------------

static const char *const compressors[] = {"gzip", "bzip2", "xz",   "zstd",
                                          "lz4",  "lzma",  "lzip", "compress"};
static const char *const suffixes[] = {".gz",  ".bz2",  ".xz", ".zst",
                                       ".lz4", ".lzma", ".lz", ".Z"};
static const char *const decompressors[] = {"gunzip", "bunzip2",   "unxz",
                                            "unzstd", "unlz4",     "unlzma",
                                            "lunzip", "uncompress"};

static bool named(const char *name, const char *const *list, size_t n,
                  size_t *at) {
  for (size_t i = 0; i < n; i++)
    if (name[0] == list[i][0] && !strcmp(name, list[i])) {
      *at = i;
      return true;
    }
  return false;
}

static void edit_suffixed(struct ctx *cx, const struct pword *w,
                          const char *suffix) {
  size_t n = w->text.len + strlen(suffix) + 1;
  char *p = xmalloc(n);
  snprintf(p, n, "%s%s", wt(w), suffix);
  shell_emit_path(cx, SHELL_EDIT, p, w->dynamic, true);
  free(p);
}

// Compressors (they replace FILE by FILE.gz, or the reverse), split (files
// named PREFIXaa...), mktemp (a new name from its template), ssh-keygen -f
// (the key and KEY.pub), patch -o. With w NULL: whether name is one of
// them.
bool shell_writers(struct ctx *cx, const struct pword *w, size_t n,
                   const char *name) {
  size_t at = 0;
  bool comp = named(name, compressors, 8, &at),
       decomp = named(name, decompressors, 8, &at);
  bool known = comp || decomp || !strcmp(name, "split") ||
               !strcmp(name, "mktemp") || !strcmp(name, "ssh-keygen") ||
               !strcmp(name, "patch");
  if (!w || !known)
    return known;
  bool to_stdout = false, opts = true;
  size_t nops = 0;
  for (size_t k = 1; k < n; k++) {
    const char *t = wt(&w[k]);
    if (opts && !strcmp(t, "--")) {
      opts = false;
      continue;
    }
    if (opts && t[0] == '-' && t[1]) {
      if ((comp || decomp) && (short_in(t, 'c') || short_in(t, 't') ||
                               !strcmp(t, "--stdout") || !strcmp(t, "--test")))
        to_stdout = true;
      bool val =
          (!strcmp(name, "ssh-keygen") && !strcmp(t, "-f")) ||
          (!strcmp(name, "patch") && (!strcmp(t, "-o") || !strcmp(t, "-r"))) ||
          (!strcmp(name, "mktemp") &&
           (!strcmp(t, "-p") || !strcmp(t, "--tmpdir")));
      bool other =
          t[2] == '\0' && ((!strcmp(name, "split") && strchr("abClnt", t[1])) ||
                           ((comp || decomp) && t[1] == 'S'));
      if (other) {
        k++; // a value that is not a file
        continue;
      }
      if (val && k + 1 < n) {
        const struct pword *v = &w[++k];
        shell_emit_path(cx, SHELL_EDIT, wt(v), v->dynamic, true);
        if (!strcmp(name, "ssh-keygen"))
          edit_suffixed(cx, v, ".pub");
      } else if (!strncmp(t, "--output=", 9) || !strncmp(t, "--tmpdir=", 9)) {
        shell_emit_path(cx, SHELL_EDIT, t + 9, w[k].dynamic, true);
      }
      continue;
    }
    nops++;
    if (comp && !to_stdout) {
      shell_emit_path(cx, SHELL_EDIT, t, w[k].dynamic, true);
      edit_suffixed(cx, &w[k], suffixes[at]);
    } else if (decomp && !to_stdout) {
      shell_emit_path(cx, SHELL_EDIT, t, w[k].dynamic, true);
      const char *dot = strrchr(t, '.');
      if (dot && dot != t) {
        char *p = xstrndup(t, (size_t)(dot - t));
        shell_emit_path(cx, SHELL_EDIT, p, w[k].dynamic, true);
        free(p);
      }
    } else if (!strcmp(name, "split") && nops == 2) {
      shell_emit_path(cx, SHELL_EDIT, t, true, true); // PREFIXaa, ...
    } else if (!strcmp(name, "mktemp") && strchr(t, '/')) {
      char *dir = xstrndup(t, (size_t)(strrchr(t, '/') - t));
      shell_emit_path(cx, SHELL_EDIT, *dir ? dir : "/", w[k].dynamic, true);
      free(dir);
    }
  }
  return true;
}
