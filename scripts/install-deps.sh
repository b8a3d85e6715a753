#!/usr/bin/env bash
# Installs the Debian packages StepGate needs, only those missing. Idempotent; needs root (or
# sudo) only when something is missing.
#
#   bash scripts/install-deps.sh --build   # what building needs: three C libraries' headers
#   bash scripts/install-deps.sh           # that, and what the tests need
#
# Building needs the headers of libiio (IIO devices), libsystemd (sd-bus, desktop notices) and
# libmosquitto (the MQTT link); the libraries themselves are opened when first used. The tests
# also need: libiio's tools and iiod (the network tests), unshare/nsenter/ip for the emulated
# IIO device, nftables for the network shield (in a network namespace of its own), man and
# groff to check that the manual page renders, dbus-daemon with dbus-bin for the private
# session buses of the notification tests, and mosquitto (broker and mosquitto_passwd) for the
# brokers the MQTT tests start on loopback ports of their own. Debian enables and starts the
# mosquitto service when it is installed: where this script installed it, it disables and stops
# that service again, so no broker is left listening (a mosquitto you installed yourself is
# left as it is).
set -euo pipefail

build=(libiio-dev libsystemd-dev libmosquitto-dev)
tests=(
    libiio-utils iiod pkg-config iproute2 util-linux nftables man-db groff-base dbus-daemon dbus-bin
    mosquitto
)
case "${1:-}" in
--build) packages=("${build[@]}") ;;
"") packages=("${build[@]}" "${tests[@]}") ;;
*)
    echo "usage: bash scripts/install-deps.sh [--build]" >&2
    exit 64
    ;;
esac

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "installing: ${missing[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
    if printf '%s\n' "${missing[@]}" | grep -qx mosquitto; then
        # The tests start brokers of their own; the system's would listen on port 1883.
        if [ -d /run/systemd/system ]; then
            $sudo systemctl disable --now mosquitto.service >&2 || true
        else
            $sudo deb-systemd-helper disable mosquitto.service >&2 || true
            $sudo service mosquitto stop >/dev/null 2>&1 || true
        fi
    fi
fi
if ! command -v swift >/dev/null 2>&1; then
    echo "error: no 'swift' on PATH; install Swift 6.3 from swift.org first" >&2
    exit 1
fi
