#include "cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/mem.h"
#include "policy/policy.h"
#include "policy/settings.h"

static const char cli_usage[] =
    "usage: acp-broker decide --cwd DIR [--session ID] --request FILE|-\n"
    "       acp-broker rules --cwd DIR\n"
    "       acp-broker trust --cwd DIR\n"
    "\n"
    "decide  evaluates one session/request_permission params object with the\n"
    "        settings a session in DIR would have and prints one JSON object:\n"
    "        {\"decision\",\"optionId\",\"reason\",\"rule\",\"source\"}\n"
    "rules   shows the effective rules, mode, yolo, veto and trust, with the\n"
    "        file each comes from, and any settings file that cannot be\n"
    "        used (failClosed: what it suspends until it is fixed)\n"
    "trust   trusts DIR's current permissive settings and shows what that\n"
    "        enabled (refused while a settings file cannot be used)\n"
    "\n"
    "DIR defaults to the current directory.\n";

struct opts {
  const char *cmd;
  const char *cwd;     // NULL: the current directory
  const char *request; // a file, or "-" for stdin
  const char *session; // accepted; decide has no session memory
};

static int cmd_decide(const struct opts *o);
static int cmd_rules(const struct opts *o);
static int cmd_trust(const struct opts *o);
static int parse(int argc, char **argv, struct opts *o);
static char *canonical_cwd(const struct opts *o);
static void print_problems(const struct settings *s);

bool cli_is_command(const char *name) {
  return name && (!strcmp(name, "decide") || !strcmp(name, "rules") ||
                  !strcmp(name, "trust"));
}

int cli_main(int argc, char **argv) {
  struct opts o = {.cmd = argc > 1 ? argv[1] : ""};
  if (!cli_is_command(o.cmd)) {
    fprintf(stderr, "acp-broker: unknown command '%s'\n\n%s", o.cmd, cli_usage);
    return 2;
  }
  int rc = parse(argc, argv, &o);
  if (rc >= 0)
    return rc;
  if (!strcmp(o.cmd, "decide"))
    return cmd_decide(&o);
  if (!strcmp(o.cmd, "rules"))
    return cmd_rules(&o);
  return cmd_trust(&o);
}

// Fills o from argv[2...]; -1 to go on, else the exit status (help, error).
static int parse(int argc, char **argv, struct opts *o) {
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = !strcmp(a, "--cwd")       ? &o->cwd
                       : !strcmp(a, "--request") ? &o->request
                       : !strcmp(a, "--session") ? &o->session
                                                 : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(cli_usage, stdout);
      return 0;
    }
    if (!dst || i + 1 >= argc) {
      fprintf(stderr, "acp-broker %s: %s '%s'\n\n%s", o->cmd,
              dst ? "missing value for" : "unknown option", a, cli_usage);
      return 2;
    }
    *dst = argv[++i];
  }
  if (!strcmp(o->cmd, "decide") && !o->request) {
    fprintf(stderr, "acp-broker decide: --request FILE|- is required\n");
    return 2;
  }
  return -1;
}

static char *canonical_cwd(const struct opts *o) {
  char *cwd = realpath(o->cwd ? o->cwd : ".", NULL);
  if (!cwd)
    fprintf(stderr, "acp-broker %s: %s: %s\n", o->cmd, o->cwd ? o->cwd : ".",
            strerror(errno));
  return cwd;
}

static void print_problems(const struct settings *s) {
  for (size_t i = 0; i < s->nerrors; i++)
    fprintf(stderr, "acp-broker: error: %s\n", s->errors[i]);
  for (size_t i = 0; i < s->nwarnings; i++)
    fprintf(stderr, "acp-broker: warning: %s\n", s->warnings[i]);
}

// The params object of a request file: the params themselves, or a whole
// JSON-RPC session/request_permission message.
static json_t *load_request(const char *path) {
  json_error_t jerr;
  json_t *doc = !strcmp(path, "-") ? json_loadf(stdin, 0, &jerr)
                                   : json_load_file(path, 0, &jerr);
  const char *name = !strcmp(path, "-") ? "<stdin>" : path;
  if (!doc && jerr.line < 1) // not a parse error: the file cannot be read
    fprintf(stderr, "acp-broker decide: %s\n", jerr.text);
  else if (!doc)
    fprintf(stderr, "acp-broker decide: %s:%d:%d: %s\n", name, jerr.line,
            jerr.column > 0 ? jerr.column : 1, jerr.text);
  if (!doc)
    return NULL;
  json_t *params = json_object_get(doc, "params");
  if (json_is_object(params) && json_object_get(doc, "method")) {
    json_incref(params);
    json_decref(doc);
    doc = params;
  }
  if (!json_is_object(doc)) {
    fprintf(stderr, "acp-broker decide: %s: not a JSON object\n", name);
    json_decref(doc);
    return NULL;
  }
  return doc;
}

static json_t *str_or_null(const char *s) {
  return s && *s ? json_string(s) : json_null();
}

// Loads the settings a session in --cwd would have. *cwd gets the canonical
// cwd (the caller frees it and calls settings_free). Returns -1 when --cwd
// is not a directory.
static int load_settings(const struct opts *o, char **cwd, struct settings *s) {
  *cwd = canonical_cwd(o);
  if (!*cwd)
    return -1;
  char *root = settings_find_root(*cwd);
  settings_load(root, NULL, s);
  free(root);
  return 0;
}

static int cmd_decide(const struct opts *o) {
  json_t *params = load_request(o->request);
  if (!params)
    return 2;
  char *cwd;
  struct settings s;
  if (load_settings(o, &cwd, &s) != 0) {
    json_decref(params);
    return 2;
  }
  print_problems(&s);
  struct policy_rule_text *texts;
  struct policy_input in = settings_policy_input(&s, &texts);
  char **warnings = NULL;
  size_t nwarnings = 0;
  struct policy *p = policy_new(&in, &warnings, &nwarnings);
  for (size_t i = 0; i < nwarnings; i++) {
    fprintf(stderr, "acp-broker: warning: %s\n", warnings[i]);
    free(warnings[i]);
  }
  free(warnings);
  struct policy_request *r = policy_request_new(params, cwd, s.home);
  struct policy_result res;
  policy_decide(p, NULL, r, &res);
  settings_fail_closed(&s, &res);
  enum policy_decision d = res.decision;
  const char *option = NULL;
  if (d != POLICY_ASK)
    option = policy_pick_option(json_object_get(params, "options"), &d);
  char reason[sizeof(res.reason) + 64];
  snprintf(reason, sizeof(reason), "%s%s", res.reason,
           res.decision == POLICY_ALLOW && d == POLICY_ASK
               ? "; no allow_once option offered: ask"
               : "");
  json_t *out = json_object();
  json_object_set_new(out, "decision", json_string(policy_decision_name(d)));
  json_object_set_new(out, "optionId", str_or_null(option));
  json_object_set_new(out, "reason", json_string(reason));
  json_object_set_new(out, "rule", str_or_null(res.rule));
  json_object_set_new(out, "source", str_or_null(res.source));
  char *text = json_dumps(out, JSON_COMPACT);
  puts(text);
  free(text);
  json_decref(out);
  policy_request_free(r);
  policy_free(p);
  free(texts);
  settings_free(&s);
  free(cwd);
  json_decref(params);
  return 0;
}

static int cmd_rules(const struct opts *o) {
  char *cwd;
  struct settings s;
  if (load_settings(o, &cwd, &s) != 0)
    return 2;
  json_t *j = settings_to_json(&s);
  char *text = json_dumps(j, JSON_INDENT(2));
  puts(text);
  free(text);
  json_decref(j);
  settings_free(&s);
  free(cwd);
  return 0;
}

static int cmd_trust(const struct opts *o) {
  char *cwd;
  struct settings s;
  if (load_settings(o, &cwd, &s) != 0)
    return 2;
  print_problems(&s);
  char err[512];
  int rc = 0;
  if (settings_trust(s.root, err, sizeof(err)) != 0) {
    fprintf(stderr, "acp-broker trust: %s\n", err);
    rc = 1;
  } else if (!s.has_permissive) {
    printf("trusted %s: it has no permissive settings, nothing enabled\n",
           s.root);
  } else {
    char *text = json_dumps(s.permissive, JSON_INDENT(2));
    printf("trusted %s; enabled:\n%s\n", s.root, text);
    free(text);
  }
  settings_free(&s);
  free(cwd);
  return rc;
}
