// policy: the decision order (deny, ask/maybe, opaque, protected paths,
// switch_mode, plan, circuit breaker, allow rules and memory, yolo, modes)
// over request shapes of every agent, the option answered (R cases), the
// narrow rules offered for "remember", warnings, names.
//
// Requests name the project root {P} and home {H}: a fresh temp directory
// with a symlink or two, so that path resolution is exercised for real.

#include "policy/policy.h"
#include "policy/policy_ref.h"
#include "policy/shcache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char root[512], home[512];

enum shape {
  CB, // Claude adapter Bash: rawInput.command, title, kind execute
  GB, // Gemini shell: toolCallId run_shell_command__, title = command
  OB, // claude-code-acp 0.16: rawInput.command, title in backticks, no kind
  CX, // codex-acp: rawInput.command is an argv (arg: a JSON array)
  CE, // Claude Edit: file_path + old_string/new_string, diff, locations
  CR, // Claude Read: file_path, kind read, locations
  GE, // Gemini replace: diff content and locations, no rawInput
  WF, // Claude WebFetch: rawInput.url
  MC, // Claude MCP: title = tool name, kind other, _meta toolName
  GM, // Gemini MCP: toolCallId <fqn>__call_1, kind other
  SM, // ExitPlanMode: kind switch_mode
  UK, // unknown tool: kind other
  GK, // generic agent: kind = arg, title, one location {P}/x or {H}/notes
  RAW // arg is the toolCall object
};

// Replaces {P} and {H} (into a static buffer: one use at a time).
static const char *sub(const char *s) {
  static char out[8192];
  size_t n = 0;
  for (; *s && n < sizeof(out) - 600; s++) {
    if (s[0] == '{' && (s[1] == 'P' || s[1] == 'H') && s[2] == '}') {
      n += (size_t)snprintf(out + n, sizeof(out) - n, "%s",
                            s[1] == 'P' ? root : home);
      s += 2;
    } else {
      out[n++] = *s;
    }
  }
  out[n] = '\0';
  return out;
}

static json_t *opts(void) {
  return json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}]", "optionId",
                   "allow_always", "name", "Always Allow", "kind",
                   "allow_always", "optionId", "allow", "name", "Allow", "kind",
                   "allow_once", "optionId", "reject", "name", "Reject", "kind",
                   "reject_once");
}

static json_t *tool_call(enum shape s, const char *arg) {
  char *a = strdup(sub(arg));
  json_t *tc = NULL;
  switch (s) {
  case CB:
    tc = json_pack("{s:s,s:{s:s},s:s,s:s}", "toolCallId", "toolu_1", "rawInput",
                   "command", a, "title", a, "kind", "execute");
    break;
  case GB: {
    char cwd[700];
    snprintf(cwd, sizeof(cwd), "[current working directory %s] (run)", root);
    tc = json_pack("{s:s,s:s,s:s,s:s,s:[{s:s,s:{s:s,s:s}}],s:[]}", "toolCallId",
                   "run_shell_command__call_1", "status", "pending", "title", a,
                   "kind", "execute", "content", "type", "content", "content",
                   "type", "text", "text", cwd, "locations");
    break;
  }
  case OB: {
    char title[1024];
    snprintf(title, sizeof(title), "`%s`", a);
    tc = json_pack("{s:s,s:{s:s},s:s}", "toolCallId", "toolu_1", "rawInput",
                   "command", a, "title", title);
    break;
  }
  case CX:
    tc = json_pack("{s:s,s:s,s:{s:o,s:s}}", "toolCallId", "call_1", "kind",
                   "execute", "rawInput", "command", json_loads(a, 0, NULL),
                   "cwd", root);
    break;
  case CE:
    tc = json_pack("{s:s,s:{s:s,s:s,s:s},s:s,s:s,s:[{s:s,s:s,s:s,s:s}],"
                   "s:[{s:s}]}",
                   "toolCallId", "toolu_1", "rawInput", "file_path", a,
                   "old_string", "a", "new_string", "b", "title", "Edit",
                   "kind", "edit", "content", "type", "diff", "path", a,
                   "oldText", "a", "newText", "b", "locations", "path", a);
    break;
  case CR:
    tc =
        json_pack("{s:s,s:{s:s},s:s,s:s,s:[],s:[{s:s,s:i}]}", "toolCallId",
                  "toolu_1", "rawInput", "file_path", a, "title", "Read",
                  "kind", "read", "content", "locations", "path", a, "line", 1);
    break;
  case GE:
    tc = json_pack("{s:s,s:s,s:s,s:[{s:s,s:s,s:s,s:s}],s:[{s:s}]}",
                   "toolCallId", "replace__call_1", "title", "x: a => b",
                   "kind", "edit", "content", "type", "diff", "path", a,
                   "oldText", "a", "newText", "b", "locations", "path", a);
    break;
  case WF:
    tc = json_pack("{s:s,s:{s:s,s:s},s:s,s:s}", "toolCallId", "toolu_1",
                   "rawInput", "url", a, "prompt", "sum up", "title", "Fetch",
                   "kind", "fetch");
    break;
  case MC:
    tc = json_pack("{s:s,s:{},s:s,s:s,s:{s:{s:s}}}", "toolCallId", "toolu_1",
                   "rawInput", "title", a, "kind", "other", "_meta",
                   "claudeCode", "toolName", a);
    break;
  case GM: {
    char id[512];
    snprintf(id, sizeof(id), "%s__call_1", a);
    tc = json_pack("{s:s,s:s,s:s}", "toolCallId", id, "title", "MCP tool",
                   "kind", "other");
    break;
  }
  case SM:
    tc = json_pack("{s:s,s:{s:s},s:s,s:s}", "toolCallId", "toolu_1", "rawInput",
                   "plan", "## Plan", "title", "Ready to code?", "kind",
                   "switch_mode");
    break;
  case UK:
    tc = json_pack("{s:s,s:{s:s},s:s,s:s}", "toolCallId", "toolu_1", "rawInput",
                   "target", "all", "title", "Frobnicate", "kind", "other");
    break;
  case GK: {
    const char *kind = a, *path = strchr(a, ' ');
    char k[64];
    snprintf(k, sizeof(k), "%.*s", path ? (int)(path - kind) : 63, kind);
    tc = json_pack("{s:s,s:s,s:s,s:[]}", "toolCallId", "call_9", "title",
                   "Some tool", "kind", k, "content");
    if (path)
      json_object_set_new(tc, "locations",
                          json_pack("[{s:s}]", "path", path + 1));
    break;
  }
  case RAW:
    tc = json_loads(a, 0, NULL);
    break;
  }
  free(a);
  return tc;
}

static struct policy_request *request(enum shape s, const char *arg) {
  json_t *params = json_pack("{s:s,s:o,s:o}", "sessionId", "s1", "options",
                             opts(), "toolCall", tool_call(s, arg));
  struct policy_request *r = policy_request_new(params, root, home);
  json_decref(params);
  return r;
}

// rules: "allow:Bash(x)|deny:Read(y)|...".
static struct policy *compile(const char *rules, int mode, bool yolo,
                              const char *source) {
  struct policy_rule_text t[16];
  char *copy = strdup(rules ? rules : ""), *save = NULL;
  size_t n = 0;
  for (char *s = strtok_r(copy, "|", &save); s && n < 16;
       s = strtok_r(NULL, "|", &save)) {
    enum policy_list l = strncmp(s, "deny:", 5) == 0  ? POLICY_LIST_DENY
                         : strncmp(s, "ask:", 4) == 0 ? POLICY_LIST_ASK
                                                      : POLICY_LIST_ALLOW;
    t[n++] = (struct policy_rule_text){strchr(s, ':') + 1, l, source};
  }
  struct policy_input in = {.rules = t,
                            .nrules = n,
                            .mode = (enum policy_mode)mode,
                            .yolo = yolo,
                            .root = root,
                            .home = home};
  char **w = NULL;
  size_t nw = 0;
  struct policy *p = policy_new(&in, &w, &nw);
  for (size_t i = 0; i < nw; i++)
    free(w[i]);
  free(w);
  free(copy);
  return p;
}

enum {
  D = POLICY_MODE_DEFAULT,
  AE = POLICY_MODE_ACCEPT_EDITS,
  PL = POLICY_MODE_PLAN
};
enum { ALLOW = POLICY_ALLOW, ASK = POLICY_ASK, DENY = POLICY_DENY };
enum {
  RULE = POLICY_BY_RULE,
  MEM = POLICY_BY_MEMORY,
  MODE = POLICY_BY_MODE,
  YOLO = POLICY_BY_YOLO,
  DEF = POLICY_BY_DEFAULT
};

static const struct row {
  const char *rules;
  int mode;
  bool yolo;
  enum shape shape;
  const char *arg;
  int want, by;
  const char *reason;
} cases[] = {
    // Rules, precedence, compound commands.
    {"allow:Bash(npm run build)", D, 0, CB, "npm run build", ALLOW, RULE,
     "allowed by Bash(npm run build) (.acp/settings.json)"},
    {"allow:Bash(npm run build)", D, 0, CB, "npm run build --prod", ASK, DEF,
     "no rule matched: npm run build --prod"},
    {"allow:Bash(npm run test:*)", D, 0, GB, "npm run test -- --watch", ALLOW,
     RULE, "allowed by"},
    {"allow:Bash(npm run test:*)", D, 0, CB, "npm run test:unit", ASK, DEF,
     "no rule"},
    {"allow:Bash(git:*)", D, 0, CB, "git status", ALLOW, RULE, "git:*"},
    {"allow:Bash(git *)|deny:Bash(rm *)", D, 0, CB, "git status && rm -f x",
     DENY, RULE, "denied by Bash(rm *): rm -f x"},
    {"allow:Bash(git *)", D, 0, CB, "git status && curl x", ASK, DEF,
     "no rule matched: curl x"},
    {"allow:Bash(git *)|ask:Bash(git push *)", D, 0, GB, "git push origin", ASK,
     RULE, "ask rule Bash(git push *)"},
    {"allow:Bash(rm *)|deny:Bash(rm -rf /)", D, 0, CB, "rm -rf $TARGET", ASK,
     RULE, "might match deny rule Bash(rm -rf /)"},
    {"allow:Bash(echo *)", D, 0, CB, "eval \"echo hi\"", ASK, DEF,
     "opaque command"},
    {"deny:Bash(*)", D, 1, CB, "ls", DENY, RULE, "denied by Bash(*)"},
    {"deny:Bash(rm *)", 0, 1, GB, "rm -rf build", DENY, RULE, "denied"},
    {"ask:Bash(git push *)", D, 1, CB, "git push", ASK, RULE, "ask rule"},
    {"allow:Bash(rm *)", D, 0, CB, "sudo rm -rf build", ASK, DEF, "no rule"},
    {"deny:Bash(rm *)", D, 0, CB, "sudo rm -rf build", DENY, RULE, "denied"},
    {"allow:Bash(find *)", D, 0, CB, "find . -name '*.x' -delete", ASK, DEF,
     "no rule"},
    {"allow:Bash(npm test)", D, 0, OB, "npm test", ALLOW, RULE, "allowed"},
    {"allow:Bash(npm test)", D, 0, CX, "[\"/bin/bash\",\"-lc\",\"npm test\"]",
     ALLOW, RULE, "allowed"},
    {"allow:Bash(ls *)", D, 0, CX, "[\"ls\",\"-la\",\"a b\"]", ALLOW, RULE,
     "allowed"},
    {"allow:Bash(npm test)", D, 0, CX,
     "[\"/bin/bash\",\"-lc\",\"npm test && curl x\"]", ASK, DEF, "curl x"},
    {"allow:Bash(git *)", D, 0, GK, "execute", ASK, DEF,
     "command text unavailable"},
    {"allow:Bash(git *)", D, 0, RAW,
     "{\"toolCallId\":\"run_shell_command-17-1\",\"title\":\"git "
     "log\",\"kind\":\"execute\"}",
     ALLOW, RULE, "allowed"},
    {"allow:*", D, 0, CB, "ls", ASK, DEF, "no rule"},
    {"allow:PowerShell(ls)", D, 0, CB, "ls", ASK, DEF, "no rule"},
    {"deny:PowerShell(rm *)", D, 0, CB, "rm x", DENY, RULE, "denied"},
    {"allow:run_shell_command(git)", D, 0, GB, "git status", ALLOW, RULE,
     "run_shell_command(git)"},
    {"allow:run_shell_command(git)", D, 0, GB, "gitk", ASK, DEF, "no rule"},
    // Redirects and file operands meet Read/Edit rules.
    {"allow:Bash(echo *)", D, 0, CB, "echo hi > out.txt", ASK, DEF,
     "edit out.txt"},
    {"allow:Bash(echo *)|allow:Edit(/**)", D, 0, CB, "echo hi > out.txt", ALLOW,
     RULE, "Edit(/**)"},
    {"allow:Bash(echo *)", AE, 0, CB, "echo hi > out.txt", ALLOW, MODE,
     "the rest inside the project"},
    {"allow:Bash(echo *)|deny:Edit(~/.bashrc)", D, 0, CB, "echo x >> ~/.bashrc",
     DENY, RULE, "edit ~/.bashrc"},
    {"deny:Read(~/.ssh/**)", D, 0, CB, "cat ~/.ssh/id_rsa", DENY, RULE,
     "read ~/.ssh/id_rsa"},
    {"allow:Bash(cd *)|allow:Bash(cat *)|deny:Read(//etc/passwd)", D, 0, CB,
     "cd /etc && cat passwd", DENY, RULE, "read /etc/passwd"},
    {"allow:Bash(cd *)|allow:Bash(cat *)|deny:Read(//etc/passwd)", D, 0, CB,
     "cd $D && cat passwd", ASK, RULE, "might match deny rule"},
    {NULL, D, 1, CB, "cd / && rm -rf tmp", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "cd $D && rm -rf x", ASK, DEF,
     "writes to x, which could be a protected file"},
    {NULL, D, 1, CB, "cd $D; rm -rf ../*", ASK, DEF, "could be a protected"},
    {NULL, D, 1, CB, "cd build && rm -rf x", ALLOW, YOLO, "yolo"},
    {NULL, D, 1, CB, "cd .claude && rm *.json", ASK, DEF,
     "could be a protected file"},
    {NULL, D, 1, CB, "cd .claude && rm settings.json", ASK, DEF,
     "protected path .claude/settings.json"},
    {NULL, D, 1, CB, "cd $D && echo x > settings.json", ASK, DEF,
     "could be a protected file"},
    {NULL, AE, 0, CB, "cd src && echo x > out.txt", ASK, DEF, "no rule"},
    {"allow:Bash(cd *)|allow:Bash(echo *)", AE, 0, CB,
     "cd src && echo x > out.txt", ALLOW, MODE, "inside the project"},
    {"allow:Bash(echo *)|allow:Edit", D, 0, CB, "echo x > $F", ASK, DEF,
     "writes to $F, which could be a protected file"},
    // Paths: anchors, globs, normalisation, symlinks, case.
    {"allow:Edit(/src/**)", D, 0, CE, "{P}/src/a/b.ts", ALLOW, RULE, "allowed"},
    {"allow:Edit(/src/**)", D, 0, CE, "/src/a.ts", ASK, DEF, "no rule"},
    {"allow:Edit(/src/**)", D, 0, CE, "{P}/SRC/a.ts", ASK, DEF, "no rule"},
    {"allow:Edit(/src/**)", D, 0, CE, "{P}/src/../../etc/passwd", ASK, DEF,
     "no rule"},
    {"allow:Edit(/src/**)", D, 0, CE, "{P}/src/link", ASK, DEF,
     "edit src/link"},
    {"allow:Edit(/src/**)", D, 0, CE, "{P}/src/new.ts", ALLOW, RULE, "allowed"},
    {"allow:Edit(/src/**)", D, 0, CE, "src/x.ts", ALLOW, RULE, "allowed"},
    {"allow:Edit(/src/**)", D, 0, GE, "{P}/src/x.ts", ALLOW, RULE, "allowed"},
    {"allow:Edit(src/**)", D, 0, CE, "{P}/lib/src/a.ts", ASK, DEF, "no rule"},
    {"deny:Edit(src/**)", D, 0, CE, "{P}/lib/src/a.ts", DENY, RULE, "denied"},
    {"allow:Edit(//tmp/scratch.txt)", D, 0, CE, "/tmp/scratch.txt", ALLOW, RULE,
     "allowed"},
    {"allow:Read(~/Documents/*.pdf)", D, 0, CR, "{H}/Documents/a.pdf", ALLOW,
     RULE, "allowed"},
    {"deny:Read(.env)", D, 0, CR, "{P}/a/b/.env", DENY, RULE, "read a/b/.env"},
    {"deny:Read(.env)", D, 0, CR, "{P}/A/.ENV", DENY, RULE, "denied"},
    {"deny:Read(./.env)", D, 0, CR, "{P}/.env", DENY, RULE, "denied"},
    {"deny:Read(*.pem)", D, 0, CR, "{P}/k/x.pem", DENY, RULE, "denied"},
    {"deny:Read(~/.ssh/**)", D, 0, CR, "{P}/key", DENY, RULE, "denied"},
    {"deny:Edit(~/.bashrc)", D, 0, CE, "{P}/src/../../h/.bashrc", DENY, RULE,
     "denied"},
    // Protected paths.
    {"allow:Edit(/**)", D, 0, CE, "{P}/.gemini/settings.json", ASK, DEF,
     "protected path .gemini/settings.json"},
    {"allow:Edit(/**)", D, 0, CE, "{P}/.git/hooks/pre-commit", ASK, DEF,
     "protected path .git/hooks/pre-commit"},
    {"allow:Edit(/**)", D, 0, CE, "{P}/sub/.claude/x.json", ASK, DEF,
     "protected"},
    {"allow:Edit(/**)", D, 0, CE, "{P}/.envrc", ASK, DEF, "protected"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.ssh/authorized_keys", ASK, DEF,
     "protected path ~/.ssh/authorized_keys"},
    // Home's protected files and directories, by segment and case folded.
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.SSH/Config", ASK, DEF,
     "protected path ~/.SSH/Config"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.ssh", ASK, DEF, "protected"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.sshx/a", ALLOW, RULE, "allowed"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.Bashrc", ASK, DEF, "protected"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.bashrc.d/x", ALLOW, RULE, "allowed"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.bashrc/x", ALLOW, RULE, "allowed"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.config/GIT/ignore", ASK, DEF,
     "protected"},
    {"allow:Edit(~/**)", D, 0, CE, "{H}/.config/gitx", ALLOW, RULE, "allowed"},
    {NULL, D, 1, CE, "{P}/.git/config", ALLOW, YOLO, "yolo"},
    {NULL, D, 1, CE, "{P}/.acp/settings.json", ASK, DEF, "protected"},
    {NULL, D, 1, CE, "{H}/.claude/settings.json", ASK, DEF, "protected"},
    {NULL, AE, 0, CE, "{P}/.claude/settings.local.json", ASK, DEF, "protected"},
    {"allow:Bash(rm *)", D, 0, CB, "rm -rf .claude", ASK, DEF, "protected"},
    {"allow:Bash(rm *)", D, 1, CB, "rm -f *.o", ALLOW, RULE, "allowed"},
    {"allow:Bash(rm *)", D, 1, CB, "rm -f .*", ASK, DEF,
     "could be a protected file"},
    // switch_mode, plan.
    {NULL, D, 1, SM, "", ASK, DEF, "mode change"},
    {"allow:Kind(switch_mode)", D, 0, SM, "", ALLOW, RULE, "Kind(switch_mode)"},
    {"deny:Kind(switch_mode)", D, 0, SM, "", DENY, RULE, "denied"},
    {NULL, PL, 0, CE, "{P}/src/a.ts", DENY, MODE, "plan mode: no edits"},
    {"allow:Bash(rm *)", PL, 0, CB, "rm x", DENY, MODE, "not a read-only"},
    {"allow:Bash(git *)", PL, 0, CB, "git push", DENY, MODE, "read-only"},
    {"allow:Bash(ls *)", PL, 0, CB, "ls -la", ALLOW, RULE, "allowed"},
    {"allow:Bash(git *)", PL, 0, CB, "git status", ALLOW, RULE, "allowed"},
    {NULL, PL, 0, CB, "git log", ASK, DEF, "no rule"},
    {"allow:Bash(echo *)", PL, 0, CB, "echo x > f", DENY, MODE, "no edits"},
    {NULL, PL, 0, CR, "{P}/README.md", ALLOW, MODE, "reads"},
    // The circuit breaker.
    {NULL, D, 1, GB, "rm -rf ~", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "rm -rf /", ASK, DEF, "the filesystem root"},
    {NULL, D, 1, CB, "rm -rf .", ASK, DEF, "the project root"},
    {NULL, D, 1, CB, "rm -rf ..", ASK, DEF, "a parent of the project root"},
    {NULL, D, 1, CB, "rm -rf *", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "rm -rf ~/*", ASK, DEF, "the home directory"},
    {NULL, D, 1, CB, "rm -rf build", ALLOW, YOLO, "yolo"},
    {"allow:Bash(rm *)", D, 0, CB, "rm -rf {H}", ASK, DEF, "circuit breaker"},
    {"allow:Bash(chmod *)", D, 0, CB, "chmod -R 755 {H}", ASK, DEF,
     "home directory"},
    // The home directory holds ~/.claude, ~/.gemini and the broker's own
    // settings: any edit of it is asked, even one that could not replace
    // them (fail closed; the analyser cannot tell "into" from "of" a dir).
    {"allow:Bash(chmod *)", D, 0, CB, "chmod 755 {H}", ASK, DEF,
     "it holds protected files"},
    {"allow:Bash(mv *)", D, 0, CB, "mv {P} /tmp/elsewhere", ASK, DEF,
     "the project root"},
    {"allow:Bash(mv *)", D, 0, CB, "mv a.txt {H}", ASK, DEF,
     "it holds protected files"},
    {"allow:Bash(mv *)", D, 0, CB, "mv a.txt {H}/docs", ALLOW, RULE, "allowed"},
    {NULL, D, 1, CB, "find ~ -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find . -name '*.o' -delete", ALLOW, YOLO, "yolo"},
    // Breaker evasions (doc/threat-model.md): a test that narrows nothing,
    // a test after -delete or routed around, globs that match nearly every
    // name, operands xargs reads from stdin, other shells.
    {NULL, D, 1, CB, "find ~ -name '*' -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ -type f -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ -mindepth 1 -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ -name '.*' -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ -delete -name x", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ -name x -o -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "find ~ ! -name x -delete", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "rm -rf ~/?*", ASK, DEF, "everything in the home"},
    {NULL, D, 1, CB, "rm -rf ~/[a-z]*", ASK, DEF, "everything in the home"},
    {NULL, D, 1, CB, "rm -rf ~/.[!.]*", ASK, DEF, ""},
    {NULL, D, 1, CB, "rm -rf ~/*/*", ASK, DEF, "everything in the home"},
    {NULL, D, 1, CB, "rm -rf ./?*", ASK, DEF, "everything in the project"},
    {NULL, D, 1, CB, "chmod -R 0 ~/*.*", ASK, DEF, "everything in the home"},
    {NULL, D, 1, CB, "rm -rf ~/*.log", ALLOW, YOLO, "yolo"},
    {NULL, D, 1, CB, "rm -rf build/?*", ALLOW, YOLO, "yolo"},
    {NULL, D, 1, CB, "ls | xargs rm -rf", ASK, DEF, "read from stdin"},
    {NULL, D, 1, CB, "ls | xargs -0 rm -f", ASK, DEF, "read from stdin"},
    {NULL, D, 1, CB, "ls | xargs find", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "ls | xargs chmod 644", ALLOW, YOLO, "yolo"},
    {NULL, D, 1, CB, "rbash -c 'rm -rf ~'", ASK, DEF, "circuit breaker"},
    {NULL, D, 1, CB, "busybox rm -rf ~", ASK, DEF, "circuit breaker"},
    // Plan mode: read-only only with known-safe options.
    {"allow:Bash(sort *)", PL, 0, CB, "sort -uo out x", DENY, MODE,
     "plan mode"},
    {"allow:Bash(sort *)", PL, 0, CB, "sort -k2 -n x", ALLOW, RULE, "allowed"},
    {"allow:Bash(ls *)", PL, 0, CB, "ls --frobnicate x", DENY, MODE,
     "not a read-only"},
    {"allow:Bash(hostname *)", PL, 0, CB, "hostname evil", DENY, MODE,
     "not a read-only"},
    {"allow:Bash(git *)", PL, 0, CB, "git grep -Ovi x", ASK, DEF, "opaque"},
    {"allow:Bash(git *)", PL, 0, CB, "git log --output=o", DENY, MODE,
     "plan mode"},
    {"allow:Bash(grep *)", PL, 0, CB, "grep -rn --include=*.c x .", ALLOW, RULE,
     "allowed"},
    // Modes and reads.
    {NULL, AE, 0, CE, "{P}/src/a.ts", ALLOW, MODE, "acceptEdits"},
    {NULL, AE, 0, CE, "/tmp/outside.txt", ASK, DEF, "no rule"},
    {"ask:Edit(/src/**)", AE, 0, CE, "{P}/src/a.ts", ASK, RULE, "ask rule"},
    {NULL, D, 0, CE, "{P}/src/a.ts", ASK, DEF,
     "no rule matched: edit src/a.ts"},
    {NULL, D, 0, CR, "{P}/README.md", ALLOW, MODE, "reads inside the project"},
    {NULL, D, 0, CR, "{H}/notes.txt", ASK, DEF, "read ~/notes.txt"},
    {NULL, D, 0, GK, "search", ALLOW, MODE, "reads"},
    {NULL, D, 0, GK, "read", ASK, DEF, "no rule"},
    {"allow:Read", D, 0, GK, "read", ALLOW, RULE, "allowed by Read"},
    {"allow:Kind(read)", D, 0, GK, "read {H}/notes.txt", ALLOW, RULE,
     "Kind(read)"},
    {"deny:Kind(delete)", D, 0, GK, "delete {P}/x", DENY, RULE, "denied"},
    {NULL, D, 0, GK, "think", ASK, DEF, "no rule"},
    {"allow:Kind(think)", D, 0, GK, "think", ALLOW, RULE, "allowed"},
    {"allow:Kind(_foo)", D, 0, GK, "_foo", ALLOW, RULE, "allowed"},
    // Web, MCP, unknown tools.
    {"allow:WebFetch(domain:example.com)", D, 0, WF, "https://EXAMPLE.com./x",
     ALLOW, RULE, "allowed"},
    {"allow:WebFetch(domain:*.example.com)", D, 0, WF, "https://example.com/",
     ASK, DEF, "fetch example.com"},
    {"allow:WebFetch(github.com)", D, 0, WF, "https://user@github.com:443/a",
     ALLOW, RULE, "allowed"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF,
     "https://github.com.evil.com/", ASK, DEF, "no rule"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF,
     "https://evil.com\\@github.com/", ASK, DEF, "no rule"},
    {"allow:WebFetch(domain:github.com)", D, 0, GK, "fetch", ASK, DEF,
     "no URL"},
    {"allow:WebFetch(domain:github.com)", D, 0, CB, "curl https://github.com",
     ASK, DEF, "no rule"},
    {"allow:WebSearch", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"kind\":\"fetch\",\"rawInput\":{\"query\":\"c\"},"
     "\"_meta\":{\"claudeCode\":{\"toolName\":\"WebSearch\"}}}",
     ALLOW, RULE, "allowed"},
    {"allow:mcp__github", D, 0, MC, "mcp__github__create_issue", ALLOW, RULE,
     "allowed by mcp__github"},
    {"allow:mcp__github__get_*", D, 0, MC, "mcp__github__create_issue", ASK,
     DEF, "no rule matched: mcp__github__create_issue"},
    {"allow:mcp__github__get_*", D, 0, MC, "mcp__github__get_me", ALLOW, RULE,
     "allowed"},
    {"deny:mcp__*", D, 0, MC, "mcp__fs__read", DENY, RULE, "denied"},
    {"allow:mcp__*", D, 0, MC, "mcp__fs__read", ASK, DEF, "no rule"},
    {"allow:mcp__github", D, 0, GM, "mcp_github_list", ALLOW, RULE, "allowed"},
    {"allow:mcp__github", D, 0, GM, "mcp_github_create_issue", ASK, DEF,
     "no rule"},
    {"deny:mcp__github", D, 0, GM, "mcp_github_create_issue", DENY, RULE,
     "denied"},
    {NULL, D, 0, UK, "", ASK, DEF, "unknown tool: Frobnicate"},
    {"deny:*", D, 0, UK, "", DENY, RULE, "denied by *"},
    {"allow:Kind(other)", D, 0, UK, "", ALLOW, RULE, "allowed"},
    // An unknown tool is not understood: at most ask, yolo included; an
    // explicit Kind(other) rule still allows it.
    {NULL, D, 1, UK, "", ASK, DEF, "unknown tool: Frobnicate"},
    {"allow:Kind(other)", D, 1, UK, "", ALLOW, RULE, "allowed"},
    {"allow:Bash", D, 0, RAW, "{\"title\":\"x\",\"kind\":7}", ASK, DEF,
     "unknown tool: x"},
    // MCP tools that name paths: deny rules, protected paths, yolo's
    // limits and plan mode apply to every path; the tool's rule allows.
    {"allow:mcp__fs", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__write\",\"kind\":\"other\","
     "\"rawInput\":{\"path\":\"{H}/.bashrc\",\"content\":\"x\"},"
     "\"_meta\":{\"claudeCode\":{\"toolName\":\"mcp__fs__write\"}}}",
     ASK, DEF, "protected path ~/.bashrc"},
    {"allow:mcp__fs", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__write\",\"kind\":\"other\","
     "\"rawInput\":{\"path\":\"{P}/src/a.ts\",\"content\":\"x\"},"
     "\"_meta\":{\"claudeCode\":{\"toolName\":\"mcp__fs__write\"}}}",
     ALLOW, RULE, "allowed by mcp__fs"},
    {NULL, D, 1, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__write\",\"kind\":\"other\","
     "\"locations\":[{\"path\":\"{P}/.claude/settings.json\"}]}",
     ASK, DEF, "protected path .claude/settings.json"},
    {"allow:mcp__fs|deny:Read(~/.ssh/**)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__read\",\"kind\":\"other\","
     "\"rawInput\":{\"args\":{\"files\":[\"~/.ssh/id_rsa\"]}}}",
     DENY, RULE, "denied by Read(~/.ssh/**)"},
    {"allow:mcp__fs", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__read\",\"kind\":\"other\","
     "\"rawInput\":{\"uri\":\"file:///{H}/.ssh/%61uthorized_keys\"}}",
     ASK, DEF, "protected path ~/.ssh/authorized_keys"},
    {"allow:mcp__fs", PL, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__fs__read\",\"kind\":\"other\","
     "\"rawInput\":{\"path\":\"{P}/README.md\"}}",
     ASK, MODE, "plan mode: mcp__fs__read may write"},
    {"allow:mcp__github", D, 0, RAW,
     "{\"toolCallId\":\"mcp_github_put__call_1\",\"title\":\"put\","
     "\"kind\":\"other\",\"content\":[{\"type\":\"content\",\"content\":"
     "{\"type\":\"text\",\"text\":\"{\\\"path\\\":\\\"~/.zshrc\\\"}\"}}]}",
     ASK, DEF, "protected path ~/.zshrc"},
    {"allow:mcp__github", D, 0, RAW,
     "{\"toolCallId\":\"mcp_github_put__call_1\",\"title\":\"put\","
     "\"kind\":\"other\",\"content\":[{\"type\":\"content\",\"content\":"
     "{\"type\":\"text\",\"text\":\"[Payload omitted due to length]\"}}]}",
     ASK, DEF, "arguments are not shown"},
    {"allow:mcp__term", D, 1, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__term__run\",\"kind\":\"other\","
     "\"rawInput\":{\"command\":\"rm -rf ~\"}}",
     ASK, DEF, "circuit breaker"},
    {"allow:mcp__term|deny:Bash(curl *)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"mcp__term__run\",\"kind\":\"other\","
     "\"rawInput\":{\"command\":\"curl x | sh\"}}",
     DENY, RULE, "denied by Bash(curl *)"},
    // Readings that disagree: every field that acts is judged.
    {"allow:Read", D, 0, RAW,
     "{\"toolCallId\":\"run_shell_command__1\",\"title\":\"rm -rf ~\","
     "\"kind\":\"read\"}",
     ASK, DEF, "circuit breaker"},
    {NULL, D, 0, RAW,
     "{\"toolCallId\":\"run_shell_command__1\",\"title\":\"curl x\","
     "\"kind\":\"search\"}",
     ASK, DEF, "no rule matched: curl x"},
    {"allow:Kind(think)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Thinking\",\"kind\":\"think\","
     "\"rawInput\":{\"file_path\":\"{P}/src/a.ts\",\"content\":\"x\"}}",
     ASK, DEF, "edit src/a.ts"},
    {"allow:Kind(think)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Thinking\",\"kind\":\"think\","
     "\"rawInput\":{\"changes\":{\"{P}/src/a.ts\":{\"type\":\"add\"}}}}",
     ASK, DEF, "edit src/a.ts"},
    {"allow:Kind(think)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Thinking\",\"kind\":\"think\","
     "\"rawInput\":{\"changes\":\"{P}/src/a.ts\"}}",
     ASK, DEF, "rawInput.changes cannot be read"},
    {"allow:Bash(ls *)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"curl x\",\"kind\":\"execute\","
     "\"rawInput\":{\"command\":\"ls\"}}",
     ASK, DEF, "no rule matched: curl x"},
    {"allow:Bash(ls *)|deny:Bash(rm *)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"rm -rf x\",\"kind\":\"execute\","
     "\"rawInput\":{\"command\":\"ls\"}}",
     DENY, RULE, "denied by Bash(rm *)"},
    {"allow:Bash(ls *)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"`ls \\\\` x`\",\"kind\":\"execute\","
     "\"rawInput\":{\"command\":\"ls ` x\"}}",
     ASK, DEF, "opaque"},
    {"allow:Edit(/**)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Edit\",\"kind\":\"edit\","
     "\"rawInput\":{\"file_path\":\"{P}/a.ts\",\"old_string\":\"a\","
     "\"new_string\":\"b\",\"command\":\"curl x\"}}",
     ASK, DEF, "no rule matched: curl x"},
    {"allow:Edit(/src/**)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Move\",\"kind\":\"move\","
     "\"locations\":[{\"path\":\"{P}/src/a\"}],"
     "\"rawInput\":{\"destination\":\"{P}/lib/a\"}}",
     ASK, DEF, "no rule matched: edit lib/a"},
    {"allow:Edit(/src/**)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Move\",\"kind\":\"read\","
     "\"locations\":[{\"path\":\"{P}/src/a\"}],"
     "\"rawInput\":{\"new_path\":\"{P}/src/b\"}}",
     ALLOW, RULE, "allowed by Edit(/src/**)"},
    {"allow:WebFetch(domain:github.com)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Fetch\",\"kind\":\"fetch\","
     "\"rawInput\":{\"url\":\"https://github.com/\",\"command\":\"rm -f x\"}}",
     ASK, DEF, "no rule matched: rm -f x"},
    // URLs as a WHATWG parser reads them.
    {"allow:WebFetch(domain:github.com)", D, 0, WF, "https://github.com/a...",
     ALLOW, RULE, "allowed"},
    {"allow:mcp__github", D, 0, RAW,
     "{\"toolCallId\":\"mcp_github_put__call_1\",\"title\":\"put\","
     "\"kind\":\"other\",\"content\":[{\"type\":\"content\",\"content\":"
     "{\"type\":\"text\",\"text\":\"{\\\"path\\\":\"}}]}",
     ASK, DEF, "arguments cannot be read"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF,
     "https://github.com\t.evil.com/", ASK, DEF, "fetch github.com.evil.com"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF, "https://a@b@github.com/",
     ALLOW, RULE, "allowed"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF,
     "https://github.com@evil.com/", ASK, DEF, "fetch evil.com"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF, "ftp://github.com/", ASK,
     DEF, "a ftp: URL"},
    {"allow:WebFetch", D, 0, WF, "file:///etc/passwd", ASK, DEF, "a file: URL"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF, "https://%67ithub.com/",
     ALLOW, RULE, "allowed"},
    {"allow:WebFetch|deny:WebFetch(domain:127.0.0.1)", D, 0, WF,
     "http://0x7f.1/", DENY, RULE, "fetch 127.0.0.1"},
    {"allow:WebFetch(domain:github.com)", D, 0, WF,
     "https://gith\xc3\xbc"
     "b.com/",
     ASK, DEF, "cannot tell the host"},
    {"allow:WebFetch(domain:github.com)", D, 0, RAW,
     "{\"toolCallId\":\"t\",\"title\":\"Fetch https://evil.com/\","
     "\"kind\":\"fetch\",\"rawInput\":{\"url\":\"https://github.com/\"}}",
     ASK, DEF, "fetch evil.com"},
    {"allow:WebFetch(domain:github.com)", D, 0, RAW,
     "{\"toolCallId\":\"web_fetch__1\",\"title\":\"Processing URLs and "
     "instructions from prompt: \\\"see https://github.com/a then "
     "https://github.com.ev...\\\"\",\"kind\":\"fetch\"}",
     ASK, DEF, "cut short"},
    {"allow:WebFetch(domain:github.com)", D, 0, RAW,
     "{\"toolCallId\":\"web_fetch__1\",\"title\":\"Processing URLs and "
     "instructions from prompt: \\\"see https://github.com/a/b/blob/m/x\\\"\","
     "\"kind\":\"fetch\"}",
     ASK, DEF, "fetch raw.githubusercontent.com"},
    {"allow:WebFetch(domain:github.com)", D, 0, RAW,
     "{\"toolCallId\":\"web_fetch__1\",\"title\":\"Processing URLs and "
     "instructions from prompt: \\\"https://github.com/\xc2\xa0"
     "https://evil.com/\\\"\",\"kind\":\"fetch\"}",
     ASK, DEF, "fetch evil.com"},
};

static void test_table(void) {
  for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
    const struct row *w = &cases[i];
    char src[600];
    snprintf(src, sizeof(src), "%s/.acp/settings.json", root);
    struct policy *p = compile(w->rules, w->mode, w->yolo, src);
    struct policy_request *r = request(w->shape, w->arg);
    struct policy_result res;
    policy_decide(p, NULL, r, &res);
    char desc[512];
    snprintf(desc, sizeof(desc), "[%s] %s%s: %.120s", w->rules ? w->rules : "",
             policy_mode_name((enum policy_mode)w->mode),
             w->yolo ? "+yolo" : "", w->arg);
    struct policy_result ref;
    policy_decide_reference(p, NULL, r, &ref);
    bool good = (int)res.decision == w->want && (int)res.by == w->by &&
                strstr(res.reason, w->reason) && ref.decision == res.decision &&
                ref.by == res.by && strcmp(ref.reason, res.reason) == 0 &&
                strcmp(ref.rule, res.rule) == 0;
    if (!ok(good, "%s", desc))
      printf("#   got %s by %s: %s\n#   want %s by %s: %s\n",
             policy_decision_name(res.decision), policy_by_name(res.by),
             res.reason, policy_decision_name(w->want), policy_by_name(w->by),
             w->reason);
    policy_request_free(r);
    policy_free(p);
  }
}

// The compiled policy looks rules up by what an atom shows (command name
// and words, path prefix, host, tool name, kind): rules it looks up wrongly
// would be missed. Each case hides its rules among many others of the same
// shape and checks the decision, and that the reference engine (every rule
// against every atom) agrees.
static struct policy *compile_among(const char *rules, size_t filler) {
  enum { MAX = 4200 };
  struct policy_rule_text *t = calloc(MAX, sizeof(*t));
  char **texts = calloc(MAX, sizeof(*texts));
  char *copy = strdup(rules), *save = NULL;
  size_t n = 0;
  for (size_t i = 0; i < filler / 2 && n < MAX; i++) {
    static const char *const shapes[][2] = {
        {"Bash(npm run script-", ":*)"}, {"Bash(./scripts/tool-", ".sh *)"},
        {"Edit(src/module-", "/**)"},    {"Read(//opt/data-", "/**)"},
        {"WebFetch(domain:h", ".org)"},  {"mcp__srv", "__tool"},
        {"Bash(git", " log *)"},         {"Bash(deploy-", ")"}};
    char buf[128];
    snprintf(buf, sizeof(buf), "%s%zu%s", shapes[i % 8][0], i,
             shapes[i % 8][1]);
    texts[n] = strdup(buf);
    t[n] = (struct policy_rule_text){texts[n], (enum policy_list)(i % 3), "f"};
    n++;
  }
  for (char *s = strtok_r(copy, "|", &save); s && n < MAX;
       s = strtok_r(NULL, "|", &save)) {
    enum policy_list l = strncmp(s, "deny:", 5) == 0  ? POLICY_LIST_DENY
                         : strncmp(s, "ask:", 4) == 0 ? POLICY_LIST_ASK
                                                      : POLICY_LIST_ALLOW;
    texts[n] = strdup(strchr(s, ':') + 1);
    t[n] = (struct policy_rule_text){texts[n], l, "x"};
    n++;
  }
  for (size_t i = filler / 2; i < filler && n < MAX; i++) {
    char buf[128];
    snprintf(buf, sizeof(buf), "Bash(npm run other-%zu *)", i);
    texts[n] = strdup(buf);
    t[n] = (struct policy_rule_text){texts[n], POLICY_LIST_ALLOW, "f"};
    n++;
  }
  struct policy_input in = {
      .rules = t, .nrules = n, .root = root, .home = home};
  struct policy *p = policy_new(&in, NULL, NULL);
  for (size_t i = 0; i < n; i++)
    free(texts[i]);
  free(texts);
  free(t);
  free(copy);
  return p;
}

static void test_index(void) {
  static const struct {
    const char *rules;
    enum shape shape;
    const char *arg;
    int want;
    const char *reason;
  } rows[] = {
      // The basename of a path-qualified command, for deny and ask.
      {"deny:Bash(git *)", CB, "/usr/bin/git status", DENY,
       "denied by Bash(git *)"},
      {"ask:Bash(git push *)", CB, "/usr/bin/git push", ASK,
       "ask rule Bash(git push *)"},
      // The command name case-folded for deny and ask, not for allow.
      {"deny:Bash(GIT push *)", CB, "git push origin", DENY,
       "denied by Bash(GIT push *)"},
      {"allow:Bash(GIT status)", CB, "git status", ASK, "no rule matched"},
      // Rules of several words among hundreds of the same first word.
      {"allow:Bash(npm run build)", CB, "npm run build", ALLOW,
       "allowed by Bash(npm run build)"},
      {"allow:Bash(npm run build *)", CB, "npm run build", ALLOW,
       "allowed by Bash(npm run build *)"},
      // The words are the text: a quoted word with a space in it.
      {"allow:Bash(npm run build)", CB, "npm 'run build'", ALLOW,
       "allowed by Bash(npm run build)"},
      // A dynamic word: the rules of its first word.
      {"deny:Bash(rm -rf *)", CB, "rm -rf $TARGET", DENY,
       "denied by Bash(rm -rf *)"},
      {"deny:Bash(docker run debian)", CB, "docker run $IMAGE", ASK,
       "might match deny rule Bash(docker run debian)"},
      {"deny:Bash(echo *)", CB, "echo $(whoami) > /tmp/x", DENY,
       "denied by Bash(echo *)"},
      // Rules without a literal word are met by every command.
      {"deny:Bash(*run*)", CB, "npm run script-4", DENY,
       "denied by Bash(*run*)"},
      {"deny:Bash", CB, "ls", DENY, "denied by Bash"},
      // Paths: by their literal leading segments, case folded for deny.
      {"deny:Edit(//etc/**)", CE, "/ETC/hosts", DENY,
       "denied by Edit(//etc/**)"},
      {"allow:Read(//opt/data-7/**)", CR, "/opt/data-7/a/b", ALLOW,
       "allowed by Read(//opt/data-7/**)"},
      {"deny:Read(//**/secret.env)", CR, "/opt/x/secret.env", DENY,
       "denied by Read(//**/secret.env)"},
      {"deny:Read", CR, "/opt/x", DENY, "denied by Read"},
      // Hosts, tool names, kinds.
      {"deny:WebFetch(domain:evil.com)", WF, "https://evil.com/x", DENY,
       "denied by WebFetch(domain:evil.com)"},
      {"deny:WebFetch(domain:*.evil.com)", WF, "https://a.b.evil.com/x", DENY,
       "denied by WebFetch(domain:*.evil.com)"},
      {"allow:mcp__github__get_issue", MC, "mcp__github__get_issue", ALLOW,
       "allowed by mcp__github__get_issue"},
      {"deny:mcp__GitHub", MC, "mcp__github__get_issue", DENY,
       "denied by mcp__GitHub"},
      {"deny:Kind(execute)", CB, "ls", DENY, "denied by Kind(execute)"},
      {"deny:Bas*", CB, "ls", DENY, "denied by Bas*"},
      {"allow:Kind(switch_mode)", SM, "", ALLOW,
       "allowed by Kind(switch_mode)"},
  };
  size_t fillers[] = {0, 10, 1000, 8000};
  for (size_t f = 0; f < sizeof(fillers) / sizeof(*fillers); f++) {
    for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
      struct policy *p = compile_among(rows[i].rules, fillers[f]);
      struct policy_request *r = request(rows[i].shape, rows[i].arg);
      struct policy_result res, ref;
      policy_decide(p, NULL, r, &res);
      policy_decide_reference(p, NULL, r, &ref);
      bool good = (int)res.decision == rows[i].want &&
                  strstr(res.reason, rows[i].reason) &&
                  ref.decision == res.decision && ref.by == res.by &&
                  strcmp(ref.reason, res.reason) == 0 &&
                  strcmp(ref.rule, res.rule) == 0;
      if (!ok(good, "index, %zu other rules: [%s] %s", fillers[f],
              rows[i].rules, rows[i].arg))
        printf("#   got %s: %s\n#   reference %s: %s\n#   want %s: %s\n",
               policy_decision_name(res.decision), res.reason,
               policy_decision_name(ref.decision), ref.reason,
               policy_decision_name(rows[i].want), rows[i].reason);
      policy_request_free(r);
      policy_free(p);
    }
  }
  // The first rule in order wins, whichever list of the index found it.
  struct policy *p =
      compile_among("deny:Bash(*)|deny:Bash(git *)|deny:Kind(execute)", 100);
  struct policy_request *r = request(CB, "git status");
  struct policy_result res;
  policy_decide(p, NULL, r, &res);
  is_str(res.rule, "Bash(*)", "index: the first matching rule in order");
  policy_request_free(r);
  policy_free(p);
}

// One decision remembers what it learnt about each atom (the first deny
// and ask rules, the allow rule, the tier, the index's keys it meets)
// within fixed bounds: 64 atoms, 256 keys found. Past them it looks things
// up again, as the reference does: decisions, reasons and rules stay the
// same.
static char *repeat(const char *part, size_t n, const char *sep,
                    const char *last) {
  size_t len = n * (strlen(part) + strlen(sep)) + strlen(last) + 1;
  char *s = calloc(1, len);
  for (size_t i = 0; i < n; i++) {
    strcat(s, part);
    strcat(s, sep);
  }
  strcat(s, last);
  return s;
}

static void memo_case(const char *rules, const char *command, int want,
                      const char *reason, const char *desc) {
  struct policy *p = compile_among(rules, 1000);
  // Not request(): its text is cut at 7.5 KiB.
  json_t *params = json_pack("{s:s,s:o,s:{s:s,s:{s:s},s:s,s:s}}", "sessionId",
                             "s1", "options", opts(), "toolCall", "toolCallId",
                             "toolu_1", "rawInput", "command", command, "title",
                             command, "kind", "execute");
  struct policy_request *r = policy_request_new(params, root, home);
  json_decref(params);
  struct policy_result res, ref;
  policy_decide(p, NULL, r, &res);
  policy_decide_reference(p, NULL, r, &ref);
  bool good = (int)res.decision == want && strstr(res.reason, reason) &&
              ref.decision == res.decision && ref.by == res.by &&
              strcmp(ref.reason, res.reason) == 0 &&
              strcmp(ref.rule, res.rule) == 0 &&
              strcmp(ref.source, res.source) == 0;
  if (!ok(good, "memo bounds: %s", desc))
    printf("#   got %s: %s\n#   reference %s: %s\n#   want %s: %s\n",
           policy_decision_name(res.decision), res.reason,
           policy_decision_name(ref.decision), ref.reason,
           policy_decision_name(want), reason);
  policy_request_free(r);
  policy_free(p);
}

static void test_memo(void) {
  // More atoms than the memo holds: the last ones decide.
  char *cmd = repeat("git status", 80, " && ", "git push --force origin");
  memo_case("allow:Bash(git status *)|deny:Bash(git push --force*)", cmd, DENY,
            "denied by Bash(git push --force*): git push --force origin",
            "a deny on atom 81");
  free(cmd);
  cmd = repeat("git status", 80, " && ", "git diff");
  memo_case("allow:Bash(git status *)|allow:Bash(git diff *)", cmd, ALLOW,
            "allowed by Bash(git status *), Bash(git diff *)",
            "81 atoms allowed");
  free(cmd);
  cmd = repeat("git status", 80, " && ", "make");
  memo_case("allow:Bash(git status *)|ask:Bash(make)", cmd, ASK,
            "ask rule Bash(make): make", "an ask on atom 81");
  free(cmd);
  // Keys longer than the texts the memo holds: 2,000 bytes each.
  char *word = repeat("a", 2000, "", "");
  char rule[4200], part[2100];
  snprintf(rule, sizeof(rule), "allow:Bash(%s go *)|deny:Bash(%s rm *)", word,
           word);
  snprintf(part, sizeof(part), "%s go x", word);
  char *last = repeat(word, 1, " rm ", "y");
  cmd = repeat(part, 6, " && ", last);
  memo_case(rule, cmd, DENY, "denied by Bash(", "texts past 8 KiB, a deny");
  free(cmd);
  cmd = repeat(part, 6, " && ", part);
  memo_case(rule, cmd, ALLOW, "allowed by  (x)", "texts past 8 KiB, allowed");
  free(cmd);
  free(last);
  free(word);
  // A key of 600 words: more ends than the memo holds.
  char *words = repeat("a", 600, " ", "b");
  snprintf(rule, sizeof(rule), "allow:Bash(%s *)|deny:Bash(a a rm *)", words);
  cmd = repeat(words, 1, " c && ", "a a rm z");
  memo_case(rule, cmd, DENY, "denied by Bash(a a rm *)", "600 keys' ends");
  free(cmd);
  cmd = repeat(words, 3, " c && ", words);
  // (a rule text past 256 bytes is not listed in the reason)
  memo_case(rule, cmd, ALLOW, "allowed by  (x)", "600 keys' ends, allowed");
  free(cmd);
  free(words);
  // More keys met than the memo keeps (256 slots): every word of the
  // command ends a key (`a *`, `a a *`, ... 300 words), and the deny rule's
  // key is the 301st.
  char *a300 = repeat("a", 299, " ", "a");
  size_t cap = 300 * 620 + 1000;
  char *many = calloc(1, cap);
  for (size_t k = 1; k <= 300; k++) {
    char *ak = repeat("a", k - 1, " ", "a");
    size_t at = strlen(many);
    snprintf(many + at, cap - at, "allow:Bash(%s *)|", ak);
    free(ak);
  }
  size_t at = strlen(many);
  snprintf(many + at, cap - at, "deny:Bash(%s rm *)", a300);
  cmd = repeat(a300, 1, " rm z && ", a300);
  memo_case(many, cmd, DENY, "denied by Bash(a a a", "301 keys met, a deny");
  free(cmd);
  cmd = repeat(a300, 1, " && ", a300);
  memo_case(many, cmd, ALLOW, "allowed by Bash(a *) (x)",
            "300 keys met, allowed");
  free(cmd);
  free(many);
  free(a300);
  // A reason longer than its 256 bytes (a rule of 300), cut where
  // vsnprintf cuts it.
  char *args = repeat("f", 300, "", "");
  snprintf(rule, sizeof(rule), "deny:Bash(deploy-x --%s*)", args);
  snprintf(part, sizeof(part), "deploy-x --%s end", args);
  memo_case(rule, part, DENY, "denied by Bash(deploy-x --fff",
            "a reason cut at 255 bytes");
  free(args);
}

// policy_decide of r (with a session memory mem, or NULL) against the
// reference, said with what (the command and where) when they differ; its
// decision in *got (may be NULL).
static bool decides_as_reference(const struct policy *p,
                                 const struct policy *mem,
                                 const struct policy_request *r,
                                 const char *what, enum policy_decision *got) {
  struct policy_result res, ref;
  policy_decide(p, mem, r, &res);
  policy_decide_reference(p, mem, r, &ref);
  bool good = ref.decision == res.decision && ref.by == res.by &&
              strcmp(ref.reason, res.reason) == 0 &&
              strcmp(ref.rule, res.rule) == 0 &&
              strcmp(ref.source, res.source) == 0;
  if (!good)
    printf("#   %s: got %s: %s\n#   reference %s: %s\n", what,
           policy_decision_name(res.decision), res.reason,
           policy_decision_name(ref.decision), ref.reason);
  if (got)
    *got = res.decision;
  return good;
}

// policy_decide against the reference on one command, as memo_case.
static bool same_as_reference(const struct policy *p, const char *command,
                              int want) {
  struct policy_request *r = request(CB, command);
  enum policy_decision got;
  bool good = decides_as_reference(p, NULL, r, command, &got);
  if ((int)got != want) {
    printf("#   %s: got %s, want %s\n", command, policy_decision_name(got),
           policy_decision_name((enum policy_decision)want));
    good = false;
  }
  policy_request_free(r);
  return good;
}

// A policy keeps the index keys of each Bash atom of a cached analysis
// across decisions, by the analysis's serial: an analysis released and
// another one made in its memory (the same address, likely) is not taken
// for it, and more commands than the policy keeps replace each other.
static void test_kept_keys(void) {
  struct policy *p =
      compile_among("allow:Bash(git status *)|deny:Bash(git push --force*)|"
                    "ask:Bash(make)|deny:Bash(rm -rf *)",
                    1000);
  bool good = true;
  for (int round = 0; round < 3; round++) {
    // Each command alone in the cache: freed before the next one comes.
    static const struct {
      const char *cmd;
      int want;
    } seq[] = {{"git status --short", ALLOW}, {"git push --force origin", DENY},
               {"git status -s", ALLOW},      {"make", ASK},
               {"rm -rf build", DENY},        {"git status", ALLOW},
               {"/usr/bin/make", ASK},        {"git stash", ASK}};
    for (size_t i = 0; i < sizeof(seq) / sizeof(*seq); i++) {
      shcache_clear();
      good = same_as_reference(p, seq[i].cmd, seq[i].want) && good;
      good = same_as_reference(p, seq[i].cmd, seq[i].want) && good;
    }
  }
  ok(good, "kept keys: an analysis made where another was freed");
  // More analyses than kept places (KEEP_ENTRIES / 8 = 64), each asked
  // twice, then all again: what replaced an entry is not the entry.
  good = true;
  char cmd[64];
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < 150; i++) {
      bool deny = i % 3 == 0;
      snprintf(cmd, sizeof(cmd),
               deny ? "git push --force r%d && make"
                    : "git status -n%d && git status",
               i);
      good = same_as_reference(p, cmd, deny ? DENY : ALLOW) && good;
    }
  ok(good, "kept keys: 150 commands, each decided as the reference does");
  policy_free(p);
}

// policy_decide with a session memory against the reference.
static bool same_with_memory(const struct policy *p, const struct policy *mem,
                             const char *command) {
  struct policy_request *r = request(CB, command);
  bool good = decides_as_reference(p, mem, r, command, NULL);
  policy_request_free(r);
  return good;
}

// policy_decide of a Bash request in the session cwd `sub` under the
// project root (NULL: the root) against the reference; its decision in
// *got.
static bool same_in(const struct policy *p, const char *sub,
                    const char *command, enum policy_decision *got) {
  char cwd[700];
  snprintf(cwd, sizeof(cwd), "%s%s%s", root, sub ? "/" : "", sub ? sub : "");
  json_t *params = json_pack("{s:s,s:o,s:o}", "sessionId", "s1", "options",
                             opts(), "toolCall", tool_call(CB, command));
  struct policy_request *r = policy_request_new(params, cwd, home);
  json_decref(params);
  char what[800];
  snprintf(what, sizeof(what), "%s in %s", command, sub ? sub : ".");
  bool good = decides_as_reference(p, NULL, r, what, got);
  policy_request_free(r);
  return good;
}

// The result kept for a request with Read and Edit atoms is the result of
// those paths: the same command (the same analysis) in another session
// cwd has other paths, and another result.
static void test_kept_paths(void) {
  for (int mode = 0; mode < 2; mode++) {
    struct policy *p = compile_among(
        "allow:Bash(echo *)|allow:Bash(git status *)|deny:Read(/secret/**)|"
        "ask:Edit(/out/**)|allow:Edit(/ok/**)|allow:Bash(cat *)",
        mode ? 0 : 1000);
    static const char *const cmds[] = {
        "cat key.pem && git status", "echo x > log.txt", "git status > f.txt",
        "echo a > f && cat g",       "cat < in.txt",     "echo b >> ../ok/x"};
    static const char *const subs[] = {NULL, "secret", "out", "ok"};
    bool good = true, differ = false;
    for (int pass = 0; pass < 3; pass++)
      for (size_t c = 0; c < sizeof(cmds) / sizeof(*cmds); c++) {
        enum policy_decision first = POLICY_ASK;
        for (size_t d = 0; d < sizeof(subs) / sizeof(*subs); d++) {
          enum policy_decision got;
          good = same_in(p, subs[(d + pass) % 4], cmds[c], &got) && good;
          differ = differ || (d && got != first);
          first = d ? first : got;
        }
      }
    ok(good && differ, "kept results of commands with paths, %s index",
       mode ? "without an" : "with an");
    policy_free(p);
  }
}

// A request of kept Bash atoms is decided from the answers kept with them
// (fold_kept), list by list and atom by atom as they were answered: every
// command of several atoms decided again and again, in both orders, with
// no memory, an empty one and one with rules, as the reference does. The
// rules give each atom several candidate lists (git, git push, git st*)
// and "might match" answers (a dynamic word).
static void test_kept_fold(void) {
  struct policy *p = compile_among(
      "allow:Bash(git status *)|allow:Bash(git st*)|deny:Bash(git push *)|"
      "deny:Bash(git push --force*)|ask:Bash(git stash *)|ask:Bash(make)|"
      "ask:Bash(make install)|deny:Bash(rm -rf *)|allow:Bash(echo *)|"
      "deny:Bash(curl * x)|ask:Bash(wget *)|allow:Bash(ls *)",
      1000);
  struct policy *empty = compile(NULL, D, 0, "session");
  struct policy *mem =
      compile("allow:Bash(make)|allow:Bash(cargo build)", D, 0, "session");
  static const char *const cmds[] = {
      "git status && git status -s",
      "git status && make",
      "make && git push --force x",
      "git push origin && git stash pop",
      "echo a && git stash list && git push y",
      "ls && make install && make",
      "git stat && ls -la && echo $X",
      "curl -s $U x && git status",
      "curl -s u y && wget z && git status",
      "make $T && git status",
      "echo a | echo b | git push",
      "git status -s && rm -rf build && ls",
      "git status; make; echo; ls",
      "wget a && curl b x",
      "ls -la && cargo build",
  };
  size_t n = sizeof(cmds) / sizeof(*cmds);
  bool good = true;
  for (int round = 0; round < 4; round++)
    for (size_t k = 0; k < n; k++) {
      const char *c = cmds[round & 1 ? n - 1 - k : k];
      const struct policy *m = round == 2 ? empty : round == 3 ? mem : NULL;
      good = same_with_memory(p, m, c) && good;
      good = same_with_memory(p, m, c) && good;
    }
  ok(good, "kept answers folded: decided as the reference does");
  // Policies without an index (a few rules) keep results too: more
  // commands than places, twice in a row, three times, and yolo.
  const char *few = "allow:Bash(git status *)|deny:Bash(git push *)|"
                    "ask:Bash(make)|allow:Bash(echo *)|ask:Bash(wget *)";
  for (int yolo = 0; yolo < 2; yolo++) {
    struct policy *small = compile(few, D, yolo, "s");
    good = true;
    char cmd[64];
    for (int pass = 0; pass < 3; pass++)
      for (size_t k = 0; k < n + 40; k++) {
        if (k >= n)
          snprintf(cmd, sizeof(cmd), "%s %zu && %s",
                   k % 2 ? "git push" : "echo", k, k % 3 ? "make" : "echo");
        for (int twice = 0; twice < 2; twice++) // kept the second time
          good = same_with_memory(small, pass == 2 ? empty : NULL,
                                  k < n ? cmds[k] : cmd) &&
                 good;
      }
    ok(good, "results kept by a policy without an index%s",
       yolo ? " (yolo)" : "");
    policy_free(small);
  }
  policy_free(mem);
  policy_free(empty);
  policy_free(p);
}

static void test_result_fields(void) {
  struct policy *p = compile("deny:Bash(rm *)", D, 0, "/x/.acp/settings.json");
  struct policy_request *r = request(CB, "rm -rf build");
  struct policy_result res;
  policy_decide(p, NULL, r, &res);
  is_str(res.rule, "Bash(rm *)", "deny: the rule");
  is_str(res.source, "/x/.acp/settings.json", "deny: its source");
  policy_request_free(r);
  policy_free(p);

  p = compile(NULL, AE, 0, "s");
  r = request(CE, "{P}/src/a.ts");
  policy_decide(p, NULL, r, &res);
  is_str(res.rule, "", "mode: no rule");
  is_str(res.source, "acceptEdits", "mode: the mode as source");
  policy_request_free(r);
  policy_decide(NULL, NULL, (r = request(CB, "ls")), &res);
  ok(res.decision == POLICY_ASK, "no policy: ask");
  policy_request_free(r);
  policy_free(p);
}

static void test_protect_input(void) {
  char extra[600];
  snprintf(extra, sizeof(extra), "%s/.config/acp-broker/settings.json", home);
  const char *prot[] = {extra};
  struct policy_rule_text t = {"Edit(~/**)", POLICY_LIST_ALLOW, "setup"};
  struct policy_input in = {.rules = &t,
                            .nrules = 1,
                            .yolo = true,
                            .root = root,
                            .home = home,
                            .protect = prot,
                            .nprotect = 1};
  struct policy *p = policy_new(&in, NULL, NULL);
  struct policy_request *r = request(CE, extra);
  struct policy_result res;
  policy_decide(p, NULL, r, &res);
  ok(res.decision == POLICY_ASK && strstr(res.reason, "protected"),
     "an extra protected file asks even in yolo: %s", res.reason);
  policy_request_free(r);
  r = request(CE, "{H}/.config/other.json");
  policy_decide(p, NULL, r, &res);
  ok(res.decision == POLICY_ALLOW, "its neighbour is allowed: %s", res.reason);
  policy_request_free(r);
  policy_free(p);
}

static void test_memory(void) {
  struct policy *p = compile(NULL, D, 0, "x");
  struct policy *m = compile("allow:Bash(npm test)", D, 0, "session");
  struct policy_request *r = request(CB, "npm test");
  struct policy_result res;
  policy_decide(p, m, r, &res);
  ok(res.decision == POLICY_ALLOW && res.by == POLICY_BY_MEMORY,
     "memory allows exactly that command: %s", res.reason);
  is_str(res.source, "session", "memory: source");
  policy_request_free(r);
  r = request(CB, "npm test && curl x | sh");
  policy_decide(p, m, r, &res);
  ok(res.decision == POLICY_ASK, "memory is per atom: %s", res.reason);
  policy_request_free(r);
  r = request(CB, "npm test --watch");
  policy_decide(p, m, r, &res);
  ok(res.decision == POLICY_ASK, "memory is exact: %s", res.reason);
  policy_request_free(r);
  policy_free(p);

  p = compile("deny:Bash(npm *)", D, 0, "x");
  r = request(CB, "npm test");
  policy_decide(p, m, r, &res);
  ok(res.decision == POLICY_DENY, "deny beats memory: %s", res.reason);
  policy_request_free(r);
  policy_free(p);
  policy_free(m);
}

static void test_options(void) {
  static const struct {
    const char *options;
    enum policy_decision in, out;
    const char *id;
  } rows[] = {
      {"[{\"optionId\":\"aa\",\"kind\":\"allow_always\"},{\"optionId\":\"a\","
       "\"kind\":\"allow_once\"},{\"optionId\":\"r\",\"kind\":\"reject_once\"}"
       "]",
       POLICY_ALLOW, POLICY_ALLOW, "a"},
      {"[{\"optionId\":\"x\",\"kind\":\"allow_always\"},{\"optionId\":\"r\","
       "\"kind\":\"reject_once\"}]",
       POLICY_ALLOW, POLICY_ASK, NULL},
      {"[{\"optionId\":\"a\",\"kind\":\"allow_once\"}]", POLICY_DENY,
       POLICY_DENY, NULL},
      {"[{\"optionId\":\"x\",\"kind\":\"_foo\"},{\"optionId\":\"a\","
       "\"kind\":\"allow_once\"}]",
       POLICY_ALLOW, POLICY_ALLOW, "a"},
      {"[{\"optionId\":\"x\",\"kind\":\"_foo\"},{\"optionId\":\"a\","
       "\"kind\":\"allow_once\"}]",
       POLICY_DENY, POLICY_DENY, NULL},
      {"[{\"optionId\":\"ra\",\"kind\":\"reject_always\"},{\"optionId\":\"r\","
       "\"kind\":\"reject_once\"}]",
       POLICY_DENY, POLICY_DENY, "r"},
      {"[{\"optionId\":\"ra\",\"kind\":\"reject_always\"}]", POLICY_DENY,
       POLICY_DENY, "ra"},
      {"[{\"optionId\":\"a\",\"kind\":\"allow_once\"}]", POLICY_ASK, POLICY_ASK,
       NULL},
      {"[{\"kind\":\"allow_once\"},{\"optionId\":7,\"kind\":\"allow_once\"},"
       "{\"optionId\":\"b\",\"kind\":\"allow_once\"}]",
       POLICY_ALLOW, POLICY_ALLOW, "b"},
      {"{}", POLICY_ALLOW, POLICY_ASK, NULL},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    json_t *o = json_loads(rows[i].options, 0, NULL);
    enum policy_decision d = rows[i].in;
    const char *id = policy_pick_option(o, &d);
    char desc[64];
    snprintf(desc, sizeof(desc), "pick %zu: option", i);
    is_str(id, rows[i].id, desc);
    snprintf(desc, sizeof(desc), "pick %zu: decision", i);
    is_int(d, rows[i].out, desc);
    json_decref(o);
  }
}

static int by_text(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

// Sorts the " ; "-separated parts of s in place.
static void sort_parts(char *s) {
  char *parts[64], copy[4096];
  size_t n = 0;
  snprintf(copy, sizeof(copy), "%s", s);
  for (char *p = copy, *e; p && *p && n < 64; p = e ? e + 3 : NULL) {
    e = strstr(p, " ; ");
    if (e)
      *e = '\0';
    parts[n++] = p;
  }
  if (n)
    qsort(parts, n, sizeof(*parts), by_text);
  s[0] = '\0';
  for (size_t i = 0; i < n; i++)
    sprintf(s + strlen(s), "%s%s", i ? " ; " : "", parts[i]);
}

// The narrow rules of a request, joined with " ; " ("" when none); the
// analyser's order is not the point, so both sides are sorted.
static void narrow(enum shape s, const char *arg, const char *want) {
  struct policy_request *r = request(s, arg);
  size_t n = 0;
  char **v = policy_request_narrow_rules(r, &n);
  char got[4096] = "";
  for (size_t i = 0; i < n; i++) {
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
             i ? " ; " : "", v[i]);
    free(v[i]);
  }
  free(v);
  char w[4096];
  snprintf(w, sizeof(w), "%s", sub(want));
  sort_parts(got);
  sort_parts(w);
  char desc[256];
  snprintf(desc, sizeof(desc), "narrow: %.200s", arg);
  is_str(got, w, desc);
  policy_request_free(r);
}

// The rules a prompt suggests (anchored on {P} and {H}; broad: the broader
// alternative), as narrow() shows them; each set must also allow the request
// when compiled as a project's allow rules.
static void suggest(enum shape s, const char *arg, bool broad,
                    const char *want) {
  struct policy_request *r = request(s, arg);
  size_t n = 0;
  char **v = policy_request_suggest(r, root, home, broad, &n);
  char got[4096] = "";
  struct policy_rule_text *t = calloc(n ? n : 1, sizeof(*t));
  for (size_t i = 0; i < n; i++) {
    snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s",
             i ? " ; " : "", v[i]);
    t[i] = (struct policy_rule_text){v[i], POLICY_LIST_ALLOW, "project"};
  }
  char desc[256];
  if (n) {
    struct policy_input in = {
        .rules = t, .nrules = n, .root = root, .home = home};
    size_t nw = 0;
    struct policy *p = policy_new(&in, NULL, &nw);
    struct policy_result res;
    policy_decide(p, NULL, r, &res);
    snprintf(desc, sizeof(desc), "suggested%s rules allow: %.200s",
             broad ? " broad" : "", arg);
    ok(nw == 0 && res.decision == POLICY_ALLOW && res.by == POLICY_BY_RULE,
       "%s", desc);
    policy_free(p);
  }
  for (size_t i = 0; i < n; i++)
    free(v[i]);
  free(v);
  free(t);
  char w[4096];
  snprintf(w, sizeof(w), "%s", sub(want));
  sort_parts(got);
  sort_parts(w);
  snprintf(desc, sizeof(desc), "suggest%s: %.200s", broad ? " broad" : "", arg);
  is_str(got, w, desc);
  policy_request_free(r);
}

static void test_suggest(void) {
  // Project-relative, home-relative, else absolute; never a home path.
  suggest(CE, "{P}/src/a.ts", false, "Edit(/src/a.ts)");
  suggest(CE, "{P}/src/a.ts", true, "Edit(/src/**)");
  suggest(CR, "{P}/src/we*rd.txt", false, "Read(/src/we\\*rd.txt)");
  suggest(CE, "{H}/notes.md", false, "Edit(~/notes.md)");
  suggest(CE, "{H}/notes.md", true, "");
  suggest(CE, "{P}/top.txt", true, ""); // the whole project: none
  suggest(CE, "{P}/src/link", false, "Edit(//etc/passwd) ; Edit(/src/link)");
  // Outside the project the exact file stays: never /etc/** or ~/dir/**.
  suggest(CE, "{P}/src/link", true, "Edit(//etc/passwd) ; Edit(/src/**)");
  suggest(CE, "{H}/notes/todo.md", true, "");
  suggest(CE, "/etc/hosts", true, "");
  suggest(CB, "echo hi > out.txt", false, "Bash(echo hi) ; Edit(/out.txt)");
  // Commands: the subcommand and ` *`; the program alone unless it can
  // run, remove or reach anything (then the exact command stays).
  suggest(CB, "git status", false, "Bash(git status)");
  suggest(CB, "git status", true, "Bash(git status *)");
  suggest(CB, "ls -la src", true, "Bash(ls *)");
  suggest(CB, "npm run test:unit --watch", true, "Bash(npm run *)");
  suggest(CB, "rm -rf build", true, "");
  suggest(CB, "bash -c 'ls -l'", true, "Bash(ls *)"); // what runs
  suggest(CB, "python3 x.py", true, "");
  suggest(CB, "git -C sub status", true, "");
  suggest(CB, "git status && rm -rf build", true,
          "Bash(git status *) ; Bash(rm -rf build)");
  suggest(CB, "rm -rf $X", true, "");
  suggest(WF, "https://GitHub.com/x", true, "");
  suggest(WF, "https://GitHub.com/x", false, "WebFetch(domain:github.com)");
}

static void test_narrow(void) {
  narrow(CB, "npm test", "Bash(npm test)");
  narrow(CB, "git status && git log -1", "Bash(git log -1) ; Bash(git status)");
  narrow(CB, "echo hi > out.txt", "Bash(echo hi) ; Edit(/{P}/out.txt)");
  narrow(CB, "rm -rf $X", "");
  narrow(CB, "git commit -m 'a*b'", "");
  narrow(CB, "eval x", "");
  narrow(CB, "find . -delete", "");
  narrow(CE, "{P}/src/a.ts", "Edit(/{P}/src/a.ts)");
  narrow(CE, "{P}/src/link", "Edit(//etc/passwd) ; Edit(/{P}/src/link)");
  narrow(CB, "ls | grep x && ls", "Bash(grep x) ; Bash(ls)");
  narrow(CR, "{P}/we*rd.txt", "Read(/{P}/we\\*rd.txt)");
  narrow(WF, "https://GitHub.com/x", "WebFetch(domain:github.com)");
  narrow(MC, "mcp__github__create_issue", "mcp__github__create_issue");
  narrow(GM, "mcp_github_create_issue", "");
  narrow(SM, "", "Kind(switch_mode)");
  narrow(UK, "", "");
  narrow(GK, "execute", "");
}

static void test_request_info(void) {
  struct policy_result res0;
  struct policy_request *r =
      request(CX, "[\"/bin/bash\",\"-lc\",\"npm test\"]");
  is_str(policy_request_command(r), "npm test", "codex: the -lc script");
  policy_request_free(r);
  r = request(CX, "[\"ls\",\"-la\",\"a b\",\"it's\"]");
  is_str(policy_request_command(r), "ls -la 'a b' 'it'\\''s'",
         "codex: other argv quoted");
  policy_request_free(r);
  r = request(GB, "git status");
  is_str(policy_request_command(r), "git status", "gemini: the title");
  policy_request_free(r);
  r = request(CE, "{P}/src/link");
  json_t *paths = policy_request_paths(r);
  char want[1200];
  snprintf(want, sizeof(want), "[\"%s/src/link\", \"/etc/passwd\"]", root);
  char *got = json_dumps(paths, 0);
  is_str(got, want, "paths: lexical and resolved");
  free(got);
  json_decref(paths);
  ok(!policy_request_command(r), "an edit has no command");
  policy_request_free(r);
  r = request(RAW, "[]");
  paths = policy_request_paths(r);
  ok(json_array_size(paths) == 0, "no toolCall: no paths");
  json_decref(paths);
  policy_request_free(r);
  json_t *nocwd = json_pack("{s:{s:s,s:{s:s},s:s}}", "toolCall", "toolCallId",
                            "t", "rawInput", "command",
                            "cat ~/x > y && rm -rf z", "kind", "execute");
  r = policy_request_new(nocwd, NULL, NULL);
  policy_decide(NULL, NULL, r, &res0);
  ok(res0.decision == POLICY_ASK, "no cwd, no home: ask (%s)", res0.reason);
  policy_request_free(r);
  json_decref(nocwd);
  json_t *bad = json_pack("{s:s}", "sessionId", "s");
  r = policy_request_new(bad, NULL, NULL);
  struct policy_result res;
  policy_decide(NULL, NULL, r, &res);
  ok(res.decision == POLICY_ASK, "malformed params: ask (%s)", res.reason);
  policy_request_free(r);
  json_decref(bad);
}

// What the prompt shows as judged: every atom, quoted as typed.
static void test_request_atoms(void) {
  struct policy *p = compile("", D, false, "t");
  struct policy_request *r =
      request(CB, "git status && rm -rf 'my dir' > out.txt; echo \"it's\"");
  json_t *a = policy_request_atoms(p, r);
  char *got = json_dumps(a, JSON_COMPACT);
  is_str(got,
         "[{\"kind\":\"command\",\"text\":\"git status\"},"
         "{\"kind\":\"command\",\"text\":\"rm -rf 'my dir'\"},"
         "{\"kind\":\"edit\",\"text\":\"edit my dir\",\"inner\":true},"
         "{\"kind\":\"edit\",\"text\":\"edit out.txt\"},"
         "{\"kind\":\"command\",\"text\":\"echo 'it'\\\\''s'\"}]",
         "atoms of a compound command, in order, quoted");
  free(got);
  json_decref(a);
  policy_request_free(r);
  // A long command is cut with "...", never inside a character.
  char longcmd[1400] = "echo ";
  for (int i = 0; i < 600; i++)
    strcat(longcmd, "\xc3\xa9");
  r = request(CB, longcmd);
  a = policy_request_atoms(p, r);
  const char *text =
      json_string_value(json_object_get(json_array_get(a, 0), "text"));
  ok(text && strncmp(text, "echo '\xc3\xa9", 8) == 0, "a long word: quoted");
  size_t tl = text ? strlen(text) : 0;
  ok(tl > 3 && tl < 512 && strcmp(text + tl - 3, "...") == 0 &&
         (unsigned char)text[tl - 4] == 0xa9,
     "cut with ..., after a whole character (%zu bytes)", tl);
  json_decref(a);
  policy_request_free(r);
  r = request(CX, "[\"/bin/bash\",\"-lc\",\"cat ~/.ssh/id_rsa\"]");
  a = policy_request_atoms(p, r);
  got = json_dumps(a, JSON_COMPACT);
  is_str(got,
         "[{\"kind\":\"command\",\"text\":\"cat ~/.ssh/id_rsa\"},"
         "{\"kind\":\"read\",\"text\":\"read ~/.ssh/id_rsa\",\"inner\":true}]",
         "codex argv: the script's atoms, home shown as ~");
  free(got);
  json_decref(a);
  policy_request_free(r);
  policy_free(p);
}

// The atoms' texts a policy keeps (policy_request_atom: by the shell
// analysis's serial and the atom's place) are the texts it works out:
// 300 commands of several atoms (a title that is another command, home,
// quotes, bytes that are not UTF-8, words longer than what is kept), each
// asked three times in a row of one policy and others in between, equal to
// a new policy's every time.
static void test_request_atoms_kept(void) {
  struct policy *p = compile("", D, false, "t");
  int differ = 0, atoms = 0;
  char cmd[600], title[300];
  for (int step = 0; step < 3 * 300; step++) {
    // each command three times in a row, another one between
    int i = step / 3, j = step % 3 == 1 ? (step * 37) % 300 : -1;
    for (int twice = 0; twice < 2; twice++, i = j) {
      if (i < 0)
        break;
      int n = snprintf(cmd, sizeof(cmd),
                       "git log -n %d && cat %s/f%d.txt | grep 'a b%d' > o%d",
                       i, home, i % 7, i, i % 3);
      if (i % 5 == 0)
        snprintf(cmd + n, sizeof(cmd) - (size_t)n, "; echo \xc3\xa9\xff%d", i);
      if (i % 11 == 0)
        snprintf(cmd + n, sizeof(cmd) - (size_t)n, "; echo %0*d", 150 + i, i);
      snprintf(title, sizeof(title), "ls dir%d; rm x%d", i % 4, i);
      json_t *tc = json_pack("{s:s,s:s,s:s,s:{s:s}}", "toolCallId", "t",
                             "title", i % 2 ? title : cmd, "kind", "execute",
                             "rawInput", "command", cmd);
      struct policy_request *r = policy_request_new_tc(tc, root, home);
      struct policy *fresh = compile("", D, false, "t");
      for (size_t k = 0; k < policy_request_natoms(r); k++) {
        struct policy_atom_view a, b;
        policy_request_atom(p, r, k, &a);
        policy_request_atom(fresh, r, k, &b);
        atoms++;
        differ += strcmp(a.kind, b.kind) != 0 || strcmp(a.text, b.text) != 0 ||
                  a.inner != b.inner;
      }
      policy_free(fresh);
      policy_request_free(r);
      json_decref(tc);
    }
  }
  ok(differ == 0 && atoms > 3 * 300 * 4,
     "kept atom texts equal the texts worked out (%d atoms, %d differ)", atoms,
     differ);
  policy_free(p);
}

static void test_warnings(void) {
  struct policy_rule_text t[] = {
      {"Frob(x)", POLICY_LIST_DENY, "f1"},
      {"*", POLICY_LIST_ALLOW, "f2"},
      {"*", POLICY_LIST_DENY, "f2"},
      {"read_file(a)", POLICY_LIST_ALLOW, "f3"},
      {"Bash(ls)", POLICY_LIST_ALLOW, "f4"},
      {NULL, POLICY_LIST_ALLOW, "f5"},
  };
  struct policy_input in = {
      .rules = t, .nrules = 6, .root = root, .home = home};
  char **w = NULL;
  size_t n = 0;
  struct policy *p = policy_new(&in, &w, &n);
  is_size(n, 4, "four warnings");
  for (size_t i = 0; i < n; i++)
    printf("# warning: %s\n", w[i]);
  ok(n == 4 && strstr(w[0], "Frob(x): unknown tool 'Frob' (f1)"),
     "unknown tool");
  ok(n == 4 && strstr(w[1], "*: allow rules take tool-name patterns"),
     "unanchored allow glob");
  ok(n == 4 && strstr(w[2], "Gemini ignores the arguments"), "Gemini args");
  for (size_t i = 0; i < n; i++)
    free(w[i]);
  free(w);
  policy_free(p);
  char err[256];
  ok(policy_rule_check("Bash(ls", err, sizeof(err)) == -1 &&
         strstr(err, "missing ')'"),
     "rule check: %s", err);
  ok(policy_rule_check("mcp__*", err, sizeof(err)) == 0, "rule check: glob");
  ok(policy_rule_check_list("mcp__*", POLICY_LIST_ALLOW, err, sizeof(err)) ==
         -1,
     "rule check for allow: %s", err);
  ok(policy_rule_check_list("mcp__*", POLICY_LIST_DENY, err, sizeof(err)) == 0,
     "rule check for deny");
}

static void test_names(void) {
  is_str(policy_decision_name(POLICY_DENY), "deny", "decision name");
  is_str(policy_mode_name(POLICY_MODE_ACCEPT_EDITS), "acceptEdits",
         "mode name");
  is_str(policy_by_name(POLICY_BY_MEMORY), "memory", "by name");
  enum policy_mode m;
  ok(policy_mode_parse("bypassPermissions", &m) == 0 && m == POLICY_MODE_YOLO,
     "bypassPermissions is yolo");
  ok(policy_mode_parse("plan", &m) == 0 && m == POLICY_MODE_PLAN, "plan");
  ok(policy_mode_parse("dontAsk", &m) == -1, "unknown mode");
}

static void make_tree(void) {
  const char *tmp = getenv("TMPDIR");
  char tmpl[600];
  snprintf(tmpl, sizeof(tmpl), "%s/acp-policy.XXXXXX", tmp ? tmp : "/tmp");
  char *t = realpath(mkdtemp(tmpl), NULL);
  char path[700], target[700];
  snprintf(root, sizeof(root), "%s/p", t);
  snprintf(home, sizeof(home), "%s/h", t);
  const char *dirs[] = {"p", "p/.git", "p/src", "h", "h/.ssh"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
    snprintf(path, sizeof(path), "%s/%s", t, dirs[i]);
    mkdir(path, 0700);
  }
  snprintf(path, sizeof(path), "%s/src/link", root);
  if (symlink("/etc/passwd", path) != 0)
    perror("symlink");
  snprintf(path, sizeof(path), "%s/key", root);
  snprintf(target, sizeof(target), "%s/.ssh/id_rsa", home);
  if (symlink(target, path) != 0)
    perror("symlink");
  free(t);
}

static void remove_tree(void) {
  char path[700];
  const char *rm[] = {"p/src/link", "p/key",  "p/src", "p/.git",
                      "p",          "h/.ssh", "h"};
  for (size_t i = 0; i < sizeof(rm) / sizeof(*rm); i++) {
    snprintf(path, sizeof(path), "%s/../%s", root, rm[i]);
    if (unlink(path) != 0)
      rmdir(path);
  }
  snprintf(path, sizeof(path), "%s/..", root);
  rmdir(path);
}

int main(void) {
  make_tree();
  test_table();
  test_index();
  test_memo();
  test_kept_keys();
  test_kept_fold();
  test_kept_paths();
  test_result_fields();
  test_protect_input();
  test_memory();
  test_options();
  test_narrow();
  test_suggest();
  test_request_info();
  test_request_atoms();
  test_request_atoms_kept();
  test_warnings();
  test_names();
  remove_tree();
  shcache_clear();
  return done_testing();
}
