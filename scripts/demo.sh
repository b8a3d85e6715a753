#!/usr/bin/env bash
# Builds StepGate (release) and counts the steps in the bundled sample walk, or in the files
# given (paths relative to where the script was run from). STEPGATE_DEMO_BINARY names a
# stepgate to use instead of building one (the tests use it).
set -euo pipefail
here="$PWD"
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
stepgate="${STEPGATE_DEMO_BINARY:-}"
if [ -z "$stepgate" ]; then
    bash scripts/install-deps.sh --build  # only what building needs: no broker, no test tools
    swift build -c release >&2  # both executables: stepgate and stepgate-full
    stepgate="$root/.build/release/stepgate"
fi
if [ "$#" -eq 0 ]; then
    exec "$stepgate" replay samples/walk-wrist-100.csv
fi
cd "$here"
exec "$stepgate" replay "$@"
