#!/usr/bin/env bash
# The libtorch example end to end, briefly: the CNN and the MLP with every algorithm, the family
# variants, and a checkpointed run resumed bit for bit; checks what it prints.
#   torch_fashion_mnist_smoke.sh PATH/TO/torch_fashion_mnist WORKDIR
set -euo pipefail
exe="$1" dir="$2"
mkdir -p "$dir"
fail() { echo "FAILED: $*" >&2; exit 1; }
accuracy() {  # the test accuracy of a brief table's row
  awk -v row="$2" 'index($0, "  " row " ") == 1 { print $NF }' <<<"$1"
}
for model in cnn mlp; do
  out=$("$exe" --model "$model" --algo all,overlap-local,cocod+outer+int8+f2 --workers 2 --epochs 0.1 --brief --no-progress)
  echo "$out"
  for row in "CoCoD-SGD" "S-SGD" "Local-SGD" "Pipe-SGD" "Overlap-Local-SGD" "CoCoD-SGD+outer+int8+f2"; do
    a=$(accuracy "$out" "$row")
    [ -n "$a" ] || fail "$model: no table row for $row"
    awk -v a="$a" 'BEGIN { exit !(a > 0.5) }' || fail "$model: $row reached only $a after 0.1 epochs"
  done
done
# checkpoints: the run resumed from its last checkpoint ends with the same model, bit for bit
rm -rf "$dir/ckpt"
digest() { grep '^model digest CoCoD-SGD: ' <<<"$1" || fail "no model digest"; }
first=$("$exe" --algo cocod --workers 2 --epochs 0.05 --checkpoint "$dir/ckpt" --checkpoint-every 3 --brief --no-progress)
again=$("$exe" --algo cocod --workers 2 --epochs 0.05 --checkpoint "$dir/ckpt" --checkpoint-every 3 --brief --no-progress --resume)
grep -q '^# CoCoD-SGD resumed from ' <<<"$again" || fail "the second run did not resume"
[ "$(digest "$first")" = "$(digest "$again")" ] || fail "the resumed run's model differs: $(digest "$first") vs $(digest "$again")"
# --save-init writes the initial weights (4 bytes per parameter) and trains nothing
"$exe" --model cnn --save-init "$dir/cnn.f32" | grep -q "80202 initial parameters of the cnn" || fail "--save-init's report"
[ "$(stat -c %s "$dir/cnn.f32")" -eq $((80202 * 4)) ] || fail "--save-init wrote $(stat -c %s "$dir/cnn.f32") bytes"
echo "torch_fashion_mnist smoke: OK"
