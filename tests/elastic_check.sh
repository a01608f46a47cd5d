#!/usr/bin/env bash
# Elastic runs of an example as processes on loopback, with a coordinator (every run bounded by
# timeouts):
#  1. 4 workers (--min-workers 3); one is killed with SIGKILL at a seeded random moment: the
#     survivors go on (the next round completes within a second of the kill), end with the
#     same digest, and equal the replay of the coordinator's log (--replay / --leave-after-round);
#  2. the coordinator killed: every worker ends with one clear error, no hang; the newest
#     checkpoint file (--checkpoint) resumes the run under a new coordinator, with the digest of
#     the same run undisturbed.
# (A replacement, SIGSTOP and kills during an epoch's set-up: tests/elastic_kills.py, elastic.kills.)
#   elastic_check.sh EXAMPLE COORDINATOR WORKDIR SEED
set -euo pipefail
exe="$1" coord="$2" dir="$3" seed="$4"
RANDOM=$seed
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAILED: $*" >&2; tail -n +1 "$dir"/*.txt >&2 || true; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
args=(--comm elastic --hostname 127.0.0.1 --algo cocod --period 4 --epochs 100 --no-progress --mpi-stall-timeout 30)
start_coordinator() {  # start_coordinator NAME MIN: sets port and coord_pid
  port=$(free_port)
  timeout 300 "$coord" --port "$port" --min-workers "$2" --heartbeat-timeout 1 >"$dir/$1.coordinator.txt" 2>&1 &
  coord_pid=$!
  for _ in $(seq 1 100); do grep -q listening "$dir/$1.coordinator.txt" 2>/dev/null && return; sleep 0.02; done
  fail "the coordinator did not start"
}
worker() {  # worker NAME EXTRA...: one worker in the background; sets pid
  local name=$1
  shift
  timeout 300 "$exe" "${args[@]}" --coordinator "127.0.0.1:$port" "$@" >"$dir/$name.txt" 2>&1 &
  pid=$!
}
digests() { grep -h '^model digest' "$@" | sort -u; }
now() { date +%s.%N; }

# 1. a kill and its replay
start_coordinator kill 3
pids=()
for w in 1 2 3 4; do worker "kill.w$w"; pids+=($pid); sleep 0.2; done  # ids follow the start order
sleep "$(echo "1.5 + $((RANDOM % 1000)) / 1000" | bc -l)"
victim=$((RANDOM % 4))
kill -9 "$(pgrep -P "${pids[$victim]}")"
killed_at=$(now)
for i in 0 1 2 3; do [ "$i" -eq "$victim" ] && continue; wait "${pids[$i]}" || fail "worker $((i + 1)) failed"; done
kill "$coord_pid"; wait "$coord_pid" || true
want=$(digests "$dir"/kill.w*.txt)
[ "$(echo "$want" | wc -l)" -eq 1 ] && [ -n "$want" ] || fail "the survivors' digests differ or are missing: $want"
R=$(sed -n 's/^epoch 2 starts: round \([0-9]*\) .*/\1/p' "$dir/kill.coordinator.txt")
[ -n "$R" ] || fail "no epoch 2 in the coordinator's log"
next_round=$(grep -h 'membership epoch 2:' "$dir"/kill.w*.txt | sed -n 's/.*unix time \([0-9.]*\)).*/\1/p' | head -1)
recovery=$(echo "$next_round - $killed_at" | bc -l)
redone=$(sed -n 's/.*took again after losses: \([0-9]*\)/\1/p' "$dir"/kill.w*.txt | sort -u | tr '\n' ' ')
echo "elastic: worker $((victim + 1)) killed; epoch 2 continues from round $R; first round of epoch 2 done" \
  "$(printf %.3f "$recovery") s after the kill; steps the survivors took again: ${redone:-0}"
(( $(echo "$recovery < 1.0" | bc -l) )) || fail "the survivors took $recovery s to complete a round"
for n in $redone; do  # at most the round after R (when R is the one before the kill) and less: 2k - 1
  [ "$n" -le 7 ] || fail "a survivor took $n steps again (more than 2 rounds of k = 4 minus the one in flight)"
done

start_coordinator replay 3
pids=()
for w in 1 2 3 4; do
  if [ $((w - 1)) -eq "$victim" ]; then worker "replay.w$w" --leave-after-round "$R"; else worker "replay.w$w" --replay "$R"; fi
  pids+=($pid); sleep 0.2
done
for p in "${pids[@]}"; do wait "$p" || fail "a replaying worker failed"; done
kill "$coord_pid"; wait "$coord_pid" || true
got=$(digests "$dir"/replay.w*.txt)
[ "$got" = "$want" ] || fail "the replay's digest differs: $got / $want"
echo "elastic: the replay of the log (leave after round $R) gives the same digest: ${want#model digest }"

# 2. the coordinator killed
start_coordinator gone 2
pids=()
for w in 1 2; do worker "gone.w$w" --checkpoint "$dir/files" --checkpoint-every 5; pids+=($pid); sleep 0.2; done
sleep 1.5
kill -9 "$(pgrep -P "$coord_pid")"  # the coordinator (its parent is timeout)
t0=$(now)
for p in "${pids[@]}"; do if wait "$p"; then fail "a worker ended well without its coordinator"; fi; done
took=$(echo "$(now) - $t0" | bc -l)
for w in 1 2; do
  grep -q "127.0.0.1:$port.*\(is gone\|the coordinator stopped\)" "$dir/gone.w$w.txt" || fail "worker $w did not name the lost coordinator"
done
echo "elastic: the coordinator killed: both workers ended in $(printf %.1f "$took") s: $(grep -h TcpStore "$dir/gone.w1.txt")"
newest=$(shopt -s nullglob; for m in "$dir"/files/cocod/round-*/MANIFEST; do basename "$(dirname "$m")"; done | tail -1)
[ -n "$newest" ] || fail "no complete checkpoint in $dir/files/cocod"
C=$((10#${newest#round-}))
start_coordinator again 2
pids=()
for w in 1 2; do worker "again.w$w" --checkpoint "$dir/files" --checkpoint-every 5 --resume; pids+=($pid); sleep 0.2; done
for p in "${pids[@]}"; do wait "$p" || fail "a worker resuming from the checkpoint files failed"; done
kill "$coord_pid"; wait "$coord_pid" || true
from=$(sed -n 's/.*first round end in the run: round \([0-9]*\),.*/\1/p' "$dir/again.w1.txt")
[ -n "$from" ] && [ "$((from - 1))" -ge "$C" ] && [ "$(((from - 1) % 5))" -eq 0 ] ||
  fail "the run did not continue from a checkpoint (its first round: ${from:-none}; the newest checkpoint: round $C)"
timeout 120 "$exe" --workers 2 --algo cocod --period 4 --epochs 100 --no-progress --brief >"$dir/undisturbed.txt" 2>&1 ||
  fail "the undisturbed run failed"
want=$(digests "$dir/undisturbed.txt")
got=$(digests "$dir"/again.w*.txt)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "the run resumed from the files ends with $got, the undisturbed one with $want"
echo "elastic: under a new coordinator the run resumed from its newest checkpoint file (round $((from - 1))) and ends with the undisturbed run's digest"
