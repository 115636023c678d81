#pragma once
// The broker: Neovim on one side, agent connections on the other.
//
// It handles the methods Lua calls (doc/protocol.md), owns the table of
// pending permission requests, sends events to Lua, and shuts everything
// down in order when Neovim goes away or a signal arrives.

#include <uv.h>

struct broker;

// Opens the Neovim channel on stdin/stdout and announces itself. Returns
// NULL with a reason in err.
struct broker *broker_start(uv_loop_t *loop, char *err, size_t errlen);
// Frees what is left once the loop has stopped.
void broker_free(struct broker *b);
