#pragma once
// The decision audit log: one JSON object per line per decision, whoever
// made it, in $XDG_STATE_HOME/acp-broker/audit.jsonl. Never file contents:
// only what identifies the tool call (kind, title, command, paths).

#include <jansson.h>

struct audit_entry {
  const char *root;             // project root
  const char *agent;            // agent name
  const char *session;          // ACP sessionId
  const char *tool_call_id;     // toolCall.toolCallId
  const char *kind;             // toolCall.kind, or NULL
  const char *title;            // toolCall.title, or NULL
  const char *command;          // the shell command, or NULL
  json_t *paths;                // borrowed array of strings, or NULL
  const char *const *path_list; // or these (when paths is NULL)
  size_t npaths;
  const char *decision;  // allow, ask, deny
  const char *by;        // rule, mode, yolo, memory, person, cancel, error
  const char *rule;      // the deciding rule, or NULL
  const char *source;    // its file, or NULL
  const char *outcome;   // selected, cancelled
  const char *option_id; // the optionId answered, NULL when cancelled
  long long wait_ms;     // how long the request waited for its answer
};

// Appends one line (the file is opened on first use, path NULL meaning the
// default place). Lines are gathered and written by audit_flush, or when
// 64 KiB are waiting. Returns 0, or -1 when the log cannot be written (also
// when the last flush failed): the caller tells the person (once);
// decisions go on regardless.
int audit_write(const char *path, const struct audit_entry *e);
// Writes the gathered lines (whole lines, in one write). Returns 0 or -1.
int audit_flush(void);
// Returns the path of the log ("" before the first write).
const char *audit_path(void);
// Closes the file.
void audit_close(void);
