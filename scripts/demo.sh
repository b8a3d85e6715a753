#!/usr/bin/env bash
# Builds StepGate (release) and counts the steps in the bundled sample walk.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
swift build -c release --product stepgate >&2
exec .build/release/stepgate replay "${@:-samples/walk-wrist-100.csv}"
