#!/usr/bin/python3
"""The language model benchmark's table and plot, from the files benchmarks/lm.sh wrote.

  benchmarks/lm_table.py RESULTS_DIR [--smoke]

Per link (lm_<link>.txt: the example's full table; lm_curve_<link>.csv: the validation loss of
the workers' weighted average model against wall time, the last point the final consensus):
each row's period k, megabytes sent per worker per epoch, wall time, final validation loss and
perplexity, the time to TARGET_LOSS (the first curve point at or below it), and its speedup to
it over S-SGD and over DiLoCo (Local-SGD+outer). At 10 Mbit/s S-SGD ran a short budget
(lm_10mbit_ssgd.txt): its time to the target is the epochs it needed at 1 Gbit/s times its
seconds per epoch there, marked "est". The rows of 10mbit_groups (2 groups of 2 ranks) are compared
with the flat rows at 10 Mbit/s (their vs_ssgd and vs_diloco: over the flat S-SGD and DiLoCo).
Writes lm.csv and lm_<link>.png (gnuplot, if present). With --smoke, fails unless every run's
validation loss ends below SMOKE_LEARNED.
"""
import csv
import os
import shutil
import subprocess
import sys

from example_output import curves, first_reaching, table

TARGET = float(os.environ.get("TARGET_LOSS", "2.6"))
LINKS = ["1gbit", "10mbit", "10mbit_groups"]
METRICS = ["val_loss", "perplexity"]
SMOKE_LEARNED = 4.5  # (ln 256 = 5.55: no learning)


def plot(out, link, path):
    if not shutil.which("gnuplot") or not os.path.exists(path):
        return
    names = list(curves(path, "val_loss"))
    series = ", ".join("'%s' using 4:(strcol(1) eq '%s' ? $5 : NaN) with linespoints title '%s'" % (path, n, n) for n in names)
    png = os.path.join(out, "lm_%s.png" % link)
    script = ('set terminal pngcairo size 900,560 font ",11" noenhanced\nset output "%s"\nset datafile separator ","\n'
              'set title "byte-level transformer on fortunes, 4 workers, %s"\nset xlabel "wall time (s)"\n'
              'set ylabel "validation loss (nats per byte)"\nset key top right\nset grid\nplot %s\n' % (png, link, series))
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    print("# plot: %s" % png)


def main():
    out = sys.argv[1]
    smoke = "--smoke" in sys.argv[2:]
    links = ["smoke"] if smoke else LINKS
    fast = curves(os.path.join(out, "lm_curve_1gbit.csv"), "val_loss")
    rows_csv = []
    flat = {}  # the flat rows' times at 10 Mbit/s, which the groups' rows are compared with
    print("# The language model (byte-level transformer, fortunes), 4 workers, AdamW inside; time to validation loss %g" % TARGET)
    print("# %-13s %-34s %3s %8s %8s %7s %10s %9s %8s %9s" % ("link", "algorithm", "k", "MB/ep", "wall_s", "loss",
                                                             "perplexity", "to_target", "vs_ssgd", "vs_diloco"))
    for link in links:
        rows = table(os.path.join(out, "lm_%s.txt" % link), METRICS)
        curve = curves(os.path.join(out, "lm_curve_%s.csv" % link), "val_loss")
        if not rows:
            continue
        times = {}
        for name in rows:
            hit = first_reaching(curve.get(name, []), TARGET, lower=True)
            times[name] = (hit[1], "") if hit else None
        if link != "1gbit" and "S-SGD" not in rows:  # S-SGD's short budget at this link
            budget = table(os.path.join(out, "lm_%s_ssgd.txt" % link), METRICS).get("S-SGD")
            hit = first_reaching(fast.get("S-SGD", []), TARGET, lower=True)
            if budget and hit:
                times["S-SGD"] = (hit[0] * budget["wall"] / budget["epochs"], "est")
                rows["S-SGD"] = dict(budget, val_loss=float("nan"), perplexity=float("nan"))
        for name, r in rows.items():
            t = times.get(name)
            def vs(other):
                o = (flat if link.endswith("groups") else times).get(other)
                return "%.2f" % (o[0] / t[0]) if t and o else "-"
            to = ("%.1f%s" % (t[0], " " + t[1] if t[1] else "")) if t else "not met"
            print("  %-13s %-34s %3d %8.2f %8.1f %7.4f %10.3f %9s %8s %9s" % (link, name, r["k"], r["mb"], r["wall"], r["val_loss"],
                                                                            r["perplexity"], to, vs("S-SGD"), vs("Local-SGD+outer")))
            rows_csv.append([link, name, r["k"], r["mb"], r["wall"], r["val_loss"], r["perplexity"], t[0] if t else ""])
        plot(out, link, os.path.join(out, "lm_curve_%s.csv" % link))
        if link == "10mbit":
            flat = times
    with open(os.path.join(out, "lm.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["link", "algorithm", "k", "mb_per_epoch", "wall_s", "val_loss", "perplexity", "to_target_s"])
        w.writerows(rows_csv)
    if not rows_csv:
        print("lm: FAILED (no table found in %s)" % out)
        sys.exit(1)
    # a model that guesses bytes uniformly has a loss of ln 256 = 5.55 nats: the smoke's few steps
    # must already have learned (about 4.0 after 9 steps), or the training is broken
    unlearned = [r[1] for r in rows_csv if smoke and not r[5] < SMOKE_LEARNED]
    if unlearned:
        print("lm: FAILED (validation loss not below %g after the smoke's steps: %s)" % (SMOKE_LEARNED, ", ".join(unlearned)))
        sys.exit(1)
    print("# lm: OK (every run completed%s)" % (", every loss below %g" % SMOKE_LEARNED if smoke else ""))


if __name__ == "__main__":
    main()
