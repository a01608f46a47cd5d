#!/usr/bin/env bash
# The examples' --workers-may-change: a run of 3 workers checkpointed, then resumed by 2. Without
# the flag the resume is refused on every worker, naming the flag's setting; with it the run
# continues from the checkpoint's consensus and says where it resumed from.
#   resume_workers_check.sh EXAMPLE WORKDIR
set -euo pipefail
exe="$1" work="$2"
rm -rf "$work" && mkdir -p "$work"
common=(--algo cocod --epochs 2 --period 2 --batch 64 --no-progress --checkpoint "$work/ck" --checkpoint-every 3)
"$exe" --workers 3 "${common[@]}" >"$work/first.txt"
if "$exe" --workers 2 "${common[@]}" --resume >"$work/refused.txt" 2>&1; then
  echo "FAILED: a resume with 2 of 3 workers ran without --workers-may-change"; cat "$work/refused.txt"; exit 1
fi
grep -q "the number of workers differs (checkpoint: 3, this run: 2); to continue from its consensus model with the new number, resume with workers_may_change = true" "$work/refused.txt" ||
  { echo "FAILED: the refusal does not say why"; cat "$work/refused.txt"; exit 1; }
"$exe" --workers 2 "${common[@]}" --resume --workers-may-change >"$work/resumed.txt"
grep -q "^# CoCoD-SGD resumed from $work/ck/cocod/round-" "$work/resumed.txt" ||
  { echo "FAILED: the resumed run does not say where it resumed from"; cat "$work/resumed.txt"; exit 1; }
grep -q "^model digest CoCoD-SGD: " "$work/resumed.txt" || { echo "FAILED: no digest"; cat "$work/resumed.txt"; exit 1; }
echo "resume with other workers: OK"
