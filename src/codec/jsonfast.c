#include "jsonfast.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "jsonlex.h"

// The decoded text of strings with escapes is built in one of two buffers
// (a key's lives until its value is read), kept between calls unless a huge
// string grew them: then they are given back.
#define KEEP_BYTES ((size_t)1 << 20)

struct scratch {
  unsigned char *data;
  size_t len, cap;
};

static struct scratch kbuf, vbuf;

static bool put(struct scratch *b, const void *src, size_t n) {
  if (n == 0)
    return true; // an empty run (b->data may still be NULL)
  if (b->cap - b->len < n) {
    size_t want = b->len + n;
    if (want < n)
      return false;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < want)
      cap = cap > SIZE_MAX / 2 ? want : cap * 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d)
      return false;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, src, n);
  b->len += n;
  return true;
}

static void drop(struct scratch *b) {
  free(b->data);
  *b = (struct scratch){0};
}

void jsonfast_release(void) {
  drop(&kbuf);
  drop(&vbuf);
}

// An open array or object (borrowed: its parent, or the caller for the
// root, holds the reference).
struct frame {
  json_t *c;
  bool obj;
};

struct jf {
  const unsigned char *p, *end;
  json_t *root;
  int depth;
  bool prefix;     // jsonfast_value: the text goes on after the value
  const char *key; // the key of the innermost object awaiting its value
  size_t klen;
  struct frame stack[JSONFAST_MAX_DEPTH + 1];
};

// The string whose opening quote is at j->p; *s, *n its decoded bytes: in
// the text when it has no escape, else in b. Fails where json_loadb would
// (bad UTF-8, a raw control character, a bad escape, \u0000, no end).
static bool string(struct jf *j, struct scratch *b, const char **s, size_t *n) {
  const unsigned char *start = ++j->p, *p = start, *end = j->end;
  for (;;) {
    p = jsonlex_plain(p, end);
    if (p == end)
      return false;
    if (*p == '"') {
      *s = (const char *)start;
      *n = (size_t)(p - start);
      j->p = p + 1;
      return true;
    }
    if (*p < 0x80)
      break; // an escape or a control character
    size_t k = utf8_len(p, end);
    if (!k)
      return false;
    p += k;
  }
  // Escapes: decoded into b, runs between them copied as they are.
  b->len = 0;
  const unsigned char *run = start;
  for (;;) {
    if (*p != '\\')
      return false; // a raw control character
    unsigned char out[4];
    if (!put(b, run, (size_t)(p - run)))
      return false;
    size_t k = jsonlex_unescape(&p, end, out);
    if (!k || !put(b, out, k))
      return false;
    run = p;
    for (;;) {
      p = jsonlex_plain(p, end);
      if (p == end || *p < 0x80)
        break;
      size_t u = utf8_len(p, end);
      if (!u)
        return false;
      p += u;
    }
    if (p == end)
      return false;
    if (*p == '"')
      break;
  }
  if (!put(b, run, (size_t)(p - run)))
    return false;
  j->p = p + 1;
  *s = (const char *)b->data;
  *n = b->len;
  return true;
}

// Adds v (stolen; NULL when its constructor failed) to the innermost
// container. A key seen before in the object keeps its place and takes the
// new value, as json_loadb does.
static bool add(struct jf *j, json_t *v) {
  if (!v)
    return false;
  struct frame *f = &j->stack[j->depth - 1];
  if (f->obj)
    return json_object_setn_new_nocheck(f->c, j->key, j->klen, v) == 0;
  return json_array_append_new(f->c, v) == 0;
}

// A key of the innermost object (its quote at j->p), then ':'.
static bool key(struct jf *j) {
  if (j->p == j->end || *j->p != '"')
    return false;
  if (!string(j, &kbuf, &j->key, &j->klen))
    return false;
  j->p = jsonlex_ws(j->p, j->end);
  if (j->p == j->end || *j->p != ':')
    return false;
  j->p = jsonlex_ws(j->p + 1, j->end);
  return true;
}

// Opens an array or object at j->p: added to its parent first, then
// filled (the tree is the same as when it is added last).
static bool open_container(struct jf *j, bool obj) {
  json_t *c = obj ? json_object() : json_array();
  if (!c)
    return false;
  if (j->depth == 0)
    j->root = c;
  else if (!add(j, c))
    return false;
  j->stack[j->depth++] = (struct frame){c, obj};
  j->p = jsonlex_ws(j->p + 1, j->end);
  return true;
}

static bool literal(struct jf *j, const char *word, size_t n) {
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
    return false;
  j->p += n;
  return true;
}

static bool run(struct jf *j) {
  j->p = jsonlex_ws(j->p, j->end);
  // json_loadb without JSON_DECODE_ANY wants an array or object on top.
  if (j->p == j->end || (*j->p != '[' && *j->p != '{'))
    return false;
  for (;;) {
    // A value starts at j->p, inside j->depth containers: past
    // JSONFAST_MAX_DEPTH of them, json_loadb takes over.
    if (j->depth > JSONFAST_MAX_DEPTH || j->p == j->end)
      return false;
    bool ok;
    bool ungets = true; // numbers and literals: see below
    switch (*j->p) {
    case '{':
    case '[': {
      bool obj = *j->p == '{';
      if (!open_container(j, obj))
        return false;
      if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->depth--;
        j->p++;
        ok = true;
        ungets = false;
        break;
      }
      if (obj && !key(j))
        return false;
      continue; // its first value
    }
    case '"': {
      const char *s;
      size_t n;
      ok = string(j, &vbuf, &s, &n) && add(j, json_stringn_nocheck(s, n));
      ungets = false;
      break;
    }
    case 't':
      ok = literal(j, "true", 4) && add(j, json_true());
      break;
    case 'f':
      ok = literal(j, "false", 5) && add(j, json_false());
      break;
    case 'n':
      ok = literal(j, "null", 4) && add(j, json_null());
      break;
    default: {
      bool real;
      long long i;
      double d;
      ok = jsonlex_number(&j->p, j->end, &real, &i, &d) &&
           add(j, real ? json_real(d) : json_integer(i));
      break;
    }
    }
    if (!ok)
      return false;
    // jansson quirk: a number or literal ends by reading one byte too many
    // and ungetting it, and its stream drops an ungot NUL byte (it takes a
    // NUL in its one-character buffer for "empty"). So "[1\0]" loads as
    // [1]; match it.
    if (ungets && j->p < j->end && *j->p == '\0')
      j->p++;
    // A value ended: close the containers it ends, or go on to the next.
    for (;;) {
      if (j->depth == 0) {
        if (j->prefix)
          return true;
        j->p = jsonlex_ws(j->p, j->end);
        return j->p == j->end;
      }
      const struct frame *f = &j->stack[j->depth - 1];
      j->p = jsonlex_ws(j->p, j->end);
      if (j->p == j->end)
        return false;
      if (*j->p == ',') {
        j->p = jsonlex_ws(j->p + 1, j->end);
        if (f->obj && !key(j))
          return false;
        break;
      }
      if (*j->p != (f->obj ? '}' : ']'))
        return false;
      j->depth--;
      j->p++;
    }
  }
}

static json_t *parse(const char *text, size_t len, size_t *used) {
  if (!text)
    return NULL;
  struct jf j;
  j.p = (const unsigned char *)text;
  j.end = j.p + len;
  j.root = NULL;
  j.depth = 0;
  j.prefix = used != NULL;
  bool ok = run(&j);
  if (used)
    *used = (size_t)(j.p - (const unsigned char *)text);
  if (kbuf.cap > KEEP_BYTES)
    drop(&kbuf);
  if (vbuf.cap > KEEP_BYTES)
    drop(&vbuf);
  if (!ok) {
    json_decref(j.root);
    return NULL;
  }
  return j.root;
}

json_t *jsonfast_tree(const char *text, size_t len) {
  return parse(text, len, NULL);
}

json_t *jsonfast_value(const char *text, size_t len, size_t *used) {
  if (!len || (text[0] != '{' && text[0] != '['))
    return NULL;
  return parse(text, len, used);
}

json_t *jsonfast_load(const char *text, size_t len, json_error_t *err) {
  json_t *v = jsonfast_tree(text, len);
  return v ? v : json_loadb(text, len, 0, err);
}
