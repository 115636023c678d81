// request: the atoms of one permission request, read from every field that
// could act (permission-rules §5.5, doc/threat-model.md). Each case gives a
// toolCall and the atoms expected, written one per atom as
//   <class><flags>:<what>
// class B (bash), R (read), E (edit), F (fetch), S (search), M (MCP),
// K (kind); flags d (deny/ask only: another atom carries the allow) and
// g (guessed: plan mode asks); what is the command's words, the normal
// path, the host or the name. "!" first means opaque. The session cwd is
// /p and home /h; neither exists, so paths resolve to themselves.

#include "policy/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void describe(const struct request *r, char *buf, size_t n) {
  static const char cls[] = "BREFSMK";
  size_t o = (size_t)snprintf(buf, n, "%s", r->opaque ? "!" : "");
  for (size_t i = 0; i < r->natoms && o < n; i++) {
    const struct request_atom *a = &r->atoms[i];
    o +=
        (size_t)snprintf(buf + o, n - o, "%s%c%s%s:", i ? " " : "", cls[a->cls],
                         a->deny_only ? "d" : "", a->guessed ? "g" : "");
    if (a->cls == REQUEST_BASH) {
      for (size_t w = 0; w < a->cmd->nwords && o < n; w++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", w ? "_" : "",
                              a->cmd->words[w].text);
    } else if (a->cls == REQUEST_READ || a->cls == REQUEST_EDIT) {
      o += (size_t)snprintf(buf + o, n - o, "%s",
                            a->where == REQUEST_KNOWN ? a->lex : "?");
    } else if (a->cls == REQUEST_KIND) {
      o += (size_t)snprintf(buf + o, n - o, "%s", a->kind);
    } else if (o < n) {
      o += (size_t)snprintf(buf + o, n - o, "%s", a->name ? a->name : "");
    }
  }
}

static void test_atoms(void) {
  static const struct {
    const char *tc, *want;
  } rows[] = {
      // The Claude adapter's own shapes are read as before.
      {"{\"rawInput\":{\"command\":\"npm test\"},\"title\":\"npm test\","
       "\"kind\":\"execute\"}",
       "B:npm_test"},
      {"{\"rawInput\":{\"command\":\"ls\"},\"title\":\"`ls`\"}", "B:ls"},
      {"{\"rawInput\":{\"file_path\":\"/p/a\",\"content\":\"x\"},"
       "\"kind\":\"edit\",\"locations\":[{\"path\":\"/p/a\"}]}",
       "E:/p/a"},
      {"{\"rawInput\":{\"url\":\"https://GitHub.com./x\"},"
       "\"title\":\"Fetch https://GitHub.com./x\",\"kind\":\"fetch\"}",
       "F:github.com"},
      // A title showing another command is a second reading.
      {"{\"rawInput\":{\"command\":\"ls\"},\"title\":\"rm x\","
       "\"kind\":\"execute\"}",
       "B:ls B:rm_x Ed:/p/x"},
      // codex labels an argv command by what it reads: the label is no
      // command, the location is checked beside it.
      {"{\"rawInput\":{\"command\":[\"/bin/bash\",\"-lc\",\"cat a\"]},"
       "\"title\":\"Read a\",\"kind\":\"read\","
       "\"locations\":[{\"path\":\"/p/a\"}]}",
       "B:cat_a Rd:/p/a"},
      // A shell tool whatever its kind; a write whatever its kind.
      {"{\"toolCallId\":\"run_shell_command__1\",\"title\":\"rm x\","
       "\"kind\":\"search\"}",
       "B:rm_x Ed:/p/x"},
      {"{\"rawInput\":{\"file_path\":\"/p/a\",\"content\":\"x\"},"
       "\"kind\":\"think\"}",
       "E:/p/a"},
      {"{\"kind\":\"read\",\"content\":[{\"type\":\"diff\",\"path\":\"/p/"
       "a\"}]}",
       "E:/p/a"},
      {"{\"kind\":\"move\",\"locations\":[{\"path\":\"/p/a\"}],"
       "\"rawInput\":{\"destination\":\"~/.bashrc\"}}",
       "E:/h/.bashrc E:/p/a"},
      {"{\"kind\":\"think\",\"rawInput\":{\"changes\":{\"/p/a\":"
       "{\"move_path\":\"/p/b\"}}}}",
       "E:/p/a E:/p/b"},
      {"{\"kind\":\"edit\",\"rawInput\":{\"changes\":7}}", "!E:?"},
      {"{\"kind\":\"fetch\",\"rawInput\":{\"url\":\"https://a.com/\","
       "\"command\":\"ls\"}}",
       "B:ls F:a.com"},
      {"{\"kind\":\"think\",\"locations\":[{\"path\":\"/p/a\"}]}",
       "Rd:/p/a Edg:/p/a K:think"},
      {"{\"kind\":\"switch_mode\",\"rawInput\":{\"file_path\":\"/p/a\","
       "\"content\":\"x\"}}",
       "E:/p/a K:switch_mode"},
      {"{\"rawInput\":\"rm -rf /\",\"kind\":\"execute\"}", "!"},
      // MCP tools: their paths, at any depth, as reads and writes that the
      // tool's rule carries; their commands likewise.
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"a\":{\"b\":[\"~/.ssh/x\"]},\"content\":\"/etc/passwd\"}}",
       "M:mcp__fs__w Ed:/h/.ssh/x"},
      {"{\"_meta\":{\"claudeCode\":{\"toolName\":\"mcp__fs__r\"}},"
       "\"kind\":\"read\",\"rawInput\":"
       "{\"uri\":\"file:///p/%61\"}}",
       "M:mcp__fs__r Rd:/p/a"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"path\":\"/p/a\",\"content\":\"x\"}}",
       "M:mcp__fs__w Ed:/p/a"},
      {"{\"title\":\"mcp__t__run\",\"kind\":\"other\",\"rawInput\":"
       "{\"command\":\"rm x\",\"cwd\":\"/p\"}}",
       "M:mcp__t__run B:rm_x Ed:/p/x"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"path\":\"~root/.bashrc\"}}",
       "M:mcp__fs__w Rd:? Edg:?"},
      {"{\"toolCallId\":\"mcp_fs_w__1\",\"kind\":\"other\",\"content\":"
       "[{\"type\":\"content\",\"content\":{\"type\":\"text\","
       "\"text\":\"{\\\"path\\\":\\\"/p/a\\\"}\"}}]}",
       "M:mcp_fs_w Rd:/p/a Edg:/p/a"},
      {"{\"toolCallId\":\"mcp_fs_w__1\",\"kind\":\"other\",\"content\":"
       "[{\"type\":\"content\",\"content\":{\"type\":\"text\","
       "\"text\":\"[Payload omitted due to length]\"}}]}",
       "!M:mcp_fs_w"},
      // URLs: the field the tool fetches, and every URL shown.
      {"{\"rawInput\":{\"url\":\"https://a.com/\"},"
       "\"title\":\"Fetch https://b.com/\",\"kind\":\"fetch\"}",
       "F:a.com F:b.com"},
      {"{\"toolCallId\":\"web_fetch__1\",\"kind\":\"fetch\",\"title\":"
       "\"Processing URLs and instructions from prompt: \\\"https://a.com/ "
       "and https://b.com/\\\"\"}",
       "F:a.com F:b.com"},
      {"{\"toolCallId\":\"web_fetch__1\",\"kind\":\"fetch\",\"title\":"
       "\"Processing URLs and instructions from prompt: \\\"https://a.com/ "
       "and https://b...\\\"\"}",
       "!F:a.com"},
      {"{\"kind\":\"fetch\",\"rawInput\":{\"url\":\"wss://a.com/\"}}",
       "!F:a.com"},
      {"{\"kind\":\"fetch\",\"title\":\"get xhttps://a.com/\"}", "!"},
      {"{\"toolCallId\":\"google_web_search__1\",\"kind\":\"search\","
       "\"title\":\"acp\"}",
       "S:"},
      {"{\"kind\":\"search\",\"title\":\"grep\"}", "R:/p"},
      {"{\"kind\":\"Execute\",\"title\":\"rm -rf ~\"}", "!"},
      {"{\"title\":\"mcp__fs__w\",\"kind\":\"other\",\"rawInput\":"
       "{\"a\":[[[[[[[[[[\"/h/.bashrc\"]]]]]]]]]]}}",
       "!M:mcp__fs__w"},

      {"{\"kind\":\"fetch\",\"title\":\"Fetch https://a.com/\","
       "\"rawInput\":{\"urls\":[\"https://b.com/\"]}}",
       "F:b.com F:a.com"},
      {"{\"kind\":\"SWITCH_MODE\",\"title\":\"x\"}", "K:switch_mode"},
      {"{\"kind\":\"execute\",\"rawInput\":{\"command\":\"\"}}", "!"},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    json_error_t err;
    json_t *tc = json_loads(rows[i].tc, 0, &err);
    if (!ok(tc != NULL, "row %zu parses", i)) {
      printf("#   %s\n", err.text);
      continue;
    }
    json_t *params = json_pack("{s:o}", "toolCall", tc);
    struct request r;
    request_init(&r, params, "/p", "/h");
    char got[1024];
    describe(&r, got, sizeof(got));
    is_str(got, rows[i].want, rows[i].tc);
    request_clear(&r);
    json_decref(params);
  }
}

// The broker's JSON readers refuse \u0000, but a NUL byte in a string
// would end it early for C while the agent reads on: opaque.
static void test_nul(void) {
  static const char title[] =
      "Processing URLs and instructions from prompt: \"https://a.com/\0 "
      "https://b.com/\"";
  json_t *params =
      json_pack("{s:{s:s,s:s,s:s%}}", "toolCall", "toolCallId", "web_fetch__1",
                "kind", "fetch", "title", title, sizeof(title) - 1);
  struct request r;
  request_init(&r, params, "/p", "/h");
  ok(r.opaque && strstr(r.reason, "NUL"), "a NUL byte in a string: opaque");
  request_clear(&r);
  json_decref(params);
}

int main(void) {
  test_atoms();
  test_nul();
  return done_testing();
}
