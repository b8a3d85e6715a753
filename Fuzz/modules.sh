# Sourced by the fuzz scripts: builds the modules the policy engine imports (Formatting,
# TypedJSON, StepHistoryStore) with the fuzzer's flags into .build/fuzz-modules, and sets `module_flags` (search
# path) and `module_objects` (objects to link) for the target's own swiftc line.
fuzz_flags=(-sanitize=fuzzer,address -parse-as-library -O -package-name stepgate)
modules=.build/fuzz-modules
mkdir -p "$modules"
swiftc "${fuzz_flags[@]}" -wmo -module-name Formatting -emit-module -emit-module-path "$modules/Formatting.swiftmodule" \
    -c Sources/Formatting/*.swift -o "$modules/Formatting.o"
swiftc "${fuzz_flags[@]}" -wmo -module-name TypedJSON -I "$modules" \
    -emit-module -emit-module-path "$modules/TypedJSON.swiftmodule" \
    -c Sources/TypedJSON/*.swift -o "$modules/TypedJSON.o"
swiftc "${fuzz_flags[@]}" -enable-upcoming-feature InternalImportsByDefault -wmo -module-name StepHistoryStore -I "$modules" \
    -emit-module -emit-module-path "$modules/StepHistoryStore.swiftmodule" \
    -c Sources/StepHistoryStore/*.swift -o "$modules/StepHistoryStore.o"
module_flags=(-I "$modules")
module_objects=("$modules/Formatting.o" "$modules/TypedJSON.o" "$modules/StepHistoryStore.o")
