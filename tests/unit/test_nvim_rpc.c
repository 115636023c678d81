// Unit tests for the msgpack-RPC decoder: frames built with msgpack-c's
// packer, fed whole, at every split point and byte by byte; and for the
// channel's batches of items (order, timing, bounds) over a real pipe.

#include <fcntl.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "io/nvim_rpc.h"

struct seen {
  int count;
  enum nvim_rpc_type type[16];
  uint32_t msgid[16];
  char method[16][32];
  uint32_t nparams[16];
};

static void on_msg(void *ud, const struct nvim_rpc_msg *m) {
  struct seen *s = ud;
  if (s->count >= 16)
    return;
  int i = s->count++;
  s->type[i] = m->type;
  s->msgid[i] = m->msgid;
  s->method[i][0] = '\0';
  if (m->method)
    snprintf(s->method[i], sizeof(s->method[i]), "%.*s", (int)m->method_len,
             m->method);
  s->nparams[i] = m->params ? m->params->via.array.size : 0;
}

// A stream of three frames: a notification, a request and a response.
static void build_stream(msgpack_sbuffer *sb) {
  msgpack_packer pk;
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3); // [2, "acp_prompt", ["demo", "hi"]]
  msgpack_pack_int(&pk, 2);
  msgpack_pack_str_with_body(&pk, "acp_prompt", 10);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_str_with_body(&pk, "demo", 4);
  msgpack_pack_str_with_body(&pk, "hi", 2);
  msgpack_pack_array(&pk, 4); // [0, 7, "acp_x", []]
  msgpack_pack_int(&pk, 0);
  msgpack_pack_uint32(&pk, 7);
  msgpack_pack_str_with_body(&pk, "acp_x", 5);
  msgpack_pack_array(&pk, 0);
  msgpack_pack_array(&pk, 4); // [1, 4294967295, nil, true]
  msgpack_pack_int(&pk, 1);
  msgpack_pack_uint32(&pk, UINT32_MAX);
  msgpack_pack_nil(&pk);
  msgpack_pack_true(&pk);
}

static void check_stream(const struct seen *s, const char *how) {
  ok(s->count == 3, "%s: three messages", how);
  ok(s->type[0] == NVIM_RPC_NOTIFICATION, "%s: notification first", how);
  ok(!strcmp(s->method[0], "acp_prompt"), "%s: notification method", how);
  ok(s->nparams[0] == 2, "%s: notification params", how);
  ok(s->type[1] == NVIM_RPC_REQUEST, "%s: then a request", how);
  ok(s->msgid[1] == 7, "%s: request msgid", how);
  ok(!strcmp(s->method[1], "acp_x"), "%s: request method", how);
  ok(s->type[2] == NVIM_RPC_RESPONSE, "%s: then a response", how);
  ok(s->msgid[2] == UINT32_MAX, "%s: response msgid", how);
}

static int feed_split(const char *data, size_t len, size_t split,
                      struct seen *s) {
  struct nvim_rpc_decoder d;
  char err[128];
  nvim_rpc_decoder_init(&d, 1 << 20);
  int r = nvim_rpc_decoder_feed(&d, data, split, on_msg, s, err, sizeof(err));
  if (r == 0)
    r = nvim_rpc_decoder_feed(&d, data + split, len - split, on_msg, s, err,
                              sizeof(err));
  nvim_rpc_decoder_free(&d);
  return r;
}

static void test_splits(void) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  build_stream(&sb);
  int bad = 0;
  for (size_t split = 0; split <= sb.size; split++) {
    struct seen s = {0};
    if (feed_split(sb.data, sb.size, split, &s) != 0 || s.count != 3 ||
        s.msgid[1] != 7 || strcmp(s.method[0], "acp_prompt") != 0)
      bad++;
  }
  ok(bad == 0, "every split point of %zu bytes decodes the same", sb.size);
  struct seen whole = {0};
  feed_split(sb.data, sb.size, sb.size, &whole);
  check_stream(&whole, "whole");

  struct nvim_rpc_decoder d;
  char err[128];
  struct seen bytes = {0};
  nvim_rpc_decoder_init(&d, 1 << 20);
  for (size_t i = 0; i < sb.size; i++)
    nvim_rpc_decoder_feed(&d, sb.data + i, 1, on_msg, &bytes, err, sizeof(err));
  nvim_rpc_decoder_free(&d);
  check_stream(&bytes, "byte by byte");
  msgpack_sbuffer_destroy(&sb);
}

// Frames that are msgpack but not msgpack-RPC are skipped; the stream goes on.
static void test_invalid_shapes(void) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_int(&pk, 5); // not an array
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_int(&pk, 2); // too short
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, 7); // bad type
  msgpack_pack_nil(&pk);
  msgpack_pack_nil(&pk);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_int(&pk, 9); // method not a string
  msgpack_pack_array(&pk, 0);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_str_with_body(&pk, "m", 1);
  msgpack_pack_nil(&pk); // params not an array
  msgpack_pack_array(&pk, 4);
  msgpack_pack_int(&pk, 0);
  msgpack_pack_int(&pk, -1); // negative msgid
  msgpack_pack_str_with_body(&pk, "m", 1);
  msgpack_pack_array(&pk, 0);
  msgpack_pack_array(&pk, 3); // finally a good one
  msgpack_pack_int(&pk, 2);
  msgpack_pack_str_with_body(&pk, "acp_stop", 8);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_str_with_body(&pk, "demo", 4);
  struct seen s = {0};
  is_int(feed_split(sb.data, sb.size, sb.size, &s), 0,
         "invalid shapes do not break the stream");
  is_int(s.count, 1, "only the valid frame is delivered");
  is_str(s.method[0], "acp_stop", "and it is the right one");
  msgpack_sbuffer_destroy(&sb);
}

static void test_broken_stream(void) {
  // 0xc1 is never used in msgpack.
  const char bad[] = {'\x93', '\x02', '\xc1'};
  struct seen s = {0};
  ok(feed_split(bad, sizeof(bad), sizeof(bad), &s) != 0,
     "a malformed byte is a broken stream");

  // A frame announcing more than the limit fails before it is buffered.
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_str_with_body(&pk, "m", 1);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_str(&pk, 4096);
  char *body = calloc(1, 4096);
  msgpack_pack_str_body(&pk, body, 4096);
  free(body);
  struct nvim_rpc_decoder d;
  char err[128];
  nvim_rpc_decoder_init(&d, 1024);
  int r = 0;
  for (size_t off = 0; off < sb.size && r == 0; off += 512) {
    size_t n = sb.size - off < 512 ? sb.size - off : 512;
    r = nvim_rpc_decoder_feed(&d, sb.data + off, n, on_msg, &s, err,
                              sizeof(err));
  }
  ok(r != 0, "a frame over the size limit is refused: %s", err);
  nvim_rpc_decoder_free(&d);
  msgpack_sbuffer_destroy(&sb);
}

static void test_str_eq(void) {
  msgpack_object o = {.type = MSGPACK_OBJECT_STR,
                      .via.str = {.size = 3, .ptr = "cmd"}};
  ok(nvim_rpc_str_eq(&o, "cmd"), "str_eq matches");
  ok(!nvim_rpc_str_eq(&o, "cm"), "str_eq checks the length");
  ok(!nvim_rpc_str_eq(&o, "cmdx"), "str_eq checks the length (longer)");
  o.type = MSGPACK_OBJECT_BIN;
  ok(!nvim_rpc_str_eq(&o, "cmd"), "str_eq needs a str");
}

// ---- the channel's batches ----

struct wire {
  int n;             // messages seen
  char what[64][40]; // "batch:1,2" / "request:m" / "notify:m"
  size_t items;      // items seen in all batches
  uint32_t ids[64];  // batches not answered yet
  int nids;
};

static void on_wire(void *ud, const struct nvim_rpc_msg *m) {
  struct wire *w = ud;
  const msgpack_object *p = m->params;
  if (m->type == NVIM_RPC_REQUEST && p->via.array.size == 2 &&
      nvim_rpc_str_eq(&p->via.array.ptr[0], "return batch") &&
      p->via.array.ptr[1].type == MSGPACK_OBJECT_ARRAY &&
      p->via.array.ptr[1].via.array.size == 1) {
    const msgpack_object *list = &p->via.array.ptr[1].via.array.ptr[0];
    w->items += list->via.array.size;
    if (w->nids < 64)
      w->ids[w->nids++] = m->msgid;
    if (w->n >= 64)
      return;
    char *out = w->what[w->n++];
    int k = snprintf(out, 40, "batch:");
    for (uint32_t i = 0; i < list->via.array.size && k < 36; i++)
      k += snprintf(out + k, (size_t)(40 - k), "%s%d", i ? "," : "",
                    (int)list->via.array.ptr[i].via.i64);
    return;
  }
  if (w->n >= 64)
    return;
  snprintf(w->what[w->n++], 40, "%s:%.*s",
           m->type == NVIM_RPC_REQUEST ? "request" : "notify",
           (int)m->method_len, m->method);
}

static void noop_message(void *ud, const struct nvim_rpc_msg *m) {
  (void)ud;
  (void)m;
}
static void noop_eof(void *ud) {
  (void)ud;
}
static int backlog_calls;
static bool backlog_above;
static void note_backlog(void *ud, bool above) {
  (void)ud;
  backlog_calls++;
  backlog_above = above;
}
static const struct nvim_rpc_ops noop_ops = {noop_message, noop_eof,
                                             note_backlog};

// Reads what the channel wrote to the pipe and decodes it into w.
static void drain(int fd, struct nvim_rpc_decoder *d, struct wire *w) {
  char buf[65536];
  ssize_t n;
  char err[128];
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    nvim_rpc_decoder_feed(d, buf, (size_t)n, on_wire, w, err, sizeof(err));
}

// Answers every batch seen so far, as Neovim would once Lua handled it.
static void answer(int fd, struct wire *w) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  for (int i = 0; i < w->nids; i++) {
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_uint32(&pk, w->ids[i]);
    msgpack_pack_nil(&pk);
    msgpack_pack_nil(&pk);
  }
  w->nids = 0;
  ok(write(fd, sb.data, sb.size) == (ssize_t)sb.size, "answers written");
  msgpack_sbuffer_destroy(&sb);
}

// Runs the loop a few times, reading what the channel writes.
static void spin(uv_loop_t *loop, int fd, struct nvim_rpc_decoder *d,
                 struct wire *w) {
  for (int k = 0; k < 20; k++) {
    uv_run(loop, UV_RUN_NOWAIT);
    drain(fd, d, w);
  }
}

static void item(struct nvim_rpc *ch, int v, bool droppable) {
  msgpack_pack_int(nvim_rpc_begin_item(ch), v);
  nvim_rpc_end_item(ch, droppable);
}

// A channel with batches on a loop, writing to a non-blocking pipe the test
// reads with d (frames up to max bytes); the test answers through in[1].
static struct nvim_rpc *rig_open(uv_loop_t *loop, int in[2], int out[2],
                                 struct nvim_rpc_decoder *d, size_t max) {
  uv_loop_init(loop);
  ok(pipe(in) == 0 && pipe(out) == 0, "pipes");
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  char err[128];
  struct nvim_rpc *ch =
      nvim_rpc_open(loop, in[0], out[1], &noop_ops, NULL, err, sizeof(err));
  ok(ch != NULL, "channel opens");
  nvim_rpc_set_batch(ch, "nvim_exec_lua", "return batch");
  nvim_rpc_decoder_init(d, max);
  return ch;
}

// Closes what rig_open opened; every handle must be closed.
static void rig_close(uv_loop_t *loop, struct nvim_rpc *ch,
                      struct nvim_rpc_decoder *d, int in[2], int out[2]) {
  nvim_rpc_close(ch, NULL, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  ok(uv_loop_close(loop) == 0, "every handle closed");
  nvim_rpc_decoder_free(d);
  close(in[1]);
  close(out[0]);
}

static void test_batches(void) {
  uv_loop_t loop;
  int in[2], out[2];
  struct nvim_rpc_decoder d;
  struct nvim_rpc *ch = rig_open(&loop, in, out, &d, 1 << 20);
  struct wire w = {0};

  // Items, a request, an item: the frame goes at the end of the loop
  // iteration, after the items before it; what was added since follows.
  item(ch, 1, false);
  item(ch, 2, true);
  nvim_rpc_begin_request(ch, "m1", 0, NULL, NULL);
  nvim_rpc_end(ch, false);
  item(ch, 3, false);
  uv_run(&loop, UV_RUN_NOWAIT);
  drain(out[0], &d, &w);
  ok(w.n == 3, "three frames (%d)", w.n);
  ok(w.n == 3 && !strcmp(w.what[0], "batch:1,2"), "items first: %s", w.what[0]);
  ok(w.n == 3 && !strcmp(w.what[1], "request:m1"), "then the request: %s",
     w.what[1]);
  ok(w.n == 3 && !strcmp(w.what[2], "batch:3"), "then the later item: %s",
     w.what[2]);
  answer(in[1], &w);
  spin(&loop, out[0], &d, &w);
  // Items alone wait for the batch timer (a few ms) for company.
  uv_update_time(&loop);
  uint64_t t0 = uv_hrtime();
  item(ch, 4, false);
  drain(out[0], &d, &w);
  ok(w.n == 3, "an item alone is not written at once");
  while (w.n < 4 && uv_hrtime() - t0 < 1000000000u) {
    uv_run(&loop, UV_RUN_ONCE);
    drain(out[0], &d, &w);
  }
  ok(w.n == 4 && !strcmp(w.what[3], "batch:4"), "the timer sends it: %s",
     w.n == 4 ? w.what[3] : "(nothing)");
  ok(uv_hrtime() - t0 >= 1000000u, "after the batch delay (%llu µs)",
     (unsigned long long)(uv_hrtime() - t0) / 1000);
  answer(in[1], &w);
  spin(&loop, out[0], &d, &w);

  // A burst bigger than four batches: four go, the fifth waits for an
  // answer; nothing is lost, and the order holds.
  w = (struct wire){0};
  for (int i = 0; i < 20000; i++)
    item(ch, i, true);
  spin(&loop, out[0], &d, &w);
  ok(w.items == 16384, "four batches of 4096 sent before any answer (%zu)",
     w.items);
  answer(in[1], &w);
  spin(&loop, out[0], &d, &w);
  ok(w.items == 20000, "the rest after the answers (%zu)", w.items);
  ok(w.n == 5 && !strncmp(w.what[1], "batch:4096,", 11) &&
         !strncmp(w.what[4], "batch:16384,", 12),
     "in order: %s / %s", w.what[1], w.what[4]);
  answer(in[1], &w);
  spin(&loop, out[0], &d, &w);

  // A backlog over 2 MiB asks the producers to pause; answers resume them.
  w = (struct wire){0};
  backlog_calls = 0;
  static char blob[1024];
  memset(blob, 'x', sizeof(blob));
  for (int i = 0; i < 5000; i++) {
    msgpack_pack_str_with_body(nvim_rpc_begin_item(ch), blob, sizeof(blob));
    nvim_rpc_end_item(ch, false);
  }
  ok(backlog_calls == 1 && backlog_above, "paused above 2 MiB (%d calls)",
     backlog_calls);
  for (int k = 0; k < 50 && backlog_above; k++) {
    spin(&loop, out[0], &d, &w);
    answer(in[1], &w);
  }
  spin(&loop, out[0], &d, &w);
  ok(backlog_calls == 2 && !backlog_above, "resumed once Neovim caught up");
  ok(w.items == 5000, "every item arrived (%zu)", w.items);

  rig_close(&loop, ch, &d, in, out);
}

// Reads until n batches were seen (or the pipe is empty), leaving what
// follows them in the pipe as far as possible.
static void drain_batches(int fd, struct nvim_rpc_decoder *d, struct wire *w,
                          int n) {
  char buf[4096];
  ssize_t got;
  char err[128];
  while (w->nids < n && (got = read(fd, buf, sizeof(buf))) > 0)
    nvim_rpc_decoder_feed(d, buf, (size_t)got, on_wire, w, err, sizeof(err));
}

// The producers were paused; every batch is answered while a large frame
// that is not a batch (a permission request with a big diff) is still on
// its way: they resume once that frame is written, not never.
static void test_resume_after_write(void) {
  uv_loop_t loop;
  int in[2], out[2];
  struct nvim_rpc_decoder d;
  struct nvim_rpc *ch = rig_open(&loop, in, out, &d, 4 << 20);
  struct wire w = {0};
  backlog_calls = 0;
  backlog_above = false;

  // 2.5 MiB of items: paused; then a 1.5 MiB request, which sends the
  // gathered items first (one more batch) and follows them.
  static char blob[1024];
  memset(blob, 'x', sizeof(blob));
  for (int i = 0; i < 2500; i++) {
    msgpack_pack_str_with_body(nvim_rpc_begin_item(ch), blob, sizeof(blob));
    nvim_rpc_end_item(ch, false);
  }
  ok(backlog_calls == 1 && backlog_above, "paused above 2 MiB (%d calls)",
     backlog_calls);
  size_t big_len = (size_t)1536 * 1024;
  char *big = malloc(big_len);
  ok(big != NULL, "memory for the request");
  if (!big)
    return;
  memset(big, 'y', big_len);
  msgpack_pack_str_with_body(
      nvim_rpc_begin_request(ch, "permission", 1, NULL, NULL), big, big_len);
  nvim_rpc_end(ch, false);
  free(big);

  // Neovim reads the batches and answers them; most of the request is
  // still waiting to be written.
  for (int k = 0; k < 200 && w.nids < 5; k++) {
    uv_run(&loop, UV_RUN_NOWAIT);
    drain_batches(out[0], &d, &w, 5);
  }
  ok(w.nids == 5, "five batches seen (%d)", w.nids);
  answer(in[1], &w);
  for (int k = 0; k < 20; k++)
    uv_run(&loop, UV_RUN_NOWAIT);
  ok(nvim_rpc_pending_bytes(ch) >= (size_t)1024 * 1024,
     "the request still waits (%zu bytes)", nvim_rpc_pending_bytes(ch));
  ok(backlog_above, "still paused while it waits");

  // Neovim reads the rest: the producers resume without another answer.
  for (int k = 0; k < 500 && w.n < 6; k++)
    spin(&loop, out[0], &d, &w);
  spin(&loop, out[0], &d, &w);
  ok(w.n == 6 && !strcmp(w.what[5], "request:permission"),
     "the request arrived after the batches (%s)",
     w.n == 6 ? w.what[5] : "(missing)");
  ok(w.items == 2500, "every item arrived (%zu)", w.items);
  ok(backlog_calls == 2 && !backlog_above,
     "resumed once the request was written (%d calls)", backlog_calls);

  rig_close(&loop, ch, &d, in, out);
}

// ---- text items: the chunks of one message joined ----

// What Neovim gets: every batch item as "tag:text" (a text item [tag, str])
// or "#n" (an int item), separated by '|'; requests as "request:m". The
// texts of tag 1 are also kept whole, in order.
struct texts {
  char log[512];
  size_t len;
  size_t items, longest;
  char *all; // tag 1's texts, joined
  size_t nall, capall;
  uint32_t ids[64];
  int nids;
};

// Appends at most 24 bytes of s to the log.
static void texts_put(struct texts *t, const char *s, size_t n) {
  n = n > 24 ? 24 : n;
  if (t->len + n < sizeof(t->log)) {
    memcpy(t->log + t->len, s, n);
    t->len += n;
  }
}

static void on_texts(void *ud, const struct nvim_rpc_msg *m) {
  struct texts *t = ud;
  const msgpack_object *p = m->params;
  if (m->type != NVIM_RPC_REQUEST)
    return;
  if (!(p->via.array.size == 2 &&
        nvim_rpc_str_eq(&p->via.array.ptr[0], "return batch"))) {
    texts_put(t, "request:", 8);
    texts_put(t, m->method, m->method_len);
    texts_put(t, "|", 1);
    return;
  }
  if (t->nids < 64)
    t->ids[t->nids++] = m->msgid;
  const msgpack_object *list = &p->via.array.ptr[1].via.array.ptr[0];
  for (uint32_t i = 0; i < list->via.array.size; i++) {
    const msgpack_object *o = &list->via.array.ptr[i];
    t->items++;
    if (o->type != MSGPACK_OBJECT_ARRAY) {
      char n[24];
      snprintf(n, sizeof(n), "#%d|", (int)o->via.i64);
      texts_put(t, n, strlen(n));
      continue;
    }
    int tag = (int)o->via.array.ptr[0].via.i64;
    const msgpack_object_str *str = &o->via.array.ptr[1].via.str;
    char head[8];
    snprintf(head, sizeof(head), "%d:", tag);
    texts_put(t, head, strlen(head));
    texts_put(t, str->ptr, str->size);
    texts_put(t, "|", 1);
    if (str->size > t->longest)
      t->longest = str->size;
    if (tag == 1) {
      if (t->nall + str->size > t->capall) {
        t->capall = (t->nall + str->size) * 2;
        t->all = realloc(t->all, t->capall);
      }
      memcpy(t->all + t->nall, str->ptr, str->size);
      t->nall += str->size;
    }
  }
}

static void text_item(struct nvim_rpc *ch, int tag, const char *s, size_t n) {
  msgpack_packer *pk = nvim_rpc_begin_text_item(ch);
  msgpack_pack_array(pk, 2);
  msgpack_pack_int(pk, tag);
  nvim_rpc_end_text_item(ch, s, n, true);
}

// Runs the loop and reads what the channel wrote, answering every batch.
static void texts_spin(uv_loop_t *loop, int in, int out,
                       struct nvim_rpc_decoder *d, struct texts *t) {
  char buf[65536], err[128];
  for (int k = 0; k < 50; k++) {
    uv_run(loop, UV_RUN_NOWAIT);
    ssize_t n;
    while ((n = read(out, buf, sizeof(buf))) > 0)
      nvim_rpc_decoder_feed(d, buf, (size_t)n, on_texts, t, err, sizeof(err));
    struct wire w = {0};
    memcpy(w.ids, t->ids, sizeof(t->ids));
    w.nids = t->nids;
    t->nids = 0;
    if (w.nids)
      answer(in, &w);
  }
}

static void test_text_items(void) {
  uv_loop_t loop;
  int in[2], out[2];
  struct nvim_rpc_decoder d;
  struct nvim_rpc *ch = rig_open(&loop, in, out, &d, 4 << 20);
  struct texts t = {0};

  // Consecutive texts of one head are one item; another head, an item or
  // a frame between them ends it, and the order holds.
  text_item(ch, 1, "ab", 2);
  text_item(ch, 1, "c", 1);
  text_item(ch, 1, "", 0);
  text_item(ch, 1, "d", 1);
  text_item(ch, 2, "x", 1);
  text_item(ch, 2, "y", 1);
  text_item(ch, 1, "e", 1);
  item(ch, 7, true);
  text_item(ch, 1, "f", 1);
  text_item(ch, 1, "g", 1);
  ok(nvim_rpc_pending_bytes(ch) > 0, "the open text counts as waiting (%zu)",
     nvim_rpc_pending_bytes(ch));
  nvim_rpc_begin_request(ch, "m", 0, NULL, NULL);
  nvim_rpc_end(ch, false);
  text_item(ch, 1, "h", 1);
  texts_spin(&loop, in[1], out[0], &d, &t);
  t.log[t.len < sizeof(t.log) ? t.len : sizeof(t.log) - 1] = '\0';
  is_str(t.log, "1:abcd|2:xy|1:e|#7|1:fg|request:m|1:h|",
         "joined per message, in order, around the others");

  // A long stream: every byte arrives, in order, in texts no longer than a
  // batch; far fewer items than chunks.
  t.len = t.items = t.longest = t.nall = 0;
  static char chunk[1000];
  size_t sent = 0, nchunks = 3000;
  char *want = malloc(nchunks * sizeof(chunk));
  ok(want != NULL, "memory");
  if (!want)
    return;
  for (size_t i = 0; i < nchunks; i++) {
    for (size_t k = 0; k < sizeof(chunk); k++)
      chunk[k] = (char)('a' + (i + k) % 26);
    memcpy(want + sent, chunk, sizeof(chunk));
    sent += sizeof(chunk);
    text_item(ch, 1, chunk, sizeof(chunk));
    if (i % 500 == 0)
      texts_spin(&loop, in[1], out[0], &d, &t);
  }
  texts_spin(&loop, in[1], out[0], &d, &t);
  is_size(t.nall, sent, "every byte arrived");
  ok(t.nall == sent && memcmp(t.all, want, sent) == 0, "in order");
  ok(t.longest <= (size_t)256 * 1024, "no text longer than a batch (%zu)",
     t.longest);
  ok(t.items > 0 && t.items <= 40, "%zu items for %zu chunks", t.items,
     nchunks);
  free(want);
  free(t.all);

  rig_close(&loop, ch, &d, in, out);
}

// ---- flow control under random interleavings ----

// What "Neovim" saw of the random run: every request id not answered yet
// (batches and frames, in order: Neovim answers in order), the int items
// (in order, each one more than the last) and the bytes of text.
struct sim {
  uint32_t ids[4096];
  size_t nids;
  uint64_t ints, text;
  bool disorder;
};

static void on_sim(void *ud, const struct nvim_rpc_msg *m) {
  struct sim *v = ud;
  if (m->type != NVIM_RPC_REQUEST)
    return;
  if (v->nids < sizeof(v->ids) / sizeof(*v->ids))
    v->ids[v->nids++] = m->msgid;
  const msgpack_object *p = m->params;
  if (!(p->via.array.size == 2 &&
        nvim_rpc_str_eq(&p->via.array.ptr[0], "return batch")))
    return;
  const msgpack_object *list = &p->via.array.ptr[1].via.array.ptr[0];
  for (uint32_t i = 0; i < list->via.array.size; i++) {
    const msgpack_object *o = &list->via.array.ptr[i];
    if (o->type == MSGPACK_OBJECT_ARRAY) // a text item [tag, text]
      v->text += o->via.array.ptr[1].via.str.size;
    else if (o->via.u64 != v->ints++)
      v->disorder = true;
  }
}

// Neovim reads at most max bytes of what the channel wrote.
static void sim_read(int fd, struct nvim_rpc_decoder *d, struct sim *v,
                     size_t max) {
  char buf[65536], err[128];
  ssize_t n;
  while (max > 0 &&
         (n = read(fd, buf, max < sizeof(buf) ? max : sizeof(buf))) > 0) {
    max -= (size_t)n;
    nvim_rpc_decoder_feed(d, buf, (size_t)n, on_sim, v, err, sizeof(err));
  }
}

// Neovim answers the k oldest requests it has read. Returns false when the
// answers could not be written.
static bool sim_answer(int fd, struct sim *v, size_t k) {
  k = k < v->nids ? k : v->nids;
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  for (size_t i = 0; i < k; i++) {
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_uint32(&pk, v->ids[i]);
    msgpack_pack_nil(&pk);
    msgpack_pack_nil(&pk);
  }
  memmove(v->ids, v->ids + k, (v->nids - k) * sizeof(*v->ids));
  v->nids -= k;
  bool written = write(fd, sb.data, sb.size) == (ssize_t)sb.size;
  msgpack_sbuffer_destroy(&sb);
  return written;
}

static uint64_t sim_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

// Producers that stop when asked (the rest of the agent's read still comes
// in), frames of every kind and size (requests of up to 3 MiB, as a
// permission request with a large diff), a Neovim that reads and answers
// in random steps, the batch timer: whatever the order of answers, writes
// and items, once the producers stop and Neovim catches up, nothing waits
// and they are not left paused. (The producers stayed paused for good in
// several of these runs when only an answer could resume them.)
static void test_random_flow(void) {
  static char fill[3 << 20];
  memset(fill, 'x', sizeof(fill));
  int stuck = 0, disorder = 0, lost = 0, paused = 0, failed_writes = 0;
  int pauses = 0;
  for (uint64_t seed = 1; seed <= 12; seed++) {
    uint64_t rs = seed * 0x9e3779b97f4a7c15ull;
    uv_loop_t loop;
    int in[2], out[2];
    struct nvim_rpc_decoder d;
    struct nvim_rpc *ch = rig_open(&loop, in, out, &d, 8 << 20);
    static struct sim v;
    memset(&v, 0, sizeof(v));
    backlog_calls = 0;
    backlog_above = false;
    uint64_t ints = 0, text = 0;
    for (int step = 0; step < 1500; step++) {
      uint64_t r = sim_rand(&rs) % 100;
      if (r < 45 && !backlog_above) {
        // One read of the agent: what it holds still comes after a pause.
        size_t room = 65536;
        for (int i = 0, n = 1 + (int)(sim_rand(&rs) % 40); i < n && room; i++) {
          uint64_t kind = sim_rand(&rs) % 20;
          size_t sz = 10;
          if (kind < 10) {
            sz = sim_rand(&rs) % 40000;
            msgpack_packer *pk = nvim_rpc_begin_text_item(ch);
            msgpack_pack_array(pk, 2);
            msgpack_pack_int(pk, (int)(sim_rand(&rs) % 2));
            nvim_rpc_end_text_item(ch, fill, sz, false);
            text += sz;
          } else if (kind < 18) {
            msgpack_pack_uint64(nvim_rpc_begin_item(ch), ints++);
            nvim_rpc_end_item(ch, false);
          } else if (kind < 19) {
            sz = sim_rand(&rs) % 8 == 0 ? sim_rand(&rs) % sizeof(fill)
                                        : sim_rand(&rs) % 5000;
            msgpack_pack_str_with_body(
                nvim_rpc_begin_request(ch, "permission", 1, NULL, NULL), fill,
                sz);
            nvim_rpc_end(ch, false);
          } else {
            nvim_rpc_begin_notify(ch, "n", 0);
            nvim_rpc_end(ch, false);
          }
          if (backlog_above)
            room = room > sz ? room - sz : 0;
        }
      } else if (r < 75) {
        sim_read(out[0], &d, &v, sim_rand(&rs) % 400000);
      } else if (r < 90) {
        failed_writes += !sim_answer(in[1], &v, sim_rand(&rs) % 6);
      } else if (r == 99) {
        usleep(2500); // the batch timer fires
      }
      uv_run(&loop, UV_RUN_NOWAIT);
    }
    // The producers have stopped; Neovim reads and answers everything
    // until nothing is left (the batch timer has had time to fire).
    for (int k = 0, quiet = 0; k < 5000 && quiet < 3; k++) {
      uv_run(&loop, UV_RUN_NOWAIT);
      sim_read(out[0], &d, &v, SIZE_MAX);
      failed_writes += !sim_answer(in[1], &v, v.nids);
      if (k % 100 == 99) {
        usleep(3000);
        quiet = nvim_rpc_pending_bytes(ch) == 0 && v.nids == 0 ? quiet + 1 : 0;
      }
    }
    pauses += backlog_calls / 2;
    stuck += nvim_rpc_pending_bytes(ch) != 0;
    paused += backlog_above;
    disorder += v.disorder;
    lost += v.ints != ints || v.text != text;
    if (backlog_above || nvim_rpc_pending_bytes(ch) || v.ints != ints ||
        v.text != text)
      printf("# seed %d: paused %d, %zu bytes waiting, %llu/%llu items, "
             "%llu/%llu bytes of text, %d pauses and resumes\n",
             (int)seed, backlog_above, nvim_rpc_pending_bytes(ch),
             (unsigned long long)v.ints, (unsigned long long)ints,
             (unsigned long long)v.text, (unsigned long long)text,
             backlog_calls);
    rig_close(&loop, ch, &d, in, out);
  }
  ok(failed_writes == 0, "answers written (%d failed)", failed_writes);
  ok(pauses >= 12 * 5, "the producers were paused and resumed (%d times)",
     pauses);
  ok(paused == 0, "never left paused once Neovim caught up (%d of 12 runs)",
     paused);
  ok(stuck == 0, "nothing left waiting (%d of 12 runs)", stuck);
  ok(lost == 0 && disorder == 0,
     "every item and every byte of text arrived, in order (%d lost, %d out "
     "of order)",
     lost, disorder);
}

int main(void) {
  test_batches();
  test_resume_after_write();
  test_text_items();
  test_random_flow();
  test_splits();
  test_invalid_shapes();
  test_broken_stream();
  test_str_eq();
  return done_testing();
}
