#include "reqview.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "codec/jsonfast.h"
#include "codec/jsonlex.h"

typedef const unsigned char *cp;

struct rd {
  cp p, end;
};

static inline bool lit(struct rd *r, unsigned char c) {
  r->p = jsonlex_ws(r->p, r->end);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return true;
  }
  return false;
}

// A string of printable ASCII without escapes (anything else: the tree).
static inline __attribute__((always_inline)) bool
plain_str(struct rd *r, struct reqview_str *out) {
  if (!lit(r, '"'))
    return false;
  cp e = jsonlex_plain(r->p, r->end);
  if (e >= r->end || *e != '"')
    return false;
  out->s = (const char *)r->p;
  out->n = (size_t)(e - r->p);
  r->p = e + 1;
  return true;
}

static bool str_is(const struct reqview_str *s, const char *lit_s, size_t n) {
  return s->n == n && memcmp(s->s, lit_s, n) == 0;
}
#define STR_IS(s, l) str_is(s, l, sizeof(l) - 1)

static bool read_options(struct rd *r, struct reqview *v) {
  if (!lit(r, '['))
    return false;
  do {
    if (v->noptions >= REQVIEW_OPTIONS_MAX || !lit(r, '{'))
      return false;
    struct reqview_option *o = &v->options[v->noptions++];
    bool id = false, name = false, kind = false;
    do {
      struct reqview_str k, val;
      if (!plain_str(r, &k) || !lit(r, ':') || !plain_str(r, &val))
        return false;
      bool *seen = STR_IS(&k, "optionId") ? &id
                   : STR_IS(&k, "name")   ? &name
                   : STR_IS(&k, "kind")   ? &kind
                                          : NULL;
      if (!seen || *seen)
        return false;
      *seen = true;
      *(seen == &id ? &o->id : seen == &name ? &o->name : &o->kind) = val;
    } while (lit(r, ','));
    if (!lit(r, '}') || !id || !name || !kind)
      return false;
  } while (lit(r, ','));
  return lit(r, ']');
}

static bool read_params(struct rd *r, struct reqview *v) {
  if (!lit(r, '{'))
    return false;
  bool sid = false, opts = false;
  do {
    struct reqview_str k;
    if (!plain_str(r, &k) || !lit(r, ':'))
      return false;
    if (STR_IS(&k, "sessionId")) {
      if (sid || !plain_str(r, &v->sid))
        return false;
      sid = true;
    } else if (STR_IS(&k, "toolCall")) {
      // Read by jsonfast as a document of its own (the tree path reads it
      // the same way inside the line): where it ends, the view goes on.
      size_t used;
      r->p = jsonlex_ws(r->p, r->end);
      if (v->tc || r->p >= r->end || *r->p != '{')
        return false;
      // Its nodes from the arena (base/mem.h, when jansson allocates
      // through the cache): freed together with the request.
      mem_arena_begin();
      v->tc =
          jsonfast_value((const char *)r->p, (size_t)(r->end - r->p), &used);
      mem_arena_end();
      if (!v->tc)
        return false;
      r->p += used;
    } else if (STR_IS(&k, "options")) {
      if (opts || !read_options(r, v))
        return false;
      opts = true;
    } else {
      return false;
    }
  } while (lit(r, ','));
  return lit(r, '}') && sid && v->tc && opts;
}

static bool read_id(struct rd *r, struct reqview *v) {
  r->p = jsonlex_ws(r->p, r->end);
  if (r->p < r->end && *r->p == '"') {
    struct reqview_str s;
    if (!plain_str(r, &s))
      return false;
    v->id = json_stringn_nocheck(s.s, s.n);
    return v->id != NULL;
  }
  bool real;
  long long i;
  double d;
  if (!jsonlex_number(&r->p, r->end, &real, &i, &d) || real)
    return false;
  v->id = json_integer((json_int_t)i);
  return v->id != NULL;
}

static char *put_z(char **o, const struct reqview_str *s) {
  char *z = *o;
  memcpy(z, s->s, s->n);
  z[s->n] = '\0';
  *o += s->n + 1;
  return z;
}

int reqview_parse(const char *line, size_t len, struct reqview *v) {
  memset(v, 0, offsetof(struct reqview, options));
  struct rd r = {(cp)line, (cp)line + len};
  bool version = false, method = false, params = false;
  if (!lit(&r, '{'))
    goto fail;
  do {
    struct reqview_str k, s;
    if (!plain_str(&r, &k) || !lit(&r, ':'))
      goto fail;
    if (STR_IS(&k, "jsonrpc")) {
      if (version || !plain_str(&r, &s) || !STR_IS(&s, "2.0"))
        goto fail;
      version = true;
    } else if (STR_IS(&k, "id")) {
      if (v->id || !read_id(&r, v))
        goto fail;
    } else if (STR_IS(&k, "method")) {
      if (method || !plain_str(&r, &s) ||
          !STR_IS(&s, "session/request_permission"))
        goto fail;
      method = true;
    } else if (STR_IS(&k, "params")) {
      if (params || !read_params(&r, v))
        goto fail;
      params = true;
    } else {
      goto fail;
    }
  } while (lit(&r, ','));
  if (!lit(&r, '}') || jsonlex_ws(r.p, r.end) != r.end || !v->id || !method ||
      !params)
    goto fail;
  size_t n = v->sid.n + 1;
  for (size_t i = 0; i < v->noptions; i++)
    n += v->options[i].id.n + v->options[i].kind.n + 2;
  char *o = v->strs = xmalloc(n);
  v->sid_z = put_z(&o, &v->sid);
  for (size_t i = 0; i < v->noptions; i++) {
    v->option_id_z[i] = put_z(&o, &v->options[i].id);
    v->option_kind_z[i] = put_z(&o, &v->options[i].kind);
  }
  return 0;
fail:
  reqview_clear(v);
  return -1;
}

void reqview_clear(struct reqview *v) {
  json_decref(v->id);
  json_decref(v->tc);
  free(v->strs);
  memset(v, 0, offsetof(struct reqview, options));
}
