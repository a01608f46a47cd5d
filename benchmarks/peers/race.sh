#!/usr/bin/env bash
# The race on identical compute: cocod driving libtorch from C++ (examples/torch_fashion_mnist,
# one MPI process per worker) against PyTorch's PostLocalSGDOptimizer and DDP in Python
# (benchmarks/peers/torch_mlp.py, gloo). Both sides use the same Debian build of torch, one
# thread per worker, the same network and initial weights (written by --save-init), shards,
# batches, learning rate and schedule; 4 workers on a tbf-shaped loopback at each RATE.
# At each rate it sweeps the period k on both sides and finds PostLocalSGD's best period (the
# soonest to TARGET). There it runs cocod's Local-SGD (PostLocalSGD's algorithm) and
# Overlap-Local-SGD; at the first rate also S-SGD and DDP (its default buckets and 0.1 MB ones).
# Verdicts (benchmarks/peers/race_table.py): compute per step within 10%; CoCoD-SGD's time per
# epoch against PostLocalSGD's at the same k within 10% of the bound T / max(c, m/k) (T:
# PostLocalSGD's step, m: its all-reduce, c = T - m/k); CoCoD-SGD >= 1.5x sooner to TARGET than
# PostLocalSGD at its best period.
#
#   benchmarks/peers/race.sh [OUT_DIR]     (root; BUILD=build/bench, MODEL=mlp|cnn, WORKERS=4,
#                                           EPOCHS=5, TARGET=0.86, RATES="1gbit:2,4,8,16 100mbit:8,16,32",
#                                           CURVE_OF=consensus|rank0: whose model cocod's curves measure)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_help "$0" "${1:-}"
out="${1:-$COCOD_ROOT/results/benchmarks}"
model="${MODEL:-mlp}"
workers="${WORKERS:-4}"
epochs="${EPOCHS:-5}"
target="${TARGET:-0.86}"
rates="${RATES:-1gbit:2,4,8,16 100mbit:8,16,32}"
exe="$BENCH_BUILD/examples/torch_fashion_mnist/torch_fashion_mnist"
bench_require peers/race.sh "$exe"
[ "$(id -u)" -eq 0 ] || { echo "# race: skipped (the tbf-shaped link needs root)"; exit 0; }
ensure_packages python3-torch python3-numpy
mkdir -p "$out"
tag="race_$model"
init="$out/$tag.init"
"$exe" --model "$model" --save-init "$init" >/dev/null

# Every run keeps its log (TAG_RATE_NAME_kK.log), appends its curve as
# "NAME k=K,rate,epoch,wall_s,accuracy" to $curves and one line "NAME k=K,rate,c_ms,m_ms,wall_s,epochs"
# to $runs (m: gloo's measured all-reduce, or cocod's comm_ms of the row; - where there is none).
curves="$out/${tag}_curve.csv" runs="$out/${tag}_runs.csv"
echo "run,rate,epoch,wall_s,test_accuracy" >"$curves"
echo "run,rate,c_ms,m_ms,wall_s,epochs" >"$runs"
echo "rate,best_period" >"$out/${tag}_best.csv"
common=(--epochs "$epochs" --curve-every 0.25)

pytorch() {  # RATE ALGO K NAME [torch_mlp.py options]
  local log="$out/${tag}_$1_$(tr -c 'A-Za-z0-9.\n' _ <<<"$4")_k$3.log" tmp="$out/${tag}_tmp.csv"
  rm -f "$tmp"
  RATE="$1" shaped 3600 /usr/bin/python3 "$COCOD_ROOT/benchmarks/peers/torch_mlp.py" --algo "$2" --period "$3" \
    --model "$model" --init "$init" --workers "$workers" "${common[@]}" --curve "$tmp" --name "$4 k=$3" "${@:5}" \
    2>&1 | grep -v "^# shaped link" | tee "$log"
  awk -F, -v rate="$1" 'NR > 1 { printf "%s,%s,%s,%s,%s\n", $1, rate, $3, $4, $5 }' "$tmp" >>"$curves"
  awk -v name="$4 k=$3" -v rate="$1" '
    { for (i = 2; i < NF; i++) {
        if ($i == "=" && $(i - 1) == "c") c = $(i + 1)
        if ($i == "=" && $(i - 1) == "m") m = $(i + 1)
        if ($i == "epochs" && $(i + 1) == "in") { e = $(i - 1); w = $(i + 2) } } }
    END { printf "%s,%s,%s,%s,%s,%s\n", name, rate, c, m, w, e }' "$log" >>"$runs"
}

cocod() {  # RATE ALGOS K
  local log="$out/${tag}_$1_${2//,/+}_k$3.log" tmp="$out/${tag}_tmp.csv"
  rm -f "$tmp"
  RATE="$1" shaped_mpiexec 3600 "$workers" "$exe" --model "$model" --comm mpi --algo "$2" --period "$3" \
    "${common[@]}" --curve-of "${CURVE_OF:-consensus}" --no-progress --curve "$tmp" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  grep -E "one local step|^  " "$log" || true
  awk -F, -v rate="$1" -v k="$3" 'NR > 1 { printf "cocod %s k=%s,%s,%s,%s,%s\n", $1, k, rate, $3, $4, $5 }' "$tmp" >>"$curves"
  awk -v rate="$1" -v k="$3" '
    /one local step c =/ { for (i = 2; i < NF; i++) if ($i == "=" && $(i - 1) == "c") c = $(i + 1) }
    /^  / { m = ($1 == "S-SGD") ? $8 / $4 : $8  # S-SGD: the k all-reduces of a round
            printf "cocod %s k=%s,%s,%s,%s,%s,%s\n", $1, k, rate, c, m, $13, $3 }' "$log" >>"$runs"
}

# best K of NAME at RATE: the period that reached TARGET soonest (empty when none did)
best_period() {
  awk -F, -v name="$1" -v rate="$2" -v target="$target" '
    $2 == rate && index($1, name " k=") == 1 && $5 >= target {
      k = substr($1, length(name) + 4) + 0
      if (!(k in hit)) { hit[k] = $4; if (best == "" || $4 < hit[best]) best = k }
    }
    END { print best }' "$curves"
}

echo "# race on identical compute ($model): $workers workers, cocod (MPI, C++ libtorch) vs PyTorch (gloo, Python);" \
  "$epochs epochs, target $target; $(date -u +%Y-%m-%d), $(nproc) cores"
first=1
for spec in $rates; do
  rate="${spec%%:*}"
  echo "## $rate"
  periods=$(echo "${spec#*:}" | tr , ' ')
  for k in $periods; do
    pytorch "$rate" postlocal "$k" "PyTorch PostLocalSGD"
    cocod "$rate" cocod "$k"
  done
  best=$(best_period "PyTorch PostLocalSGD" "$rate")
  [ -n "$best" ] || best="${periods%% *}"
  echo "# PostLocalSGD's best period at $rate: k = $best; there cocod's Local-SGD (the same algorithm) and" \
    "Overlap-Local-SGD (overlap without CoCoD-SGD's stale round)"
  if [ "$first" = 1 ]; then
    cocod "$rate" ssgd,local,overlap-local "$best"
    pytorch "$rate" ddp "$best" "PyTorch DDP"
    # DDP overlaps a bucket's all-reduce with the rest of the backward pass. Its default buckets
    # hold this whole MLP in one; with 0.1 MB the last layers' gradients (137 KB) go first, while
    # the first layer's (804 KB, computed last) are still being computed
    pytorch "$rate" ddp "$best" "PyTorch DDP buckets 0.1 MB" --bucket-cap-mb 0.1
  else
    cocod "$rate" local,overlap-local "$best"
  fi
  echo "$rate,$best" >>"$out/${tag}_best.csv"
  first=0
done

"$COCOD_ROOT/benchmarks/peers/race_table.py" "$out" "$tag" "$target" "$workers" | tee "$out/${tag}.txt"
