#!/usr/bin/env python3
"""The kill campaign of an elastic run: 4 worker processes of an example on loopback with a
coordinator, and in each run one kind of fault. Every run must end with every survivor done
(exit 0, the same model digest), within a deadline.

  random   one worker killed (SIGKILL) at a random moment of training
  setup    one worker killed 0-30 ms after the coordinator logs "epoch 1 starts" (the members
           are connecting), or, after a first kill, 0-30 ms after "epoch 2 starts"
  double   a worker killed at a random moment, a second one 20-80 ms later
  replace  a worker killed, a replacement started 0.3 s later: admitted, it ends with the others
  stop     a worker stopped (SIGSTOP): expelled, the others finish; continued, it exits non-zero

usage: elastic_kills.py EXAMPLE COORDINATOR WORKDIR [--runs N] [--seed S] [--kinds K,K...]
Prints a line per run and a summary per kind (runs passed, and the time from the kill to the
first round end of the survivors' next epoch: median and worst); exits 1 if a run failed.
"""
import argparse
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time

KINDS = ["random", "setup", "double", "replace", "stop"]
# the phases of a recovery: the loss noticed (the kill -> the end of the epoch), then each phase
# the workers print ("membership epoch N began ... after the wait for it (unix time T): ...")
PHASES = ["noticed", "formed", "round agreed", "connected", "model made", "continued", "first round"]
BEGAN = (r"membership epoch \d+ began [0-9.]+ s after the wait for it \(unix time ([0-9.]+)\): formed ([0-9.]+) s, "
         r"round agreed ([0-9.]+) s, connected ([0-9.]+) s, model made ([0-9.]+) s, continued ([0-9.]+) s, first round ([0-9.]+) s")
DEADLINE = 90  # seconds a run may take


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    def __init__(self, args, name):
        self.args, self.dir = args, os.path.join(args.work, name)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.port = free_port()
        self.log = os.path.join(self.dir, "coordinator.txt")
        self.coordinator = subprocess.Popen(
            [args.coordinator, "--bind", "127.0.0.1", "--port", str(self.port), "--min-workers", "2",
             "--heartbeat-timeout", "1"], stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        self.workers = []
        self.wait_log(r"listening", 10)

    def coordinator_log(self):
        with open(self.log) as f:
            return f.read()

    def wait_log(self, pattern, timeout):
        """Waits (polling every millisecond) for a line of the coordinator's log; its time."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, self.coordinator_log(), re.M):
                return time.time()
            time.sleep(0.001)
        raise RuntimeError("the coordinator's log shows no %r within %d s" % (pattern, timeout))

    def worker(self, stall=30):
        i = len(self.workers) + 1
        out = os.path.join(self.dir, "w%d.txt" % i)
        cmd = [self.args.example, "--comm", "elastic", "--hostname", "127.0.0.1", "--coordinator",
               "127.0.0.1:%d" % self.port, "--algo", "cocod", "--period", "4", "--epochs", str(self.args.epochs),
               "--no-progress", "--mpi-stall-timeout", str(stall)]
        self.workers.append(subprocess.Popen(cmd, stdout=open(out, "w"), stderr=subprocess.STDOUT))
        return self.workers[-1]

    def output(self, i):
        with open(os.path.join(self.dir, "w%d.txt" % (i + 1))) as f:
            return f.read()

    def finish(self, faulty):
        """Waits for every worker (the faulty ones' exits are theirs); checks the survivors."""
        end = time.monotonic() + DEADLINE
        codes = {}
        for i, p in enumerate(self.workers):
            try:
                codes[i] = p.wait(timeout=max(1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                codes[i] = None
        for p in self.workers + [self.coordinator]:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        problems, digests = [], set()
        for i, code in codes.items():
            if i in faulty:
                continue
            text = self.output(i)
            if code is None:
                problems.append("worker %d still ran after %d s" % (i + 1, DEADLINE))
            elif code != 0:
                last = [l for l in text.splitlines() if l.strip()][-1:] or ["(no output)"]
                problems.append("worker %d exited %d: %s" % (i + 1, code, last[0][:300]))
            else:
                d = re.findall(r"^model digest [^:]*: ([0-9a-f]{16})$", text, re.M)
                if not d:
                    problems.append("worker %d printed no digest" % (i + 1))
                digests.update(d)
        if len(digests) > 1:
            problems.append("the survivors' digests differ: " + " ".join(sorted(digests)))
        return codes, problems

    def recovery(self, killed_at, faulty):
        """Seconds from the kill to the first round end of a later epoch a survivor printed."""
        times = []
        for i in range(len(self.workers)):
            if i in faulty:
                continue
            for t in re.findall(r"membership epoch \d+: .*\(unix time ([0-9.]+)\)", self.output(i)):
                if float(t) > killed_at:
                    times.append(float(t))
                    break
        return min(times) - killed_at if times else None

    def phases(self, killed_at, faulty):
        """Where the survivors' time went from the kill to their next epoch's first round end:
        per phase, the median over the survivors of the first epoch each began after the kill."""
        per = {name: [] for name in PHASES}
        for i in range(len(self.workers)):
            if i in faulty or i >= 4:  # (a replacement's first epoch is no recovery)
                continue
            for m in re.finditer(BEGAN, self.output(i)):
                since = float(m.group(1))
                if since + 0.001 < killed_at:
                    continue
                per["noticed"].append(since - killed_at)
                for name, value in zip(PHASES[1:], m.groups()[1:]):
                    per[name].append(float(value))
                break
        return {name: statistics.median(v) for name, v in per.items() if v}


def one_run(args, kind, n, rng):
    run = Run(args, "%s-%d" % (kind, n))
    for _ in range(4):  # (a stopped worker: the collective that waits for it ends at the stall timeout)
        run.worker(stall=3 if kind == "stop" else 30)
    faulty, what, killed_at = set(), "", None
    try:
        if kind == "setup":
            def kill_into(epoch, victim):  # 0-30 ms after the epoch starts: its members connect
                delay = rng.uniform(0, 0.030)
                run.wait_log(r"^epoch %d starts" % epoch, 30)
                time.sleep(delay)
                run.workers[victim].kill()
                faulty.add(victim)
                return time.time(), "worker %d killed %.0f ms after epoch %d started" % (victim + 1, delay * 1000, epoch)
            victim = rng.randrange(4)
            if rng.random() < 0.5:  # the first epoch's set-up
                killed_at, what = kill_into(1, victim)
            else:  # the second's, after a kill in training
                run.wait_log(r"^epoch 1 starts", 30)
                time.sleep(rng.uniform(0.5, 1.5))
                first = rng.randrange(4)
                run.workers[first].kill()
                faulty.add(first)
                killed_at, what = kill_into(2, rng.choice([i for i in range(4) if i != first]))
                what = "worker %d killed, then %s" % (first + 1, what)
        else:
            run.wait_log(r"^epoch 1 starts", 30)
            time.sleep(rng.uniform(0.5, 2.0))
            victim = rng.randrange(4)
            if kind == "stop":
                run.workers[victim].send_signal(signal.SIGSTOP)
                killed_at = time.time()
                faulty.add(victim)
                what = "worker %d stopped" % (victim + 1)
                for i, p in enumerate(run.workers):  # the others finish first
                    if i != victim:
                        try:
                            p.wait(timeout=DEADLINE)
                        except subprocess.TimeoutExpired:
                            pass
                run.workers[victim].send_signal(signal.SIGCONT)
            else:
                run.workers[victim].kill()
                killed_at = time.time()
                faulty.add(victim)
                what = "worker %d killed" % (victim + 1)
            if kind == "double":
                delay = rng.uniform(0.020, 0.080)
                time.sleep(delay)
                second = rng.choice([i for i in range(4) if i != victim])
                run.workers[second].kill()
                faulty.add(second)
                what += ", worker %d %.0f ms later" % (second + 1, delay * 1000)
            if kind == "replace":
                time.sleep(0.3)
                run.worker()
                what += ", a replacement started 0.3 s later"
    except RuntimeError as e:
        what += " (%s)" % e
    codes, problems = run.finish(faulty)
    if kind == "stop":
        victim = next(iter(faulty))
        if codes.get(victim) == 0:
            problems.append("the stopped worker ended well after it was expelled")
        elif "expelled" not in run.output(victim):
            problems.append("the stopped worker was not told it was expelled")
    if kind == "replace" and not problems:
        if not re.search(r"admitted 5\b", run.coordinator_log()):
            problems.append("the replacement was not admitted")
    recovery = run.recovery(killed_at, faulty) if killed_at and kind != "stop" else None
    phases = run.phases(killed_at, faulty) if recovery is not None else {}
    ok = not problems
    print("%-7s %2d %s: %s%s" % (kind, n, "ok  " if ok else "FAILED", what,
                                 "; next epoch's first round %.3f s after" % recovery if recovery is not None else ""),
          flush=True)
    if phases:
        print("           " + ", ".join("%s %.3f s" % (name, phases[name]) for name in PHASES if name in phases), flush=True)
    for p in problems:
        print("           " + p, flush=True)
    if ok:
        shutil.rmtree(run.dir, ignore_errors=True)
    return ok, recovery, phases


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("example")
    p.add_argument("coordinator")
    p.add_argument("work")
    p.add_argument("--runs", type=int, default=2, help="runs of each kind")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--epochs", default="100", help="the example's --epochs (its run's length)")
    args = p.parse_args()
    args.work = os.path.abspath(args.work)
    kinds = args.kinds.split(",")
    for k in kinds:
        if k not in KINDS:
            p.error("--kinds: %r is not one of %s" % (k, ", ".join(KINDS)))
    rng = random.Random(args.seed)
    summary, failed = [], 0
    for kind in kinds:
        passed, recoveries, phases = 0, [], {name: [] for name in PHASES}
        for n in range(1, args.runs + 1):
            ok, recovery, run_phases = one_run(args, kind, n, rng)
            passed += ok
            failed += not ok
            if recovery is not None:
                recoveries.append(recovery)
            for name, value in run_phases.items():
                phases[name].append(value)
        line = "# %-7s %d of %d runs passed" % (kind, passed, args.runs)
        if recoveries:
            line += "; kill -> next epoch's first round: median %.3f s, worst %.3f s" % (
                statistics.median(recoveries), max(recoveries))
        if any(phases.values()):
            line += "\n#           where it went (medians): " + ", ".join(
                "%s %.3f s" % (name, statistics.median(v)) for name, v in phases.items() if v)
        summary.append(line)
    print("\n".join(summary))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
