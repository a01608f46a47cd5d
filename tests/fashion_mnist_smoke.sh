#!/usr/bin/env bash
# The flagship example end to end, briefly: every algorithm, both samplings, a slowed worker,
# the automatic period, the curve (CSV) and the Chrome trace; checks what it prints and writes.
#   fashion_mnist_smoke.sh PATH/TO/fashion_mnist WORKDIR
set -euo pipefail
exe="$1" dir="$2"
mkdir -p "$dir"
out=$("$exe" --algo all --workers 2 --epochs 0.2 --period auto --slowdown 1:2 --sampling equal,proportional \
  --curve "$dir/curve.csv" --curve-every 0.1 --trace "$dir/trace.json" --brief --no-progress)
echo "$out"
fail() { echo "FAILED: $*" >&2; exit 1; }
for row in "CoCoD-SGD (eq)" "S-SGD (prop)" "Local-SGD (prop)" "Pipe-SGD (eq)"; do
  grep -q "^  $row " <<<"$out" || fail "no table row for $row"
done
grep -q "# worker 1 is 2 times slower" <<<"$out" || fail "the slowdown is not reported"
grep -q "batch sizes of the last round" <<<"$out" || fail "no batch sizes for proportional sampling"
[ "$(head -1 "$dir/curve.csv")" = "algorithm,sampling,epoch,wall_s,test_accuracy" ] || fail "curve header"
[ "$(grep -c '^CoCoD-SGD,proportional,' "$dir/curve.csv")" -ge 2 ] || fail "curve has too few CoCoD points"
head -c 40 "$dir/trace.json" | grep -q '^{"displayTimeUnit":"ms","traceEvents":\[' || fail "trace header"
[ "$(tail -c 3 "$dir/trace.json")" = "]}"$'\n' ] 2>/dev/null || [ "$(tail -n 1 "$dir/trace.json")" = "]}" ] || fail "trace is not closed"
grep -q '"name":"Pipe-SGD (proportional)"' "$dir/trace.json" || fail "trace lacks a run"
# checkpoints: the run resumed from its last checkpoint ends with the same model, bit for bit
rm -rf "$dir/ckpt"
digest() { grep '^model digest CoCoD-SGD: ' <<<"$1" || fail "no model digest"; }
first=$("$exe" --algo cocod --workers 2 --epochs 0.1 --momentum 0.9 --checkpoint "$dir/ckpt" --checkpoint-every 3 --brief --no-progress)
[ -f "$dir/ckpt/cocod/$(ls "$dir/ckpt/cocod" | tail -1)/MANIFEST" ] || fail "no checkpoint written"
again=$("$exe" --algo cocod --workers 2 --epochs 0.1 --momentum 0.9 --checkpoint "$dir/ckpt" --checkpoint-every 3 --brief --no-progress --resume)
grep -q '^# CoCoD-SGD resumed from ' <<<"$again" || fail "the second run did not resume"
[ "$(digest "$first")" = "$(digest "$again")" ] || fail "the resumed run's model differs: $(digest "$first") vs $(digest "$again")"
# the family: variants side by side, a checkpointed compressed run resumed bit for bit
out=$("$exe" --algo cocod+outer+int8+f4,local+outer,overlap-local,cocod+bf16+lerp+f2 --workers 2 --epochs 0.1 --no-progress)
for row in "CoCoD-SGD+outer+int8+f4" "Local-SGD+outer" "Overlap-Local-SGD" "CoCoD-SGD+bf16+lerp+f2"; do
  grep -q "^  $row " <<<"$out" || fail "no table row for $row"
done
rm -rf "$dir/ckpt"
family=(--algo cocod --outer nesterov --compress int8 --fragments 3 --workers 2 --epochs 0.1 --momentum 0.9
        --checkpoint "$dir/ckpt" --checkpoint-every 2 --brief --no-progress)
first=$("$exe" "${family[@]}")
again=$("$exe" "${family[@]}" --resume)
grep -q '^# CoCoD-SGD resumed from ' <<<"$again" || fail "the family run did not resume"
[ "$(digest "$first")" = "$(digest "$again")" ] || fail "the resumed family run's model differs"
# bad input: the message names the problem
for bad in "--algo cocod+zip" "--algo ssgd+int8" "--compress zip" "--outer adam" "--fragments 0" \
           "--outer nesterov --outer-momentum 0" "--pull-alpha 0"; do
  # shellcheck disable=SC2086
  if "$exe" $bad --epochs 0.01 --no-progress 2>"$dir/err.txt"; then fail "$bad accepted"; fi
  grep -q -- "${bad%% *}" "$dir/err.txt" || fail "'$bad': the message does not name the flag: $(cat "$dir/err.txt")"
done
if "$exe" --slowdown 5:2 --workers 2 --epochs 0.01 --no-progress 2>"$dir/err.txt"; then fail "--slowdown 5:2 accepted"; fi
grep -q "does not exist (2 workers" "$dir/err.txt" || fail "bad --slowdown message: $(cat "$dir/err.txt")"
echo "fashion_mnist smoke: OK"
