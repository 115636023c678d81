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

// Packs the data of the `decided` event of v (doc/protocol.md) as one
// msgpack map: agent, session, toolCallId, kind, title, command, atoms,
// paths (only when with_paths), decision, by, reason, rule, source,
// optionId, snapshots (when not NULL). Left out to keep the event small
// (Neovim decodes every field of thousands of decisions a second): keys
// with no value, an empty rule or source, a NULL optionId, and atoms that
// are one `command` atom whose text is the command (Lua rebuilds them).
void verdict_pack_decided(msgpack_packer *pk, const struct gate_verdict *v,
                          bool with_paths, const json_t *snapshots);
