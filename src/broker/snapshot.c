#include "snapshot.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "base/files.h"
#include "base/mem.h"

// A live turn: the paths it has named (each read once) and the bytes read.
struct turn {
  char *agent, *sid;
  char **paths;
  size_t npaths;
  size_t bytes;
};

struct snapshots {
  struct snapshot_limits lim;
  struct turn *turns; // oldest first
  size_t nturns;
};

struct snapshots *snapshots_new(const struct snapshot_limits *lim) {
  struct snapshots *s = xcalloc(1, sizeof(*s));
  if (lim)
    s->lim = *lim;
  if (!s->lim.file_bytes)
    s->lim.file_bytes = SNAPSHOT_FILE_MAX;
  if (!s->lim.turn_bytes)
    s->lim.turn_bytes = SNAPSHOT_TURN_MAX;
  if (!s->lim.files)
    s->lim.files = SNAPSHOT_FILES_MAX;
  if (!s->lim.turns)
    s->lim.turns = SNAPSHOT_TURNS_MAX;
  s->turns = xcalloc(s->lim.turns, sizeof(*s->turns));
  return s;
}

static void turn_clear(struct turn *t) {
  for (size_t i = 0; i < t->npaths; i++)
    free(t->paths[i]);
  free(t->paths);
  free(t->agent);
  free(t->sid);
  *t = (struct turn){0};
}

void snapshots_free(struct snapshots *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->nturns; i++)
    turn_clear(&s->turns[i]);
  free(s->turns);
  free(s);
}

static size_t find(const struct snapshots *s, const char *agent,
                   const char *sid) {
  for (size_t i = 0; i < s->nturns; i++)
    if (strcmp(s->turns[i].sid, sid) == 0 &&
        strcmp(s->turns[i].agent, agent) == 0)
      return i;
  return SIZE_MAX;
}

static void drop(struct snapshots *s, size_t i) {
  turn_clear(&s->turns[i]);
  memmove(&s->turns[i], &s->turns[i + 1],
          (s->nturns - i - 1) * sizeof(*s->turns));
  s->nturns--;
  s->turns[s->nturns] = (struct turn){0};
}

void snapshots_turn_end(struct snapshots *s, const char *agent,
                        const char *sid) {
  if (!agent || !sid)
    return;
  size_t i = find(s, agent, sid);
  if (i != SIZE_MAX)
    drop(s, i);
}

void snapshots_turn_start(struct snapshots *s, const char *agent,
                          const char *sid) {
  if (!agent || !sid)
    return;
  snapshots_turn_end(s, agent, sid);
  if (s->nturns == s->lim.turns)
    drop(s, 0); // the oldest (its turn_end was lost, or many sessions run)
  struct turn *t = &s->turns[s->nturns++];
  t->agent = xstrdup(agent);
  t->sid = xstrdup(sid);
  t->paths = xcalloc(s->lim.files, sizeof(*t->paths));
}

static bool seen(const struct turn *t, const char *path) {
  for (size_t i = 0; i < t->npaths; i++)
    if (strcmp(t->paths[i], path) == 0)
      return true;
  return false;
}

static json_t *stat_key(const struct stat *st) {
  char key[96];
  snprintf(key, sizeof(key), "%jd:%jd.%ld:%ju", (intmax_t)st->st_size,
           (intmax_t)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec,
           (uintmax_t)st->st_ino);
  return json_string(key);
}

static json_t *skipped(const char *why, const struct stat *st) {
  json_t *o = json_object();
  json_object_set_new_nocheck(o, "skipped", json_string(why));
  json_object_set_new_nocheck(o, "stat", stat_key(st));
  return o;
}

// The snapshot of the open regular file fd (st its stat) for turn t.
static json_t *read_fd(const struct snapshots *s, struct turn *t, int fd,
                       const struct stat *st) {
  size_t room = s->lim.turn_bytes - t->bytes;
  if ((uintmax_t)st->st_size > s->lim.file_bytes)
    return skipped("too large", st);
  if ((uintmax_t)st->st_size > room)
    return skipped("the turn's snapshots are full", st);
  char *data = NULL;
  size_t len = 0;
  int rc = files_read_fd(fd, s->lim.file_bytes, &data, &len);
  json_t *snap = NULL;
  if (rc == EFBIG) {
    snap = skipped("too large", st); // it grew
  } else if (rc == 0 && len > room) {
    snap = skipped("the turn's snapshots are full", st);
  } else if (rc == 0) {
    t->bytes += len;
    snap = json_object();
    // The bytes as they are (not necessarily UTF-8): msgpack carries them
    // as a string, Lua splits them into lines as it does a file it reads.
    json_object_set_new_nocheck(snap, "text", json_stringn_nocheck(data, len));
    json_object_set_new_nocheck(snap, "stat", stat_key(st));
  }
  free(data);
  return snap;
}

static json_t *read_path(const struct snapshots *s, struct turn *t,
                         const char *path);

// The snapshot of path for turn t, or NULL to leave it out; `at` is when
// it was read.
static json_t *read_one(const struct snapshots *s, struct turn *t,
                        const char *path) {
  json_int_t at = (json_int_t)uv_hrtime();
  json_t *snap = read_path(s, t, path);
  if (snap)
    json_object_set_new_nocheck(snap, "at", json_integer(at));
  return snap;
}

static json_t *read_path(const struct snapshots *s, struct turn *t,
                         const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      return NULL; // Lua tries, and tells
    json_t *o = json_object();
    json_object_set_new_nocheck(o, "missing", json_true());
    return o;
  }
  struct stat st;
  json_t *snap = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) // not a directory, a FIFO
    snap = read_fd(s, t, fd, &st);
  close(fd);
  return snap;
}

json_t *snapshots_take(struct snapshots *s, const char *agent, const char *sid,
                       const json_t *paths) {
  size_t n = json_array_size(paths);
  const char **v = xcalloc(n + 1, sizeof(*v));
  for (size_t i = 0; i < n; i++)
    v[i] = json_string_value(json_array_get(paths, i));
  json_t *out = snapshots_take_list(s, agent, sid, v, n);
  free(v);
  return out;
}

json_t *snapshots_take_list(struct snapshots *s, const char *agent,
                            const char *sid, const char *const *paths,
                            size_t n) {
  if (!agent || !sid || n == 0)
    return NULL;
  size_t ti = find(s, agent, sid);
  if (ti == SIZE_MAX)
    return NULL;
  struct turn *t = &s->turns[ti];
  json_t *out = NULL;
  for (size_t i = 0; i < n; i++) {
    const char *path = paths[i];
    if (!path || path[0] != '/' || seen(t, path))
      continue;
    if (t->npaths == s->lim.files)
      break; // Lua reads the rest itself, as before
    t->paths[t->npaths++] = xstrdup(path);
    json_t *snap = read_one(s, t, path);
    if (!snap)
      continue;
    if (!out)
      out = json_object();
    json_object_set_new(out, path, snap);
  }
  return out;
}
