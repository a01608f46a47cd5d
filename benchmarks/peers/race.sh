#!/usr/bin/env bash
# The race on identical compute: cocod driving libtorch from C++ (examples/torch_fashion_mnist,
# one MPI process per worker) against PyTorch in Python (benchmarks/peers/torch_mlp.py, gloo):
# DDP, PostLocalSGD, and DiLoCo as torchft's and OpenDiLoCo's users run it (outer Nesterov, lr 0.7,
# momentum 0.9; pseudo-gradients all-reduced in float32 and in float16). Both sides use the same
# Debian build of torch, one thread per worker, the same network and initial weights (written by
# --save-init), shards, batches, learning rate and schedule; 4 workers on a tbf-shaped loopback.
# Every curve point on both sides is the consensus (cocod: the workers' weighted average model;
# PostLocalSGD and DiLoCo: at a round's end, where every worker holds the same model).
#
# It runs in parts, each under an hour here (measured 2026-12-03), and each part's files stand alone:
#   accuracy  the rules' accuracy, which does not depend on the link (at a fixed k and depth the
#             models are the same bits on every link): at k = 8, 16, 32 Local-SGD, CoCoD-SGD at
#             overlap depths k, k/2 and k/4, blocking DiLoCo (Local-SGD with DiLoCo's outer step)
#             and delayed DiLoCo, eager and naive; no link limit (about 30 minutes)
#   delay     blocking, eager and naive delayed DiLoCo with gentler outer steps: outer momentum
#             0.5, and plain averaging (outer SGD, lr 1, no momentum); no link limit (35 minutes)
#   outer-lr
#             the outer learning rate of delayed DiLoCo, eager and naive, against blocking DiLoCo
#             at its 0.7: outer Nesterov 0.9 at lr OUTER_LRS (default 0.05 0.1 0.2 0.4 0.7), at k =
#             DELAY_PERIODS (default 8 16 32); no link limit (about 3.5 minutes an lr)
#   1gbit, 100mbit, 10mbit
#             one link: PyTorch's PostLocalSGD and DiLoCo (float32, float16) at three periods
#             each (and DDP at 1 Gbit/s), and cocod the way a user gets it without choosing: the
#             automatic period with the automatic overlap depth, with and without the outer step,
#             int8 and 4 fragments (1gbit 21 minutes, 100mbit 22, 10mbit 40)
#   1gbit-sweep, 100mbit-sweep, 10mbit-sweep
#             the same link, cocod's sweep the way a user would choose: the period k with the
#             automatic overlap depth, compression none or int8, fragments 1 or 4, the outer step
#             on or off, add-back (CoCoD-SGD) or eager (delayed DiLoCo); race_table.py joins it to
#             the link's part (1gbit-sweep 32 minutes, 100mbit-sweep 27, 10mbit-sweep 47: its
#             uncompressed rows at k = 64 wait 5 s for each exchange)
#   cnn       the CNN at 100 Mbit/s, a smaller sweep (TARGET_CNN, default 0.88; about 35 minutes)
#   all       every part in turn;  smoke: a few steps of every kind of run (the test suite's)
# benchmarks/peers/race_table.py prints the tables and verdicts from whatever parts are there.
#
#   benchmarks/peers/race.sh [PART...] [OUT_DIR]   (root; BUILD=build/bench, WORKERS=4, EPOCHS=5,
#                                                   TARGET=0.86, TARGET_CNN=0.88,
#                                                   CURVE_OF=consensus|rank0: whose model cocod's curves measure)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
bench_help "$0" "${1:-}"
all_parts=(accuracy delay outer-lr 1gbit 1gbit-sweep 100mbit 100mbit-sweep 10mbit 10mbit-sweep cnn)
parts=() out="$COCOD_ROOT/results/benchmarks"
for a in "$@"; do
  case "$a" in
    accuracy|delay|outer-lr|1gbit|100mbit|10mbit|1gbit-sweep|100mbit-sweep|10mbit-sweep|cnn|smoke) parts+=("$a") ;;
    all) parts+=("${all_parts[@]}") ;;
    -*) echo "benchmarks/peers/race.sh: unknown option '$a' (see --help)" >&2; exit 2 ;;
    *) out="$a" ;;
  esac
done
[ ${#parts[@]} -gt 0 ] || parts=("${all_parts[@]}")
workers="${WORKERS:-4}"
epochs="${EPOCHS:-5}"
exe="$BENCH_BUILD/examples/torch_fashion_mnist/torch_fashion_mnist"
bench_require peers/race.sh "$exe"
[ "$(id -u)" -eq 0 ] || { echo "# race: skipped (the tbf-shaped link needs root)"; exit 0; }
ensure_packages python3-torch python3-numpy
mkdir -p "$out"

# The part's files: TAG_PART_runs.csv, one line per run (k: the period, the median one under
# --period auto; c: the compute per step measured before the run; m: one exchange as measured,
# gloo's all-reduce or cocod's comm_ms; comm_s: the seconds spent communicating, PyTorch's as
# torch_mlp.py measures them, cocod's rank 0's time blocked on collectives; mb: megabytes sent
# per epoch by a worker, cocod's rows) and TAG_PART_curve.csv (test accuracy against wall time).
# Every run keeps its log, TAG_PART_NAME.log.
begin_part() {  # MODEL PART EPOCHS
  model="$1" part="$2" tag="race_$1"
  common=(--epochs "$3" --curve-every "$(awk -v e="$3" 'BEGIN { print (e < 1) ? e / 2 : 0.25 }')")
  init="$out/$tag.init"
  "$exe" --model "$model" --save-init "$init" >/dev/null
  curves="$out/${tag}_${part}_curve.csv" runs="$out/${tag}_${part}_runs.csv"
  echo "run,rate,epoch,wall_s,test_accuracy" >"$curves"
  echo "run,rate,k,c_ms,m_ms,wall_s,epochs,comm_s,mb_per_epoch" >"$runs"
  echo "# race part $part ($model): $workers workers, $3 epochs; $(date -u '+%Y-%m-%d %H:%M'), $(nproc) cores"
}
log_of() { echo "$out/${tag}_${part}_$(tr -c 'A-Za-z0-9.+\n' _ <<<"$1").log"; }

pytorch() {  # RATE ALGO K NAME [torch_mlp.py options]
  local name="$4 k=$3" tmp="$out/${tag}_tmp.csv"
  local log
  log=$(log_of "$name $1")
  rm -f "$tmp"
  RATE="$1" shaped 3600 /usr/bin/python3 "$COCOD_ROOT/benchmarks/peers/torch_mlp.py" --algo "$2" --period "$3" \
    --model "$model" --init "$init" --workers "$workers" "${common[@]}" --curve "$tmp" --name "$name" "${@:5}" \
    2>&1 | grep -v "^# shaped link" | tee "$log"
  awk -F, -v rate="$1" 'NR > 1 { printf "%s,%s,%s,%s,%s\n", $1, rate, $3, $4, $5 }' "$tmp" >>"$curves"
  awk -v name="$name" -v rate="$1" -v k="$3" '
    { for (i = 2; i < NF; i++) {
        if ($i == "=" && $(i - 1) == "c") c = $(i + 1)
        if ($i == "=" && $(i - 1) == "m") m = $(i + 1)
        if ($i == "epochs" && $(i + 1) == "in") { e = $(i - 1); w = $(i + 2) }
        if ($i == "communicating") s = $(i + 1) } }
    END { printf "%s,%s,%s,%s,%s,%s,%s,%s,-\n", name, rate, k, c, m, w, e, s }' "$log" >>"$runs"
}

# RATE "none" runs on the plain loopback, without shaping; SUFFIX (a variable) is appended to
# every row's name, for runs whose example options change a rule's setting.
cocod() {  # RATE ALGOS K [example options]
  local tmp="$out/${tag}_tmp.csv" run=(mpiexec --allow-run-as-root --oversubscribe -n "$workers")
  local log
  log=$(log_of "$2$suffix k$3 $1")
  rm -f "$tmp"
  [ "$1" = none ] || run=(shaped_mpiexec 3600 "$workers")
  RATE="$1" "${run[@]}" "$exe" --model "$model" --comm mpi --algo "$2" --period "$3" "${common[@]}" \
    --curve-of "${CURVE_OF:-consensus}" --no-progress --curve "$tmp" "${@:4}" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  grep -E "one local step|^  " "$log" || true
  awk -F, -v rate="$1" -v k="$3" -v sx="$suffix" 'NR > 1 { printf "cocod %s%s k=%s,%s,%s,%s,%s\n", $1, sx, k, rate, $3, $4, $5 }' \
    "$tmp" >>"$curves"
  awk -v rate="$1" -v k="$3" -v sx="$suffix" '
    /one local step c =/ { for (i = 2; i < NF; i++) if ($i == "=" && $(i - 1) == "c") c = $(i + 1) }
    /^  / { m = ($1 == "S-SGD") ? $8 / $4 : $8  # S-SGD: the k all-reduces of a round
            printf "cocod %s%s k=%s,%s,%s,%s,%s,%s,%s,%s,%s\n", $1, sx, k, rate, $4, c, m, $13, $3, $12, $14 }' "$log" >>"$runs"
}
suffix=""

# PyTorch at RATE, at each of PERIODS: PostLocalSGD, DiLoCo float32 and float16.
pytorch_sweep() {  # RATE PERIODS
  local k
  for k in $2; do
    pytorch "$1" postlocal "$k" "PyTorch PostLocalSGD"
    pytorch "$1" diloco "$k" "PyTorch DiLoCo"
    pytorch "$1" diloco "$k" "PyTorch DiLoCo fp16" --pseudo-gradient fp16
  done
}

# The rows of cocod's sweep at one period, from CoCoD-SGD with the automatic depth one setting
# changed at a time: compression (int8), the outer step (DiLoCo's), both with 4 fragments, and
# the merge (delayed DiLoCo's eager start for CoCoD-SGD's add-back). SLOW: only the int8 + 4
# fragments rows, where a 10 Mbit/s link cannot carry the others at this period in the run's
# time (their exchange outlasts a round many times).
sweep_rows() {  # [slow]
  if [ "${1:-}" = slow ]; then
    echo "cocod+dauto+int8+f4,cocod+dauto+outer+int8+f4,diloco-delayed+int8+f4"
  else
    echo "cocod+dauto,cocod+dauto+int8,cocod+dauto+outer,cocod+dauto+int8+f4,cocod+dauto+outer+int8+f4,diloco-delayed"
  fi
}

# One link: PyTorch's sweep and cocod's automatic period with the automatic depth (capped at 64).
link_part() {  # RATE PYTORCH_PERIODS
  begin_part mlp "$1" "$epochs"
  pytorch_sweep "$1" "$2"
  [ "$1" = 1gbit ] && pytorch "$1" ddp 1 "PyTorch DDP"
  cocod "$1" cocod+dauto,cocod+dauto+outer,cocod+dauto+int8+f4,cocod+dauto+outer+int8+f4 auto --max-period 64
}

# cocod's sweep over the period at one link (the part RATE-sweep).
sweep_part() {  # RATE COCOD_PERIODS [SLOW_PERIODS]
  local k
  begin_part mlp "$1-sweep" "$epochs"
  for k in $2; do
    if [[ " ${3:-} " == *" $k "* ]]; then cocod "$1" "$(sweep_rows slow)" "$k"; else cocod "$1" "$(sweep_rows)" "$k"; fi
  done
}

for p in "${parts[@]}"; do
  case "$p" in
    accuracy)
      begin_part mlp accuracy "$epochs"
      for k in 8 16 32; do
        cocod none "local,cocod,cocod+d$((k / 2)),cocod+d$((k / 4)),local+outer,diloco-delayed,diloco-delayed+delayed" "$k"
      done ;;
    delay)  # delayed DiLoCo and blocking DiLoCo with gentler outer steps than DiLoCo's
      begin_part mlp delay "$epochs"
      for k in 8 16 32; do
        suffix="[m=0.5]" cocod none local+outer,diloco-delayed,diloco-delayed+delayed "$k" --outer-momentum 0.5
        suffix="[avg]" cocod none local+outer,diloco-delayed,diloco-delayed+delayed "$k" --outer sgd --outer-lr 1 --outer-momentum 0
      done ;;
    outer-lr)  # the outer lr of both delayed starts, against blocking DiLoCo at its own
      begin_part mlp outer-lr "$epochs"
      for k in ${DELAY_PERIODS:-8 16 32}; do
        cocod none local+outer "$k"
        for lr in ${OUTER_LRS:-0.05 0.1 0.2 0.4 0.7}; do
          suffix="[lr=$lr]" cocod none diloco-delayed,diloco-delayed+delayed "$k" --outer-lr "$lr"
        done
      done ;;
    1gbit) link_part 1gbit "4 8 16" ;;
    100mbit) link_part 100mbit "16 32 64" ;;
    10mbit) link_part 10mbit "32 64 128" ;;
    1gbit-sweep) sweep_part 1gbit "4 8 16 32" ;;
    100mbit-sweep) sweep_part 100mbit "8 16 32" ;;
    10mbit-sweep) sweep_part 10mbit "8 16 32 64" "8 16 32" ;;
    cnn)
      begin_part cnn 100mbit "$epochs"
      pytorch_sweep 100mbit "8 16 32"
      for k in 8 16 32; do cocod 100mbit local,cocod+dauto,cocod+dauto+outer,cocod+dauto+outer+int8+f4,diloco-delayed "$k"; done
      cocod 100mbit cocod+dauto,cocod+dauto+outer,cocod+dauto+outer+int8+f4 auto --max-period 64 ;;
    smoke)  # a few steps of each kind of run, to check that the parts' commands work
      begin_part mlp smoke 0.02
      pytorch 1gbit postlocal 2 "PyTorch PostLocalSGD"
      pytorch 1gbit diloco 2 "PyTorch DiLoCo fp16" --pseudo-gradient fp16
      pytorch 1gbit ddp 1 "PyTorch DDP"
      cocod none local,diloco-delayed+delayed 2
      cocod 1gbit "$(sweep_rows slow)" 2
      cocod 1gbit cocod+dauto auto --max-period 64 ;;
  esac
done

"$COCOD_ROOT/benchmarks/peers/race_table.py" "$out" --target "${TARGET:-0.86}" --target-cnn "${TARGET_CNN:-0.88}" \
  --workers "$workers" | tee "$out/race.txt"
