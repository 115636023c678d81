#include "trust.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/files.h"
#include "base/mem.h"
#include "base/sha256.h"
#include "settings_priv.h"

// The store grows by a line per project trusted; past this it is refused
// (and trusts nothing) rather than read without a bound.
#define TRUST_STORE_MAX ((size_t)16 << 20)

char *trust_hash(const json_t *permissive) {
  static const char prefix[] = "acp-broker trust v1\n";
  char *dump =
      json_dumps(permissive, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
  struct sha256 c;
  uint8_t d[SHA256_LEN];
  sha256_init(&c);
  sha256_update(&c, prefix, sizeof(prefix) - 1);
  if (dump)
    sha256_update(&c, dump, strlen(dump));
  sha256_final(&c, d);
  free(dump);
  char *hex = xmalloc(TRUST_HEX_LEN);
  sha256_hex(d, hex);
  return hex;
}

char *trust_store_path(void) {
  return files_xdg_path("XDG_STATE_HOME", ".local/state",
                        "acp-broker/trust.json");
}

int trust_get(const char *root, char **hash, char *err, size_t errlen) {
  *hash = NULL;
  char *path = trust_store_path();
  if (!path) {
    snprintf(err, errlen, "HOME is not set: no trust store");
    return -1;
  }
  json_t *store = settings_read_object(path, TRUST_STORE_MAX, err, errlen);
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
  json_t *store = settings_read_object(path, TRUST_STORE_MAX, err, errlen);
  if (!store)
    goto out;
  json_object_set_new(store, root, json_string(hash));
  rc = settings_write_object(path, store, JSON_INDENT(2) | JSON_SORT_KEYS, 0600,
                             err, errlen);
  json_decref(store);
out:
  free(path);
  return rc;
}
