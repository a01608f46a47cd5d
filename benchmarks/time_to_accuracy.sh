#!/usr/bin/env bash
# Time to a target test accuracy: the Fashion-MNIST MLP (the demo's settings: 12 epochs, batch 64
# per worker, lr 0.02 cosine, momentum 0.9, period auto) with every algorithm, on
#   threads  2 and 4 in-process workers over comm::Throttled at 1 Gbit/s, 50 us
#   mpi      2 and 4 MPI ranks over a tbf-shaped TCP loopback at 1 Gbit/s (needs root)
# Each run writes its accuracy-against-wall-time curve (every half epoch the workers' weighted
# average, or rank 0's model with CURVE_OF=rank0, evaluated off the clock); the time to target
# is the first point at or above it.
#
#   benchmarks/time_to_accuracy.sh [threads|mpi|all] [OUT_DIR]   (TARGET=0.88, BUILD=build/bench,
#                                                                   CURVE_OF=consensus|rank0)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
out="${2:-$COCOD_ROOT/results/benchmarks}"
target="${TARGET:-0.88}"
exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
bench_require time_to_accuracy.sh "$exe"
mkdir -p "$out"
csv="$out/time_to_accuracy.csv"
echo "link,workers,algorithm,time_to_target_s,final_accuracy,wall_s,speedup_vs_ssgd" >"$csv"

# report LINK WORKERS CURVE: one row per algorithm from the curve file.
report() {
  awk -F, -v link="$1" -v w="$2" -v target="$target" -v csv="$csv" '
    NR > 1 {
      a = $1; if (!(a in seen)) { seen[a] = 1; order[++n] = a }
      if ($5 >= target && !(a in hit)) hit[a] = $4
      final[a] = $5; wall[a] = $4
    }
    END {
      for (i = 1; i <= n; i++) {
        a = order[i]; t = (a in hit) ? hit[a] : -1
        s = ("S-SGD" in hit && t > 0) ? sprintf("%.2f", hit["S-SGD"] / t) : "-"
        shown = (t > 0) ? sprintf("%.2f", t) : "not met"
        printf "  %-8s %7d %-10s %10s %9.4f %8.2f %8s\n", link, w, a, shown, final[a], wall[a], s
        printf "%s,%d,%s,%s,%.4f,%.2f,%s\n", link, w, a, (t > 0) ? t : "", final[a], wall[a], s >> csv
      }
    }' "$3"
}

echo "# time to ${target} test accuracy, Fashion-MNIST MLP, demo settings; $(date -u +%Y-%m-%d), $(nproc) cores"
printf "# %-8s %7s %-10s %10s %9s %8s %8s\n" link workers algorithm to_target final wall speedup
printf "# %-8s %7s %-10s %10s %9s %8s %8s\n" "" "" "" s "" s "vs S-SGD"
common=(--no-progress --period auto --curve-every 0.5 --curve-of "${CURVE_OF:-consensus}")
if [ "$which" = threads ] || [ "$which" = all ]; then
  for w in 2 4; do
    "$exe" --workers "$w" --bandwidth 1 --latency 50 --curve "$out/curve_threads_$w.csv" "${common[@]}" >"$out/tta_threads_$w.txt"
    report threads "$w" "$out/curve_threads_$w.csv"
  done
fi
if [ "$which" = mpi ] || [ "$which" = all ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "# mpi: skipped (the tbf-shaped link needs root)"
  else
    for w in 2 4; do
      shaped_mpiexec 1200 "$w" "$exe" --comm mpi --curve "$out/curve_mpi_$w.csv" "${common[@]}" >"$out/tta_mpi_$w.txt" 2>/dev/null
      report mpi "$w" "$out/curve_mpi_$w.csv"
    done
  fi
fi
echo "# csv: $csv (curves: $out/curve_*.csv)"
awk -F, 'NR > 1 && $3 == "CoCoD-SGD" && ($7 == "-" || $7 + 0 < 2) { bad = 1 } END { exit bad }' "$csv" &&
  echo "# target: CoCoD-SGD >= 2x faster than S-SGD to ${target} in every row: met" ||
  echo "# target: CoCoD-SGD >= 2x faster than S-SGD to ${target} in every row: NOT met"
echo "# time to accuracy: OK (every run completed)"
