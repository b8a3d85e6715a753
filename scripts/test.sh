#!/usr/bin/env bash
# Everything CI checks: dependencies, formatting, a warnings-as-errors build, the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
echo "== swift format lint" >&2
swift format lint --strict --recursive Sources Tests Package.swift
echo "== build (warnings are errors)" >&2
swift build --build-tests -Xswiftc -warnings-as-errors --explicit-target-dependency-import-check error
echo "== tests" >&2
swift test --skip-build
