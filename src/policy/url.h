#pragma once
// URLs read the way a WHATWG URL parser reads them (Node's `new URL()`,
// which the Node-based agents use to decide where they connect): the
// scheme and the host of an absolute URL, for WebFetch(domain:...) rules.
//
// Follows the URL Standard's basic parser for what decides the host:
// leading and trailing C0 controls and spaces trimmed, tabs and newlines
// removed anywhere, the scheme lower-cased, for special schemes any run of
// `/` and `\` after the colon skipped and `\` ending the authority like
// `/`, userinfo up to the LAST `@` skipped, the host percent-decoded and
// lower-cased, IPv4 in every numeric form (`0x7f.1`, `2130706433`, `0177.1`)
// serialised as dotted decimal, a port checked. What it does not model is
// reported instead of guessed: a host that needs IDNA processing (any byte
// above 0x7f after percent-decoding) is URL_UNSURE. Pure.

#include <stdbool.h>
#include <stddef.h>

#define URL_LEN_MAX 65536 // longer: URL_UNSURE

enum url_status {
  URL_OK,      // parsed as Node parses it
  URL_INVALID, // Node's parser throws
  URL_UNSURE,  // Node may accept it, but this reader cannot tell the host
};

struct url {
  char scheme[32]; // lower case, without the colon ("" when not parsed)
  bool special;    // http, https, ws, wss, ftp, file
  char *host;      // the serialised host (special schemes other than file),
                   // as Node's `hostname` prints it; else NULL
  char *path;      // special schemes: the path (`\` read as `/`); else NULL
};

// Parses the n bytes at s (no NUL needed). Fills *u (url_clear frees it).
enum url_status url_parse(const char *s, size_t n, struct url *u);
// Frees what url_parse allocated.
void url_clear(struct url *u);
// The value of a hexadecimal digit (either case), or -1: for %XX escapes.
int url_hex_value(char c);
