#pragma once
// msgpack-RPC with Neovim over the broker's stdin/stdout.
//
// Two layers: a pure decoder (bytes in, validated messages out; no I/O) and
// the channel, which reads stdin, writes stdout and matches responses to the
// broker's own requests by msgid. Frames built during one loop iteration are
// written together when the iteration ends.

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum nvim_rpc_type {
  NVIM_RPC_REQUEST = 0,
  NVIM_RPC_RESPONSE = 1,
  NVIM_RPC_NOTIFICATION = 2,
};

// One validated message; every pointer is borrowed and lives only for the
// duration of the callback that receives it.
struct nvim_rpc_msg {
  enum nvim_rpc_type type;
  uint32_t msgid;               // request and response
  const char *method;           // request and notification; not NUL-ended
  size_t method_len;            // bytes in method
  const msgpack_object *params; // request and notification: an array
  const msgpack_object *error;  // response: nil when it succeeded
  const msgpack_object *result; // response
};

typedef void (*nvim_rpc_msg_cb)(void *ud, const struct nvim_rpc_msg *msg);

struct nvim_rpc_decoder {
  msgpack_unpacker unpacker; // streaming unpacker (owns its buffer)
  msgpack_unpacked result;   // the message being handed out
  size_t max_message;        // largest frame accepted, in bytes
};

// Prepares a decoder for frames of up to max_message bytes. Returns 0 or -1.
int nvim_rpc_decoder_init(struct nvim_rpc_decoder *d, size_t max_message);
// Frees the decoder.
void nvim_rpc_decoder_free(struct nvim_rpc_decoder *d);
// Feeds n bytes and calls cb for each complete, valid message. A frame that
// is valid msgpack but not a msgpack-RPC message is skipped with a warning
// in the log. Returns 0, or -1 with a reason in err when the stream itself is
// broken (bad msgpack, frame too large): the channel cannot go on.
int nvim_rpc_decoder_feed(struct nvim_rpc_decoder *d, const char *data,
                          size_t n, nvim_rpc_msg_cb cb, void *ud, char *err,
                          size_t errlen);
// Checks that o is a msgpack-RPC message and fills *msg. Returns 0, or -1
// with a reason in err.
int nvim_rpc_validate(const msgpack_object *o, struct nvim_rpc_msg *msg,
                      char *err, size_t errlen);
// Returns true when o is a str equal to the NUL-terminated s.
bool nvim_rpc_str_eq(const msgpack_object *o, const char *s);

struct nvim_rpc;

// Called with the response to one of our requests (error is nil on
// success), or with error == NULL && result == NULL when the channel closed
// before an answer came.
typedef void (*nvim_rpc_response_cb)(void *ud, const msgpack_object *error,
                                     const msgpack_object *result);

struct nvim_rpc_ops {
  // A request or notification from Neovim (responses are routed to the
  // callbacks given with each request).
  void (*on_message)(void *ud, const struct nvim_rpc_msg *msg);
  // stdin reached EOF or failed: Neovim is gone.
  void (*on_eof)(void *ud);
  // May be NULL. above: more than 2 MiB waits for Neovim (gathered, sent
  // and not yet answered, or not yet written): stop producing; !above:
  // under 1 MiB again.
  void (*on_backlog)(void *ud, bool above);
};

// Opens the channel on the given fds (normally 0 and 1). Returns NULL with
// a reason in err on failure.
struct nvim_rpc *nvim_rpc_open(uv_loop_t *loop, int in_fd, int out_fd,
                               const struct nvim_rpc_ops *ops, void *ud,
                               char *err, size_t errlen);
// Starts a request frame [0, msgid, method, params]; the caller packs
// exactly nparams values with the returned packer, then calls nvim_rpc_end.
// cb (may be NULL) gets the response.
msgpack_packer *nvim_rpc_begin_request(struct nvim_rpc *ch, const char *method,
                                       uint32_t nparams,
                                       nvim_rpc_response_cb cb, void *cb_ud);
// Starts a notification frame [2, method, params].
msgpack_packer *nvim_rpc_begin_notify(struct nvim_rpc *ch, const char *method,
                                      uint32_t nparams);
// Starts a response frame [1, msgid, error, result]; the caller packs the
// error and the result.
msgpack_packer *nvim_rpc_begin_response(struct nvim_rpc *ch, uint32_t msgid);
// Finishes the frame; it is written when this loop iteration ends. When
// more than the output bound is already waiting, a frame marked droppable is
// discarded instead (counted in the log), so a stalled Neovim cannot make the
// broker's memory grow without limit.
void nvim_rpc_end(struct nvim_rpc *ch, bool droppable);
// Items: small messages sent together as one request,
// [0, id, method, [head, [[item, ...]]]] (by default method "nvim_exec_lua"
// and head "return ...": Lua gets the items as one list). A frame started
// meanwhile sends the batch first, so items and frames reach Neovim in the
// order they were made. Items wait up to 2 ms for more (a full batch, 256
// KiB or 4096 items, goes at once); while four batches wait for Neovim's
// answer the next one gathers (flow control: Neovim never has a long queue
// of them ahead of a keypress).
void nvim_rpc_set_batch(struct nvim_rpc *ch, const char *method,
                        const char *head);
// Starts an item: the caller packs exactly one value, then calls
// nvim_rpc_end_item (droppable as for nvim_rpc_end).
msgpack_packer *nvim_rpc_begin_item(struct nvim_rpc *ch);
void nvim_rpc_end_item(struct nvim_rpc *ch, bool droppable);
// An item that ends with a string which the next such item may continue
// (streamed text): the caller packs the item up to that string with the
// returned packer (its last value is the string, not packed), then calls
// nvim_rpc_end_text_item with the string. When the item gathered just
// before it was one too and its packed bytes up to the string are the same,
// the text is appended to that item's string instead (one item, the texts
// joined in order) as long as the joined text stays under the batch size.
// Anything else added to the channel (an item, a frame) comes after it.
msgpack_packer *nvim_rpc_begin_text_item(struct nvim_rpc *ch);
void nvim_rpc_end_text_item(struct nvim_rpc *ch, const char *text, size_t len,
                            bool droppable);
// Writes everything queued now, without waiting for the loop iteration end.
void nvim_rpc_flush(struct nvim_rpc *ch);
// Number of bytes written to stdout but not yet accepted by the pipe.
size_t nvim_rpc_pending_bytes(const struct nvim_rpc *ch);
// Stops reading, fails outstanding requests (their callbacks get NULL, NULL)
// and closes the handles; on_closed (may be NULL) runs once all are closed.
void nvim_rpc_close(struct nvim_rpc *ch, void (*on_closed)(void *), void *ud);
