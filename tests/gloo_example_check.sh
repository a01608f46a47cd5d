#!/usr/bin/env bash
# The examples over --comm gloo: 3 processes on loopback give the digests of --comm threads, and
# a process killed with SIGKILL mid-run ends the others within seconds with a clear error (no
# hang, no process left).
#   gloo_example_check.sh EXAMPLE WORKDIR
set -euo pipefail
exe="$1" dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
fail() { echo "FAILED: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
args=(--algo all --epochs 2 --no-progress --brief)
gloo() {  # gloo PORT RANK EXTRA...: one process of a 3-worker job
  local port=$1 rank=$2
  shift 2
  local serve=()
  [ "$rank" -eq 0 ] && serve=(--serve-store)
  timeout 120 "$exe" --comm gloo --workers 3 --rank "$rank" --store "127.0.0.1:$port" --hostname 127.0.0.1 "${serve[@]}" "$@"
}

timeout 120 "$exe" --workers 3 "${args[@]}" >"$dir/threads.txt" 2>&1 || fail "the threads run failed: $(cat "$dir/threads.txt")"
port=$(free_port)
for r in 0 1 2; do gloo "$port" "$r" "${args[@]}" >"$dir/gloo$r.txt" 2>&1 & done
wait || fail "a gloo process failed: $(cat "$dir"/gloo*.txt)"
want=$(grep '^model digest' "$dir/threads.txt")
[ -n "$want" ] || fail "no digests in $(cat "$dir/threads.txt")"
got=$(grep '^model digest' "$dir/gloo0.txt" || true)
[ "$got" = "$want" ] || fail "digests over Gloo differ from threads: $got / $want"
echo "gloo: 3 processes, every algorithm, the same digests as --comm threads"

port=$(free_port)
pids=()
for r in 0 1 2; do
  gloo "$port" "$r" --algo cocod --epochs 400 >"$dir/kill$r.txt" 2>&1 &
  pids+=($!)
done
sleep 3
victim=$(pgrep -f -- "--rank 1 --store 127.0.0.1:$port" | grep -v "^$$\$" | tail -1) || fail "rank 1 is not running: $(cat "$dir/kill1.txt")"
kill -9 "$victim"
t0=$(date +%s.%N)
for r in 0 2; do
  if wait "${pids[$r]}"; then fail "rank $r ended well after its peer was killed: $(cat "$dir/kill$r.txt")"; fi
done
waited=$(echo "$(date +%s.%N) - $t0" | bc)
wait "${pids[1]}" || true
for r in 0 2; do
  grep -q "cocod: rank $r failed: cocod::comm::Gloo: .*lost a peer\|cocod: rank $r failed: cocod::comm::Gloo: rank [0-9] failed" "$dir/kill$r.txt" ||
    fail "rank $r did not name the lost peer: $(cat "$dir/kill$r.txt")"
done
(( $(echo "$waited < 10" | bc) )) || fail "the survivors took ${waited} s to end"
echo "gloo: rank 1 killed; ranks 0 and 2 ended in ${waited} s: $(grep -h 'cocod: rank 0 failed' "$dir/kill0.txt")"
