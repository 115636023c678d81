#pragma once
// What the broker makes of the gate's verdict (gate.h): the audit line's
// fields and the `decided` event, straight from the C struct (no JSON for
// a request decided without asking), and the same fields from the JSON
// verdict a prompt keeps (the pending entry). Pure.

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>

#include "audit.h"
#include "policy/gate.h"

// The audit entry of verdict v answered with option_id (NULL: cancelled),
// decided by `by` ("agent": the call acted unasked). Borrows from v.
void verdict_audit(const struct gate_verdict *v, const char *decision,
                   const char *by, const char *option_id, long long wait_ms,
                   struct audit_entry *a);
// The same from the verdict's JSON (gate_verdict_info). Borrows from info.
void verdict_audit_info(const json_t *info, const char *decision,
                        const char *by, const char *option_id,
                        long long wait_ms, struct audit_entry *a);

// The items of the `decided` event, by position (1-based, as Lua reads
// them; doc/protocol.md). The event is an array rather than a map: Neovim
// decodes thousands a second, and a key costs about as much as its value.
enum decided_item {
  DECIDED_AGENT = 1,
  DECIDED_SESSION,
  DECIDED_TOOL_CALL_ID,
  DECIDED_KIND,
  DECIDED_TITLE,
  DECIDED_COMMAND,
  DECIDED_DECISION,
  DECIDED_BY,
  DECIDED_OPTION_ID,
  DECIDED_REASON,
  DECIDED_RULE,
  DECIDED_SOURCE,
  DECIDED_ATOMS,
  DECIDED_PATHS,
  DECIDED_SNAPSHOTS,
};

// The words the `decided` event sends as a small integer n (the n-th word,
// from 1) in item DECIDED_KIND, DECIDED_DECISION or DECIDED_BY: a string
// costs Neovim a malloc, a copy and an interning per event, an integer
// nothing (lua/acp/decided.lua has the same lists). Any other word is sent
// as a string. Returns the word of n for item, or NULL (no such word, or an
// item without a list).
const char *verdict_decided_word(enum decided_item item, unsigned n);

// Packs the data of the `decided` event of v (doc/protocol.md) as one
// msgpack array in the order of enum decided_item. A string with no value
// or an empty one is nil, and the items after the last one present are
// left out: a NULL optionId, no rule and source, atoms that are one
// `command` atom whose text is the command (Lua rebuilds them), paths
// (only when with_paths, and nil when there are none), snapshots (when not
// NULL). A title that is the command is `true`. The kind, the decision and
// `by` are integers when verdict_decided_word has them. The atoms are flat:
// kind, text, inner (a boolean) for each.
void verdict_pack_decided(msgpack_packer *pk, const struct gate_verdict *v,
                          bool with_paths, const json_t *snapshots);
