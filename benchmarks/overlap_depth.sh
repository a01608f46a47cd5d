#!/usr/bin/env bash
# CoCoD-SGD's overlap depth tau at long periods: the Fashion-MNIST MLP, 4 workers over
# comm::Throttled (latency 50 us), the demo's settings (batch 64 per worker, lr 0.02 cosine,
# momentum 0.9, 12 epochs), a fixed period k, and in one run per (link, k), side by side:
#   Local-SGD, CoCoD-SGD (tau = k), CoCoD-SGD+d8, +d4, +d2 (the snapshot after step k - tau) and
#   +dauto (tau: the fewest steps whose compute hides one all-reduce, as measured)
# for k = 16 and 32 at 1 Gbit/s and 100 Mbit/s. Each curve point is the consensus (the weighted
# average of the workers' models), evaluated after the run. Prints per row the wall time to
# 86% and to TARGET test accuracy, the epochs to TARGET, the final accuracy, the wall time and the
# share of time waited, and the time to TARGET against Local-SGD's and CoCoD-SGD's of the same run.
#
#   benchmarks/overlap_depth.sh [all|smoke] [OUT_DIR]   (TARGET=0.87, EPOCHS=12, BUILD=build/bench)
#   smoke: k = 16 at 100 Mbit/s for a fifth of an epoch (the test suite's)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
out="${2:-$COCOD_ROOT/results/benchmarks}"
epochs="${EPOCHS:-12}"
target="${TARGET:-0.87}"
exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
bench_require overlap_depth.sh "$exe"
mkdir -p "$out"
rows="local,cocod,cocod+d8,cocod+d4,cocod+d2,cocod+dauto"
common=(--no-progress --workers 4 --batch 64 --lr 0.02 --lr-schedule cosine --momentum 0.9 --latency 50
        --curve-every 0.5 --curve-of consensus --algo "$rows" --brief)
case "$which" in
  smoke) runs=("100mbit:0.1:16"); epochs=0.2 ;;
  all) runs=("1gbit:1:16" "1gbit:1:32" "100mbit:0.1:16" "100mbit:0.1:32") ;;
  *) echo "benchmarks/overlap_depth.sh: unknown part '$which' (all, smoke)" >&2; exit 2 ;;
esac

echo "# overlap depth, Fashion-MNIST MLP, 4 workers, $epochs epochs; $(date -u +%Y-%m-%d), $(nproc) cores"
printf "# %-8s %3s %-14s %7s %7s %7s %8s %7s %7s %9s %9s\n" link k algorithm to_86% "to_$target" epochs final wall waited "vs local" "vs cocod"
printf "# %-8s %3s %-14s %7s %7s %7s %8s %7s %7s %9s %9s\n" "" "" "" s s "" "" s "" "" ""
for run in "${runs[@]}"; do
  IFS=: read -r name gbit k <<<"$run"
  curve="$out/overlap_depth_curve_${name}_k$k.csv" log="$out/overlap_depth_${name}_k$k.txt"
  "$exe" "${common[@]}" --bandwidth "$gbit" --period "$k" --max-period "$k" --epochs "$epochs" --curve "$curve" >"$log"
  # the log's table gives the wall time and the share waited; the curve the times to accuracy
  awk -v link="$name" -v k="$k" -v target="$target" '
    FNR == 1 { file++ }
    file == 1 && /^  [A-Za-z]/ { wall[$1] = $5; waited[$1] = $8 }
    file == 2 && FNR > 1 {  # algorithm,sampling,epoch,wall_s,test_accuracy
      split($0, f, ","); a = f[1]
      if (!(a in seen)) { seen[a] = 1; order[++n] = a }
      if (f[5] >= 0.86 && !(a in t86)) t86[a] = f[4]
      if (f[5] >= target && !(a in tt)) { tt[a] = f[4]; te[a] = f[3] }
      final[a] = f[5]
    }
    function ratio(a, b) { return ((a in tt) && (b in tt)) ? sprintf("%.2fx", tt[a] / tt[b]) : "-" }
    END {
      for (i = 1; i <= n; i++) {
        a = order[i]
        s86 = (a in t86) ? sprintf("%.2f", t86[a]) : "-"
        st = (a in tt) ? sprintf("%.2f", tt[a]) : "-"
        se = (a in te) ? sprintf("%.2f", te[a]) : "-"
        printf "  %-8s %3d %-14s %7s %7s %7s %8.4f %7.2f %7s %9s %9s\n", link, k, a, s86, st, se, final[a], wall[a],
               waited[a], ratio("Local-SGD", a), ratio("CoCoD-SGD", a)
      }
    }' "$log" "$curve"
done
echo "# vs local, vs cocod: the row's time to $target against Local-SGD's and CoCoD-SGD's of the same run (> 1: sooner)"
echo "# curves: $out/overlap_depth_curve_*.csv; logs: $out/overlap_depth_*.txt"
echo "# overlap depth: OK (every run completed)"
