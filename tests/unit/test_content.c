// content: the prompt's content blocks Lua sends. Each case is a JSON list
// of blocks and either the clean copy the agent gets or the start of the
// reason it is refused; then the capabilities, the bounds and content_needs.

#include "acp/content.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static json_t *parse(const char *s) {
  json_error_t e;
  json_t *v = json_loads(s, JSON_DECODE_ANY, &e);
  if (!v)
    printf("# bad test JSON: %s: %s\n", s, e.text);
  return v;
}

// blocks in, and the exact JSON out (want), or NULL and a reason starting
// with why.
static void row(const char *in, const char *want, const char *why) {
  json_t *blocks = parse(in);
  char err[300];
  json_t *out = content_check(blocks, err, sizeof(err));
  if (want) {
    char *got = out ? json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_t *w = parse(want);
    char *exp = json_dumps(w, JSON_COMPACT | JSON_SORT_KEYS);
    is_str(got ? got : err, exp, in);
    free(got);
    free(exp);
    json_decref(w);
  } else {
    ok(!out && strncmp(err, why, strlen(why)) == 0, "refused: %s (%s)", in,
       out ? "accepted" : err);
  }
  json_decref(out);
  json_decref(blocks);
}

static void test_rows(void) {
  row("[]", "[]", NULL);
  row("[{\"type\":\"text\",\"text\":\"hi\"}]",
      "[{\"type\":\"text\",\"text\":\"hi\"}]", NULL);
  // Only the protocol's fields are kept; null optional fields are dropped.
  row("[{\"type\":\"resource_link\",\"uri\":\"file:///p/a.c\",\"name\":\"a.c\","
      "\"size\":12,\"mimeType\":null,\"extra\":1}]",
      "[{\"type\":\"resource_link\",\"uri\":\"file:///p/a.c\",\"name\":\"a.c\","
      "\"size\":12}]",
      NULL);
  row("[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///p/a.c#L2-3\","
      "\"text\":\"x\\ny\",\"mimeType\":\"text/x-c\",\"_meta\":{}},"
      "\"annotations\":{}}]",
      "[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///p/a.c#L2-3\","
      "\"text\":\"x\\ny\",\"mimeType\":\"text/x-c\"}}]",
      NULL);
  row("[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///p/b\","
      "\"blob\":\"AAE=\"}}]",
      "[{\"type\":\"resource\",\"resource\":{\"uri\":\"file:///p/b\","
      "\"blob\":\"AAE=\"}}]",
      NULL);
  row("[{\"type\":\"image\",\"data\":\"iVBORw==\",\"mimeType\":\"image/png\","
      "\"uri\":\"file:///p/i.png\"}]",
      "[{\"type\":\"image\",\"data\":\"iVBORw==\",\"mimeType\":\"image/png\","
      "\"uri\":\"file:///p/i.png\"}]",
      NULL);
  row("[{\"type\":\"audio\",\"data\":\"AAAA\",\"mimeType\":\"audio/wav\"}]",
      "[{\"type\":\"audio\",\"data\":\"AAAA\",\"mimeType\":\"audio/wav\"}]",
      NULL);

  row("{}", NULL, "the content blocks must be a list");
  row("[1]", NULL, "content block 1: must be an object");
  row("[{\"text\":\"x\"}]", NULL, "content block 1: must be an object");
  row("[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"video\"}]", NULL,
      "content block 2: unknown type 'video'");
  row("[{\"type\":\"text\"}]", NULL, "content block 1: 'text' is missing");
  row("[{\"type\":\"text\",\"text\":3}]", NULL,
      "content block 1: 'text' must be a string");
  row("[{\"type\":\"resource_link\",\"uri\":\"file:///a\"}]", NULL,
      "content block 1: 'name' is missing");
  row("[{\"type\":\"resource_link\",\"uri\":\"\",\"name\":\"a\"}]", NULL,
      "content block 1: 'uri' is empty");
  row("[{\"type\":\"resource_link\",\"uri\":\"u\",\"name\":\"a\",\"size\":-1}]",
      NULL, "content block 1: 'size' must be a non-negative integer");
  row("[{\"type\":\"resource\",\"resource\":\"x\"}]", NULL,
      "content block 1: 'resource' must be an object");
  row("[{\"type\":\"resource\",\"resource\":{\"uri\":\"u\"}}]", NULL,
      "content block 1: a resource holds either");
  row("[{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":\"a\","
      "\"blob\":\"AAAA\"}}]",
      NULL, "content block 1: a resource holds either");
  row("[{\"type\":\"resource\",\"resource\":{\"text\":\"a\"}}]", NULL,
      "content block 1: 'uri' is missing");
  row("[{\"type\":\"image\",\"data\":\"not base64!\",\"mimeType\":\"image/"
      "png\"}]",
      NULL, "content block 1: 'data' is not base64");
  row("[{\"type\":\"image\",\"data\":\"AA=A\",\"mimeType\":\"image/png\"}]",
      NULL, "content block 1: 'data' is not base64");
  row("[{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":\"text/plain\"}]",
      NULL, "content block 1: 'mimeType' must be image/");
  row("[{\"type\":\"image\",\"data\":\"AAAA\"}]", NULL,
      "content block 1: 'mimeType' is missing");
}

static void test_bounds(void) {
  char err[300];
  json_t *many = json_array();
  for (int i = 0; i <= CONTENT_MAX_BLOCKS; i++)
    json_array_append_new(many,
                          json_pack("{s:s,s:s}", "type", "text", "text", "x"));
  ok(!content_check(many, err, sizeof(err)) &&
         strstr(err, "more than 64 content blocks"),
     "more than %d blocks are refused (%s)", CONTENT_MAX_BLOCKS, err);
  json_array_remove(many, 0);
  json_t *out = content_check(many, err, sizeof(err));
  is_size(json_array_size(out), CONTENT_MAX_BLOCKS, "exactly the limit passes");
  json_decref(out);
  json_decref(many);

  // Two texts of 9 MiB each: the second goes over 16 MiB.
  size_t n = 9u * 1024 * 1024;
  char *big = malloc(n + 1);
  memset(big, 'a', n);
  big[n] = '\0';
  json_t *two = json_pack("[{s:s,s:s},{s:s,s:s}]", "type", "text", "text", big,
                          "type", "text", "text", big);
  ok(!content_check(two, err, sizeof(err)) &&
         strstr(err, "content block 2: the blocks hold more than"),
     "more than %zu bytes are refused (%s)", CONTENT_MAX_BYTES, err);
  json_array_remove(two, 1);
  out = content_check(two, err, sizeof(err));
  ok(out != NULL, "one of them passes");
  json_decref(out);
  json_decref(two);
  free(big);
}

static void test_caps(void) {
  json_t *caps = parse("{\"loadSession\":true,\"promptCapabilities\":"
                       "{\"image\":true,\"audio\":false,"
                       "\"embeddedContext\":true}}");
  is_int(content_caps(caps), CONTENT_IMAGE | CONTENT_EMBEDDED,
         "image and embeddedContext offered");
  json_decref(caps);
  caps = parse("{\"promptCapabilities\":{\"image\":\"yes\"}}");
  is_int(content_caps(caps), 0, "only true offers");
  json_decref(caps);
  is_int(content_caps(NULL), 0, "no agentCapabilities: the baseline");

  json_t *b =
      parse("[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"resource_link\","
            "\"uri\":\"u\",\"name\":\"n\"}]");
  is_int(content_needs(b), 0, "text and resource_link need nothing");
  json_decref(b);
  b = parse("[{\"type\":\"resource\",\"resource\":{\"uri\":\"u\",\"text\":"
            "\"t\"}},{\"type\":\"image\",\"data\":\"AAAA\",\"mimeType\":"
            "\"image/png\"}]");
  is_int(content_needs(b), CONTENT_EMBEDDED | CONTENT_IMAGE,
         "resource and image need their capabilities");
  is_str(content_cap_name(CONTENT_EMBEDDED), "embeddedContext", "named");
  is_str(content_cap_name(CONTENT_EMBEDDED | CONTENT_IMAGE), "image",
         "the first named");
  json_decref(b);
  is_int(content_needs(NULL), 0, "no blocks need nothing");
}

int main(void) {
  test_rows();
  test_bounds();
  test_caps();
  return done_testing();
}
