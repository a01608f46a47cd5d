#!/usr/bin/env bash
# The language model trained the DiLoCo way (examples/torch_lm: a byte-level transformer of 0.2M
# parameters on Debian's fortunes, libtorch, one thread per worker): 4 workers as threads of
# one process over comm::Throttled at 1 Gbit/s and at 10 Mbit/s (latency 50 us), AdamW inside
# (betas 0.9 and 0.95, weight decay 0.1, the gradient clipped to norm 1, a linear warm-up then a
# cosine), every row of one link in one run so that the rows share the machine's conditions:
#   S-SGD, DiLoCo (Local-SGD with the outer Nesterov step, blocking), and cocod's overlapped
#   settings: CoCoD-SGD with the automatic overlap depth and the outer step (+int8+f4 at
#   10 Mbit/s), and eager delayed DiLoCo. S-SGD at 10 Mbit/s would run for hours: it runs a
#   short budget there (SSGD_EPOCHS), and its time to the target is estimated
# and, at 10 Mbit/s, the same 4 ranks as 2 groups of 2 (--group-size 2: S-SGD inside a group, the
# link between groups, each rank exchanging half the model): DiLoCo and cocod's setting.
# The curve is the validation loss of the workers' weighted average model against wall time.
# benchmarks/lm_table.py prints the table (time to TARGET_LOSS, final loss and perplexity) and
# plots the curves.
#
#   benchmarks/lm.sh [1gbit|10mbit|groups|all|smoke] [OUT_DIR]   (BUILD=build/bench, EPOCHS=0.3, PERIOD=16,
#                                                                  TARGET_LOSS=2.6)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
out="${2:-$COCOD_ROOT/results/benchmarks}"
exe="$BENCH_BUILD/examples/torch_lm/torch_lm"
bench_require lm.sh "$exe"
ensure_packages fortunes
mkdir -p "$out"
common=(--workers 4 --no-progress --period "${PERIOD:-16}" --latency 50)

# link NAME GBIT ALGOS EPOCHS [FLAGS..]: one run of ALGOS on the throttled link.
link() {
  echo "# lm $1: $3 for $4 epochs ($(date -u +%H:%M:%S))"
  "$exe" "${common[@]}" --bandwidth "$2" --algo "$3" --epochs "$4" "${@:5}" --curve "$out/lm_curve_$1.csv" >"$out/lm_$1.txt"
}

case "$which" in
  smoke)
    "$exe" --workers 2 --no-progress --period 4 --bandwidth 0.01 --algo ssgd,local+outer,cocod+dauto+outer \
      --epochs 0.002 --warmup-steps 4 --curve-every 0.001 --curve "$out/lm_curve_smoke.csv" >"$out/lm_smoke.txt"
    /usr/bin/python3 "$COCOD_ROOT/benchmarks/lm_table.py" "$out" --smoke
    exit 0 ;;
  1gbit|10mbit|groups|all) ;;
  *) echo "benchmarks/lm.sh: unknown part '$which' (1gbit, 10mbit, groups, all, smoke)" >&2; exit 2 ;;
esac
epochs="${EPOCHS:-0.3}"
if [ "$which" = 1gbit ] || [ "$which" = all ]; then
  link 1gbit 1 "ssgd,local+outer,cocod+dauto+outer,diloco-delayed" "$epochs"
fi
if [ "$which" = 10mbit ] || [ "$which" = all ]; then
  link 10mbit 0.01 "local+outer,cocod+dauto+outer+int8+f4,diloco-delayed+int8+f4" "$epochs"
  link 10mbit_ssgd 0.01 ssgd "${SSGD_EPOCHS:-0.03}"  # S-SGD's short budget: its time to the target is estimated
fi
if [ "$which" = groups ] || [ "$which" = all ]; then
  link 10mbit_groups 0.01 "local+outer,cocod+dauto+outer+int8+f4" "$epochs" --group-size 2
fi
/usr/bin/python3 "$COCOD_ROOT/benchmarks/lm_table.py" "$out"
