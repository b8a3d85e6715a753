#!/usr/bin/env bash
# Builds stepgate_<version>_<arch>.deb with dpkg-deb: a static release build (the Swift runtime
# linked in) of both executables, /usr/libexec/stepgate/stepgate (the front door; /usr/bin/stepgate
# links to it) and /usr/libexec/stepgate/stepgate-full beside it, which the front door starts for
# every command but run, replay and --version (it looks only beside its own file), the udev rule, the systemd unit (generated from udev/stepgate.service with /usr/bin
# paths), the sysusers.d entry, /etc/stepgate/config.json (a conffile: the example with every
# selection emptied, so it shields nothing), the manual page, the completions, the docs, the
# samples and their licences, and the maintainer scripts in debian/.
#
# Builds for the machine it runs on (x86-64 here; on a Raspberry Pi with aarch64 Raspberry Pi OS,
# run it on the board). Needs swift, dpkg-deb, gzip and strip; dpkg-shlibdeps (dpkg-dev) for
# the library dependencies.
#
# Environment (all optional):
#   STEPGATE_BINARY       an already built stepgate (the front door) to package instead of
#                         building one; stepgate-full is taken from beside it
#   STEPGATE_VERSION      the package version (default: StepGate.version in the sources)
#   STEPGATE_DEB_DIR      where the .deb goes (default: the repository root)
#   STEPGATE_DEB_COMPRESS dpkg-deb's compressor (default xz; tests use none)
#   STEPGATE_MAINTAINER   the Maintainer field (default: StepGate maintainers and the address of
#                         the last commit's author)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

# The version lives in one place: the constant `stepgate --version` prints.
version=${STEPGATE_VERSION:-$(sed -n 's/^ *public static let version = "\(.*\)"$/\1/p' \
    Sources/CoreCommands/Version.swift)}
if ! [[ "$version" =~ ^[0-9][A-Za-z0-9.+~]*$ ]]; then
    echo "error: no usable version ('$version'); see Sources/CoreCommands/Version.swift" >&2
    exit 1
fi
arch=$(dpkg --print-architecture)

if [ -n "${STEPGATE_BINARY:-}" ]; then
    binary=$STEPGATE_BINARY
else
    swift build -c release --static-swift-stdlib >&2
    binary="$(swift build -c release --static-swift-stdlib --show-bin-path)/stepgate"
fi
full="$(dirname "$binary")/stepgate-full"
if [ ! -x "$full" ]; then
    echo "error: no $full beside $binary: build both executables ('swift build -c release --static-swift-stdlib')" >&2
    exit 1
fi
built_version=$("$binary" --version)
full_version=$("$full" --version)
if [ "$full_version" != "$built_version" ]; then
    echo "error: $binary says $built_version, $full says $full_version: rebuild both" >&2
    exit 1
fi
if [ -z "${STEPGATE_VERSION:-}" ] && [ "$built_version" != "$version" ]; then
    echo "error: $binary says $built_version, the sources say $version: rebuild" >&2
    exit 1
fi
for executable in "$binary" "$full"; do
    if objdump -p "$executable" | grep -q 'NEEDED *libswift'; then
        echo "warning: $executable needs the Swift runtime installed (not a --static-swift-stdlib build)" >&2
    fi
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
umask 022
root=$stage/root
doc=$root/usr/share/doc/stepgate
mkdir -p "$root/DEBIAN" "$doc/examples"

# Both executables in one folder of their own (the front door finds the full program beside its
# own file, /proc/self/exe with links resolved), root's like every file of the package; the
# command is a link to the front door.
libexec=$root/usr/libexec/stepgate
install -D -m 0755 "$binary" "$libexec/stepgate"
install -D -m 0755 "$full" "$libexec/stepgate-full"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$libexec/stepgate" "$libexec/stepgate-full"
mkdir -p "$root/usr/bin"
ln -s ../libexec/stepgate/stepgate "$root/usr/bin/stepgate"
install -D -m 0644 udev/60-stepgate-iio.rules "$root/usr/lib/udev/rules.d/60-stepgate-iio.rules"
install -D -m 0644 debian/sysusers.conf "$root/usr/lib/sysusers.d/stepgate.conf"

# The unit: the repository's, with the packaged paths and without its manual install notes.
mkdir -p "$root/usr/lib/systemd/system"
sed -e 's#/usr/local/bin/stepgate#/usr/bin/stepgate#g' \
    -e '/^# Install:/,/^#  *sudo systemctl enable/d' \
    -e 's#^Documentation=.*#Documentation=man:stepgate(1) file:///usr/share/doc/stepgate/README.Debian#' \
    udev/stepgate.service >"$root/usr/lib/systemd/system/stepgate.service"
if grep -q /usr/local "$root/usr/lib/systemd/system/stepgate.service"; then
    echo "error: the packaged unit still names /usr/local" >&2
    exit 1
fi

# The conffile: the example configuration, shielding nothing (every selection list emptied) and
# following the system's time zone.
mkdir -p "$root/etc/stepgate"
sed -E -e 's/"(executables|desktopCategories|domains|hooks|systemdUnits)": \[[^]]*\]/"\1": []/g' \
    -e '/"timeZone": /d' samples/stepgate.example.json >"$root/etc/stepgate/config.json"
if grep -Eq '"(executables|desktopCategories|domains|hooks|systemdUnits)": \[ *[^] ]' \
    "$root/etc/stepgate/config.json"; then
    echo "error: the packaged configuration still selects something" >&2
    exit 1
fi
chmod 0644 "$root/etc/stepgate/config.json"
echo /etc/stepgate/config.json >"$root/DEBIAN/conffiles"

install -D -m 0644 docs/man/stepgate.1 "$root/usr/share/man/man1/stepgate.1"
gzip -9n "$root/usr/share/man/man1/stepgate.1"
install -D -m 0644 completions/stepgate.bash "$root/usr/share/bash-completion/completions/stepgate"
install -D -m 0644 completions/_stepgate "$root/usr/share/zsh/vendor-completions/_stepgate"
install -D -m 0644 completions/stepgate.fish "$root/usr/share/fish/vendor_completions.d/stepgate.fish"

# Docs, compressed as Debian policy asks; the samples, their attribution and licence as they
# are (the example configurations refer to the recordings by name).
install -m 0644 README.md docs/*.md "$doc/"  # every page the README links
gzip -9n "$doc"/*.md
install -m 0644 debian/README.Debian debian/copyright "$doc/"
install -m 0644 samples/* udev/61-stepgate-sensor-local.hwdb "$doc/examples/"
commit_date=$(git log -1 --format=%cD 2>/dev/null || date -R)
maintainer=${STEPGATE_MAINTAINER:-"StepGate maintainers <$(git log -1 --format=%ae 2>/dev/null || echo "$(id -un)@$(hostname -f)")>"}
{
    echo "stepgate ($version) unstable; urgency=medium"
    echo
    echo "  * Built from $(git rev-parse --short HEAD 2>/dev/null || echo 'a source tree'); the history is in the"
    echo "    project's git log."
    echo
    echo " -- $maintainer  $commit_date"
} | gzip -9n >"$doc/changelog.gz"

for script in postinst prerm postrm; do
    install -m 0755 "debian/$script" "$root/DEBIAN/$script"
done

# Library dependencies from the binary (libc, libstdc++, libgcc), and libiio and libsystemd
# (opened on first use, so dpkg-shlibdeps cannot see them).
depends="libc6, libgcc-s1, libiio0, libstdc++6, libsystemd0"
if command -v dpkg-shlibdeps >/dev/null; then
    mkdir -p "$stage/debian"
    printf 'Source: stepgate\n\nPackage: stepgate\nArchitecture: any\n' >"$stage/debian/control"
    if found=$(cd "$stage" && dpkg-shlibdeps -O --ignore-missing-info \
        root/usr/libexec/stepgate/stepgate root/usr/libexec/stepgate/stepgate-full 2>/dev/null); then
        depends=${found#shlibs:Depends=}
    fi
fi
# libiio is opened when first needed (Sources/SensorInput/LibIIO.swift), not linked, so
# dpkg-shlibdeps does not see it: depend on it by name.
case ", $depends," in
*", libiio0"[,\ ]*) ;;
*) depends="$depends, libiio0" ;;
esac
# libsystemd (sd-bus, for desktop notices) likewise (Sources/Notifications/LibSystemd.swift).
case ", $depends," in
*", libsystemd0"[,\ ]*) ;;
*) depends="$depends, libsystemd0" ;;
esac
# libmosquitto is opened only by a daemon with an "mqtt" section (Sources/Household/
# LibMosquitto.swift): recommended, not required; the broker itself is a suggestion.

cat >"$root/DEBIAN/control" <<EOF
Package: stepgate
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends, adduser | systemd
Recommends: libmosquitto1
Suggests: nftables, mosquitto
Section: utils
Priority: optional
Description: walk to unlock: shields programs and domains until you have walked enough
 StepGate counts steps from an accelerometer (Linux IIO, through libiio) and
 keeps shielded programs, desktop categories, web domains and systemd units
 locked until a walking goal is met. The daemon (stepgate daemon, a systemd
 service) applies the shields; stepgate status, unlock, skip and lock talk to
 it. Installed disabled, with a configuration that shields nothing: see
 /usr/share/doc/stepgate/README.Debian.
EOF

(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z |
    xargs -0 md5sum >DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums"

out=${STEPGATE_DEB_DIR:-$repo}
mkdir -p "$out"
deb="$out/stepgate_${version}_${arch}.deb"
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)} \
    dpkg-deb --root-owner-group -Z"${STEPGATE_DEB_COMPRESS:-xz}" --build "$root" "$deb" >&2
echo "$deb"
