#!/usr/bin/python3
"""benchmarks/simulate.py's round-time model on numbers whose answers are worked out by hand:
100 steps, c = 10 ms, m = 20 ms, k = 4, e = 1 ms, an all-reduce under compute m_o = 40 ms, overlap
depths 0 to 9.

  simulate_check.py SOURCE_DIR
"""
import importlib.util
import sys

spec = importlib.util.spec_from_file_location("simulate", sys.argv[1] + "/benchmarks/simulate.py")
sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sim)

failures = 0


def expect(what, got, want):
    global failures
    ok = abs(got - want) <= 1e-9 * max(1.0, abs(want))
    print("%-48s %10.6f  %s" % (what, got, "ok" if ok else "FAILED: want %.6f" % want))
    failures += not ok


one = {"k": 1, "steps": 100, "kc": 0.010}
four = {"k": 4, "steps": 100, "kc": 0.040}
m, e, mo = 0.020, 0.001, 0.040
# S-SGD: 100 (c + m)
expect("S-SGD", sim.wall_time("S-SGD", one, m, e, mo), 100 * 0.030)
# Local-SGD: 25 rounds of (k c + m + e), then the consensus m + e
expect("Local-SGD", sim.wall_time("Local-SGD", four, m, e, mo), 25 * (0.040 + 0.020 + 0.001) + 0.021)
# CoCoD-SGD: 25 rounds of (max(k c, m_o) + e), then the consensus; with m_o = 50 ms the round
# waits for the all-reduce
expect("CoCoD-SGD", sim.wall_time("CoCoD-SGD", four, m, e, mo), 25 * (0.040 + 0.001) + 0.021)
expect("CoCoD-SGD, m_o = 50 ms", sim.wall_time("CoCoD-SGD", four, m, e, 0.050), 25 * (0.050 + 0.001) + 0.021)
# without the overheads: 25 max(k c, m)
expect("CoCoD-SGD, bare", sim.wall_time("CoCoD-SGD", four, m), 25 * 0.040)
# CoCoD-SGD at overlap depth tau = 1: 25 rounds of ((k - 1) c + max(c, m_o) + e) = 30 + 40 + 1 ms;
# tau = 3 hides m_o = 40 ms only partly (30 ms): 10 + 40 + 1; tau >= k is the whole round
expect("CoCoD-SGD, depth 1", sim.wall_time("CoCoD-SGD", four, m, e, mo, 1), 25 * (0.030 + 0.040 + 0.001) + 0.021)
expect("CoCoD-SGD, depth 3", sim.wall_time("CoCoD-SGD", four, m, e, mo, 3), 25 * (0.010 + 0.040 + 0.001) + 0.021)
expect("CoCoD-SGD, depth 9 = the whole round", sim.wall_time("CoCoD-SGD", four, m, e, mo, 9),
       sim.wall_time("CoCoD-SGD", four, m, e, mo))
# bare, depth 2 with m = 20 ms = 2 c: hidden, 25 k c; depth 0: Local-SGD's k c + m
expect("CoCoD-SGD, bare, depth 2", sim.wall_time("CoCoD-SGD", four, m, tau=2), 25 * 0.040)
expect("CoCoD-SGD, bare, depth 0", sim.wall_time("CoCoD-SGD", four, m, tau=0), 25 * 0.060)
# Pipe-SGD: g = 2, each step max(c, m + c (1 - 1/g)) = 25 ms, then the last all-reduce
expect("Pipe-SGD", sim.wall_time("Pipe-SGD", one, m, e, mo), 100 * 0.025 + 0.020)
expect("Pipe-SGD, bare", sim.wall_time("Pipe-SGD", one, m), 100 * 0.020)
# the prediction's per step: CoCoD-SGD (max(k c, m) + e) / k, Local-SGD c + (m + e) / k
expect("per step, CoCoD-SGD", sim.per_step("CoCoD-SGD", 0.010, 0.020, 4, e), (0.040 + 0.001) / 4)
expect("per step, Local-SGD", sim.per_step("Local-SGD", 0.010, 0.020, 4, e), 0.010 + 0.021 / 4)
expect("per step, CoCoD-SGD depth 1", sim.per_step("CoCoD-SGD", 0.010, 0.020, 4, e, 1), (0.030 + 0.020 + 0.001) / 4)
# --overlap-depth auto's tau: the fewest steps that hide m, at most k
expect("auto tau, m = 2.5 c, k = 16", sim.auto_tau(0.010, 0.025, 16), 3)
expect("auto tau, m = 20 c, k = 16", sim.auto_tau(0.010, 0.200, 16), 16)
# --period auto's k: the smallest with k c >= m, at most 8
expect("auto k, m = 2.5 c", sim.auto_k(0.010, 0.025), 3)
expect("auto k, capped", sim.auto_k(0.010, 0.500), 8)
print("simulate model: %s" % ("OK" if not failures else "FAILED (%d)" % failures))
sys.exit(1 if failures else 0)
