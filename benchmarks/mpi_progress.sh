#!/usr/bin/env bash
# Compares comm::Mpi's progress designs: 2 MPI ranks over a tbf-shaped TCP loopback, CoCoD-SGD
# against Local-SGD on a least-squares model whose all-reduce costs about k local steps.
# For each design, REPEATS runs; prints medians. Needs root (scripts/shaped-link) and a build
# with MPI (default: build/bench, which benchmarks/run makes; set BUILD=...).
#
#   benchmarks/mpi_progress.sh [REPEATS=3]
#
# Columns (ms, medians over runs of the per-run medians over rounds):
#   cocod_round  CoCoD-SGD's round time       cocod_kc  its compute per round (in that run)
#   local_round  Local-SGD's round time       local_kc  its compute per round (no overlap)
#   m            Local-SGD's blocking all-reduce time (the link's cost)
#   vs_model     cocod_round / max(local_kc, m): against the model with interference-free compute
#   vs_own       cocod_round / max(cocod_kc, m): against the model with the run's own compute
#   local_model  local_round / (local_kc + m)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
exe="$BENCH_BUILD/examples/least_squares/least_squares"
repeats="${1:-3}"
bench_require mpi_progress.sh "$exe"

args=(--comm mpi --no-progress --dim 262144 --samples 128 --batch 16 --period 3 --lr 0.00001 --epochs 30 --algo cocod,local)
echo "# 2 ranks, tbf ${RATE:-1gbit} burst ${BURST:-256kb}, least squares 262144 parameters (2 MiB), k = 3, batch 16, $repeats runs per design"
echo "# $(date -u +%Y-%m-%d) $(nproc) cores"
printf "# %-32s %11s %9s %11s %9s %8s %9s %7s %11s\n" design cocod_round cocod_kc local_round local_kc m vs_model vs_own local_model
printf "# %-32s %11s %9s %11s %9s %8s %9s %7s %11s\n" "" ms ms ms ms ms "" "" ""
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
designs=("polling_thread 50" "polling_thread 500" "polling_thread 2000" "blocking_thread 500" "caller 500" "native 500")
declare -A rows
# Designs interleaved within each repeat, so that drift of the shared machine hits all alike.
for ((i = 0; i < repeats; ++i)); do
  for design in "${designs[@]}"; do
    set -- $design
    extra=(--mpi-progress "$1" --mpi-poll-us "$2")
    [ "$1" = native ] && extra=(--mpi-native --mpi-poll-us "$2")
    out=$(shaped_mpiexec 300 2 "$exe" "${args[@]}" "${extra[@]}" 2>/dev/null)
    # the example's table: algorithm steps epochs k M0 round_ms kc_ms comm_ms ...
    c=$(echo "$out" | awk '$1 == "CoCoD-SGD" {print $6, $7, $8}')
    l=$(echo "$out" | awk '$1 == "Local-SGD" {print $6, $7, $8}')
    rows[$design]+="$c $l"$'\n'
  done
done
for design in "${designs[@]}"; do
  set -- $design
  col() { echo -n "${rows[$design]}" | awk -v k="$1" 'NF {print $k}' | median; }
  cr=$(col 1); ck=$(col 2); lr=$(col 4); lk=$(col 5); m=$(col 6)
  label="$1"
  { [ "$1" = polling_thread ] || [ "$1" = native ]; } && label="$1 (poll 20-$2 us)"
  awk -v d="$label" -v cr="$cr" -v ck="$ck" -v lr="$lr" -v lk="$lk" -v m="$m" 'BEGIN {
    ideal = (lk > m ? lk : m); own = (ck > m ? ck : m);
    printf "  %-32s %11.2f %9.2f %11.2f %9.2f %8.2f %9.3f %7.3f %11.3f\n", d, cr, ck, lr, lk, m, cr/ideal, cr/own, lr/(lk+m) }'
done
