#!/usr/bin/env bash
# The API reference builds without a Doxygen warning about the public headers' comments:
# scripts/api-docs --strict into WORKDIR. Exits 77 (skipped) when doxygen is not installed.
#   api_docs_check.sh SOURCE_DIR WORKDIR
set -euo pipefail
src="$1" work="$2"
if ! command -v doxygen >/dev/null 2>&1; then
  echo "doxygen is not installed (Debian: apt-get install doxygen; scripts/test installs it): docs.api_reference skipped"
  exit 77
fi
rm -rf "$work"
rc=0
"$src/scripts/api-docs" --out "$work" --strict || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAILED: the API reference does not build cleanly (scripts/api-docs exit status $rc)"
  exit 1
fi
# The public API is there, the internal headers are not.
for page in classcocod_1_1comm_1_1Threads.html classcocod_1_1callbacks_1_1ProgressBar.html structcocod_1_1Options.html; do
  [ -f "$work/$page" ] || { echo "FAILED: no $page in the reference"; exit 1; }
done
if grep -lE "<title>[^<]*/(detail|backend/cuda) Directory Reference" "$work"/dir_*.html 2>/dev/null; then
  echo "FAILED: internal headers (detail/, backend/cuda/) are in the reference"
  exit 1
fi
echo "API reference: OK ($(ls "$work"/*.html | wc -l) pages, no warnings)"
