#!/usr/bin/env bash
# Builds the RecordingReader libFuzzer target and runs it.
#   Fuzz/run.sh [seconds] [extra libFuzzer flags...]     (default 120 s)
# Output (corpus, crash artifacts, build) goes to fuzz-out/ at the package root (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
shift || true
out="${FUZZ_OUT:-fuzz-out}"
build="$out/build"
mkdir -p "$build" "$out/corpus" "$out/artifacts"

flags=(-sanitize=fuzzer,address -parse-as-library -g -O -swift-version 6
    -enable-upcoming-feature ExistentialAny
    -enable-upcoming-feature MemberImportVisibility
    -enable-upcoming-feature InternalImportsByDefault)

echo "building StepDetection, SensorInput and the fuzz target…"
swiftc "${flags[@]}" -wmo -module-name StepDetection -emit-module -emit-module-path "$build/StepDetection.swiftmodule" \
    -c Sources/StepDetection/*.swift -o "$build/StepDetection.o"
swiftc "${flags[@]}" -wmo -enable-testing -module-name SensorInput -I "$build" -I Sources/CLibIIO \
    -emit-module -emit-module-path "$build/SensorInput.swiftmodule" \
    -c Sources/SensorInput/*.swift -o "$build/SensorInput.o"
swiftc "${flags[@]}" -I "$build" -I Sources/CLibIIO Fuzz/CSVReaderFuzz.swift "$build/SensorInput.o" \
    "$build/StepDetection.o" -lm -liio -o "$build/csv-reader-fuzz"

# Seed corpus: small slices of real files plus one sample of each supported format.
seeds="$out/seeds"
mkdir -p "$seeds"
data="../shared/data"
if [ -d "$data" ]; then
    head -c 1500 "$data/bangle-wrist/controlled/100.csv" > "$seeds/bangle.csv"
    head -c 1500 "$data/oxford-optimisation/Nexus_Jamie_Hard_InHand_1/accelerometer.csv" > "$seeds/oxford.csv"
    head -c 1500 "$data/formats/physicstoolbox/tez4__fhnw-ds-cdl1__physics_toolbox_suite_multi_record.csv" \
        > "$seeds/physics-multi.csv"
    head -c 1500 "$data/formats/androsensor/tez4__fhnw-ds-cdl1__walking_test_jg.csv" > "$seeds/androsensor.csv"
fi
head -c 3000 Tests/SensorInputTests/Exports/sensorlog-2022-09-27_12_59_37-head.csv > "$seeds/sensorlog.csv"
printf 'time;x;y;z\n0.5;0;;9.8\n1;NaN;NaN;NaN\n' > "$seeds/columns.csv"
printf 'time_s,x_g,y_g,z_g\n0.000000000,0.1,-0.98765,1e-05\n0.010000000,0.2,-0.9,0.0\n' > "$seeds/stepgate.csv"
printf '"Time (s)";"X (m/s^2)";"Y (m/s^2)";"Z (m/s^2)"\n-1.8E-3;9.849455833E0;NaN;2.0E-1\n0.0;1.024176513E1;0.1;0.2\n' \
    > "$seeds/phyphox.csv"
printf '\xef\xbb\xbftime,seconds_elapsed,z,y,x\r\n"1,70136286270131E+018",0.01,9.8,0.1,0.2\r\n1711795430071476200,0.02,9.7,0.1,0.3' \
    > "$seeds/sensorlogger.csv"
printf 'sep=;\n\n"Time (s)"\t"Linear Acceleration x (m/s^2)"\t"Linear Acceleration y (m/s^2)"\t"Linear Acceleration z (m/s^2)"\n0\t1\t2\t3\n' \
    > "$seeds/phyphox-tab.csv"

cat > "$out/csv.dict" <<'DICT'
"Time (ms)"
"Time (s)"
"time_s,x_g,y_g,z_g"
"time,seconds_elapsed,z,y,x"
"time,gFx,gFy,gFz,TgF"
"\"Acceleration x (m/s^2)\""
"\"Linear Acceleration x (m/s^2)\""
"X (m/s^2)"
"ACCELEROMETER X (m/s\xc2\xb2)"
"LINEAR ACCELERATION X (m/s\xc2\xb2)"
"Time since start in ms "
"accelerometerTimestamp_sinceReboot(s)"
"accelerometerAccelerationX(G)"
"loggingTime(txt)"
"sep=;"
"NaN"
"inf"
"E-3"
"e+308"
"\xef\xbb\xbf"
"\x0d\x0a"
"\xe2\x88\x9e"
"9223372036854775807"
"-9223372036854775808"
"18446744073709551616"
DICT

echo "fuzzing for ${seconds}s…"
"$build/csv-reader-fuzz" "$out/corpus" "$seeds" -dict="$out/csv.dict" -max_total_time="$seconds" \
    -artifact_prefix="$out/artifacts/" -max_len=4096 -print_final_stats=1 "$@"
