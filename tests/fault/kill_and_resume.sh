#!/usr/bin/env bash
# A 3-rank MPI training with checkpoints, one rank killed with SIGKILL at seeded random moments
# (one of them while a checkpoint is being written), resumed with --resume each time: the job
# must end within seconds of every kill with a non-zero status and no rank left running, and
# the final model's digest must equal an uninterrupted run's.
#   kill_and_resume.sh EXAMPLE WORKDIR SEED MPIEXEC [MPIEXEC FLAGS...]
set -euo pipefail
exe="$1" dir="$2" seed="$3"
shift 3
mpi=("$@" -n 3)
RANDOM=$seed
args=(--comm mpi --algo cocod --period 4 --batch 128 --epochs 60 --dim 4096 --samples 4096 --lr 0.0005
      --momentum 0.9 --lr-schedule cosine --no-progress --brief)
ckpt="$dir/ckpt"
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAILED: $*" >&2; exit 1; }
digest() { grep '^model digest CoCoD-SGD: ' "$1" || fail "no model digest in $1: $(cat "$1")"; }

t0=$(date +%s.%N)
timeout 300 "${mpi[@]}" "$exe" "${args[@]}" >"$dir/whole.txt" 2>&1 || fail "the uninterrupted run failed: $(cat "$dir/whole.txt")"
whole_s=$(echo "$(date +%s.%N) - $t0" | bc)
want=$(digest "$dir/whole.txt")
echo "uninterrupted: $want (${whole_s} s)"

kills=5
for i in $(seq 1 $kills); do
  timeout 300 "${mpi[@]}" "$exe" "${args[@]}" --checkpoint "$ckpt" --checkpoint-every 10 --resume >"$dir/run$i.txt" 2>&1 &
  job=$!
  # wait for the three ranks
  for _ in $(seq 1 500); do
    launcher=$(pgrep -P "$job" || true)  # timeout -> mpiexec -> the ranks
    ranks=($( [ -n "$launcher" ] && pgrep -P "$launcher" -x "$(basename "$exe")" || true))
    [ ${#ranks[@]} -ge 3 ] && break
    sleep 0.01
  done
  [ ${#ranks[@]} -ge 3 ] || fail "run $i: the ranks did not start"
  victim=${ranks[$((RANDOM % 3))]}
  # The moment: in run 1 while a checkpoint is being written (a folder without its manifest),
  # in the others a random number of checkpoints and then a random fraction of a second later.
  if [ "$i" -eq 1 ]; then
    moment="while a checkpoint was being written"
    after=0 pause_ms=0
  else
    after=$((1 + RANDOM % 6)) pause_ms=$((RANDOM % 150))
    moment="${pause_ms} ms after checkpoint number ${after} of this run"
  fi
  python3 - "$ckpt/cocod" "$victim" "$after" "$pause_ms" <<'WATCH' || fail "run $i: the run ended before the kill ($moment)"
import os, signal, sys, time
folder, victim, after, pause_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def complete(n):
    return n.startswith("round-") and os.path.exists(os.path.join(folder, n, "MANIFEST"))
known = set(n for n in os.listdir(folder) if complete(n)) if os.path.isdir(folder) else set()
new = 0
while True:
    try:
        os.kill(victim, 0)
    except ProcessLookupError:
        sys.exit(1)
    names = os.listdir(folder) if os.path.isdir(folder) else []
    for n in names:
        if n in known or not n.startswith("round-"):
            continue
        if complete(n):
            known.add(n)
            new += 1
        elif after == 0:  # being written
            os.kill(victim, signal.SIGKILL)
            print("killed while", n, "was written:", sorted(os.listdir(os.path.join(folder, n))))
            sys.exit(0)
    if after > 0 and new >= after:
        time.sleep(pause_ms / 1000)
        os.kill(victim, signal.SIGKILL)
        sys.exit(0)
WATCH
  before=$(ls "$ckpt"/cocod 2>/dev/null | tr '\n' ' ')
  k=$(date +%s.%N)
  set +e
  wait "$job"
  rc=$?
  set -e
  took=$(echo "$(date +%s.%N) - $k" | bc)
  [ "$rc" -ne 0 ] || fail "run $i: the job exited 0 after a rank was killed"
  [ "$rc" -ne 124 ] || fail "run $i: the job hung after a rank was killed"
  (( $(echo "$took < 10" | bc) )) || fail "run $i: the job took ${took} s to end after the kill"
  for r in "${ranks[@]}"; do  # gone (or a zombie about to be reaped) within 5 s
    for _ in $(seq 1 50); do
      state=$(awk '{print $3}' "/proc/$r/stat" 2>/dev/null || echo gone)
      [ "$state" = gone ] || [ "$state" = Z ] && break
      sleep 0.1
    done
    [ "$state" = gone ] || [ "$state" = Z ] || fail "run $i: rank process $r still runs (state $state) after the job ended"
  done
  echo "kill $i: a rank killed $moment (checkpoints then: ${before:-none}); the job ended in ${took} s with status $rc"
done

timeout 300 "${mpi[@]}" "$exe" "${args[@]}" --checkpoint "$ckpt" --checkpoint-every 10 --resume >"$dir/final.txt" 2>&1 ||
  fail "the resumed run failed: $(cat "$dir/final.txt")"
grep -q '^# CoCoD-SGD resumed from ' "$dir/final.txt" || fail "the last run did not resume"
got=$(digest "$dir/final.txt")
echo "after $kills kills and resumes: $got"
[ "$got" = "$want" ] || fail "the resumed model differs from the uninterrupted one"
echo "kill and resume: OK"
