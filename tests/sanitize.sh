#!/usr/bin/env bash
# Builds the given tests in a tree of their own with sanitizers and runs them with ctest.
#   sanitize.sh SOURCE_DIR BUILD_DIR address|thread TEST_REGEX TARGET...
# address: AddressSanitizer + UndefinedBehaviorSanitizer (any report fails the test);
# thread:  ThreadSanitizer, with tests/tsan.supp (reports inside Open MPI only, see there).
set -euo pipefail
src="$1" dir="$2" kind="$3" regex="$4"
shift 4
case "$kind" in
  address) flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
           export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
           export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" ;;
  thread)  flags="-fsanitize=thread -fno-omit-frame-pointer"
           export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$src/tests/tsan.supp" ;;
  *) echo "sanitize.sh: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
esac
# -g1: lines in the reports. AddressSanitizer at -O0: it builds in about half the time of -O1,
# and its tests run in seconds either way (the build is what takes the time); ThreadSanitizer at
# -O1, where its tests run far faster. GCC 12 warns falsely of maybe-uninitialized at -O1
# (std::optional, std::string).
case "$kind" in address) level=-O0 ;; *) level=-O1 ;; esac
# Ninja where it is installed: it builds the targets named below in parallel, where a Makefile
# tree builds them one after the other (a tree configured with the other generator is redone).
generator="Unix Makefiles"
command -v ninja >/dev/null && generator=Ninja
if [ -f "$dir/CMakeCache.txt" ] && ! grep -qx "CMAKE_GENERATOR:INTERNAL=$generator" "$dir/CMakeCache.txt"; then
  rm -rf "$dir"
fi
cmake -S "$src" -B "$dir" -G "$generator" -DCMAKE_BUILD_TYPE=None \
  "-DCMAKE_CXX_FLAGS=$flags $level -g1 -Wno-maybe-uninitialized" \
  -DCOCOD_BUILD_TESTS=ON -DCOCOD_BUILD_EXAMPLES=OFF -DCOCOD_BUILD_BENCHMARKS=OFF -DCOCOD_ENABLE_CUDA=OFF >/dev/null
cmake --build "$dir" --parallel 2 --target "$@"
cd "$dir"
ctest --output-on-failure --timeout 900 -R "$regex"
