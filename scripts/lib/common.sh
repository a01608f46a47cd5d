# Shared by scripts/test and scripts/demo: install missing Debian packages, configure, build.
# shellcheck shell=bash

COCOD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# ensure_packages PKG...: installs the packages that are not installed yet (apt, as root or
# through sudo). Prints what it does; does nothing when all are present.
ensure_packages() {
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      echo "error: packages missing (${missing[*]}) and not root; install them or run as root" >&2
      return 1
    fi
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The packages every build needs.
COCOD_BASE_PACKAGES=(cmake make g++ libeigen3-dev libcli11-dev)

# configure_and_build BUILD_DIR [cmake args...]: Release build of the tree into BUILD_DIR.
configure_and_build() {
  local dir="$1"; shift
  cmake -S "$COCOD_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$dir" --parallel "$(nproc)"
}
