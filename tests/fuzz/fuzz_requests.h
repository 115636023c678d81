#pragma once
// A fixed set of session/request_permission params, one or more per kind of
// tool call and agent, for the targets that check decisions (fuzz_rules,
// fuzz_settings). {P} is the project root (also the session cwd), {H} home.
// Built once per process and only read afterwards.

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "policy/policy.h"

struct fuzz_request {
  const char *tool_call; // the toolCall object, with {P} and {H}
  bool never_allow;      // opaque, circuit breaker or tier-1 protected
  bool edits; // has an edit atom: deciding it costs ~1000x more (the
              // protected-path globs), so targets may sample these
};

static const struct fuzz_request fuzz_request_defs[] = {
    // Claude Bash, compound, codex argv, Gemini shell.
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"npm run "
     "build\"},\"title\":\"npm run build\",\"kind\":\"execute\"}",
     false, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"git status && "
     "rm -f x\"},\"title\":\"git status && rm -f x\",\"kind\":\"execute\"}",
     false, true},
    {"{\"toolCallId\":\"call_1\",\"kind\":\"execute\",\"rawInput\":{"
     "\"command\":[\"/bin/bash\",\"-lc\",\"npm test\"],\"cwd\":\"{P}\"}}",
     false, false},
    {"{\"toolCallId\":\"run_shell_command__call_1\",\"status\":\"pending\","
     "\"title\":\"ls -la src\",\"kind\":\"execute\",\"content\":[],"
     "\"locations\":[]}",
     false, false},
    // Edit inside the project, reads inside and outside it.
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{P}/src/"
     "a.ts\",\"old_string\":\"a\",\"new_string\":\"b\"},\"title\":\"Edit\","
     "\"kind\":\"edit\",\"content\":[{\"type\":\"diff\",\"path\":\"{P}/src/"
     "a.ts\",\"oldText\":\"a\",\"newText\":\"b\"}],\"locations\":[{\"path\":"
     "\"{P}/src/a.ts\"}]}",
     false, true},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{P}/"
     "README.md\"},\"title\":\"Read\",\"kind\":\"read\",\"locations\":[{"
     "\"path\":\"{P}/README.md\"}]}",
     false, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{H}/"
     "notes.txt\"},\"title\":\"Read\",\"kind\":\"read\",\"locations\":[{"
     "\"path\":\"{H}/notes.txt\"}]}",
     false, false},
    // Gemini edit: diff and locations only.
    {"{\"toolCallId\":\"replace__call_1\",\"title\":\"a.ts: a => b\","
     "\"kind\":\"edit\",\"content\":[{\"type\":\"diff\",\"path\":\"{P}/src/"
     "b.ts\",\"oldText\":\"a\",\"newText\":\"b\"}],\"locations\":[{\"path\":"
     "\"{P}/src/b.ts\"}]}",
     false, true},
    // Fetch, MCP (Claude and Gemini), unknown tool, mode change, generic.
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"url\":\"https://"
     "example.com/x\",\"prompt\":\"sum up\"},\"title\":\"Fetch\",\"kind\":"
     "\"fetch\"}",
     false, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{},\"title\":\"mcp__github__"
     "create_issue\",\"kind\":\"other\",\"_meta\":{\"claudeCode\":{"
     "\"toolName\":\"mcp__github__create_issue\"}}}",
     false, false},
    {"{\"toolCallId\":\"mcp_github_get_me__call_1\",\"title\":\"MCP tool\","
     "\"kind\":\"other\"}",
     false, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"target\":\"all\"},"
     "\"title\":\"Frobnicate\",\"kind\":\"other\"}",
     false, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"plan\":\"## Plan\"},"
     "\"title\":\"Ready to code?\",\"kind\":\"switch_mode\"}",
     false, false},
    {"{\"toolCallId\":\"call_9\",\"title\":\"Some tool\",\"kind\":\"delete\","
     "\"content\":[],\"locations\":[{\"path\":\"{P}/old.txt\"}]}",
     false, true},
    // Never allowed, whatever the rules, mode or yolo say.
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"eval x\"},"
     "\"title\":\"eval x\",\"kind\":\"execute\"}",
     true, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"echo hi > "
     "/dev/tcp/h/80\"},\"title\":\"echo\",\"kind\":\"execute\"}",
     true, false},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"rm -rf /\"},"
     "\"title\":\"rm -rf /\",\"kind\":\"execute\"}",
     true, true},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"command\":\"rm -rf "
     "{H}\"},\"title\":\"rm\",\"kind\":\"execute\"}",
     true, true},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{P}/.acp/"
     "settings.json\",\"content\":\"{}\"},\"title\":\"Write\",\"kind\":"
     "\"edit\",\"locations\":[{\"path\":\"{P}/.acp/settings.json\"}]}",
     true, true},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{H}/.config/"
     "acp-broker/settings.json\",\"content\":\"{}\"},\"title\":\"Write\","
     "\"kind\":\"edit\",\"locations\":[{\"path\":\"{H}/.config/acp-broker/"
     "settings.json\"}]}",
     true, true},
    {"{\"toolCallId\":\"toolu_1\",\"rawInput\":{\"file_path\":\"{H}/.claude/"
     "settings.json\",\"content\":\"{}\"},\"title\":\"Write\",\"kind\":"
     "\"edit\",\"locations\":[{\"path\":\"{H}/.claude/settings.json\"}]}",
     true, true},
};

#define FUZZ_NREQUESTS (sizeof(fuzz_request_defs) / sizeof(fuzz_request_defs[0]))

// Replaces {P} and {H} in s (a new string).
static char *fuzz_subst(const char *s, const char *root, const char *home) {
  size_t n = 1;
  for (const char *p = s; *p; p++)
    n += 1 + strlen(root) + strlen(home);
  char *out = malloc(n), *o = out;
  for (; *s; s++) {
    if (s[0] == '{' && (s[1] == 'P' || s[1] == 'H') && s[2] == '}') {
      o += sprintf(o, "%s", s[1] == 'P' ? root : home);
      s += 2;
    } else {
      *o++ = *s;
    }
  }
  *o = '\0';
  return out;
}

// The params object of request i.
static json_t *fuzz_request_params(size_t i, const char *root,
                                   const char *home) {
  char *tc = fuzz_subst(fuzz_request_defs[i].tool_call, root, home);
  json_error_t err;
  json_t *call = json_loads(tc, 0, &err);
  if (!call) {
    fprintf(stderr, "fuzz_requests: request %zu: %s\n", i, err.text);
    abort();
  }
  free(tc);
  return json_pack(
      "{s:s,s:[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s,s:s}],s:o}", "sessionId",
      "s1", "options", "optionId", "allow_always", "name", "Always Allow",
      "kind", "allow_always", "optionId", "allow", "name", "Allow", "kind",
      "allow_once", "optionId", "reject", "name", "Reject", "kind",
      "reject_once", "toolCall", call);
}

// Every request, parsed for this root and home.
static void fuzz_requests_new(struct policy_request **out, const char *root,
                              const char *home) {
  for (size_t i = 0; i < FUZZ_NREQUESTS; i++) {
    json_t *params = fuzz_request_params(i, root, home);
    out[i] = policy_request_new(params, root, home);
    json_decref(params);
  }
}

static inline const char *fuzz_decision(enum policy_decision d) {
  return policy_decision_name(d);
}
