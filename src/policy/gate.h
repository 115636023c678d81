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

struct policy_request;

// What the gate decided, and why. The strings are NULL where the JSON of
// gate_verdict_info leaves a key out (absent, or not UTF-8); they are
// borrowed from the request's params, the gate, or the verdict itself,
// and valid until gate_verdict_clear (root and the atoms: until the next
// call of the gate).
struct gate_verdict {
  // ALLOW or DENY: answer the agent with option_id now (DENY with a NULL
  // option_id means the outcome `cancelled`); ASK: ask the person.
  enum policy_decision decision;
  const char *option_id; // borrowed from the request's options
  const char *root, *agent, *session, *tool_call_id, *kind, *title;
  const char *command;                // the shell command the policy analysed
  const char *decision_name;          // "allow", "ask", "deny"
  const char *by;                     // "rule", ..., "person" for ASK
  const char *reason, *rule, *source; // rule, source: "" when none
  const char **paths;                 // the request's paths (UTF-8 only)
  size_t npaths;
  // ASK only (else NULL, 0): the rules the prompt offers to remember (the
  // narrow set and the broader one; UTF-8 only, in order; in sets, owned),
  // and the options :AcpAllow and :AcpDeny answer with (policy_pick_option;
  // NULL when none, or not UTF-8; borrowed from the request's options).
  char **narrow, **broad;
  size_t nnarrow, nbroad;
  struct policy_sets *sets;
  const char *allow_option, *reject_option;
  // {root, agent, session, toolCallId, kind, title, command, atoms, paths,
  // decision, by, reason, rule, source} and, for ASK, narrow, broad,
  // allowOption and rejectOption: built on demand by gate_verdict_info
  // (the unasked watch, the fs/terminal services, the prompts of those
  // services); the broker's prompt for an agent's request is packed from
  // the struct (broker/prompt.h). Owned (gate_verdict_clear frees it).
  json_t *info;
  // The gate's: the request and the policy that judged it.
  struct policy_request *req;
  const struct policy *policy;
  json_t *tc; // params.toolCall (borrowed)
  // The policy's result, decided in place: reason, rule and source above
  // are its texts when they are UTF-8.
  struct policy_result res;
  // paths, when the request's fit (else a malloc'd array).
  const char *path_buf[8];
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
// $HOME and the project root of a cwd are also read once per epoch.
// With no epoch (0, the default) the files are looked at every time.
void gate_epoch(struct gate *g, uint64_t epoch);
// Replaces the setup() options ({permissions, yolo, agents}); stolen.
void gate_configure(struct gate *g, json_t *setup);
// Decides a session/request_permission (params borrowed: they must outlive
// v) of agent's session running in cwd. Clear v with gate_verdict_clear.
void gate_decide(struct gate *g, const char *agent, const char *session,
                 const char *cwd, json_t *params, struct gate_verdict *v);
// The options of a request read into a flat view (acp/reqview.h): n
// optionIds and their kinds, strings.
struct gate_options {
  const char *const *ids, *const *kinds;
  size_t n;
};
// gate_decide for a request read into a flat view: tc is params.toolCall
// (borrowed, it must outlive v), options its options. The same verdict.
void gate_decide_tc(struct gate *g, const char *agent, const char *session,
                    const char *cwd, json_t *tc,
                    const struct gate_options *options, struct gate_verdict *v);
// v->info, built on first use (before the next call of the gate).
json_t *gate_verdict_info(struct gate_verdict *v);
// Atom i of the verdict's request (i < gate_verdict_natoms), as info's
// `atoms` lists it (before the next call of the gate).
size_t gate_verdict_natoms(const struct gate_verdict *v);
void gate_verdict_atom(const struct gate_verdict *v, size_t i,
                       struct policy_atom_view *out);
// Builds v->info and frees the rest: afterwards only decision, option_id
// and info are set.
void gate_verdict_to_info(struct gate_verdict *v);
// Frees what the verdict holds (info too, unless taken: set it NULL).
void gate_verdict_clear(struct gate_verdict *v);
// Records the rules of an answered prompt (n of them: its narrow set, or
// with broad its broader alternative, which only picks the error when
// there are none) for scope "session" (this session only), "project"
// (.acp/settings.json) or trusts the agent ("agent": per-agent yolo in the
// user settings; no rules needed). Returns 0, or -1 with the reason in
// err.
int gate_remember(struct gate *g, const char *scope, bool broad,
                  const char *agent, const char *session, const char *cwd,
                  const char *const *rules, size_t n, char *err, size_t errlen);
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
