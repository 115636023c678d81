#!/usr/bin/env python3
"""The slow one-at-a-time round trips of an auto run, from `perf sched timehist`.

    perf sched record -a -o DATA -- python3 bench/run.py --only auto --repeats 1 --quick
    perf sched timehist -i DATA > LIST
    python3 bench/seq_tail.py LIST [THRESHOLD_US [SHOW]]

The bench agent (bench_agent) sleeps from writing a request to reading its answer,
so a sleep between two short runs (< 40 µs: the one-at-a-time phase) longer than
THRESHOLD_US is a slow round trip. (Not every round trip shows as a sleep: the
agent's runs often span one, and it also sleeps a microsecond inside its loop, so
the count and the p50 of the sleeps are not those of the round trips; the long
sleeps are.) For each sleep longer than THRESHOLD_US (default 100), what ran on each
CPU meanwhile, and what it waited for:

  nvim on broker cpu  the broker woke on the CPU where Neovim ran and waited (> 20 µs)
  agent sch>20        the agent waited > 20 µs for a CPU once its answer was written
  broker sch>20       the broker waited for a CPU, Neovim not on it
  broker run>60       the broker itself ran longer than 60 µs
  other               none of these

SHOW: print the first SHOW slow round trips one by one. Each run of the bench
agent (a pid) is a client's run, named by what ran most beside it: acp-broker (the
broker), node (the Node client), or neither (the Lua client in Neovim). Its last
line (SUMMARY) counts the slow round trips, the broker's and the agent's waits for a
CPU above 50 µs, and Neovim's runs (p90, p99, total) within the phase. The listing
holds every process on the machine: other people's work shows up by name.
bench/README.md (round 5) has what it showed.
"""
import collections
import re
import sys

LINE = re.compile(r"\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.*?)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+"
                  r"(\d+\.\d+)(?:\s+(\S+))?\s*$")


def load(path):
    """Runs as (start µs, end µs, cpu, task, wait µs, sch delay µs, run µs,
    state at the end, "" without --state)."""
    rows = []
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            t, cpu, task, wait, sch, run, state = m.groups()
            t, run = float(t) * 1e6, float(run) * 1e3
            rows.append((t - run, t, int(cpu), task, float(wait) * 1e3, float(sch) * 1e3, run,
                         state or ""))
    return rows


def q(v, p):
    return v[min(len(v) - 1, int(len(v) * p))] if v else 0


def name_of(task):
    return re.sub(r"\[.*", "", task)


def client_runs(rows):
    """The bench agent's runs by pid, each with the client that served it."""
    pids = collections.OrderedDict()
    for r in rows:
        if not r[3].startswith("bench_agent"):
            continue
        pids.setdefault(r[3], []).append(r)
    for task, agent in pids.items():
        t0, t1 = agent[0][0], agent[-1][1]
        cpu = collections.Counter()
        for r in rows:
            if t0 <= r[0] and r[1] <= t1:
                cpu[name_of(r[3])] += r[6]
        # The client is what ran most beside the agent (a sandbox's
        # `acp-broker trust` may run during a Node run).
        yield ("node" if cpu["node"] > cpu["acp-broker"] else
               "broker" if cpu["acp-broker"] > 0 else "lua"), task, agent


def report(rows, agent, thresh, show):
    # (sleep start, end, length, agent's sch delay, cpu before, cpu after):
    # between two short runs
    sleeps = [(a[1], b[0], b[0] - a[1], b[5], a[2], b[2])
              for a, b in zip(agent, agent[1:]) if a[6] < 40 and b[6] < 40]
    if not sleeps:
        print("no one-at-a-time phase found")
        return
    durs = sorted(s[2] for s in sleeps)
    print(f"agent sleeps between short runs: {len(sleeps)}, longest "
          f"{q(durs, 1):.0f} µs")
    t0, t1 = sleeps[0][0], sleeps[-1][1]
    rows = [r for r in rows if r[1] > t0 and r[0] < t1]
    slow = [s for s in sleeps if thresh < s[2] < 5000]
    why = collections.Counter()
    others = collections.Counter()
    for k, (s0, s1, d, sch, cpu_a, cpu_b) in enumerate(slow):
        ran = [r for r in rows if r[1] > s0 and r[0] < s1]
        occ = collections.defaultdict(float)
        for r in ran:
            occ[(r[2], name_of(r[3]))] += min(r[1], s1) - max(r[0], s0)
        br = [r for r in ran if r[3].startswith("acp-broker")]
        brsch = sum(r[5] for r in br)
        brrun = sum(min(r[1], s1) - max(r[0], s0) for r in br)
        bcpu = {r[2] for r in br}
        nv_on_b = sum(v for (c, n), v in occ.items() if n == "nvim" and c in bcpu)
        why["nvim on broker cpu" if nv_on_b > 20 and brsch > 20 else
            "agent sch>20" if sch > 20 else "broker sch>20" if brsch > 20 else
            "broker run>60" if brrun > 60 else "other"] += 1
        for (c, n), v in occ.items():
            if n not in ("acp-broker", "bench_agent", "<idle>"):
                others[n] += v
        if k < show:
            print(f"{s0:.0f} sleep {d:.0f} agent sch {sch:.0f} cpu {cpu_a}->{cpu_b}; "
                  f"broker run {brrun:.0f} sch {brsch:.0f}; " +
                  ", ".join(f"cpu{c} {n} {v:.0f}" for (c, n), v in sorted(occ.items()) if v > 5))
    print(f"slow (> {thresh:.0f} µs): {len(slow)}; waited for: {why.most_common()}")
    print("other processes' µs in them:", [(n, round(v)) for n, v in others.most_common(8)])
    phase = [r for r in rows if r[0] >= t0 and r[1] <= t1]
    nv = sorted(r[6] for r in phase if r[3].startswith("nvim"))
    bs = sorted(r[5] for r in phase if r[3].startswith("acp-broker"))
    ag = sorted(r[5] for r in phase if r[3].startswith("bench_agent"))
    print(f"SUMMARY slow>{thresh:.0f} {len(slow)} broker_sch>50 {sum(x > 50 for x in bs)} "
          f"agent_sch>50 {sum(x > 50 for x in ag)} nvim_run_p90 {q(nv, .9):.0f} "
          f"nvim_run_p99 {q(nv, .99):.0f} nvim_ms {sum(nv) / 1e3:.0f}")


def main():
    rows = load(sys.argv[1])
    thresh = float(sys.argv[2]) if len(sys.argv) > 2 else 100
    show = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    for client, task, agent in client_runs(rows):
        print(f"== {client} ({task})")
        report(rows, agent, thresh, show)


if __name__ == "__main__":
    main()
