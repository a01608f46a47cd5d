#!/usr/bin/env bash
# Every script answers --help: exit 0, a usage naming the script, nothing on stderr, and nothing
# started. The scripts run from a copy of scripts/ and benchmarks/ in WORKDIR, with stubs first
# on PATH for every tool a script could start (cmake, apt-get, dpkg-query, mpiexec, ...): a stub
# that is called, or a build/ or results/ folder that appears in the copy, fails the test.
# Scripts that parse options must also reject an unknown one with exit status 2, naming it.
#   scripts_help.sh SOURCE_DIR WORKDIR
set -euo pipefail
src="$1" work="$2"
rm -rf "$work"
mkdir -p "$work/tree/benchmarks/peers" "$work/stubs"
cp -r "$src/scripts" "$work/tree/"
cp "$src/benchmarks/run" "$src"/benchmarks/*.sh "$work/tree/benchmarks/"
cp "$src"/benchmarks/peers/*.sh "$work/tree/benchmarks/peers/"
log="$work/started.log"
: >"$log"
for tool in cmake ctest make gmake g++ c++ cc gcc nvcc apt-get apt dpkg-query dpkg sudo mpiexec mpirun \
            gnuplot doxygen ip tc python3 nvidia-smi timeout; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 97\n' "$tool" "$log" >"$work/stubs/$tool"
  chmod +x "$work/stubs/$tool"
done
# scripts/fuzz builds with clang.
for tool in clang++ clang++-14; do
  printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 97\n' "$tool" "$log" >"$work/stubs/$tool"
  chmod +x "$work/stubs/$tool"
done

# Every executable script: scripts/*, benchmarks/run, benchmarks/*.sh and benchmarks/peers/*.sh
# (lib.sh is sourced, not run).
cd "$work/tree"
scripts=()
for f in scripts/* benchmarks/run benchmarks/*.sh benchmarks/peers/*.sh; do
  [ -f "$f" ] && [ "$(head -c 2 "$f")" = "#!" ] && scripts+=("$f")
done
[ ${#scripts[@]} -ge 8 ] || { echo "FAILED: found only ${#scripts[@]} scripts: ${scripts[*]}"; exit 1; }

failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
for s in "${scripts[@]}"; do
  before=$failures
  for flag in --help -h; do
    : >"$log"
    rc=0
    PATH="$work/stubs:$PATH" OUT= bash "$s" "$flag" >"$work/out.txt" 2>"$work/err.txt" </dev/null || rc=$?
    [ "$rc" -eq 0 ] || fail "$s $flag: exit status $rc"
    grep -q -- "$s" "$work/out.txt" || fail "$s $flag: no usage line naming $s"
    ! grep -qE '^(set -|source |usage\(\))' "$work/out.txt" || fail "$s $flag: prints code: $(grep -E '^(set -|source )' "$work/out.txt")"
    [ ! -s "$work/err.txt" ] || fail "$s $flag: writes to stderr: $(head -3 "$work/err.txt")"
    [ ! -s "$log" ] || fail "$s $flag: started $(tr '\n' ';' <"$log")"
    for d in build results .deps; do
      [ ! -e "$d" ] || { fail "$s $flag: created $d/"; rm -rf "$d"; }
    done
  done
  # Options: an unknown one is refused (exit 2) by name. scripts/test passes its arguments to ctest.
  if [ "$s" = scripts/test ]; then [ "$failures" -eq "$before" ] && echo "ok: $s (--help, -h)"; continue; fi
  : >"$log"
  rc=0
  PATH="$work/stubs:$PATH" OUT= bash "$s" --no-such-option >"$work/out.txt" 2>"$work/err.txt" </dev/null || rc=$?
  [ "$rc" -eq 2 ] || fail "$s --no-such-option: exit status $rc, not 2"
  grep -q -- "--no-such-option" "$work/err.txt" || fail "$s --no-such-option: the message does not name it: $(head -3 "$work/err.txt")"
  [ ! -s "$log" ] || fail "$s --no-such-option: started $(tr '\n' ';' <"$log")"
  [ "$failures" -eq "$before" ] && echo "ok: $s (--help, -h, --no-such-option)"
done
[ "$failures" -eq 0 ] || { echo "scripts --help: $failures failure(s)"; exit 1; }
echo "scripts --help: OK (${#scripts[@]} scripts)"
