#!/usr/bin/env bash
# Fuzz the policy's configuration and state-file parsers with libFuzzer.
#
#   Fuzz/run-policy.sh [SECONDS]      (default 60)
#
# Builds Sources/UnlockPolicy (with Formatting, TypedJSON and StepHistoryStore built as modules, Fuzz/modules.sh) + Fuzz/PolicyFuzz.swift with -sanitize=fuzzer,address into
# .build/policy-fuzz, seeds a corpus in fuzz-out/policy-corpus from the sample and scenario
# configurations and a state file, and runs for SECONDS. Crashes land in fuzz-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=fuzz-out
corpus="$out/policy-corpus"
mkdir -p .build "$corpus"

source Fuzz/modules.sh
swiftc "${fuzz_flags[@]}" "${module_flags[@]}" -module-name PolicyFuzz \
    Sources/UnlockPolicy/*.swift Fuzz/PolicyFuzz.swift "${module_objects[@]}" -o .build/policy-fuzz

cp samples/policy.example.json "$corpus/" 2>/dev/null || true
for f in Tests/UnlockPolicyTests/Scenarios/configs/*.json; do cp "$f" "$corpus/config-$(basename "$f")"; done
cat > "$corpus/state.json" <<'STATE'
{
  "version": 2,
  "elapsedSeconds": 2700.5,
  "lastSeen": {"wall": "2025-03-01T22:15:00Z", "monotonicSeconds": 2701, "bootID": "boot-a"},
  "systemTimeZone": "Europe/Berlin",
  "stores": {
    "games": {
      "gate": {"steps": 30, "tier": -1, "lockedSince": "2025-03-01T22:15:00Z",
               "unlock": {"start": "2025-03-01T21:30:00Z", "startElapsedSeconds": 0, "lengthSeconds": 1800,
                          "wallDeadline": "2025-03-01T22:00:00Z", "warnedSeconds": 300}},
      "unlocks": [{"at": "2025-03-01T21:30:00Z", "elapsedSeconds": 0}],
      "manualLock": {"by": "dana", "window": {"start": "2025-03-01T21:30:00Z", "startElapsedSeconds": 0,
                                               "lengthSeconds": 5400}},
      "occurrences": {"night@2025-03-01": {"steps": 30, "ends": "2025-03-02T06:00:00Z"}}
    }
  },
  "skips": [{"occurrence": "night@2025-03-02", "until": "2025-03-03T06:00:00Z"}],
  "emergencyUses": [{"store": "games", "by": "dana", "at": "2025-03-01T21:30:00.250Z", "elapsedSeconds": 0}]
}
STATE

exec .build/policy-fuzz "$corpus" -max_total_time="$seconds" -max_len=8192 -artifact_prefix="$out/" -print_final_stats=1
