#!/usr/bin/python3
"""The tables and verdicts of benchmarks/peers/race.sh, from the files its parts wrote in OUT_DIR:
race_MODEL_PART_runs.csv (one line per run: k, c, m, wall time, epochs, seconds communicating,
megabytes per epoch) and race_MODEL_PART_curve.csv (test accuracy against wall time, every point
the consensus). Parts that are missing are left out; the verdicts need their parts.

Verdicts, per link (a part named after its rate, joined with its sweep part RATE-sweep):
  1. cocod's best run reaches TARGET sooner than PyTorch's best by at least 0.9 / (1 - f), f the
     share of the communication in PyTorch's best run (the most that overlapping alone can win
     at equal epochs), and by at least 2x at 10 Mbit/s;
  2. CoCoD-SGD with the automatic depth at k = 8, 16 and 32 ends within 0.2 points of
     Local-SGD's final accuracy at the same k (Local-SGD from the accuracy part: its accuracy at
     a fixed k does not depend on the link);
and from the accuracy part:
  3. eager delayed DiLoCo within 0.2 points of blocking DiLoCo at every whole epoch, k = 8..32;
and from the outer-lr part, at each k:
  4. eager delayed DiLoCo at its best outer lr within 0.2 points of blocking DiLoCo at the end,
     and within 1 point at every whole epoch.

  race_table.py OUT_DIR [--target 0.86] [--target-cnn 0.88] [--workers 4]
"""
import argparse
import csv
import glob
import os
import sys
from statistics import median

POINTS = 0.002  # 0.2 points of accuracy


def load(out, model):
    parts = {}
    for path in sorted(glob.glob("%s/race_%s_*_runs.csv" % (out, model))):
        part = path[len("%s/race_%s_" % (out, model)):-len("_runs.csv")]
        curve_path = "%s/race_%s_%s_curve.csv" % (out, model, part)
        if not os.path.exists(curve_path):
            sys.exit("race_table.py: %s has no %s beside it (benchmarks/peers/race.sh writes both)" % (path, curve_path))
        with open(path) as f:
            runs = list(csv.DictReader(f))
        with open(curve_path) as f:
            curve = list(csv.DictReader(f))
        base = part[:-len("-sweep")] if part.endswith("-sweep") else part  # a link's sweep joins its part
        old_runs, old_curve = parts.get(base, ([], []))
        parts[base] = (old_runs + runs, old_curve + curve)
    return parts


def number(v):
    return None if v in (None, "", "-") else float(v)


def rows_of(runs, curve, target, steps_per_epoch):
    """Each run's figures: its curve's first point at or above target (wall time and epochs),
    its final accuracy, and its accuracy at every whole epoch."""
    rows = {}
    for r in runs:
        name = r["run"]
        points = [p for p in curve if p["run"] == name and p["rate"] == r["rate"]]
        if not points:
            sys.exit("race_table.py: %s at %s has no curve" % (name, r["rate"]))
        first = next((p for p in points if float(p["test_accuracy"]) >= target), None)
        wall, epochs = float(r["wall_s"]), float(r["epochs"])
        comm = number(r["comm_s"])
        by_epoch = {}
        # each whole epoch's point: the first at or after it, within a round (a curve point is
        # taken at the first round end after its mark); the final point stands for the last epoch
        lag = (int(r["k"]) if r["k"].isdigit() else 1) / steps_per_epoch + 1e-6
        for p in points:
            e = float(p["epoch"])
            whole = int(e + 1e-9)
            if whole >= 1 and e - whole <= lag and whole not in by_epoch:
                by_epoch[whole] = float(p["test_accuracy"])
        rows[name] = dict(k=r["k"], c=number(r["c_ms"]), m=number(r["m_ms"]), wall=wall, epochs=epochs,
                          step=1e3 * wall / epochs / steps_per_epoch, s_epoch=wall / epochs,
                          f=None if comm is None else comm / wall, mb=number(r["mb_per_epoch"]),
                          hit=float(first["wall_s"]) if first else None,
                          hit_epoch=float(first["epoch"]) if first else None,
                          final=float(points[-1]["test_accuracy"]), by_epoch=by_epoch)
    return rows


def print_rows(rows, target):
    print("# %-42s %5s %7s %8s %8s %7s %6s %9s %7s %7s" % (
        "run", "k", "c_ms", "m_ms", "step_ms", "s/ep", "f", "to_%.2f s" % target, "epochs", "final"))
    for name, v in rows.items():
        print("  %-42s %5s %7s %8s %8.2f %7.2f %6s %9s %7s %7.4f" % (
            name, v["k"], "-" if v["c"] is None else "%.2f" % v["c"], "-" if v["m"] is None else "%.1f" % v["m"],
            v["step"], v["s_epoch"], "-" if v["f"] is None else "%.3f" % v["f"],
            "not met" if v["hit"] is None else "%.1f" % v["hit"],
            "-" if v["hit_epoch"] is None else "%.2f" % v["hit_epoch"], v["final"]))


def soonest(rows, prefix):
    hits = [(v["hit"], n) for n, v in rows.items() if n.startswith(prefix) and v["hit"] is not None]
    return min(hits) if hits else None


def accuracy_part(rows, target, verdicts, settings=("",)):
    """The rules side by side at each k, and verdict 3 (the delay part: the same comparison for
    each outer setting in SETTINGS, explanatory, counted as no verdict)."""
    print("# epochs to %.2f and final accuracy at each period (no link limit; the same bits on every link)" % target)
    periods = sorted({int(v["k"]) for v in rows.values()})
    print("# %4s %-34s %8s %8s" % ("k", "rule", "epochs", "final"))
    for k in periods:
        for n, v in rows.items():
            if int(v["k"]) == k:
                print("  %4d %-34s %8s %8.4f" % (k, n.split(" ", 1)[1].rsplit(" k=", 1)[0],
                                                 "-" if v["hit_epoch"] is None else "%.2f" % v["hit_epoch"], v["final"]))
    for k, setting in ((k, x) for x in settings for k in periods):
        blocking, eager, naive = (rows.get("cocod %s%s k=%d" % (r, setting, k)) for r in
                                  ("Local-SGD+outer", "Delayed-DiLoCo", "Delayed-DiLoCo+delayed"))
        if not (blocking and eager):
            if not setting:
                print("# k=%d: blocking or eager delayed DiLoCo missing: NOT met" % k)
                verdicts.append(False)
            continue
        epochs = sorted(set(blocking["by_epoch"]) & set(eager["by_epoch"]))
        gaps = [blocking["by_epoch"][e] - eager["by_epoch"][e] for e in epochs]
        worst = max(gaps) if gaps else float("nan")
        met = bool(gaps) and worst <= POINTS + 1e-12
        naive_gaps = [blocking["by_epoch"][e] - naive["by_epoch"][e] for e in epochs if naive and e in naive["by_epoch"]]
        naive_gap = max(naive_gaps) if naive_gaps else None
        print("#   k=%d%s, accuracy at each epoch, blocking / eager / naive: %s" % (k, setting and " " + setting, "  ".join(
            "%d: %.3f/%.3f/%s" % (e, blocking["by_epoch"][e], eager["by_epoch"][e],
                                  "%.3f" % naive["by_epoch"][e] if naive and e in naive["by_epoch"] else "-")
            for e in epochs)))
        if setting:
            print("# k=%d, outer %s: eager delayed DiLoCo at most %.2f points below blocking DiLoCo at epochs %s (naive"
                  " delayed: %s)" % (k, setting, 100 * worst, ",".join(map(str, epochs)),
                                     "-" if naive_gap is None else "%.2f" % (100 * naive_gap)))
            continue
        print("# k=%d: eager delayed DiLoCo at most %.2f points below blocking DiLoCo at epochs %s (naive delayed: %s)"
              " (target <= 0.2: %s)" % (k, 100 * worst, ",".join(map(str, epochs)),
                                       "-" if naive_gap is None else "%.2f" % (100 * naive_gap), "met" if met else "NOT met"))
        verdicts.append(met)


def outer_lr_part(rows, verdicts):
    """Delayed DiLoCo at each outer lr against blocking DiLoCo at its own: the final accuracy and
    the worst gap at a whole epoch, and the verdict on the best eager setting at each k (within
    0.2 points at the end, 1 point at its worst epoch)."""
    print("# %4s %-12s %9s %9s %9s %9s" % ("k", "outer lr", "eager", "worst", "naive", "worst"))
    for k in sorted({int(v["k"]) for v in rows.values()}):
        blocking = rows.get("cocod Local-SGD+outer k=%d" % k)
        if not blocking:
            print("# k=%d: blocking DiLoCo missing: NOT met" % k)
            verdicts.append(False)
            continue
        print("  %4d %-12s %9.4f   (blocking DiLoCo)" % (k, "0.7", blocking["final"]))

        def gap(v):
            epochs = sorted(set(blocking["by_epoch"]) & set(v["by_epoch"]))
            return max(blocking["by_epoch"][e] - v["by_epoch"][e] for e in epochs) if epochs else float("nan")
        best = None
        eager = sorted((float(n.split("[lr=", 1)[1].split("]", 1)[0]), n) for n in rows
                       if n.startswith("cocod Delayed-DiLoCo[lr=") and n.endswith(" k=%d" % k))
        for _, n in eager:
            v = rows[n]
            lr = n.split("[lr=", 1)[1].split("]", 1)[0]
            naive = rows.get("cocod Delayed-DiLoCo+delayed[lr=%s] k=%d" % (lr, k))
            print("  %4d %-12s %9.4f %9.2f %9s %9s" % (
                k, lr, v["final"], 100 * gap(v), "-" if not naive else "%.4f" % naive["final"],
                "-" if not naive else "%.2f" % (100 * gap(naive))))
            if best is None or v["final"] > best[1]["final"]:
                best = (lr, v)
        if best is None:
            continue
        end, worst = 100 * (blocking["final"] - best[1]["final"]), 100 * gap(best[1])
        met = end <= 100 * POINTS + 1e-9 and worst <= 1.0 + 1e-9
        print("# k=%d: eager at outer lr %s ends %.2f points below blocking DiLoCo, at most %.2f below at a whole epoch"
              " (target <= 0.2 and <= 1: %s)" % (k, best[0], end, worst, "met" if met else "NOT met"))
        verdicts.append(met)


def link_part(rate, rows, local_final, target, verdicts):
    """The sweep of one link, the best on each side, verdicts 1 and 2."""
    print_rows(rows, target)
    py = soonest(rows, "PyTorch")
    co = soonest(rows, "cocod")
    for side, best in (("PyTorch", py), ("cocod", co)):
        if best:
            print("# %s's best to %.2f: %s, %.1f s" % (side, target, best[1].split(" ", 1)[1], best[0]))
        else:
            print("# %s: no run reached %.2f" % (side, target))
    def need_of(name):
        f = rows[name]["f"] or 0.0
        return f, max(0.9 / (1.0 - f), 2.0 if rate == "10mbit" else 0.0)
    if py and co:
        f, need = need_of(py[1])
        met = py[0] / co[0] >= need
        print("# target: cocod's best %.2fx sooner than PyTorch's best (f = %.3f: at least %.2fx): %s" % (
            py[0] / co[0], f, need, "met" if met else "NOT met"))
        verdicts.append(met)
    elif co and not any(n.startswith("PyTorch") for n in rows):
        print("# target: no PyTorch run at this link (its part, %s, is not there; no verdict)" % rate)
    elif co:  # no PyTorch run reached it: each one's whole run is a lower bound on its time
        bound = min((v["wall"], n) for n, v in rows.items() if n.startswith("PyTorch"))
        f, need = need_of(bound[1])
        met = bound[0] / co[0] >= need
        print("# target: cocod's best at least %.2fx sooner than PyTorch (whose shortest run, %s, ended at %.1f s"
              " without reaching it; f = %.3f: at least %.2fx): %s" % (
                  bound[0] / co[0], bound[1].split(" ", 1)[1], bound[0], f, need, "met" if met else "undecided"))
        verdicts.append(met)
    else:
        print("# target: NOT met (no cocod run reached %.2f)" % target)
        verdicts.append(False)
    for k in (8, 16, 32):
        auto = rows.get("cocod CoCoD-SGD+dauto k=%d" % k)
        if not auto:
            print("# k=%d: no CoCoD-SGD+dauto run at this link (no verdict)" % k)
            continue
        if k not in local_final:
            print("# k=%d: no Local-SGD in the accuracy part to compare CoCoD-SGD+dauto with (no verdict)" % k)
            continue
        gap = local_final[k] - auto["final"]
        met = gap <= POINTS + 1e-12
        print("# k=%d: CoCoD-SGD+dauto ends at %.4f, Local-SGD at %.4f: %+.2f points (target >= -0.2: %s)" % (
            k, auto["final"], local_final[k], -100 * gap, "met" if met else "NOT met"))
        verdicts.append(met)
    # the control: the same algorithm on both sides
    for ours, theirs in (("Local-SGD", "PostLocalSGD"), ("Local-SGD+outer", "DiLoCo")):
        for n, v in rows.items():
            if n.startswith("PyTorch %s k=" % theirs):
                k = n.rsplit("k=", 1)[1]
                mine = rows.get("cocod %s k=%s" % (ours, k))
                if mine:
                    print("# control, the same algorithm at k=%s: cocod %s final %.4f, PyTorch %s %.4f" % (
                        k, ours, mine["final"], theirs, v["final"]))


def compute_check(parts):
    """Compute per step, each side's medians over its runs' measurements (before each run)."""
    py = [v for runs, _ in parts.values() for r in runs if r["run"].startswith("PyTorch") for v in [number(r["c_ms"])] if v]
    co = sorted({(r["rate"], r["k"], r["c_ms"]) for runs, _ in parts.values() for r in runs if r["run"].startswith("cocod")})
    co = [float(c) for _, _, c in co if number(c)]
    if py and co:
        print("# compute per step, median over every run's measurement: cocod %.2f ms (%d runs), PyTorch %.2f ms (%d runs): %+.1f%%" % (
            median(co), len(co), median(py), len(py), 100 * (median(co) / median(py) - 1)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--target", type=float, default=0.86)
    p.add_argument("--target-cnn", type=float, default=0.88)
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args()
    steps_per_epoch = (60000 // args.workers) / 64  # Fashion-MNIST's shards, batch 64 per worker
    verdicts = []
    found = False
    for model, target in (("mlp", args.target), ("cnn", args.target_cnn)):
        parts = load(args.out, model)
        if not parts:
            continue
        found = True
        print("# race on identical compute (%s): cocod (MPI, C++ libtorch) vs PyTorch (gloo, Python), target %.2f" % (model, target))
        compute_check(parts)
        local_final = {}
        if "accuracy" in parts:
            rows = rows_of(*parts["accuracy"], target, steps_per_epoch)
            print("\n## accuracy")
            accuracy_part(rows, target, verdicts)
            local_final = {int(v["k"]): v["final"] for n, v in rows.items() if n.startswith("cocod Local-SGD k=")}
        if "delay" in parts:
            print("\n## delay: outer momentum 0.5 ([m=0.5]) and plain averaging, outer SGD lr 1 ([avg])")
            accuracy_part(rows_of(*parts["delay"], target, steps_per_epoch), target, verdicts, ("[m=0.5]", "[avg]"))
        if "outer-lr" in parts:
            print("\n## outer-lr: delayed DiLoCo's outer lr (Nesterov 0.9), final accuracy and worst gap in points")
            outer_lr_part(rows_of(*parts["outer-lr"], target, steps_per_epoch), verdicts)
        for part in parts:
            if part in ("accuracy", "delay", "outer-lr", "smoke"):
                continue
            print("\n## %s (%s)" % (part, model))
            rows = rows_of(*parts[part], target, steps_per_epoch)
            finals = dict(local_final)  # a Local-SGD of the part's own replaces the accuracy part's
            finals.update({int(v["k"]): v["final"] for n, v in rows.items() if n.startswith("cocod Local-SGD k=")})
            link_part(part, rows, finals, target, verdicts)
        if "smoke" in parts:
            print("\n## smoke")
            print_rows(rows_of(*parts["smoke"], target, steps_per_epoch), target)
    if not found:
        sys.exit("race_table.py: no race_*_runs.csv in %s (benchmarks/peers/race.sh writes them)" % args.out)
    if not verdicts:
        print("# race: no verdict (the parts that give them are not in %s)" % args.out)
    else:
        print("# race: %s" % ("every verdict met" if all(verdicts) else "a verdict NOT met (see above)"))


if __name__ == "__main__":
    main()
