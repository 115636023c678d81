#pragma once
// The settings module's internals, shared by its files (not a public API):
//   settings.c       the public API: pooling the sources, trust, editing
//   settings_read.c  reading and validating one source, reading a JSON
//                    object file to edit
//   trust.c          the trust store (trust.h), a JSON object file too

#include "settings.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

// How a file is read. setup() options have the shape of the broker's files.
enum src_kind { SRC_ACP, SRC_CLAUDE, SRC_GEMINI };

#define MODE_UNSET (-1)

// One source, read and validated. Its index in the sources is its
// precedence for scalars: a later source wins.
struct src {
  char *label;     // absolute path, or "setup"
  const char *rel; // project files: the path under the root; NULL otherwise
  enum src_kind kind;
  json_t *rules[3]; // valid rule texts per enum policy_list (arrays)
  int mode;         // MODE_UNSET or POLICY_MODE_{DEFAULT,ACCEPT_EDITS,PLAN}
  int yolo;         // -1: no opinion, 0: "yolo": false, 1: a yolo request
  bool veto;        // security.disableYoloMode: true
  json_t *agents;   // {"name": bool}: setup and the user file only
  // It exists but cannot be used whole (unreadable, not JSON, a key of the
  // wrong type): only its restrictive content that could be read counts,
  // and the settings fail closed. error is its one error (owned).
  bool broken;
  char *error;
};

// Appends a formatted line to the string vector *v of *n entries.
void settings_push(char ***v, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
// Reads the file src->label (of src->kind) into src. False when it does
// not exist. A file that cannot be read or parsed, or has a key of the
// wrong type, is broken (one error in s->errors and src->error); what
// could be read of it is in src. Warnings go to s.
bool settings_src_file(struct settings *s, struct src *src);
// Reads setup() options into src; malformed options are broken as a file
// is (true either way).
bool settings_src_setup(struct settings *s, struct src *src,
                        const json_t *setup);
// Frees what src owns.
void settings_src_free(struct src *src);

// Reads the JSON object in path to edit and write back (settings files,
// the trust store), as settings_slurp reads but with a limit of max bytes:
// a new object, empty when there is no such file or it is blank. NULL with
// a reason in err when it cannot be read (broken, too large), is not JSON
// (file:line:col) or not an object: such a file is never overwritten.
json_t *settings_read_object(const char *path, size_t max, char *err,
                             size_t errlen);
// Replaces path (atomically, creating its directory) with doc dumped with
// flags and a newline; a new file gets mode. Returns 0, or -1 with err.
int settings_write_object(const char *path, const json_t *doc, size_t flags,
                          int mode, char *err, size_t errlen);
