// base/signame: the one table of signal names (term.c and the demo agent).

#include "base/signame.h"

#include <signal.h>

#include "check.h"

int main(void) {
  is_str(signame(SIGKILL), "SIGKILL", "SIGKILL");
  is_str(signame(SIGTERM), "SIGTERM", "SIGTERM");
  is_str(signame(SIGINT), "SIGINT", "SIGINT");
  is_str(signame(SIGSEGV), "SIGSEGV", "SIGSEGV");
  is_str(signame(SIGBUS), "SIGBUS", "SIGBUS");
  ok(signame(0) == NULL, "0: no name");
  ok(signame(SIGUSR1) == NULL, "a signal outside the table: NULL");
  ok(signame(-1) == NULL && signame(100000) == NULL, "out of range: NULL");
  return done_testing();
}
