#pragma once
// The policy conformance cases (tests/fixtures/policy*.jsonl, a copy of the
// project's, 1,015 in all), for the tests that read every request of them.
// Include after check.h.

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

// fn(c, what, ud) for each case c (the whole JSON line: id, request, files,
// ...), what naming it ("FILE case ID"); an unreadable file fails a check.
// Returns the number of cases.
static inline size_t each_fixture(void (*fn)(const json_t *c, const char *what,
                                             void *ud),
                                  void *ud) {
  static const char *const files[] = {"tests/fixtures/policy.jsonl",
                                      "tests/fixtures/policy-extra.jsonl",
                                      "tests/fixtures/policy-adversarial.jsonl",
                                      "tests/fixtures/policy-failclosed.jsonl"};
  size_t cases = 0;
  for (size_t f = 0; f < sizeof(files) / sizeof(*files); f++) {
    FILE *in = fopen(files[f], "r");
    ok(in != NULL, "%s", files[f]);
    char *line = NULL;
    size_t cap = 0;
    while (in && getline(&line, &cap, in) > 0) {
      json_t *c = json_loads(line, 0, NULL);
      char what[160];
      snprintf(what, sizeof(what), "%s case %s", files[f],
               json_string_value(json_object_get(c, "id")));
      if (c) {
        fn(c, what, ud);
        cases++;
      }
      json_decref(c);
    }
    free(line);
    if (in)
      fclose(in);
  }
  return cases;
}
