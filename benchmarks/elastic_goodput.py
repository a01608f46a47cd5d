#!/usr/bin/env python3
"""Goodput under failures: one run of an example on 4 worker processes on loopback, in which a
random worker is killed (SIGKILL) every T seconds, the first T/2 seconds in (so that a run of W
seconds takes about W/T kills whatever T, the longest included), against the same run
undisturbed; an elastic run (a coordinator, a replacement started at each kill) against
checkpoint-restart (a fixed comm::Gloo run that writes a checkpoint every --checkpoint-every
rounds, and after each kill is started again, all 4 workers, from the newest checkpoint).

goodput = a method's undisturbed wall time / its wall time with kills, for the same passes over
the data: the useful work per second against the undisturbed rate (a membership change keeps
the passes the run promised, so both do the same work). Each run's final test accuracy is
printed against its method's undisturbed one.

With --repeats N every run is repeated N times, interleaved (each T's checkpoint-restart and
elastic runs side by side, the undisturbed ones first in each repeat), and the table shows the
medians of the wall times and accuracies (kills: the median count).

usage: elastic_goodput.py EXAMPLE COORDINATOR WORKDIR [--every 10,30,60,120] [--epochs E]
                          [--repeats N] [--seed S] [--checkpoint-every R] [--csv FILE]
                          [-- EXAMPLE ARGS...]
"""
import argparse
import csv
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

WORKERS = 4
DEADLINE = 3600  # seconds one run may take


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(text):
    """The final test accuracy: an elastic worker's line "test_accuracy A", or the last column
    of the results table the example prints for a fixed set of workers."""
    m = re.findall(r"^test_accuracy ([0-9.]+)$", text, re.M)
    if m:
        return float(m[-1])
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# algorithm") and line.split()[-1] == "test_accuracy" and i + 1 < len(lines):
            try:
                return float(lines[i + 1].split()[-1])
            except ValueError:
                return None
    return None


class Procs:
    """The worker processes of one run, each with its output file."""

    def __init__(self, folder):
        self.folder, self.all = folder, []

    def start(self, cmd):
        out = os.path.join(self.folder, "w%d.txt" % (len(self.all) + 1))
        p = subprocess.Popen(cmd, stdout=open(out, "w"), stderr=subprocess.STDOUT)
        p.out = out
        self.all.append(p)
        return p

    def log_kill(self, victim, t0):
        """Appends "seconds-into-the-run unix-time victim's-output" to the run's kills.txt."""
        with open(os.path.join(self.folder, "kills.txt"), "a") as f:
            f.write("%.3f %.3f %s\n" % (time.monotonic() - t0, time.time(), os.path.basename(victim.out)))

    def alive(self):
        return [p for p in self.all if p.poll() is None]

    def text(self, p):
        with open(p.out) as f:
            return f.read()

    def stop_all(self):
        for p in self.all:
            if p.poll() is None:
                p.kill()
                p.wait()


def elastic_run(args, folder, every, rng):
    """An elastic run; a kill (and a replacement) every `every` seconds (0: none). Returns
    (wall seconds, metric, kills)."""
    port = free_port()
    log = open(os.path.join(folder, "coordinator.txt"), "w")
    coordinator = subprocess.Popen([args.coordinator, "--bind", "127.0.0.1", "--port", str(port), "--min-workers", "2",
                                    "--heartbeat-timeout", "2"], stdout=log, stderr=subprocess.STDOUT)
    cmd = [args.example, "--comm", "elastic", "--coordinator", "127.0.0.1:%d" % port, "--hostname", "127.0.0.1",
           "--epochs", str(args.epochs), "--no-progress"] + args.extra
    procs = Procs(folder)
    time.sleep(0.3)
    t0 = time.monotonic()
    for _ in range(WORKERS):
        procs.start(cmd)
    kills, next_kill = 0, t0 + every / 2 if every else None
    try:
        while True:
            running = procs.alive()
            if not running:
                break
            if time.monotonic() - t0 > DEADLINE:
                raise RuntimeError("the elastic run took over %d s" % DEADLINE)
            if next_kill and time.monotonic() >= next_kill and "the run finished" in open(log.name).read():
                next_kill = None  # (training is over: the last epoch's rank 0 is printing the final metrics)
            if next_kill and time.monotonic() >= next_kill:
                victim = rng.choice(running)
                victim.kill()
                victim.killed = True
                kills += 1
                procs.log_kill(victim, t0)
                procs.start(cmd)  # the replacement
                next_kill += every
            time.sleep(0.01)
        wall = time.monotonic() - t0
    finally:
        procs.stop_all()
        coordinator.kill()
        coordinator.wait()
    values, failed = [], []
    for p in procs.all:
        if getattr(p, "killed", False):
            continue
        text = procs.text(p)
        if p.returncode != 0:
            failed.append("%s exited %d: %s" % (p.out, p.returncode, (text.strip().splitlines() or ["(no output)"])[-1][:200]))
        if metric(text) is not None:
            values.append(metric(text))
    if failed or not values:
        raise RuntimeError("the elastic run failed: " + "; ".join(failed or ["no worker printed test_accuracy"]))
    return wall, values[0], kills


def restart_run(args, folder, every, rng):
    """Checkpoint-restart: comm::Gloo, 4 workers, a checkpoint every --checkpoint-every rounds;
    after a kill the others end (their collective names the lost peer) and all 4 start again
    with --resume. Returns (wall seconds, metric, kills)."""
    ckpt = os.path.join(folder, "checkpoints")
    procs = Procs(folder)
    t0 = time.monotonic()
    kills, next_kill = 0, t0 + every / 2 if every else None
    while True:
        port = free_port()
        group = []
        for r in range(WORKERS):
            cmd = [args.example, "--comm", "gloo", "--workers", str(WORKERS), "--rank", str(r), "--store",
                   "127.0.0.1:%d" % port, "--hostname", "127.0.0.1", "--epochs", str(args.epochs), "--no-progress",
                   "--checkpoint", ckpt, "--checkpoint-every", str(args.checkpoint_every), "--resume"] + args.extra
            if r == 0:
                cmd.append("--serve-store")
            group.append(procs.start(cmd))
        killed = False
        while any(p.poll() is None for p in group):
            if time.monotonic() - t0 > DEADLINE:
                procs.stop_all()
                raise RuntimeError("the checkpoint-restart run took over %d s" % DEADLINE)
            if not killed and next_kill and time.monotonic() >= next_kill:
                victim = rng.choice([p for p in group if p.poll() is None])
                victim.kill()
                victim.killed = True
                procs.log_kill(victim, t0)
                killed = True
                kills += 1
                next_kill += every
                end = time.monotonic() + 30  # the others end on their own within about a second
                while any(p.poll() is None for p in group) and time.monotonic() < end:
                    time.sleep(0.01)
                for p in group:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            time.sleep(0.01)
        if not killed:
            bad = [p for p in group if p.returncode != 0]
            if bad:
                raise RuntimeError("the checkpoint-restart run failed: %s exited %d: %s" % (
                    bad[0].out, bad[0].returncode, (procs.text(bad[0]).strip().splitlines() or ["(no output)"])[-1][:200]))
            wall = time.monotonic() - t0
            value = next((metric(procs.text(p)) for p in group if metric(procs.text(p)) is not None), None)
            if value is None:
                raise RuntimeError("the checkpoint-restart run printed no test_accuracy")
            return wall, value, kills


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("example")
    p.add_argument("coordinator")
    p.add_argument("work")
    p.add_argument("--every", default="10,30,60,120", help="seconds between two kills, one run per value")
    p.add_argument("--epochs", default="40")
    p.add_argument("--repeats", type=int, default=1, help="runs of each method and T (medians)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-every", type=int, default=10, help="rounds between two checkpoints (checkpoint-restart)")
    p.add_argument("--csv", help="one row per run")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra  # the example's own arguments (after --)
    args.work = os.path.abspath(args.work)
    rng = random.Random(args.seed)
    everys = [float(x) for x in args.every.split(",") if x]
    rows = []

    def one(kind, every, repeat):
        folder = os.path.join(args.work, "%s-%g-%d" % (kind, every, repeat))
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        run = elastic_run if kind == "elastic" else restart_run
        wall, value, kills = run(args, folder, every, rng)  # (its folder stays: the workers' and the coordinator's logs)
        rows.append({"method": kind, "every_s": every, "repeat": repeat, "kills": kills, "wall_s": wall,
                     "test_accuracy": value})
        print("# %-8s kill every %5s s (run %d): %2d kills, %7.1f s, test accuracy %.4f" % (
            kind, "%g" % every if every else "-", repeat, kills, wall, value), flush=True)

    # undisturbed first (the base of both), then each T: checkpoint-restart and elastic side by side
    for repeat in range(1, args.repeats + 1):
        one("restart", 0, repeat)
        one("elastic", 0, repeat)
        for every in everys:
            one("restart", every, repeat)
            one("elastic", every, repeat)

    def median(method, every):
        runs = [x for x in rows if x["method"] == method and x["every_s"] == every]
        return {k: statistics.median(x[k] for x in runs) for k in ("kills", "wall_s", "test_accuracy")}

    base = {m: median(m, 0) for m in ("restart", "elastic")}
    if args.repeats > 1:
        print("# medians over %d runs of each" % args.repeats)
    print("# goodput = the method's undisturbed wall time / its wall time with kills (the same passes over the data);")
    print("# undisturbed: checkpoint-restart (comm::Gloo, a checkpoint every %d rounds) %.1f s, test accuracy %.4f;" % (
        args.checkpoint_every, base["restart"]["wall_s"], base["restart"]["test_accuracy"]))
    print("#              elastic %.1f s, test accuracy %.4f; accuracy: points against the method's undisturbed run" % (
        base["elastic"]["wall_s"], base["elastic"]["test_accuracy"]))
    print("# %7s %9s %10s %10s %10s %10s %9s %9s" % ("kill/s", "kills r/e", "wall rest.", "wall elas.", "gp restart",
                                                    "gp elastic", "acc rest.", "acc elas."))
    for every in everys:
        r, e = median("restart", every), median("elastic", every)
        print("  %7g %4g/%-4g %10.1f %10.1f %10.3f %10.3f %+9.2f %+9.2f" % (
            every, r["kills"], e["kills"], r["wall_s"], e["wall_s"], base["restart"]["wall_s"] / r["wall_s"],
            base["elastic"]["wall_s"] / e["wall_s"], (r["test_accuracy"] - base["restart"]["test_accuracy"]) * 100,
            (e["test_accuracy"] - base["elastic"]["test_accuracy"]) * 100))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:
        print("elastic_goodput.py: %s" % e, file=sys.stderr)
        sys.exit(1)
