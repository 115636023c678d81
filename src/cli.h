#pragma once
// The broker's subcommands (design §7): decide, rules and trust. They read
// the same files, in the same way, as a live session; HOME and the XDG
// variables decide where the user files are.

#include <stdbool.h>

// True when name is a subcommand cli_main handles.
bool cli_is_command(const char *name);
// Runs argv[1] with its options; returns the exit status: 0, 1 when an
// action failed (trust could not be written), 2 for a usage error or an
// unreadable or invalid request.
int cli_main(int argc, char **argv);
