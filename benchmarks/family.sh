#!/usr/bin/env bash
# The CoCoD family on slow links: the Fashion-MNIST MLP, 4 workers, with the demo's settings
# (batch 64 per worker, lr 0.02 cosine, momentum 0.9, --period auto up to 32), every row of one
# link in one run so that the rows share the machine's conditions:
#   S-SGD, Local-SGD, Local-SGD+outer (DiLoCo: outer Nesterov, lr 0.7, momentum 0.9),
#   CoCoD-SGD, Overlap-Local-SGD, CoCoD-SGD+outer, +bf16, +int8 (error feedback), +f4
#   (4 streamed fragments), and the combinations +int8+f4 and +outer+int8+f4
#   threads  comm::Throttled at 1 Gbit/s, 100 Mbit/s and 10 Mbit/s (latency 50 us)
#   mpi      4 MPI ranks over the tbf-shaped TCP loopback at 100 Mbit/s (needs root)
#   period   final accuracy of Local-SGD and CoCoD-SGD with and without the outer step, k = 1 to 64
# S-SGD at 100 and 10 Mbit/s would run for hours: it runs a short budget there, and its time to
# the target is estimated from its measured seconds per epoch and the epochs it needed at 1 Gbit/s
# (marked "est"). benchmarks/family_table.py prints the table, the verdicts and the plot.
#
#   benchmarks/family.sh [threads|mpi|period|all|smoke] [OUT_DIR]   (TARGET=0.88, EPOCHS=12, BUILD=build/bench,
#                                                                    CURVE_OF=consensus|rank0)
#   smoke: one short run of every row at 10 Mbit/s (the test suite's)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
out="${2:-$COCOD_ROOT/results/benchmarks}"
epochs="${EPOCHS:-12}"
exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
bench_require family.sh "$exe"
mkdir -p "$out"
rows="local,local+outer,cocod,overlap-local,cocod+outer,cocod+bf16,cocod+int8,cocod+f4,cocod+int8+f4,cocod+outer+int8+f4"
base=(--no-progress --batch 64 --lr 0.02 --lr-schedule cosine --momentum 0.9 --period auto --max-period 32 --curve-every 0.5
      --curve-of "${CURVE_OF:-consensus}")
common=(--workers 4 "${base[@]}")

# link NAME GBIT ALGOS EPOCHS: one run of ALGOS on the throttled link.
link() {
  echo "# $1: $3 for $4 epochs ($(date -u +%H:%M:%S))"
  "$exe" "${common[@]}" --bandwidth "$2" --latency 50 --algo "$3" --epochs "$4" --curve "$out/family_curve_$1.csv" \
    >"$out/family_$1.txt"
}

case "$which" in
  smoke)
    "$exe" "${common[@]}" --bandwidth 0.01 --latency 50 --algo "ssgd,$rows" --epochs 0.1 --curve "$out/family_curve_smoke.csv" \
      >"$out/family_smoke.txt"
    /usr/bin/python3 "$COCOD_ROOT/benchmarks/family_table.py" "$out" --smoke
    exit 0 ;;
  threads|mpi|period|all) ;;
  *) echo "benchmarks/family.sh: unknown part '$which' (threads, mpi, period, all, smoke)" >&2; exit 2 ;;
esac

if [ "$which" = threads ] || [ "$which" = all ]; then
  link 1gbit 1 "ssgd,$rows" "$epochs"
  for l in 100mbit:0.1 10mbit:0.01; do
    name="${l%%:*}" gbit="${l##*:}"
    link "$name" "$gbit" "$rows" "$epochs"
    # S-SGD's budget: about 60 s of its steps at this link
    budget=$(awk -v g="$gbit" 'BEGIN { printf "%.3f", (g >= 0.1) ? 2.0 : 0.25 }')
    link "${name}_ssgd" "$gbit" ssgd "$budget"
  done
fi
if [ "$which" = mpi ] || [ "$which" = all ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "# mpi: skipped (the tbf-shaped link needs root)"
  else
    echo "# mpi_100mbit: $rows ($(date -u +%H:%M:%S))"
    RATE=100mbit shaped_mpiexec 3600 4 "$exe" --comm mpi "${base[@]}" --algo "$rows" --epochs "$epochs" \
      --curve "$out/family_curve_mpi_100mbit.csv" >"$out/family_mpi_100mbit.txt" 2>/dev/null
  fi
fi
if [ "$which" = period ] || [ "$which" = all ]; then
  for k in 1 2 4 8 16 32 64; do
    echo "# period $k ($(date -u +%H:%M:%S))"
    "$exe" "${common[@]}" --period "$k" --max-period 64 --bandwidth 100 --latency 1 --algo local,local+outer,cocod,cocod+outer \
      --epochs "$epochs" --brief >"$out/family_period_$k.txt"
  done
fi
/usr/bin/python3 "$COCOD_ROOT/benchmarks/family_table.py" "$out"
