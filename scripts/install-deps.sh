#!/usr/bin/env bash
# Installs the Debian packages StepGate needs to build and test, only those missing.
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail

# Debian packages the build and the tests need beyond the Swift toolchain: libiio (headers,
# tools, iiod for the network tests), unshare/nsenter/ip for the emulated IIO device, nftables
# for the network shield (tested in a network namespace of its own), man and groff to check
# that the manual page renders without warnings, libsystemd-dev for desktop notifications over
# sd-bus, dbus-daemon with dbus-bin for the private session buses the notification tests start,
# libmosquitto-dev for the MQTT link, and mosquitto (broker and mosquitto_passwd) for the brokers
# the MQTT tests start on loopback ports of their own. Debian enables the mosquitto service on
# install (a broker on localhost:1883); `systemctl disable --now mosquitto` if that is unwanted.
packages=(
    libiio-dev libiio-utils iiod pkg-config iproute2 util-linux nftables man-db groff-base libsystemd-dev
    dbus-daemon dbus-bin libmosquitto-dev mosquitto
)

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
fi
if ! command -v swift >/dev/null 2>&1; then
    echo "error: no 'swift' on PATH; install Swift 6.3 from swift.org first" >&2
    exit 1
fi
