// What an agent's line costs the broker on its way in: jsonrpc_parse (the
// text to a jansson tree, classified) and jsonrpc_msg_free, linked from
// build/libbroker.a.
//
//   bench_parse request|update [PASSES]
//
// request: the session/request_permission line of bench_agent (auto part);
// update:  a session/update line with a 1 KiB text chunk (stream part).
// Each pass parses 64 lines and then frees them, as the broker holds 64
// requests in flight. With BENCH_PARSE_CACHE=1 jansson allocates through
// mem_cache (as the broker does). Prints the lines parsed and the time per
// line; for instruction counts run it under callgrind with
// --toggle-collect=run_parse and take the difference of two PASSES counts.

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acp/jsonrpc.h"
#include "base/mem.h"
#include "codec/jsonfast.h"

#define INFLIGHT 64

static char line[4096];
static size_t line_len;

static void make_request(void) {
  line_len = (size_t)snprintf(
      line, sizeof(line),
      "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"session/"
      "request_permission\",\"params\":{\"sessionId\":\"%s\","
      "\"toolCall\":{\"toolCallId\":\"call-%ld\",\"title\":\"%s\","
      "\"kind\":\"execute\",\"rawInput\":{\"command\":\"%s\","
      "\"bench_t_ns\":%lld}},\"options\":["
      "{\"optionId\":\"allow\",\"name\":\"Allow\",\"kind\":"
      "\"allow_once\"},{\"optionId\":\"reject\",\"name\":\"Reject\","
      "\"kind\":\"reject_once\"}]}}",
      1234L, "sess-0123456789abcdef", 1234L, "git status --short",
      "git status --short", 1234567890123456789LL);
}

static void make_update(void) {
  static const char words[] = "the broker decides every permission request "
                              "while the agent streams its answer ";
  char text[2 * 1024 + 1];
  size_t n = 0;
  for (size_t i = 0; i < 1024; i++) {
    if (i % 80 == 79) {
      text[n++] = '\\';
      text[n++] = 'n';
    } else {
      text[n++] = words[i % (sizeof(words) - 1)];
    }
  }
  text[n] = '\0';
  line_len = (size_t)snprintf(
      line, sizeof(line),
      "{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":"
      "{\"sessionId\":\"%s\",\"update\":{\"sessionUpdate\":"
      "\"agent_message_chunk\",\"messageId\":\"m%d\",\"content\":"
      "{\"type\":\"text\",\"text\":\"%s\"}}}}",
      "sess-0123456789abcdef", 17, text);
}

// Not static, not inlined: callgrind's --toggle-collect names it.
void run_parse(long passes);
__attribute__((noinline)) void run_parse(long passes) {
  static struct jsonrpc_msg m[INFLIGHT];
  char err[200];
  for (long p = 0; p < passes; p++) {
    for (int i = 0; i < INFLIGHT; i++)
      if (jsonrpc_parse(line, line_len, &m[i], err, sizeof(err)) != 0) {
        fprintf(stderr, "bench_parse: %s\n", err);
        exit(1);
      }
    for (int i = 0; i < INFLIGHT; i++)
      jsonrpc_msg_free(&m[i]);
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "request") && strcmp(argv[1], "update"))) {
    fprintf(stderr, "usage: bench_parse request|update [PASSES]\n");
    return 2;
  }
  const char *c = getenv("BENCH_PARSE_CACHE");
  if (c && strcmp(c, "1") == 0)
    json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  if (argv[1][0] == 'r')
    make_request();
  else
    make_update();
  long passes = argc > 2 ? atol(argv[2]) : 2000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  run_parse(passes);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns =
      (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
  long lines = passes * INFLIGHT;
  printf("{\"lines\": %ld, \"bytes\": %zu, \"ns_per_line\": %.1f}\n", lines,
         line_len, ns / (double)lines);
  jsonfast_release();
  mem_cache_release();
  return 0;
}
