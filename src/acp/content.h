#pragma once
// The content blocks of a prompt (ACP ContentBlock) that Lua sends after
// the text: checked, bounded and copied field by field (only the fields the
// protocol defines), and sent only when the agent's promptCapabilities
// allow their type. Pure: no I/O, no globals.

#include <jansson.h>
#include <stddef.h>

#define CONTENT_MAX_BLOCKS 64 // blocks in one prompt, besides its text
// Bytes of text in the blocks of one prompt (an agent's line limit is
// 32 MiB; an image is base64 in a JSON string).
#define CONTENT_MAX_BYTES ((size_t)16 * 1024 * 1024)

// What promptCapabilities offers beyond the baseline (text and
// resource_link, which every agent must accept).
enum content_cap {
  CONTENT_IMAGE = 1u,
  CONTENT_AUDIO = 2u,
  CONTENT_EMBEDDED = 4u, // embeddedContext: `resource` blocks
};

// The capabilities an initialize result's agentCapabilities offers for
// prompts (0 when it offers none or is not an object).
unsigned content_caps(const json_t *agent_capabilities);

// A new array of clean copies of blocks (a JSON array of ContentBlock
// objects), or NULL with the reason in err: blocks must be an array of at
// most CONTENT_MAX_BLOCKS known blocks with their required fields, of the
// right types, CONTENT_MAX_BYTES of strings at most, base64 where the
// protocol says so. Unknown fields are dropped; null optional fields too.
json_t *content_check(const json_t *blocks, char *err, size_t errlen);

// The capabilities checked blocks need (content_cap flags).
unsigned content_needs(const json_t *blocks);

// Names the protocol's flag for the first capability in caps ("image",
// "audio", "embeddedContext"), or "" when caps is 0.
const char *content_cap_name(unsigned caps);
