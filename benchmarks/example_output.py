"""Reading what the examples write, for the benchmarks' table scripts: the rows of an example's
full table and the points of its curve CSV."""
import csv
import os

# the example's full table: these columns, then the example's metrics (one or more)
COLUMNS = ["steps", "epochs", "k", "m0", "round_ms", "kc_ms", "comm_ms", "wait_ms", "model_ms", "ratio", "waited_s",
           "wall", "mb", "speedup"]


def table(path, metrics):
    """Rows of the example's full table in `path`: algorithm -> its columns (speedup as text,
    "-" where the table has none) and its `metrics` (names, in order). Empty when there is no file."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        f = line.split()
        if not line.startswith("  ") or len(f) != 1 + len(COLUMNS) + len(metrics):
            continue
        try:
            row = {c: (int(v) if c in ("steps", "k", "m0") else v if c == "speedup" else float(v))
                   for c, v in zip(COLUMNS, f[1:])}
            row.update({m: float(v) for m, v in zip(metrics, f[1 + len(COLUMNS):])})
        except ValueError:
            continue
        rows[f[0]] = row
    return rows


def curves(path, metric):
    """The curve CSV in `path`: algorithm -> [(epoch, wall_s, metric)]. Empty when there is no file."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for r in csv.DictReader(fh):
            out.setdefault(r["algorithm"], []).append((float(r["epoch"]), float(r["wall_s"]), float(r[metric])))
    return out


def first_reaching(points, target, lower=False):
    """(epoch, wall_s) of the first point at or above target (at or below it with lower), or None."""
    for epoch, wall, value in points:
        if (value <= target) if lower else (value >= target):
            return epoch, wall
    return None
