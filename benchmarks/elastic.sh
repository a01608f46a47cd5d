#!/usr/bin/env bash
# Elastic runs: what they cost when nothing fails, and what a failure costs.
#   cost  the steady state on the tbf-shaped 1 Gbit/s loopback (root): least_squares with 262144
#         parameters on 2 workers, CoCoD-SGD and S-SGD, each over comm::Mpi (mpiexec), over
#         comm::Gloo, as an elastic run (heartbeats, membership checks, a state kept in memory at
#         every round end) and as an elastic run that keeps no state (--snapshot-every 1000000:
#         the heartbeats' and checks' cost alone); wall time and median round time, medians over
#         REPEATS runs (default 3), and each variant's wall time over comm::Mpi's in the same run.
#   demo  the Fashion-MNIST MLP (CoCoD-SGD, 12 epochs) on 4 elastic workers: one is killed with
#         SIGKILL at about 40% of the run and a replacement starts at about 60%; the test-accuracy
#         curve with the membership changes marked (OUT/elastic-demo.csv, OUT/elastic-demo.png),
#         the final accuracy against the same run undisturbed (target: within 0.3 points), and
#         what the kill cost (the time to the next round, the steps trained again).
#
#   kills the kill campaign (tests/elastic_kills.py): 4 least_squares workers on loopback, RUNS
#         runs (default 20) of each kind of fault (a random kill, a kill 0-30 ms into an epoch's
#         set-up, two kills 20-80 ms apart, a kill and a replacement, SIGSTOP); every survivor must
#         finish with the same digest; the time from a kill to the survivors' next round
#         (median, worst) per kind. The suite runs it with one run of each kind (elastic.kills).
#
#   goodput  goodput under failures (benchmarks/elastic_goodput.py): the Fashion-MNIST MLP
#         (CoCoD-SGD, k = 8, EPOCHS epochs, default 60) on 4 workers, a random one killed every T
#         seconds, the first at T/2 (EVERY, default 10,30,60,120), as an elastic run (a replacement started at each
#         kill) and as checkpoint-restart (comm::Gloo with a checkpoint every 10 rounds, all
#         workers started again from the newest after each kill); goodput = each method's
#         undisturbed wall time over its wall time with kills, and the final test accuracy,
#         medians over REPEATS interleaved runs of each (default 1; OUT/elastic-goodput.csv,
#         .txt, .png; each run's logs and kill times under OUT/elastic-runs/goodput/).
#
#   benchmarks/elastic.sh [cost|demo|kills|goodput|all] [OUT_DIR]     (BUILD=build/bench by default)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_help "$0" "${1:-}"
which="${1:-all}"
case "$which" in cost|demo|kills|goodput|all|cost-run|cost-inside) ;;
  *) echo "benchmarks/elastic.sh: unknown part '$which' (cost, demo, kills, goodput or all; see --help)" >&2; exit 2 ;;
esac
out="${2:-$COCOD_ROOT/results/benchmarks}"
repeats="${REPEATS:-3}"
coord="$BENCH_BUILD/tools/cocod-coordinator"
bench_require elastic.sh "$coord"
mkdir -p "$out"
work="$out/elastic-runs"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# coordinator LOG MIN: starts one in the background (sets coord_pid and port)
coordinator() {
  port=$(free_port)
  timeout 1800 "$coord" --port "$port" --min-workers "$2" --heartbeat-timeout 2 >"$1" 2>&1 &
  coord_pid=$!
  for _ in $(seq 1 200); do grep -q listening "$1" 2>/dev/null && return; sleep 0.02; done
  echo "elastic.sh: the coordinator did not start: $(cat "$1")" >&2
  exit 1
}

# --- cost: one variant's run inside the shaped namespace; prints "wall_s ms_per_round"
if [ "$which" = cost-run ]; then  # (internal) cost-run VARIANT ALGO DIR
  variant="$3" algo="$4" dir="$5"
  exe="$BENCH_BUILD/examples/least_squares/least_squares"
  args=(--algo "$algo" --no-progress --brief --dim 262144 --samples 4096 --batch 16 --period 3 --lr 0.00001 --epochs 0.7)
  case "$variant" in
    mpi)
      timeout 600 mpiexec --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo -n 2 \
        "$exe" --comm mpi "${args[@]}" >"$dir/run.txt" 2>&1
      awk '/^  (CoCoD-SGD|S-SGD) / { print $(NF-4), $(NF-3) }' "$dir/run.txt" ;;
    gloo)
      port=$(free_port)
      for r in 0 1; do
        serve=()
        [ "$r" -eq 0 ] && serve=(--serve-store)
        timeout 600 "$exe" --comm gloo --workers 2 --rank "$r" --store "127.0.0.1:$port" --hostname 127.0.0.1 "${serve[@]}" \
          "${args[@]}" >"$dir/run$r.txt" 2>&1 &
      done
      for p in $(jobs -p); do wait "$p"; done
      awk '/^  (CoCoD-SGD|S-SGD) / { print $(NF-4), $(NF-3) }' "$dir/run0.txt" ;;
    elastic|elastic-nostate)
      extra=()
      [ "$variant" = elastic-nostate ] && extra=(--snapshot-every 1000000)
      coordinator "$dir/coordinator.txt" 2
      trap 'kill "$coord_pid" 2>/dev/null || true' EXIT
      workers=()
      for w in 1 2; do
        timeout 600 "$exe" --comm elastic --coordinator "127.0.0.1:$port" --hostname 127.0.0.1 "${extra[@]}" "${args[@]}" \
          >"$dir/run$w.txt" 2>&1 &
        workers+=($!)
        sleep 0.1
      done
      for p in "${workers[@]}"; do wait "$p"; done
      kill "$coord_pid" 2>/dev/null || true
      sed -n 's/.*finished: .*wall_s \([0-9.]*\), ms\/round \([0-9.]*\).*/\1 \2/p' "$dir"/run*.txt | head -1 ;;
  esac
  exit 0
fi
if [ "$which" = cost-inside ]; then  # (internal) every cost run, inside one shaped namespace
  rm -rf "$work/cost" && mkdir -p "$work/cost"
  variants=(mpi gloo elastic elastic-nostate)
  csv="$out/elastic-cost.csv"
  echo "algorithm,variant,repeat,wall_s,ms_per_round" >"$csv"
  for r in $(seq 1 "$repeats"); do
    for algo in cocod ssgd; do
      for v in "${variants[@]}"; do  # interleaved: a variant's runs see the same machine as the others'
        d="$work/cost/$algo.$v.$r" && mkdir -p "$d"
        read -r wall ms < <(bash "$0" cost-run "$out" "$v" "$algo" "$d") || { echo "elastic.sh: the $v run failed: $(cat "$d"/*.txt)" >&2; exit 1; }
        echo "$algo,$v,$r,$wall,$ms" >>"$csv"
      done
    done
  done
  python3 - "$csv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("# steady state on the tbf-shaped 1 Gbit/s loopback: least_squares, 262144 parameters, 2 workers, k = 3, batch 16;")
print("# medians over %d runs; x mpi = this variant's wall time / comm::Mpi's (the same repeats)" % len({r['repeat'] for r in rows}))
print("# %-10s %-16s %9s %9s %7s" % ("algorithm", "variant", "wall_s", "ms/round", "x mpi"))
for algo in ("cocod", "ssgd"):
    base = statistics.median(float(r['wall_s']) for r in rows if r['algorithm'] == algo and r['variant'] == 'mpi')
    for v in ("mpi", "gloo", "elastic", "elastic-nostate"):
        sel = [r for r in rows if r['algorithm'] == algo and r['variant'] == v]
        wall = statistics.median(float(r['wall_s']) for r in sel)
        ms = statistics.median(float(r['ms_per_round']) for r in sel)
        print("  %-10s %-16s %9.3f %9.2f %7.3f" % ({"cocod": "CoCoD-SGD", "ssgd": "S-SGD"}[algo], v, wall, ms, wall / base))
PY
  exit 0
fi

if [ "$which" = cost ] || [ "$which" = all ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "# elastic cost: skipped (the tbf-shaped link needs root)"
  else
    bench_require elastic.sh "$BENCH_BUILD/examples/least_squares/least_squares"
    shaped 3600 bash "$0" cost-inside "$out"
  fi
fi

if [ "$which" = demo ] || [ "$which" = all ]; then
  exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
  bench_require elastic.sh "$exe"
  rm -rf "$work/demo" && mkdir -p "$work/demo"
  d="$work/demo"
  args=(--comm elastic --hostname 127.0.0.1 --algo cocod --epochs 12 --period 8 --no-progress --curve-every 0.5)
  # run NAME: 4 workers (ids 1-4 in start order), their pids in pids
  run() {
    coordinator "$d/$1.coordinator.txt" 3
    pids=()
    for w in 1 2 3 4; do
      timeout 1800 "$exe" "${args[@]}" --coordinator "127.0.0.1:$port" --curve "$d/$1.w$w.csv" >"$d/$1.w$w.txt" 2>&1 &
      pids+=($!)
      sleep 0.2
    done
  }
  run undisturbed
  t0=$(date +%s.%N)
  for p in "${pids[@]}"; do wait "$p" || { echo "elastic.sh: the undisturbed run failed" >&2; exit 1; }; done
  took=$(echo "$(date +%s.%N) - $t0" | bc -l)
  kill "$coord_pid"; wait "$coord_pid" || true
  run disturbed
  t0=$(date +%s.%N)
  sleep "$(echo "0.4 * $took" | bc -l)"
  kill -9 "$(pgrep -P "${pids[2]}")"  # worker 3 (not rank 0, whose curve is the run's)
  killed_at=$(date +%s.%N)
  sleep "$(echo "0.2 * $took" | bc -l)"
  timeout 1800 "$exe" "${args[@]}" --coordinator "127.0.0.1:$port" --curve "$d/disturbed.w5.csv" >"$d/disturbed.w5.txt" 2>&1 &
  joiner=$!
  joined_at=$(date +%s.%N)
  for p in "${pids[0]}" "${pids[1]}" "${pids[3]}" "$joiner"; do wait "$p" || { echo "elastic.sh: a worker of the disturbed run failed" >&2; exit 1; }; done
  kill "$coord_pid"; wait "$coord_pid" || true
  accuracy() { sed -n 's/^test_accuracy \([0-9.]*\)$/\1/p' "$d/$1.w1.txt"; }
  base=$(accuracy undisturbed) got=$(accuracy disturbed)
  next=$(sed -n 's/.*membership epoch 2: .*unix time \([0-9.]*\)).*/\1/p' "$d/disturbed.w1.txt")
  first=$(sed -n 's/.*first round end in the run: .*unix time \([0-9.]*\)).*/\1/p' "$d/disturbed.w5.txt")
  redone=$(sed -n 's/.*took again after losses: \([0-9]*\)/\1/p' "$d"/disturbed.w[124].txt | sort -u | tr '\n' ' ')
  # the curve: rank 0's points (worker 1's), the membership epoch of each
  { echo "run,wall_s,epoch,workers,membership_epoch,test_accuracy"
    for run in undisturbed disturbed; do awk -F, -v run="$run" '$5 == "test_accuracy" && $4 != "final" { print run "," $1 "," $2 "," $3 "," $4 "," $6 }' "$d/$run.w1.csv"; done
  } >"$out/elastic-demo.csv"
  echo "# elastic demo: Fashion-MNIST MLP, CoCoD-SGD k = 8, 12 epochs, 4 workers as processes on $(nproc) cores; $(date -u +%Y-%m-%d)"
  echo "# undisturbed: final test accuracy $base ($(printf %.1f "$took") s)"
  echo "# disturbed:   final test accuracy $got; worker 3 killed at $(printf %.1f "$(echo "$killed_at - $t0" | bc -l)") s into the run, a replacement started $(printf %.1f "$(echo "$joined_at - $killed_at" | bc -l)") s later"
  echo "#   the survivors' first round without it: $(printf %.3f "$(echo "$next - $killed_at" | bc -l)") s after the kill; steps the survivors took again: ${redone:-0}"
  echo "#   the replacement's first round end: $(printf %.3f "$(echo "$first - $joined_at" | bc -l)") s after it started"
  grep -h "^epoch\|lost\|admitted" "$d/disturbed.coordinator.txt" | sed 's/^/#   log: /'
  diff=$(echo "($got - $base) * 100" | bc -l)
  echo "# accuracy difference: $(printf %+.2f "$diff") points (target: within 0.3): $( (( $(echo "${diff#-} <= 0.3" | bc -l) )) && echo met || echo NOT met)"
  if command -v gnuplot >/dev/null; then
    marks=$(awk -F, 'NR > 1 && $1 == "disturbed" && $5 != last { if (last != "") printf "set arrow from %s, graph 0 to %s, graph 1 nohead dt 2; set label \"%s workers\" at %s, graph 0.05 rotate left; ", $3, $3, $4, $3; last = $5 }' "$out/elastic-demo.csv")
    gnuplot -e "set terminal pngcairo size 900,540; set output '$out/elastic-demo.png'; set datafile separator ','; \
      set xlabel 'epoch'; set ylabel 'test accuracy'; set key top left; set yrange [0.7:0.92]; $marks \
      plot '< grep ^undisturbed $out/elastic-demo.csv' using 3:6 with lines title 'undisturbed (4 workers)', \
           '< grep ^disturbed $out/elastic-demo.csv' using 3:6 with lines title 'worker killed, replacement joined'" 2>/dev/null ||
      echo "# (gnuplot could not draw $out/elastic-demo.png)"
  fi
fi

if [ "$which" = kills ] || [ "$which" = all ]; then
  echo "# the kill campaign: $(echo "${RUNS:-20}") runs of each kind, 4 least_squares workers on loopback; $(date +%F), $(nproc) cores"
  python3 "$COCOD_ROOT/tests/elastic_kills.py" "$BENCH_BUILD/examples/least_squares/least_squares" "$coord" "$work/kills" \
    --runs "${RUNS:-20}" --seed "${SEED:-1}" | tee "$out/elastic-kills.txt"
fi

if [ "$which" = goodput ] || [ "$which" = all ]; then
  exe="$BENCH_BUILD/examples/fashion_mnist/fashion_mnist"
  bench_require elastic.sh "$exe"
  echo "# goodput under failures: Fashion-MNIST MLP, CoCoD-SGD k = 8, ${EPOCHS:-60} epochs, 4 workers on loopback; $(date +%F), $(nproc) cores"
  python3 "$COCOD_ROOT/benchmarks/elastic_goodput.py" "$exe" "$coord" "$work/goodput" --every "${EVERY:-10,30,60,120}" \
    --epochs "${EPOCHS:-60}" --repeats "${REPEATS:-1}" --seed "${SEED:-1}" --csv "$out/elastic-goodput.csv" -- --algo cocod --period 8 | tee "$out/elastic-goodput.txt"
  if command -v gnuplot >/dev/null; then
    python3 - "$out/elastic-goodput.csv" >"$work/goodput.dat" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def wall(method, every):
    return statistics.median(float(r["wall_s"]) for r in rows if r["method"] == method and float(r["every_s"]) == every)
for every in sorted({float(r["every_s"]) for r in rows if float(r["every_s"]) > 0}):
    print(every, wall("restart", 0) / wall("restart", every), wall("elastic", 0) / wall("elastic", every))
PY
    gnuplot -e "set terminal pngcairo size 900,540; set output '$out/elastic-goodput.png'; \
      set xlabel 'seconds between two kills'; set ylabel 'goodput (undisturbed wall time / wall time)'; set key bottom right; \
      set yrange [0:1.05]; set logscale x; set xrange [8:150]; set xtics (10, 20, 30, 60, 120); set grid; \
      plot '$work/goodput.dat' using 1:3 with linespoints lw 2 title 'elastic (cocod)', \
           '' using 1:2 with linespoints lw 2 title 'checkpoint-restart (every 10 rounds)', 0.95 with lines dt 2 title 'target at one kill a minute'" 2>/dev/null ||
      echo "# (gnuplot could not draw $out/elastic-goodput.png)"
  fi
fi
