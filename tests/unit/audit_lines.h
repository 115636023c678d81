#pragma once
// The audit lines written to a file by the tests of the verdict and the
// prompt, for comparing what two ways of writing them wrote.

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "broker/audit.h"

// The lines of file after the flush, without their timestamps (from
// ,"root": on), as JSON strings; the file is emptied for the next ones.
static inline json_t *audit_lines_of(const char *file) {
  audit_flush();
  json_t *all = json_array();
  FILE *f = fopen(file, "r");
  char buf[16384];
  while (f && fgets(buf, sizeof(buf), f)) {
    const char *rest = strstr(buf, ",\"root\":");
    json_array_append_new(all, json_string(rest ? rest : buf));
  }
  if (f)
    fclose(f);
  if (truncate(file, 0) != 0)
    printf("# cannot truncate %s\n", file);
  return all;
}
