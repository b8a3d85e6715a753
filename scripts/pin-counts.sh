#!/usr/bin/env bash
# Writes Tests/PinnedCounts/pinned-counts.tsv: the step and sample count of every recording in
# ../shared/data and samples/ under the default detector configuration, with the configuration
# it was made with. PinnedCountsTests checks the detector still counts exactly these, so a speed
# change provably does not change what is counted. Rerun after an intended change to the
# detector or its defaults, and commit the table with that change:
#
#   bash scripts/pin-counts.sh
#
# A recording is every *.csv file there except the manifests and truth files (manifest.csv,
# detail.csv, stats.csv, stepcounter.csv) and ipol-waist/steps.csv (per-step truth). Files StepGate cannot read are pinned as errors.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[ -f ../shared/data/manifest.csv ] || { echo "pin-counts: ../shared/data is not present" >&2; exit 1; }
swift build -c release --static-swift-stdlib >&2  # stepgate and stepgate-full
stepgate="$(swift build -c release --static-swift-stdlib --show-bin-path)/stepgate"
table=Tests/PinnedCounts/pinned-counts.tsv
work="$(mktemp -d "${TMPDIR:-/tmp}/stepgate-pins.XXXXXX")"
trap 'rm -rf "$work"' EXIT

find ../shared/data samples -name '*.csv' ! -name manifest.csv ! -name detail.csv ! -name stats.csv \
    ! -name stepcounter.csv ! -path "*/ipol-waist/steps.csv" | LC_ALL=C sort > "$work/files"
# The configuration as one line without blanks; its fingerprint is FNV-1a (64 bit) of that line.
configuration="$("$stepgate" config | tr -d ' \n')"
hash=$((0xcbf29ce484222325))
for byte in $(printf '%s' "$configuration" | od -An -v -tu1); do
    hash=$(((hash ^ byte) * 0x100000001b3))
done
fingerprint="$(printf '%016x' "$hash")"

{
    echo "# Step counts pinned by PinnedCountsTests. Made by 'bash scripts/pin-counts.sh' (rerun it after an"
    echo "# intended change to what is counted, and commit the table with that change)."
    echo "# configuration fingerprint: $fingerprint"
    echo "# configuration: $configuration"
    printf '# path\tformat\tsamples\tsteps\n'
    while IFS= read -r file; do
        if "$stepgate" replay --json "$file" > "$work/out" 2> /dev/null; then
            head -n1 "$work/out" | sed -E 's/.*"format":"([^"]*)".*/\1/' > "$work/format"
            steps="$(head -n1 "$work/out" | sed -E 's/.*"steps":([0-9]+).*/\1/')"
            samples="$(head -n1 "$work/out" | sed -E 's/.*"samples":([0-9]+).*/\1/')"
            printf '%s\t%s\t%s\t%s\n' "$file" "$(cat "$work/format")" "$samples" "$steps"
        else
            printf '%s\tunreadable\t-\t-\n' "$file"
        fi
    done < "$work/files"
} > "$work/table"
mv "$work/table" "$table"
echo "wrote $table: $(grep -vc '^#' "$table") recordings, configuration $fingerprint" >&2
