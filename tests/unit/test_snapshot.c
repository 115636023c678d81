// snapshot: the files an auto-allowed call names, read before the broker
// answers it: a file's bytes, an absent file, a file too large for one
// snapshot or for the turn, each path once per turn, nothing outside a
// turn, the bound on paths and on turns tracked.

#include "broker/snapshot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char dir[512];

static const char *at(const char *name) {
  static char buf[4][700];
  static int i;
  i = (i + 1) % 4;
  snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
  return buf[i];
}

static void put(const char *name, const char *data, size_t n) {
  FILE *f = fopen(at(name), "wb");
  if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0)
    abort();
}

static json_t *paths(const char *a, const char *b, const char *c) {
  json_t *arr = json_array();
  const char *v[] = {a, b, c};
  for (size_t i = 0; i < 3; i++)
    if (v[i])
      json_array_append_new(arr, json_string(v[i]));
  return arr;
}

// snapshots_take for up to three paths.
static json_t *take(struct snapshots *s, const char *sid, const char *a,
                    const char *b, const char *c) {
  json_t *p = paths(a, b, c);
  json_t *r = snapshots_take(s, "demo", sid, p);
  json_decref(p);
  return r;
}

static const char *field(const json_t *r, const char *path, const char *key) {
  return json_string_value(json_object_get(json_object_get(r, path), key));
}

static void test_content_and_absent(void) {
  struct snapshots *s = snapshots_new(NULL);
  put("a.txt", "one\ntwo\n", 8);
  put("bin", "x\0y", 3);
  ok(!take(s, "s1", at("a.txt"), NULL, NULL), "no turn: nothing read");
  snapshots_turn_start(s, "demo", "s1");
  json_t *r = take(s, "s1", at("a.txt"), at("none.txt"), at("bin"));
  is_size(json_object_size(r), 3, "three snapshots");
  is_str(field(r, at("a.txt"), "text"), "one\ntwo\n", "the file's bytes");
  struct stat st;
  stat(at("a.txt"), &st);
  char key[96];
  snprintf(key, sizeof(key), "8:%jd.%ld:%ju", (intmax_t)st.st_mtim.tv_sec,
           (long)st.st_mtim.tv_nsec, (uintmax_t)st.st_ino);
  is_str(field(r, at("a.txt"), "stat"), key, "its stat, as the ledger's own");
  ok(json_is_true(
         json_object_get(json_object_get(r, at("none.txt")), "missing")),
     "an absent file is missing");
  ok(!json_object_get(json_object_get(r, at("none.txt")), "text"),
     "with no text");
  json_t *bin = json_object_get(json_object_get(r, at("bin")), "text");
  ok(json_string_length(bin) == 3 &&
         memcmp(json_string_value(bin), "x\0y", 3) == 0,
     "bytes that are not text are kept whole");
  json_decref(r);
  // Each path once per turn.
  put("a.txt", "changed\n", 8);
  ok(!take(s, "s1", at("a.txt"), at("none.txt"), NULL),
     "a path seen in the turn is not read again");
  r = take(s, "s1", at("a.txt"), at("b.txt"), NULL);
  is_size(json_object_size(r), 1, "only the new path");
  ok(json_object_get(r, at("b.txt")) != NULL, "b.txt");
  json_decref(r);
  // Another session has its own turn; none yet.
  ok(!take(s, "s2", at("a.txt"), NULL, NULL), "another session: no turn");
  // The next turn reads again; after the end, nothing.
  snapshots_turn_end(s, "demo", "s1");
  ok(!take(s, "s1", at("a.txt"), NULL, NULL), "after the turn: nothing");
  snapshots_turn_start(s, "demo", "s1");
  r = take(s, "s1", at("a.txt"), NULL, NULL);
  is_str(field(r, at("a.txt"), "text"), "changed\n", "a new turn reads again");
  json_decref(r);
  // Not a regular file, or not absolute: left out.
  ok(!take(s, "s1", dir, "rel.txt", NULL), "a directory, a relative path");
  snapshots_free(s);
  unlink(at("a.txt"));
  unlink(at("bin"));
}

static void test_bounds(void) {
  struct snapshot_limits lim = {
      .file_bytes = 10, .turn_bytes = 16, .files = 4, .turns = 2};
  struct snapshots *s = snapshots_new(&lim);
  put("big", "0123456789A", 11);
  put("f1", "0123456789", 10);
  put("f2", "01234567", 8);
  put("f3", "012345", 6);
  put("f4", "0", 1);
  snapshots_turn_start(s, "demo", "s1");
  json_t *r = take(s, "s1", at("big"), at("f1"), at("f2"));
  is_str(field(r, at("big"), "skipped"), "too large", "over the file bound");
  ok(field(r, at("big"), "stat") != NULL, "with its stat");
  ok(!field(r, at("big"), "text"), "and no text");
  is_str(field(r, at("f1"), "text"), "0123456789", "at the file bound: read");
  is_str(field(r, at("f2"), "skipped"), "the turn's snapshots are full",
         "over the turn's bytes");
  json_decref(r);
  r = take(s, "s1", at("f3"), at("f4"), NULL);
  is_str(field(r, at("f3"), "text"), "012345", "what still fits is read");
  is_size(json_object_size(r), 1, "the fifth path is past the turn's files");
  json_decref(r);
  ok(!take(s, "s1", at("f4"), NULL, NULL), "and stays out");
  // Turns tracked at once: the oldest goes.
  snapshots_turn_start(s, "demo", "s2");
  snapshots_turn_start(s, "demo", "s3");
  ok(!take(s, "s1", at("f4"), NULL, NULL), "the oldest turn was forgotten");
  r = take(s, "s3", at("f4"), NULL, NULL);
  is_str(field(r, at("f4"), "text"), "0", "the newest is tracked");
  json_decref(r);
  r = take(s, "s2", at("f4"), NULL, NULL);
  ok(r != NULL, "and the one before it");
  json_decref(r);
  // Another agent's session of the same id is another turn.
  ok(!take(s, "s2", NULL, NULL, NULL), "no paths: nothing");
  json_t *p = paths(at("f4"), NULL, NULL);
  ok(!snapshots_take(s, "other", "s2", p), "another agent: no turn");
  json_decref(p);
  snapshots_free(s);
  const char *names[] = {"big", "f1", "f2", "f3", "f4"};
  for (size_t i = 0; i < 5; i++)
    unlink(at(names[i]));
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof(dir), "%s/acp-snapshot.XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir))
    abort();
  test_content_and_absent();
  test_bounds();
  unlink(at("b.txt"));
  rmdir(dir);
  return done_testing();
}
