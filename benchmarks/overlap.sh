#!/usr/bin/env bash
# Round time of each algorithm against the round-time model of docs/algorithm.md, over
# compute/communication ratios kc/m from about 0.25 to 4, on two links:
#   threads  2 in-process workers over comm::Throttled (1 Gbit/s; the latency sets m = kc / R), k = 8,
#            with CoCoD-SGD at overlap depths 4 and 2 beside (CoCoD-SGD+d4, +d2)
#   mpi      2 MPI ranks over a tbf-shaped TCP loopback (1 Gbit/s, needs root); the batch sets c
# Overlap efficiency of CoCoD-SGD = model / measured round (1 = perfect overlap), its model
# max(kc, m), or kc + max(0, m - tau c) at depth tau; the target is an efficiency of at least
# OVERLAP_TARGET (default 0.9) in every CoCoD-SGD row.
#
#   benchmarks/overlap.sh [threads|mpi|all] [OUT_DIR]     (BUILD=build/bench by default)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
target="${OVERLAP_TARGET:-0.9}"  # the one threshold, for every row and the verdict line
out="${2:-$COCOD_ROOT/results/benchmarks}"
exe="$BENCH_BUILD/examples/least_squares/least_squares"
bench_require overlap.sh "$exe"
mkdir -p "$out"
csv="$out/overlap.csv"
echo "link,setting,algorithm,k,kc_ms,m_ms,kc_over_m,round_ms,model_ms,round_over_model,efficiency,rel_dist_to_opt,correct" >"$csv"

# rows LINK SETTING M_MS: reads the example's full table on stdin, prints and appends rows. The
# model is computed here from each row's measured kc and one m per run: the throttled link's
# cost (threads), or S-SGD's blocking all-reduce measured in the same run (mpi; "row"); a
# non-blocking all-reduce's post-to-completion time counts queueing behind the previous one.
rows() {
  local link="$1" setting="$2" m="$3"
  awk -v link="$link" -v setting="$setting" -v m="$m" -v csv="$csv" -v target="$target" '
    /^  (CoCoD-SGD|S-SGD|Local-SGD|Pipe-SGD|CoCoD-SGD\+d[0-9]+) / {
      n++; name[n] = $1; k[n] = $4; round[n] = $6; kc[n] = $7; dist[n] = $NF
      if ($1 == "S-SGD") ssgd_m = $8 / $4
    }
    END {
      mm = (m == "row") ? ssgd_m : m
      for (i = 1; i <= n; i++) {
        c = kc[i] / k[i]
        if (name[i] == "S-SGD") model = kc[i] + k[i] * mm
        else if (name[i] == "Local-SGD") model = kc[i] + mm
        else if (name[i] == "Pipe-SGD") model = k[i] * (c > mm ? c : mm)
        else if (name[i] ~ /\+d/) {  # depth tau: the round waits for what tau steps do not hide
          tau = substr(name[i], index(name[i], "+d") + 2) + 0
          if (tau > k[i]) tau = k[i]
          model = kc[i] + (mm > tau * c ? mm - tau * c : 0)
        }
        else model = kc[i] > mm ? kc[i] : mm
        e = "-"
        if (name[i] ~ /^CoCoD-SGD/) { e = sprintf("%.3f", model / round[i]); if (model / round[i] < target + 0) bad = 1 }
        # converged to within 1% of the optimum; "-" where the example computes no optimum
        # (the MPI rows, a 262144-parameter problem)
        ok = (tolower(dist[i]) ~ /nan/) ? "-" : (dist[i] + 0 < 0.01) ? "OK" : "WRONG"
        if (ok == "WRONG") wrong = 1
        printf "  %-8s %9s %-12s %3d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10s %7s\n", link, setting, name[i], k[i], kc[i], mm, kc[i] / mm, round[i], model, round[i] / model, e, ok
        printf "%s,%s,%s,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%s,%s,%s\n", link, setting, name[i], k[i], kc[i], mm, kc[i] / mm, round[i], model, round[i] / model, e, dist[i], ok >> csv
      }
      if (wrong) print "WRONG" > "/dev/stderr"
      exit bad + 2 * wrong
    }'
}

echo "# overlap: measured round time against the round-time model (docs/algorithm.md); $(date -u +%Y-%m-%d), $(nproc) cores"
echo "# model: S-SGD k(c+m), Local-SGD kc+m, Pipe-SGD k max(c,m), CoCoD-SGD max(kc,m), at depth tau kc+max(0,m-tau c); efficiency = model/round"
printf "# %-8s %9s %-12s %3s %9s %9s %9s %9s %9s %9s %10s %7s\n" link setting algorithm k kc m kc/m round model round/model efficiency correct
printf "# %-8s %9s %-12s %3s %9s %9s %9s %9s %9s %9s %10s %7s\n" "" "" "" "" ms ms "" ms ms "" "" ""
status=0
if [ "$which" = threads ] || [ "$which" = all ]; then
  for ratio in 0.25 0.5 1 2 4; do
    table=$("$exe" --algo all,cocod+d4,cocod+d2 --workers 2 --period 8 --bandwidth 1 --latency auto --compute-ratio "$ratio" --no-progress)
    m=$(sed -n 's/.*one all-reduce m = \([0-9.]*\) ms.*/\1/p' <<<"$table")
    rows threads "R=$ratio" "$m" <<<"$table" || status=$((status | $?))
  done
fi
if [ "$which" = mpi ] || [ "$which" = all ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "# mpi: skipped (the tbf-shaped link needs root)"
  else
    for batch in 4 8 16 32 64; do
      epochs=$(awk -v b="$batch" 'BEGIN { print 90 * b / 4096 }')  # ~90 steps, 30 rounds of k = 3
      table=$(shaped_mpiexec 600 2 "$exe" --comm mpi --no-progress --dim 262144 --samples 4096 --batch "$batch" --period 3 --lr 0.00001 \
        --epochs "$epochs" --algo all 2>/dev/null)
      rows mpi "batch=$batch" row <<<"$table" || status=$((status | $?))
    done
  fi
fi
echo "# csv: $csv"
echo "# target: CoCoD-SGD efficiency (every depth) >= $target in every row: $([ $((status & 1)) -eq 0 ] && echo met || echo 'NOT met')"
if [ $((status & 2)) -eq 0 ]; then
  echo "# overlap: OK (every checked run converged to within 1% of the optimum)"
else
  echo "# overlap: FAILED (a run did not converge: correct = WRONG)"
  exit 1
fi
