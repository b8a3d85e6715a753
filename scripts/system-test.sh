#!/usr/bin/env bash
# StepGate installed for real: builds the .deb, makes a Debian bookworm root with mmdebstrap,
# boots Debian's stock kernel on it under QEMU (TCG) with systemd as PID 1 and a LIS3DH on
# i2c-stub bound to the real st_accel driver, and runs scripts/system-test/guest.sh there: the
# package installed with apt, the udev rule, `systemctl enable --now stepgate`, a recorded walk
# played into the sensor's registers until the goal unlocks, a desktop notice on the user's
# session bus, a reboot inside the unlock window, SIGKILL and systemd's restart, the journal,
# and a purge that leaves nothing behind.
#
#   bash scripts/system-test.sh           the short version (what CI runs)
#   bash scripts/system-test.sh --full    also the figures (CPU, memory, wake-ups walking and
#                                         still), bad input (configuration error, sensor
#                                         removed, full /var at relock) and the phone case
#                                         (iio-sensor-proxy with a client)
#
# Needs root, qemu-system-x86_64, qemu-img, mmdebstrap and mke2fs. The bookworm root, its kernel
# and initramfs are kept in $STEPGATE_SYSTEM_TEST_CACHE (default /var/cache/stepgate-system-test)
# under a key made of the package list and the files that shape the root, so a rerun boots in
# seconds; so is the release build, per checkout. Environment (optional): STEPGATE_DEB (a built
# package to test instead of building one), STEPGATE_SYSTEM_TEST_KEEP=1 (keep the run folder:
# the disk, the console and guest logs, the journal).
# Prints one `ok`/`not ok` line per check, the figures, and `N passed, N failed`; exits 1 when a
# check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

mode=short
case "${1:-}" in
"") ;;
--full) mode=full ;;
*)
    echo "usage: bash scripts/system-test.sh [--full]" >&2
    exit 64
    ;;
esac

for tool in qemu-system-x86_64 qemu-img mmdebstrap mke2fs swiftc; do
    command -v "$tool" >/dev/null || {
        echo "error: no $tool (apt-get install qemu-system-x86 qemu-utils mmdebstrap e2fsprogs)" >&2
        exit 1
    }
done
[ "$(id -u)" -eq 0 ] || {
    echo "error: run as root (mmdebstrap, the guest's files owned by root)" >&2
    exit 1
}

cache=${STEPGATE_SYSTEM_TEST_CACHE:-/var/cache/stepgate-system-test}
mkdir -p "$cache"
run=$(mktemp -d /var/tmp/stepgate-system-test.XXXXXX)
qemu_pid=
cleanup() {
    [ -z "$qemu_pid" ] || kill "$qemu_pid" 2>/dev/null || true
    if [ "${STEPGATE_SYSTEM_TEST_KEEP:-}" = 1 ]; then echo "run folder kept: $run" >&2; else rm -rf "$run"; fi
}
trap cleanup EXIT
trap "exit 143" INT TERM
share=$run/share
mkdir -p "$share"
started=$(date +%s)
say() { echo "== $(($(date +%s) - started)) s: $*" >&2; }

# 1. The package (built once: package.sh's release build is incremental).
if [ -n "${STEPGATE_DEB:-}" ]; then
    deb=$STEPGATE_DEB
else
    # The release build goes to a folder of the cache kept per checkout, so that CI, which builds
    # in a fresh clone, rebuilds only what changed when its clone is in the same place.
    scratch=$cache/build-$(echo "$repo" | sha256sum | cut -c1-12)
    say "building the package (release build in $scratch, then scripts/package.sh)"
    swift build -c release --static-swift-stdlib --scratch-path "$scratch" >&2
    deb=$(STEPGATE_BINARY=$scratch/release/stepgate STEPGATE_DEB_DIR=$run bash scripts/package.sh)
fi
cp "$deb" "$share/stepgate.deb"
depends=$(dpkg-deb -f "$share/stepgate.deb" Depends)

# 2. The bookworm root, kept under a key of its package list and of what shapes it. The guest's
# apt uses the sources this machine's apt uses.
packages="systemd systemd-sysv udev kmod i2c-tools dbus dbus-user-session libpam-systemd
    linux-image-amd64 initramfs-tools procps iio-sensor-proxy e2fsprogs python3-dbus python3-gi"
# The package's own dependencies (the first of each alternative, versions left out), so that
# `apt-get install ./stepgate.deb` in the guest, which has no network, finds them all.
for dependency in $(echo "$depends" | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/ //g'); do
    packages="$packages $dependency"
done
packages=$(echo $packages | tr ' ' '\n' | sort -u | tr '\n' ' ')
sources=/etc/apt/sources.list.d/debian.sources
[ -f "$sources" ] || sources=/etc/apt/sources.list
key=$(cat <(echo "$packages") "$sources" <(sed -n '/^# BEGIN base/,/^# END base/p' "$0") | sha256sum | cut -c1-16)
base=$cache/bookworm-$key
# BEGIN base (what the cached root is made of: a change here makes a new one)
if [ ! -f "$base/root.img" ]; then
    say "making the bookworm root ($packages)"
    rm -rf "$base.tmp" && mkdir -p "$base.tmp"
    tree=$base.tmp/tree
    mmdebstrap --variant=apt --aptopt='Acquire::Check-Valid-Until "false"' \
        --include="$(echo $packages | tr ' ' ',')" \
        --customize-hook='echo stepgate-test >"$1/etc/hostname"' \
        --customize-hook='printf "127.0.0.1\tlocalhost\n127.0.1.1\tstepgate-test\n::1\tlocalhost ip6-localhost\n" >"$1/etc/hosts"' \
        --customize-hook='echo "/dev/vda / ext4 rw,errors=remount-ro 0 1" >"$1/etc/fstab"' \
        --customize-hook='chroot "$1" useradd -m -u 1000 -s /bin/bash walker' \
        --customize-hook='chroot "$1" passwd -d root' \
        --customize-hook='printf "%s\n" "[Unit]" "Description=LIS3DH on i2c-stub (the system test'"'"'s sensor)" \
            "DefaultDependencies=no" "After=systemd-udevd.service systemd-modules-load.service local-fs.target" \
            "ConditionPathExists=/usr/local/sbin/lis3dh-stub" \
            "Before=sysinit.target" "[Service]" "Type=oneshot" "RemainAfterExit=yes" \
            "ExecStart=/usr/local/sbin/lis3dh-stub" "[Install]" "WantedBy=sysinit.target" \
            >"$1/etc/systemd/system/lis3dh-stub.service"' \
        --customize-hook='printf "%s\n" "[Unit]" "Description=StepGate system test (guest side)" \
            "After=multi-user.target" "[Service]" "Type=simple" \
            "ExecStart=/bin/sh -c '"'"'mkdir -p /mnt/host && mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /mnt/host && exec /bin/bash /mnt/host/guest.sh'"'"'" \
            "[Install]" "WantedBy=multi-user.target" >"$1/etc/systemd/system/stepgate-system-test.service"' \
        --customize-hook='chroot "$1" systemctl enable lis3dh-stub.service stepgate-system-test.service' \
        --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-timesyncd.service' \
        --customize-hook='cp -L "$1"/boot/vmlinuz-* "$1"/boot/initrd.img-* "$1/.."/' \
        bookworm "$tree" "$sources" >"$base.tmp/mmdebstrap.log" 2>&1 || {
        tail -20 "$base.tmp/mmdebstrap.log" >&2
        exit 1
    }
    mv "$base.tmp"/vmlinuz-* "$base.tmp/vmlinuz" && mv "$base.tmp"/initrd.img-* "$base.tmp/initrd.img"
    mke2fs -q -t ext4 -L root -d "$tree" "$base.tmp/root.img" 3G >/dev/null
    rm -rf "$tree"
    rm -rf "$base" && mv "$base.tmp" "$base"
fi
# END base

# 3. The guest's side: its script, the player (built here: the guest has no compiler), the walk.
cp scripts/system-test/guest.sh scripts/system-test/guest-full.sh scripts/system-test/lis3dh-stub.sh \
    scripts/system-test/notice-server.py "$share/"
cp samples/walk-front-pocket-303.csv "$share/walk.csv"
player=$cache/walk-player-$(cat scripts/system-test/walk-player.swift <(swiftc --version 2>&1) | sha256sum | cut -c1-16)
if [ ! -x "$player" ]; then
    swiftc -O -static-stdlib scripts/system-test/walk-player.swift -o "$player.tmp" && mv "$player.tmp" "$player"
fi
cp "$player" "$share/walk-player"
echo "$mode" >"$share/mode"
echo install >"$share/phase"
qemu-img create -q -f qcow2 -b "$base/root.img" -F raw "$run/disk.qcow2"

# 4. Boot until the guest says it is done (a reboot ends QEMU: -no-reboot; the next boot goes on
# from the phase the guest wrote).
boots=0
while [ "$(cat "$share/phase")" != done ]; do
    boots=$((boots + 1))
    if [ "$boots" -gt 4 ]; then
        echo "not ok - the guest did not finish in 4 boots (phase: $(cat "$share/phase"))" >>"$share/results"
        break
    fi
    say "boot $boots (phase $(cat "$share/phase"))"
    timeout 1500 qemu-system-x86_64 -accel tcg -cpu max -m 1024 -smp 1 -nographic -no-reboot \
        -kernel "$base/vmlinuz" -initrd "$base/initrd.img" \
        -append "root=/dev/vda rw console=ttyS0 quiet panic=-1 systemd.show_status=0" \
        -drive file="$run/disk.qcow2",if=virtio,format=qcow2 \
        -virtfs local,path="$share",mount_tag=host,security_model=none,id=host \
        -nic none -serial file:"$run/console-$boots.log" -monitor none &
    qemu_pid=$!
    # Show the checks as the guest makes them.
    touch "$share/results"
    tail -n +$(($(wc -l <"$share/results") + 1)) -F --pid=$qemu_pid "$share/results" 2>/dev/null &
    wait $qemu_pid || echo "(QEMU exited with $?)" >&2
    qemu_pid=
    wait || true
done
say "guest finished after $boots boot(s)"

if [ -s "$share/journal.txt" ]; then
    echo "-- journalctl -u stepgate (the last boot; whole file in the run folder):" >&2
    tail -n 40 "$share/journal.txt" >&2
fi
# A `not ok … # TODO …` line is a known failure, reported and not counted as failed.
passed=$(grep -c '^ok ' "$share/results" || true)
failed=$(grep '^not ok ' "$share/results" | grep -c -v '# TODO' || true)
known=$(grep '^not ok ' "$share/results" | grep -c '# TODO' || true)
grep '^figure: ' "$share/results" || true
if [ "$failed" -gt 0 ] || [ "$passed" -eq 0 ]; then
    echo "-- the guest's log (last lines):" >&2
    tail -n 60 "$share/guest.log" >&2 || true
    STEPGATE_SYSTEM_TEST_KEEP=1
fi
[ "$mode" != short ] || echo $(($(date +%s) - started)) >"$cache/last-seconds"
echo "system test ($mode, $(($(date +%s) - started)) s, $boots boots, $known known failures marked TODO):"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
