#!/usr/bin/env python3
"""The bash oracle: runs command lines in real bash inside a throwaway
sandbox, records what bash did (strace), and checks that the shell
analyser's atoms represent it. See tests/oracle/README.md.

Needs root (namespaces, chroot), strace, unshare and setpriv (util-linux).
"""

import argparse
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gen  # noqa: E402  (the generator, tests/oracle/gen.py)

# The sandbox's paths, as the command sees them (inside the chroot).
HOME = "/home/user"
PROJECT = HOME + "/project"
TRACE = "/.oracle/trace"
NOBODY = 65534
PATH_ENV = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

STRACE_CALLS = (
    "execve,execveat,open,openat,openat2,creat,rename,renameat,renameat2,"
    "unlink,unlinkat,rmdir,mkdir,mkdirat,chmod,fchmodat,link,linkat,"
    "symlink,symlinkat,truncate,clone,clone3,fork,vfork"
)

# ---- what the oracle knows about programs --------------------------------

SHELLS = {
    "sh", "bash", "rbash", "dash", "ash", "ksh", "ksh93", "mksh", "pdksh",
    "oksh", "lksh", "zsh", "yash", "posh", "hush", "busybox", "toybox",
    "fish", "csh", "tcsh",
}
# Wrappers the analyser strips for every rule type: running them needs no
# atom of their own, what they run does.
STRIP_WRAPPERS = {"timeout", "nice", "nohup", "stdbuf", "time"}
# Programs the analyser claims to model, or that run code taken from their
# arguments: what they exec must be an atom (or the result opaque).
CHECKED_PROGRAMS = STRIP_WRAPPERS | {
    "env", "sudo", "doas", "xargs", "find", "watch", "setsid", "ionice",
    "flock", "chroot", "su", "runuser", "awk", "gawk", "mawk", "nawk",
    "original-awk", "sed", "git", "script", "busybox", "toybox",
}
GIT_CORE = "/usr/lib/git-core/"

# Protected paths (permission-rules §5 / src/policy/policy.c tiers 1 and 2).
HOME_FILES = {
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
    ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout", ".gitconfig",
}
HOME_DIRS = {".ssh", ".config/git", ".config/fish", ".gemini", ".claude",
             ".codex"}
PROJECT_DIRS = {".gemini", ".claude", ".codex", ".acp", ".git", ".vscode",
                ".idea", ".husky", ".cargo", ".devcontainer", ".yarn", ".mvn"}


def under(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def protected(path):
    """True when path is one the policy protects (tier 1 or 2)."""
    if under(path, PROJECT):
        rel = path[len(PROJECT):].strip("/")
        parts = rel.split("/") if rel else []
        if any(p in PROJECT_DIRS for p in parts):
            return True
        if parts and parts[-1] == ".envrc":
            return True
    if under(path, HOME):
        rel = path[len(HOME):].strip("/")
        if rel in HOME_FILES:
            return True
        if any(under(rel, d) for d in HOME_DIRS):
            return True
    return False


def exempt_shell_write(path):
    """Writes by the shell that are no file atoms: devices, fds, heredocs."""
    return (path.startswith("/dev/") or path.startswith("/proc/")
            or os.path.basename(path).startswith("sh-thd"))


def shell_mode(argv):
    """'c' (runs -c SCRIPT), 'stdin' (reads its script from stdin or a
    stdin alias) or 'file' (runs a script file: the file's business)."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--", "-"):
            i += 1
            break
        if not a or a[0] not in "-+" or a == "+":
            break
        if a.startswith("--"):
            i += 1
            continue
        if a[0] == "-" and "c" in a[1:]:
            return "c"
        if "o" in a[1:] or "O" in a[1:]:
            i += 1
        i += 1
    if i >= len(argv):
        return "stdin"
    f = argv[i]
    if f in ("/dev/stdin", "-") or re.match(
            r"^/(dev/fd|proc/(self|thread-self|\d+)/fd)/\d+$", f):
        return "stdin"
    return "file"


# ---- the trace ---------------------------------------------------------------

LINE = re.compile(r"^(\d+) +(.*)$")
CALL = re.compile(r"^([a-z0-9_]+)\((.*)\) += (.*)$", re.S)
RESUMED = re.compile(r"^<\.\.\. ([a-z0-9_]+) resumed>(.*)$", re.S)


def split_args(s):
    """Splits strace's argument text at top-level commas."""
    out, depth, cur, i, q = [], 0, [], 0, False
    while i < len(s):
        ch = s[i]
        if q:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(s):
                cur.append(s[i + 1])
                i += 1
            elif ch == '"':
                q = False
        elif ch == '"':
            q = True
            cur.append(ch)
        elif ch in "[{(<":
            depth += 1
            cur.append(ch)
        elif ch in "]})>":
            depth -= 1
            cur.append(ch)
        elif ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if cur or out:
        out.append("".join(cur).strip())
    return out


ESC = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a",
       "b": "\b", "\\": "\\", '"': '"'}


def cstr(s):
    """strace's quoted string (possibly followed by ...) to bytes-as-str."""
    s = s.strip()
    if not s.startswith('"'):
        return None
    out, i = [], 1
    while i < len(s):
        ch = s[i]
        if ch == '"':
            break
        if ch == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x":
                out.append(chr(int(s[i + 2:i + 4], 16)))
                i += 4
                continue
            if n.isdigit():
                m = re.match(r"[0-7]{1,3}", s[i + 1:])
                out.append(chr(int(m.group(0), 8)))
                i += 1 + len(m.group(0))
                continue
            out.append(ESC.get(n, n))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def fd_path(arg):
    """AT_FDCWD</dir> or 3</dir> -> /dir (strace -y)."""
    m = re.match(r"^(?:AT_FDCWD|-?\d+)<(.*)>$", arg.strip(), re.S)
    return m.group(1) if m else None


def ret_path(ret):
    m = re.match(r"^(\d+)<(.*)>", ret, re.S)
    return m.group(2) if m else None


def ok(ret):
    return not ret.startswith("-1") and not ret.startswith("?")


def join(base, p):
    if p is None:
        return None
    if not p.startswith("/"):
        if base is None:
            return None
        p = base.rstrip("/") + "/" + p
    return os.path.normpath(p).replace("//", "/")


WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def parse_trace(text):
    """Yields (pid, syscall, args, ret) with unfinished calls joined."""
    pending = {}
    for raw in text.split("\n"):
        m = LINE.match(raw)
        if not m:
            continue
        pid, rest = int(m.group(1)), m.group(2)
        if rest.startswith("+++") or rest.startswith("---"):
            continue
        if rest.endswith("<unfinished ...>"):
            pending[pid] = rest[: -len("<unfinished ...>")].rstrip()
            yield pid, "?start", None, None  # a call began (clone order)
            continue
        r = RESUMED.match(rest)
        if r:
            rest = pending.pop(pid, r.group(1) + "(") + r.group(2)
        c = CALL.match(rest)
        if not c:
            continue
        yield pid, c.group(1), c.group(2), c.group(3)


class Proc:
    """A traced process: its program, and kind: "pre" (setpriv, before
    bash), "shell" (a shell whose commands must be atoms), "checked" (a
    program whose execs must be atoms) or "unchecked" (a program whose
    execs are its business). git: runs under git (git-core helpers)."""
    __slots__ = ("image", "path", "argv", "kind", "git")

    def __init__(self, image, path, argv, kind, git=False):
        self.image, self.path, self.argv, self.kind = image, path, argv, kind
        self.git = git

    def copy(self):
        return Proc(self.image, self.path, self.argv, self.kind, self.git)


def analyse_trace(text):
    """What the traced run did: execs that need an atom and writes.

    Returns (execs, writes): execs are dicts {path, argv, by} of programs
    run by a checked process (the shell, or a program the analyser claims
    to model); writes are dicts {path, op, by, shell} of files written."""
    events = list(parse_trace(text))
    parent = {}
    for pid, sc, args, ret in events:
        if sc in ("clone", "clone3", "fork", "vfork") and ret:
            m = re.match(r"^(\d+)", ret)
            if m:
                parent[int(m.group(1))] = pid
    procs, execs, writes = {}, [], []
    root = events[0][0] if events else None
    # The root process is setpriv until it execs bash: kind "pre".
    if root is not None:
        procs[root] = Proc("setpriv", "", [], "pre")
    for pid, sc, args, ret in events:
        if pid not in procs:
            pp = procs.get(parent.get(pid))
            procs[pid] = pp.copy() if pp else Proc("?", "", [], "unchecked")
        pr = procs[pid]
        if sc == "?start":
            continue
        a = split_args(args)
        if sc in ("execve", "execveat"):
            if "ENOEXEC" in ret and pr.kind == "shell":
                # No #! line: this (forked) bash runs the file itself, like
                # `bash FILE`; its commands are the file's business, and
                # the file needs a command atom.
                path = cstr(a[0] if sc == "execve" else a[1]) or ""
                execs.append({"path": path, "argv": [path], "by": pr.image})
                pr.kind = "unchecked"
                continue
            if not ok(ret):
                continue
            if sc == "execve":
                path = cstr(a[0]) or ""
                argv_s = a[1] if len(a) > 1 else "[]"
            else:
                path = join(fd_path(a[0]), cstr(a[1])) or cstr(a[1]) or ""
                argv_s = a[2] if len(a) > 2 else "[]"
            argv = [cstr(x) or "" for x in split_args(argv_s.strip()[1:-1])
                    if x.startswith('"')]
            name = os.path.basename(path)
            if pr.kind == "pre":
                procs[pid] = Proc(name, path, argv,
                                  "shell" if name == "bash" else "pre")
                continue
            if pr.kind in ("shell", "checked"):
                kind = "unchecked"
                need = True
                applet = argv[1:] if name in ("busybox", "toybox") else argv
                if name in ("busybox", "toybox") and (
                        not applet or base(applet[0]) not in SHELLS):
                    kind, need = "checked", True  # rm, xargs, find, ...
                elif name in SHELLS:
                    mode = shell_mode(applet)
                    kind = "shell" if mode != "file" else "unchecked"
                    need = mode != "c"
                elif pr.git and (path.startswith(GIT_CORE)
                                 or name.startswith("git-")):
                    kind, need = "checked", False  # git's own helpers
                elif name in CHECKED_PROGRAMS:
                    kind = "checked"
                    # Bare xargs (no option) is stripped like timeout.
                    need = name not in STRIP_WRAPPERS and not (
                        name == "xargs" and len(argv) > 1
                        and not argv[1].startswith("-"))
                if need:
                    execs.append({"path": path, "argv": argv,
                                  "by": pr.image})
                procs[pid] = Proc(name, path, argv, kind,
                                  pr.git or name == "git")
            else:
                procs[pid] = Proc(name, path, argv, "unchecked")
            continue
        for wr in write_of(sc, a, ret):
            if wr[0] is None:
                continue
            writes.append({"path": wr[0], "op": wr[1], "by": pr.image,
                           "shell": pr.kind == "shell", "ok": ok(ret),
                           "named": wr[2] if len(wr) > 2 else wr[0]})
    return execs, writes


def write_of(sc, a, ret):
    """The paths a syscall writes, resolved: [(path, op)]."""
    def at(i, j):  # dirfd at i, path at j
        if len(a) <= j:
            return None
        return join(fd_path(a[i]), cstr(a[j]))

    def cwd(i):
        return None if len(a) <= i else cstr(a[i])

    if sc in ("open", "openat", "openat2", "creat"):
        if sc == "open":
            p, flags = cwd(0), (a[1] if len(a) > 1 else "")
        elif sc == "creat":
            p, flags = cwd(0), "O_CREAT"
        else:
            p, flags = at(0, 1), (a[2] if len(a) > 2 else "")
        if not any(f in flags for f in WRITE_FLAGS):
            return []
        rp = ret_path(ret)  # pipe:[N] for /dev/fd/N: keep the name
        if rp and rp[0] == "/" and p and os.path.normpath(rp) != p:
            # Through a symlink (one the command may have just made): the
            # file as named and the file written.
            return [(os.path.normpath(rp), "open", p)]
        return [(p, "open")]
    if sc in ("rename",):
        return [(cwd(0), "rename"), (cwd(1), "rename")]
    if sc in ("renameat", "renameat2"):
        return [(at(0, 1), "rename"), (at(2, 3), "rename")]
    if sc in ("unlink", "rmdir", "mkdir", "chmod", "truncate"):
        return [(cwd(0), sc)]
    if sc in ("unlinkat", "mkdirat", "fchmodat"):
        return [(at(0, 1), sc)]
    if sc == "link":
        return [(cwd(1), sc)]
    if sc == "linkat":
        return [(at(2, 3), sc)]
    if sc == "symlink":
        return [(cwd(1), sc)]
    if sc == "symlinkat":
        return [(at(1, 2), sc)]
    return []


# ---- the property ------------------------------------------------------------

def base(s):
    b = s.rstrip("/").rsplit("/", 1)[-1]
    return b or s


def resolve_atom_path(p):
    if p.startswith("/"):
        return os.path.normpath(p)
    return os.path.normpath(PROJECT + "/" + p)


def temp_of(path, edit):
    """True when a program writing edit may write path on the way: a
    temporary or backup file next to it (file.lock, file.bak, file~,
    sed -i's sedXXXXXX)."""
    d, b = os.path.split(path)
    ed, eb = os.path.split(edit)
    return d == ed and (b.startswith(eb) or re.match(
        r"^(sed[A-Za-z0-9]{6}|[A-Za-z0-9]{8})$", b) is not None)


def check(execs, writes, res):
    """The disagreements between what bash did and the atoms (a list of
    strings; empty when the atoms represent it or the result is opaque)."""
    if res.get("opaque"):
        return []
    names = set()
    edits = []
    any_dyn_edit = False
    fed = set()  # programs whose operands come from stdin (xargs)
    for at in res["atoms"]:
        if at["kind"] == "cmd" and at["words"]:
            w0 = at["words"][0]
            if not w0["dynamic"]:
                names.add(base(w0["text"]))
                if at.get("more_args"):
                    fed.add(base(w0["text"]))
        elif at["kind"] == "edit":
            if at["path_dynamic"]:
                any_dyn_edit = True
            else:
                edits.append(resolve_atom_path(at["path"]))
    bad = []
    seen = set()
    for e in execs:
        name = base(e["path"])
        if name in names:
            continue
        key = ("exec", name, e["by"])
        if key in seen:
            continue
        seen.add(key)
        bad.append("exec %s %s (by %s): no command atom %r" % (
            e["path"], json.dumps(e["argv"][:8]), e["by"], name))
    for w in writes:
        p = w["path"]
        if w["shell"]:
            if exempt_shell_write(p):
                continue
        elif not protected(p):
            continue  # a program's own files are its business
        elif not w["ok"]:
            continue
        elif (w["by"] == "git" and under(p, PROJECT + "/.git")
              and p != PROJECT + "/.git/config"
              and not under(p, PROJECT + "/.git/hooks")):
            continue  # git keeps its repository
        named = w["named"]
        if any_dyn_edit or any(under(p, e) for e in edits):
            continue
        # Written through a symlink: the name it was written by is enough
        # unless only the target is protected (the policy judges names).
        if (named != p and (protected(named) or not protected(p))
                and any(under(named, e) for e in edits)):
            continue
        if not w["shell"] and w["by"] in fed:
            continue  # its paths are unknown: the analyser says so
        if not w["shell"] and any(temp_of(p, e) for e in edits):
            continue
        key = ("write", p)
        if key in seen:
            continue
        seen.add(key)
        bad.append("%s %s (by %s%s%s): no edit atom" % (
            w["op"], p, w["by"], ", the shell" if w["shell"] else "",
            ", protected" if protected(p) else ""))
    return bad


def atoms_text(res):
    out = []
    for at in res.get("atoms", []):
        tag = "*" if at.get("deny_only") else ""
        if at["kind"] == "cmd":
            ws = " ".join(("$" if w["dynamic"] else "") + json.dumps(w["text"])
                          for w in at["words"])
            asg = ",".join(at.get("assign", []))
            out.append("cmd%s[%s%s]" % (tag, ws, (" =" + asg) if asg else ""))
        else:
            out.append("%s%s[%s%s]" % (at["kind"], tag,
                                       "$" if at["path_dynamic"] else "",
                                       json.dumps(at["path"])))
    s = " ".join(out)
    if res.get("opaque"):
        s += " OPAQUE(%s)" % res.get("reason", "")
    return s


# ---- the sandbox -------------------------------------------------------------

SEED_FILES = {
    HOME + "/.bashrc": "# bashrc\n",
    HOME + "/.profile": "# profile\n",
    HOME + "/.zshrc": "# zshrc\n",
    HOME + "/.gitconfig": "[user]\n\tname = u\n\temail = u@example.org\n",
    HOME + "/.ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n",
    HOME + "/.ssh/authorized_keys": "ssh-ed25519 AAAA u\n",
    HOME + "/.claude/settings.json": "{}\n",
    HOME + "/.config/acp-broker/settings.json": "{}\n",
    HOME + "/notes.txt": "notes\n",
    PROJECT + "/.claude/settings.json": "{\"permissions\":{}}\n",
    PROJECT + "/.acp/settings.json": "{\"permissions\":{}}\n",
    PROJECT + "/.envrc": "export X=1\n",
    PROJECT + "/README.md": "# project\n",
    PROJECT + "/Makefile": "all:\n\ttrue\n",
    PROJECT + "/package.json": "{\"name\":\"p\",\"scripts\":{}}\n",
    PROJECT + "/src/main.c": "int main(void) { return 0; }\n",
    PROJECT + "/src/util.c": "int util;\n",
    PROJECT + "/src/lib/a.txt": "a\nb\nc\n",
    PROJECT + "/docs/guide.md": "guide\n",
    PROJECT + "/files.txt": "src/main.c\nsrc/util.c\n",
}


def sh(*argv):
    subprocess.run(argv, check=True)


LIBC = None


def tmpfs(target, mode):
    """Mounts a fresh tmpfs on target, over whatever was there (mount(2)
    through libc: a mount(8) per run costs more than the run)."""
    global LIBC
    if LIBC is None:
        import ctypes
        import ctypes.util
        LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    LIBC.umount2(target.encode(), 2)  # MNT_DETACH; fails when none
    opts = ("size=32m,mode=%s" % mode).encode()
    if LIBC.mount(b"tmpfs", target.encode(), b"tmpfs", 0, opts) != 0:
        import ctypes
        raise OSError(ctypes.get_errno(), "mount tmpfs " + target)


class Sandbox:
    """A chroot on tmpfs: the system read-only, /home and /tmp scratch,
    a minimal /dev; every run is a fresh PID namespace as nobody without
    capabilities. Built inside a private mount/net/PID namespace."""

    def __init__(self, timeout):
        self.timeout = timeout
        self.root = tempfile.mkdtemp(prefix="acp-oracle.")
        r = self.root
        sh("mount", "--make-rprivate", "/")
        sh("mount", "-t", "tmpfs", "-o", "size=8m,mode=755", "tmpfs", r)
        for d in ("usr", "etc"):
            os.mkdir(r + "/" + d)
            sh("mount", "--bind", "-o", "ro", "/" + d, r + "/" + d)
        for d in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + d):
                os.symlink(os.readlink("/" + d), r + "/" + d)
            elif os.path.isdir("/" + d):
                os.mkdir(r + "/" + d)
                sh("mount", "--bind", "-o", "ro", "/" + d, r + "/" + d)
        os.makedirs(r + "/dev")
        for n in ("null", "zero", "full", "random", "urandom"):
            open(r + "/dev/" + n, "w").close()
            sh("mount", "--bind", "/dev/" + n, r + "/dev/" + n)
        os.symlink("/proc/self/fd", r + "/dev/fd")
        for i, n in enumerate(("stdin", "stdout", "stderr")):
            os.symlink("/proc/self/fd/%d" % i, r + "/dev/" + n)
        os.mkdir(r + "/proc")
        sh("mount", "-t", "proc", "-o", "nosuid,nodev,noexec", "proc",
           r + "/proc")
        for d in ("home", "tmp", "var", "var/tmp", "run"):
            os.mkdir(r + "/" + d)
        # No system start-up commands: bash -l would run /etc/profile's.
        for f in ("/etc/profile", "/etc/bash.bashrc"):
            if os.path.exists(r + f):
                sh("mount", "--bind", r + "/dev/null", r + f)
        os.makedirs(r + "/.oracle", mode=0o700)
        # A template project with a real git repository, copied per run.
        self.template = r + "/.oracle/template"
        self._seed(self.template)
        sh("chown", "-R", "%d:%d" % (NOBODY, NOBODY), self.template + HOME)

    def close(self):
        subprocess.run(["umount", "-R", "-l", self.root])
        os.rmdir(self.root)

    def _seed(self, top):
        for path, text in SEED_FILES.items():
            p = top + path
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        proj = top + PROJECT
        if not shutil.which("git"):
            os.makedirs(proj + "/.git/hooks")
            with open(proj + "/.git/config", "w") as f:
                f.write("[core]\n\tbare = false\n")
            return
        env = {"PATH": PATH_ENV, "HOME": top + HOME,
               "GIT_CONFIG_NOSYSTEM": "1"}
        for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                     ["-c", "user.name=u", "-c", "user.email=u@example.org",
                      "commit", "-q", "-m", "init"]):
            subprocess.run(["git"] + args, cwd=proj, env=env, check=True,
                           stdout=subprocess.DEVNULL)
        hooks = proj + "/.git/hooks"
        for n in os.listdir(hooks):  # the samples: noise in every trace
            os.unlink(hooks + "/" + n)

    def reset(self):
        """Fresh scratch space: new tmpfs mounts, the template copied."""
        r = self.root
        for d, mode in (("/home", "755"), ("/tmp", "1777"),
                        ("/var/tmp", "1777")):
            tmpfs(r + d, mode)
        sh("cp", "-a", self.template + HOME, r + "/home/")
        try:
            os.unlink(r + TRACE)
        except FileNotFoundError:
            pass

    def run(self, command):
        """Runs command; returns (trace text, status, timed out)."""
        self.reset()
        r = self.root

        env = {"PATH": PATH_ENV, "HOME": HOME, "USER": "user",
               "LOGNAME": "user", "LANG": "C.UTF-8", "TERM": "dumb",
               "SHELL": "/bin/bash", "PWD": PROJECT, "TMPDIR": "/tmp"}
        # prlimit and unshare run outside (the chroot is unshare's --root);
        # no preexec_fn, so that sandboxes can run in threads.
        argv = ["prlimit", "--fsize=%d" % (8 << 20), "--cpu=20",
                "--nproc=256",
                "unshare", "--pid", "--fork", "--kill-child", "--root=" + r,
                "--wd=" + PROJECT,
                "strace", "-f", "-qq", "-y", "--seccomp-bpf", "-s", "512",
                "-e", "signal=none", "-e", "trace=" + STRACE_CALLS,
                "-o", TRACE,
                "setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
                "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                "--no-new-privs",
                "/usr/bin/bash", "-c", command]
        timed_out = False
        try:
            p = subprocess.run(argv, env=env, start_new_session=True,
                               stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL,
                               timeout=self.timeout)
            status = p.returncode
        except subprocess.TimeoutExpired:
            timed_out, status = True, None
        try:
            with open(r + TRACE, encoding="latin-1") as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        return text, status, timed_out


# ---- inputs ------------------------------------------------------------------

def read_lines(path):
    """One command per line; '#' starts a comment line; the five
    characters <NL> stand for a newline inside a command."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            out.append(line.replace("<NL>", "\n"))
    return out


def read_jsonl(path):
    """The shell commands of execute requests in a policy fixture."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                case = json.loads(line)
            except ValueError:
                continue
            tc = ((case.get("request") or {}).get("toolCall") or {})
            raw = tc.get("rawInput") or {}
            cmd = raw.get("command") if isinstance(raw, dict) else None
            if isinstance(cmd, list):
                cmd = " ".join(str(x) for x in cmd)
            if isinstance(cmd, str) and cmd.strip():
                out.append(cmd)
            elif tc.get("kind") == "execute" and isinstance(
                    tc.get("title"), str):
                t = tc["title"].strip("`")
                if t:
                    out.append(t)
    seen, uniq = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            uniq.append(c)
    return uniq


class Atoms:
    """The analyser, as a batch process (oracle-atoms HOME)."""

    def __init__(self, binary):
        self.binary = binary

    def many(self, commands):
        data = b"".join(c.encode("utf-8", "surrogateescape") + b"\0"
                        for c in commands)
        p = subprocess.run([self.binary, HOME], input=data,
                           stdout=subprocess.PIPE, check=True)
        lines = p.stdout.decode().splitlines()
        if len(lines) != len(commands):
            raise RuntimeError("oracle-atoms printed %d results for %d "
                               "commands" % (len(lines), len(commands)))
        return [json.loads(x) for x in lines]


def tap_name(c):
    s = json.dumps(c)[1:-1]
    return s if len(s) <= 200 else s[:197] + "..."


def run_all(sbs, atoms, commands, known, verbose, offset=0, quiet=False):
    """Runs commands, one per sandbox of sbs at a time; prints TAP in
    order, numbered from offset + 1; returns (failed, count, stats)."""
    results = atoms.many(commands)
    failed, n, stats = 0, 0, {"opaque": 0, "timeout": 0, "gap": 0,
                              "gap_fixed": 0}
    free = queue.Queue()
    for sb in sbs:
        free.put(sb)

    def one(cmd):
        sb = free.get()
        try:
            return sb.run(cmd)
        finally:
            free.put(sb)

    ex = ThreadPoolExecutor(len(sbs))
    runs = ex.map(one, commands)  # in order, as they finish
    for cmd, res, (text, status, timed_out) in zip(commands, results, runs):
        n += 1
        num = n + offset
        if timed_out:
            stats["timeout"] += 1
        if res.get("opaque"):
            stats["opaque"] += 1
        execs, writes = analyse_trace(text)
        bad = check(execs, writes, res)
        if not text:
            bad = ["no trace (strace did not run)"]
        gap = cmd in known
        if bad:
            stats.setdefault("bad", []).append(cmd)
        if bad and gap:
            stats["gap"] += 1
            print("ok %d - %s # TODO known gap" % (num, tap_name(cmd)))
        elif bad:
            failed += 1
            print("not ok %d - %s" % (num, tap_name(cmd)))
        elif not quiet or gap:
            if gap:
                stats["gap_fixed"] += 1
                stats.setdefault("fixed", []).append(cmd)
            print("ok %d - %s%s" % (num, tap_name(cmd),
                                     " # known gap passes now: remove it "
                                     "from known-gaps.txt" if gap else ""))
        if timed_out:
            print("#   timed out after %g s" % sbs[0].timeout)
        if bad and (not gap or verbose):
            print("#   command: %s" % json.dumps(cmd))
            for b in bad[:6]:
                print("#   bash:    %s" % b)
            if len(bad) > 6:
                print("#   bash:    ... and %d more" % (len(bad) - 6))
            print("#   atoms:   %s" % atoms_text(res))
        elif verbose:
            print("#   atoms:   %s" % atoms_text(res))
            for e in execs:
                print("#   exec %s by %s" % (json.dumps(e["argv"]), e["by"]))
            for w in writes:
                print("#   %s %s by %s" % (w["op"], w["path"], w["by"]))
        sys.stdout.flush()
    ex.shutdown()
    return failed, n, stats


def enter_namespace():
    """Re-runs this script in a private mount/net/PID namespace."""
    if os.environ.get("ACP_ORACLE_INSIDE") == "1":
        return
    if os.geteuid() != 0:
        print("ok 1 # SKIP the oracle needs root (namespaces, chroot)")
        sys.exit(0)
    for tool in ("unshare", "strace", "setpriv", "mount"):
        if not shutil.which(tool):
            print("not ok 1 - %s not found (make deps installs strace and "
                  "util-linux)" % tool)
            sys.exit(1)
    probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork",
                            "--mount-proc", "true"],
                           stderr=subprocess.PIPE, text=True)
    if probe.returncode != 0:
        print("ok 1 # SKIP no namespaces here (a container without "
              "CAP_SYS_ADMIN?): %s" % probe.stderr.strip()[:200])
        sys.exit(0)
    env = dict(os.environ, ACP_ORACLE_INSIDE="1")
    argv = ["unshare", "--mount", "--net", "--pid", "--fork",
            "--mount-proc", sys.executable] + sys.argv
    os.execvpe("unshare", argv, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--atoms", default=os.path.join(ROOT, "build",
                                                    "oracle-atoms"),
                    help="the oracle-atoms binary (another build's works)")
    ap.add_argument("--seeds", action="append", default=[],
                    help="a file of commands, one per line")
    ap.add_argument("--jsonl", action="append", default=[],
                    help="a policy fixture: its shell commands")
    ap.add_argument("--generate", type=int, default=0,
                    help="this many generated commands")
    ap.add_argument("--seconds", type=float, default=0,
                    help="generate commands for this long")
    ap.add_argument("--seed", type=int, default=1, help="generator seed")
    ap.add_argument("--known-gaps", default=os.path.join(HERE,
                                                         "known-gaps.txt"))
    ap.add_argument("--no-known-gaps", action="store_true",
                    help="report known gaps as failures")
    ap.add_argument("--timeout", type=float, default=5.0,
                    help="seconds per command")
    ap.add_argument("--write-disagreements", metavar="FILE",
                    help="write the commands that disagree to FILE, in the "
                    "format of known-gaps.txt")
    ap.add_argument("--prune-known-gaps", action="store_true",
                    help="remove the known gaps that agree now from the "
                    "known-gaps file (comments stay)")
    ap.add_argument("-j", "--jobs", type=int, default=1,
                    help="commands run at once (one sandbox each)")
    ap.add_argument("--command", action="append", default=[],
                    help="one command line to check")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the atoms and the trace of every command")
    ap.add_argument("-q", "--quiet", action="store_true",
                    help="print only disagreements and the summary")
    ap.add_argument("--print-generated", action="store_true",
                    help="print the generated commands and exit")
    args = ap.parse_args()

    if args.print_generated:
        g = gen.Generator(args.seed)
        for _ in range(args.generate):
            print(json.dumps(g.command()))
        return 0

    enter_namespace()
    if not os.access(args.atoms, os.X_OK):
        print("not ok 1 - %s: not found (make %s)" % (args.atoms,
                                                      args.atoms))
        return 1
    known = set()
    if not args.no_known_gaps and os.path.exists(args.known_gaps):
        known = set(read_lines(args.known_gaps))
    commands = list(args.command)
    for f in args.seeds:
        commands += read_lines(f)
    for f in args.jsonl:
        commands += read_jsonl(f)
    sbs = [Sandbox(args.timeout) for _ in range(max(1, args.jobs))]
    atoms = Atoms(args.atoms)
    text, _, _ = sbs[0].run("true")
    if "execve(" not in text:
        print("ok 1 # SKIP strace records nothing in the sandbox (ptrace "
              "not allowed?)")
        for sb in sbs:
            sb.close()
        return 0
    g = gen.Generator(args.seed)
    commands += [g.command() for _ in range(args.generate)]
    start = time.time()
    failed, n, stats = run_all(sbs, atoms, commands, known, args.verbose,
                               0, args.quiet)
    total = n
    while args.seconds and time.time() - start < args.seconds:
        batch = [g.command() for _ in range(50)]
        f2, n2, s2 = run_all(sbs, atoms, batch, known, args.verbose, total,
                             args.quiet)
        failed += f2
        total += n2
        for k in s2:
            stats[k] = stats.get(k, [] if isinstance(s2[k], list) else 0) \
                + s2[k]
    for sb in sbs:
        sb.close()
    if args.prune_known_gaps and stats.get("fixed"):
        fixed = set(c.replace("\n", "<NL>") for c in stats["fixed"])
        with open(args.known_gaps, encoding="utf-8") as f:
            lines = f.readlines()
        with open(args.known_gaps, "w", encoding="utf-8") as f:
            f.writelines(x for x in lines if x.rstrip("\n") not in fixed)
        print("# pruned %d known gaps from %s" % (len(fixed),
                                                 args.known_gaps))
    if args.write_disagreements:
        with open(args.write_disagreements, "w", encoding="utf-8") as f:
            for c in stats.get("bad", []):
                f.write(c.replace("\n", "<NL>") + "\n")
    print("1..%d" % total)
    print("# oracle: %d commands, %d disagreements, %d opaque, %d known "
          "gaps (%d now pass), %d timed out, %.0f s" % (
              total, failed, stats["opaque"], stats["gap"],
              stats["gap_fixed"], stats["timeout"], time.time() - start))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
