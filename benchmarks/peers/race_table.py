#!/usr/bin/python3
"""The tables and verdicts of benchmarks/peers/race.sh, from the files it wrote in OUT_DIR:
TAG_runs.csv (one line per run: c, m, wall time, epochs), TAG_curve.csv (test accuracy against
wall time) and TAG_best.csv (PostLocalSGD's best period per link rate).

  race_table.py OUT_DIR TAG TARGET [WORKERS]
"""
import csv
import os
import sys
from statistics import median


def load(out, tag):
    for part in ("runs", "curve", "best"):
        if not os.path.exists("%s/%s_%s.csv" % (out, tag, part)):
            sys.exit("race_table.py: no %s/%s_%s.csv (benchmarks/peers/race.sh writes it)" % (out, tag, part))
    with open("%s/%s_runs.csv" % (out, tag)) as f:
        runs = list(csv.DictReader(f))
    with open("%s/%s_curve.csv" % (out, tag)) as f:
        curve = list(csv.DictReader(f))
    with open("%s/%s_best.csv" % (out, tag)) as f:
        best = {r["rate"]: int(r["best_period"]) for r in csv.DictReader(f)}
    return runs, curve, best


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: race_table.py OUT_DIR TAG TARGET [WORKERS]")
    out, tag, target = sys.argv[1], sys.argv[2], float(sys.argv[3])
    workers = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    steps_per_epoch = (60000 // workers) / 64  # Fashion-MNIST's shards, batch 64 per worker
    runs, curve, best = load(out, tag)
    verdicts = []
    # 1. compute per step: each side measures it before every run (every worker at once, no
    # communication); single measurements on this shared machine vary by 10-20%, so the medians
    # one measurement per invocation: cocod's rows of one invocation share its rate, k and c
    measured_py = [float(r["c_ms"]) for r in runs if r["run"].startswith("PyTorch")]
    measured_co = [float(c) for _, _, c in {(r["rate"], r["run"].rsplit("k=", 1)[1], r["c_ms"])
                                            for r in runs if r["run"].startswith("cocod")}]
    if not measured_py or not measured_co:
        sys.exit("race_table.py: no %s run in %s/%s_runs.csv" % ("PyTorch" if not measured_py else "cocod", out, tag))
    c_py, c_co = median(measured_py), median(measured_co)
    ok = abs(c_co / c_py - 1) <= 0.10
    print("# compute per step, median over every run's measurement: cocod %.2f ms (%d runs), PyTorch %.2f ms (%d runs):"
          " %+.1f%%, %s" % (c_co, len(measured_co), c_py, len(measured_py), 100 * (c_co / c_py - 1),
                            "within 10%" if ok else "NOT within 10%"))
    verdicts.append(ok)
    in_py = [float(r["wall_s"]) / float(r["epochs"]) / steps_per_epoch * 1e3 - float(r["m_ms"]) / int(r["run"].rsplit("k=", 1)[1])
             for r in runs if r["run"].startswith("PyTorch PostLocalSGD") and r["m_ms"] not in ("", "-")]
    if in_py:
        print("# in the runs: PostLocalSGD's T - m/k, median %.2f ms (%s)" % (median(in_py), " ".join("%.1f" % v for v in in_py)))
    for rate in best:
        rows = {}
        for r in runs:
            if r["rate"] != rate:
                continue
            name = r["run"]
            first = next((p for p in curve
                          if p["run"] == name and p["rate"] == rate and float(p["test_accuracy"]) >= target), None)
            hit = float(first["wall_s"]) if first else None
            points = [float(p["test_accuracy"]) for p in curve if p["run"] == name and p["rate"] == rate]
            if not points:
                sys.exit("race_table.py: %s at %s has no curve in %s/%s_curve.csv" % (name, rate, out, tag))
            final = points[-1]
            s_epoch = float(r["wall_s"]) / float(r["epochs"])
            rows[name] = dict(c=float(r["c_ms"]), m=None if r["m_ms"] in ("", "-") else float(r["m_ms"]),
                              step=1e3 * s_epoch / steps_per_epoch, s_epoch=s_epoch, hit=hit, final=final,
                              hit_epoch=float(first["epoch"]) if first else None)
        kstar = best[rate]
        if "PyTorch PostLocalSGD k=%d" % kstar not in rows:
            sys.exit("race_table.py: no PostLocalSGD run at its best period k=%d at %s" % (kstar, rate))
        print("\n# %s: PostLocalSGD's best period k* = %d" % (rate, kstar))
        print("# %-30s %8s %8s %9s %8s %10s %7s %7s" % ("run", "c_ms", "m_ms", "step_ms", "s/epoch", "to_%.2f s" % target,
                                                        "epochs", "final"))
        for name, v in rows.items():
            print("  %-30s %8.2f %8s %9.2f %8.2f %10s %7s %7.4f" % (
                name, v["c"], "-" if v["m"] is None else "%.1f" % v["m"], v["step"], v["s_epoch"],
                "not met" if v["hit"] is None else "%.1f" % v["hit"],
                "-" if v["hit_epoch"] is None else "%.2f" % v["hit_epoch"], v["final"]))
        periods = sorted(int(n.rsplit("k=", 1)[1]) for n in rows if n.startswith("PyTorch PostLocalSGD k="))
        # 2. time per epoch at the same k against the round-time model's bound. PostLocalSGD's
        # step takes T = c + m/k (m: its run's gloo all-reduce), so its run gives c = T - m/k;
        # with that c and m, CoCoD-SGD's step would take max(c, m/k)
        print("# per epoch at the same k: PostLocalSGD / CoCoD-SGD against the bound T / max(c, m/k),")
        print("# T: PostLocalSGD's step, m: its all-reduce, c = T - m/k: its compute in the run")
        print("# %4s %8s %8s %8s %8s %8s %8s %9s" % ("k", "T_ms", "m_ms", "c_ms", "kc/m", "bound", "measured", "vs_bound"))
        for k in periods:
            py, co = rows["PyTorch PostLocalSGD k=%d" % k], rows.get("cocod CoCoD-SGD k=%d" % k)
            if not co:
                continue
            t, m = py["step"], py["m"]
            if not m:
                continue
            c = t - m / k
            bound = t / max(c, m / k)
            measured = py["s_epoch"] / co["s_epoch"]
            within = abs(measured / bound - 1) <= 0.10
            print("  %4d %8.2f %8.1f %8.2f %8.2f %8.2f %8.2f %+8.1f%% %s" % (
                k, t, m, c, k * c / m, bound, measured, 100 * (measured / bound - 1), "" if within else "(outside 10%)"))
            verdicts.append(within)
        # 3. time to target: CoCoD-SGD against PostLocalSGD at its best period
        pl = rows["PyTorch PostLocalSGD k=%d" % kstar]
        co = rows.get("cocod CoCoD-SGD k=%d" % kstar)
        if pl["hit"] and co and co["hit"]:
            kc_m = kstar * (pl["step"] - pl["m"] / kstar) / pl["m"]
            sooner = pl["hit"] / co["hit"]
            print("# to %.2f: PostLocalSGD k=%d %.1f s, CoCoD-SGD k=%d %.1f s: %.2fx (k*c/m = %.2f at k=%d)" % (
                target, kstar, pl["hit"], kstar, co["hit"], sooner, kc_m, kstar))
        else:
            print("# to %.2f: not reached by %s at k=%d" % (target, "PostLocalSGD" if not pl["hit"] else "CoCoD-SGD", kstar))
        soonest = min((v["hit"], n) for n, v in rows.items() if n.startswith("cocod CoCoD-SGD k=") and v["hit"]) \
            if any(n.startswith("cocod CoCoD-SGD k=") and v["hit"] for n, v in rows.items()) else None
        if soonest and pl["hit"]:
            met = pl["hit"] / soonest[0] >= 1.5
            print("# to %.2f: CoCoD-SGD at its soonest period (%s) %.1f s: %.2fx against PostLocalSGD's best"
                  " (target >= 1.5x: %s)" % (target, soonest[1].split(" ", 1)[1], soonest[0], pl["hit"] / soonest[0],
                                            "met" if met else "NOT met"))
            verdicts.append(met)
        else:
            print("# to %.2f: target >= 1.5x: NOT met (%s reached it)" % (
                target, "no CoCoD-SGD run" if pl["hit"] else "PostLocalSGD never"))
            verdicts.append(False)
        # Overlap-Local-SGD: the family's overlap without the stale round, at the same period
        ol = rows.get("cocod Overlap-Local-SGD k=%d" % kstar)
        if pl["hit"] and ol and ol["hit"]:
            print("# to %.2f: Overlap-Local-SGD k=%d %.1f s: %.2fx against PostLocalSGD k=%d" % (
                target, kstar, ol["hit"], pl["hit"] / ol["hit"], kstar))
        elif ol:
            print("# to %.2f: Overlap-Local-SGD k=%d did not reach it (final %.4f)" % (target, kstar, ol["final"]))
        # the control: cocod's Local-SGD is PostLocalSGD's algorithm
        lo = rows.get("cocod Local-SGD k=%d" % kstar)
        if lo:
            print("# control, the same algorithm: cocod Local-SGD k=%d %.2f s/epoch, final %.4f; PostLocalSGD %.2f s/epoch,"
                  " final %.4f" % (kstar, lo["s_epoch"], lo["final"], pl["s_epoch"], pl["final"]))
        # 4. S-SGD against DDP: how much of each step's all-reduce is hidden (each run's own c)
        for name, v in rows.items():
            if (name.startswith("PyTorch DDP") or name.startswith("cocod S-SGD")) and v["m"]:
                exposed = v["step"] - v["c"]
                print("# %s: %.1f ms/step = c %.1f + %.1f exposed of an all-reduce of %.1f ms: %.1f ms (%.0f%%) hidden" % (
                    name.split(" k=")[0], v["step"], v["c"], exposed, v["m"], v["m"] - exposed,
                    100 * (v["m"] - exposed) / v["m"]))
    print("# race: %s" % ("every verdict met" if all(verdicts) else "a verdict NOT met (see above)"))


if __name__ == "__main__":
    main()
