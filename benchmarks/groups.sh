#!/usr/bin/env bash
# Groups of ranks against flat workers on the same slow link: the Fashion-MNIST MLP on 4 ranks
# (threads of one process), either 4 flat workers of the algorithm over a throttled link
# (100 Mbit/s, 50 us), or 2 groups of 2 ranks (--group-size 2): inside a group the ranks average
# their gradients every step over a fast in-process link; between the groups the algorithm runs
# over the same throttled link, each rank exchanging half the model. The same k, batch, learning
# rate and epochs on both sides; S-SGD, Local-SGD, CoCoD-SGD and CoCoD-SGD+outer.
# benchmarks/groups_table.py prints the time to TARGET test accuracy (the workers' weighted
# average model, every half epoch), the final accuracy and the megabytes each rank sent over the
# slow link per epoch.
#
#   benchmarks/groups.sh [all|smoke] [OUT_DIR]   (BUILD=build/bench, EPOCHS=6, PERIOD=8, GBIT=0.1,
#                                                 TARGET=0.86)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
out="${2:-$COCOD_ROOT/results/benchmarks}"
exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
bench_require groups.sh "$exe"
mkdir -p "$out"
case "$which" in
  all) epochs="${EPOCHS:-6}" algos="ssgd,local,cocod,cocod+outer" ;;
  smoke) epochs=0.2 algos="local,cocod" ;;
  *) echo "benchmarks/groups.sh: unknown part '$which' (all, smoke)" >&2; exit 2 ;;
esac
common=(--workers 4 --no-progress --batch 64 --lr 0.02 --lr-schedule cosine --momentum 0.9 --period "${PERIOD:-8}"
        --bandwidth "${GBIT:-0.1}" --latency 50 --curve-every 0.5 --algo "$algos" --epochs "$epochs")
for layout in flat groups; do
  flags=()
  [ "$layout" = flat ] || flags=(--group-size 2)
  echo "# groups benchmark, $layout: $algos for $epochs epochs ($(date -u +%H:%M:%S))"
  "$exe" "${common[@]}" "${flags[@]}" --curve "$out/groups_curve_$layout.csv" >"$out/groups_$layout.txt"
done
/usr/bin/python3 "$COCOD_ROOT/benchmarks/groups_table.py" "$out"
