#!/usr/bin/env bash
# Peak resident memory (and CPU) of `stepgate run --json` at 100 Hz on the emulated
# accelerometer, measured as `scripts/figures.sh live` does (root, ../shared/tools/fake-iio.sh,
# /usr/bin/time), for several executables in turn: each round runs every executable once, in
# the order given, so a slow or noisy stretch of the machine affects all of them alike.
#
#   bash scripts/measure-live-rss.sh [-n ROUNDS] [-s SECONDS] EXECUTABLE...
#
# Prints one line per run and, per executable, the mean, smallest and largest peak (KiB, MiB).
# An executable is called as `EXECUTABLE run --json --duration S --ledger FILE`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
rounds=5
seconds=30
while getopts n:s: option; do
    case "$option" in
    n) rounds="$OPTARG" ;;
    s) seconds="$OPTARG" ;;
    *) exit 64 ;;
    esac
done
shift $((OPTIND - 1))
[ "$#" -gt 0 ] || { echo "usage: $0 [-n ROUNDS] [-s SECONDS] EXECUTABLE..." >&2; exit 64; }
fake="$root/../shared/tools/fake-iio.sh"
if [ "$(id -u)" != 0 ] || [ ! -x "$fake" ] || [ ! -x /usr/bin/time ]; then
    echo "needs root, $fake and /usr/bin/time" >&2
    exit 1
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/stepgate-rss.XXXXXX")"
export FAKE_IIO_STATE="$work/iio"
"$fake" up --odr 100 >&2
"$fake" feed --pattern walk --rate 100 >/dev/null 2>&1 &
feeder=$!
cleanup() {
    kill "$feeder" 2>/dev/null || true
    "$fake" down >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
for round in $(seq "$rounds"); do
    for index in $(seq "$#"); do
        executable="${!index}"
        rm -f "$work/ledger.json"
        "$fake" exec /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$executable" run --json \
            --duration "$seconds" --ledger "$work/ledger.json" > "$work/out" 2> "$work/err" || {
            echo "$executable failed:" >&2
            cat "$work/err" >&2
            exit 1
        }
        read -r elapsed user system peak < <(tail -n 1 "$work/time")
        steps="$(grep -c '"event":"step"' "$work/out" || true)"
        printf '%d\t%s\t%s KiB\t%.2f s CPU\t%s steps\n' "$round" "$executable" "$peak" \
            "$(echo "$user + $system" | bc)" "$steps"
        echo "$index $peak" >> "$work/peaks"
    done
done
echo
for index in $(seq "$#"); do
    awk -v index_="$index" -v name="${!index}" '
        $1 == index_ { n++; sum += $2; if (min == "" || $2 < min) min = $2; if ($2 > max) max = $2 }
        END { printf "%s: mean %.0f KiB (%.2f MiB), range %d–%d KiB (%.2f–%.2f MiB), %d runs\n",
              name, sum / n, sum / n / 1024, min, max, min / 1024, max / 1024, n }' "$work/peaks"
done
