#!/usr/bin/env python3
"""Validate what the client sent in demo-agent transcripts against the ACP schema.

    tests/schema/validate.py [--schema FILE] [-q] TRANSCRIPT|DIR...

A transcript is the JSON Lines file the demo agent writes when
$ACP_DEMO_TRANSCRIPT is set ({"dir": "in"|"out", "msg": ...} per message,
plus {"event": ...} lines). Every message the client sent ("dir": "in") is
checked; the agent's messages ("dir": "out") are only read, to know which
request each of the client's responses answers.

  * every message: a JSON object with "jsonrpc": "2.0";
  * a request (method + id): id null, an integer or a string; params valid
    against the $def whose "x-method" is the method, "x-side" is "agent" and
    whose name ends in "Request" (initialize -> InitializeRequest, ...);
  * a notification (method, no id): params valid against the "*Notification"
    $def of that method with "x-side" "agent" or "protocol"
    (session/cancel -> CancelNotification);
  * a response (no method): id, and exactly one of result / error. It must
    answer a request the agent sent and that is still unanswered, matched by
    id with its exact JSON type (0 and "0" differ). A result is validated
    against the "*Response" $def of that request's method with "x-side"
    "client" (session/request_permission -> RequestPermissionResponse); an
    error against the envelope's error object ($defs/Error: integer code,
    string message). An error with id null that answers nothing is allowed
    (JSON-RPC's answer to a message whose id could not be read).

A method the schema does not define is invalid in a request or notification
from the client, and a result for one is invalid, except extension methods
(names starting with "_"), whose params/result need only be an object (or
absent). Each value is validated against {"$defs": <all>, "$ref":
"#/$defs/<Name>"}, never against the top-level schema (its anyOf ties no
method to its params; see ../shared/reference/acp-protocol.md section 8).

An {"event": "exit"} line ends one agent process: requests it left open are
forgotten, so that a later process appending to the same file (its ids
start again) is matched on its own.

A DIR argument is searched recursively for *.jsonl files that are
transcripts (some line has "dir" and "msg"); other files there are skipped.
A FILE argument is always read as a transcript. An unparseable line is an
error, except an unterminated last line (a writer killed mid-line), which is
skipped with a note.

Output: TAP-ish. "ok - FILE: N client messages valid" per transcript, or
"not ok - FILE:LINE: what" with "#" lines giving the validation error and
the message. Exit status: 0 all valid, 1 something invalid, 2 usage or I/O
error, 77 python3-jsonschema (>= 4.0, for Draft 2020-12) is not installed.

Needs python3 and jsonschema >= 4.0 (Debian 12: python3-jsonschema 4.10).
"""

import json
import os
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as e:  # missing, or older than 4.0 (no Draft 2020-12)
    print("# schema: skipped: python3-jsonschema >= 4.0 not available (%s); "
          "run 'make deps'" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "schema-v1.json")
MAX_SHOWN = 600  # characters of a message shown in a failure


# The "method" of a request whose method member is not a string.
INVALID = object()

def shown(value):
    s = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if len(s) > MAX_SHOWN:
        s = s[:MAX_SHOWN] + "... (%d characters)" % len(s)
    return s


class Schema:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        self.defs = doc["$defs"]
        self.requests = {}       # method -> $def name, client -> agent
        self.notifications = {}  # method -> $def name, client -> agent
        self.responses = {}      # method -> $def name, client answering the agent
        for name, d in self.defs.items():
            method, side = d.get("x-method"), d.get("x-side")
            if not method:
                continue
            if side == "agent" and name.endswith("Request"):
                self.requests[method] = name
            elif side in ("agent", "protocol") and name.endswith("Notification"):
                self.notifications[method] = name
            elif side == "client" and name.endswith("Response"):
                self.responses[method] = name
        self._validators = {}
        self._memo = {}

    def errors(self, def_name, value):
        """The validation errors of value against $defs/def_name (a list of
        strings, empty when valid)."""
        # Floods repeat the same value many times: validate each once.
        key = (def_name, json.dumps(value, sort_keys=True))
        if key in self._memo:
            return self._memo[key]
        out = self._errors(def_name, value)
        if len(self._memo) < 100000:
            self._memo[key] = out
        return out

    def _errors(self, def_name, value):
        v = self._validators.get(def_name)
        if v is None:
            v = Draft202012Validator({"$defs": self.defs, "$ref": "#/$defs/" + def_name})
            self._validators[def_name] = v
        errs = sorted(v.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        if not errs:
            return []
        out = []
        best = jsonschema.exceptions.best_match(errs)
        out.append(describe(best))
        for e in errs:
            if e is not best and len(out) < 4:
                out.append(describe(e))
        return out


def describe(err):
    where = "".join("[%s]" % json.dumps(p) for p in err.absolute_path) or "(top)"
    msg = err.message
    if len(msg) > 300:
        msg = msg[:300] + "..."
    s = "at %s: %s" % (where, msg)
    # oneOf/anyOf: name the closest branch's own complaint too.
    if err.context:
        deepest = max(err.context, key=lambda e: len(e.absolute_path))
        dm = deepest.message
        if len(dm) > 200:
            dm = dm[:200] + "..."
        dwhere = "".join("[%s]" % json.dumps(p) for p in deepest.absolute_path) or "(top)"
        s += " (closest: at %s: %s)" % (dwhere, dm)
    return s


def id_key(value):
    """A request id with its exact JSON type, or None if it cannot be one."""
    if value is None:
        return ("null", None)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, str):
        return ("str", value)
    return None


def is_transcript(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                if isinstance(v, dict) and v.get("dir") in ("in", "out") and "msg" in v:
                    return True
    except OSError:
        return False
    return False


class Checker:
    def __init__(self, schema, quiet=False):
        self.schema = schema
        self.quiet = quiet
        self.failed = 0
        self.total_messages = 0
        self.files = 0

    def fail(self, where, what, reasons, msg):
        self.failed += 1
        print("not ok - %s: %s" % (where, what))
        for r in reasons:
            print("#   %s" % r)
        print("#   message: %s" % shown(msg))

    def check_file(self, path):
        self.files += 1
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            print("not ok - %s: cannot read: %s" % (path, e))
            self.failed += 1
            return
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        unterminated = lines[-1] != ""
        if not unterminated:
            lines.pop()
        open_requests = {}  # id_key -> [method, ...] the agent sent, unanswered
        count = 0
        bad_before = self.failed
        for n, line in enumerate(lines, 1):
            where = "%s:%d" % (path, n)
            if line.strip() == "":
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                if unterminated and n == len(lines):
                    print("# %s: unterminated last line skipped" % where)
                    continue
                self.fail(where, "transcript line is not JSON", [str(e)], line)
                continue
            if not isinstance(rec, dict) or "dir" not in rec:
                if isinstance(rec, dict) and rec.get("event") == "exit":
                    # The agent process ended; a later one appending to the
                    # same file numbers its requests afresh.
                    open_requests = {}
                continue  # an {"event": ...} line
            msg = rec.get("msg")
            if rec["dir"] == "out":
                if isinstance(msg, dict) and "method" in msg and "id" in msg:
                    # A request with a method that is not a string is still
                    # a request with a readable id: JSON-RPC answers it with
                    # an error (-32600), never with a result.
                    k = id_key(msg["id"])
                    if k is not None:
                        method = msg["method"] if isinstance(msg["method"], str) else INVALID
                        open_requests.setdefault(k, []).append(method)
                continue
            if rec["dir"] != "in":
                self.fail(where, "transcript line with an unknown dir", [], rec)
                continue
            count += 1
            self.check_message(where, msg, open_requests)
        self.total_messages += count
        if self.failed == bad_before and not self.quiet:
            print("ok - %s: %d client messages valid" % (path, count))

    def check_message(self, where, msg, open_requests):
        if not isinstance(msg, dict):
            what = "not JSON" if isinstance(msg, str) else "not a JSON object"
            self.fail(where, "the client sent a line that is %s" % what, [], msg)
            return
        if msg.get("jsonrpc") != "2.0":
            self.fail(where, 'no "jsonrpc": "2.0"', [], msg)
            return
        if "method" in msg:
            self.check_call(where, msg)
        else:
            self.check_response(where, msg, open_requests)

    def check_call(self, where, msg):
        method = msg["method"]
        if not isinstance(method, str):
            self.fail(where, "method is not a string", [], msg)
            return
        is_request = "id" in msg
        kind = "request" if is_request else "notification"
        allowed = {"jsonrpc", "method", "params"} | ({"id"} if is_request else set())
        extra = sorted(set(msg) - allowed)
        if extra:
            self.fail(where, "%s %s has members %s" % (kind, method, ", ".join(extra)), [], msg)
            return
        if is_request and id_key(msg["id"]) is None:
            self.fail(where, "request %s: id is not null, an integer or a string" % method, [], msg)
            return
        table = self.schema.requests if is_request else self.schema.notifications
        def_name = table.get(method)
        if def_name is None:
            if method.startswith("_"):
                if "params" in msg and not isinstance(msg["params"], (dict, type(None))):
                    self.fail(where, "extension %s %s: params is not an object" % (kind, method), [], msg)
                return
            self.fail(where, "%s of a method the schema does not define for the client: %s" % (kind, method), [], msg)
            return
        if "params" not in msg:
            errs = ["params missing"] + self.schema.errors(def_name, None)
        else:
            errs = self.schema.errors(def_name, msg["params"])
        if errs:
            self.fail(where, "%s %s: params invalid against $defs/%s" % (kind, method, def_name), errs, msg)

    def check_response(self, where, msg, open_requests):
        if "id" not in msg:
            self.fail(where, "neither a request, a notification nor a response (no method, no id)", [], msg)
            return
        extra = sorted(set(msg) - {"jsonrpc", "id", "result", "error"})
        if extra:
            self.fail(where, "response has members %s" % ", ".join(extra), [], msg)
            return
        has_result, has_error = "result" in msg, "error" in msg
        if has_result == has_error:
            self.fail(where, "a response needs exactly one of result and error", [], msg)
            return
        k = id_key(msg["id"])
        if k is None:
            self.fail(where, "response id is not null, an integer or a string", [], msg)
            return
        pending = open_requests.get(k)
        method = pending.pop(0) if pending else None
        if pending == []:
            del open_requests[k]
        if has_error:
            errs = self.schema.errors("Error", msg["error"])
            if errs:
                self.fail(where, "error response%s: error invalid against $defs/Error"
                          % (" to " + method if isinstance(method, str) else ""), errs, msg)
                return
            if method is None and k != ("null", None):
                self.fail(where, "error response to id %s, which the agent never sent or "
                          "which was already answered" % json.dumps(msg["id"]), [], msg)
            return
        if method is None:
            self.fail(where, "result for id %s, which the agent never sent or which was "
                      "already answered" % json.dumps(msg["id"]), [], msg)
            return
        if method is INVALID:
            self.fail(where, "result for id %s, an invalid request (only an error may "
                      "answer it)" % json.dumps(msg["id"]), [], msg)
            return
        def_name = self.schema.responses.get(method)
        if def_name is None:
            if method.startswith("_"):
                return
            self.fail(where, "result for %s, a method the schema does not define for the "
                      "client (only an error may answer it)" % method, [], msg)
            return
        errs = self.schema.errors(def_name, msg["result"])
        if errs:
            self.fail(where, "response to %s: result invalid against $defs/%s" % (method, def_name), errs, msg)


def main(argv):
    args = argv[1:]
    schema_path = DEFAULT_SCHEMA
    quiet = False
    paths = []
    while args:
        a = args.pop(0)
        if a == "--schema" and args:
            schema_path = args.pop(0)
        elif a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-") and a != "-":
            print("usage: %s [--schema FILE] [-q] TRANSCRIPT|DIR..." % argv[0], file=sys.stderr)
            return 2
        else:
            paths.append(a)
    if not paths:
        print("usage: %s [--schema FILE] [-q] TRANSCRIPT|DIR..." % argv[0], file=sys.stderr)
        return 2
    try:
        schema = Schema(schema_path)
    except (OSError, ValueError, KeyError) as e:
        print("not ok - schema %s: cannot load: %s" % (schema_path, e))
        return 2
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs.sort()
                for name in sorted(names):
                    full = os.path.join(root, name)
                    if name.endswith(".jsonl") and os.path.isfile(full) and is_transcript(full):
                        files.append(full)
        elif os.path.exists(p):
            files.append(p)
        else:
            print("not ok - %s: no such file" % p)
            return 2
    checker = Checker(schema, quiet)
    for f in files:
        checker.check_file(f)
    print("# schema: %d client messages in %d transcripts, %d invalid (jsonschema %s)"
          % (checker.total_messages, checker.files, checker.failed, jsonschema_version()))
    return 1 if checker.failed else 0


def jsonschema_version():
    try:
        from importlib.metadata import version
        return version("jsonschema")
    except Exception:  # noqa: BLE001 - only for the summary line
        return "?"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
