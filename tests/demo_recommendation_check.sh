#!/usr/bin/env bash
# scripts/demo's closing recommendation (demo_recommendation in scripts/lib/recommend.sh) on the
# demo's header line: it must print the sample that docs/fashion-mnist.md shows, and the period
# 8 with the run's options for a link whose exchange costs more than 4 local steps; nothing
# without the header line.
#   demo_recommendation_check.sh SOURCE_DIR WORKDIR
set -euo pipefail
src="$1" work="$2"
rm -rf "$work" && mkdir -p "$work"
# shellcheck source=../scripts/lib/recommend.sh
source "$src/scripts/lib/recommend.sh"
header() { echo "# link: $1 Gbit/s, latency 50.0 us -> one all-reduce m = $2 ms; one local step c = $3 ms"; }
header 1 11.587 5.661 >"$work/fast.txt"
demo_recommendation "$work/fast.txt" >"$work/fast.out"
# the sample: the fenced block after "The demo ends by naming" in docs/fashion-mnist.md
awk '/^The demo ends by naming/ { on = 1 } on && /^```$/ { if (inside) exit; inside = 1; next } inside' \
  "$src/docs/fashion-mnist.md" >"$work/doc.out"
diff -u "$work/doc.out" "$work/fast.out" || { echo "demo_recommendation: the docs' sample differs" >&2; exit 1; }
header 0.1 113.2 5.661 >"$work/slow.txt"
demo_recommendation "$work/slow.txt" | grep -q "costs 20.0 local steps" || { echo "demo_recommendation: slow link" >&2; exit 1; }
demo_recommendation "$work/slow.txt" --bandwidth 0.1 | grep -q -- "scripts/demo --bandwidth 0.1 --algo .* --period 8$" ||
  { echo "demo_recommendation: the slow link's options and period 8" >&2; exit 1; }
echo "# no header" >"$work/none.txt"
[ -z "$(demo_recommendation "$work/none.txt")" ] || { echo "demo_recommendation: printed without a header" >&2; exit 1; }
echo "demo_recommendation: OK"
