#!/usr/bin/python3
"""Scale on paper: the round-time model of docs/algorithm.md, driven by times measured here,
with its measured overheads, predicts the wall-clock speedup of each algorithm over S-SGD at 8 to
1024 workers and 1, 10, 100 Gbit/s, for the Fashion-MNIST MLP and the libtorch CNN.

  benchmarks/simulate.py RESULTS_DIR

Reads, in RESULTS_DIR:
- the time-to-accuracy benchmark's tables (tta_<link>_<workers>.txt): each gives one local
  step's compute c (measured with every worker busy), the link (threads: the throttled link's
  all-reduce m; mpi: S-SGD's blocking all-reduce, measured in the run), and every algorithm's
  period k, median compute per round kc, median all-reduce time and wall time;
- kernels_model.csv (`kernels --mib 1 --csv`): the round-end pass and the non-finite guard's
  read of one MiB, with 1 and 2 threads;
- simulate_model_<name>.txt (optional, one per model to predict): a one-worker run of the
  example, which gives c with the worker alone on a core and the model's bytes.

1. Validation: for each measured run, the model's wall time for its R = steps/k rounds,
     S-SGD     R k (c + m)                 Local-SGD  R (k c + m + e) + m + e
     CoCoD-SGD R (max(k c, m_o) + e) + m + e
     Pipe-SGD  steps max(c, m + c (1 - 1/g)) + m
   against the measured wall time (target: every run within TOLERANCE_PCT = 15%). The measured
   overheads are:
   - e, the round-end pass per round: the kernels' round end plus the guard's read, scaled to
     the model's bytes, with as many threads as workers run at once on this machine's cores,
     and doubled where two workers share a core (4 workers on 2 cores);
   - the consensus at the end: one more all-reduce and round end (Pipe-SGD: the last
     all-reduce in flight);
   - m_o, an all-reduce while compute runs: CoCoD-SGD's own measured all-reduce time. On the
     MPI runs it is 1.3x the blocking one, as the workers' compute and the MPI progress share
     the 2 cores; on the threads' throttled link it is m;
   - Pipe-SGD's all-reduces queue one behind the other, so each step takes at least m; during
     the c of it that overlaps compute the all-reduce runs g = m_o / m times slower.
   The errors without the overheads are printed beside. (At an overlap depth tau < k CoCoD-SGD's
   round is (k - tau) c + max(tau c, m_o) + e: wall_time and per_step take tau; the measured runs
   read here overlap whole rounds.)
2. Prediction: per-step times at N workers for each simulate_model_<name>.txt, with
     m(N) = 2(N-1) alpha + 2(N-1)/N * S / beta
   (ring all-reduce of S bytes; alpha per message; beta the link's bandwidth), e at one thread,
   g = 1 (a worker per machine: its communication does not take its compute's cores), and k
   chosen as --period auto does (smallest k with k c >= m), but at most 8: the measured runs
   reached the same accuracy as S-SGD with k up to 9, larger k is not validated. The speedup
   is per epoch, which is speedup to accuracy when every algorithm needs the same epochs, as
   measured at 2 and 4 workers.
3. Groups: a cluster of 4 nodes of 8 GPUs, one NIC per node at 1 to 100 Gbit/s, and a fast link
   inside a node (150 GB/s, 5 us): flat CoCoD-SGD over the 32 GPUs (cocod's rank-ordered
   all-reduce over every rank: in each of its two phases every rank sends what the other nodes
   own, so a node's NIC carries 8 times that) against groups of 8 (S-SGD inside a node, one
   all-reduce m_in per step; CoCoD-SGD across the nodes, member m exchanging slice m of 8 with
   member m of every node: a node's NIC carries one model's worth). Per epoch, over S-SGD over
   the 32 ranks, with k as in 2.
Writes simulate_validation.csv, simulate_scale.csv, simulate_groups.csv and simulate_scale.png
(gnuplot, if present).
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
ALPHA = 50e-6  # seconds per message in the prediction, as the demo's link


def parse(path):
    text = open(path).read()
    run = {"c": float(re.search(r"one local step c = ([0-9.]+) ms", text).group(1)) / 1e3}
    m = re.search(r"one all-reduce m = ([0-9.]+) ms", text)
    b = re.search(r"([0-9]+) parameters \(([0-9]+) bytes per all-reduce\)", text)
    run["parameters"], run["bytes"] = int(b.group(1)), int(b.group(2))
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


def round_end_cost(out):
    """Seconds per byte of model of the round-end pass plus the guard's read, by thread count:
    from `kernels --mib 1 --csv kernels_model.csv` (one MiB per array)."""
    path = os.path.join(out, "kernels_model.csv")
    if not os.path.exists(path):
        sys.exit("simulate.py: no %s (benchmarks/run simulate writes it: kernels --mib 1 --csv FILE)" % path)
    times, array_bytes = {}, None
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if r["kernel"] in ("round_end", "all_finite"):
                t = int(r["threads"])
                times[t] = times.get(t, 0.0) + float(r["time"]) / 1e3
            if r["kernel"] == "all_finite":  # one stream: its bytes are one array's
                array_bytes = float(r["bytes"]) / int(r["threads"]) * 2 ** 20
    if not array_bytes or not times:
        sys.exit("simulate.py: %s has no round_end and all_finite rows" % path)
    return {t: v / array_bytes for t, v in times.items()}


def wall_time(name, r, m, e=0.0, m_overlapped=None, tau=None):
    """The model's wall time of a measured run: R = steps/k rounds of its measured kc, the link's
    m, the round-end pass e, the consensus, and m_overlapped (an all-reduce while compute runs);
    tau: CoCoD-SGD's overlap depth (None: the whole round). With e = 0 and m_overlapped = None:
    the bare round-time model."""
    k, steps = r["k"], r["steps"]
    c, rounds = r["kc"] / k, steps / k
    mo = m if m_overlapped is None else m_overlapped
    bare = m_overlapped is None and e == 0.0
    if name == "S-SGD":
        return steps * (c + m)
    if name == "Local-SGD":
        return rounds * (k * c + m + e) + (0 if bare else m + e)
    if name == "Pipe-SGD":
        g = mo / m
        return steps * max(c, m + c * (1 - 1 / g)) + (0 if bare else m)
    t = k if tau is None else min(tau, k)  # the round waits for what its last tau steps do not hide
    return rounds * ((k - t) * c + max(t * c, mo) + e) + (0 if bare else m + e)


def per_step(name, c, m, k, e=0.0, tau=None):
    if name == "S-SGD":
        return c + m
    if name == "Local-SGD":
        return c + (m + e) / k
    if name == "Pipe-SGD":
        return max(c, m)
    t = k if tau is None else min(tau, k)
    return ((k - t) * c + max(t * c, m) + e) / k


def auto_k(c, m, cap=8):
    return max(1, min(cap, math.ceil(m / c)))


def auto_tau(c, m, k):
    """--overlap-depth auto's tau: the fewest steps that hide m, at most k."""
    return max(1, min(k, math.ceil(m / c)))


def validate(out, runs, cost, cores):
    print("# validation: the round-time model's wall time against the measured one (target: every run within %g%%)" % TOLERANCE_PCT)
    print("# e: the round-end pass per round; m_o: an all-reduce while compute runs (CoCoD-SGD's); bare: no overheads")
    print("# %-8s %7s %-10s %3s %7s %7s %7s %6s %9s %9s %6s %7s" % (
        "link", "workers", "algorithm", "k", "c", "m", "m_o", "e", "predicted", "measured", "bare", "error"))
    print("# %-8s %7s %-10s %3s %7s %7s %7s %6s %9s %9s %6s %7s" % (
        "", "", "", "", "ms", "ms", "ms", "ms", "s", "s", "%", "%"))
    worst = worst_bare = 0.0
    with open(os.path.join(out, "simulate_validation.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["link", "workers", "algorithm", "k", "c_ms", "m_ms", "m_overlapped_ms", "e_ms", "predicted_s",
                    "measured_s", "error_bare_pct", "error_pct"])
        for (link, n), run in sorted(runs.items()):
            threads = min(n, cores)
            e = cost[min(threads, max(cost))] * run["bytes"] * math.ceil(n / threads)
            mo = run["rows"]["CoCoD-SGD"]["comm"] if link == "mpi" else run["m"]
            for name in NAMES:
                r = run["rows"].get(name)
                if not r:
                    continue
                predicted = wall_time(name, r, run["m"], e, max(mo, run["m"]))
                bare = wall_time(name, r, run["m"])
                error = 100.0 * (predicted - r["wall"]) / r["wall"]
                error_bare = 100.0 * (bare - r["wall"]) / r["wall"]
                worst, worst_bare = max(worst, abs(error)), max(worst_bare, abs(error_bare))
                print("  %-8s %7d %-10s %3d %7.3f %7.3f %7.3f %6.3f %9.2f %9.2f %+6.1f %+7.1f" % (
                    link, n, name, r["k"], r["kc"] / r["k"] * 1e3, run["m"] * 1e3, max(mo, run["m"]) * 1e3, e * 1e3,
                    predicted, r["wall"], error_bare, error))
                w.writerow([link, n, name, r["k"], "%.4f" % (r["kc"] / r["k"] * 1e3), "%.4f" % (run["m"] * 1e3),
                            "%.4f" % (max(mo, run["m"]) * 1e3), "%.4f" % (e * 1e3), "%.3f" % predicted,
                            "%.3f" % r["wall"], "%.2f" % error_bare, "%.2f" % error])
    print("# target: every run within %g%%: %s (worst %.1f%%; %.1f%% without the overheads)" % (
        TOLERANCE_PCT, "met" if worst <= TOLERANCE_PCT else "NOT met", worst, worst_bare))


def predict(out, models, cost):
    rows = []
    for name, model in models:
        c, size = model["c"], model["bytes"]
        e = cost[1] * size
        print("#\n# prediction, %s: speedup per epoch over S-SGD; c = %.3f ms per step (one worker alone), %d bytes,"
              " e = %.3f ms, alpha = %g us, k <= 8" % (name, c * 1e3, size, e * 1e3, ALPHA * 1e6))
        print("# %7s %6s %9s %3s %10s %10s %10s" % ("workers", "Gbit/s", "m", "k", "CoCoD-SGD", "Local-SGD", "Pipe-SGD"))
        print("# %7s %6s %9s %3s %10s %10s %10s" % ("", "", "ms", "", "x", "x", "x"))
        for gbit in (1, 10, 100):
            beta = gbit * 1e9 / 8
            n = 8
            while n <= 1024:
                m = 2 * (n - 1) * ALPHA + 2 * (n - 1) / n * size / beta
                k = auto_k(c, m)
                s = per_step("S-SGD", c, m, 1)
                sp = {a: s / per_step(a, c, m, k, e) for a in NAMES}
                rows.append((name, n, gbit, m, k, sp))
                print("  %7d %6d %9.3f %3d %10.2f %10.2f %10.2f" % (n, gbit, m * 1e3, k, sp["CoCoD-SGD"], sp["Local-SGD"],
                                                                   sp["Pipe-SGD"]))
                n *= 2
    scale = os.path.join(out, "simulate_scale.csv")
    with open(scale, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "workers", "gbit", "m_ms", "k", "cocod_speedup", "local_speedup", "pipe_speedup"])
        for name, n, gbit, m, k, sp in rows:
            w.writerow([name, n, gbit, "%.4f" % (m * 1e3), k, "%.3f" % sp["CoCoD-SGD"], "%.3f" % sp["Local-SGD"],
                        "%.3f" % sp["Pipe-SGD"]])
    if shutil.which("gnuplot") and rows:
        png = os.path.join(out, "simulate_scale.png")
        plot = ", ".join(
            "'%s' using 2:(strcol(1) eq '%s' && $3 == %d ? $6 : NaN) with linespoints title 'CoCoD-SGD, %s, %d Gbit/s'"
            % (scale, name, g, name, g) for name, _ in models for g in (1, 10, 100))
        script = """set terminal pngcairo size 900,560 font ",11"
set output "%s"
set datafile separator ","
set logscale x 2
set key top left
set grid
set title "Predicted speedup per epoch of CoCoD-SGD over S-SGD (round-time model: measured c and e, alpha = 50 us)"
set xlabel "workers"
set ylabel "speedup over S-SGD"
plot %s
""" % (png, plot)
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
        print("# plot: %s" % png)
    return scale


# Groups: a cluster of NODES nodes of G GPUs each, one NIC per node of the inter-node bandwidth,
# and a fast link inside a node (NVLink-like: INNER_GBYTES GB/s per direction, INNER_ALPHA per
# message).
NODES, G = 4, 8
INNER_GBYTES, INNER_ALPHA = 150.0, 5e-6


def flat_exchange(size, gbit, ranks, per_node):
    """cocod's rank-ordered all-reduce (a reduce-scatter by all-to-all, then an all-gather) over
    `ranks` ranks, `per_node` on each node sharing its NIC: in each phase every rank sends the
    (ranks - per_node)/ranks of the model that other nodes own, so a node's NIC carries per_node
    times that."""
    beta = gbit * 1e9 / 8
    crossing = 2 * per_node * size * (ranks - per_node) / ranks
    return 2 * (ranks - 1) * ALPHA + crossing / beta


def predict_groups(out, models, cost):
    """4 nodes x 8 GPUs: flat CoCoD-SGD over 32 workers against groups of 8 (S-SGD inside a
    node every step, CoCoD-SGD across the 4 nodes with the exchange sharded over the members),
    per epoch, both over S-SGD over the 32 ranks."""
    rows = []
    P = NODES * G
    for name, model in models:
        c, size = model["c"], model["bytes"]
        e = cost[1] * size
        m_in = 2 * (G - 1) * INNER_ALPHA + 2 * (G - 1) / G * size / (INNER_GBYTES * 1e9)
        print("#\n# groups, %s: %d nodes x %d GPUs, one NIC per node; c = %.3f ms, %d bytes; inside a node %g GB/s, "
              "%g us (the per-step all-reduce m_in = %.3f ms)" % (name, NODES, G, c * 1e3, size, INNER_GBYTES, INNER_ALPHA * 1e6,
                                                                 m_in * 1e3))
        print("# flat: %d workers, the rank-ordered all-reduce over every rank; groups: %d workers of %d ranks, "
              "member m exchanges slice m of %d with member m of every node" % (P, NODES, G, G))
        print("# %6s %9s %3s %9s %3s %10s %10s %8s" % ("Gbit/s", "m_flat", "k", "m_groups", "k", "flat_cocod", "groups", "groups/"))
        print("# %6s %9s %3s %9s %3s %10s %10s %8s" % ("", "ms", "", "ms", "", "x", "x", "flat"))
        for gbit in (1, 10, 25, 100):
            m_flat = flat_exchange(size, gbit, P, G)
            # member m of each node: its slice's rank-ordered all-reduce over the nodes; the G
            # members share the NIC, so the node carries G slices at once
            m_out = 2 * (NODES - 1) * ALPHA + G * (2 * (size / G) * (NODES - 1) / NODES) / (gbit * 1e9 / 8)
            k_flat, k_groups = auto_k(c, m_flat), auto_k(c + m_in, m_out)
            s = per_step("S-SGD", c, m_flat, 1)
            flat = s / per_step("CoCoD-SGD", c, m_flat, k_flat, e)
            groups = s / per_step("CoCoD-SGD", c + m_in, m_out, k_groups, e)
            rows.append((name, gbit, m_flat, k_flat, m_out, k_groups, flat, groups))
            print("  %6d %9.3f %3d %9.3f %3d %10.2f %10.2f %8.2f" % (gbit, m_flat * 1e3, k_flat, m_out * 1e3, k_groups, flat,
                                                                    groups, groups / flat))
    path = os.path.join(out, "simulate_groups.csv")
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["model", "gbit", "m_flat_ms", "k_flat", "m_groups_ms", "k_groups", "flat_cocod_speedup", "groups_speedup"])
        for r in rows:
            w.writerow([r[0], r[1], "%.4f" % (r[2] * 1e3), r[3], "%.4f" % (r[4] * 1e3), r[5], "%.3f" % r[6], "%.3f" % r[7]])
    return path


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "results/benchmarks"
    runs, models = {}, []
    for f in sorted(os.listdir(out)):
        g = re.fullmatch(r"tta_(threads|mpi)_([0-9]+)\.txt", f)
        if g:
            runs[(g.group(1), int(g.group(2)))] = parse(os.path.join(out, f))
        g = re.fullmatch(r"simulate_model_(\w+)\.txt", f)
        if g:
            text = open(os.path.join(out, f)).read()
            c = re.search(r"one local step c = ([0-9.]+) ms", text)
            b = re.search(r"\(([0-9]+) bytes per all-reduce\)", text)
            if not (c and b):
                sys.exit("simulate.py: %s has no 'one local step c' or 'bytes per all-reduce'" % f)
            models.append((g.group(1), {"c": float(c.group(1)) / 1e3, "bytes": int(b.group(1))}))
    if not runs and not models:
        sys.exit("simulate.py: no tta_*.txt and no simulate_model_*.txt in %s (benchmarks/run tta simulate)" % out)
    cost = round_end_cost(out)
    written = []
    if runs:
        validate(out, runs, cost, os.cpu_count() or 1)
        written.append(os.path.join(out, "simulate_validation.csv"))
    else:  # the predictions need only the models' and the round end's measurements
        print("# validation skipped: no tta_*.txt in %s (benchmarks/run tta writes them)" % out)
    written += [predict(out, models, cost), predict_groups(out, models, cost)]
    print("# csv: %s" % ", ".join(written))
    print("# simulate: OK")


if __name__ == "__main__":
    main()
