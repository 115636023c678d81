// acp-broker: started by Neovim (jobstart with rpc = true); speaks
// msgpack-RPC on stdio to Neovim and ACP to the agents it spawns.

#include <jansson.h>
#include <msgpack.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/log.h"
#include "base/mem.h"
#include "broker/broker.h"
#include "cli.h"
#include "policy/policy.h"

static const char usage[] =
    "usage: acp-broker [--version | --help]\n"
    "       acp-broker decide --cwd DIR [--session ID] --request FILE|-\n"
    "       acp-broker rules --cwd DIR\n"
    "       acp-broker trust --cwd DIR\n"
    "       acp-broker rule-check RULE\n"
    "\n"
    "acp-broker is the core of the acp Neovim plugin. Neovim starts it and\n"
    "talks to it over stdin/stdout (msgpack-RPC); it is not meant to be run\n"
    "by hand, except for its subcommands: decide evaluates one\n"
    "session/request_permission params object with the settings a session\n"
    "in DIR would have; rules shows the effective rules and where they come\n"
    "from; trust trusts DIR's current permissive settings; rule-check\n"
    "checks the syntax of one rule. See :help acp in Neovim.\n"
    "\n"
    "environment:\n"
    "  ACP_BROKER_LOG       log level: debug, info, warn, error, off\n"
    "  ACP_BROKER_LOG_FILE  log file (default "
    "$XDG_STATE_HOME/acp-broker/broker.log)\n";

static int run(void) {
  // A closed pipe must be an error return, not the end of the process.
  signal(SIGPIPE, SIG_IGN);
  // jansson's nodes come and go by the hundred per request: freed ones are
  // kept for the next (base/mem.h), up to 1 MiB.
  json_set_alloc_funcs(mem_cache_malloc, mem_cache_free);
  log_open(getenv("ACP_BROKER_LOG_FILE"),
           log_level_parse(getenv("ACP_BROKER_LOG")));
  uv_loop_t loop;
  uv_loop_init(&loop);
  char err[256];
  struct broker *b = broker_start(&loop, err, sizeof(err));
  if (!b) {
    fprintf(stderr, "acp-broker: %s\n", err);
    LOG_E("%s", err);
    uv_run(&loop, UV_RUN_DEFAULT); // let the handles close
    uv_loop_close(&loop);
    log_close();
    mem_cache_release();
    return 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  broker_free(b);
  if (uv_loop_close(&loop) != 0)
    LOG_W("handles still open at exit");
  LOG_I("exit");
  log_close();
  mem_cache_release();
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("acp-broker %s (libuv %s, jansson %s, msgpack-c %s)\n", ACP_VERSION,
           uv_version_string(), JANSSON_VERSION, msgpack_version());
    return 0;
  }
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || !strcmp(argv[1], "-h"))) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "rule-check") == 0) {
    char err[512];
    if (argc != 3) {
      fprintf(stderr, "usage: acp-broker rule-check RULE\n");
      return 2;
    }
    if (policy_rule_check(argv[2], err, sizeof(err)) != 0) {
      printf("%s\n", err);
      return 1;
    }
    printf("ok\n");
    return 0;
  }
  if (argc > 1 && argv[1][0] != '-')
    return cli_main(argc, argv);
  if (argc > 1) {
    fprintf(stderr, "acp-broker: unknown argument '%s'\n\n%s", argv[1], usage);
    return 2;
  }
  if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) {
    fputs("acp-broker: stdin and stdout are a terminal; Neovim starts this "
          "program.\n\n",
          stderr);
    fputs(usage, stderr);
    return 2;
  }
  return run();
}
