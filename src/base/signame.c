#include "signame.h"

#include <signal.h>
#include <stddef.h>

const char *signame(int sig) {
  static const struct {
    int sig;
    const char *name;
  } names[] = {{SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},
               {SIGABRT, "SIGABRT"}, {SIGKILL, "SIGKILL"}, {SIGSEGV, "SIGSEGV"},
               {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},
               {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},   {SIGILL, "SIGILL"}};
  for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
    if (names[i].sig == sig)
      return names[i].name;
  return NULL;
}
