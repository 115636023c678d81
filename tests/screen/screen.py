#!/usr/bin/env python3
"""tests/screen/screen.py NVIM BROKER DEMO -- the permission prompt in a real
terminal: Neovim's TUI in a detached tmux session of a given size, read back
with `tmux capture-pane` (a headless Neovim draws nothing, so only this shows
what a person sees). Prints TAP lines; without tmux, one "ok ... # SKIP"
line. Each case has its own tmux server (a private socket), HOME and project.

Cases: 80x24 with a 400-character command ("Run a long pipeline"), 80x24
with a 537-line diff, 200x50 (the window's bottom border right under its
last row), 50x12, 80x24 with the broader rule's line (`git status`: the
line itself, then `P` and its message; a compound command: the short line
that replaces it), and the OSC 9 notification of a prompt that arrives
while Neovim is not focused (the bytes Neovim wrote, from `tmux
pipe-pane`).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LONG = " | ".join([
    'find . -name "*.log" -mtime +7 -print0',
    "xargs -0 grep -E 'error|fatal|panic' --with-filename --line-number",
    "sort -t: -k1,1 -k2,2n",
    "awk -F: '{count[$1]++} END {for (f in count) print count[f], f}'",
    "sort -rn",
    "head -n 50",
    "tee build/reports/errors-by-file-with-a-rather-long-name.txt",
    "column -t",
    "less -R",
])
while len(LONG) < 400:
    LONG += " | cat"

OPTIONS = [
    {"kind": "allow_always", "name": "Always Allow", "optionId": "allow_always"},
    {"kind": "allow_once", "name": "Allow", "optionId": "allow"},
    {"kind": "reject_once", "name": "Reject", "optionId": "reject"},
]


def shell(tcid, title, command):
    return {"type": "permission", "announce": True, "options": OPTIONS,
            "toolCall": {"toolCallId": tcid, "title": title, "kind": "execute",
                         "rawInput": {"command": command}}}


def huge():
    text = "".join("line %d of the generated file\n" % i for i in range(1, 538))
    return {"type": "permission", "announce": True, "options": OPTIONS[1:],
            "toolCall": {"toolCallId": "huge_${turn}", "title": "Write huge.txt", "kind": "edit",
                         "content": [{"type": "diff", "path": "${cwd}/huge.txt", "oldText": "old\n",
                                      "newText": text}]}}


class Screen:
    def __init__(self, nvim, broker, demo, cols, rows, steps, env=None):
        self.tmp = tempfile.mkdtemp(prefix="acp-screen.")
        self.sock = "acp-screen-%d-%d" % (os.getpid(), id(self))
        project = os.path.join(self.tmp, "project")
        for d in ("home", "config", "state", "data", "cache", "tmp", "project/.acp"):
            os.makedirs(os.path.join(self.tmp, d), exist_ok=True)
        with open(os.path.join(project, "huge.txt"), "w") as f:
            f.write("old\n")
        scenario = os.path.join(self.tmp, "scenario.json")
        with open(scenario, "w") as f:
            json.dump({"name": "screen", "steps": steps}, f)
        e = {
            "HOME": self.tmp + "/home", "XDG_CONFIG_HOME": self.tmp + "/config",
            "XDG_STATE_HOME": self.tmp + "/state", "XDG_DATA_HOME": self.tmp + "/data",
            "XDG_CACHE_HOME": self.tmp + "/cache", "TMPDIR": self.tmp + "/tmp",
            "ACP_BROKER_BIN": broker, "ACP_DEMO_AGENT_BIN": demo, "ACP_DEMO_SCENARIO": scenario,
            "ACP_SCREEN_ROOT": ROOT, "TERM": "tmux-256color",
        }
        e.update(env or {})
        cmd = "cd %s && exec env -u VIMRUNTIME -u NVIM -u TMUX %s %s --clean -u %s" % (
            shlex.quote(project), " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in e.items()),
            shlex.quote(nvim), shlex.quote(os.path.join(ROOT, "tests/screen/init.lua")))
        self.tmux("new-session", "-d", "-s", "s", "-x", str(cols), "-y", str(rows), cmd)
        self.raw = os.path.join(self.tmp, "raw")
        self.tmux("pipe-pane", "-O", "-t", "s", "cat >> " + shlex.quote(self.raw))

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null"] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)

    def capture(self):
        return self.tmux("capture-pane", "-p", "-t", "s").stdout.split("\n")

    def wait(self, pred, what, timeout=15):
        end = time.time() + timeout
        rows = self.capture()
        while time.time() < end:
            rows = self.capture()
            if pred(rows):
                return rows
            time.sleep(0.1)  # polling the screen for a condition
        raise AssertionError("timed out waiting for %s; the screen:\n%s" % (what, "\n".join(rows)))

    def close(self):
        self.tmux("send-keys", "-t", "s", "Escape", ":qa!", "Enter")
        time.sleep(0.3)
        self.tmux("kill-server")
        shutil.rmtree(self.tmp, ignore_errors=True)


def inner(rows):
    """The text of the rows inside the prompt's border (│ ... │), with row numbers."""
    out = []
    for i, r in enumerate(rows):
        s = r.find("│")
        e = r.rfind("│")
        if s >= 0 and e > s:
            out.append((i, r[s + 1:e].rstrip()))
    return out


def row_of(rows, text):
    for i, r in enumerate(rows):
        if text in r:
            return i
    return None


RESULTS = []


def check(cond, name, detail=""):
    RESULTS.append(bool(cond))
    print(("ok - " if cond else "not ok - ") + name)
    if not cond and detail:
        for line in detail.split("\n"):
            print("#   " + line)


def case_long(args, cols, rows):
    scr = Screen(*args, cols, rows, [shell("long_${turn}", "Run a long pipeline", LONG)])
    try:
        screen = scr.wait(lambda r: row_of(r, "[3] Reject") is not None, "the prompt")
        dump = "\n".join(screen)
        body = inner(screen)
        text = " ".join(t.strip() for _, t in body)
        first = row_of(screen, "[1] Always Allow")
        cmd = row_of(screen, "$ find")
        check(cmd is not None and first is not None and cmd < first,
              "%dx%d long command: the command is on screen above the options" % (cols, rows), dump)
        if rows >= 24:
            missing = [w for w in LONG.split(" ") if w and w not in text]
            check(not missing, "%dx%d long command: every word of it on screen, whole (wrapped at spaces)" % (cols, rows),
                  "missing: %r\n%s" % (missing, dump))
        else:
            check("…" in text and "xargs -0 grep" in text,
                  "%dx%d long command: its first rows on screen, the cut marked with …" % (cols, rows), dump)
        check(row_of(screen, "[3] Reject") is not None and row_of(screen, "[t] trust this agent") is not None,
              "%dx%d long command: every option on screen" % (cols, rows), dump)
        check("'error|fatal|panic'" in text, "%dx%d long command: the quotes are kept" % (cols, rows), dump)
    finally:
        scr.close()


def case_huge(args):
    scr = Screen(*args, 80, 24, [huge()])
    try:
        screen = scr.wait(lambda r: row_of(r, "[2] Reject") is not None, "the prompt")
        dump = "\n".join(screen)
        stat = row_of(screen, "huge.txt: +537 -1")
        first = row_of(screen, "[1] Allow")
        check(stat is not None and first is not None and stat < first,
              "80x24 537-line diff: the diff stat on screen above the options", dump)
        check(row_of(screen, "+line 1 of the generated file") is not None,
              "80x24 537-line diff: its first lines on screen", dump)
        check(row_of(screen, "[2] Reject") is not None and row_of(screen, "d: diff") is not None,
              "80x24 537-line diff: the options and the d key on screen", dump)
    finally:
        scr.close()


def case_big(args):
    scr = Screen(*args, 200, 50, [shell("cmd_${turn}", "git status", "git status")])
    try:
        screen = scr.wait(lambda r: row_of(r, "[3] Reject") is not None and row_of(r, "╰") is not None,
                          "the prompt")
        dump = "\n".join(screen)
        last = row_of(screen, "<CR>: the option under the cursor")
        bottom = row_of(screen, "╰")
        check(last is not None and bottom == last + 1,
              "200x50: the window is as tall as its text (the border right under the last row)", dump)
        check(row_of(screen, "$ git status") < row_of(screen, "[1] Always Allow"),
              "200x50: $ git status above the options", dump)
    finally:
        scr.close()


def case_broad(args):
    compound = "git status -s && npm run test && ls -la src"
    scr = Screen(*args, 80, 24, [shell("git_${turn}", "git status", "git status"), {"type": "sleep", "ms": 3000},
                                 shell("cmp_${turn}", compound, compound)])
    try:
        screen = scr.wait(lambda r: row_of(r, "[3] Reject") is not None, "the prompt")
        dump = "\n".join(screen)
        cmd, first, last = row_of(screen, "$ git status"), row_of(screen, "[1] Always Allow"), row_of(screen, "[3] Reject")
        broad = row_of(screen, "[S]/[P] like s/p, broader: Bash(git status *)")
        check(cmd is not None and first is not None and cmd < first and last is not None,
              "80x24 broad: the command above the options, every option on screen", dump)
        check(broad is not None and row_of(screen, "[p] allow like this") < broad < row_of(screen, "[t] trust"),
              "80x24 broad: the line of S and P under p, with the broader rule", dump)
        check(row_of(screen, "s p S P t: answer") is not None, "80x24 broad: the footer names S and P", dump)
        time.sleep(0.3)  # the prompt's arming delay (ui.arm_ms = 100 in tests/screen/init.lua)
        scr.tmux("send-keys", "-t", "s", "P")
        screen = scr.wait(lambda r: row_of(r, "acp: wrote the allow rule") is not None, "the message of P")
        dump = "\n".join(screen)
        check(row_of(screen, "acp: wrote the allow rule Bash(git status *) to .acp/settings.json") == len(screen) - 2
              and row_of(screen, "Press ENTER") is None,
              "80x24 broad: P says which rule went where, on one line (no hit-enter prompt)", dump)
        screen = scr.wait(lambda r: row_of(r, "$ git status -s") is not None, "the compound command's prompt")
        screen = scr.wait(lambda r: row_of(r, "[3] Reject") is not None, "its options")
        dump = "\n".join(screen)
        note = row_of(screen, "[S]/[P] like s/p, broader: see the details below")
        check(row_of(screen, "$ git status -s") < row_of(screen, "[1] Always Allow") and note is not None
              and row_of(screen, "[3] Reject") < note,
              "80x24 broad, compound command: command and options on screen, one short line for the broader rule", dump)
    finally:
        scr.close()


def case_osc(args):
    scr = Screen(*args, 80, 24, [{"type": "sleep", "ms": 1500}, shell("cmd_${turn}", "git status", "git status")],
                 env={"ACP_SCREEN_OSC": "9"})
    try:
        scr.wait(lambda r: row_of(r, "session ready") is not None, "the session")
        # What a terminal sends when its window loses the focus (Neovim asks
        # for these reports with ESC [ ? 1004 h).
        scr.tmux("send-keys", "-t", "s", "-l", "\x1b[O")
        scr.wait(lambda r: row_of(r, "[3] Reject") is not None, "the prompt")
        end = time.time() + 5
        raw = b""
        while time.time() < end:
            try:
                with open(scr.raw, "rb") as f:
                    raw = f.read()
            except OSError:
                raw = b""
            if b"\x1b]9;acp: " in raw:
                break
            time.sleep(0.1)  # polling the captured output
        check(b"\x1b]9;acp: acp-demo-agent asks for permission: git status" in raw,
              "OSC 9: a prompt arriving while Neovim is not focused reaches the terminal",
              "raw output around ']9;': %r" % raw[raw.find(b"]9;") - 20:raw.find(b"]9;") + 80] if b"]9;" in raw else "no ]9; in %d bytes" % len(raw))
    finally:
        scr.close()


def main():
    if len(sys.argv) != 4:
        print("usage: screen.py NVIM BROKER DEMO", file=sys.stderr)
        return 2
    if shutil.which("tmux") is None:
        print("ok - skip: tmux not found, no screen checks # SKIP")
        return 0
    args = [os.path.abspath(a) if "/" in a else a for a in sys.argv[1:4]]
    for name, fn in [("80x24 long", lambda: case_long(args, 80, 24)), ("50x12 long", lambda: case_long(args, 50, 12)),
                     ("80x24 huge diff", lambda: case_huge(args)), ("200x50", lambda: case_big(args)),
                     ("80x24 broad", lambda: case_broad(args)),
                     ("osc", lambda: case_osc(args))]:
        try:
            fn()
        except Exception as e:  # a case that could not run is a failure
            check(False, "screen case %s" % name, str(e))
    return 0 if all(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
