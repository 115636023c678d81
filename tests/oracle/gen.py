"""Random compositions of the constructs of the bash manual, for the oracle.

Generator(seed).command() returns one command line. The same seed gives the
same commands (the in-test subset depends on it: changing this file changes
which commands tests/oracle/known-gaps.txt must list).

Each command hides "payloads" (a program run, a file written) inside
constructs: expansions that evaluate code (@P, arithmetic on array
subscripts, test -v), redirections, builtins that run strings (eval,
source, trap, mapfile -C, PS4, aliases), wrappers, subshells, functions,
coprocesses, loops. Loops are bounded and nothing reads a terminal, so
every command ends quickly.
"""

import random

# Files a payload writes: protected ones, rc files, plain project files.
TARGETS = [
    "~/.bashrc", "$HOME/.profile", "~/.ssh/authorized_keys",
    ".claude/settings.json", ".acp/settings.json", ".git/config",
    ".git/hooks/pre-commit", ".envrc", "src/new.c", "out.txt",
    "/tmp/o.txt", "docs/guide.md", "~/notes.txt", "src/lib/a.txt",
]
# Programs a payload runs (all harmless in the sandbox).
PROGRAMS = ["touch", "rm -f", "cp README.md", "mkdir -p", "chmod 600",
            "ln -sf README.md", "tee", "truncate -s0", "mv -f docs/guide.md"]
READERS = ["cat", "wc -l", "head -n1", "ls", "id -u", "date +%s", "uname",
           "true", "printf %s\\\\n y", "basename /a/b", "seq 2", "tr a b"]


def q(s):
    """Single-quotes s for bash."""
    return "'" + s.replace("'", "'\\''") + "'"


class Generator:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.depth = 0

    def pick(self, xs):
        return self.r.choice(xs)

    def chance(self, p):
        return self.r.random() < p

    # -- leaves ---------------------------------------------------------------

    def target(self):
        return self.pick(TARGETS)

    def payload(self):
        """A simple command that runs a program and usually writes a file.
        It prints no "x": `x=a[$(payload)]` would then recurse."""
        k = self.r.randrange(10)
        t = self.target()
        if k < 6:
            p = self.pick(PROGRAMS)
            if p == "tee":
                return "echo y | tee " + t
            return p + " " + t
        if k < 8:
            return self.pick(READERS) + " " + self.pick(
                ["README.md", "src/main.c", "~/.ssh/id_rsa", "<<<y"])
        return "echo y " + self.pick([">", ">>", ">|", "&>", "1<>"]) + " " + t

    def word(self):
        """A word that may hide an expansion."""
        k = self.r.randrange(14)
        if k == 0:
            return "$(" + self.payload() + ")"
        if k == 1:
            return "`" + self.payload().replace("`", "") + "`"
        if k == 2:
            return "$((1+2))"
        if k == 3:
            return "${HOME}"
        if k == 4:
            return "{a,b}"
        if k == 5:
            return "*.md"
        if k == 6:
            return "~+"
        if k == 7:
            return "$'\\x41'"
        if k == 8:
            return "\"$(" + self.payload() + ")\""
        if k == 9:
            return "${x:-$(" + self.payload() + ")}"
        if k == 10:
            return "<(" + self.payload() + ")"
        return self.pick(["a", "x", "README.md", "-n", "'q w'", "\"$x\"",
                          "src/*", "\\$x"])

    # -- constructs that evaluate data as code --------------------------------

    def hidden(self):
        """A construct that evaluates the payload from a string."""
        p = self.payload()
        qp = q("$(" + p + ")")
        k = self.r.randrange(22)
        forms = [
            "x=%s; echo \"${x@P}\"" % qp,
            "x=%s; : \"${x@P}\"" % qp,
            "x=%s; echo $(( x ))" % q("a[$(" + p + ")]"),
            "declare -a a; x=%s; (( x )) || true" % q("a[$(" + p + ")]"),
            "test -v %s" % q("a[$(" + p + ")]"),
            "[[ -v %s ]]" % q("a[$(" + p + ")]"),
            "declare -A h; [ -v %s ]" % q("h[$(" + p + ")]"),
            "printf -v %s %%s x" % q("a[$(" + p + ")]"),
            "read %s <<< x" % q("a[$(" + p + ")]"),
            "let %s" % q("a[$(" + p + ")]=1"),
            "eval %s" % q(p),
            "source /dev/stdin <<< %s" % q(p),
            ". <(echo %s)" % q(p),
            "trap %s EXIT" % q(p),
            "mapfile -C %s -c 1 arr <<< x" % q(p + ";:"),
            "PS4=%s; set -x; :" % qp,
            "shopt -s expand_aliases<NL>alias zz=%s<NL>zz" % q(p),
            "f() { %s; }; f" % p,
            "coproc %s" % p,
            "declare -n r=%s; echo \"$r\"" % q("a[$(" + p + ")]"),
            "x=%s; echo ${!x}" % q("a[$(" + p + ")]"),
            "echo %s | bash" % q(p),
        ]
        return forms[k].replace("<NL>", "\n")

    # -- composition ------------------------------------------------------------

    def more(self):
        """Constructs that move or hide where a payload acts."""
        p = self.payload()
        rel = self.pick([".bashrc", ".ssh/authorized_keys", ".profile",
                         "project/.envrc"])
        forms = [
            "cd ~ && echo y > " + rel,
            "cd; touch " + rel,
            "pushd ~ >/dev/null; rm -f " + rel + "; popd >/dev/null",
            "cd ~/.ssh 2>/dev/null; echo y >> authorized_keys",
            "echo y > ~/.b*rc",
            "echo y >> ~/.ssh/auth*",
            "exec 3> %s; echo y >&3" % self.target(),
            "exec {fd}>> %s" % self.target(),
            "{ %s; } > %s" % (p, self.target()),
            "while read -r l; do %s; done < files.txt" % p,
            "[[ $(%s) ]]" % p,
            "test -n \"$(%s)\"" % p,
            "case $(%s) in *) ;; esac" % p,
            "for v in $(%s); do :; done" % p,
            "read -r v <<< \"$(%s)\"" % p,
            "function h { local v=$(%s); }; h" % p,
            "coproc C { %s; }; wait" % p,
            "bash -c '\"$@\"' _ " + p,
            "sh -c 'eval \"$1\"' _ %s" % q(p),
            "echo %s | xargs -n1 touch" % self.target(),
            "echo %s | xargs -I{} sh -c 'echo y > {}'" % self.target(),
            "find . -maxdepth 1 -name README.md -execdir %s \\;" % p,
            "find . -maxdepth 0 -exec sh -c %s \\;" % q(p),
            "env -u X -- " + p,
            "nice --adjustment=1 " + p,
            "timeout -k 1 5 " + p,
            "command -p " + p,
            "builtin command " + p,
            "time -p " + p,
            "x=%s; echo \"${x@Q}\" \"${x@A}\" \"${x@E}\"" % q("$(" + p + ")"),
            "echo ${x:-%s}" % q("$(" + p + ")"),
        ]
        return self.pick(forms).replace("<NL>", "\n")

    def simple(self):
        k = self.r.randrange(14)
        if k >= 12:
            return self.more()
        if k < 3:
            return self.payload()
        if k < 5:
            return self.hidden()
        if k == 5:
            return "echo " + " ".join(self.word()
                                      for _ in range(self.r.randrange(1, 4)))
        if k == 6:
            w = self.pick(["env", "timeout 5", "nice -n 1", "nohup",
                           "command", "builtin", "exec", "xargs",
                           "env -i", "stdbuf -o0", "setsid", "time"])
            inner = self.payload()
            if w == "builtin":
                inner = "echo " + self.word()
            if w == "xargs":
                return "echo %s | xargs %s" % (self.target(), self.pick(
                    ["touch", "rm -f", "-I{} cp README.md {}"]))
            if w == "exec":
                return "(exec " + inner + ")"
            return w + " " + inner
        if k == 7:
            sh = self.pick(["sh", "bash", "dash", "rbash", "bash -e",
                            "sh -x"])
            return "%s -c %s" % (sh, q(self.payload()))
        if k == 8:
            return self.pick([
                "find . -name %s -exec %s {} \\;" % (
                    self.pick(["README.md", "'*.c'"]),
                    self.pick(["touch", "rm -f", "cat"])),
                "find src -name '*.txt' -delete",
                "find . -maxdepth 1 -name README.md -fprint %s" %
                self.target(),
                "git status --short",
                "git -c alias.st=%s st" % q("!" + self.payload()),
                "sed -n 1p README.md",
                "sed %s README.md" % q("w " + self.target()),
                "sed %s README.md" % q("1e " + self.payload()),
                "awk %s" % q("BEGIN{system(\"" + self.payload() + "\")}"),
                "awk %s README.md" % q("{print > \"" + self.target().replace(
                    "~", "/home/user").replace("$HOME", "/home/user") +
                    "\"}"),
                "sort -o %s README.md" % self.target(),
                "tar -cf /tmp/t.tar README.md",
            ])
        if k == 9:
            return "%s=%s %s" % (self.pick(["A", "LANG", "PATH", "x"]),
                                 self.pick(["1", "/usr/bin", "$(id -u)"]),
                                 self.payload())
        if k == 10:
            return self.pick(["declare", "typeset", "local", "export",
                              "readonly"]) + " " + self.pick(
                ["x=1", "x=$(" + self.payload() + ")",
                 "-a a=(1 2)", "-f", "-x y=2"])
        return self.payload() + " " + self.pick(
            ["> out.txt", "2>/dev/null", ">> " + self.target(),
             "< README.md", "<<< y", "2>&1"])

    def heredoc(self):
        """A command with a here-document; it ends the command line (its
        body follows the line it starts on)."""
        p = self.payload()
        return self.pick([
            "cat <<EOF > %s<NL>$(%s)<NL>EOF" % (self.target(), p),
            "cat <<'EOF'<NL>$(%s)<NL>EOF" % p,
            "cat <<\\EOF<NL>`%s`<NL>EOF" % p,
            "cat <<-EOF<NL>\t$(%s)<NL>\tEOF" % p,
            "bash <<EOF<NL>%s<NL>EOF" % p,
            "sh <<'EOF'<NL>%s<NL>EOF" % p,
            "cat <<A <<B<NL>$(%s)<NL>A<NL>${x:-$(%s)}<NL>B" % (
                p, self.payload()),
        ]).replace("<NL>", "\n")

    def command(self, depth=0):
        """A list of pipelines."""
        parts = [self.pipeline(depth)]
        for _ in range(self.r.randrange(3)):
            parts.append(self.pick([" && ", " || ", "; ", " & ", "\n"]))
            parts.append(self.pipeline(depth))
        if depth == 0 and self.chance(0.15):
            parts.append(self.pick([" && ", "; ", "\n"]))
            parts.append(self.heredoc())
        return "".join(parts)

    def pipeline(self, depth):
        c = self.compound(depth)
        if self.chance(0.2):
            c += " | " + self.pick(["cat", "wc -l", "tee " + self.target(),
                                    "sh", "xargs echo", "head -n1"])
        if self.chance(0.05):
            c = "! " + c
        return c

    def compound(self, depth):
        if depth >= 2 or self.chance(0.55):
            return self.simple()
        inner = self.command(depth + 1)
        k = self.r.randrange(10)
        if k == 0:
            return "( " + inner + " )"
        if k == 1:
            return "{ " + inner + "; }"
        if k == 2:
            return "if true; then " + inner + "; fi"
        if k == 3:
            return "if false; then :; else " + inner + "; fi"
        if k == 4:
            return "for i in 1; do " + inner + "; done"
        if k == 5:
            return "while false; do :; done; until true; do :; done; " + \
                inner
        if k == 6:
            return "case x in x) " + inner + " ;; esac"
        if k == 7:
            return "[[ -n x ]] && { " + inner + "; }"
        if k == 8:
            return "g() { " + inner + "; }; g"
        return "echo $( " + inner + " )"
