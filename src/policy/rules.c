#include "rules.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/mem.h"
#include "path.h"

// How a tool name treats its specifier.
enum how {
  HOW_NATIVE,       // Claude syntax: the class's specifier
  HOW_GEMINI_SHELL, // Gemini prefix: `run_shell_command(git)` = `git *`
  HOW_GEMINI_ARGS,  // Gemini ignores the arguments of other tools
  HOW_POWERSHELL,   // out of scope: deny and ask only
};

struct alias {
  const char *name;
  enum rules_class cls;
  enum how how;
};

static const struct alias aliases[] = {
    {"Bash", RULES_BASH, HOW_NATIVE},
    {"Shell", RULES_BASH, HOW_NATIVE},
    {"run_shell_command", RULES_BASH, HOW_GEMINI_SHELL},
    {"ShellTool", RULES_BASH, HOW_GEMINI_SHELL},
    {"PowerShell", RULES_BASH, HOW_POWERSHELL},
    {"Read", RULES_READ, HOW_NATIVE},
    {"Grep", RULES_READ, HOW_NATIVE},
    {"Glob", RULES_READ, HOW_NATIVE},
    {"LS", RULES_READ, HOW_NATIVE},
    {"read_file", RULES_READ, HOW_GEMINI_ARGS},
    {"read_many_files", RULES_READ, HOW_GEMINI_ARGS},
    {"list_directory", RULES_READ, HOW_GEMINI_ARGS},
    {"glob", RULES_READ, HOW_GEMINI_ARGS},
    {"grep_search", RULES_READ, HOW_GEMINI_ARGS},
    {"search_file_content", RULES_READ, HOW_GEMINI_ARGS},
    {"Edit", RULES_EDIT, HOW_NATIVE},
    {"Write", RULES_EDIT, HOW_NATIVE},
    {"MultiEdit", RULES_EDIT, HOW_NATIVE},
    {"NotebookEdit", RULES_EDIT, HOW_NATIVE},
    {"write_file", RULES_EDIT, HOW_GEMINI_ARGS},
    {"replace", RULES_EDIT, HOW_GEMINI_ARGS},
    {"WebFetch", RULES_WEBFETCH, HOW_NATIVE},
    {"web_fetch", RULES_WEBFETCH, HOW_GEMINI_ARGS},
    {"WebSearch", RULES_WEBSEARCH, HOW_NATIVE},
    {"google_web_search", RULES_WEBSEARCH, HOW_GEMINI_ARGS},
    {"Kind", RULES_KIND, HOW_NATIVE},
};

// Claude tools the broker cannot see as such, and what to write instead.
static const char *const hints[][2] = {
    {"ExitPlanMode", "Kind(switch_mode)"},
    {"EnterPlanMode", "Kind(switch_mode)"},
    {"Task", "Kind(think)"},
    {"Agent", "Kind(think)"},
    {"TodoWrite", "Kind(think)"},
};

static const char *const kinds[] = {"read",        "edit",    "delete", "move",
                                    "search",      "execute", "think",  "fetch",
                                    "switch_mode", "other"};

static const struct alias *alias_find(const char *name);
static const struct alias *alias_find_n(const char *name, size_t n);
static int parse_tool(const char *tool, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen);
static int parse_glob(const char *tool, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen);
static int parse_mcp(const char *tool, const char *spec, struct rules_rule *out,
                     char *err, size_t errlen);
static int parse_spec(const struct alias *a, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen);
static int parse_native(enum rules_class cls, const char *spec,
                        struct rules_rule *out, char *err, size_t errlen);
static char *bash_spec(const char *spec);
static int host_spec(const char *spec, struct rules_rule *out, char *err,
                     size_t errlen);
static int unknown_tool(const char *tool, char *err, size_t errlen);
static int split_rule(const char *text, char *tool, char *spec, char *err,
                      size_t errlen);
static int check_tool(const char *tool, size_t n, char *err, size_t errlen);
static void trimmed(const char *s, size_t n, char *out);
static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// strchr(" \t\r\n", c) for a byte of a string (never its NUL).
static inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int rules_parse(const char *text, struct rules_rule *out, char *err,
                size_t errlen) {
  *out = (struct rules_rule){0};
  // The tool name and the specifier (when there is one) on the stack: a
  // text is at most RULES_TEXT_MAX bytes.
  char tool[RULES_TEXT_MAX + 1], spec[RULES_TEXT_MAX + 1];
  spec[0] = '\0';
  if (split_rule(text, tool, spec, err, errlen) != 0)
    return -1;
  int rc = parse_tool(tool, spec[0] ? spec : NULL, out, err, errlen);
  if (rc != 0)
    rules_rule_free(out);
  return rc;
}

void rules_rule_free(struct rules_rule *r) {
  free(r->spec);
  free(r->note);
  *r = (struct rules_rule){0};
}

bool rules_tool_class(const char *name, enum rules_class *out) {
  return name && rules_tool_class_n(name, strlen(name), out);
}

bool rules_tool_class_n(const char *name, size_t n, enum rules_class *out) {
  const struct alias *a = alias_find_n(name, n);
  if (!a || a->cls == RULES_KIND)
    return false;
  *out = a->cls;
  return true;
}

size_t rules_class_names(enum rules_class c, const char **names, size_t max) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]) && n < max; i++)
    if (aliases[i].cls == c)
      names[n++] = aliases[i].name;
  return n;
}

bool rules_glob(const char *glob, const char *name, bool fold) {
  return path_glob_segment(glob, strlen(glob), name, strlen(name), false, fold);
}

bool rules_host_match(const char *pattern, const char *host) {
  if (!pattern || !host)
    return false;
  if (strcmp(pattern, "*") == 0)
    return true;
  size_t pn = strlen(pattern), hn = strlen(host);
  if (pattern[0] == '*' && pattern[1] == '.') {
    // Any subdomain depth: the host ends with ".<rest>" and is longer.
    const char *rest = pattern + 1;
    size_t rn = pn - 1;
    return hn > rn && strcmp(host + hn - rn, rest) == 0 &&
           !strchr(rest + 1, '*');
  }
  // Label by label, the same number of labels.
  const char *p = pattern, *h = host;
  for (;;) {
    size_t pl = strcspn(p, "."), hl = strcspn(h, ".");
    if (!path_glob_segment(p, pl, h, hl, false, false))
      return false;
    if (!p[pl] || !h[hl])
      return !p[pl] && !h[hl];
    p += pl + 1;
    h += hl + 1;
  }
}

bool rules_kind_valid(const char *kind) {
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strcmp(kind, kinds[i]) == 0)
      return true;
  if (kind[0] != '_' || !kind[1])
    return false;
  return strspn(kind + 1,
                "abcdefghijklmnopqrstuvwxyz"
                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") == strlen(kind + 1);
}

static const struct alias *alias_find(const char *name) {
  return alias_find_n(name, strlen(name));
}

// Every request's tool name (or the start of its toolCallId) is looked up
// here: only the names of its length (by_len: 1 + their indices in aliases,
// per length, and first: their first bytes; test_rules checks that every
// alias is found by its name).
static const struct alias *alias_find_n(const char *name, size_t n) {
  static const unsigned char by_len[20][8] = {
      [2] = {9},      [4] = {1, 6, 7, 8, 13, 16, 26},
      [5] = {2, 17},  [7] = {21},
      [8] = {22},     [9] = {4, 10, 18, 23, 24},
      [10] = {5, 20}, [11] = {14},
      [12] = {19},    [14] = {12},
      [15] = {11},    [17] = {3, 25},
      [19] = {15},
  };
  static const char *const first[20] = {
      [2] = "L",     [4] = "BRGGgEK", [5] = "SW", [7] = "r",  [8] = "W",
      [9] = "SrMwW", [10] = "Pw",     [11] = "g", [12] = "N", [14] = "l",
      [15] = "r",    [17] = "rg",     [19] = "s",
  };
  if (n >= sizeof(by_len) / sizeof(*by_len) || !first[n] || !name[0] ||
      !strchr(first[n], name[0]))
    return NULL;
  for (size_t j = 0; first[n][j]; j++) {
    const struct alias *a = &aliases[by_len[n][j] - 1];
    if (first[n][j] == name[0] && memcmp(a->name, name, n) == 0)
      return a;
  }
  return NULL;
}

static int parse_tool(const char *tool, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen) {
  if (strchr(tool, '*'))
    return parse_glob(tool, spec, out, err, errlen);
  if (strncmp(tool, "mcp_", 4) == 0)
    return parse_mcp(tool, spec, out, err, errlen);
  const struct alias *a = alias_find(tool);
  if (!a)
    return unknown_tool(tool, err, errlen);
  return parse_spec(a, spec, out, err, errlen);
}

// `*`, `mcp__*`, `mcp__gh__get_*`, Gemini `mcp_gh_*`: tool-name globs.
static int parse_glob(const char *tool, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen) {
  if (spec)
    return fail(err, errlen,
                "a tool-name pattern takes no specifier: "
                "write %s",
                tool);
  if (strncmp(tool, "mcp_", 4) == 0 && strncmp(tool, "mcp__", 5) != 0)
    return parse_mcp(tool, NULL, out, err, errlen); // Gemini's spelling
  out->cls = RULES_TOOL;
  out->spec = xstrdup(tool);
  // Allow lists take globs only after a literal mcp__<server>__ (§1.3).
  bool mcp = strncmp(tool, "mcp__", 5) == 0;
  const char *server = mcp ? tool + 5 : NULL;
  const char *sep = mcp ? strstr(server, "__") : NULL;
  out->unanchored = !sep || sep == server ||
                    memchr(server, '*', (size_t)(sep - server)) != NULL;
  return 0;
}

// `mcp__server`, `mcp__server__tool`, Gemini `mcp_server_tool`.
static int parse_mcp(const char *tool, const char *spec, struct rules_rule *out,
                     char *err, size_t errlen) {
  if (spec)
    return fail(err, errlen, "MCP rules take no specifier: write %s", tool);
  bool gemini = strncmp(tool, "mcp__", 5) != 0;
  const char *server = tool + (gemini ? 4 : 5);
  const char *sep = gemini ? strchr(server, '_') : strstr(server, "__");
  size_t sn = sep ? (size_t)(sep - server) : strlen(server);
  if (!sn)
    return fail(err, errlen, "%s needs a server name, e.g. mcp__github", tool);
  const char *name = sep ? sep + (gemini ? 1 : 2) : "";
  char buf[RULES_TEXT_MAX + 16];
  snprintf(buf, sizeof(buf), "mcp__%.*s__%s", (int)sn, server,
           *name ? name : "*");
  out->cls = RULES_TOOL;
  out->spec = xstrdup(buf);
  out->unanchored = memchr(server, '*', sn) != NULL;
  return 0;
}

static int parse_spec(const struct alias *a, const char *spec,
                      struct rules_rule *out, char *err, size_t errlen) {
  out->cls = a->cls;
  switch (a->how) {
  case HOW_GEMINI_SHELL:
    if (spec && !strchr(spec, '*')) {
      char *s = xmalloc(strlen(spec) + 3);
      sprintf(s, "%s *", spec); // a Gemini prefix has a word boundary
      out->spec = s;
      return 0;
    }
    break;
  case HOW_GEMINI_ARGS:
    if (spec) {
      char note[RULES_TEXT_MAX + 128];
      snprintf(note, sizeof(note),
               "Gemini ignores the arguments of %s: the rule applies to "
               "every use",
               a->name);
      out->note = xstrdup(note);
    }
    return 0;
  case HOW_POWERSHELL:
    out->no_allow = true;
    break;
  case HOW_NATIVE:
    break;
  }
  return parse_native(a->cls, spec, out, err, errlen);
}

static int parse_native(enum rules_class cls, const char *spec,
                        struct rules_rule *out, char *err, size_t errlen) {
  char why[256];
  switch (cls) {
  case RULES_BASH:
    out->spec = spec ? bash_spec(spec) : NULL;
    return 0;
  case RULES_READ:
  case RULES_EDIT:
    if (spec) {
      // Checked against placeholder anchors: only the syntax matters here.
      char *pat = path_rule_pattern(spec, "/r", "/h", true, why, sizeof(why));
      if (!pat)
        return fail(err, errlen, "%s", why);
      free(pat);
      out->spec = xstrdup(spec);
    }
    return 0;
  case RULES_WEBFETCH:
    return spec ? host_spec(spec, out, err, errlen) : 0;
  case RULES_WEBSEARCH:
    return spec ? fail(err, errlen, "WebSearch takes no specifier") : 0;
  case RULES_KIND:
    if (!spec)
      return fail(err, errlen,
                  "Kind needs an ACP kind, e.g. "
                  "Kind(switch_mode)");
    if (!rules_kind_valid(spec))
      return fail(err, errlen,
                  "unknown ACP kind '%s' (read, edit, delete, move, search, "
                  "execute, think, fetch, switch_mode, other)",
                  spec);
    out->spec = xstrdup(spec);
    return 0;
  case RULES_TOOL:
    break;
  }
  return fail(err, errlen, "internal: no specifier parser");
}

// `Bash(*)` is `Bash`; a trailing `:*` is ` *` (§1.3).
static char *bash_spec(const char *spec) {
  if (strcmp(spec, "*") == 0)
    return NULL;
  size_t n = strlen(spec);
  char *s = xstrdup(spec);
  if (n >= 2 && s[n - 2] == ':' && s[n - 1] == '*')
    s[n - 2] = ' ';
  return s;
}

// `domain:host`, or a bare `host` (vibing.nvim spelling).
static int host_spec(const char *spec, struct rules_rule *out, char *err,
                     size_t errlen) {
  const char *h = strncmp(spec, "domain:", 7) == 0 ? spec + 7 : spec;
  size_t n = strlen(h);
  while (n && h[n - 1] == '.')
    n--;
  if (!n || strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789.-_*") < n)
    return fail(err, errlen,
                "WebFetch takes a host: WebFetch(domain:github.com), not "
                "'%s'",
                spec);
  if (n == 1 && h[0] == '*')
    return 0; // `domain:*` is every host
  out->spec = xstrndup(h, n);
  for (char *c = out->spec; *c; c++)
    if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
  return 0;
}

static int unknown_tool(const char *tool, char *err, size_t errlen) {
  for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++)
    if (strcmp(tool, hints[i][0]) == 0)
      return fail(err, errlen, "unknown tool '%s' (use %s)", tool, hints[i][1]);
  for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
    if (strcasecmp(tool, aliases[i].name) == 0)
      return fail(err, errlen, "unknown tool '%s' (did you mean '%s'?)", tool,
                  aliases[i].name);
  return fail(err, errlen, "unknown tool '%s'", tool);
}

// Splits `Tool(spec)` into new strings (spec NULL without parentheses).
// tool, spec: RULES_TEXT_MAX + 1 bytes each; spec stays "" when the rule
// has none.
static int split_rule(const char *text, char *tool, char *spec, char *err,
                      size_t errlen) {
  if (!text)
    return fail(err, errlen, "empty rule");
  size_t len = strlen(text);
  if (len > RULES_TEXT_MAX)
    return fail(err, errlen, "rule too long (at most %d bytes)",
                RULES_TEXT_MAX);
  while (len && is_space(text[len - 1]))
    len--;
  while (len && is_space(*text))
    text++, len--;
  if (!len)
    return fail(err, errlen, "empty rule");
  size_t i = strcspn(text, "(");
  i = i < len ? i : len;
  if (check_tool(text, i, err, errlen) != 0)
    return -1;
  if (!i)
    return fail(err, errlen, "missing tool name before '('");
  if (i == len) {
    memcpy(tool, text, len);
    tool[len] = '\0';
    return 0;
  }
  int depth = 0;
  size_t close = len;
  for (size_t j = i; j < len && close == len; j++) {
    depth += text[j] == '(' ? 1 : text[j] == ')' ? -1 : 0;
    if (!depth)
      close = j;
  }
  if (close == len)
    return fail(err, errlen, "missing ')' (unbalanced parentheses)");
  if (text[close + 1] == ')')
    return fail(err, errlen, "unbalanced parentheses: extra ')'");
  if (close != len - 1)
    return fail(err, errlen, "text after ')': '%.*s'", (int)(len - close - 1),
                text + close + 1);
  trimmed(text + i + 1, close - i - 1, spec);
  if (!*spec)
    return fail(err, errlen, "empty specifier: write %.*s or %.*s(...)", (int)i,
                text, (int)i, text);
  memcpy(tool, text, i);
  tool[i] = '\0';
  return 0;
}

// The characters of a tool name: letters, digits, `_`, `-`, `*`.
static int check_tool(const char *tool, size_t n, char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)tool[i];
    if (c == ')')
      return fail(err, errlen, "unbalanced parentheses: ')' without '('");
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*'))
      return fail(err, errlen,
                  c >= 32 && c < 127 ? "invalid character '%c' in the tool "
                                       "name"
                                     : "invalid character (code %d) in the "
                                       "tool name",
                  c);
  }
  return 0;
}

static void trimmed(const char *s, size_t n, char *out) {
  while (n && is_space(s[n - 1]))
    n--;
  while (n && is_space(*s))
    s++, n--;
  memcpy(out, s, n);
  out[n] = '\0';
}

static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}
