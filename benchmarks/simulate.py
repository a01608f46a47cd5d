#!/usr/bin/python3
"""Scale on paper: the round-time model of docs/algorithm.md, driven by times measured here,
predicts the wall-clock speedup of each algorithm over S-SGD at 8 to 1024 workers and 1, 10,
100 Gbit/s.

  benchmarks/simulate.py RESULTS_DIR

Reads the full tables the time-to-accuracy benchmark saved (tta_<link>_<workers>.txt): each gives
one local step's compute c (measured with every worker busy), the link (threads: the throttled
link's all-reduce m; mpi: S-SGD's blocking all-reduce, measured in the run) and every
algorithm's period k and wall time.

1. Validation: for each measured run, the model's wall time for its steps,
     S-SGD  c + m          Local-SGD  c + m/k
     Pipe-SGD max(c, m)    CoCoD-SGD  max(k c, m) / k        (per step)
   against the measured wall time (target: every run within TOLERANCE_PCT = 15%).
2. Prediction: per-step times at N workers with c from the 4-worker run and
     m(N) = 2(N-1) alpha + 2(N-1)/N * S / beta
   (ring all-reduce of S bytes; alpha per message; beta the link's bandwidth), k chosen as
   --period auto does (smallest k with k c >= m), but at most 8: the measured runs reached the
   same accuracy as S-SGD with k up to 9, larger k is not validated. The speedup is per epoch,
   which is speedup to accuracy when every algorithm needs the same epochs, as measured at 2 and
   4 workers.
Writes simulate_validation.csv, simulate_scale.csv and simulate_scale.png (gnuplot, if present).
"""
import csv
import math
import os
import re
import shutil
import subprocess
import sys

NAMES = ["CoCoD-SGD", "S-SGD", "Local-SGD", "Pipe-SGD"]
# The one threshold of the validation: every run's error within this, in percent.
TOLERANCE_PCT = 15.0


def parse(path):
    text = open(path).read()
    run = {"c": float(re.search(r"one local step c = ([0-9.]+) ms", text).group(1)) / 1e3}
    m = re.search(r"one all-reduce m = ([0-9.]+) ms", text)
    b = re.search(r"\(([0-9]+) bytes per all-reduce\)", text)
    run["bytes"] = int(b.group(1))
    run["rows"] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) > 14 and f[0] in NAMES:
            run["rows"][f[0]] = {"steps": int(f[1]), "k": int(f[3]), "kc": float(f[6]) / 1e3,
                                 "comm": float(f[7]) / 1e3, "wall": float(f[12])}
    if m:
        run["m"] = float(m.group(1)) / 1e3
    else:  # MPI: S-SGD's blocking all-reduce per step
        s = run["rows"]["S-SGD"]
        run["m"] = s["comm"] / s["k"]
    return run


def per_step(name, c, m, k):
    if name == "S-SGD":
        return c + m
    if name == "Local-SGD":
        return c + m / k
    if name == "Pipe-SGD":
        return max(c, m)
    return max(k * c, m) / k


def auto_k(c, m, cap=8):
    return max(1, min(cap, math.ceil(m / c)))


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "results/benchmarks"
    runs = {}
    for f in sorted(os.listdir(out)):
        g = re.fullmatch(r"tta_(threads|mpi)_([0-9]+)\.txt", f)
        if g:
            runs[(g.group(1), int(g.group(2)))] = parse(os.path.join(out, f))
    if not runs:
        sys.exit("simulate.py: no tta_*.txt in %s (run benchmarks/time_to_accuracy.sh first)" % out)

    print("# validation: the round-time model's wall time against the measured one (target: every run within %g%%)" % TOLERANCE_PCT)
    print("# %-8s %7s %-10s %3s %8s %8s %9s %9s %7s" % ("link", "workers", "algorithm", "k", "c", "m", "predicted", "measured", "error"))
    print("# %-8s %7s %-10s %3s %8s %8s %9s %9s %7s" % ("", "", "", "", "ms", "ms", "s", "s", "%"))
    worst = 0.0
    with open(os.path.join(out, "simulate_validation.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["link", "workers", "algorithm", "k", "c_ms", "m_ms", "predicted_s", "measured_s", "error_pct"])
        for (link, n), run in sorted(runs.items()):
            for name in NAMES:
                r = run["rows"].get(name)
                if not r:
                    continue
                c = r["kc"] / r["k"]  # the run's own compute per step
                predicted = r["steps"] * per_step(name, c, run["m"], r["k"])
                error = 100.0 * (predicted - r["wall"]) / r["wall"]
                worst = max(worst, abs(error))
                print("  %-8s %7d %-10s %3d %8.3f %8.3f %9.2f %9.2f %+7.1f" % (link, n, name, r["k"], c * 1e3, run["m"] * 1e3, predicted, r["wall"], error))
                w.writerow([link, n, name, r["k"], "%.4f" % (c * 1e3), "%.4f" % (run["m"] * 1e3), "%.3f" % predicted, "%.3f" % r["wall"], "%.2f" % error])
    print("# target: every run within %g%%: %s (worst %.1f%%)" % (TOLERANCE_PCT, "met" if worst <= TOLERANCE_PCT else "NOT met", worst))

    base = runs.get(("threads", 4)) or next(iter(runs.values()))
    c = base["rows"]["S-SGD"]["kc"] / base["rows"]["S-SGD"]["k"]
    size = base["bytes"]
    alpha = 50e-6  # per message, as the demo's link
    print("#\n# prediction: speedup per epoch over S-SGD; c = %.3f ms per step (4-worker run), model %d bytes, alpha = 50 us, k <= 8" % (c * 1e3, size))
    print("# %7s %6s %9s %3s %10s %10s %10s" % ("workers", "Gbit/s", "m", "k", "CoCoD-SGD", "Local-SGD", "Pipe-SGD"))
    print("# %7s %6s %9s %3s %10s %10s %10s" % ("", "", "ms", "", "x", "x", "x"))
    rows = []
    for gbit in (1, 10, 100):
        beta = gbit * 1e9 / 8
        n = 8
        while n <= 1024:
            m = 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta
            k = auto_k(c, m)
            s = per_step("S-SGD", c, m, 1)
            sp = {name: s / per_step(name, c, m, k) for name in NAMES}
            rows.append((n, gbit, m, k, sp))
            print("  %7d %6d %9.3f %3d %10.2f %10.2f %10.2f" % (n, gbit, m * 1e3, k, sp["CoCoD-SGD"], sp["Local-SGD"], sp["Pipe-SGD"]))
            n *= 2
    scale = os.path.join(out, "simulate_scale.csv")
    with open(scale, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["workers", "gbit", "m_ms", "k", "cocod_speedup", "local_speedup", "pipe_speedup"])
        for n, gbit, m, k, sp in rows:
            w.writerow([n, gbit, "%.4f" % (m * 1e3), k, "%.3f" % sp["CoCoD-SGD"], "%.3f" % sp["Local-SGD"], "%.3f" % sp["Pipe-SGD"]])
    if shutil.which("gnuplot"):
        png = os.path.join(out, "simulate_scale.png")
        plot = ", ".join(
            "'%s' using 1:($2 == %d ? $%d : NaN) with linespoints title '%s, %d Gbit/s'" % (scale, g, col, name, g)
            for g in (1, 10, 100) for col, name in ((5, "CoCoD-SGD"), (6, "Local-SGD")))
        script = """set terminal pngcairo size 900,560 font ",11"
set output "%s"
set datafile separator ","
set logscale x 2
set key top left
set grid
set title "Predicted speedup per epoch over S-SGD (round-time model, measured c and alpha/beta)"
set xlabel "workers"
set ylabel "speedup over S-SGD"
plot %s
""" % (png, plot)
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print("# plot: %s" % png)
    print("# csv: %s, %s" % (os.path.join(out, "simulate_validation.csv"), scale))
    print("# simulate: OK")


if __name__ == "__main__":
    main()
