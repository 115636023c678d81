#pragma once
// Rule texts (permission-rules §5.2): `Tool` or `Tool(specifier)`, tool
// names resolved through the alias table to a class (Claude Code, Gemini
// CLI and ACP-kind spellings), the specifier normalised for its class.
//
// Pure: no I/O, no globals.

#include <stdbool.h>
#include <stddef.h>

#define RULES_TEXT_MAX 4096 // longer rule texts are refused

enum rules_class {
  RULES_BASH,      // spec: the command pattern (`:*` already ` *`)
  RULES_READ,      // spec: the path specifier as written
  RULES_EDIT,      // spec: the path specifier as written
  RULES_WEBFETCH,  // spec: the host pattern, lower case, no trailing dot
  RULES_WEBSEARCH, // never a spec
  RULES_TOOL,      // spec: a tool-name glob (MCP tools, `*`, `mcp__*`)
  RULES_KIND,      // spec: an ACP tool-call kind
};

struct rules_rule {
  enum rules_class cls;
  char *spec;      // NULL: every use of the tool (always set for TOOL, KIND)
  bool unanchored; // TOOL: a glob allow lists must ignore (§1.3)
  bool no_allow;   // PowerShell: only deny and ask lists use it
  char *note;      // a warning for the person (arguments ignored), or NULL
};

// Parses one rule. Returns 0 and fills *out (free with rules_rule_free), or
// -1 with a reason fit to show a person in err.
int rules_parse(const char *text, struct rules_rule *out, char *err,
                size_t errlen);
// Frees what rules_parse allocated.
void rules_rule_free(struct rules_rule *r);
// The class of a tool name in the alias table ("Read", "write_file", ...);
// false when the name is not a built-in tool.
bool rules_tool_class(const char *name, enum rules_class *out);
// The same for the first n bytes of name (no NUL among them).
bool rules_tool_class_n(const char *name, size_t n, enum rules_class *out);
// The tool names of a class (for tool-name globs): up to max of them into
// names (borrowed); returns how many.
size_t rules_class_names(enum rules_class c, const char **names, size_t max);
// A tool-name glob (`*` any run of characters) against a name.
bool rules_glob(const char *glob, const char *name, bool fold);
// A WebFetch host pattern against a host (both lower case, no trailing
// dot): `*` alone is any host, a leading `*.` any subdomain depth (not the
// apex), elsewhere `*` matches within one label.
bool rules_host_match(const char *pattern, const char *host);
// True for the kinds of ACP tool calls (and `_`-prefixed custom kinds).
bool rules_kind_valid(const char *kind);
