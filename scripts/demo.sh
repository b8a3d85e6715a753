#!/usr/bin/env bash
# Builds StepGate (release) and counts the steps in the bundled sample walk, or in the files
# given (paths relative to where the script was run from).
set -euo pipefail
here="$PWD"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
bash scripts/install-deps.sh
swift build -c release --product stepgate >&2
if [ "$#" -eq 0 ]; then
    exec "$root/.build/release/stepgate" replay samples/walk-wrist-100.csv
fi
cd "$here"
exec "$root/.build/release/stepgate" replay "$@"
