#include "jsonfast.h"

#include <msgpack.h>
#include <stdlib.h>

#include "json2mp.h"
#include "jsonpack.h"

// The transcoding buffer is kept between calls, unless a huge message grew
// it: then it is given back.
#define KEEP_BYTES ((size_t)1 << 20)

static msgpack_sbuffer sb;
static msgpack_zone *zone; // the unpacked objects, cleared after each call

void jsonfast_release(void) {
  msgpack_sbuffer_destroy(&sb);
  msgpack_sbuffer_init(&sb);
  msgpack_zone_free(zone);
  zone = NULL;
}

json_t *jsonfast_load(const char *text, size_t len, json_error_t *err) {
  json_t *v = NULL;
  sb.size = 0;
  if (!zone)
    zone = msgpack_zone_new(MSGPACK_ZONE_CHUNK_SIZE);
  if (zone && json2mp(&sb, text, len)) {
    msgpack_object o;
    size_t off = 0;
    if (msgpack_unpack(sb.data, sb.size, &off, zone, &o) ==
            MSGPACK_UNPACK_SUCCESS &&
        off == sb.size)
      v = jsonpack_unpack_checked(&o);
    msgpack_zone_clear(zone);
  }
  if (sb.alloc > KEEP_BYTES)
    jsonfast_release();
  return v ? v : json_loadb(text, len, 0, err);
}
