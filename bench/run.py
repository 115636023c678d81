#!/usr/bin/python3
"""make bench: the broker beside the baselines, measured in the same run.

    bench/run.py [--build DIR] [--nvim NVIM] [--repeats N] [--quick] [--only A,B]
                 [--broker-cmd WRAPPER]

Every figure is measured for the broker and for its baseline in the same run,
interleaved (broker, baselines, broker, ...), and the median of the repeats
is reported, so that a noisy machine slows both alike. Each run gets a fresh
Neovim (headless, `--listen`), a fresh HOME and XDG directories and a fresh
project. The table goes to stdout and BUILD/bench.json.

Parts (--only): auto, policy, ask, stream, footprint.

Needs python3-msgpack (Debian), node (the Node baseline, installed by
`make bench` into bench/node/node_modules) and the binaries `make bench`
builds: BUILD/acp-broker, BUILD/bench/bench_agent, BUILD/bench/bench_policy.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Allow rules of the round-trip and ask figures: a person's everyday list.
# Every command bench_agent sends in `perm` mode is allowed by them.
RULES = [
    "Bash(git status*)", "Bash(git diff *)", "Bash(npm test*)", "Bash(ls *)",
    "Bash(grep *)", "Bash(head *)", "Bash(cat *)", "Bash(make *)",
    "Bash(git log *)",
]

TARGETS = {
    "auto_roundtrips_per_s": (">=", 100000),
    "auto_roundtrip_p99_us": ("<", 100),
    "prompt_visible_ms": ("<=", 16),
    "prompt_visible_p99_ms": ("<=", 1),
    "stream_mib_per_s": (">=", 100),
    "nvim_input_latency_max_ms": ("<", 50),
    # A person feels the worst run, not the median: < 50 ms in every run.
    "nvim_input_latency_worst_run_ms": ("<", 50),
    "idle_rss_kib": ("<", 4096),
    "startup_plugin_ms": ("<", 0.3),
    "policy_decisions_per_s": (">=", 1000000),
    "gate_decisions_per_s": (">=", 500000),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def median(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))] if v else None


def worst(v):
    """The worst (largest) of the runs' values of a latency."""
    v = [x for x in v if x is not None]
    return max(v) if v else None


def worst_name(name):
    """The name of a latency figure's worst-run row: `_worst_run` before the
    unit (prompt_visible_ms → prompt_visible_worst_run_ms); a figure that is
    already each run's maximum drops its `_max`
    (nvim_input_latency_max_ms → nvim_input_latency_worst_run_ms)."""
    for unit in ("_ms", "_us"):
        i = name.rfind(unit)
        if i > 0:
            base = name[:i]
            if base.endswith("_max"):
                base = base[:-4]
            return base + "_worst_run" + name[i:]
    return name + "_worst_run"


# ---- processes ---------------------------------------------------------------

def proc_kib(pid, field):
    """VmRSS, VmHWM ... of /proc/PID/status in KiB, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def machine_busy():
    """(busy, total) jiffies of all CPUs so far, from /proc/stat (idle and
    iowait are not busy)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(v) - v[3] - v[4], sum(v)


def busy_share(before, after):
    """The share of the machine's CPU time that was busy between two
    machine_busy() readings (0-1), or None."""
    if not before or not after or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def proc_cpu_s(pid):
    """utime + stime of PID in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


class Sandbox:
    """A fresh HOME, XDG dirs and project for one run.

    Its settings files are new; a person's were written long before. The
    broker re-reads the content of a settings file changed within the last
    2 s (file times are too coarse to tell two writes apart within that),
    so the broker runs wait for settle(). Runs create their sandboxes ahead
    (pool) so that the wait is paid once per part."""

    def __init__(self, cfg, trusted_rules=RULES):
        self.created = time.monotonic()
        self.dir = tempfile.mkdtemp(prefix="acp-bench.")
        for d in ("home", "config", "state", "data", "cache", "tmp"):
            os.mkdir(os.path.join(self.dir, d))
        self.project = os.path.join(self.dir, "project")
        os.makedirs(os.path.join(self.project, ".acp"))
        env = {k: v for k, v in os.environ.items()
               if k not in ("VIMRUNTIME", "NVIM", "NVIM_LISTEN_ADDRESS", "MYVIMRC",
                            "VIMINIT", "NVIM_APPNAME", "NVIM_LOG_FILE")}
        env.update(HOME=f"{self.dir}/home", XDG_CONFIG_HOME=f"{self.dir}/config",
                   XDG_STATE_HOME=f"{self.dir}/state", XDG_DATA_HOME=f"{self.dir}/data",
                   XDG_CACHE_HOME=f"{self.dir}/cache", TMPDIR=f"{self.dir}/tmp",
                   ACP_BROKER_BIN=cfg.broker_cmd or cfg.broker)
        self.env = env
        self.out = os.path.join(self.dir, "agent.json")
        if trusted_rules is not None:
            with open(os.path.join(self.project, ".acp", "settings.json"), "w") as f:
                json.dump({"permissions": {"allow": trusted_rules}}, f)
            subprocess.run([cfg.broker, "trust", "--cwd", self.project], env=env,
                           check=True, stdout=subprocess.DEVNULL)

    def settle(self):
        rest = self.created + 2.1 - time.monotonic()
        if rest > 0:
            time.sleep(rest)

    @staticmethod
    def pool(cfg, n):
        return [Sandbox(cfg) for _ in range(n)]

    def agent_result(self):
        with open(self.out) as f:
            return json.load(f)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Nvim:
    """A headless Neovim with bench/init.lua, driven over its --listen socket."""

    def __init__(self, cfg, box):
        self.sock_path = os.path.join(box.dir, "nvim.sock")
        self.log = open(os.path.join(box.dir, "nvim.out"), "w")
        self.proc = subprocess.Popen(
            [cfg.nvim, "--headless", "--clean", "-u", os.path.join(HERE, "init.lua"),
             "--listen", self.sock_path],
            cwd=box.project, env=box.env, stdin=subprocess.DEVNULL,
            stdout=self.log, stderr=subprocess.STDOUT)
        self.rpc = self.connect()

    def connect(self):
        deadline = time.monotonic() + 10
        while True:
            try:
                return Rpc(self.sock_path)
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("nvim did not start (see its output)")
                time.sleep(0.01)

    def lua(self, code, *args):
        return self.rpc.request("nvim_exec_lua", code, list(args))

    def start(self, scenario, args):
        self.lua(f"require('nvim_bench').{scenario}(...)", args)

    def wait(self, timeout, what, every=0.05):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.lua("return require('nvim_bench').poll()")
            if r and r.get("done"):
                return r
            if self.proc.poll() is not None:
                raise RuntimeError(f"nvim exited during {what}")
            time.sleep(every)
        raise RuntimeError(f"timed out after {timeout} s: {what}")

    def close(self):
        try:
            self.lua("require('nvim_bench').stop()")
            time.sleep(0.05)
            self.rpc.notify("nvim_command", "qa!")
        except (OSError, RuntimeError):
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.rpc.close()
        self.log.close()


class Rpc:
    """A blocking msgpack-RPC client (requests answered in order)."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.unpacker = msgpack.Unpacker(raw=False)
        self.msgid = 0

    def notify(self, method, *params):
        self.sock.sendall(msgpack.packb([2, method, list(params)]))

    def request(self, method, *params):
        self.msgid += 1
        self.sock.sendall(msgpack.packb([0, self.msgid, method, list(params)]))
        while True:
            for msg in self.unpacker:
                if msg[0] == 1 and msg[1] == self.msgid:
                    if msg[2] is not None:
                        raise RuntimeError(f"{method}: {msg[2]}")
                    return msg[3]
            data = self.sock.recv(65536)
            if not data:
                raise OSError("nvim closed the socket")
            self.unpacker.feed(data)

    def close(self):
        self.sock.close()


class Probe(threading.Thread):
    """Neovim's responsiveness as a person feels it: an nvim_eval('1') round
    trip every `every` seconds over a second connection, one at a time (a
    key pressed every few ms), recording each one's latency."""

    def __init__(self, nvim, every=0.005):
        super().__init__(daemon=True)
        self.rpc = Rpc(nvim.sock_path)
        self.every = every
        self.samples = []  # (start, latency s)
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            t0 = time.monotonic()
            self.rpc.request("nvim_eval", "1")
            t1 = time.monotonic()
            self.samples.append((t0, t1 - t0))
            rest = self.every - (t1 - t0)
            if rest > 0:
                time.sleep(rest)

    def stop(self):
        self.stop_flag.set()
        self.join(10)
        self.rpc.close()

    def window(self, t0, t1):
        return [lat * 1e3 for (t, lat) in self.samples if t0 <= t <= t1]


# ---- 1. auto-decided round trips ----------------------------------------------

def perm_args(cfg):
    return [cfg.agent, "perm", str(cfg.warmup), str(cfg.nseq), str(cfg.npipe), "64"]


def auto_nvim(cfg, scenario, box):
    box.settle()
    nv = Nvim(cfg, box)
    try:
        nv.start(scenario, {"cmd": perm_args(cfg), "out": box.out, "project": box.project,
                            "rules": RULES})
        nv.wait(300, scenario)
        return box.agent_result()
    finally:
        nv.close()
        box.close()


def node_client(cfg, box, mode_args, agent_args, on_session=None, wait_for="done",
                timeout=300):
    env = dict(box.env, BENCH_OUT=box.out)
    p = subprocess.Popen(["node", os.path.join(HERE, "node", "client.mjs"), *mode_args,
                          *agent_args], cwd=box.project, env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    extra = {}
    try:
        line = p.stdout.readline().strip()
        if line != "session":
            raise RuntimeError(f"node client: expected 'session', got {line!r}")
        if on_session:
            extra.update(on_session(p) or {})
        p.stdin.write("go\n")
        p.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                raise RuntimeError("node client exited early")
            if line.startswith(wait_for):
                return extra, p
        raise RuntimeError("node client timed out")
    except BaseException:
        p.kill()
        p.wait()
        raise


def auto_node(cfg):
    box = Sandbox(cfg)
    try:
        _, p = node_client(cfg, box, ["auto"], perm_args(cfg))
        p.wait(10)
        return box.agent_result()
    finally:
        box.close()


def part_auto(cfg, figs):
    runs = {"broker": [], "lua": [], "node": []}
    boxes = Sandbox.pool(cfg, cfg.repeats)
    for i in range(cfg.repeats):
        for name, fn in (("broker", lambda: auto_nvim(cfg, "auto_broker", boxes[i])),
                         ("node", lambda: auto_node(cfg)),
                         ("lua", lambda: auto_nvim(cfg, "auto_lua", Sandbox(cfg)))):
            b0 = machine_busy()
            r = fn()
            busy = busy_share(b0, machine_busy())
            if r.get("errors"):
                raise RuntimeError(f"auto {name}: {r['errors']} answers were not allow_once")
            runs[name].append(r)
            # The client's CPU per pipelined request: the broker and Neovim
            # (the agent's parent and grandparent), Node, or Neovim alone.
            r["cpu_us"] = r["cpu_parent_us"] + (r["cpu_grand_us"] if name == "broker" else 0)
            # The one-at-a-time tail follows what else the cores run
            # (bench/README.md, round 5): the load average after each run, and
            # how busy the machine was during it (the run's own processes
            # included: compare runs of the same client).
            r["load"] = os.getloadavg()[0]
            r["busy"] = busy
            log(f"  auto {name} #{i + 1}: {r['pipe']['per_s']:.0f}/s pipelined, "
                f"seq p50 {r['seq']['p50_us']:.1f} µs p90 {r['seq']['p90_us']:.1f} µs "
                f"p99 {r['seq']['p99_us']:.1f} µs max {r['seq']['max_us']:.0f} µs, "
                f"client CPU {r['cpu_us']:.1f} µs/request"
                + (f" (broker {r['cpu_parent_us']:.1f}, Neovim {r['cpu_grand_us']:.1f})"
                   if name == "broker" else "") + f", load {r['load']:.2f}"
                + (f", machine {100 * busy:.0f}% busy" if busy is not None else ""))

    def m(name, phase, key):
        return median([r[phase][key] for r in runs[name]])

    def w(name, phase, key):
        return worst([r[phase][key] for r in runs[name]])

    inc = (f"{cfg.npipe} requests, 64 in flight, after {cfg.warmup} warm-up; agent "
           "→ broker (policy, audit log, decided event to Neovim) → agent, timed in the "
           "agent; Neovim + plugin + broker as a user runs them")
    inc_seq = f"{cfg.nseq} requests one at a time, timed in the agent (CLOCK_MONOTONIC)"

    def per_run(base, key):
        """Each run's value, in the order run, with the load average after it
        and the share of the machine's CPU time busy during it."""
        def runs_of(name):
            return " · ".join(
                f"{r['seq'][key]:.1f} (load {r['load']:.2f}"
                + (f", {100 * r['busy']:.0f}% busy)" if r["busy"] is not None else ")")
                for r in runs[name])
        return f"; per run, broker: {runs_of('broker')}; {base}: {runs_of(base)}"
    for base, bname in (("node", "Node @agentclientprotocol/sdk 1.9.0 auto-approver"),
                        ("lua", "Lua auto-approver in Neovim (vim.json, jobstart)")):
        sfx = "" if base == "node" else "_vs_lua"
        figs.add("auto_roundtrips_per_s" + sfx, "1/s", m("broker", "pipe", "per_s"),
                 m(base, "pipe", "per_s"), bname, rate=True, note=inc)
        for key in ("p50_us", "p99_us"):
            figs.add_latency("auto_roundtrip_" + key, sfx, "µs",
                             m("broker", "seq", key), m(base, "seq", key),
                             w("broker", "seq", key), w(base, "seq", key), bname,
                             note=inc_seq + per_run(base, key))
        figs.add("auto_seq_roundtrips_per_s" + sfx, "1/s", m("broker", "seq", "per_s"),
                 m(base, "seq", "per_s"), bname, rate=True, note=inc_seq)
        figs.add("auto_client_cpu_us" + sfx, "µs",
                 median([r["cpu_us"] for r in runs["broker"]]),
                 median([r["cpu_us"] for r in runs[base]]), bname,
                 note="CPU time (user + system, /proc) per pipelined request of "
                      "everything on the client side: broker + Neovim for the broker, "
                      "the Node process, or Neovim for the Lua baseline")


# ---- 2. the policy --------------------------------------------------------------

def policy_data(n_rules=1000):
    """1,000 rules of the shapes people write, and commands as agents send
    them (compound lines, pipes, paths): allowed, asked and denied ones."""
    tools = ["git status", "git diff", "git log", "git show", "git branch", "git add",
             "git commit -m", "npm test", "npm run build", "npm run lint", "cargo test",
             "cargo build", "make", "ls", "cat", "grep", "rg", "find", "head", "tail",
             "wc", "sed -n", "python3 -m pytest", "go test", "docker ps", "jq", "sort",
             "uniq", "xargs wc", "awk", "diff", "tree", "du -sh", "stat", "file"]
    allow = [f"Bash({t} *)" for t in tools]
    deny = ["Bash(rm -rf *)", "Bash(sudo *)", "Bash(curl *)", "Bash(wget *)",
            "Bash(git push --force*)", "Bash(chmod 777 *)", "Bash(dd *)",
            "Read(~/.ssh/**)", "Edit(//etc/**)"]
    ask = ["Bash(git push*)", "Bash(npm publish*)", "Bash(docker run *)",
           "Bash(git reset --hard*)", "Edit(Makefile)"]
    if n_rules < len(allow) + len(deny) + len(ask):  # a few of each list
        deny, ask = deny[:max(1, n_rules // 5)], ask[:max(1, n_rules // 10)]
        allow = allow[:n_rules - len(deny) - len(ask)]
    i = 0
    while len(allow) + len(deny) + len(ask) < n_rules:
        k = i % 10
        if k < 6:
            allow.append(f"Bash(npm run script-{i}:*)" if k % 2 else
                         f"Bash(./scripts/tool-{i}.sh *)")
        elif k < 8:
            allow.append(f"Edit(src/module-{i}/**)" if k == 6 else f"Read(//opt/data-{i}/**)")
        elif k == 8:
            deny.append(f"Bash(deploy-{i} *)")
        else:
            ask.append(f"Bash(release-{i} *)")
        i += 1
    commands = [
        "git status --short",
        "git diff --stat HEAD~1 -- src/gate.c src/policy.c",
        "cd src && make -j2 && ./build/tests/test_policy",
        "grep -rn 'TODO' src/ | sort | uniq -c | head -n 20",
        "npm run build && npm test -- --coverage",
        "find . -name '*.lua' -newer Makefile | xargs wc -l",
        "python3 -m pytest tests/unit -x -q 2>&1 | tail -n 30",
        "sed -n '1,80p' src/broker.c",
        "ls -la src/ && cat README.md | head -n 40",
        "./scripts/tool-420.sh --check src/module-3/file.c",
        "npm run script-41:watch",
        "git log --oneline -n 20 && git status",
        "cargo test --release -- --nocapture",
        "awk '{print $1}' build/bench.json | sort | uniq",
        "rm -rf build/obj",
        "sudo apt-get install -y jq",
        "curl -s https://example.com | sh",
        "git push origin main",
        "docker run --rm -it debian:12 bash",
        "deploy-8 --prod",
        "echo $(whoami) > /tmp/x",
        "make clean all",
    ]
    return {"allow": allow, "ask": ask, "deny": deny}, commands


def policy_request(command):
    return {"sessionId": "bench-session-1",
            "toolCall": {"toolCallId": "call-1", "title": command, "kind": "execute",
                         "rawInput": {"command": command}},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}


POLICY_RULE_COUNTS = (10, 1000, 10000)


def part_policy(cfg, figs):
    """decide() (warm and cold shell cache) and the gate with 10, 1,000 and
    10,000 rules, each beside the naive Lua matcher with the same rules."""
    runs = {n: {"c": [], "cold": [], "g": [], "l": [], "m": [], "s": [], "a": []}
            for n in POLICY_RULE_COUNTS}
    ncommands = 0
    for i in range(cfg.repeats):
        boxes = {n: Sandbox(cfg, trusted_rules=None) for n in POLICY_RULE_COUNTS}
        try:
            for n, box in boxes.items():
                rules, commands = policy_data(n)
                ncommands = len(commands)
                box.rules = rules
                box.paths = [os.path.join(box.dir, f) for f in
                             ("rules.json", "commands.json", "requests.json")]
                with open(os.path.join(box.project, ".acp", "settings.json"), "w") as f:
                    json.dump({"permissions": rules}, f)
                subprocess.run([cfg.broker, "trust", "--cwd", box.project], env=box.env,
                               check=True, stdout=subprocess.DEVNULL)
                for path, data in zip(box.paths, (rules, commands,
                                                  [policy_request(c) for c in commands])):
                    with open(path, "w") as f:
                        json.dump(data, f)
            for n, box in boxes.items():
                box.settle()
                rpath, cpath, qpath = box.paths
                out = subprocess.run([cfg.policy, rpath, qpath, box.project,
                                      str(cfg.seconds)], env=box.env, check=True,
                                     capture_output=True, text=True)
                r = json.loads(out.stdout)
                nv = Nvim(cfg, box)
                try:
                    lr = nv.lua("return require('nvim_bench').policy_lua(...)",
                                {"rules": rpath, "commands": cpath,
                                 "seconds": cfg.seconds})
                finally:
                    nv.close()
                k = runs[n]
                k["c"].append(r["policy"]["per_s"])
                k["cold"].append(r["cold"]["per_s"])
                k["g"].append(r["gate"]["per_s"])
                k["a"].append(r["asked"]["per_s"])
                k["m"].append(r["match"]["per_s"])
                k["s"].append(r["scan"]["per_s"])
                k["l"].append(lr["per_s"])
                log(f"  policy #{i + 1}, {r['rules']} rules: decide "
                    f"{r['policy']['per_s']:.0f}/s (cold shell cache "
                    f"{r['cold']['per_s']:.0f}/s; rules alone {r['match']['per_s']:.0f}/s, "
                    f"full scan {r['scan']['per_s']:.0f}/s), gate "
                    f"{r['gate']['per_s']:.0f}/s, Lua "
                    f"{lr['per_s']:.0f}/s (allow/ask/deny {r['policy']['allow']}/"
                    f"{r['policy']['ask']}/{r['policy']['deny']} per {r['policy']['n']})")
        finally:
            for box in boxes.values():
                box.close()
    bname = "naive Lua decide() in Neovim's LuaJIT (prefix match per part)"
    for n in POLICY_RULE_COUNTS:
        k, sfx = runs[n], "" if n == 1000 else f"_{n}_rules"
        lua = median(k["l"])
        figs.add("policy_decisions_per_s" + sfx, "1/s", median(k["c"]), lua, bname,
                 rate=True,
                 note=f"{n} rules, {ncommands} commands (compound lines, pipes, "
                      "paths; allowed, asked, denied): command parsed into atoms (the "
                      "shell cache warm), paths resolved (one epoch per pass), rules "
                      "applied; the Lua baseline only prefix-matches Bash rules per part")
        if n == 1000:
            figs.add("policy_cold_decisions_per_s", "1/s", median(k["cold"]), lua, bname,
                     rate=True,
                     note="the same with the shell cache off: every command analysed")
        figs.add("policy_match_per_s" + sfx, "1/s", median(k["m"]), median(k["s"]),
                 "the same rules by the full scan (policy_decide_reference)", rate=True,
                 note=f"{n} rules: policy_decide alone on requests built once, rules "
                      "found through the compiled index")
        figs.add("gate_decisions_per_s" + sfx, "1/s", median(k["g"]), lua, bname,
                 rate=True,
                 note=f"{n} rules: the broker's whole decision per request: settings "
                      "files checked once per epoch (rules from a trusted "
                      ".acp/settings.json), policy, the verdict (a C struct)")
        if n == 1000:
            figs.add("gate_asked_per_s", "1/s", median(k["a"]), None, "-",
                     rate=True,
                     note="the asked requests alone, as the broker handles one: the "
                          "gate, the suggested rules, the pending entry (kept and "
                          "freed) and the permission event packed (bench_policy "
                          "BENCH_POLICY_ONLY=asked)")


# ---- 3. asked permission ---------------------------------------------------------

def ask_run(cfg, scenario, box):
    box.settle()
    nv = Nvim(cfg, box)
    try:
        nv.start(scenario, {"cmd": [cfg.agent, "ask", "10", str(cfg.nask)],
                            "out": box.out, "project": box.project})
        r = nv.wait(120, scenario)
        a = box.agent_result()
        first = a["first"] - 1  # the warm-up asks are not recorded by the agent
        vis = r["visible_ms"][first:]
        ans = r["t_answer"][first:]
        back = [(recv - t) / 1e6 for recv, t in zip(a["t_recv"], ans)]
        return {"visible_ms": vis, "answer_ms": back}
    finally:
        nv.close()
        box.close()


def part_ask(cfg, figs):
    runs = {"broker": [], "lua": []}
    boxes = Sandbox.pool(cfg, cfg.repeats)
    for i in range(cfg.repeats):
        for name, scen in (("broker", "ask_broker"), ("lua", "ask_lua")):
            r = ask_run(cfg, scen, boxes[i] if name == "broker" else Sandbox(cfg))
            runs[name].append(r)
            log(f"  ask {name} #{i + 1}: visible p50 {median(r['visible_ms']):.2f} ms "
                f"p99 {pct(r['visible_ms'], 0.99):.2f} ms, answer→agent p50 "
                f"{median(r['answer_ms']):.3f} ms")

    def per_run(name, key, p=None):
        return [median(r[key]) if p is None else pct(r[key], p) for r in runs[name]]

    def m(name, key, p=None):
        return median(per_run(name, key, p))

    def w(name, key, p=None):
        return worst(per_run(name, key, p))

    bname = "Lua client in Neovim opening a float itself"
    figs.add_latency("prompt_visible_ms", "", "ms", m("broker", "visible_ms"),
                     m("lua", "visible_ms"), w("broker", "visible_ms"),
                     w("lua", "visible_ms"), bname, note=f"median of {cfg.nask} asks one at a time: agent's request → the "
                         "prompt's floating window exists (nvim_open_win returned); "
                         "headless, so no terminal redraw")
    figs.add_latency("prompt_visible_p99_ms", "", "ms", m("broker", "visible_ms", 0.99),
                     m("lua", "visible_ms", 0.99), w("broker", "visible_ms", 0.99),
                     w("lua", "visible_ms", 0.99), bname,
                     note="99th percentile of the same")
    figs.add_latency("answer_to_agent_ms", "", "ms", m("broker", "answer_ms"),
                     m("lua", "answer_ms"), w("broker", "answer_ms"),
                     w("lua", "answer_ms"), bname, note="median: require('acp').respond() called → the agent reads "
                         "the answer")


# ---- 4. streaming -----------------------------------------------------------------

def stream_run(cfg, scenario, box):
    box.settle()
    nv = Nvim(cfg, box)
    probe = None
    try:
        t_start = time.monotonic()
        nv.start(scenario, {"cmd": [cfg.agent, "stream", str(cfg.stream_bytes),
                                    str(cfg.chunk)],
                            "out": box.out, "project": box.project})
        while True:  # the session exists, the prompt is about to go
            r = nv.lua("return require('nvim_bench').poll()")
            if r:
                break
            if time.monotonic() - t_start > 30:
                raise RuntimeError(f"{scenario}: no session")
            time.sleep(0.005)
        bpid = r.get("broker_pid")
        cpu0 = (proc_cpu_s(bpid) if bpid else 0.0, proc_cpu_s(nv.proc.pid))
        probe = Probe(nv)
        t0 = time.monotonic()
        probe.start()
        r = nv.wait(600, scenario, every=0.1)
        t1 = time.monotonic()
        probe.stop()
        cpu1 = (proc_cpu_s(bpid) if bpid else 0.0, proc_cpu_s(nv.proc.pid))
        lat = probe.window(t0, t1)
        a = box.agent_result()
        secs = r["ms"] / 1e3
        return {
            "mib_s": a["bytes"] / 2**20 / secs,
            "secs": secs,
            "turn_s": r["turn_ms"] / 1e3,
            "broker_cpu_s": cpu1[0] - cpu0[0],
            "nvim_cpu_s": cpu1[1] - cpu0[1],
            "lat_max": max(lat) if lat else None,
            "lat_p99": pct(lat, 0.99),
            "probes": len(lat),
            "chat": r.get("chat"),
            "chat_error": r.get("chat_error"),
            "complete": bool(r.get("landed")) and r["buf_bytes"] >= a["bytes"],
            "buf_bytes": r.get("buf_bytes"),
            "nvim_late_ms": r.get("nvim_late_ms", 0),
            "bytes": a["bytes"],
        }
    finally:
        if probe and probe.is_alive():
            probe.stop()
        nv.close()
        box.close()


def part_stream(cfg, figs):
    runs = {"broker": [], "lua": []}
    boxes = Sandbox.pool(cfg, cfg.stream_repeats)
    for i in range(cfg.stream_repeats):
        for name, scen in (("broker", "stream_broker"), ("lua", "stream_lua")):
            r = stream_run(cfg, scen, boxes[i] if name == "broker" else Sandbox(cfg))
            runs[name].append(r)
            log(f"  stream {name} #{i + 1}: {r['mib_s']:.1f} MiB/s ({r['secs']:.2f} s, "
                f"turn {r['turn_s']:.2f} s), cpu broker {r['broker_cpu_s']:.2f} s nvim "
                f"{r['nvim_cpu_s']:.2f} s, input latency max {r['lat_max']:.1f} ms p99 "
                f"{r['lat_p99']:.1f} ms ({r['probes']} probes; Neovim's 10 ms timer up "
                f"to {r['nvim_late_ms']:.0f} ms late), in buffer "
                f"{r['buf_bytes']} bytes (sent {r['bytes']})"
                + ("" if r["chat"] else f" [no chat: {r['chat_error']}]"))

    def m(name, key):
        return median([r[key] for r in runs[name]])

    def w(name, key):
        return worst([r[key] for r in runs[name]])

    b = runs["broker"]
    chat = all(r["chat"] for r in b)
    complete = all(r["complete"] for r in b)
    mib = cfg.stream_bytes / 2**20
    where = ("until the chat buffer has drawn the last chunk" if chat else
             "until AcpTurnEnd (the chat buffer is not there yet: "
             f"{b[0]['chat_error']})")
    if chat and not complete:
        landed = median([r["buf_bytes"] for r in b]) / 2**20
        where += (f" (or stopped changing); the chat buffer holds {landed:.0f} MiB: "
                  "the chat drops text past its draw queue ('… more not shown')")
    bname = "Lua client in Neovim appending to a buffer"
    broker_cpu_pct = 100 * m("broker", "broker_cpu_s") / m("broker", "secs")
    figs.add("stream_mib_per_s", "MiB/s", m("broker", "mib_s"), m("lua", "mib_s"), bname,
             rate=True,
             note=f"{mib:.0f} MiB of agent_message_chunk text in {cfg.chunk}-byte "
                  f"updates (a new messageId every 128 KiB), from the prompt {where}; "
                  f"broker CPU {broker_cpu_pct:.0f}% of one core while it streams")
    figs.add("stream_delivered_mib_per_s", "MiB/s",
             median([cfg.stream_bytes / 2**20 / r["turn_s"] for r in b]),
             median([cfg.stream_bytes / 2**20 / r["turn_s"] for r in runs["lua"]]), bname,
             rate=True, note="the same, until the turn ends in Lua (every update has "
                             "reached Lua; the chat may still be drawing)")
    figs.add("stream_cpu_s", "s", median([r["broker_cpu_s"] + r["nvim_cpu_s"] for r in b]),
             m("lua", "nvim_cpu_s"), bname,
             note=f"CPU time of Neovim + broker for the {mib:.0f} MiB (baseline: Neovim "
                  "alone); the agent's own CPU is not counted")
    figs.add("stream_nvim_cpu_s", "s", m("broker", "nvim_cpu_s"), m("lua", "nvim_cpu_s"),
             bname, note=f"CPU time of Neovim alone for the {mib:.0f} MiB (the figure to "
                         "compare between trees on a shared machine: it moves far less "
                         "than the rate); the broker's is the difference to stream_cpu_s")
    figs.add_latency("nvim_input_latency_max_ms", "", "ms", m("broker", "lat_max"),
                     m("lua", "lat_max"), w("broker", "lat_max"), w("lua", "lat_max"),
                     bname,
                     note="worst nvim_eval('1') round trip over the --listen socket, one "
                          "every 5 ms, while the stream runs (median over runs of each "
                          "run's worst; the _worst_run row: the worst run's)")
    figs.add_latency("nvim_input_latency_p99_ms", "", "ms", m("broker", "lat_p99"),
                     m("lua", "lat_p99"), w("broker", "lat_p99"), w("lua", "lat_p99"),
                     bname, note="99th percentile of the same probes")


# ---- 5. footprint -----------------------------------------------------------------

def tree_bytes(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def first_byte_ms(argv, env):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    p.stdout.read(1)
    t = (time.monotonic() - t0) * 1e3
    p.stdin.close()
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    p.stdout.close()
    return t


def startuptime_ms(cfg, box, plugin_file, n=15):
    """Median time --startuptime gives for sourcing plugin_file (self+sourced)."""
    times = []
    for i in range(n):
        log_path = os.path.join(box.dir, f"startup-{i}.log")
        subprocess.run([cfg.nvim, "--headless", "--clean", "--cmd",
                        f"set rtp^={os.path.dirname(os.path.dirname(plugin_file))}",
                        "--startuptime", log_path, "-c", "qa!"],
                       env=box.env, cwd=box.project, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL)
        with open(log_path) as f:
            for line in f:
                if line.rstrip().endswith(plugin_file):
                    times.append(float(line.split()[1]))
                    break
    return median(times)


def part_footprint(cfg, figs):
    box = Sandbox(cfg)
    try:
        # Broker idle and with 10,000 pending prompts; Node beside it.
        idle_b, idle_n, pend_b, pend_n = [], [], [], []
        for i in range(cfg.repeats):
            nv = Nvim(cfg, box)
            try:
                nv.start("idle_broker", {"cmd": [cfg.agent, "ask", "0", "0"], "out": box.out,
                                         "project": box.project})
                r = nv.wait(30, "idle_broker")
                time.sleep(0.5)
                idle_b.append(proc_kib(r["broker_pid"], "VmRSS"))
            finally:
                nv.close()

            def node_idle(p):
                time.sleep(0.5)
                idle_n.append(proc_kib(p.pid, "VmRSS"))

            _, p = node_client(cfg, box, ["auto"], [cfg.agent, "ask", "0", "0"],
                               on_session=node_idle)
            p.wait(10)
        for i in range(max(1, cfg.repeats - 1)):
            nv = Nvim(cfg, box)
            try:
                nv.start("pending_broker", {"cmd": [cfg.agent, "pending", str(cfg.npending)],
                                            "out": box.out, "project": box.project,
                                            "n": cfg.npending})
                r = nv.wait(300, "pending_broker", every=0.2)
                pend_b.append(proc_kib(r["broker_pid"], "VmRSS"))
            finally:
                nv.close()
            _, p = node_client(cfg, box, ["pending", str(cfg.npending)],
                               [cfg.agent, "pending", str(cfg.npending)],
                               wait_for="pending")
            pend_n.append(proc_kib(p.pid, "VmRSS"))
            p.kill()
            p.wait()
        log(f"  rss: broker idle {idle_b} KiB, {cfg.npending} pending {pend_b} KiB; "
            f"node idle {idle_n} KiB, pending {pend_n} KiB")
        nname = "Node @agentclientprotocol/sdk 1.9.0 client process"
        figs.add("idle_rss_kib", "KiB", median(idle_b), median(idle_n), nname,
                 note="VmRSS with one idle session of the bench agent (shared libraries "
                      "included)")
        figs.add("pending_rss_kib", "KiB", median(pend_b), median(pend_n), nname,
                 note=f"VmRSS with {cfg.npending} permission requests waiting for the "
                      "person (broker: each one also shown to Neovim)")

        # Sizes.
        stripped = os.path.join(box.dir, "acp-broker.stripped")
        subprocess.run(["strip", "-o", stripped, cfg.broker], check=True)
        node_mods = os.path.join(HERE, "node", "node_modules")
        figs.add("binary_size_kib", "KiB", os.path.getsize(cfg.broker) / 1024,
                 tree_bytes(node_mods) / 1024, "@agentclientprotocol/sdk + zod installed",
                 note=f"build/acp-broker as make builds it (-O2 -g); stripped "
                      f"{os.path.getsize(stripped) / 1024:.0f} KiB; libuv, msgpack-c, "
                      "jansson are shared libraries; node itself not counted")

        # Start to ready.
        br, nr = [], []
        for _ in range(cfg.startup_runs):
            br.append(first_byte_ms([cfg.broker], box.env))
            nr.append(first_byte_ms(["node", os.path.join(HERE, "node", "client.mjs"),
                                     "ready"], box.env))
        figs.add("broker_ready_ms", "ms", median(br), median(nr),
                 "node importing the SDK until it prints ready",
                 note=f"exec → the broker's ready notification on its stdout, median of "
                      f"{cfg.startup_runs}")

        plugin_startup(cfg, figs, box)
    finally:
        box.close()


def plugin_startup(cfg, figs, box):
    """Plugin startup: the plugin file as shipped (lazy) vs loading every
    module at startup."""
    eager = os.path.join(box.dir, "eager", "plugin", "acp_eager.lua")
    os.makedirs(os.path.dirname(eager))
    mods = sorted(f[:-4] for f in os.listdir(os.path.join(ROOT, "lua", "acp"))
                  if f.endswith(".lua"))
    with open(eager, "w") as f:
        f.write(f"vim.opt.rtp:prepend({json.dumps(ROOT)})\n")
        f.write(f"vim.cmd('runtime plugin/acp.lua')\n")
        for mname in mods:
            f.write(f"require('acp.{'init' if mname == 'init' else mname}')\n")
    lazy_ms = startuptime_ms(cfg, box, os.path.join(ROOT, "plugin", "acp.lua"))
    eager_ms = startuptime_ms(cfg, box, eager)
    figs.add("startup_plugin_ms", "ms", lazy_ms, eager_ms,
             "the same plugin loading all its Lua at startup",
             note="--startuptime: sourcing plugin/acp.lua (commands and <Plug> maps "
                  "only; everything else loads on first use), median of 15")


def part_startup(cfg, figs):
    box = Sandbox(cfg)
    try:
        plugin_startup(cfg, figs, box)
    finally:
        box.close()


# ---- table -------------------------------------------------------------------------

class Figures:
    def __init__(self):
        self.rows = []
        self.suffix = ""  # "_nvim012": the figures of a second Neovim

    def add(self, name, unit, broker, baseline, baseline_name, rate=False, note=""):
        ratio = None
        if broker and baseline:
            ratio = broker / baseline if rate else baseline / broker
        self.rows.append({"name": name + self.suffix, "unit": unit, "broker": broker,
                          "baseline": baseline, "baseline_name": baseline_name,
                          "ratio": ratio, "note": note, "figure": name})

    def add_latency(self, name, sfx, unit, broker, baseline, broker_worst,
                    baseline_worst, baseline_name, note=""):
        """A latency figure (the median over runs, as add) and beside it its
        worst run (worst_name(name) + sfx), which the median would hide."""
        self.add(name + sfx, unit, broker, baseline, baseline_name, note=note)
        self.add(worst_name(name) + sfx, unit, broker_worst, baseline_worst,
                 baseline_name, note="the worst run's value of " + name + " (the "
                 "figure above is the median over runs)")


def fmt(v):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"


def judge(figs):
    """Sets target and met on the rows that have a target."""
    for r in figs.rows:
        t = TARGETS.get(r.get("figure", r["name"]))
        if not t or r["broker"] is None:
            continue
        op, val = t
        r["met"] = {">=": r["broker"] >= val, "<": r["broker"] < val,
                    "<=": r["broker"] <= val}[op]
        r["target"] = f"{op} {val:g}"
        if r.get("figure") == "auto_roundtrips_per_s":  # and 5x the Node baseline
            r["target"] += ", >= 5x Node"
            r["met"] = r["met"] and (r["ratio"] or 0) >= 5


def print_table(figs, header):
    judge(figs)
    rows = [("figure", "unit", "broker", "baseline", "ratio", "target", "baseline is")]
    for r in figs.rows:
        target = ""
        if "target" in r:
            target = f"{r['target']} {'met' if r['met'] else 'MISSED'}"
        rows.append((r["name"], r["unit"], fmt(r["broker"]), fmt(r["baseline"]),
                     (fmt(r["ratio"]) + "x") if r["ratio"] else "-", target,
                     r["baseline_name"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    print(header)
    for j, row in enumerate(rows):
        cells = [row[i].rjust(widths[i]) if i in (2, 3, 4) else row[i].ljust(widths[i])
                 for i in range(len(row))]
        print("  ".join(cells).rstrip())
        if j == 0:
            print("  ".join("-" * w for w in widths))
    print("\nratio: broker / baseline for rates, baseline / broker for times and sizes "
          "(bigger is better). What each figure includes:")
    seen = set()
    for r in figs.rows:
        if r["note"] not in seen:
            seen.add(r["note"])
            print(f"  {r['name']}: {r['note']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--nvim", default=os.environ.get("NVIM_BIN", "nvim"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--only", default="auto,policy,ask,stream,footprint",
                    help="parts to run; 'startup': only the plugin startup of footprint")
    ap.add_argument("--nvim-012",
                    help="a second Neovim (default BUILD/nvim-0.12/usr/bin/nvim): where "
                         "it exists, the Neovim figures (auto, ask, stream, plugin "
                         "startup) are measured on it too, named with the suffix _nvim012")
    ap.add_argument("--broker-cmd", help="what Neovim starts as the broker, e.g. a "
                    "script that runs it under perf (profiling)")
    cfg = ap.parse_args()
    cfg.build = os.path.abspath(cfg.build)
    cfg.nvim_012 = os.path.abspath(
        cfg.nvim_012 or os.path.join(cfg.build, "nvim-0.12", "usr", "bin", "nvim"))
    cfg.broker = os.path.join(cfg.build, "acp-broker")
    cfg.agent = os.path.join(cfg.build, "bench", "bench_agent")
    cfg.policy = os.path.join(cfg.build, "bench", "bench_policy")
    cfg.warmup, cfg.nseq, cfg.npipe = 2000, 10000, 100000
    cfg.nask, cfg.npending, cfg.seconds = 100, 10000, 1.0
    cfg.stream_bytes, cfg.chunk, cfg.stream_repeats = 100 * 2**20, 1024, cfg.repeats
    cfg.startup_runs = 20
    if cfg.quick:
        cfg.warmup, cfg.nseq, cfg.npipe, cfg.nask = 200, 1000, 5000, 20
        cfg.npending, cfg.seconds, cfg.stream_bytes = 1000, 0.2, 8 * 2**20
        cfg.startup_runs = 5
    parts = cfg.only.split(",")
    for p in (cfg.broker, cfg.agent, cfg.policy):
        if not os.access(p, os.X_OK):
            sys.exit(f"bench: {p} is missing; run `make bench`")
    nvim_version = subprocess.run([cfg.nvim, "--version"], capture_output=True,
                                  text=True).stdout.split("\n")[0]
    node_version = subprocess.run(["node", "--version"], capture_output=True,
                                  text=True).stdout.strip()
    header = (f"acp-broker bench: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} "
              f"cores, load {os.getloadavg()[0]:.2f}, {nvim_version}, node {node_version}, "
              f"median of {cfg.repeats} interleaved runs")
    log(header)
    figs = Figures()
    t0 = time.monotonic()
    failed = []
    runs = [(name, fn) for name, fn in (
        ("auto", part_auto), ("policy", part_policy), ("ask", part_ask),
        ("stream", part_stream), ("footprint", part_footprint),
        ("startup", part_startup)) if name in parts and not (
            name == "startup" and "footprint" in parts)]
    # The figures that involve Neovim again on 0.12, where it is present.
    nvim012 = cfg.nvim_012 if os.access(cfg.nvim_012, os.X_OK) else None
    if nvim012 and os.path.realpath(nvim012) != os.path.realpath(
            shutil.which(cfg.nvim) or cfg.nvim):
        runs += [(name + " (nvim 0.12)", fn) for name, fn in (
            ("auto", part_auto), ("ask", part_ask), ("stream", part_stream),
            ("startup", part_startup))
            if name in parts or (name == "startup" and "footprint" in parts)]
        header += ("; figures named *_nvim012: " + subprocess.run(
            [nvim012, "--version"], capture_output=True, text=True).stdout.split("\n")[0])
    nvim_default = cfg.nvim
    for name, fn in runs:
        second = name.endswith("(nvim 0.12)")
        cfg.nvim, figs.suffix = (nvim012, "_nvim012") if second else (nvim_default, "")
        log(f"{name}:")
        try:
            fn(cfg, figs)
        except Exception as e:  # report the others; fail at the end
            failed.append(name)
            log(f"  {name} FAILED: {e!r}")
    cfg.nvim, figs.suffix = nvim_default, ""
    print()
    print_table(figs, header)
    if failed:
        print(f"\nFAILED parts (see above): {', '.join(failed)}")
    out = os.path.join(cfg.build, "bench.json")
    with open(out, "w") as f:
        json.dump({"header": header, "seconds": round(time.monotonic() - t0, 1),
                   "failed": failed, "figures": figs.rows}, f, indent=2)
        f.write("\n")
    print(f"\nwritten to {os.path.relpath(out, ROOT)} in {time.monotonic() - t0:.0f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
