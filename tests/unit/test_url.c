// url: the scheme and host of a URL, read as a WHATWG parser reads it.
// Every expected value below is what Node's `new URL(s)` printed for the
// same input (protocol without the colon, hostname; NULL where Node
// throws); "?" marks a host Node maps through IDNA, which url_parse
// reports as URL_UNSURE instead of guessing.

#include "policy/url.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void test_node_oracle(void) {
  static const struct {
    const char *in, *scheme, *host;
  } rows[] = {
      {"https://x.com\"", "https", "x.com\""},
      {"https://git\x09"
       "hub.com/",
       "https", "github.com"},
      {"\x20"
       "\x20"
       "https://github.com\x01"
       "\x20"
       "",
       "https", "github.com"},
      {"http:evil.com", "http", "evil.com"},
      {"http:/\\/\\evil.com", "http", "evil.com"},
      {"https://a@b@evil.com/", "https", "evil.com"},
      {"https://%67ithub.com/", "https", "github.com"},
      {"http://0x7f.1/", "http", "127.0.0.1"},
      {"http://2130706433/", "http", "127.0.0.1"},
      {"http://[::1]/", "http", "[::1]"},
      {"https://GitHub.COM./", "https", "github.com."},
      {"https://a*b.com/", "https", "a*b.com"},
      {"https://xn--github.com/", "https", "xn--github.com"},
      {"http://09.1/", NULL, NULL},
      {"http://foo.1/", NULL, NULL},
      {"https://github.com:99999/", NULL, NULL},
      {"https://github.com:8x/", NULL, NULL},
      {"ws://evil.com/", "ws", "evil.com"},
      {"ftp://evil.com/", "ftp", "evil.com"},
      {"https://a%2541.com/", NULL, NULL},
      {"https://github.com,https://evil.com", "https", "github.com,https"},
      {"https://evil.com\\@github.com", "https", "evil.com"},
      {"HTTPS://EVIL.com", "https", "evil.com"},
      {"https://example.com%2F@evil.com/", "https", "evil.com"},
      {"https://ex%00ample.com", NULL, NULL},
      {"http://1.2.3.4.5/", NULL, NULL},
      {"http://0x/", "http", "0.0.0.0"},
      {"http://1.2.3.0x100/", NULL, NULL},
      {"https://[::ffff:127.0.0.1]/", "https", "[::ffff:7f00:1]"},
      {"http://127.0.0.1./", "http", "127.0.0.1"},
      {"https://github.com%2eevil.com", "https", "github.com.evil.com"},
      {"https://github.com\x0a"
       ".evil.com/",
       "https", "github.com.evil.com"},
      {"https://github.com\x0d"
       "\x0a"
       ".evil.com/",
       "https", "github.com.evil.com"},
      {"https://github.com\x09"
       "@evil.com/",
       "https", "evil.com"},
      {"https://user:pw@github.com/", "https", "github.com"},
      {"https://github.com@/", NULL, NULL},
      {"https://:443/", NULL, NULL},
      {"https://[1:2:3:4:5:6:7:8]/", "https", "[1:2:3:4:5:6:7:8]"},
      {"https://[1::]/", "https", "[1::]"},
      {"https://[::]/", "https", "[::]"},
      {"https://[0:0:0:0:0:0:0:1]/", "https", "[::1]"},
      {"https://[1:0:0:2:0:0:0:3]/", "https", "[1:0:0:2::3]"},
      {"https://[1::2::3]/", NULL, NULL},
      {"https://[::1.2.3.4]/", "https", "[::102:304]"},
      {"https://[fe80::1%25eth0]/", NULL, NULL},
      {"http://0177.0.0.1/", "http", "127.0.0.1"},
      {"http://0x7f000001/", "http", "127.0.0.1"},
      {"http://127.1/", "http", "127.0.0.1"},
      {"http://127.0.1/", "http", "127.0.0.1"},
      {"http://4294967295/", "http", "255.255.255.255"},
      {"http://4294967296/", NULL, NULL},
      {"http://1.16777215/", "http", "1.255.255.255"},
      {"http://1.16777216/", NULL, NULL},
      {"http://256.1.1.1/", NULL, NULL},
      {"http://1.1.1.256/", NULL, NULL},
      {"http://1.1.1.1.1/", NULL, NULL},
      {"http://1..1/", NULL, NULL},
      {"http://.1/", NULL, NULL},
      {"http://1./", "http", "0.0.0.1"},
      {"http://a.0x/", NULL, NULL},
      {"http://0xg.1/", NULL, NULL},
      {"file:///etc/passwd", "file", NULL},
      {"data:text/plain,hi", "data", NULL},
      {"javascript:alert(1)", "javascript", NULL},
      {"HtTp://GITHUB.com:80/x", "http", "github.com"},
      {"https:\\\\evil.com", "https", "evil.com"},
      {"https:evil.com\\github.com", "https", "evil.com"},
      {"https://evil.com?@github.com", "https", "evil.com"},
      {"https://evil.com#@github.com", "https", "evil.com"},
      {"https://github.com:/", "https", "github.com"},
      {"https://github.com:0/", "https", "github.com"},
      {"https://github.com:65535/", "https", "github.com"},
      {"https://github.com:65536/", NULL, NULL},
      {"https://%5Bfoo%5D/", NULL, NULL},
      {"https://a%20b/", NULL, NULL},
      {"https://a%7Fb/", NULL, NULL},
      {"https://ex%c3%a4mple.com/", "https", "?"},
      {"https://ex\xc3"
       "\xa4"
       "mple.com/",
       "https", "?"},
      {"https://a^b.com/", NULL, NULL},
      {"https://a|b.com/", NULL, NULL},
      {"https://a<b.com/", NULL, NULL},
      {"https://a~b.com/", "https", "a~b.com"},
      {"https://a`b.com/", "https", "a`b.com"},
      {"https://a'b.com/", "https", "a'b.com"},
      {"https://a!b.com/", "https", "a!b.com"},
      {"https://a$b.com/", "https", "a$b.com"},
      {"https://a&b.com/", "https", "a&b.com"},
      {"https://a(b).com/", "https", "a(b).com"},
      {"https://a+b.com/", "https", "a+b.com"},
      {"https://a;b.com/", "https", "a;b.com"},
      {"https://a=b.com/", "https", "a=b.com"},
      {"https://a{b}.com/", "https", "a{b}.com"},
      {"http://[::1/", NULL, NULL},
      {"http://[::1]x/", NULL, NULL},
      {"http://[::1]:80/", "http", "[::1]"},
      {"http://[::1]:8x/", NULL, NULL},
      {"http://1.2.3.4:8080/", "http", "1.2.3.4"},
      {"https://%30x7f.1/", "https", "127.0.0.1"},
      {"https://0x7F.1/", "https", "127.0.0.1"},
      {"https://0X7f.1/", "https", "127.0.0.1"},
      {"https://github.com%00/", NULL, NULL},
      {"https://github.com.%2e/", "https", "github.com.."},
      {"https://..github.com/", "https", "..github.com"},
      {"https://github..com/", "https", "github..com"},
      {"https://-github.com/", "https", "-github.com"},
      {"https://github.com-/", "https", "github.com-"},
      {"https://127.0.0.1%2e/", "https", "127.0.0.1"},
      {"https://%31%32%37.0.0.1/", "https", "127.0.0.1"},
      {"http://[::127.0.0.1]/", "http", "[::7f00:1]"},
      {"http://[1:2:3:4:5:6:1.2.3.4]/", "http", "[1:2:3:4:5:6:102:304]"},
      {"http://[1:2:3:4:5:6:7:1.2.3.4]/", NULL, NULL},
      {"http://[::1.2.3]/", NULL, NULL},
      {"http://[::01.2.3.4]/", NULL, NULL},
  };
  for (size_t i = 0; i < sizeof(rows) / sizeof(*rows); i++) {
    struct url u;
    enum url_status st = url_parse(rows[i].in, strlen(rows[i].in), &u);
    bool good;
    if (!rows[i].scheme)
      good = st == URL_INVALID;
    else if (rows[i].host && strcmp(rows[i].host, "?") == 0)
      good = st == URL_UNSURE;
    else
      good = st == URL_OK && strcmp(u.scheme, rows[i].scheme) == 0 &&
             (rows[i].host ? u.host && strcmp(u.host, rows[i].host) == 0
                           : !u.host);
    char shown[128];
    size_t k = 0;
    for (const char *c = rows[i].in; *c && k + 1 < sizeof(shown); c++)
      shown[k++] = (unsigned char)*c < 0x20 ? '^' : *c;
    shown[k] = '\0';
    if (!ok(good, "url %zu: %s", i, shown))
      printf("#   got %d %s %s\n", (int)st, u.scheme, u.host ? u.host : "-");
    url_clear(&u);
  }
}

static void test_path_and_limits(void) {
  struct url u;
  const char *s = "https://github.com\\a/blob/x?q#f";
  is_int(url_parse(s, strlen(s), &u), URL_OK, "parses");
  is_str(u.path, "/a/blob/x", "path: backslash read as slash, no query");
  url_clear(&u);
  s = "https://github.com";
  is_int(url_parse(s, strlen(s), &u), URL_OK, "no path");
  is_str(u.path, "/", "empty path is /");
  url_clear(&u);
  // Not NUL-terminated: only n bytes are read.
  is_int(url_parse("https://a.com/xyz", 13, &u), URL_OK, "n bytes");
  is_str(u.host, "a.com", "host within n");
  url_clear(&u);
  size_t n = URL_LEN_MAX + 1;
  char *big = malloc(n + 1);
  memset(big, 'a', n);
  memcpy(big, "https://", 8);
  big[n] = '\0';
  is_int(url_parse(big, n, &u), URL_UNSURE, "overlong: unsure");
  free(big);
  is_int(url_parse("", 0, &u), URL_INVALID, "empty");
  is_int(url_parse("https://exämple.com", 20, &u), URL_UNSURE,
         "non-ASCII host needs IDNA: unsure");
}

int main(void) {
  test_node_oracle();
  test_path_and_limits();
  return done_testing();
}
