#!/usr/bin/env bash
# What a user runs first, in the configuration that user has: each CONFIG configures a fresh
# build of the tree with only some optional parts, builds only what it runs (at -O1, to keep the
# suite short; the programs are the same), and runs it as the README and the help texts say.
#
#   first_contact.sh CONFIG SOURCE_DIR WORKDIR [CUDA_EXAMPLE]
#
#   readme   the README's quick start as written: its install recipe on a tree that was never
#            built (a copy of the sources, $HOME in WORKDIR), then its two files built against
#            that prefix, printing what the README says they print
#   minimal  Eigen and CLI11 only (no Gloo, MPI, libtorch, CUDA): scripts/demo itself from a clean
#            configuration (short --epochs), each example's --help and smallest valid run, the
#            coordinator's --help, and the flags of the parts compiled out refused by name with
#            what to install; --data's wrong folder (exit 2) and damaged files (exit 1)
#   mpi      MPI alone: least_squares over 2 MPI processes; --comm gloo refused, naming libgloo-dev
#   gloo     Gloo alone: least_squares as 2 processes over TCP; --comm mpi refused, naming
#            libboost-mpi-dev
#   torch    libtorch alone: torch_fashion_mnist trains; --comm gloo and mpi refused
#   cuda     CUDA_EXAMPLE (cuda_least_squares, built by nvcc): a valid run trains on a GPU, and
#            without one ends with exit status 1 and a message naming the missing device
set -uo pipefail
config="$1" src="$2" work="$3"
rm -rf "$work"
mkdir -p "$work"
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# expect RC REGEX [NOT_REGEX] -- COMMAND...: runs COMMAND (output in $work/last.log); it must exit
# with RC, print something matching REGEX, and nothing matching NOT_REGEX.
expect() {
  local rc="$1" want="$2" lacks="" got
  shift 2
  if [ "$1" != "--" ]; then lacks="$1"; shift; fi
  shift
  timeout 300 "$@" >"$work/last.log" 2>&1
  got=$?
  if [ "$got" != "$rc" ]; then
    fail "$* exited with $got, not $rc:"; tail -20 "$work/last.log"; return
  fi
  if ! grep -Eq -- "$want" "$work/last.log"; then
    fail "$*: no line matches '$want':"; tail -20 "$work/last.log"; return
  fi
  if [ -n "$lacks" ] && grep -Eq -- "$lacks" "$work/last.log"; then
    fail "$*: prints what it should not ('$lacks'):"; grep -E -- "$lacks" "$work/last.log" | head -5; return
  fi
  ok "$* (exit $rc)"
}

# configure_only NAME CMAKE_ARGS...: a fresh build folder with the examples, nothing built yet.
configure_only() {
  local dir="$work/$1"
  shift
  cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1" -DCOCOD_BUILD_TESTS=OFF \
    -DCOCOD_BUILD_BENCHMARKS=OFF -DCOCOD_BUILD_EXAMPLES=ON "$@" >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; echo "FAILED: configure $*"; exit 1; }
}
build() {  # build DIR TARGET...
  local dir="$1"
  shift
  cmake --build "$dir" --parallel 2 --target "$@" >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log"; echo "FAILED: build $*"; exit 1; }
}

gloo_hint="needs cocod built with Gloo \(Debian: apt-get install libgloo-dev"
mpi_hint="needs cocod built with MPI \(Debian: apt-get install libboost-mpi-dev"
run_as_root=()
[ "$(id -u)" -eq 0 ] && run_as_root=(--allow-run-as-root)

case "$config" in
  readme)
    # A tree that was never built, as a clone is: the tracked files (or every file but build/).
    tree="$work/cocod"
    mkdir -p "$tree"
    if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
      (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree" 2>/dev/null)
    else
      (cd "$src" && tar --exclude=./build --exclude=./results -cf - .) | (cd "$tree" && tar -xf -)
    fi
    # The README's blocks: the recipe (the block that starts with its apt-get line) and the build
    # of the quick start (the block after "Build and run it from that folder").
    block_after() { awk -v pat="$1" 'found && /^```/ { if (inside) exit; inside = 1; next } inside { print } index($0, pat) { found = 1 }' "$src/README.md"; }
    recipe="$(awk '/^```/ { if (inside) exit; if (take) inside = 1; next } inside { print } /^Install cocod into a prefix/ { take = 1 }' "$src/README.md")"
    build_it="$(block_after "Build and run it from that folder")"
    [ -n "$recipe" ] && [ -n "$build_it" ] || { echo "FAILED: the README's quick start blocks were not found"; exit 1; }
    printf '%s\n' "$recipe" >"$work/recipe.sh"
    printf '%s\n' "$build_it" >"$work/build_it.sh"
    # `sudo apt-get install` as the README says; as root without sudo, the same command without it.
    prelude='set -euo pipefail'
    if [ "$(id -u)" -eq 0 ] && ! command -v sudo >/dev/null; then prelude+=$'\nsudo() { "$@"; }'; fi
    if [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then  # (no way to install: only check that it is there)
      prelude+=$'\nsudo() { echo "(not root: skipped: $*)"; }'
    fi
    export HOME="$work/home"
    mkdir -p "$HOME"
    expect 0 "Installing: .*/include/cocod.hpp" "not built|cannot find" -- bash -c "$prelude"$'\n'"cd '$tree'"$'\n'"$(cat "$work/recipe.sh")"
    [ -f "$HOME/.local/share/cmake/cocod/cocodConfig.cmake" ] || fail "the recipe did not install the package into \$HOME/.local"
    # "Then put these two files into an empty folder": the files the README shows (package.readme
    # checks that it shows them byte for byte).
    mkdir -p "$work/quickstart"
    cp "$tree/examples/quickstart/CMakeLists.txt" "$tree/examples/quickstart/main.cpp" "$work/quickstart/"
    expect 0 "model digest: " -- bash -c "$prelude"$'\n'"cd '$work/quickstart'"$'\n'"$(cat "$work/build_it.sh")"
    # What the README says it prints.
    said="$(grep -o 'It prints `y = [^`]*`' "$src/README.md" | sed 's/It prints `//; s/`$//')"
    digest="$(grep -o 'model digest: [0-9a-f]\{16\}' "$src/README.md" | head -1)"
    grep -qxF "$said" "$work/last.log" || fail "the quick start does not print the README's '$said'"
    grep -qxF "$digest" "$work/last.log" || fail "the quick start does not print the README's '$digest'"
    ;;

  minimal)
    dir="$work/build"
    # scripts/demo --help says what it installs: every package it asks apt for.
    expect 0 "Installs with apt-get" -- "$src/scripts/demo" --help
    wanted="$(source "$src/scripts/lib/common.sh"; echo "${COCOD_BASE_PACKAGES[*]}")"
    wanted+=" $(grep -o 'ensure_packages .*' "$src/scripts/demo" | grep -o ' [a-z0-9][a-z0-9.+-]*' | tr '\n' ' ')"
    wanted+=" $(grep -o 'packages+\?=([^)]*)' "$src/scripts/demo" | sed 's/.*(//; s/)//' | tr '\n' ' ')"
    for package in $wanted; do
      grep -qw -- "$package" "$work/last.log" || fail "scripts/demo --help does not name $package, which it installs"
    done
    # The other programs are built in a second tree of the same configuration while the demo
    # builds its own (each is one compilation: the two builds use both cores).
    minimal=(-DCOCOD_WITH_GLOO=OFF -DCOCOD_WITH_MPI=OFF -DCOCOD_WITH_TORCH=OFF)
    more="$work/build-more"
    (configure_only build-more "${minimal[@]}" && build "$more" least_squares logistic_regression cocod-coordinator) \
      >"$work/build-more.log" 2>&1 &
    building=$!
    # scripts/demo itself, as a user without Gloo, MPI and libtorch runs it (the packages it
    # installs are there: nothing is installed), from a clean configuration, a short run.
    expect 0 "== curve: .*accuracy.png" -- env COCOD_DEMO_BUILD="$dir" \
      COCOD_DEMO_CMAKE_ARGS="${minimal[*]} -DCMAKE_CXX_FLAGS_RELEASE=-O1" \
      "$src/scripts/demo" --epochs 0.05 --out "$work/demo"
    cp "$work/last.log" "$work/demo.log"
    for algorithm in CoCoD-SGD S-SGD Local-SGD Pipe-SGD; do
      grep -Eq "^ *$algorithm +" "$work/demo.log" || fail "the demo's table has no row of $algorithm"
    done
    [ -s "$work/demo/accuracy.png" ] && [ -s "$work/demo/curve.csv" ] || fail "the demo wrote no curve or plot"
    grep -q "COCOD_WITH_GLOO:BOOL=OFF" "$dir/CMakeCache.txt" || fail "the demo's build is not the minimal configuration"
    wait "$building" || { cat "$work/build-more.log"; echo "FAILED: the build of the other programs"; exit 1; }
    for exe in "$more/examples/least_squares/least_squares" "$more/examples/logistic_regression/logistic_regression" \
               "$dir/examples/fashion_mnist/fashion_mnist"; do
      expect 0 "--epochs" "--store|--mpi-|--comm gloo|elastic:" -- "$exe" --help
      expect 0 "model digest CoCoD-SGD: [0-9a-f]{16}" -- "$exe" --epochs 0.05 --no-progress
      expect 2 "--comm: gloo $gloo_hint" -- "$exe" --comm gloo --rank 0 --store 127.0.0.1:29500
      expect 2 "--comm: elastic $gloo_hint" -- "$exe" --comm elastic
      expect 2 "--store $gloo_hint" -- "$exe" --store 127.0.0.1:29500
      expect 2 "--serve-store $gloo_hint" -- "$exe" --serve-store
      expect 2 "--comm: mpi $mpi_hint" -- "$exe" --comm mpi
      expect 2 "--mpi-stall-timeout $mpi_hint" -- "$exe" --mpi-stall-timeout 5
    done
    expect 0 "--port" -- "$more/tools/cocod-coordinator" --help
    # --data: a wrong folder is a usage error that names the flag and no package; damaged files
    # are named, and Debian's package is not suggested for a folder of one's own.
    fm="$dir/examples/fashion_mnist/fashion_mnist"
    expect 2 "--data: no folder '$work/nowhere'" "apt-get" -- "$fm" --data "$work/nowhere" --epochs 0.05
    mkdir -p "$work/damaged"
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
      echo "not gzip" >"$work/damaged/$f"
    done
    expect 1 "train-images-idx3-ubyte.gz: .*a damaged file" "apt-get" -- "$fm" --data "$work/damaged" --epochs 0.05
    rm "$work/damaged/t10k-labels-idx1-ubyte.gz"
    expect 2 "--data: '$work/damaged' has no t10k-labels-idx1-ubyte.gz" "apt-get" -- "$fm" --data "$work/damaged"
    ;;

  mpi)
    dir="$work/build"
    configure_only build -DCOCOD_WITH_GLOO=OFF -DCOCOD_WITH_TORCH=OFF -DCOCOD_BUILD_TOOLS=OFF
    build "$dir" least_squares
    exe="$dir/examples/least_squares/least_squares"
    expect 0 "mpi: one worker per MPI process" "--store" -- "$exe" --help
    expect 0 "model digest CoCoD-SGD: [0-9a-f]{16}" -- mpiexec "${run_as_root[@]}" --oversubscribe -n 2 "$exe" --comm mpi --epochs 0.2 --no-progress
    expect 2 "--comm: gloo $gloo_hint" -- "$exe" --comm gloo
    ;;

  gloo)
    dir="$work/build"
    configure_only build -DCOCOD_WITH_MPI=OFF -DCOCOD_WITH_TORCH=OFF -DCOCOD_BUILD_TOOLS=OFF
    build "$dir" least_squares
    exe="$dir/examples/least_squares/least_squares"
    expect 0 "--store HOST:PORT" "--mpi-" -- "$exe" --help
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    common=(--comm gloo --workers 2 --store "127.0.0.1:$port" --epochs 0.2 --no-progress --connect-timeout 60)
    timeout 300 "$exe" "${common[@]}" --rank 1 >"$work/rank1.log" 2>&1 &
    rank1=$!
    expect 0 "model digest CoCoD-SGD: [0-9a-f]{16}" -- "$exe" "${common[@]}" --rank 0 --serve-store
    wait "$rank1" && ok "rank 1 ended with exit 0" || { fail "rank 1 failed:"; tail -20 "$work/rank1.log"; }
    expect 2 "--comm: mpi $mpi_hint" -- "$exe" --comm mpi
    ;;

  torch)
    dir="$work/build"
    configure_only build -DCOCOD_WITH_MPI=OFF -DCOCOD_WITH_GLOO=OFF -DCOCOD_BUILD_TOOLS=OFF
    grep -q "COCOD_WITH_TORCH:BOOL=ON" "$dir/CMakeCache.txt" || fail "libtorch is not on"
    build "$dir" torch_fashion_mnist
    exe="$dir/examples/torch_fashion_mnist/torch_fashion_mnist"
    expect 0 "--torch-threads" "--store|--mpi-" -- "$exe" --help
    expect 0 "model digest CoCoD-SGD: [0-9a-f]{16}" -- "$exe" --algo cocod --workers 2 --epochs 0.01 --no-progress
    expect 2 "--comm: gloo $gloo_hint" -- "$exe" --comm gloo
    expect 2 "--comm: mpi $mpi_hint" -- "$exe" --comm mpi
    ;;

  cuda)
    exe="$4"
    if nvidia-smi -L >/dev/null 2>&1; then
      expect 0 "model digest CoCoD-SGD: [0-9a-f]{16}" -- "$exe" --epochs 0.5 --no-progress
    else
      expect 1 "no usable CUDA device" "terminate|Abort" -- "$exe" --epochs 0.5 --no-progress
    fi
    expect 2 "--comm: gloo is not taken by the CUDA example" -- "$exe" --comm gloo
    ;;

  *) echo "first_contact.sh: unknown configuration '$config'" >&2; exit 2 ;;
esac
[ "$failures" -eq 0 ] && echo "first contact ($config): every check passed" || { echo "first contact ($config): $failures failed"; exit 1; }
