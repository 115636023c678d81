#!/usr/bin/env python3
"""Policy conformance: runs every case of tests/fixtures/policy.jsonl against
`acp-broker decide` and prints TAP.

usage: tests/conformance.py BROKER [FIXTURE]

Each case gets the environment tests/fixtures/policy-format.md describes: a
fresh canonical temp dir T with T/p (project root, session cwd, with .git) and
T/h (HOME), the case's dirs, files, symlinks, big_files and fifos ({P} and {H}
replaced everywhere), `BROKER trust --cwd T/p` when the case says so, then its
after_trust_files (and after_trust_dirs, _symlinks, _big_files, _fifos, which
replace what is there), then `BROKER decide`. Each command gets 10 s.

The decision must equal `expect` (tier M) or be `expect` or "ask" (tier H);
`expect_option` is checked unless a tier-H case was answered "ask", and
`expect_reason` (when given) must be part of the printed reason.
Exit status: 0 when every case passed, 1 otherwise, 2 for a usage error.

Environment: CONFORMANCE_ONLY=id,id,... runs only those cases;
CONFORMANCE_KEEP=1 keeps the temp dirs of failed cases.
BROKER may be a command line (e.g. "valgrind -q build/acp-broker").
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

TIMEOUT = 10
KEPT_ENV = ("PATH", "LD_LIBRARY_PATH", "TMPDIR", "ACP_BROKER_LOG")
SANITIZER_ENV = ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                 "MSAN_OPTIONS", "TSAN_OPTIONS")


class CaseError(Exception):
    """A case that could not be run to a decision."""


def substitute(value, p, h):
    """Replaces {P} and {H} in every string, JSON keys included."""
    if isinstance(value, str):
        return value.replace("{P}", p).replace("{H}", h)
    if isinstance(value, list):
        return [substitute(v, p, h) for v in value]
    if isinstance(value, dict):
        return {substitute(k, p, h): substitute(v, p, h)
                for k, v in value.items()}
    return value


def write_files(t, files):
    for rel, content in files.items():
        path = os.path.join(t, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            if isinstance(content, str):
                f.write(content)
            else:
                json.dump(content, f, indent=2)
                f.write("\n")


def replace(path):
    """Removes whatever is at path (a file, a link, a FIFO, a tree)."""
    if os.path.islink(path) or (os.path.lexists(path)
                                and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)


def make_tree(t, case, prefix, p, h):
    """Creates the case's <prefix>dirs, files, symlinks, big_files (path =>
    size: a JSON object padded with spaces to that many bytes) and fifos.
    After trust (prefix "after_trust_") each replaces what is there."""
    def sub(v):
        return substitute(v, p, h)

    def parent(rel):
        path = os.path.join(t, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if prefix:
            replace(path)
        return path

    for d in sub(case.get(prefix + "dirs", [])):
        os.makedirs(parent(d), exist_ok=True)
    if prefix:
        for rel in sub(case.get(prefix + "files", {})):
            parent(rel)
    write_files(t, sub(case.get(prefix + "files", {})))
    for link, target in sub(case.get(prefix + "symlinks", {})).items():
        os.symlink(target, parent(link))
    for rel, size in sub(case.get(prefix + "big_files", {})).items():
        with open(parent(rel), "w", encoding="utf-8") as f:
            f.write("{}" + " " * max(0, size - 2))
    for rel in sub(case.get(prefix + "fifos", [])):
        os.mkfifo(parent(rel))


def build(t, case):
    """Creates the case's tree under t (already canonical)."""
    p, h = os.path.join(t, "p"), os.path.join(t, "h")
    for d in ("p/.git", "h/.config", "h/.local/state"):
        os.makedirs(os.path.join(t, d))
    make_tree(t, case, "", p, h)
    return p, h


def environment(t):
    env = {k: os.environ[k] for k in KEPT_ENV + SANITIZER_ENV
           if k in os.environ}
    h = os.path.join(t, "h")
    env.update(HOME=h,
               XDG_CONFIG_HOME=os.path.join(h, ".config"),
               XDG_STATE_HOME=os.path.join(h, ".local/state"),
               XDG_DATA_HOME=os.path.join(h, ".local/share"),
               XDG_CACHE_HOME=os.path.join(h, ".cache"))
    return env


def run(broker, args, cwd, env):
    try:
        return subprocess.run(broker + args, cwd=cwd, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise CaseError("%s timed out after %d s" % (args[0], TIMEOUT))
    except OSError as e:
        raise CaseError("cannot run %s: %s" % (" ".join(broker), e))


def first_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[0] if lines else ""


def decide(broker, t, case):
    """Builds the case and returns the broker's decision object."""
    p, h = build(t, case)
    env = environment(t)
    if case.get("trust"):
        r = run(broker, ["trust", "--cwd", p], p, env)
        if r.returncode != 0:
            raise CaseError("trust exited %d: %s"
                            % (r.returncode, first_line(r.stderr)))
    make_tree(t, case, "after_trust_", p, h)
    request = os.path.join(t, "request.json")
    with open(request, "w", encoding="utf-8") as f:
        json.dump(substitute(case["request"], p, h), f)
    r = run(broker, ["decide", "--cwd", p, "--request", request], p, env)
    if r.returncode != 0:
        raise CaseError("decide exited %d: %s"
                        % (r.returncode, first_line(r.stderr)))
    try:
        out = json.loads(r.stdout)
    except ValueError:
        raise CaseError("decide printed no single JSON object: %r"
                        % r.stdout[:200])
    if not isinstance(out, dict):
        raise CaseError("decide printed %r, not an object" % r.stdout[:200])
    return out


def judge(case, out):
    """Returns None when out satisfies the case, else what went wrong."""
    expect, got = case["expect"], out.get("decision")
    hedged = case.get("tier") == "H" and got == "ask"
    if got != expect and not hedged:
        return "expected %s got %s" % (expect, got)
    want_reason = case.get("expect_reason")
    if want_reason and want_reason not in (out.get("reason") or ""):
        return "expected the reason to name %r" % want_reason
    if "expect_option" not in case or hedged:
        return None
    want, opt = case["expect_option"], out.get("optionId")
    if want is None and opt is not None:
        return "expected optionId null got %s" % json.dumps(opt)
    if want == "cancelled" and (got != "deny" or opt is not None):
        return ("expected deny with optionId null (cancelled) got %s with %s"
                % (got, json.dumps(opt)))
    if want not in (None, "cancelled") and opt != want:
        return "expected optionId %s got %s" % (json.dumps(want),
                                                json.dumps(opt))
    return None


def load_cases(path):
    cases = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    cases.append(json.loads(line))
                except ValueError as e:
                    sys.exit("%s:%d: %s" % (path, n, e))
    only = os.environ.get("CONFORMANCE_ONLY")
    if only:
        ids = set(only.split(","))
        cases = [c for c in cases if c["id"] in ids]
    return cases


def broker_command(arg):
    if os.path.exists(arg):
        return [os.path.abspath(arg)]
    cmd = shlex.split(arg)
    if cmd and os.path.exists(cmd[-1]):
        cmd[-1] = os.path.abspath(cmd[-1])
    return cmd


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    here = os.path.dirname(os.path.abspath(__file__))
    fixture = argv[2] if len(argv) == 3 else os.path.join(
        here, "fixtures", "policy.jsonl")
    broker = broker_command(argv[1])
    cases = load_cases(fixture)
    keep = os.environ.get("CONFORMANCE_KEEP") == "1"
    print("1..%d" % len(cases))
    failed = 0
    for n, case in enumerate(cases, 1):
        t = os.path.realpath(tempfile.mkdtemp(prefix="acp-conf."))
        out = {}
        try:
            out = decide(broker, t, case)
            if "expect_reason" in case:
                p, h = os.path.join(t, "p"), os.path.join(t, "h")
                case = dict(case, expect_reason=substitute(
                    case["expect_reason"], p, h))
            problem = judge(case, out)
        except CaseError as e:
            problem = str(e)
        if problem is None:
            print("ok %d - %s: %s" % (n, case["id"], case.get("why", "")))
        else:
            failed += 1
            print("not ok %d - %s: %s (reason: %s)"
                  % (n, case["id"], problem, out.get("reason", "")))
            print("#   why: %s" % case.get("why", ""))
            if out:
                print("#   got: %s" % json.dumps(out))
            if keep:
                print("#   kept %s" % t)
        if problem is None or not keep:
            shutil.rmtree(t, ignore_errors=True)
        sys.stdout.flush()
    if failed:
        print("# %d of %d failed" % (failed, len(cases)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
