#pragma once
// The atoms of one session/request_permission (permission-rules §5.5):
// which tool it is (Claude adapter, claude-code-acp 0.16, Gemini CLI,
// codex-acp, a generic agent, MCP tools), its shell command split by the
// shell analyser, its paths normalised and resolved, its URL hosts.
//
// Every field that could act is read, whatever the kind and title say
// (doc/threat-model.md): rawInput.command and a title showing another
// command, new content or a destination (an edit), the paths an MCP tool
// names (atoms its own rule carries), the URLs (read as src/policy/url.c reads
// them). Reads the filesystem only to resolve symlinks (path_resolve).
// What cannot be understood makes the request opaque; it never fails.

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/shell/shell.h"

#define REQUEST_ATOMS_MAX 256     // more atoms: opaque
#define REQUEST_PATHS_MAX 64      // more paths in one tool call: opaque
#define REQUEST_URLS_MAX 16       // more URLs in one fetch: opaque
#define REQUEST_COMMAND_MAX 65536 // a longer command: opaque

enum request_class {
  REQUEST_BASH,   // a simple shell command
  REQUEST_READ,   // a file read (a tool, a `< f` redirect, a cat operand)
  REQUEST_EDIT,   // a file write (a tool, a `> f` redirect, an rm operand)
  REQUEST_FETCH,  // a URL host
  REQUEST_SEARCH, // a web search
  REQUEST_MCP,    // an MCP tool
  REQUEST_KIND,   // anything else, known only by its ACP kind
};

enum request_where {
  REQUEST_KNOWN,   // lex and res are set
  REQUEST_GLOB,    // lex is an absolute glob (a shell pattern, no variable)
  REQUEST_UNKNOWN, // cannot be known (a variable, a `cd` before it, ...)
};

// An operand of rm, rmdir, mv, chmod -R, chown -R, chgrp -R or of find
// with -delete/-exec, for the circuit breaker.
struct request_target {
  enum request_where where;
  char *lex, *res; // as in request_atom
  char *text;      // as written
};

struct request_atom {
  enum request_class cls;
  const char *kind; // its ACP kind for Kind(...) rules (borrowed)
  bool deny_only;   // only deny and ask rules look at it
  // What the tool does there is a guess (a path an MCP tool or a tool of
  // no file kind names, taken as an edit): plan mode asks, not denies.
  bool guessed;
  const struct shell_atom *cmd; // BASH (borrowed from the analysis)
  bool read_only;               // BASH: a command plan mode lets run
  enum request_where where;     // READ, EDIT
  char *lex;        // READ, EDIT: the normalised path (GLOB: the pattern)
  char *res;        // READ, EDIT: lex with symlinks resolved
  char *text;       // READ, EDIT: the path as written
  char *name;       // MCP: the tool name; FETCH: the host; KIND: the tool
  bool gemini_name; // MCP: name is Gemini's mcp_<server>_<tool>
  struct request_target *targets; // BASH
  size_t ntargets;
};

struct request {
  char *kind;    // the ACP kind, as sent or inferred ("other" if neither)
  char *tool;    // the tool's name when the request tells it, or NULL
  char *command; // the shell script, or NULL
  char *cwd;     // the session cwd (NULL when not absolute)
  bool opaque;   // not understood: never allowed without asking
  char reason[192];
  // rawInput.command is a string or an array (the agent's own command,
  // not one read from a title or a Gemini tool's arguments).
  bool raw_command;
  // The analysis of command (shared with the cache, shcache.h), or NULL.
  const struct shell_result *sh;
  // A second command the request shows (a title that is not
  // rawInput.command): judged too.
  char *alt_command;
  const struct shell_result *alt_sh;
  struct request_atom *atoms;
  size_t natoms;
  // Every string and table above (atoms, targets, paths, names) lives in
  // these chunks of memory, freed together by request_clear: most requests
  // need one malloc. A request owns them: clear it once.
  struct request_chunk *chunks;
  size_t chunk_used;
  struct request_chunk *lent; // the caller's first chunk (request_init_in)
  // The toolCall's toolCallId, kind and title as sent (json_string_value of
  // each: NULL when absent or not a string), read in the walk that reads
  // the rest: they point into the caller's tree and live as long as it.
  const char *tc_id, *tc_kind, *tc_title;
  // (request.c's request_empty sets each field: one added here too)
};

// The first chunk's malloc size: small enough for glibc's per-thread cache
// (a larger block costs thousands of instructions in a busy heap); later
// chunks double.
#define REQUEST_CHUNK 1024

// Extracts the atoms of a session/request_permission params object; cwd is
// the session cwd, home expands `~`. Never fails.
void request_init(struct request *r, const json_t *params, const char *cwd,
                  const char *home);
// The same from params.toolCall alone (tc, or NULL when there is none):
// the request read into a flat view (acp/reqview.h) has no params tree.
void request_init_tc(struct request *r, const json_t *tc, const char *cwd,
                     const char *home);
// request_init_tc with the arena's first chunk in mem (n bytes, aligned
// for any type, the caller's until request_clear): a request that fits
// allocates nothing more. policy_request_new puts it after the request.
void request_init_in(struct request *r, const json_t *tc, const char *cwd,
                     const char *home, void *mem, size_t n);
// params.toolCall, or NULL.
const json_t *request_tool_call(const json_t *params);
// Frees what request_init allocated.
void request_clear(struct request *r);
