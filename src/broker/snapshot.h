#pragma once
// The files a call the policy allows by itself may change, read before the
// broker answers it (the turn ledger, doc/acp.txt `acp-review`).
//
// A call allowed by a rule, a mode or yolo reaches Neovim only after the
// agent has its answer, and a fast command (`sed -i`, a redirection) or a
// direct write can change a file before Lua could read it. So the broker
// reads each file such a call names (its `paths`: locations, diffs,
// rawInput paths, a command's operands) the first time the turn names it,
// and the `decided` event carries what it read.
//
// Only during a turn (turn_start .. turn_end of that session): outside one
// the ledger keeps nothing. Bounded: bytes per file, bytes and files per
// turn, turns tracked at once (the oldest forgotten first). Reads files,
// never blocks on one (a FIFO or device is not opened for reading).

#include <jansson.h>
#include <stddef.h>

#define SNAPSHOT_FILE_MAX ((size_t)4 << 20)  // bytes of one file
#define SNAPSHOT_TURN_MAX ((size_t)32 << 20) // bytes of a turn's files
#define SNAPSHOT_FILES_MAX 200               // paths per turn
#define SNAPSHOT_TURNS_MAX 64                // turns tracked at once

struct snapshot_limits {
  size_t file_bytes, turn_bytes, files, turns; // 0: the default above
};

struct snapshots;

// A tracker with these bounds (NULL: the defaults).
struct snapshots *snapshots_new(const struct snapshot_limits *lim);
void snapshots_free(struct snapshots *s);

// A turn of session sid of agent starts / ends (its set of paths seen is
// cleared either way).
void snapshots_turn_start(struct snapshots *s, const char *agent,
                          const char *sid);
void snapshots_turn_end(struct snapshots *s, const char *agent,
                        const char *sid);

// Reads the files of paths (an array of absolute paths, borrowed) that
// the live turn of sid has not seen yet. Returns a new object
// {path -> snapshot}, or NULL when there is nothing to tell (no live turn,
// no path new to it). A snapshot is {text, stat} (the file's bytes),
// {missing: true} (no such file), or {skipped, stat} (not read:
// `skipped` says why, "too large" or "the turn's snapshots are full"; stat
// lets Lua see that it changed). stat is "size:mtime_sec.mtime_nsec:inode",
// as the ledger's own; each also has `at`, uv_hrtime() when it was read
// (Lua prefers it to a read of its own made later). Paths that are not regular
// files (a directory), that cannot be read, or come after the turn's file bound
// are left out.
json_t *snapshots_take(struct snapshots *s, const char *agent, const char *sid,
                       const json_t *paths);
// The same for n paths given as strings.
json_t *snapshots_take_list(struct snapshots *s, const char *agent,
                            const char *sid, const char *const *paths,
                            size_t n);
