#!/usr/bin/python3
"""The groups benchmark's table, from the files benchmarks/groups.sh wrote.

  benchmarks/groups_table.py RESULTS_DIR

For each algorithm, 4 flat workers (groups_flat.txt, groups_curve_flat.csv) against 2 groups of
2 ranks (groups_groups.txt, groups_curve_groups.csv) on the same throttled link: the wall time,
the time to TARGET test accuracy (the first curve point at or above it; the curve is the
workers' weighted average model), the final accuracy, and the megabytes each rank sent over the
slow link per epoch (the example's MB/ep: rank 0's bytes; with groups its slice, half its group's
exchange). Writes groups.csv.
"""
import csv
import os
import sys

from example_output import curves, first_reaching, table

TARGET = float(os.environ.get("TARGET", "0.86"))


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    out = sys.argv[1]
    layouts = {}
    for layout in ("flat", "groups"):
        path = os.path.join(out, "groups_%s.txt" % layout)
        if not os.path.exists(path):
            sys.exit("groups_table.py: no %s (benchmarks/groups.sh writes it)" % path)
        curve = curves(os.path.join(out, "groups_curve_%s.csv" % layout), "test_accuracy")
        hits = {name: first_reaching(points, TARGET) for name, points in curve.items()}
        layouts[layout] = (table(path, ["accuracy"]), {name: hit[1] for name, hit in hits.items() if hit})
    flat, groups = layouts["flat"], layouts["groups"]
    print("# groups: 4 ranks as 4 flat workers or as 2 groups of 2 on the same throttled link; time to test accuracy %g" % TARGET)
    print("# MB/ep = megabytes each rank sent over the throttled link per epoch; sooner = flat's time to target / groups'")
    print("# %-16s %3s %9s %9s %8s %8s %8s %8s %8s %8s %7s" % ("algorithm", "k", "flat_s", "groups_s", "flat_to", "grp_to",
                                                              "flat_acc", "grp_acc", "flat_MB", "grp_MB", "sooner"))
    rows = []
    for name, f in flat[0].items():
        g = groups[0].get(name)
        if not g:
            continue
        ft, gt = flat[1].get(name), groups[1].get(name)
        show = lambda t: "%.1f" % t if t is not None else "not met"
        sooner = "%.2f" % (ft / gt) if ft and gt else "-"
        print("  %-16s %3d %9.1f %9.1f %8s %8s %8.4f %8.4f %8.2f %8.2f %7s" % (
            name, f["k"], f["wall"], g["wall"], show(ft), show(gt), f["accuracy"], g["accuracy"], f["mb"], g["mb"], sooner))
        rows.append([name, f["k"], f["wall"], g["wall"], ft or "", gt or "", f["accuracy"], g["accuracy"], f["mb"], g["mb"]])
    with open(os.path.join(out, "groups.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["algorithm", "k", "flat_wall_s", "groups_wall_s", "flat_to_target_s", "groups_to_target_s",
                    "flat_accuracy", "groups_accuracy", "flat_mb_per_epoch", "groups_mb_per_epoch"])
        w.writerows(rows)
    if not rows:
        print("groups: FAILED (no algorithm in both tables)")
        sys.exit(1)
    print("# groups: OK")


if __name__ == "__main__":
    main()
