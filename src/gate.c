#include "gate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem.h"
#include "settings.h"

#define GATE_MAX_PROJECTS 256 // projects with runtime state
#define GATE_MAX_MEMORY 1024  // rules remembered per session

// Runtime state of one project, for the life of the broker.
struct project {
  char *root;
  int yolo; // -1: as the settings say; 0: off; 1: on (:AcpYolo)
  int mode; // -1: as the settings say; else an enum policy_mode (:AcpMode)
};

// Rules the person allowed for one session ("allow for the session").
struct memory {
  char *agent;
  char *session;
  char **rules;
  size_t nrules;
  struct policy *compiled; // rebuilt when rules change
  struct memory *next;
};

struct gate {
  json_t *setup; // setup() options, or NULL
  struct project projects[GATE_MAX_PROJECTS];
  size_t nprojects;
  struct memory *memory;
};

struct gate *gate_new(void) {
  return xcalloc(1, sizeof(struct gate));
}

static void memory_free(struct memory *m) {
  for (size_t i = 0; i < m->nrules; i++)
    free(m->rules[i]);
  free(m->rules);
  policy_free(m->compiled);
  free(m->agent);
  free(m->session);
  free(m);
}

void gate_free(struct gate *g) {
  for (size_t i = 0; i < g->nprojects; i++)
    free(g->projects[i].root);
  for (struct memory *m = g->memory, *next; m; m = next) {
    next = m->next;
    memory_free(m);
  }
  json_decref(g->setup);
  free(g);
}

void gate_configure(struct gate *g, json_t *setup) {
  json_decref(g->setup);
  g->setup = json_is_object(setup) ? setup : NULL;
  if (!g->setup)
    json_decref(setup);
}

static const char *home(void) {
  const char *h = getenv("HOME");
  return h ? h : "/";
}

// The runtime state of root (created on first use; when the table is full
// the oldest is reused — it only holds overrides, never permissions).
static struct project *project(struct gate *g, const char *root) {
  for (size_t i = 0; i < g->nprojects; i++)
    if (strcmp(g->projects[i].root, root) == 0)
      return &g->projects[i];
  if (g->nprojects == GATE_MAX_PROJECTS) {
    free(g->projects[0].root);
    memmove(g->projects, g->projects + 1,
            (GATE_MAX_PROJECTS - 1) * sizeof(g->projects[0]));
    g->nprojects--;
  }
  struct project *p = &g->projects[g->nprojects++];
  *p = (struct project){xstrdup(root), -1, -1};
  return p;
}

// Per-agent yolo (agents.<name>.yolo). settings_load has merged setup()
// and the user settings file, the file winning, so that `:AcpYolo off`
// (which writes false there) also ends a yolo that setup() turned on.
static bool agent_yolo(const struct settings *s, const char *agent) {
  return agent && json_is_true(json_object_get(s->agents_yolo, agent));
}

struct effective {
  struct settings s;
  struct policy_input in;
  struct policy_rule_text *texts;
  const char *yolo_source; // what turned yolo on, or NULL
};

// Loads the settings of root and applies the runtime state on top.
static void effective_load(struct gate *g, const char *root, const char *agent,
                           struct effective *e) {
  memset(e, 0, sizeof(*e));
  settings_load(root, g->setup, &e->s);
  e->in = settings_policy_input(&e->s, &e->texts);
  struct project *pr = project(g, root);
  if (pr->mode >= 0)
    e->in.mode = (enum policy_mode)pr->mode;
  bool yolo = e->s.yolo || e->in.mode == POLICY_MODE_YOLO;
  e->yolo_source = e->s.yolo ? e->s.yolo_source : yolo ? "mode yolo" : NULL;
  if (agent_yolo(&e->s, agent)) {
    yolo = true;
    e->yolo_source = "agent trusted (per-agent yolo)";
  }
  if (pr->yolo >= 0) {
    yolo = pr->yolo == 1;
    e->yolo_source = yolo ? ":AcpYolo on" : NULL;
  }
  // The veto wins over every way of turning yolo on.
  if (e->s.veto) {
    yolo = false;
    e->yolo_source = NULL;
  }
  e->in.yolo = yolo;
  if (e->in.mode == POLICY_MODE_YOLO && !yolo)
    e->in.mode = POLICY_MODE_DEFAULT;
}

static void effective_free(struct effective *e) {
  free(e->texts);
  settings_free(&e->s);
}

static struct policy *compile(const struct policy_input *in) {
  char **warnings = NULL;
  size_t n = 0;
  struct policy *p = policy_new(in, &warnings, &n);
  for (size_t i = 0; i < n; i++) {
    LOG_D("policy: %s", warnings[i]);
    free(warnings[i]);
  }
  free(warnings);
  return p;
}

static struct memory *memory_find(struct gate *g, const char *agent,
                                  const char *session, bool create) {
  for (struct memory *m = g->memory; m; m = m->next)
    if (strcmp(m->agent, agent) == 0 && strcmp(m->session, session) == 0)
      return m;
  if (!create)
    return NULL;
  struct memory *m = xcalloc(1, sizeof(*m));
  m->agent = xstrdup(agent);
  m->session = xstrdup(session);
  m->next = g->memory;
  g->memory = m;
  return m;
}

// Adds rules to a session's memory and recompiles it.
static int memory_add(struct gate *g, const char *agent, const char *session,
                      const char *root, const char *const *rules, size_t n,
                      char *err, size_t errlen) {
  for (size_t i = 0; i < n; i++)
    if (policy_rule_check(rules[i], err, errlen) != 0)
      return -1;
  struct memory *m = memory_find(g, agent, session, true);
  if (m->nrules + n > GATE_MAX_MEMORY) {
    snprintf(err, errlen, "too many rules remembered for this session");
    return -1;
  }
  m->rules = xrealloc(m->rules, (m->nrules + n) * sizeof(char *));
  for (size_t i = 0; i < n; i++)
    m->rules[m->nrules++] = xstrdup(rules[i]);
  struct policy_rule_text *texts = xcalloc(m->nrules, sizeof(*texts));
  for (size_t i = 0; i < m->nrules; i++)
    texts[i] =
        (struct policy_rule_text){m->rules[i], POLICY_LIST_ALLOW, "session"};
  struct policy_input in = {.rules = texts,
                            .nrules = m->nrules,
                            .mode = POLICY_MODE_DEFAULT,
                            .root = root,
                            .home = home()};
  policy_free(m->compiled);
  m->compiled = compile(&in);
  free(texts);
  return 0;
}

void gate_forget(struct gate *g, const char *agent) {
  for (struct memory **pp = &g->memory; *pp;) {
    struct memory *m = *pp;
    if (strcmp(m->agent, agent) == 0) {
      *pp = m->next;
      memory_free(m);
    } else {
      pp = &m->next;
    }
  }
}

static json_t *narrow_json(const struct policy_request *r) {
  size_t n = 0;
  char **rules = policy_request_narrow_rules(r, &n);
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++) {
    json_array_append_new(a, json_string(rules[i]));
    free(rules[i]);
  }
  free(rules);
  return a;
}

static const char *by_name(const struct policy_result *res) {
  return policy_by_name(res->by);
}

void gate_decide(struct gate *g, const char *agent, const char *session,
                 const char *cwd, json_t *params, struct gate_verdict *v) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  struct policy *p = compile(&e.in);
  struct policy_request *r = policy_request_new(params, cwd, home());
  struct memory *m = memory_find(g, agent, session, false);
  struct policy_result res;
  policy_decide(p, m ? m->compiled : NULL, r, &res);
  enum policy_decision d = res.decision;
  v->option_id = NULL;
  if (d != POLICY_ASK)
    v->option_id = policy_pick_option(json_object_get(params, "options"), &d);
  if (d == POLICY_ASK && res.decision == POLICY_ALLOW)
    snprintf(res.reason, sizeof(res.reason),
             "allowed, but the agent offered no allow-once option");
  v->decision = d;
  json_t *tc = json_object_get(params, "toolCall");
  json_t *title = json_object_get(tc, "title");
  json_t *kind = json_object_get(tc, "kind");
  v->info = json_pack(
      "{s:s,s:s,s:s,s:O?,s:O?,s:O?,s:s?,s:o,s:s,s:s,s:s,s:s,s:s,s:o}", "root",
      root, "agent", agent, "session", session, "toolCallId",
      json_object_get(tc, "toolCallId"), "kind",
      json_is_string(kind) ? kind : NULL, "title",
      json_is_string(title) ? title : NULL, "command",
      policy_request_command(r), "paths", policy_request_paths(r), "decision",
      policy_decision_name(d), "by", d == POLICY_ASK ? "person" : by_name(&res),
      "reason", res.reason, "rule", res.rule, "source", res.source, "narrow",
      narrow_json(r));
  if (!v->info)
    v->info = json_object();
  policy_request_free(r);
  policy_free(p);
  effective_free(&e);
  free(root);
}

int gate_remember(struct gate *g, const char *scope, const char *agent,
                  const char *session, const char *cwd, const json_t *info,
                  char *err, size_t errlen) {
  if (strcmp(scope, "agent") == 0)
    return settings_set_agent_yolo(agent, true, err, errlen);
  json_t *narrow = json_object_get(info, "narrow");
  size_t n = json_array_size(narrow);
  if (n == 0) {
    snprintf(err, errlen, "this request cannot be remembered as rules");
    return -1;
  }
  const char **rules = xcalloc(n, sizeof(*rules));
  for (size_t i = 0; i < n; i++)
    rules[i] = json_string_value(json_array_get(narrow, i));
  char *root = settings_find_root(cwd);
  int r = -1;
  if (strcmp(scope, "session") == 0) {
    r = memory_add(g, agent, session, root, rules, n, err, errlen);
  } else if (strcmp(scope, "project") == 0) {
    r = 0;
    for (size_t i = 0; i < n && r == 0; i++)
      r = settings_add_rule(root, true, POLICY_LIST_ALLOW, rules[i], err,
                            errlen);
  } else {
    snprintf(err, errlen, "unknown scope '%s'", scope);
  }
  free(root);
  free(rules);
  return r;
}

static int parse_list(const char *list, enum policy_list *out) {
  static const char *const names[] = {"allow", "ask", "deny"};
  for (int i = 0; i < 3; i++)
    if (strcmp(list, names[i]) == 0) {
      *out = (enum policy_list)i;
      return 0;
    }
  return -1;
}

int gate_add_rule(struct gate *g, const char *scope, const char *list,
                  const char *rule, const char *agent, const char *session,
                  const char *cwd, char *file, size_t filelen, char *err,
                  size_t errlen) {
  enum policy_list l;
  if (parse_list(list, &l) != 0) {
    snprintf(err, errlen, "unknown list '%s'", list);
    return -1;
  }
  if (policy_rule_check(rule, err, errlen) != 0)
    return -1;
  char *root = settings_find_root(cwd);
  int r = -1;
  if (strcmp(scope, "session") == 0) {
    if (l != POLICY_LIST_ALLOW)
      snprintf(err, errlen,
               "only allow rules can be kept for a session; "
               "use the project or user scope");
    else if (!session || !agent)
      snprintf(err, errlen, "no session: start an agent first");
    else
      r = memory_add(g, agent, session, root, &rule, 1, err, errlen);
    snprintf(file, filelen, "session");
  } else if (strcmp(scope, "project") == 0 || strcmp(scope, "user") == 0) {
    bool proj = strcmp(scope, "project") == 0;
    r = settings_add_rule(root, proj, l, rule, err, errlen);
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (proj)
      snprintf(file, filelen, "%s/.acp/settings.json", root);
    else if (xdg && xdg[0] == '/')
      snprintf(file, filelen, "%s/acp-broker/settings.json", xdg);
    else
      snprintf(file, filelen, "%s/.config/acp-broker/settings.json", home());
  } else {
    snprintf(err, errlen, "unknown scope '%s' (session, project or user)",
             scope);
  }
  free(root);
  return r;
}

int gate_yolo(struct gate *g, const char *cwd, const char *action,
              const char *agent, char *err, size_t errlen) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  struct project *pr = project(g, root);
  bool on = e.in.yolo;
  int r = 0;
  if (strcmp(action, "toggle") == 0)
    action = on ? "off" : "on";
  if (strcmp(action, "on") == 0) {
    if (e.s.veto) {
      snprintf(err, errlen,
               "yolo is vetoed by security.disableYoloMode: true in %s",
               e.s.veto_source ? e.s.veto_source : "a Gemini settings file");
      r = -1;
    } else {
      pr->yolo = 1;
    }
  } else if (strcmp(action, "off") == 0) {
    pr->yolo = 0;
    if (agent && agent_yolo(&e.s, agent))
      r = settings_set_agent_yolo(agent, false, err, errlen);
  } else if (strcmp(action, "status") != 0) {
    snprintf(err, errlen, "unknown action '%s' (on, off or toggle)", action);
    r = -1;
  }
  effective_free(&e);
  free(root);
  return r;
}

int gate_mode(struct gate *g, const char *cwd, const char *mode, char *err,
              size_t errlen) {
  if (!mode)
    return 0;
  enum policy_mode m;
  if (policy_mode_parse(mode, &m) != 0) {
    snprintf(err, errlen,
             "unknown mode '%s' (default, acceptEdits, plan or yolo)", mode);
    return -1;
  }
  char *root = settings_find_root(cwd);
  project(g, root)->mode = (int)m;
  free(root);
  return 0;
}

int gate_trust(struct gate *g, const char *cwd, json_t **enabled, char *err,
               size_t errlen) {
  (void)g;
  char *root = settings_find_root(cwd);
  struct settings s;
  settings_load(root, NULL, &s);
  *enabled = s.permissive ? json_incref(s.permissive) : json_object();
  settings_free(&s);
  int r = settings_trust(root, err, errlen);
  free(root);
  if (r != 0) {
    json_decref(*enabled);
    *enabled = NULL;
  }
  return r;
}

static json_t *strings(char **v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

json_t *gate_settings(struct gate *g, const char *cwd, const char *agent) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  json_t *d = json_pack(
      "{s:s,s:s,s:b,s:s?,s:b,s:s?,s:b,s:b,s:O?,s:o,s:o}", "root", root, "mode",
      policy_mode_name(e.in.mode), "yolo", e.in.yolo, "yoloSource",
      e.yolo_source, "veto", e.s.veto, "vetoSource", e.s.veto_source, "trusted",
      e.s.trusted, "hasPermissive", e.s.has_permissive, "permissive",
      e.s.permissive, "errors", strings(e.s.errors, e.s.nerrors), "warnings",
      strings(e.s.warnings, e.s.nwarnings));
  effective_free(&e);
  free(root);
  return d;
}

json_t *gate_rules(struct gate *g, const char *cwd, const char *agent) {
  char *root = settings_find_root(cwd);
  struct effective e;
  effective_load(g, root, agent, &e);
  json_t *d = settings_to_json(&e.s);
  json_object_set_new(d, "mode", json_string(policy_mode_name(e.in.mode)));
  json_object_set_new(d, "yolo", json_boolean(e.in.yolo));
  json_object_set_new(d, "yoloSource",
                      e.yolo_source ? json_string(e.yolo_source) : json_null());
  json_t *mem = json_array();
  for (struct memory *m = g->memory; m; m = m->next)
    for (size_t i = 0; i < m->nrules; i++)
      json_array_append_new(mem, json_pack("{s:s,s:s,s:s}", "agent", m->agent,
                                           "session", m->session, "rule",
                                           m->rules[i]));
  json_object_set_new(d, "memory", mem);
  effective_free(&e);
  free(root);
  return d;
}
