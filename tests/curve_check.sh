#!/usr/bin/env bash
# The examples' curve measures the consensus: each point is the weighted average of every
# worker's model at that round. Checks, on least_squares (2 epochs):
#  - Local-SGD's points are its round ends, where every worker holds the consensus: the same
#    metrics with --curve-of consensus and --curve-of rank0, with equal batches (4 workers) and
#    with batches proportional to measured speeds (2 workers, one slowed: weights other than 1/N);
#  - CoCoD-SGD's workers differ between merges: some point differs, the last (the run's
#    consensus) does not;
#  - the consensus curve over MPI (3 ranks) equals the one over threads, point by point
#    (rank-ordered sums on both).
#   curve_check.sh PATH/TO/least_squares WORKDIR [MPIEXEC FLAGS...]
set -euo pipefail
exe="$1" dir="$2"
shift 2
mkdir -p "$dir"
fail() { echo "FAILED: $*" >&2; exit 1; }
run=(--algo local,cocod --epochs 2 --curve-every 0.25 --no-progress --brief)
"$exe" "${run[@]}" --workers 4 --curve "$dir/consensus.csv" >/dev/null
"$exe" "${run[@]}" --workers 4 --curve "$dir/rank0.csv" --curve-of rank0 >/dev/null
metrics() { cut -d, -f1-3,5- "$1" | grep "^$2,"; }  # every column but wall_s
same_local() {
  [ "$(metrics "$1" Local-SGD | wc -l)" -ge 4 ] || fail "too few Local-SGD points in $1"
  [ "$(metrics "$1" Local-SGD)" = "$(metrics "$2" Local-SGD)" ] ||
    fail "Local-SGD's consensus curve differs from rank 0's at round ends:
$(diff <(metrics "$1" Local-SGD) <(metrics "$2" Local-SGD))"
}
same_local "$dir/consensus.csv" "$dir/rank0.csv"
c=$(metrics "$dir/consensus.csv" CoCoD-SGD) r=$(metrics "$dir/rank0.csv" CoCoD-SGD)
[ "$(wc -l <<<"$c")" -ge 4 ] || fail "too few CoCoD-SGD points"
[ "$(head -n -1 <<<"$c")" != "$(head -n -1 <<<"$r")" ] || fail "CoCoD-SGD's consensus curve is rank 0's"
[ "$(tail -n 1 <<<"$c")" = "$(tail -n 1 <<<"$r")" ] || fail "the last points (the run's consensus) differ"
echo "CoCoD-SGD: epoch, rel_dist_to_opt of the consensus, of rank 0's model"
paste -d, <(cut -d, -f3,4 <<<"$c") <(cut -d, -f4 <<<"$r")
prop=(--algo local --workers 2 --sampling proportional --slowdown 1:2 --epochs 2 --curve-every 0.25 --no-progress --brief)
"$exe" "${prop[@]}" --curve "$dir/prop-consensus.csv" >/dev/null
"$exe" "${prop[@]}" --curve "$dir/prop-rank0.csv" --curve-of rank0 >/dev/null
same_local "$dir/prop-consensus.csv" "$dir/prop-rank0.csv"
if [ $# -gt 0 ]; then
  three=(--algo cocod --epochs 2 --curve-every 0.25 --no-progress --brief)
  "$exe" "${three[@]}" --workers 3 --curve "$dir/threads.csv" >/dev/null
  timeout 120 "$@" -np 3 "$exe" "${three[@]}" --comm mpi --bandwidth 1 --curve "$dir/mpi.csv" >/dev/null
  [ "$(metrics "$dir/threads.csv" CoCoD-SGD | wc -l)" -ge 4 ] || fail "too few points over threads"
  [ "$(metrics "$dir/threads.csv" CoCoD-SGD)" = "$(metrics "$dir/mpi.csv" CoCoD-SGD)" ] ||
    fail "the consensus curve over MPI differs from the one over threads:
$(diff <(metrics "$dir/threads.csv" CoCoD-SGD) <(metrics "$dir/mpi.csv" CoCoD-SGD))"
  echo "MPI and threads: the same consensus curve ($(metrics "$dir/mpi.csv" CoCoD-SGD | wc -l) points)"
fi
echo "curve check: OK"
