#pragma once
// The permission gate: what the broker asks before it asks the person.
//
// For each request it loads the project's settings (settings.h), applies
// the runtime state the person set in this Neovim (:AcpYolo, :AcpMode,
// rules remembered for a session, per-agent yolo) and runs the policy. It
// also carries out the commands that change that state. It never talks to
// Neovim or the agent itself: the broker does.

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

struct gate;

struct gate_verdict {
  // ALLOW or DENY: answer the agent with option_id now (DENY with a NULL
  // option_id means the outcome `cancelled`); ASK: ask the person.
  enum policy_decision decision;
  const char *option_id; // borrowed from the request's options
  // Owned: {root, agent, session, toolCallId, kind, title, command, paths,
  // decision, by, reason, rule, source} and, for ASK, narrow and broad; for the
  // events, the prompt and the audit log.
  json_t *info;
};

// Creates a gate with no setup() options.
struct gate *gate_new(void);
// Frees it.
void gate_free(struct gate *g);
// Starts an epoch (a number > 0, new each time): the settings files of a
// project are looked at (stat) at most once per epoch, and decisions in
// the same epoch share what was found. The broker starts one at most
// every millisecond, and at once after anything it sees change files or
// settings (broker.c gate_fresh), so a burst of requests costs one look.
// With no epoch (0, the default) the files are looked at every time.
void gate_epoch(struct gate *g, uint64_t epoch);
// Replaces the setup() options ({permissions, yolo, agents}); stolen.
void gate_configure(struct gate *g, json_t *setup);
// Decides a session/request_permission (params borrowed) of agent's
// session running in cwd.
void gate_decide(struct gate *g, const char *agent, const char *session,
                 const char *cwd, json_t *params, struct gate_verdict *v);
// Records the narrow rules of an answered prompt (info->narrow; broad:
// info->broad, the broader alternative) for scope "session" (this session
// only), "project" (.acp/settings.json) or trusts the agent ("agent":
// per-agent yolo in the user settings). Returns 0, or -1 with the reason
// in err.
int gate_remember(struct gate *g, const char *scope, bool broad,
                  const char *agent, const char *session, const char *cwd,
                  const json_t *info, char *err, size_t errlen);
// Adds a rule (scope "session", "project" or "user"; list "allow", "ask",
// "deny"); session scope needs the agent's current session. On success
// returns 0 and *file names where it went ("session" for memory).
int gate_add_rule(struct gate *g, const char *scope, const char *list,
                  const char *rule, const char *agent, const char *session,
                  const char *cwd, char *file, size_t filelen, char *err,
                  size_t errlen);
// :AcpYolo: action "on", "off", "toggle" or "status" for the project of
// cwd; "off" also clears agent's persisted yolo. Returns -1 with the
// reason when "on" is refused: the vetoing file, or a settings file that
// cannot be used (the project fails closed; its error names it).
int gate_yolo(struct gate *g, const char *cwd, const char *action,
              const char *agent, char *err, size_t errlen);
// :AcpMode: sets the runtime policy mode of the project (NULL: no change).
// acceptEdits and yolo are refused (-1, the broken file in err) while a
// settings file of the project cannot be used; a mode set before stays
// suspended until it is fixed.
int gate_mode(struct gate *g, const char *cwd, const char *mode, char *err,
              size_t errlen);
// Trusts the project's permissive content; *enabled (new) is what it
// enables. Returns -1 with the reason on failure (also while a settings
// file cannot be used).
int gate_trust(struct gate *g, const char *cwd, json_t **enabled, char *err,
               size_t errlen);
// The `settings` event data for the project of cwd, as agent sees it.
json_t *gate_settings(struct gate *g, const char *cwd, const char *agent);
// The `rules` event data (settings, runtime state, session memory).
json_t *gate_rules(struct gate *g, const char *cwd, const char *agent);
// Forgets the session memory of an agent (it exited).
void gate_forget(struct gate *g, const char *agent);
