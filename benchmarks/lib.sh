# Shared by the benchmark scripts: the tree, the build, and MPI jobs on the shaped link.
# shellcheck shell=bash
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/common.sh"  # COCOD_ROOT, ensure_packages

BENCH_BUILD="${BUILD:-$COCOD_ROOT/build/bench}"

# bench_help SCRIPT [ARG]: --help or -h prints SCRIPT's header comment (every '#' line after the
# first, up to the first code) and exits 0; another option exits 2, naming it.
bench_help() {
  case "${2:-}" in
    -h|--help) awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$1"; exit 0 ;;
    -*) echo "benchmarks/${1##*benchmarks/}: unknown option '$2' (see --help)" >&2; exit 2 ;;
  esac
}

# bench_require SCRIPT EXE: stops with a message when EXE has not been built.
bench_require() {
  [ -x "$2" ] || { echo "$1: no $2 (benchmarks/run builds it)" >&2; exit 1; }
}

# shaped SECONDS COMMAND...: COMMAND in a network namespace whose loopback is a tbf-shaped TCP
# link (RATE, default 1gbit; BURST, default 256kb, above the loopback's 64 KiB packets), killed
# after SECONDS. Needs root (scripts/shaped-link).
shaped() {
  local limit="$1"
  shift
  timeout "$limit" "$COCOD_ROOT/scripts/shaped-link" --rate "${RATE:-1gbit}" --burst "${BURST:-256kb}" -- "$@"
}

# shaped_mpiexec SECONDS RANKS COMMAND...: COMMAND on RANKS MPI processes, all in one shaped
# namespace, talking TCP over its loopback.
shaped_mpiexec() {
  local limit="$1" ranks="$2"
  shift 2
  shaped "$limit" mpiexec --allow-run-as-root --oversubscribe --mca btl tcp,self --mca btl_tcp_if_include lo \
    -n "$ranks" "$@"
}
