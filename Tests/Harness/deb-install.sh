#!/usr/bin/env bash
# Installs, upgrades, removes and purges the StepGate package in a throwaway root: a private
# mount and network namespace, an overlay over the machine's own root file system (the upper
# layer on a tmpfs) and a chroot into it. Nothing reaches the real system: the overlay takes every
# write, /run and /tmp are fresh tmpfs, /sys is not mounted (udevadm cannot trigger the host's
# devices), systemctl sees a chroot and works offline, nft sees an empty network namespace.
#
# Usage (root): deb-install.sh STEPGATE-BINARY
# Builds two packages from the binary with scripts/package.sh (the second with a higher version),
# then checks: the files, the group, the conffile, `stepgate --version`, `daemon --check` on the
# installed configuration, `systemd-analyze verify` on the unit; an upgrade that keeps an edited
# configuration; removal lifting a runtime mask, the hosts block and its reserve file, browser
# policies and the nftables table; purge leaving no file behind. Prints "PASS" at the end.
set -euo pipefail

if [ "${1:-}" = "--inside" ]; then
    work=$2
    version=$3
    mount --make-rprivate /
    mount -t tmpfs -o size=1g,mode=0700 tmpfs "$work/ns"
    mkdir "$work/ns/upper" "$work/ns/work" "$work/ns/root"
    root=$work/ns/root
    mount -t overlay overlay -o "lowerdir=/,upperdir=$work/ns/upper,workdir=$work/ns/work" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/run"
    mount -t tmpfs tmpfs "$root/tmp"
    cp -r "$work/debs" "$root/tmp/debs"
    start=$(date +%s)
    env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
        SYSTEMD_OFFLINE=1 version="$version" chroot "$root" /bin/bash -euo pipefail -s <<'CHECKS'
fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }
v1=/tmp/debs/stepgate_${version}_$(dpkg --print-architecture).deb
v2=/tmp/debs/stepgate_${version}+upgrade_$(dpkg --print-architecture).deb
hadgroup=no
getent group stepgate >/dev/null && hadgroup=yes
# Stand-ins record what the maintainer scripts ask of systemd (the real systemctl still does its
# offline work in the chroot), and /run/systemd/system makes them believe systemd runs.
real_systemctl=$(command -v systemctl)
mkdir -p /run/systemd/system /usr/local/sbin
printf '#!/bin/sh\necho "deb-systemd-invoke $*" >>/tmp/calls\n' >/usr/local/sbin/deb-systemd-invoke
printf '#!/bin/sh\necho "systemctl $*" >>/tmp/calls\nexec %s "$@"\n' "$real_systemctl" >/usr/local/sbin/systemctl
chmod 0755 /usr/local/sbin/deb-systemd-invoke /usr/local/sbin/systemctl
calls() { cat /tmp/calls 2>/dev/null; : >/tmp/calls; }

step "install $v1"
dpkg -i "$v1"
asked=$(calls)
for f in /usr/bin/stepgate /usr/libexec/stepgate/stepgate /usr/libexec/stepgate/stepgate-full \
    /usr/lib/udev/rules.d/60-stepgate-iio.rules \
    /usr/lib/systemd/system/stepgate.service /usr/lib/sysusers.d/stepgate.conf \
    /etc/stepgate/config.json /usr/share/man/man1/stepgate.1.gz \
    /usr/share/bash-completion/completions/stepgate /usr/share/zsh/vendor-completions/_stepgate \
    /usr/share/fish/vendor_completions.d/stepgate.fish /usr/share/doc/stepgate/copyright \
    /usr/share/doc/stepgate/changelog.gz /usr/share/doc/stepgate/README.Debian \
    /usr/share/doc/stepgate/README.md.gz /usr/share/doc/stepgate/household.md.gz \
    /usr/share/doc/stepgate/daemon.md.gz /usr/share/doc/stepgate/policy.md.gz \
    /usr/share/doc/stepgate/examples/61-stepgate-sensor-local.hwdb \
    /usr/share/doc/stepgate/examples/README.md /usr/share/doc/stepgate/examples/LICENSE.bangle-wrist.MIT; do
    [ -f "$f" ] || fail "$f is not installed"
done
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    /usr/share/doc/stepgate/copyright || fail "copyright is not machine-readable"
grep -q 'CC-BY-4.0' /usr/share/doc/stepgate/copyright || fail "copyright lacks the samples' licence"
! grep -q /usr/local /usr/lib/systemd/system/stepgate.service || fail "the unit names /usr/local"
grep -q '^ExecStart=/usr/bin/stepgate daemon' /usr/lib/systemd/system/stepgate.service ||
    fail "the unit does not run /usr/bin/stepgate"
zcat /usr/share/man/man1/stepgate.1.gz | grep -q '^\.TH' || fail "the manual page is not a manual page"
getent group stepgate >/dev/null || fail "no group stepgate"
# libiio is opened at run time, not linked: the package must still depend on it.
dpkg-query -W -f='${Depends}\n' stepgate | grep -q 'libiio0' ||
    fail "does not depend on libiio0: $(dpkg-query -W -f='${Depends}' stepgate)"
dpkg-query -W -f='${Conffiles}\n' stepgate | grep -q '^ /etc/stepgate/config.json ' ||
    fail "/etc/stepgate/config.json is not a conffile"
[ "$(stepgate --version)" = "$version" ] || fail "stepgate --version says $(stepgate --version)"
# The front door hands other commands to the full program beside it, installed root's and
# not writable by others.
[ "$(readlink /usr/bin/stepgate)" = ../libexec/stepgate/stepgate ] || fail "/usr/bin/stepgate is not the front door"
[ "$(stat -c '%U %a' /usr/libexec/stepgate/stepgate-full)" = "root 755" ] ||
    fail "stepgate-full is $(stat -c '%U %a' /usr/libexec/stepgate/stepgate-full)"
stepgate help status | grep -q '^OVERVIEW: ' || fail "stepgate help status did not reach the full program"
stepgate daemon --check --config /etc/stepgate/config.json || fail "the installed configuration is invalid"
! grep -Eq '"(executables|desktopCategories|domains|hooks|systemdUnits)": \[ *"' /etc/stepgate/config.json ||
    fail "the installed configuration shields something"
[ ! -e /etc/systemd/system/multi-user.target.wants/stepgate.service ] || fail "enabled on a fresh install"
[ "$(systemctl is-enabled stepgate.service || true)" = disabled ] || fail "stepgate.service is not disabled"
echo "$asked" | grep -qx 'systemctl --system daemon-reload' || fail "no daemon-reload at install: $asked"
! echo "$asked" | grep -Eq 'deb-systemd-invoke|enable|start' || fail "started or enabled at install: $asked"
step "systemd-analyze verify"
verify=$(systemd-analyze verify /usr/lib/systemd/system/stepgate.service 2>&1) || fail "verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"

step "upgrade to $v2 with an edited configuration"
sed -i 's/"rate": 100/"rate": 50/' /etc/stepgate/config.json
calls >/dev/null
dpkg -i "$v2"
[ "$(dpkg-query -W -f='${Version}' stepgate)" = "${version}+upgrade" ] || fail "not upgraded"
grep -q '"rate": 50' /etc/stepgate/config.json || fail "the upgrade replaced the edited configuration"
[ ! -e /etc/stepgate/config.json.dpkg-dist ] || fail "the upgrade left config.json.dpkg-dist"
asked=$(calls)
echo "$asked" | grep -qx 'deb-systemd-invoke try-restart stepgate.service' ||
    fail "the upgrade does not restart a running daemon: $asked"
stepgate daemon --check --config /etc/stepgate/config.json >/dev/null || fail "the kept configuration is invalid"

step "what a stopped daemon leaves in force"
cp /etc/hosts /tmp/hosts.before
{
    echo "# BEGIN stepgate managed block: do not edit; StepGate rewrites it"
    echo "0.0.0.0 example.org example.org. www.example.org www.example.org. # store=games"
    echo ":: example.org example.org. www.example.org www.example.org. # store=games"
    echo "# END stepgate managed block"
} >>/etc/hosts
fallocate -l 64K /etc/.hosts.stepgate-reserve
install -d -m 0700 /var/lib/stepgate
echo '{"stepgate-test-shielded.service":{"stores":["games"],"wasActive":false}}' \
    >/var/lib/stepgate/systemd-units.json
systemctl mask --runtime stepgate-test-shielded.service
[ "$(systemctl is-enabled stepgate-test-shielded.service || true)" = masked-runtime ] || fail "no mask to lift"
install -d /etc/chromium/policies/managed /etc/firefox/policies
printf '{\n  "DnsOverHttpsMode": "off"\n}\n' >/etc/chromium/policies/managed/stepgate-dns.json
printf '{"policies": {"DNSOverHTTPS": {"Enabled": false, "Locked": true}}}\n' >/etc/firefox/policies/policies.json
table=no
if command -v nft >/dev/null; then
    nft add table inet stepgate
    table=yes
fi

step "remove"
calls >/dev/null
dpkg -r stepgate
asked=$(calls)
echo "$asked" | grep -qx 'deb-systemd-invoke stop stepgate.service' || fail "removal does not stop the daemon: $asked"
[ ! -e /usr/bin/stepgate ] || fail "/usr/bin/stepgate is still there"
[ -f /etc/stepgate/config.json ] || fail "remove took the conffile (only purge should)"
! grep -q 'stepgate managed block' /etc/hosts || fail "the hosts block is still there"
cmp -s /etc/hosts /tmp/hosts.before || fail "/etc/hosts changed outside the block"
[ ! -e /etc/.hosts.stepgate-reserve ] || fail "the reserve file is still there"
[ "$(systemctl is-enabled stepgate-test-shielded.service 2>/dev/null || true)" != masked-runtime ] ||
    fail "the runtime mask is still there"
[ ! -e /run/systemd/system/stepgate-test-shielded.service ] || fail "the mask link is still there"
[ ! -e /etc/chromium/policies/managed/stepgate-dns.json ] || fail "the Chromium policy is still there"
[ ! -e /etc/firefox/policies/policies.json ] || fail "the Firefox policy is still there"
if [ "$table" = yes ]; then
    ! nft list table inet stepgate >/dev/null 2>&1 || fail "the nftables table is still there"
fi

step "purge"
dpkg -P stepgate
[ "$(dpkg-query -W -f='${db:Status-Status}' stepgate 2>/dev/null || echo not-installed)" = not-installed ] ||
    fail "the package is still known to dpkg"
for f in /etc/stepgate /var/lib/stepgate /usr/share/doc/stepgate /usr/lib/systemd/system/stepgate.service; do
    [ ! -e "$f" ] || fail "$f is still there after purge"
done
if [ "$hadgroup" = no ]; then echo "(the system group stepgate stays, as Debian keeps system groups)"; fi
CHECKS
    echo "== in the throwaway root: $(($(date +%s) - start)) s"
    # Every file the package, its scripts or the test made must be gone: what is left in the
    # overlay's upper layer is what changed on the "system" (man-db's page cache is man-db's).
    left=$(cd "$work/ns/upper" && find . ! -type c -iname '*stepgate*' ! -path './var/cache/man/*')
    if [ -n "$left" ]; then
        echo "FAIL: left behind after purge:" >&2
        echo "$left" >&2
        exit 1
    fi
    echo PASS
    exit 0
fi

binary=$(readlink -f "$1")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/stepgate-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/ns" "$work/debs"
version=$(sed -n 's/^ *public static let version = "\(.*\)"$/\1/p' "$repo/Sources/CoreCommands/Version.swift")
STEPGATE_BINARY=$binary STEPGATE_DEB_DIR=$work/debs STEPGATE_DEB_COMPRESS=none bash "$repo/scripts/package.sh" \
    >/dev/null
STEPGATE_BINARY=$binary STEPGATE_DEB_DIR=$work/debs STEPGATE_DEB_COMPRESS=none STEPGATE_VERSION="$version+upgrade" \
    bash "$repo/scripts/package.sh" >/dev/null
unshare --mount --net --propagation private bash "$0" --inside "$work" "$version"
