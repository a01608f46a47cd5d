#!/usr/bin/env bash
# benchmarks/peers/race_table.py on made-up runs whose answers are known:
# - the accuracy part: eager delayed DiLoCo 0.1 points below blocking DiLoCo at its worst epoch
#   at k = 8 (met; each epoch's point is the first at or within a round after its mark, and the
#   line of every epoch's accuracies), 0.5 points at k = 16 (not met);
# - a 10 Mbit/s part (PyTorch and one cocod row) joined with its sweep part (cocod): PyTorch's
#   best (PostLocalSGD k=32, 100 s to the target) communicated half its run (f = 0.5), so cocod
#   must be max(0.9 / 0.5, 2) = 2x sooner: 40 s is 2.5x (met);
#   CoCoD-SGD+dauto ends 0.1 points below Local-SGD at k = 8 (met) and 0.8 below at k = 16 (not).
# - a delay part: eager 2 points below blocking at its worst epoch with plain averaging (no verdict).
# - an outer-lr part: eager's best lr 0.1 points below blocking at the end, 0.5 at its worst epoch (met).
# Then the same with cocod's best at 60 s: 1.67x, not met; and with no PyTorch run reaching the
# target, its shortest run bounding its time; and the sweep part alone (no verdict on the link).
#   race_table_check.sh SOURCE_DIR WORKDIR
set -euo pipefail
src="$1" work="$2"
rm -rf "$work" && mkdir -p "$work"
runs_header="run,rate,k,c_ms,m_ms,wall_s,epochs,comm_s,mb_per_epoch"
curve_header="run,rate,epoch,wall_s,test_accuracy"
# curve NAME RATE ACC1 ACC2 ACC3: a point at each of epochs 1, 2 and 3, 10 s apart
curve() { printf '%s,%s,1,10,%s\n%s,%s,2,20,%s\n%s,%s,3,30,%s\n' "$1" "$2" "$3" "$1" "$2" "$4" "$1" "$2" "$5"; }
{
  echo "$runs_header"
  for k in 8 16; do
    for rule in Local-SGD Local-SGD+outer Delayed-DiLoCo Delayed-DiLoCo+delayed; do
      echo "cocod $rule k=$k,none,$k,50,5,30,3,0,10"
    done
  done
} >"$work/race_mlp_accuracy_runs.csv"
{
  echo "$curve_header"
  curve "cocod Local-SGD k=8" none 0.80 0.85 0.870
  curve "cocod Local-SGD+outer k=8" none 0.81 0.86 0.872
  # eager's first point 0.03 epoch after the mark, within a round of k = 8 (0.034 epoch): it is
  # epoch 1's; blocking's second point at 1.03 is not (its point at 1 came first)
  curve "cocod Delayed-DiLoCo k=8" none 0.809 0.859 0.872 | sed 's/,none,1,10,/,none,1.03,10,/'
  echo "cocod Local-SGD+outer k=8,none,1.03,11,0.50"
  curve "cocod Delayed-DiLoCo+delayed k=8" none 0.70 0.80 0.85
  curve "cocod Local-SGD k=16" none 0.79 0.84 0.868
  curve "cocod Local-SGD+outer k=16" none 0.81 0.86 0.871
  curve "cocod Delayed-DiLoCo k=16" none 0.805 0.855 0.869
  curve "cocod Delayed-DiLoCo+delayed k=16" none 0.70 0.80 0.85
} >"$work/race_mlp_accuracy_curve.csv"
# the delay part: the same comparison per outer setting, explanatory (no verdict)
{
  echo "$runs_header"
  for rule in Local-SGD+outer Delayed-DiLoCo Delayed-DiLoCo+delayed; do echo "cocod $rule[avg] k=8,none,8,50,5,30,3,0,10"; done
} >"$work/race_mlp_delay_runs.csv"
{
  echo "$curve_header"
  curve "cocod Local-SGD+outer[avg] k=8" none 0.80 0.85 0.870
  curve "cocod Delayed-DiLoCo[avg] k=8" none 0.78 0.84 0.866
  curve "cocod Delayed-DiLoCo+delayed[avg] k=8" none 0.75 0.82 0.86
} >"$work/race_mlp_delay_curve.csv"
# the outer-lr part: at k = 8 eager at lr 0.2 ends 0.1 points below blocking, 0.5 at its worst
# epoch (met; lr 0.4 ends lower, and its rows print in lr order); the naive delay is the control
{
  echo "$runs_header"
  for rule in "Local-SGD+outer" "Delayed-DiLoCo[lr=0.4]" "Delayed-DiLoCo+delayed[lr=0.4]" "Delayed-DiLoCo[lr=0.2]" \
    "Delayed-DiLoCo+delayed[lr=0.2]"; do echo "cocod $rule k=8,none,8,50,5,30,3,0,10"; done
} >"$work/race_mlp_outer-lr_runs.csv"
{
  echo "$curve_header"
  curve "cocod Local-SGD+outer k=8" none 0.80 0.85 0.870
  curve "cocod Delayed-DiLoCo[lr=0.4] k=8" none 0.70 0.80 0.850
  curve "cocod Delayed-DiLoCo+delayed[lr=0.4] k=8" none 0.60 0.70 0.800
  curve "cocod Delayed-DiLoCo[lr=0.2] k=8" none 0.795 0.848 0.869
  curve "cocod Delayed-DiLoCo+delayed[lr=0.2] k=8" none 0.75 0.82 0.860
} >"$work/race_mlp_outer-lr_curve.csv"
# the link's part (PyTorch and one cocod row) and its sweep part (race_table.py joins them)
cat >"$work/race_mlp_10mbit_runs.csv" <<CSV
$runs_header
PyTorch PostLocalSGD k=32,10mbit,32,50,4000,150,3,75,-
PyTorch DiLoCo k=32,10mbit,32,50,4000,160,3,80,-
cocod CoCoD-SGD+dauto+int8+f4 k=8,10mbit,8,52,300,60,3,1,2
CSV
{
  echo "$curve_header"
  printf 'PyTorch PostLocalSGD k=32,10mbit,1,50,0.80\nPyTorch PostLocalSGD k=32,10mbit,2,100,0.861\nPyTorch PostLocalSGD k=32,10mbit,3,150,0.87\n'
  printf 'PyTorch DiLoCo k=32,10mbit,1,53,0.80\nPyTorch DiLoCo k=32,10mbit,2,107,0.859\nPyTorch DiLoCo k=32,10mbit,3,160,0.87\n'
  printf 'cocod CoCoD-SGD+dauto+int8+f4 k=8,10mbit,1,20,0.80\ncocod CoCoD-SGD+dauto+int8+f4 k=8,10mbit,2,45,0.86\ncocod CoCoD-SGD+dauto+int8+f4 k=8,10mbit,3,60,0.87\n'
} >"$work/race_mlp_10mbit_curve.csv"
cat >"$work/race_mlp_10mbit-sweep_runs.csv" <<CSV
$runs_header
cocod CoCoD-SGD+dauto k=8,10mbit,8,52,300,60,3,1,2
cocod CoCoD-SGD+dauto k=16,10mbit,16,52,300,60,3,1,2
CSV
{
  echo "$curve_header"
  printf 'cocod CoCoD-SGD+dauto k=8,10mbit,1,20,0.80\ncocod CoCoD-SGD+dauto k=8,10mbit,2,40,0.86\ncocod CoCoD-SGD+dauto k=8,10mbit,3,60,0.869\n'
  printf 'cocod CoCoD-SGD+dauto k=16,10mbit,1,20,0.80\ncocod CoCoD-SGD+dauto k=16,10mbit,2,40,0.85\ncocod CoCoD-SGD+dauto k=16,10mbit,3,60,0.860\n'
} >"$work/race_mlp_10mbit-sweep_curve.csv"
out=$(/usr/bin/python3 "$src/benchmarks/peers/race_table.py" "$work")
echo "$out"
expect() { grep -qF -- "$1" <<<"$out" || { echo "FAILED: no line with: $1"; exit 1; }; }
expect "# k=8: eager delayed DiLoCo at most 0.10 points below blocking DiLoCo at epochs 1,2,3 (naive delayed: 11.00) (target <= 0.2: met)"
expect "#   k=8, accuracy at each epoch, blocking / eager / naive: 1: 0.810/0.809/0.700  2: 0.860/0.859/0.800  3: 0.872/0.872/0.850"
expect "# k=16: eager delayed DiLoCo at most 0.50 points below blocking DiLoCo at epochs 1,2,3 (naive delayed: 11.00) (target <= 0.2: NOT met)"
expect "# k=8, outer [avg]: eager delayed DiLoCo at most 2.00 points below blocking DiLoCo at epochs 1,2,3 (naive delayed: 5.00)"
expect "     8 0.2             0.8690      0.50    0.8600      5.00"
expect "# k=8: eager at outer lr 0.2 ends 0.10 points below blocking DiLoCo, at most 0.50 below at a whole epoch (target <= 0.2 and <= 1: met)"
grep -A3 "(blocking DiLoCo)" <<<"$out" | head -3 | tail -2 | awk '{ print $2 }' | tr '\n' ' ' | grep -qx "0.2 0.4 " ||
  { echo "FAILED: the outer-lr rows are not in lr order"; exit 1; }
expect "# PyTorch's best to 0.86: PostLocalSGD k=32, 100.0 s"
expect "# cocod's best to 0.86: CoCoD-SGD+dauto k=8, 40.0 s"
expect "# target: cocod's best 2.50x sooner than PyTorch's best (f = 0.500: at least 2.00x): met"
expect "# k=8: CoCoD-SGD+dauto ends at 0.8690, Local-SGD at 0.8700: -0.10 points (target >= -0.2: met)"
expect "# k=16: CoCoD-SGD+dauto ends at 0.8600, Local-SGD at 0.8680: -0.80 points (target >= -0.2: NOT met)"
expect "  PyTorch PostLocalSGD k=32                     32   50.00   4000.0   213.33   50.00  0.500     100.0    2.00  0.8700"
expect "# race: a verdict NOT met"
# cocod's best 1.5x later: 100 / 60 = 1.67x, short of 2x
sed -i 's/^\(cocod [^,]*\),10mbit,2,\(40\|45\),0.86$/\1,10mbit,2,60,0.86/' "$work"/race_mlp_10mbit*_curve.csv
out=$(/usr/bin/python3 "$src/benchmarks/peers/race_table.py" "$work")
expect "# target: cocod's best 1.67x sooner than PyTorch's best (f = 0.500: at least 2.00x): NOT met"
# no PyTorch run reaches the target: its shortest run (150 s, f = 0.5) bounds its time, 2.50x
sed -i 's/^\(PyTorch [^,]*,10mbit,[0-9]*,[0-9]*\),.*/\1,0.85/' "$work/race_mlp_10mbit_curve.csv"
out=$(/usr/bin/python3 "$src/benchmarks/peers/race_table.py" "$work")
expect "# target: cocod's best at least 2.50x sooner than PyTorch (whose shortest run, PostLocalSGD k=32, ended at 150.0 s without reaching it; f = 0.500: at least 2.00x): met"
# the sweep part alone: no PyTorch run at this link, no verdict on it
rm "$work"/race_mlp_10mbit_*.csv
out=$(/usr/bin/python3 "$src/benchmarks/peers/race_table.py" "$work")
expect "# target: no PyTorch run at this link (its part, 10mbit, is not there; no verdict)"
echo "race_table: OK"
