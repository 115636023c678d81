// oracle-atoms: prints what the shell analyser makes of command lines, as
// JSON, for the bash oracle (tests/oracle/oracle.py).
//
//   oracle-atoms HOME            reads NUL-terminated command lines on stdin
//                                and prints one JSON object per line
//   oracle-atoms HOME COMMAND    prints the object for COMMAND
//
// The object: {"opaque": bool, "reason": str, "atoms": [{"kind":
// "cmd"|"read"|"edit", "deny_only": bool, "words": [{"text", "dynamic"}],
// "assign": [names], "unsafe_assign", "never_allow", "more_args", "path",
// "path_dynamic"}]}.

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/shell/shell.h"

enum { MAX_COMMAND = 1 << 20 };

// A JSON string of s; bytes that are not UTF-8 are read as Latin-1.
static json_t *str(const char *s) {
  json_t *j = json_string(s);
  if (j)
    return j;
  size_t n = strlen(s);
  char *t = malloc(2 * n + 1), *p = t;
  if (!t)
    return json_string("");
  for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
    if (*q < 0x80) {
      *p++ = (char)*q;
    } else {
      *p++ = (char)(0xc0 | (*q >> 6));
      *p++ = (char)(0x80 | (*q & 0x3f));
    }
  }
  *p = '\0';
  j = json_string(t);
  free(t);
  return j ? j : json_string("");
}

static json_t *atom_json(const struct shell_atom *a) {
  static const char *const kinds[] = {"cmd", "read", "edit"};
  json_t *o = json_object();
  json_object_set_new(o, "kind", json_string(kinds[a->kind]));
  json_object_set_new(o, "deny_only", json_boolean(a->deny_only));
  if (a->kind == SHELL_CMD) {
    json_t *ws = json_array();
    for (size_t i = 0; i < a->nwords; i++) {
      json_t *w = json_object();
      json_object_set_new(w, "text", str(a->words[i].text));
      json_object_set_new(w, "dynamic", json_boolean(a->words[i].dynamic));
      json_array_append_new(ws, w);
    }
    json_object_set_new(o, "words", ws);
    json_t *as = json_array();
    for (size_t i = 0; i < a->nassign; i++)
      json_array_append_new(as, str(a->assign[i]));
    json_object_set_new(o, "assign", as);
    json_object_set_new(o, "unsafe_assign", json_boolean(a->unsafe_assign));
    json_object_set_new(o, "never_allow", json_boolean(a->never_allow));
    json_object_set_new(o, "more_args", json_boolean(a->more_args));
  } else {
    json_object_set_new(o, "path", str(a->path));
    json_object_set_new(o, "path_dynamic", json_boolean(a->path_dynamic));
  }
  return o;
}

static int print_one(const char *cmd, const char *home) {
  struct shell_result r;
  shell_analyse(cmd, home, &r);
  json_t *o = json_object();
  json_object_set_new(o, "opaque", json_boolean(r.opaque));
  json_object_set_new(o, "reason", str(r.reason));
  json_t *as = json_array();
  for (size_t i = 0; i < r.natoms; i++)
    json_array_append_new(as, atom_json(&r.atoms[i]));
  json_object_set_new(o, "atoms", as);
  shell_result_free(&r);
  char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(o);
  if (!s)
    return 1;
  puts(s);
  free(s);
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 3)
    return print_one(argv[2], argv[1]);
  if (argc != 2) {
    fprintf(stderr, "usage: oracle-atoms HOME [COMMAND] (else NUL-separated "
                    "commands on stdin)\n");
    return 2;
  }
  char *buf = malloc(MAX_COMMAND + 1);
  if (!buf)
    return 1;
  size_t n = 0;
  int c, rc = 0;
  while ((c = getchar()) != EOF) {
    if (c != '\0') {
      if (n < MAX_COMMAND)
        buf[n++] = (char)c;
      continue;
    }
    buf[n] = '\0';
    rc |= print_one(buf, argv[1]);
    n = 0;
  }
  if (n > 0) {
    buf[n] = '\0';
    rc |= print_one(buf, argv[1]);
  }
  free(buf);
  return rc;
}
