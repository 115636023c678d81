#pragma once
// Signal names as ACP clients report a command's end ("SIGKILL"). Pure.

// The name of sig ("SIGTERM"), or NULL for a signal outside the table
// (the caller prints its number its own way).
const char *signame(int sig);
