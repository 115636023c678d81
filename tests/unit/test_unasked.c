// unasked: which tool calls acted with no permission request, in the flows
// of the real agents (Claude: tool_call then request; Gemini: the request
// first; codex: in_progress before the request), merging, turn ends,
// agents going away, and the bounds.

#include "broker/unasked.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

static json_t *upd(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  if (!j)
    printf("# bad test JSON: %s\n", err.text);
  return j;
}

// Feeds one update; returns what was reported (or NULL).
static json_t *feed(struct unasked *u, const char *agent, const char *sid,
                    const char *text) {
  json_t *j = upd(text);
  json_t *r = unasked_update(u, agent, sid, j);
  json_decref(j);
  return r;
}

static const char *tc_str(const json_t *r, const char *key) {
  return json_string_value(
      json_object_get(json_object_get(r, "toolCall"), key));
}

static void test_claude_direct_write(void) {
  struct unasked *u = unasked_new(0, 0, 0);
  ok(!feed(u, "claude", "s1",
           "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"toolu_1\","
           "\"title\":\"Write\",\"kind\":\"edit\",\"status\":\"pending\","
           "\"rawInput\":{}}"),
     "a pending tool call is not reported");
  ok(!feed(u, "claude", "s1",
           "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"toolu_1\","
           "\"title\":\"Write test.txt\",\"rawInput\":{\"file_path\":\"/w/"
           "test.txt\",\"content\":\"hi\\n\"},\"content\":[{\"type\":\"diff\","
           "\"path\":\"/w/test.txt\",\"oldText\":null,\"newText\":\"hi\\n\"}],"
           "\"locations\":[{\"path\":\"/w/test.txt\"}]}"),
     "an update without a status is not reported");
  json_t *r = feed(u, "claude", "s1",
                   "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":"
                   "\"toolu_1\",\"status\":\"completed\"}");
  ok(r != NULL, "completed with no request: reported");
  is_str(json_string_value(json_object_get(r, "sessionId")), "s1",
         "with its session");
  is_str(tc_str(r, "toolCallId"), "toolu_1", "and its toolCallId");
  is_str(tc_str(r, "kind"), "edit", "the kind of the first update is kept");
  is_str(tc_str(r, "title"), "Write test.txt", "the newest title wins");
  json_t *tc = json_object_get(r, "toolCall");
  is_str(json_string_value(
             json_object_get(json_object_get(tc, "rawInput"), "file_path")),
         "/w/test.txt", "rawInput is merged in");
  is_size(json_array_size(json_object_get(tc, "content")), 1,
          "the diff content is there");
  is_size(json_array_size(json_object_get(tc, "locations")), 1,
          "and the locations");
  json_decref(r);
  ok(!feed(u, "claude", "s1",
           "{\"sessionUpdate\":\"tool_call_update\",\"toolCallId\":\"toolu_1\","
           "\"status\":\"completed\"}"),
     "reported once only");
  ok(!unasked_turn_end(u, "claude", "s1"), "nothing left at the turn end");
  unasked_free(u);
}

static void test_asked_flows(void) {
  struct unasked *u = unasked_new(0, 0, 0);
  // Claude: announced, then asked, then completed.
  ok(!feed(u, "claude", "s", "{\"toolCallId\":\"w1\",\"kind\":\"edit\"}"),
     "announced");
  unasked_requested(u, "claude", "s", "w1");
  ok(!feed(u, "claude", "s",
           "{\"toolCallId\":\"w1\",\"status\":\"completed\"}"),
     "Claude: asked then completed is not reported");
  // Gemini: the request is the first sight of the id.
  unasked_requested(u, "gemini", "s", "write_file__call_1");
  ok(!feed(u, "gemini", "s",
           "{\"toolCallId\":\"write_file__call_1\",\"status\":\"completed\"}"),
     "Gemini: request first, then completed: not reported");
  // codex: in_progress before its request.
  ok(!feed(u, "codex", "s",
           "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"call_patch_2\","
           "\"kind\":\"edit\",\"status\":\"in_progress\"}"),
     "codex: in_progress alone is not reported at once");
  unasked_requested(u, "codex", "s", "call_patch_2");
  ok(!feed(u, "codex", "s",
           "{\"toolCallId\":\"call_patch_2\",\"status\":\"completed\"}"),
     "codex: then asked and completed: not reported");
  ok(!unasked_turn_end(u, "codex", "s"), "nothing at the turn end");
  // A rejected request: failed after the request.
  ok(!feed(u, "claude", "s",
           "{\"toolCallId\":\"b1\",\"kind\":\"execute\",\"status\":"
           "\"pending\"}"),
     "announced command");
  unasked_requested(u, "claude", "s", "b1");
  ok(!feed(u, "claude", "s", "{\"toolCallId\":\"b1\",\"status\":\"failed\"}"),
     "asked and failed: not reported");
  size_t bytes;
  unasked_count(u, &bytes);
  is_size(bytes, 0, "nothing is kept for asked or finished calls");
  unasked_free(u);
}

static void test_statuses(void) {
  struct unasked *u = unasked_new(0, 0, 0);
  ok(!feed(u, "a", "s",
           "{\"toolCallId\":\"f1\",\"kind\":\"execute\",\"status\":"
           "\"pending\"}"),
     "pending");
  ok(!feed(u, "a", "s", "{\"toolCallId\":\"f1\",\"status\":\"failed\"}"),
     "failed without running is not reported (it never acted)");
  ok(!feed(u, "a", "s",
           "{\"toolCallId\":\"f2\",\"kind\":\"execute\",\"status\":"
           "\"in_progress\"}"),
     "running");
  json_t *r =
      feed(u, "a", "s", "{\"toolCallId\":\"f2\",\"status\":\"failed\"}");
  ok(r != NULL, "failed after in_progress is reported (it ran)");
  json_decref(r);
  static const char *const kinds[] = {"read", "search", "think", "other",
                                      "switch_mode"};
  for (size_t i = 0; i < 5; i++) {
    char text[200];
    snprintf(text, sizeof(text),
             "{\"toolCallId\":\"k%zu\",\"kind\":\"%s\",\"status\":"
             "\"completed\",\"content\":[{\"type\":\"content\"}]}",
             i, kinds[i]);
    r = feed(u, "a", "s", text);
    ok(!r, "kind %s is not governed: not reported", kinds[i]);
    json_decref(r);
  }
  r = feed(u, "a", "s", "{\"toolCallId\":\"nokind\",\"status\":\"completed\"}");
  ok(!r, "no kind at all (ACP's default: other): not reported");
  json_decref(r);
  static const char *const gov[] = {"edit", "delete", "move", "execute",
                                    "fetch"};
  for (size_t i = 0; i < 5; i++) {
    char text[200];
    snprintf(text, sizeof(text),
             "{\"toolCallId\":\"g%zu\",\"kind\":\"%s\",\"status\":"
             "\"completed\"}",
             i, gov[i]);
    r = feed(u, "a", "s", text);
    ok(r != NULL, "kind %s completed unasked: reported", gov[i]);
    json_decref(r);
  }
  // The kind arrives after the first update.
  ok(!feed(u, "a", "s",
           "{\"toolCallId\":\"late\",\"status\":\"pending\",\"rawInput\":{"
           "\"command\":\"touch x\"}}"),
     "no kind yet");
  r = feed(u, "a", "s",
           "{\"toolCallId\":\"late\",\"kind\":\"execute\",\"status\":"
           "\"completed\"}");
  ok(r != NULL, "a kind given later still counts");
  is_str(json_string_value(json_object_get(
             json_object_get(json_object_get(r, "toolCall"), "rawInput"),
             "command")),
         "touch x", "and what came before it is kept");
  json_decref(r);
  // Updates without a toolCallId, agent or session are ignored.
  ok(!feed(u, "a", "s", "{\"kind\":\"edit\",\"status\":\"completed\"}"),
     "no toolCallId: ignored");
  json_t *j = upd("{\"toolCallId\":\"x\",\"kind\":\"edit\",\"status\":"
                  "\"completed\"}");
  ok(!unasked_update(u, NULL, "s", j) && !unasked_update(u, "a", NULL, j),
     "no agent or session: ignored");
  json_decref(j);
  unasked_free(u);
}

static void test_turn_end_and_forget(void) {
  struct unasked *u = unasked_new(0, 0, 0);
  feed(u, "a", "s1",
       "{\"toolCallId\":\"r1\",\"kind\":\"execute\",\"title\":\"touch x\","
       "\"status\":\"pending\"}");
  feed(u, "a", "s1", "{\"toolCallId\":\"r1\",\"status\":\"in_progress\"}");
  feed(u, "a", "s1",
       "{\"toolCallId\":\"p1\",\"kind\":\"edit\",\"status\":\"pending\"}");
  feed(u, "a", "s1",
       "{\"toolCallId\":\"r2\",\"kind\":\"edit\",\"status\":\"in_progress\"}");
  unasked_requested(u, "a", "s1", "r2");
  feed(u, "a", "s2",
       "{\"toolCallId\":\"r3\",\"kind\":\"edit\",\"status\":\"in_progress\"}");
  json_t *r = unasked_turn_end(u, "a", "s1");
  is_size(json_array_size(r), 1,
          "turn end: only the unasked call that was running");
  is_str(tc_str(json_array_get(r, 0), "toolCallId"), "r1", "r1");
  is_str(tc_str(json_array_get(r, 0), "kind"), "execute",
         "with the kind of its first update");
  json_decref(r);
  ok(!unasked_turn_end(u, "a", "s1"), "reported once");
  ok(!feed(u, "a", "s1", "{\"toolCallId\":\"r1\",\"status\":\"completed\"}"),
     "a later completion of a reported call is not reported again");
  ok(!unasked_turn_end(u, "a", "nosuch"), "an unknown session: nothing");
  feed(u, "b", "s1",
       "{\"toolCallId\":\"r4\",\"kind\":\"edit\",\"status\":\"in_progress\"}");
  r = unasked_forget(u, "a");
  is_size(json_array_size(r), 1, "forget reports what was still running");
  is_str(tc_str(json_array_get(r, 0), "toolCallId"), "r3", "r3 of s2");
  json_decref(r);
  ok(!unasked_turn_end(u, "a", "s2"), "the agent's sessions are forgotten");
  is_size(unasked_count(u, NULL), 1, "the other agent's call stays");
  r = unasked_turn_end(u, "b", "s1");
  is_size(json_array_size(r), 1, "same session id, other agent: its own table");
  json_decref(r);
  unasked_free(u);
}

static void test_bounds(void) {
  struct unasked *u = unasked_new(2, 4, 1000);
  unasked_requested(u, "a", "s", "c0");
  for (int i = 1; i <= 4; i++) {
    char text[120];
    snprintf(text, sizeof(text),
             "{\"toolCallId\":\"c%d\",\"kind\":\"edit\",\"status\":"
             "\"pending\"}",
             i);
    feed(u, "a", "s", text);
  }
  is_size(unasked_count(u, NULL), 4, "calls per session are capped");
  json_t *r =
      feed(u, "a", "s", "{\"toolCallId\":\"c1\",\"status\":\"completed\"}");
  ok(r != NULL, "a kept call is still tracked");
  json_decref(r);
  r = feed(u, "a", "s",
           "{\"toolCallId\":\"c0\",\"kind\":\"edit\",\"status\":"
           "\"completed\"}");
  ok(r != NULL, "the oldest was forgotten first (its request with it)");
  json_decref(r);

  char big[3000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  char text[3200];
  snprintf(text, sizeof(text),
           "{\"toolCallId\":\"big\",\"kind\":\"edit\",\"status\":\"pending\","
           "\"title\":\"t\",\"rawInput\":{\"content\":\"%s\"}}",
           big);
  feed(u, "a", "s", text);
  size_t bytes;
  unasked_count(u, &bytes);
  ok(bytes <= 1000, "payload bytes stay within the bound (%zu)", bytes);
  r = feed(u, "a", "s", "{\"toolCallId\":\"big\",\"status\":\"completed\"}");
  is_str(tc_str(r, "kind"), "edit",
         "a call that lost its payload is still reported, with its kind");
  ok(!json_object_get(json_object_get(r, "toolCall"), "rawInput"),
     "without the payload it lost");
  json_decref(r);

  feed(u, "a", "s2",
       "{\"toolCallId\":\"x\",\"kind\":\"edit\",\"status\":\"in_progress\"}");
  feed(u, "a", "s3",
       "{\"toolCallId\":\"y\",\"kind\":\"edit\",\"status\":\"in_progress\"}");
  ok(!unasked_turn_end(u, "a", "s"),
     "sessions are capped: the least recently used is forgotten");
  r = unasked_turn_end(u, "a", "s2");
  is_size(json_array_size(r), 1, "the newer ones stay");
  json_decref(r);
  unasked_free(u);

  // Thousands of calls: bounded, and none reported twice.
  u = unasked_new(0, 0, 0);
  size_t reported = 0;
  for (int i = 0; i < 10000; i++) {
    char t1[120];
    snprintf(t1, sizeof(t1),
             "{\"toolCallId\":\"n%d\",\"kind\":\"read\",\"status\":"
             "\"pending\"}",
             i);
    r = feed(u, "a", "s", t1);
    reported += r != NULL;
    json_decref(r);
  }
  is_size(reported, 0, "10000 reads: nothing reported");
  is_size(unasked_count(u, NULL), UNASKED_MAX_CALLS,
          "held calls stop at the default bound");
  unasked_free(u);

  // 5,000 requests through a ring of 64: each of the last 64 is still
  // known as requested (its update reports nothing), whatever the ids
  // forgotten before moved in the index; one forgotten is new again.
  u = unasked_new(1, 64, 0);
  char id[40], t2[200];
  for (int i = 0; i < 5000; i++) {
    snprintf(id, sizeof(id), "call-%d", i * 7919 % 100003);
    unasked_requested(u, "a", "s", id);
  }
  size_t known = 0;
  for (int i = 4999; i >= 5000 - 64; i--) {
    snprintf(t2, sizeof(t2),
             "{\"toolCallId\":\"call-%d\",\"kind\":\"edit\",\"status\":"
             "\"completed\"}",
             i * 7919 % 100003);
    r = feed(u, "a", "s", t2);
    known += r == NULL;
    json_decref(r);
  }
  is_size(known, 64, "the last 64 requested calls are all still known");
  is_size(unasked_count(u, NULL), 64, "and no other was made");
  snprintf(t2, sizeof(t2),
           "{\"toolCallId\":\"call-%d\",\"kind\":\"edit\",\"status\":"
           "\"completed\"}",
           4000 * 7919 % 100003);
  r = feed(u, "a", "s", t2);
  ok(r != NULL, "a call forgotten long ago acts unasked");
  json_decref(r);
  unasked_free(u);

  // The same with ids of 30 to 79 bytes (kept in the call up to 39, else
  // allocated): the last 64 known, and an unasked call reports its id.
  u = unasked_new(1, 64, 0);
  char lid[100], t3[300];
  for (int i = 0; i < 3000; i++) {
    snprintf(lid, sizeof(lid), "call-%d-%.*s", i, 30 + i % 50,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
             "xxxxxxxxxxxxxxxxxxxxxxx");
    lid[30 + i % 50] = '\0';
    unasked_requested(u, "a", "s", lid);
  }
  known = 0;
  for (int i = 2999; i >= 3000 - 64; i--) {
    snprintf(lid, sizeof(lid), "call-%d-%.*s", i, 30 + i % 50,
             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
             "xxxxxxxxxxxxxxxxxxxxxxx");
    lid[30 + i % 50] = '\0';
    snprintf(t3, sizeof(t3),
             "{\"toolCallId\":\"%s\",\"kind\":\"edit\",\"status\":"
             "\"completed\"}",
             lid);
    r = feed(u, "a", "s", t3);
    known += r == NULL;
    json_decref(r);
  }
  is_size(known, 64, "ids of every length: the last 64 requested are known");
  int bad = 0;
  for (int n = 30; n < 80; n++) {
    snprintf(lid, sizeof(lid), "new-%.*s", n - 4,
             "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
             "yyyyyyyyyyyyyyyyyyyyyyy");
    snprintf(t3, sizeof(t3),
             "{\"toolCallId\":\"%s\",\"kind\":\"edit\",\"status\":"
             "\"completed\"}",
             lid);
    r = feed(u, "a", "s", t3);
    const char *got = json_string_value(
        json_object_get(json_object_get(r, "toolCall"), "toolCallId"));
    bad += !got || strcmp(got, lid) != 0;
    json_decref(r);
  }
  is_int(bad, 0, "an unasked call of each id length reports its own id");
  unasked_free(u);
}

static void test_history(void) {
  struct unasked *u = unasked_new(0, 0, 0);
  unasked_loading(u, "a", "old", 1);
  ok(!feed(u, "a", "old",
           "{\"sessionUpdate\":\"tool_call\",\"toolCallId\":\"h1\","
           "\"kind\":\"edit\",\"status\":\"completed\"}"),
     "a completed edit replayed by session/load is history");
  ok(!feed(u, "a", "old",
           "{\"toolCallId\":\"h2\",\"kind\":\"execute\",\"status\":"
           "\"in_progress\"}"),
     "so is a running one");
  unasked_loading(u, "a", "old", 0);
  ok(!unasked_turn_end(u, "a", "old"), "history is not reported at a turn end");
  ok(!feed(u, "a", "old", "{\"toolCallId\":\"h1\",\"status\":\"completed\"}"),
     "nor when it is sent again");
  json_t *r = feed(u, "a", "old",
                   "{\"toolCallId\":\"n1\",\"kind\":\"edit\",\"status\":"
                   "\"completed\"}");
  ok(r != NULL, "once resumed, the session is watched like a new one");
  json_decref(r);
  unasked_loading(u, "a", "never", 0);
  is_size(unasked_count(u, NULL), 3,
          "ending a load that never began adds nothing");
  unasked_free(u);
}

static void test_is_tool_update(void) {
  static const char *const yes[] = {"tool_call", "tool_call_update"};
  static const char *const no[] = {"agent_message_chunk", "tool_call_x",
                                   "tool_callupdate", "plan", "tool"};
  for (size_t i = 0; i < 2; i++) {
    json_t *j = json_pack("{s:s}", "sessionUpdate", yes[i]);
    ok(unasked_is_tool_update(j), "%s is a tool update", yes[i]);
    json_decref(j);
  }
  for (size_t i = 0; i < 5; i++) {
    json_t *j = json_pack("{s:s}", "sessionUpdate", no[i]);
    ok(!unasked_is_tool_update(j), "%s is not", no[i]);
    json_decref(j);
  }
  ok(!unasked_is_tool_update(NULL), "NULL is not");
}

int main(void) {
  test_claude_direct_write();
  test_asked_flows();
  test_statuses();
  test_turn_end_and_forget();
  test_bounds();
  test_history();
  test_is_tool_update();
  return done_testing();
}
