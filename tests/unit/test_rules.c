// rules: the rule grammar, the alias table, specifier normalisation, the
// reasons given for invalid rules, host and tool-name globs.

#include "policy/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_valid(void) {
  static const struct {
    const char *text;
    enum rules_class cls;
    const char *spec;
    bool unanchored, note;
  } rows[] = {
      {"Bash", RULES_BASH, NULL, false, false},
      {"Bash(*)", RULES_BASH, NULL, false, false},
      {"  Bash(ls -la)  ", RULES_BASH, "ls -la", false, false},
      {"Bash( npm test )", RULES_BASH, "npm test", false, false},
      {"Bash(npm run test:*)", RULES_BASH, "npm run test *", false, false},
      {"Bash(git:*)", RULES_BASH, "git *", false, false},
      {"Bash(git:* push)", RULES_BASH, "git:* push", false, false},
      {"Bash(echo $(date))", RULES_BASH, "echo $(date)", false, false},
      {"Shell(ls)", RULES_BASH, "ls", false, false},
      {"run_shell_command(git)", RULES_BASH, "git *", false, false},
      {"run_shell_command(npm test)", RULES_BASH, "npm test *", false, false},
      {"run_shell_command", RULES_BASH, NULL, false, false},
      {"ShellTool(rm)", RULES_BASH, "rm *", false, false},
      {"Read", RULES_READ, NULL, false, false},
      {"Read(./.env)", RULES_READ, "./.env", false, false},
      {"Grep(/src/**)", RULES_READ, "/src/**", false, false},
      {"read_file(x)", RULES_READ, NULL, false, true},
      {"Edit(/src/**)", RULES_EDIT, "/src/**", false, false},
      {"Write(//tmp/x)", RULES_EDIT, "//tmp/x", false, false},
      {"MultiEdit", RULES_EDIT, NULL, false, false},
      {"write_file(foo.txt)", RULES_EDIT, NULL, false, true},
      {"replace", RULES_EDIT, NULL, false, false},
      {"WebFetch", RULES_WEBFETCH, NULL, false, false},
      {"WebFetch(github.com)", RULES_WEBFETCH, "github.com", false, false},
      {"WebFetch(domain:GitHub.COM.)", RULES_WEBFETCH, "github.com", false,
       false},
      {"WebFetch(domain:*)", RULES_WEBFETCH, NULL, false, false},
      {"WebFetch(domain:*.example.com)", RULES_WEBFETCH, "*.example.com", false,
       false},
      {"web_fetch(x)", RULES_WEBFETCH, NULL, false, true},
      {"WebSearch", RULES_WEBSEARCH, NULL, false, false},
      {"google_web_search", RULES_WEBSEARCH, NULL, false, false},
      {"mcp__github", RULES_TOOL, "mcp__github__*", false, false},
      {"mcp__github__create_issue", RULES_TOOL, "mcp__github__create_issue",
       false, false},
      {"mcp__fs__*", RULES_TOOL, "mcp__fs__*", false, false},
      {"mcp__gh__get_*", RULES_TOOL, "mcp__gh__get_*", false, false},
      {"mcp__*", RULES_TOOL, "mcp__*", true, false},
      {"mcp__g*__x", RULES_TOOL, "mcp__g*__x", true, false},
      {"*", RULES_TOOL, "*", true, false},
      {"B*", RULES_TOOL, "B*", true, false},
      {"mcp_github_create_issue", RULES_TOOL, "mcp__github__create_issue",
       false, false},
      {"mcp_github", RULES_TOOL, "mcp__github__*", false, false},
      {"mcp_github_*", RULES_TOOL, "mcp__github__*", false, false},
      {"Kind(switch_mode)", RULES_KIND, "switch_mode", false, false},
      {"Kind(delete)", RULES_KIND, "delete", false, false},
      {"Kind(_custom)", RULES_KIND, "_custom", false, false},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    struct rules_rule r;
    char err[256] = "";
    int rc = rules_parse(rows[i].text, &r, err, sizeof(err));
    if (!ok(rc == 0, "valid: %s", rows[i].text)) {
      printf("#   reason: %s\n", err);
      continue;
    }
    is_int(r.cls, rows[i].cls, rows[i].text);
    is_str(r.spec, rows[i].spec, rows[i].text);
    is_int(r.unanchored, rows[i].unanchored, rows[i].text);
    is_int(r.note != NULL, rows[i].note, rows[i].text);
    rules_rule_free(&r);
  }
  struct rules_rule r;
  char err[256];
  ok(rules_parse("PowerShell(Get-Item)", &r, err, sizeof(err)) == 0 &&
         r.no_allow && r.cls == RULES_BASH,
     "PowerShell: deny and ask only");
  rules_rule_free(&r);
}

static void test_invalid(void) {
  static const struct {
    const char *text, *reason;
  } rows[] = {
      {"", "empty rule"},
      {"   ", "empty rule"},
      {NULL, "empty rule"},
      {"Frob", "unknown tool 'Frob'"},
      {"Frob(x)", "unknown tool 'Frob'"},
      {"bash(ls)", "did you mean 'Bash'"},
      {"ExitPlanMode", "Kind(switch_mode)"},
      {"Bash(", "missing ')'"},
      {"Bash(ls", "missing ')'"},
      {"Bash(ls))", "extra ')'"},
      {"Bash(ls) x", "text after ')'"},
      {"Bash()", "empty specifier"},
      {"Bash(  )", "empty specifier"},
      {"(ls)", "missing tool name"},
      {"Ba sh", "invalid character ' '"},
      {"Bash)", "')' without '('"},
      {"Kind", "Kind needs an ACP kind"},
      {"Kind(bogus)", "unknown ACP kind 'bogus'"},
      {"WebFetch(https://x.com/a)", "WebFetch takes a host"},
      {"WebFetch(domain:)", "WebFetch takes a host"},
      {"WebSearch(cats)", "no specifier"},
      {"mcp__", "needs a server name"},
      {"mcp__x(y)", "no specifier"},
      {"mcp__*(y)", "no specifier"},
      {"Read(~bob/x)", "~user"},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    struct rules_rule r;
    char err[256] = "";
    int rc = rules_parse(rows[i].text, &r, err, sizeof(err));
    ok(rc == -1 && strstr(err, rows[i].reason), "invalid: %s -> %s",
       rows[i].text ? rows[i].text : "(null)", err);
  }
  char *big = malloc(RULES_TEXT_MAX + 16);
  snprintf(big, RULES_TEXT_MAX + 16, "Bash(%0*d)", RULES_TEXT_MAX, 0);
  struct rules_rule r;
  char err[256];
  ok(rules_parse(big, &r, err, sizeof(err)) == -1 && strstr(err, "too long"),
     "too long: %s", err);
  free(big);
}

static void test_hosts(void) {
  static const struct {
    const char *pat, *host;
    bool want;
  } rows[] = {
      {"example.com", "example.com", true},
      {"example.com", "www.example.com", false},
      {"*.example.com", "www.example.com", true},
      {"*.example.com", "a.b.example.com", true},
      {"*.example.com", "example.com", false},
      {"*.example.com", "badexample.com", false},
      {"example.*", "example.org", true},
      {"example.*", "example.evil.com", false},
      {"*", "anything.at.all", true},
      {"api.*.com", "api.x.com", true},
      {"api.*.com", "api.x.y.com", false},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++)
    is_int(rules_host_match(rows[i].pat, rows[i].host), rows[i].want,
           rows[i].host);
}

static void test_names(void) {
  ok(rules_glob("mcp__gh__*", "mcp__gh__get", false), "glob: tail");
  ok(!rules_glob("mcp__gh__*", "mcp__ghx__get", false), "glob: server");
  ok(rules_glob("B*", "bash", true), "glob: folded");
  ok(!rules_glob("B*", "bash", false), "glob: exact");
  // Only `*` is special in a tool-name glob (path_glob_segment without
  // classes): `?`, `[...]` and `\` are literal, as they are in a domain.
  ok(rules_glob("mcp__a?b", "mcp__a?b", false) &&
         !rules_glob("mcp__a?b", "mcp__axb", false),
     "glob: ? is literal");
  ok(rules_glob("x[ab]*", "x[ab]y", false) && !rules_glob("x[ab]", "xa", false),
     "glob: [...] is literal");
  ok(rules_glob("a\\*", "a\\zz", false) && !rules_glob("a\\*", "a*", false),
     "glob: \\ is literal");
  ok(rules_glob("*a*b*", "xxaxxbxx", false) && !rules_glob("*a*b", "ba", false),
     "glob: stars backtrack");
  ok(rules_host_match("ap?.example.com", "ap?.example.com") &&
         !rules_host_match("ap?.example.com", "api.example.com"),
     "host: ? is literal");
  enum rules_class c;
  ok(rules_tool_class("write_file", &c) && c == RULES_EDIT,
     "write_file is Edit");
  ok(!rules_tool_class("Frob", &c), "Frob is no tool");
  ok(!rules_tool_class("Kind", &c), "Kind is no tool");
  const char *names[16];
  size_t n = rules_class_names(RULES_BASH, names, 16);
  ok(n >= 4 && strcmp(names[0], "Bash") == 0, "Bash names: %zu", n);
  // Every alias is found by its name (rules.c looks names up by length),
  // whole or as the start of a longer string, and its class is the one
  // rules_class_names lists it under; a name one byte shorter or longer is
  // none.
  size_t found = 0, wrong = 0;
  for (int k = RULES_BASH; k <= RULES_WEBSEARCH; k++) {
    const char *v[32];
    size_t m = rules_class_names((enum rules_class)k, v, 32);
    for (size_t i = 0; i < m; i++, found++) {
      char buf[64];
      size_t len = strlen(v[i]);
      snprintf(buf, sizeof(buf), "%s__x", v[i]);
      enum rules_class c1 = RULES_KIND, c2 = RULES_KIND;
      bool in = rules_tool_class(v[i], &c1) &&
                rules_tool_class_n(buf, len, &c2) &&
                c1 == (enum rules_class)k && c2 == (enum rules_class)k;
      bool out = !rules_tool_class_n(buf, len + 1, &c1) &&
                 !rules_tool_class_n(v[i], len - 1, &c1);
      wrong += !(in && out);
    }
  }
  ok(found >= 25 && wrong == 0, "%zu tool names found by name (%zu wrong)",
     found, wrong);
  ok(rules_kind_valid("switch_mode") && rules_kind_valid("_x") &&
         !rules_kind_valid("_") && !rules_kind_valid("nope"),
     "kinds");
}

int main(void) {
  test_valid();
  test_invalid();
  test_hosts();
  test_names();
  return done_testing();
}
