#include "nvim_rpc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/mem.h"

// Frames waiting in the pipe beyond this are a stalled Neovim: droppable
// frames (streaming updates) are then discarded rather than queued.
#define NVIM_RPC_MAX_QUEUED ((size_t)64 * 1024 * 1024)
// Outstanding requests to Neovim; more means Neovim stopped answering.
#define NVIM_RPC_MAX_CALLS 65536
#define NVIM_RPC_READ_SIZE 65536
// A batch of items becomes a frame once it holds this many bytes or items,
// so that Neovim handles a long burst in slices it can interleave with input.
#define NVIM_RPC_BATCH_BYTES ((size_t)256 * 1024)
#define NVIM_RPC_BATCH_ITEMS 4096
// Items wait this long for others (a frame, or a full batch, sends them at
// once): under a flood Neovim wakes up per batch, not per loop iteration.
#define NVIM_RPC_BATCH_MS 2
// Batches are requests: at most this many wait for Neovim's answer, the
// next one gathers meanwhile. Neovim thus never has more than a few batches
// queued ahead of a keypress or another client's request.
#define NVIM_RPC_BATCHES_OUT 4
// The backlog (gathered, unanswered and unwritten bytes) above which the
// producers are asked to pause (on_backlog), and below which they resume.
// Low enough that a batch held back by the answers it waits for stays near
// the batch size (Lua handles it in one go).
#define NVIM_RPC_HIGH_WATER ((size_t)2 * 1024 * 1024)
#define NVIM_RPC_LOW_WATER ((size_t)1024 * 1024)

struct call {
  uint32_t msgid;          // id of our request
  nvim_rpc_response_cb cb; // gets the response
  void *ud;                // for cb
};

struct write_req {
  uv_write_t req; // must stay first: the request is freed through it
  char *data;     // the frames, owned
  size_t len;     // bytes in data
};

struct nvim_rpc {
  uv_loop_t *loop;
  uv_pipe_t in;           // Neovim → broker
  uv_pipe_t out;          // broker → Neovim
  uv_idle_t flush;        // writes the frames of one loop iteration together
  uv_timer_t batch_timer; // sends the items gathered for NVIM_RPC_BATCH_MS
  struct nvim_rpc_decoder dec;
  msgpack_sbuffer sbuf; // frames not yet handed to the pipe
  msgpack_packer pk;    // packs into sbuf
  msgpack_sbuffer ibuf; // items of the batch being gathered
  msgpack_packer ipk;   // packs into ibuf
  size_t nitems;        // items in ibuf
  size_t item_start;    // offset in ibuf of the item being built
  // The text item still open to more text (nvim_rpc_end_text_item): its
  // packed bytes up to its string, and the string so far. It is the last
  // item of the batch; anything added after it closes it into ibuf.
  msgpack_sbuffer thead; // packed by the caller, for the item being built
  msgpack_packer tpk;    // packs into thead
  msgpack_sbuffer ohead; // the open item's bytes up to its string
  msgpack_sbuffer otext; // its string
  bool open_text;        // there is one
  char *batch_method;    // the batch frame: [0, id, method, [head, [[items]]]]
  char *batch_head;
  size_t *out_sizes;   // bytes of each batch Neovim has not answered, oldest
  size_t nout, capout; // first
  size_t out_bytes;    // their sum
  bool above;          // the backlog went above the high-water mark
  size_t frame_start;  // offset in sbuf of the frame being built
  bool frame_failed;   // the frame being built must not be sent
  struct call failed;  // its callback, run once the frame is discarded
  size_t queued;       // bytes handed to the pipe, not yet written
  size_t dropped;      // droppable frames discarded so far
  uint32_t next_msgid;
  struct call *calls; // outstanding requests, oldest first
  size_t ncalls;
  size_t capcalls;
  const struct nvim_rpc_ops *ops;
  void *ud;
  int open_handles; // handles not yet closed
  bool closing;
  void (*on_closed)(void *);
  void *closed_ud;
  char rbuf[NVIM_RPC_READ_SIZE];
};

// ---- decoder (pure) ----

int nvim_rpc_decoder_init(struct nvim_rpc_decoder *d, size_t max_message) {
  d->max_message = max_message;
  msgpack_unpacked_init(&d->result);
  return msgpack_unpacker_init(&d->unpacker, 64 * 1024) ? 0 : -1;
}

void nvim_rpc_decoder_free(struct nvim_rpc_decoder *d) {
  msgpack_unpacked_destroy(&d->result);
  msgpack_unpacker_destroy(&d->unpacker);
}

bool nvim_rpc_str_eq(const msgpack_object *o, const char *s) {
  size_t n = strlen(s);
  return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
         memcmp(o->via.str.ptr, s, n) == 0;
}

static bool get_msgid(const msgpack_object *o, uint32_t *out) {
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > UINT32_MAX)
    return false;
  *out = (uint32_t)o->via.u64;
  return true;
}

static int invalid(char *err, size_t errlen, const char *why) {
  snprintf(err, errlen, "invalid msgpack-rpc message: %s", why);
  return -1;
}

int nvim_rpc_validate(const msgpack_object *o, struct nvim_rpc_msg *msg,
                      char *err, size_t errlen) {
  memset(msg, 0, sizeof(*msg));
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 3)
    return invalid(err, errlen, "not an array of 3 or 4");
  const msgpack_object *a = o->via.array.ptr;
  uint32_t n = o->via.array.size;
  if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[0].via.u64 > 2)
    return invalid(err, errlen, "bad type");
  msg->type = (enum nvim_rpc_type)a[0].via.u64;
  if (msg->type == NVIM_RPC_NOTIFICATION) {
    if (n != 3)
      return invalid(err, errlen, "notification is not 3 long");
    a--; // a notification is a request without msgid: share the checks
  } else {
    if (n != 4)
      return invalid(err, errlen, "request/response is not 4 long");
    if (!get_msgid(&a[1], &msg->msgid))
      return invalid(err, errlen, "bad msgid");
  }
  if (msg->type == NVIM_RPC_RESPONSE) {
    msg->error = &a[2];
    msg->result = &a[3];
    return 0;
  }
  if (a[2].type != MSGPACK_OBJECT_STR && a[2].type != MSGPACK_OBJECT_BIN)
    return invalid(err, errlen, "method is not a string");
  if (a[3].type != MSGPACK_OBJECT_ARRAY)
    return invalid(err, errlen, "params is not an array");
  msg->method = a[2].via.str.ptr;
  msg->method_len = a[2].via.str.size;
  msg->params = &a[3];
  return 0;
}

int nvim_rpc_decoder_feed(struct nvim_rpc_decoder *d, const char *data,
                          size_t n, nvim_rpc_msg_cb cb, void *ud, char *err,
                          size_t errlen) {
  if (n && !msgpack_unpacker_reserve_buffer(&d->unpacker, n)) {
    snprintf(err, errlen, "out of memory buffering %zu bytes", n);
    return -1;
  }
  memcpy(msgpack_unpacker_buffer(&d->unpacker), data, n);
  msgpack_unpacker_buffer_consumed(&d->unpacker, n);
  for (;;) {
    msgpack_unpack_return r = msgpack_unpacker_next(&d->unpacker, &d->result);
    if (r == MSGPACK_UNPACK_CONTINUE) {
      if (msgpack_unpacker_message_size(&d->unpacker) > d->max_message) {
        snprintf(err, errlen, "frame larger than %zu bytes", d->max_message);
        return -1;
      }
      return 0;
    }
    if (r != MSGPACK_UNPACK_SUCCESS) {
      snprintf(err, errlen, "malformed msgpack stream (%d)", (int)r);
      return -1;
    }
    struct nvim_rpc_msg msg;
    char why[128];
    if (nvim_rpc_validate(&d->result.data, &msg, why, sizeof(why)) != 0) {
      LOG_W("skipping frame from Neovim: %s", why);
      continue;
    }
    cb(ud, &msg);
  }
}

// ---- channel ----

// Bytes of the open text item once closed (its string's header at most 5).
static size_t open_text_bytes(const struct nvim_rpc *ch) {
  return ch->open_text ? ch->ohead.size + 5 + ch->otext.size : 0;
}

// Closes the open text item into the batch: from here on it is an item
// like the others.
static void close_text(struct nvim_rpc *ch) {
  if (!ch->open_text)
    return;
  ch->open_text = false;
  msgpack_sbuffer_write(&ch->ibuf, ch->ohead.data, ch->ohead.size);
  msgpack_pack_str(&ch->ipk, (uint32_t)ch->otext.size);
  if (ch->otext.size)
    msgpack_pack_str_body(&ch->ipk, ch->otext.data, ch->otext.size);
  ch->ohead.size = ch->otext.size = 0;
  ch->nitems++;
}

static void call_fail_all(struct nvim_rpc *ch) {
  // A callback may start new requests; they fail at once as we are closing.
  while (ch->ncalls) {
    struct call c = ch->calls[0];
    memmove(ch->calls, ch->calls + 1, --ch->ncalls * sizeof(*ch->calls));
    if (c.cb)
      c.cb(c.ud, NULL, NULL);
  }
}

static void on_response(struct nvim_rpc *ch, const struct nvim_rpc_msg *msg) {
  // Neovim answers in order, so the match is nearly always the first entry.
  for (size_t i = 0; i < ch->ncalls; i++) {
    if (ch->calls[i].msgid != msg->msgid)
      continue;
    struct call c = ch->calls[i];
    memmove(ch->calls + i, ch->calls + i + 1,
            (ch->ncalls - i - 1) * sizeof(*ch->calls));
    ch->ncalls--;
    if (c.cb)
      c.cb(c.ud, msg->error, msg->result);
    return;
  }
  LOG_W("response to unknown msgid %u from Neovim", msg->msgid);
}

static void on_decoded(void *ud, const struct nvim_rpc_msg *msg) {
  struct nvim_rpc *ch = ud;
  if (ch->closing)
    return;
  if (msg->type == NVIM_RPC_RESPONSE)
    on_response(ch, msg);
  else
    ch->ops->on_message(ch->ud, msg);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  struct nvim_rpc *ch = h->data;
  *buf = uv_buf_init(ch->rbuf, sizeof(ch->rbuf));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  struct nvim_rpc *ch = s->data;
  if (nread == 0)
    return;
  if (nread < 0) {
    LOG_I("Neovim channel closed: %s", uv_strerror((int)nread));
    uv_read_stop(s);
    ch->ops->on_eof(ch->ud);
    return;
  }
  char err[160];
  if (nvim_rpc_decoder_feed(&ch->dec, buf->base, (size_t)nread, on_decoded, ch,
                            err, sizeof(err)) != 0) {
    LOG_E("Neovim channel broken: %s", err);
    uv_read_stop(s);
    ch->ops->on_eof(ch->ud);
  }
}

static void maybe_resume(struct nvim_rpc *ch);

static void write_cb(uv_write_t *req, int status) {
  struct write_req *w = (struct write_req *)req;
  struct nvim_rpc *ch = req->handle->data;
  ch->queued -= w->len;
  if (status < 0 && status != UV_ECANCELED)
    LOG_W("write to Neovim failed: %s", uv_strerror(status));
  free(w->data);
  free(w);
  // What was written counts in the backlog until here: a frame that is not
  // a batch (a permission request with a large diff) may be the last thing
  // Neovim was behind on, with no answer left to come that would resume.
  maybe_resume(ch);
}

static void batch_answered(void *ud, const msgpack_object *error,
                           const msgpack_object *result);

// The id of our next request (never 0).
static uint32_t next_msgid(struct nvim_rpc *ch) {
  uint32_t id = ch->next_msgid++;
  if (ch->next_msgid == 0)
    ch->next_msgid = 1;
  return id;
}

// Records a request whose answer goes to cb.
static void add_call(struct nvim_rpc *ch, uint32_t msgid,
                     nvim_rpc_response_cb cb, void *ud) {
  if (ch->ncalls == ch->capcalls) {
    ch->capcalls = ch->capcalls ? ch->capcalls * 2 : 16;
    ch->calls = xrealloc(ch->calls, ch->capcalls * sizeof(*ch->calls));
  }
  ch->calls[ch->ncalls++] = (struct call){msgid, cb, ud};
}

// Appends the gathered items to the frames as one request, unless enough
// batches wait for their answers already (force: send anyway, to keep the
// order with a frame that follows).
static void close_batch(struct nvim_rpc *ch, bool force) {
  if ((ch->nitems == 0 && !ch->open_text) || ch->closing)
    return;
  if (!force && ch->nout >= NVIM_RPC_BATCHES_OUT)
    return; // sent when an answer comes (batch_answered)
  close_text(ch);
  uv_timer_stop(&ch->batch_timer);
  uint32_t msgid = next_msgid(ch);
  add_call(ch, msgid, batch_answered, ch);
  if (ch->nout == ch->capout) {
    ch->capout = ch->capout ? ch->capout * 2 : 8;
    ch->out_sizes = xrealloc(ch->out_sizes, ch->capout * sizeof(size_t));
  }
  ch->out_sizes[ch->nout++] = ch->ibuf.size;
  ch->out_bytes += ch->ibuf.size;
  msgpack_pack_array(&ch->pk, 4);
  msgpack_pack_uint32(&ch->pk, NVIM_RPC_REQUEST);
  msgpack_pack_uint32(&ch->pk, msgid);
  msgpack_pack_str_with_body(&ch->pk, ch->batch_method,
                             strlen(ch->batch_method));
  msgpack_pack_array(&ch->pk, 2);
  msgpack_pack_str_with_body(&ch->pk, ch->batch_head, strlen(ch->batch_head));
  msgpack_pack_array(&ch->pk, 1); // the items are one argument: a list
  msgpack_pack_array(&ch->pk, (uint32_t)ch->nitems);
  msgpack_sbuffer_write(&ch->sbuf, ch->ibuf.data, ch->ibuf.size);
  ch->ibuf.size = 0;
  ch->nitems = 0;
}

void nvim_rpc_flush(struct nvim_rpc *ch) {
  close_batch(ch, false);
  if (ch->sbuf.size == 0 || ch->closing)
    return;
  struct write_req *w = xmalloc(sizeof(*w));
  w->len = ch->sbuf.size;
  w->data = msgpack_sbuffer_release(&ch->sbuf);
  ch->frame_start = 0;
  uv_buf_t b = uv_buf_init(w->data, (unsigned)w->len);
  ch->queued += w->len;
  int r = uv_write(&w->req, (uv_stream_t *)&ch->out, &b, 1, write_cb);
  if (r < 0) {
    LOG_W("write to Neovim failed: %s", uv_strerror(r));
    ch->queued -= w->len;
    free(w->data);
    free(w);
  }
}

static void flush_cb(uv_idle_t *h) {
  struct nvim_rpc *ch = h->data;
  uv_idle_stop(h);
  nvim_rpc_flush(ch);
}

struct nvim_rpc *nvim_rpc_open(uv_loop_t *loop, int in_fd, int out_fd,
                               const struct nvim_rpc_ops *ops, void *ud,
                               char *err, size_t errlen) {
  struct nvim_rpc *ch = xcalloc(1, sizeof(*ch));
  ch->loop = loop;
  ch->ops = ops;
  ch->ud = ud;
  ch->next_msgid = 1;
  msgpack_sbuffer_init(&ch->sbuf);
  msgpack_packer_init(&ch->pk, &ch->sbuf, msgpack_sbuffer_write);
  msgpack_sbuffer_init(&ch->ibuf);
  msgpack_packer_init(&ch->ipk, &ch->ibuf, msgpack_sbuffer_write);
  msgpack_sbuffer_init(&ch->thead);
  msgpack_packer_init(&ch->tpk, &ch->thead, msgpack_sbuffer_write);
  msgpack_sbuffer_init(&ch->ohead);
  msgpack_sbuffer_init(&ch->otext);
  ch->batch_method = xstrdup("nvim_exec_lua");
  ch->batch_head = xstrdup("return ...");
  if (nvim_rpc_decoder_init(&ch->dec, 64 * 1024 * 1024) != 0) {
    snprintf(err, errlen, "cannot create the msgpack unpacker");
    goto fail_decoder;
  }
  uv_pipe_init(loop, &ch->in, 0);
  uv_pipe_init(loop, &ch->out, 0);
  uv_idle_init(loop, &ch->flush);
  uv_timer_init(loop, &ch->batch_timer);
  ch->in.data = ch->out.data = ch->flush.data = ch->batch_timer.data = ch;
  ch->open_handles = 4;
  int r = uv_pipe_open(&ch->in, in_fd);
  if (r == 0)
    r = uv_pipe_open(&ch->out, out_fd);
  if (r == 0)
    r = uv_read_start((uv_stream_t *)&ch->in, alloc_cb, read_cb);
  if (r != 0) {
    snprintf(err, errlen, "cannot use stdin/stdout as pipes: %s",
             uv_strerror(r));
    nvim_rpc_close(ch, NULL, NULL);
    return NULL;
  }
  return ch;

fail_decoder:
  msgpack_sbuffer_destroy(&ch->sbuf);
  msgpack_sbuffer_destroy(&ch->ibuf);
  msgpack_sbuffer_destroy(&ch->thead);
  msgpack_sbuffer_destroy(&ch->ohead);
  msgpack_sbuffer_destroy(&ch->otext);
  free(ch->batch_method);
  free(ch->batch_head);
  free(ch);
  return NULL;
}

static void schedule_flush(struct nvim_rpc *ch);

static void begin_frame(struct nvim_rpc *ch) {
  // Items gathered so far go first: frames keep the order they were made in.
  close_batch(ch, true);
  ch->frame_start = ch->sbuf.size;
  ch->frame_failed = false;
}

msgpack_packer *nvim_rpc_begin_request(struct nvim_rpc *ch, const char *method,
                                       uint32_t nparams,
                                       nvim_rpc_response_cb cb, void *cb_ud) {
  begin_frame(ch);
  uint32_t msgid = next_msgid(ch);
  if (ch->ncalls >= NVIM_RPC_MAX_CALLS || ch->closing) {
    // Still build the frame (the caller packs into it) but mark it failed:
    // nvim_rpc_end drops frames whose call could not be recorded.
    LOG_E("too many requests waiting for Neovim (%zu)", ch->ncalls);
    // The callback runs in nvim_rpc_end, after the frame is discarded:
    // running it now could start another frame inside this one.
    ch->frame_failed = true;
    ch->failed = (struct call){0, cb, cb_ud};
    msgid = 0;
  } else {
    add_call(ch, msgid, cb, cb_ud);
  }
  msgpack_pack_array(&ch->pk, 4);
  msgpack_pack_uint32(&ch->pk, NVIM_RPC_REQUEST);
  msgpack_pack_uint32(&ch->pk, msgid);
  msgpack_pack_str_with_body(&ch->pk, method, strlen(method));
  msgpack_pack_array(&ch->pk, nparams);
  return &ch->pk;
}

msgpack_packer *nvim_rpc_begin_notify(struct nvim_rpc *ch, const char *method,
                                      uint32_t nparams) {
  begin_frame(ch);
  msgpack_pack_array(&ch->pk, 3);
  msgpack_pack_uint32(&ch->pk, NVIM_RPC_NOTIFICATION);
  msgpack_pack_str_with_body(&ch->pk, method, strlen(method));
  msgpack_pack_array(&ch->pk, nparams);
  return &ch->pk;
}

msgpack_packer *nvim_rpc_begin_response(struct nvim_rpc *ch, uint32_t msgid) {
  begin_frame(ch);
  msgpack_pack_array(&ch->pk, 4);
  msgpack_pack_uint32(&ch->pk, NVIM_RPC_RESPONSE);
  msgpack_pack_uint32(&ch->pk, msgid);
  return &ch->pk;
}

// Whether a finished frame or item is discarded: the channel is closing,
// or it may be dropped and `waiting` bytes exceed the bound (counted, and
// logged every 1000).
static bool discard(struct nvim_rpc *ch, bool droppable, size_t waiting) {
  if (!ch->closing && !(droppable && waiting > NVIM_RPC_MAX_QUEUED))
    return false;
  if (!ch->closing && ch->dropped++ % 1000 == 0)
    LOG_W("Neovim is not reading: dropped %zu update frames (%zu bytes "
          "waiting)",
          ch->dropped, ch->queued);
  return true;
}

void nvim_rpc_end(struct nvim_rpc *ch, bool droppable) {
  if (ch->frame_failed) {
    ch->sbuf.size = ch->frame_start;
    ch->frame_failed = false;
    // The batch begin_frame closed before it is a request Neovim must
    // get: its answer is what lets the next batch go.
    if (ch->sbuf.size)
      schedule_flush(ch);
    if (ch->failed.cb)
      ch->failed.cb(ch->failed.ud, NULL, NULL);
    return;
  }
  if (discard(ch, droppable, ch->queued + ch->sbuf.size))
    ch->sbuf.size = ch->frame_start;
  if (ch->sbuf.size)
    schedule_flush(ch);
}

static void schedule_flush(struct nvim_rpc *ch) {
  if (!ch->closing && !uv_is_active((uv_handle_t *)&ch->flush))
    uv_idle_start(&ch->flush, flush_cb);
}

static void batch_timer_cb(uv_timer_t *t) {
  nvim_rpc_flush(t->data);
}

void nvim_rpc_set_batch(struct nvim_rpc *ch, const char *method,
                        const char *head) {
  close_batch(ch, true);
  free(ch->batch_method);
  free(ch->batch_head);
  ch->batch_method = xstrdup(method);
  ch->batch_head = xstrdup(head);
}

msgpack_packer *nvim_rpc_begin_item(struct nvim_rpc *ch) {
  close_text(ch); // items keep their order
  ch->item_start = ch->ibuf.size;
  return &ch->ipk;
}

static void item_added(struct nvim_rpc *ch);

void nvim_rpc_end_item(struct nvim_rpc *ch, bool droppable) {
  if (discard(ch, droppable, nvim_rpc_pending_bytes(ch))) {
    ch->ibuf.size = ch->item_start;
    return;
  }
  ch->nitems++;
  item_added(ch);
}

msgpack_packer *nvim_rpc_begin_text_item(struct nvim_rpc *ch) {
  ch->thead.size = 0;
  return &ch->tpk;
}

void nvim_rpc_end_text_item(struct nvim_rpc *ch, const char *text, size_t len,
                            bool droppable) {
  if (discard(ch, droppable, nvim_rpc_pending_bytes(ch)))
    return;
  // The same item up to its string (same event, session, message...): the
  // text continues the open one's, within one batch's size.
  bool same = ch->open_text && ch->ohead.size == ch->thead.size &&
              memcmp(ch->ohead.data, ch->thead.data, ch->thead.size) == 0 &&
              ch->otext.size + len <= NVIM_RPC_BATCH_BYTES;
  if (!same) {
    close_text(ch);
    msgpack_sbuffer_write(&ch->ohead, ch->thead.data, ch->thead.size);
    ch->open_text = true;
  }
  if (len)
    msgpack_sbuffer_write(&ch->otext, text, len);
  item_added(ch);
}

// After an item was gathered: a full batch goes at once, else the timer
// sends it; a backlog above the high-water mark pauses the producers.
static void item_added(struct nvim_rpc *ch) {
  size_t items = ch->nitems + (ch->open_text ? 1 : 0);
  if (ch->ibuf.size + open_text_bytes(ch) >= NVIM_RPC_BATCH_BYTES ||
      items >= NVIM_RPC_BATCH_ITEMS) {
    close_batch(ch, false);
    schedule_flush(ch);
  } else if (!uv_is_active((uv_handle_t *)&ch->batch_timer)) {
    uv_timer_start(&ch->batch_timer, batch_timer_cb, NVIM_RPC_BATCH_MS, 0);
  }
  if (!ch->above && nvim_rpc_pending_bytes(ch) > NVIM_RPC_HIGH_WATER) {
    ch->above = true;
    if (ch->ops->on_backlog)
      ch->ops->on_backlog(ch->ud, true);
  }
}

// Neovim answered the oldest batch (or the channel closed): the next one
// may go, and the producers may resume once the backlog is small again.
static void batch_answered(void *ud, const msgpack_object *error,
                           const msgpack_object *result) {
  struct nvim_rpc *ch = ud;
  if (error && error->type != MSGPACK_OBJECT_NIL)
    LOG_W("Lua failed on a batch of events (see :messages)");
  (void)result;
  if (ch->nout > 0) {
    ch->out_bytes -= ch->out_sizes[0];
    memmove(ch->out_sizes, ch->out_sizes + 1, --ch->nout * sizeof(size_t));
  }
  if (ch->closing)
    return;
  if (ch->nitems > 0 || ch->open_text) { // they waited for this answer
    close_batch(ch, false);
    schedule_flush(ch);
  }
  maybe_resume(ch);
}

// The producers paused by the backlog may go on once it is under the
// low-water mark, whichever event brought it there (an answer, a write).
static void maybe_resume(struct nvim_rpc *ch) {
  if (ch->closing || !ch->above ||
      nvim_rpc_pending_bytes(ch) >= NVIM_RPC_LOW_WATER)
    return;
  ch->above = false;
  if (ch->ops->on_backlog)
    ch->ops->on_backlog(ch->ud, false);
}

size_t nvim_rpc_pending_bytes(const struct nvim_rpc *ch) {
  return ch->queued + ch->sbuf.size + ch->ibuf.size + open_text_bytes(ch) +
         ch->out_bytes;
}

static void close_cb(uv_handle_t *h) {
  struct nvim_rpc *ch = h->data;
  if (--ch->open_handles > 0)
    return;
  void (*on_closed)(void *) = ch->on_closed;
  void *ud = ch->closed_ud;
  nvim_rpc_decoder_free(&ch->dec);
  msgpack_sbuffer_destroy(&ch->sbuf);
  msgpack_sbuffer_destroy(&ch->ibuf);
  msgpack_sbuffer_destroy(&ch->thead);
  msgpack_sbuffer_destroy(&ch->ohead);
  msgpack_sbuffer_destroy(&ch->otext);
  free(ch->batch_method);
  free(ch->batch_head);
  free(ch->out_sizes);
  free(ch->calls);
  free(ch);
  if (on_closed)
    on_closed(ud);
}

void nvim_rpc_close(struct nvim_rpc *ch, void (*on_closed)(void *), void *ud) {
  if (ch->closing)
    return;
  ch->closing = true;
  ch->on_closed = on_closed;
  ch->closed_ud = ud;
  call_fail_all(ch);
  uv_close((uv_handle_t *)&ch->in, close_cb);
  uv_close((uv_handle_t *)&ch->out, close_cb);
  uv_close((uv_handle_t *)&ch->flush, close_cb);
  uv_close((uv_handle_t *)&ch->batch_timer, close_cb);
}
