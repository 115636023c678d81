#include "trust.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/files.h"
#include "base/mem.h"

char *trust_hash(const json_t *permissive) {
  static const char prefix[] = "acp-broker trust v1\n";
  char *dump =
      json_dumps(permissive, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
  struct sha256_ctx c;
  uint8_t d[SHA256_DIGEST_SIZE];
  sha256_init(&c);
  sha256_update(&c, sizeof(prefix) - 1, (const uint8_t *)prefix);
  if (dump)
    sha256_update(&c, strlen(dump), (const uint8_t *)dump);
  sha256_digest(&c, sizeof(d), d);
  free(dump);
  char *hex = xmalloc(TRUST_HEX_LEN);
  for (size_t i = 0; i < sizeof(d); i++)
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  return hex;
}

char *trust_store_path(void) {
  return files_xdg_path("XDG_STATE_HOME", ".local/state",
                        "acp-broker/trust.json");
}

// Loads the store: a new object (empty when the file does not exist), or
// NULL with err.
static json_t *store_load(const char *path, char *err, size_t errlen) {
  json_error_t jerr;
  json_t *store = json_load_file(path, 0, &jerr);
  if (!store) {
    if (access(path, F_OK) != 0 && errno == ENOENT)
      return json_object();
    if (jerr.line < 1) // not a parse error: the file cannot be read
      snprintf(err, errlen, "%s", jerr.text);
    else
      snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line,
               jerr.column > 0 ? jerr.column : 1, jerr.text);
    return NULL;
  }
  if (!json_is_object(store)) {
    snprintf(err, errlen, "%s: not a JSON object", path);
    json_decref(store);
    return NULL;
  }
  return store;
}

int trust_get(const char *root, char **hash, char *err, size_t errlen) {
  *hash = NULL;
  char *path = trust_store_path();
  if (!path) {
    snprintf(err, errlen, "HOME is not set: no trust store");
    return -1;
  }
  json_t *store = store_load(path, err, errlen);
  free(path);
  if (!store)
    return -1;
  const char *h = json_string_value(json_object_get(store, root));
  if (h)
    *hash = xstrdup(h);
  json_decref(store);
  return 0;
}

int trust_put(const char *root, const char *hash, char *err, size_t errlen) {
  char *path = trust_store_path();
  if (!path) {
    snprintf(err, errlen, "HOME is not set: no trust store");
    return -1;
  }
  int rc = -1;
  // A malformed store is not overwritten: it may be the person's edit, and
  // refusing keeps every project in it untrusted, which is the safe side.
  json_t *store = store_load(path, err, errlen);
  if (!store)
    goto out;
  json_object_set_new(store, root, json_string(hash));
  char *text = json_dumps(store, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(store);
  size_t n = strlen(text);
  text = xrealloc(text, n + 2);
  text[n++] = '\n';
  rc = files_replace(path, text, n, 0600);
  if (rc != 0) {
    snprintf(err, errlen, "%s: %s", path, strerror(rc));
    rc = -1;
  }
  free(text);
out:
  free(path);
  return rc;
}
