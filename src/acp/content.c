#include "content.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

unsigned content_caps(const json_t *agent_capabilities) {
  const json_t *p = json_object_get(agent_capabilities, "promptCapabilities");
  unsigned caps = 0;
  if (json_is_true(json_object_get(p, "image")))
    caps |= CONTENT_IMAGE;
  if (json_is_true(json_object_get(p, "audio")))
    caps |= CONTENT_AUDIO;
  if (json_is_true(json_object_get(p, "embeddedContext")))
    caps |= CONTENT_EMBEDDED;
  return caps;
}

const char *content_cap_name(unsigned caps) {
  if (caps & CONTENT_IMAGE)
    return "image";
  if (caps & CONTENT_AUDIO)
    return "audio";
  if (caps & CONTENT_EMBEDDED)
    return "embeddedContext";
  return "";
}

// The state of one check: the error message and the bytes counted so far.
struct check {
  char *err;
  size_t errlen;
  size_t bytes;
  size_t index; // the block being checked (0-based)
  bool failed;
};

static void fail(struct check *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(struct check *k, const char *fmt, ...) {
  if (k->failed)
    return;
  k->failed = true;
  int n = snprintf(k->err, k->errlen, "content block %zu: ", k->index + 1);
  if (n < 0 || (size_t)n >= k->errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->err + n, k->errlen - (size_t)n, fmt, ap);
  va_end(ap);
}

static bool base64(const char *s, size_t n) {
  if (n == 0 || n % 4)
    return false;
  for (size_t i = 0; i < n; i++) {
    char ch = s[i];
    bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
              (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
    // '=' only as the last one or two characters.
    if (ch == '=' && i >= n - 2 && (i == n - 1 || s[n - 1] == '='))
      ok = true;
    if (!ok)
      return false;
  }
  return true;
}

enum field { OPTIONAL, REQUIRED, NONEMPTY, BASE64 };

// Copies string field key of from into to; false (with the reason) when it
// is missing but needed, or not a string.
static bool copy_str(struct check *k, json_t *to, const json_t *from,
                     const char *key, enum field how) {
  json_t *v = json_object_get(from, key);
  if (!v || json_is_null(v)) {
    if (how == OPTIONAL)
      return true;
    fail(k, "'%s' is missing", key);
    return false;
  }
  if (!json_is_string(v)) {
    fail(k, "'%s' must be a string", key);
    return false;
  }
  size_t n = json_string_length(v);
  if ((how == NONEMPTY || how == BASE64) && n == 0) {
    fail(k, "'%s' is empty", key);
    return false;
  }
  if (how == BASE64 && !base64(json_string_value(v), n)) {
    fail(k, "'%s' is not base64", key);
    return false;
  }
  k->bytes += n;
  if (k->bytes > CONTENT_MAX_BYTES) {
    fail(k, "the blocks hold more than %zu bytes", CONTENT_MAX_BYTES);
    return false;
  }
  json_object_set(to, key, v);
  return true;
}

// mimeType must name a type of family ("image", "audio").
static bool mime_of(struct check *k, const json_t *from, const char *family) {
  const char *m = json_string_value(json_object_get(from, "mimeType"));
  size_t n = strlen(family);
  if (m && strncmp(m, family, n) == 0 && m[n] == '/' && m[n + 1])
    return true;
  fail(k, "'mimeType' must be %s/...", family);
  return false;
}

static json_t *check_resource(struct check *k, const json_t *from) {
  const json_t *r = json_object_get(from, "resource");
  if (!json_is_object(r)) {
    fail(k, "'resource' must be an object");
    return NULL;
  }
  json_t *res = json_object();
  bool text =
      json_object_get(r, "text") && !json_is_null(json_object_get(r, "text"));
  bool blob =
      json_object_get(r, "blob") && !json_is_null(json_object_get(r, "blob"));
  if (text == blob)
    fail(k, "a resource holds either 'text' or 'blob'");
  else if (copy_str(k, res, r, "uri", NONEMPTY) &&
           copy_str(k, res, r, "mimeType", OPTIONAL) &&
           copy_str(k, res, r, text ? "text" : "blob",
                    text ? REQUIRED : BASE64)) {
    json_t *block = json_pack("{s:s}", "type", "resource");
    json_object_set_new(block, "resource", res);
    return block;
  }
  json_decref(res);
  return NULL;
}

// A clean copy of one block, or NULL (k says why).
static json_t *check_block(struct check *k, const json_t *from) {
  const char *type = json_string_value(json_object_get(from, "type"));
  if (!json_is_object(from) || !type) {
    fail(k, "must be an object with a string 'type'");
    return NULL;
  }
  if (strcmp(type, "resource") == 0)
    return check_resource(k, from);
  json_t *to = json_pack("{s:s}", "type", type);
  bool ok;
  if (strcmp(type, "text") == 0) {
    ok = copy_str(k, to, from, "text", REQUIRED);
  } else if (strcmp(type, "resource_link") == 0) {
    ok = copy_str(k, to, from, "uri", NONEMPTY) &&
         copy_str(k, to, from, "name", NONEMPTY) &&
         copy_str(k, to, from, "mimeType", OPTIONAL) &&
         copy_str(k, to, from, "title", OPTIONAL) &&
         copy_str(k, to, from, "description", OPTIONAL);
    json_t *size = json_object_get(from, "size");
    if (ok && size && !json_is_null(size)) {
      ok = json_is_integer(size) && json_integer_value(size) >= 0;
      if (ok)
        json_object_set(to, "size", size);
      else
        fail(k, "'size' must be a non-negative integer");
    }
  } else if (strcmp(type, "image") == 0) {
    ok = copy_str(k, to, from, "data", BASE64) &&
         copy_str(k, to, from, "mimeType", REQUIRED) &&
         mime_of(k, from, "image") && copy_str(k, to, from, "uri", OPTIONAL);
  } else if (strcmp(type, "audio") == 0) {
    ok = copy_str(k, to, from, "data", BASE64) &&
         copy_str(k, to, from, "mimeType", REQUIRED) &&
         mime_of(k, from, "audio");
  } else {
    fail(k, "unknown type '%.40s'", type);
    ok = false;
  }
  if (!ok) {
    json_decref(to);
    return NULL;
  }
  return to;
}

json_t *content_check(const json_t *blocks, char *err, size_t errlen) {
  struct check k = {err, errlen, 0, 0, false};
  if (errlen)
    err[0] = '\0';
  if (!json_is_array(blocks)) {
    snprintf(err, errlen, "the content blocks must be a list");
    return NULL;
  }
  if (json_array_size(blocks) > CONTENT_MAX_BLOCKS) {
    snprintf(err, errlen, "more than %d content blocks", CONTENT_MAX_BLOCKS);
    return NULL;
  }
  json_t *out = json_array();
  for (k.index = 0; k.index < json_array_size(blocks); k.index++) {
    json_t *b = check_block(&k, json_array_get(blocks, k.index));
    if (!b) {
      json_decref(out);
      return NULL;
    }
    json_array_append_new(out, b);
  }
  return out;
}

unsigned content_needs(const json_t *blocks) {
  unsigned needs = 0;
  size_t i;
  const json_t *b;
  json_array_foreach(blocks, i, b) {
    const char *type = json_string_value(json_object_get(b, "type"));
    if (!type)
      continue;
    if (strcmp(type, "image") == 0)
      needs |= CONTENT_IMAGE;
    else if (strcmp(type, "audio") == 0)
      needs |= CONTENT_AUDIO;
    else if (strcmp(type, "resource") == 0)
      needs |= CONTENT_EMBEDDED;
  }
  return needs;
}
