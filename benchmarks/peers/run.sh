#!/usr/bin/env bash
# cocod against what users would pick instead, PyTorch 1.13 (Debian's python3-torch, CPU, gloo,
# one thread per process), 4 workers on a tbf-shaped loopback, in two parts:
# 1. the race on identical compute (benchmarks/peers/race.sh): cocod driving the same libtorch
#    MLP from C++ against PyTorch's PostLocalSGD, DiLoCo and DDP, in parts (RACE_PARTS, default
#    all: accuracy delay 1gbit 100mbit 10mbit cnn, about 4 hours here); skipped when the libtorch
#    example is not built;
# 2. cocod's own Eigen MLP against PyTorch on the same data order, batch sizes, learning rate and
#    schedule at 1 Gbit/s: what a user gets, where most of the gap is compute.
# Time per epoch and time to TARGET accuracy.
#
#   benchmarks/peers/run.sh [OUT_DIR]      (root; BUILD=build/bench, WORKERS=4, TARGET=0.88 for
#                                           part 2; PARTS="race eigen", RACE_PARTS="all",
#                                           CURVE_OF=consensus|rank0)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_help "$0" "${1:-}"
out="${1:-$COCOD_ROOT/results/benchmarks}"
workers="${WORKERS:-4}"
target="${TARGET:-0.88}"
exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
[ "$(id -u)" -eq 0 ] || { echo "# peers: skipped (the tbf-shaped link needs root)"; exit 0; }
ensure_packages python3-torch python3-numpy
mkdir -p "$out"
parts="${PARTS:-race eigen}"
if [[ " $parts " == *" race "* ]]; then
  if [ -x "$BENCH_BUILD/examples/torch_fashion_mnist/torch_fashion_mnist" ]; then
    # shellcheck disable=SC2086  # the parts are words
    "$(dirname "${BASH_SOURCE[0]}")/race.sh" ${RACE_PARTS:-all} "$out"
  else
    echo "# race: skipped (no $BENCH_BUILD/examples/torch_fashion_mnist: the build found no libtorch)"
  fi
fi
[[ " $parts " == *" eigen "* ]] || exit 0
bench_require peers/run.sh "$exe"
curve="$out/peers_curve.csv"
rm -f "$curve"

echo "# cocod vs PyTorch: $workers workers, Fashion-MNIST MLP, tbf 1 Gbit/s loopback; $(date -u +%Y-%m-%d), $(nproc) cores"
shaped_mpiexec 1800 "$workers" "$exe" --comm mpi --algo cocod,local,ssgd --period auto --no-progress --curve "$curve" \
  --curve-every 0.5 --curve-of "${CURVE_OF:-consensus}" >"$out/peers_cocod.txt" 2>/dev/null
k=$(awk '$1 == "Local-SGD" { print $4 }' "$out/peers_cocod.txt")
echo "# cocod's Local-SGD chose k = $k; PyTorch's PostLocalSGD uses the same period"
for algo in ddp postlocal; do
  shaped 1800 /usr/bin/python3 "$COCOD_ROOT/benchmarks/peers/torch_mlp.py" --algo "$algo" \
    --workers "$workers" --period "$k" --curve "$curve" 2>&1 | grep -v "^# shaped link"
done

awk -F, -v target="$target" -v csv="$out/peers.csv" '
  NR > 1 && $1 != "algorithm" {
    a = $1; if (!(a in seen)) { seen[a] = 1; order[++n] = a }
    if ($5 >= target && !(a in hit)) hit[a] = $4
    final[a] = $5; wall[a] = $4; epochs[a] = $3
  }
  END {
    printf "# %-22s %9s %10s %9s %10s\n", "run", "s/epoch", "to_target", "final", "vs_torch"
    printf "# %-22s %9s %10s %9s %10s\n", "", "s", "s", "", "PostLocal"
    print "run,s_per_epoch,time_to_target_s,final_accuracy,speedup_vs_postlocal" > csv
    ref = hit["PyTorch PostLocalSGD"]
    for (i = 1; i <= n; i++) {
      a = order[i]; t = (a in hit) ? hit[a] : -1
      s = (ref > 0 && t > 0) ? sprintf("%.2f", ref / t) : "-"
      shown = (t > 0) ? sprintf("%.2f", t) : "not met"
      printf "  %-22s %9.2f %10s %9.4f %10s\n", a, wall[a] / epochs[a], shown, final[a], s
      printf "%s,%.3f,%s,%.4f,%s\n", a, wall[a] / epochs[a], (t > 0) ? t : "", final[a], s >> csv
    }
    if (!(ref > 0 && hit["CoCoD-SGD"] > 0 && ref / hit["CoCoD-SGD"] >= 2)) bad = 1
    printf "# target: cocod CoCoD-SGD >= 2x faster to %s than PyTorch PostLocalSGD: %s\n", target, bad ? "NOT met" : "met"
  }' "$curve"
echo "# csv: $out/peers.csv, curves: $curve"
echo "# peers: OK (every run completed)"
