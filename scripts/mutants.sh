#!/usr/bin/env bash
# Mutation check of the core: applies small deliberate bugs (mutants) one at a time, runs the
# tests of the module each one is in, and reports which mutants the tests killed (a test
# failed) and which survived. Every mutant is undone afterwards, also on Ctrl-C or an error.
#
#   bash scripts/mutants.sh [NAME...]      (default: every mutant; --list shows them)
#
# Each mutant is one sed expression on one file, and must change that file (a mutant that no
# longer applies is reported as stale, so the list cannot rot silently). Takes about a minute
# to a few minutes per mutant on 2 cores (an incremental build and the module's tests).
set -euo pipefail
cd "$(dirname "$0")/.."

# name ::: file ::: sed expression (applied to the file) ::: test filter (swift test --filter)
mutants=(
    # Unlock policy
    "gate-goal-off-by-one ::: Sources/UnlockPolicy/PolicyEngine.swift ::: s/guard let reached = gate.goals.lastIndex(where: { g.steps >= \$0.steps })/guard let reached = gate.goals.lastIndex(where: { g.steps > \$0.steps })/ ::: UnlockPolicyTests"
    "daily-cap-one-more ::: Sources/UnlockPolicy/PolicyEngine.swift ::: s/if let cap = gate.dailyUnlockCap, counted.count >= cap {/if let cap = gate.dailyUnlockCap, counted.count > cap {/ ::: UnlockPolicyTests"
    "emergency-allowance-one-more ::: Sources/UnlockPolicy/PolicyEngine.swift ::: s/guard recent.count < allowance else {/guard recent.count <= allowance else {/ ::: UnlockPolicyTests"
    "gate-window-never-ends ::: Sources/UnlockPolicy/PolicyEngine.swift ::: s/if let w = s.gate.window, w.remaining(ledger: ledger, wall: wall) <= 0 {/if let w = s.gate.window, w.remaining(ledger: ledger, wall: wall) < -60_000 {/ ::: UnlockPolicyTests"
    "skip-after-midnight-marks-tomorrow ::: Sources/UnlockPolicy/ScheduleMath.swift ::: /func currentOrNextOccurrence/,/^    }/s/for day in (today - 1)...(today + 8) {/for day in today...(today + 8) {/ ::: UnlockPolicyTests"
    "window-containing-forgets-yesterday ::: Sources/UnlockPolicy/ScheduleMath.swift ::: s/for day in \[today - 1, today\] {/for day in [today] {/ ::: UnlockPolicyTests"
    # DST handling
    "repeated-hour-takes-the-second ::: Sources/UnlockPolicy/ScheduleMath.swift ::: s/best = min(best ?? candidate, candidate)/best = max(best ?? candidate, candidate)/ ::: UnlockPolicyTests"
    "skipped-hour-resolves-before-the-gap ::: Sources/UnlockPolicy/ScheduleMath.swift ::: s/        return hi \* 1000/        return lo * 1000/ ::: UnlockPolicyTests"
    # DurableFile
    "no-fsync-before-rename ::: Sources/StepHistoryStore/DurableFile.swift ::: /if calls.fsync(fd) != 0 { throw fail(\"cannot fsync\") }/d ::: SystemFilesTests"
    "no-fsync-of-the-folder ::: Sources/StepHistoryStore/DurableFile.swift ::: /if calls.fsync(dfd) != 0/d ::: SystemFilesTests"
    "rename-follows-a-link ::: Sources/StepHistoryStore/DurableFile.swift ::: s/            case S_IFLNK:/            case S_IFLNK where false:/ ::: SystemFilesTests"
    # Resampler
    "resampler-carries-a-partial-period ::: Sources/StepDetection/Resampler.swift ::: /mutating func start(time: Int64, value: Double)/,/^    }/{/accumulated = 0/d} ::: ResamplerTests"
    "resampler-bridges-long-gaps ::: Sources/StepDetection/Resampler.swift ::: s/if span < 0 || span > maximumGap {/if span < 0 || span > maximumGap * 4 {/ ::: ResamplerTests"
    "resampler-allows-backward-time ::: Sources/StepDetection/Resampler.swift ::: s/if span < 0 || span > maximumGap {/if span > maximumGap {/ ::: ResamplerTests"
    "resampler-time-off-centre ::: Sources/StepDetection/Resampler.swift ::: s/time: binEnd \&- period \/ 2)/time: binEnd)/ ::: ResamplerTests"
    # PeakDetector
    "peak-valley-side-ignored ::: Sources/StepDetection/PeakDetector.swift ::: s/} else if y > extreme + delta {/} else if y > extreme {/ ::: PeakDetectorTests"
    "peak-fall-side-ignored ::: Sources/StepDetection/PeakDetector.swift ::: s/} else if y < extreme - delta {/} else if y < extreme {/ ::: PeakDetectorTests"
    "peak-below-zero-counts ::: Sources/StepDetection/PeakDetector.swift ::: s/if extreme > 0 {/if extreme > -1 {/ ::: PeakDetectorTests"
    "peak-lower-replaces-higher ::: Sources/StepDetection/PeakDetector.swift ::: s/if let p = pending, p.height >= extreme {/if let p = pending, p.height >= extreme + 1 {/ ::: PeakDetectorTests"
    "peak-threshold-ignores-floor ::: Sources/StepDetection/PeakDetector.swift ::: s/public var threshold: Float { max(minimumHeight, ratio \* meanSquare.squareRoot()) }/public var threshold: Float { ratio * meanSquare.squareRoot() }/ ::: PeakDetectorTests"
)

if [ "${1:-}" = "--list" ]; then
    for m in "${mutants[@]}"; do echo "${m%% ::: *}"; done
    exit 0
fi
selected=("$@")

backup="$(mktemp -d "${TMPDIR:-/tmp}/stepgate-mutants.XXXXXX")"
current=""
restore() {
    if [ -n "$current" ]; then cp "$backup/original" "$current"; current=""; fi
}
trap 'restore; rm -rf "$backup"' EXIT
trap 'exit 130' INT TERM

echo "== baseline build" >&2
swift build --build-tests >&2

killed=0 survived=0 stale=0
survivors=()
for m in "${mutants[@]}"; do
    name="${m%% ::: *}" rest="${m#* ::: }"
    file="${rest%% ::: *}" rest="${rest#* ::: }"
    expression="${rest% ::: *}" filter="${rest##* ::: }"
    if [ "${#selected[@]}" -gt 0 ] && ! printf '%s\n' "${selected[@]}" | grep -qx "$name"; then continue; fi
    cp "$file" "$backup/original"
    current="$file"
    sed -i -e "$expression" "$file"
    if cmp -s "$file" "$backup/original"; then
        echo "STALE     $name: the expression no longer changes $file" >&2
        stale=$((stale + 1))
        restore
        continue
    fi
    if ! swift build --build-tests > "$backup/build.log" 2>&1; then
        echo "KILLED    $name (does not compile)"
        killed=$((killed + 1))
    # The property tests take most of the policy tests' time: run them only when the others
    # all pass (a mutant is killed by the first failing pass).
    elif swift test --skip-build --filter "$filter" --skip PropertyTests > "$backup/test.log" 2>&1 \
        && { [ "$filter" != UnlockPolicyTests ] \
            || swift test --skip-build --filter "$filter.PropertyTests" > "$backup/test.log" 2>&1; }; then
        echo "SURVIVED  $name ($filter passed)"
        survived=$((survived + 1))
        survivors+=("$name")
    else
        failing="$(grep -m1 -E '✘ Test [^r]' "$backup/test.log" | sed -E 's/.*✘ Test ([^ (]+).*/\1/' || true)"
        echo "KILLED    $name (${failing:-$filter failed})"
        killed=$((killed + 1))
    fi
    restore
done
echo "== restoring the build" >&2
swift build --build-tests > /dev/null 2>&1 || true

total=$((killed + survived))
if [ "$total" -gt 0 ]; then
    echo "kill rate: $killed of $total mutants ($((100 * killed / total)) %)${stale:+; $stale stale}"
fi
[ "${#survivors[@]}" -eq 0 ] || echo "survivors: ${survivors[*]}"
[ "$stale" -eq 0 ] && [ "$survived" -eq 0 ]
