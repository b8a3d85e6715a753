#!/usr/bin/env bash
# Everything CI checks: dependencies, formatting, a warnings-as-errors build, the tests, and the
# system test where QEMU and mmdebstrap are installed and the time allows.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
bash scripts/install-deps.sh
echo "== swift format lint" >&2
swift format lint --strict --recursive Sources Tests Package.swift
echo "== build (warnings are errors)" >&2
swift build --build-tests -Xswiftc -warnings-as-errors --explicit-target-dependency-import-check error
# The live IIO suite feeds an emulated device in real time and checks the latency of each step,
# so it runs alone first: in parallel with the fork-heavy shield suites on a 2-core machine the
# measured run fell seconds behind its input. Then everything else, in parallel.
echo "== tests: live IIO input, alone" >&2
swift test --skip-build --filter LiveIIOTests
echo "== tests: the rest" >&2
swift test --skip-build --skip LiveIIOTests
# The package installed on a booted Debian machine (QEMU, Debian's kernel, systemd, a real
# accelerometer driver): the short version of scripts/system-test.sh, where QEMU and mmdebstrap
# are installed, and only while CI stays inside its budget (28 minutes on 2 cores): the time so
# far plus the system test's last duration on this machine (20 minutes before its first run: a
# release build, the bookworm root and two boots). The root and the release build are kept in
# /var/cache/stepgate-system-test between runs. On demand for now (STEPGATE_SYSTEM_TEST=1): a
# stop of the daemon while a gated launch is pending can hang in the kernel (the exec shield's
# two fanotify groups; see docs/install.md), and a run that meets it hangs its purge step until
# QEMU's time limit.
elapsed=$(($(date +%s) - started))
estimate=$(cat /var/cache/stepgate-system-test/last-seconds 2>/dev/null || echo 1200)
if [ "${STEPGATE_SYSTEM_TEST:-}" != 1 ]; then
    echo "== system test skipped: on demand (STEPGATE_SYSTEM_TEST=1 bash scripts/test.sh, or bash scripts/system-test.sh) until a stop with a launch pending cannot hang" >&2
elif ! command -v qemu-system-x86_64 >/dev/null || ! command -v mmdebstrap >/dev/null || [ "$(id -u)" -ne 0 ]; then
    echo "== system test skipped: needs root, qemu-system-x86_64 and mmdebstrap (apt-get install qemu-system-x86 qemu-utils mmdebstrap)" >&2
elif [ $((elapsed + estimate)) -gt 1680 ]; then
    echo "== system test skipped: $((elapsed / 60)) min so far and about $((estimate / 60)) min for it would pass CI's 28 minutes (run: bash scripts/system-test.sh)" >&2
else
    echo "== system test (short): scripts/system-test.sh" >&2
    bash scripts/system-test.sh
fi
