#!/usr/bin/env bash
# Plots test accuracy against wall time from curve files (algorithm,sampling,epoch,wall_s,
# test_accuracy), one line per algorithm: the figures of docs/benchmarks.md.
#   benchmarks/plot_curves.sh OUT.png "TITLE" CURVE.csv [CURVE.csv ...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
png="$1" title="$2"; shift 2
command -v gnuplot >/dev/null || { echo "plot_curves.sh: gnuplot not installed (apt-get install gnuplot-nox)" >&2; exit 1; }
plot=""
for csv in "$@"; do
  tag=$(basename "$csv" .csv | sed 's/^curve_//; s/^peers_curve$//')
  while IFS= read -r algorithm; do
    plot+="${plot:+, }'$csv' using 4:(strcol(1) eq '$algorithm' ? \$5 : NaN) with linespoints title '$algorithm${tag:+ ($tag)}'"
  done < <(awk -F, 'NR > 1 && $1 != "algorithm" && !seen[$1]++ { print $1 }' "$csv")
done
gnuplot <<GP
set terminal pngcairo size 900,560 font ",11" noenhanced
set output "$png"
set datafile separator ","
set title "$title"
set xlabel "wall time (s)"
set ylabel "test accuracy"
set yrange [0.8:0.9]
set key bottom right
set grid
plot $plot
GP
echo "# plot: $png"
