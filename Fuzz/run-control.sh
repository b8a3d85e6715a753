#!/usr/bin/env bash
# Fuzz the control socket's request decoder, and the policy engine behind it, with libFuzzer.
#
#   Fuzz/run-control.sh [SECONDS]      (default 60)
#
# Builds Sources/UnlockPolicy (with Formatting, TypedJSON and StepHistoryStore built as modules, Fuzz/modules.sh) + the decoder (Sources/StepGateDaemon/ControlCommand.swift) +
# Fuzz/ControlFuzz.swift with -sanitize=fuzzer,address into .build/control-fuzz, seeds a corpus in
# fuzz-out/control-corpus with one request of each kind, and runs for SECONDS. Crashes land in
# fuzz-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=fuzz-out
corpus="$out/control-corpus"
mkdir -p .build "$corpus"

source Fuzz/modules.sh
swiftc "${fuzz_flags[@]}" "${module_flags[@]}" -module-name ControlFuzz -D CONTROL_FUZZ \
    Sources/UnlockPolicy/*.swift Sources/StepGateDaemon/ControlCommand.swift Fuzz/ControlFuzz.swift "${module_objects[@]}" -o .build/control-fuzz

i=0
while IFS= read -r line; do
    i=$((i + 1))
    printf '%s' "$line" > "$corpus/seed-$i.json"
done <<'SEEDS'
{"command":"status"}
{"command":"ping"}
{"command":"check","executable":"/usr/games/x","resolved":"/usr/games/x"}
{"command":"lock","store":"games","minutes":120}
{"command":"lock","store":"games","minutes":"1e300"}
{"command":"skip","schedule":"night","occurrence":"2025-03-01"}
{"command":"skip","schedule":"night"}
{"command":"emergency","store":"games"}
{"command":"reload"}
SEEDS

exec .build/control-fuzz "$corpus" -max_total_time="$seconds" -max_len=4096 -artifact_prefix="$out/" -print_final_stats=1
