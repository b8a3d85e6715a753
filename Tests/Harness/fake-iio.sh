#!/usr/bin/env bash
# StepGate test harness: an emulated IIO accelerometer for the REAL libiio local backend
# (and iiod over loopback), inside a private mount + network namespace. Root only.
#
#   fake-iio.sh up STATE [--profile lis3dh|mpu6050] [--no-trigger] [--owner USER:GROUP]
#   fake-iio.sh exec STATE CMD...      # CMD sees the fake /sys/bus/iio and /dev/iio:device0
#   fake-iio.sh netexec STATE CMD...   # CMD joins only the network namespace (for ip:127.0.0.1)
#   fake-iio.sh iiod-start STATE [PORT]
#   fake-iio.sh down STATE             # stops only the PIDs it started; mounts die with the ns
#
# STATE/sys/bus/iio/devices/iio:device0 is the fake sysfs tree (host side, writable by the
# test), STATE/dev/iio:device0 a FIFO: the test writes kernel-layout scans into it from the
# host side (Sources/StepGateTestSupport/FakeIIO.swift). Inside the namespace the tree is
# bind-mounted on /sys/bus/iio and the FIFO on /dev/iio:device0 (read-only overlays provide
# the mount points where the host kernel has no IIO). Notes that matter:
#  * every attribute file ends with a newline: libiio overwrites the last byte with NUL;
#  * libiio writes "value\0"; readers of this tree strip NULs;
#  * bind the FIFO itself, never reach it through the overlay (a different pipe);
#  * no dangling symlinks in the tree (libiio stat()s every entry).
set -euo pipefail
# Close inherited descriptors (a test runner's pipes and sockets), so background holders
# never keep the caller's output open.
for fd in /proc/$$/fd/*; do
	n=${fd##*/}
	if [ "$n" -gt 2 ] && [ "$n" != 255 ]; then eval "exec $n>&-" 2>/dev/null || true; fi
done

die() { printf 'fake-iio: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mount namespaces)"
verb=${1:-}; S=${2:-}
[ -n "$verb" ] && [ -n "$S" ] || die "usage: $0 up|exec|netexec|iiod-start|down STATE ..."
shift 2

wr() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$3" >"$1"; chmod "$2" "$1"; }
scan_el() { wr "$1/scan_elements/in_$2_en" 0644 0; wr "$1/scan_elements/in_$2_index" 0444 "$3"; wr "$1/scan_elements/in_$2_type" 0444 "$4"; }
buffer_files() {
	wr "$1/buffer/enable" 0644 0; wr "$1/buffer/length" 0644 2; wr "$1/buffer/watermark" 0644 1
	wr "$1/buffer/data_available" 0444 0
}

tree_lis3dh() { # st_accel LIS3DH: per-channel scale, 12-bit left-justified little-endian
	local d=$1/iio:device0 t=$1/trigger0 a
	wr "$d/name" 0444 lis3dh; wr "$d/dev" 0444 "244:0"; printf 'MAJOR=244\nMINOR=0\nDEVNAME=iio:device0\n' >"$d/uevent"
	for a in x y z; do wr "$d/in_accel_${a}_raw" 0644 0; wr "$d/in_accel_${a}_scale" 0644 0.009806; done
	wr "$d/in_accel_z_raw" 0644 1000
	wr "$d/in_accel_scale_available" 0444 "0.009806 0.019613 0.039226 0.117679"
	wr "$d/sampling_frequency" 0644 1
	wr "$d/sampling_frequency_available" 0444 "1 10 25 50 100 200 400 1600"
	wr "$d/mount_matrix" 0444 "1, 0, 0; 0, 1, 0; 0, 0, 1"
	printf 'realtime\n\0' >"$d/current_timestamp_clock"
	buffer_files "$d"
	scan_el "$d" accel_x 0 "le:s12/16>>4"; scan_el "$d" accel_y 1 "le:s12/16>>4"; scan_el "$d" accel_z 2 "le:s12/16>>4"
	scan_el "$d" timestamp 3 "le:s64/64>>0"
	if [ "$NO_TRIGGER" = 1 ]; then mkdir -p "$d/trigger"; : >"$d/trigger/current_trigger"; return; fi
	wr "$d/trigger/current_trigger" 0644 lis3dh-trigger
	wr "$t/name" 0444 lis3dh-trigger; : >"$t/uevent"
}

tree_mpu6050() { # inv_mpu6050: shared scale, big-endian s16, gyro + temperature in the scan
	local d=$1/iio:device0 t=$1/trigger0 a
	wr "$d/name" 0444 mpu6050; wr "$d/dev" 0444 "244:0"; printf 'MAJOR=244\nMINOR=0\nDEVNAME=iio:device0\n' >"$d/uevent"
	for a in x y z; do wr "$d/in_accel_${a}_raw" 0444 0; wr "$d/in_anglvel_${a}_raw" 0444 0; done
	wr "$d/in_accel_z_raw" 0444 16384
	wr "$d/in_accel_scale" 0644 0.000598
	wr "$d/in_accel_scale_available" 0444 "0.000598 0.001196 0.002392 0.004785"
	wr "$d/in_anglvel_scale" 0644 0.001064724
	wr "$d/in_accel_mount_matrix" 0444 "0, 1, 0; -1, 0, 0; 0, 0, 1"
	wr "$d/in_temp_raw" 0444 2500; wr "$d/in_temp_offset" 0444 12420; wr "$d/in_temp_scale" 0444 2.941176
	wr "$d/sampling_frequency" 0644 50
	wr "$d/sampling_frequency_available" 0444 "10 20 50 100 200 500"
	printf 'realtime\n\0' >"$d/current_timestamp_clock"
	buffer_files "$d"
	scan_el "$d" accel_x 0 "be:s16/16>>0"; scan_el "$d" accel_y 1 "be:s16/16>>0"; scan_el "$d" accel_z 2 "be:s16/16>>0"
	scan_el "$d" temp 3 "be:s16/16>>0"
	scan_el "$d" anglvel_x 4 "be:s16/16>>0"; scan_el "$d" anglvel_y 5 "be:s16/16>>0"; scan_el "$d" anglvel_z 6 "be:s16/16>>0"
	scan_el "$d" timestamp 7 "le:s64/64>>0"
	if [ "$NO_TRIGGER" = 1 ]; then mkdir -p "$d/trigger"; : >"$d/trigger/current_trigger"; return; fi
	wr "$d/trigger/current_trigger" 0644 mpu6050-dev0
	wr "$t/name" 0444 mpu6050-dev0; : >"$t/uevent"
}

holder() {
	local pid; pid=$(cat "$S/holder.pid" 2>/dev/null) || die "not up: $S"
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q fake-iio-holder || die "holder $pid is gone"
	echo "$pid"
}

stop_pid() { # PIDFILE: TERM, then KILL after 1 s; only that PID
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 0
	if [ -d "/proc/$pid" ]; then
		kill "$pid" 2>/dev/null || true
		for _ in 1 2 3 4 5 6 7 8 9 10; do [ -d "/proc/$pid" ] || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$1"
}

case $verb in
up)
	profile=lis3dh owner="" NO_TRIGGER=0
	while [ $# -gt 0 ]; do
		case $1 in
		--profile) profile=$2; shift 2 ;;
		--no-trigger) NO_TRIGGER=1; shift ;;
		--owner) owner=$2; shift 2 ;;
		*) die "up: unknown option $1" ;;
		esac
	done
	mkdir -p "$S/stub/sysbus/iio" "$S/stub/dev" "$S/dev" "$S/sys/bus/iio/devices" "$S/hold/dev"
	: >"$S/stub/dev/iio:device0"
	case $profile in
	lis3dh) tree_lis3dh "$S/sys/bus/iio/devices" ;;
	mpu6050) tree_mpu6050 "$S/sys/bus/iio/devices" ;;
	*) die "unknown profile $profile" ;;
	esac
	mkfifo -m 0660 "$S/dev/iio:device0"
	[ -z "$owner" ] || chown -R "$owner" "$S/sys/bus/iio/devices" "$S/dev/iio:device0"
	setsid bash -c 'echo $$ >"$1/holder.pid"; exec unshare --mount --propagation private --net -- "$2" __init "$1"' \
		_ "$S" "$(readlink -f "$0")" >"$S/holder.log" 2>&1 </dev/null &
	for _ in $(seq 100); do [ -e "$S/ns.ready" ] && break; sleep 0.05; done
	[ -e "$S/ns.ready" ] || { cat "$S/holder.log" >&2; die "namespace setup failed"; }
	;;
__init) # inside the new namespaces
	mount --rbind /dev "$S/hold/dev"
	if [ ! -e /dev/iio:device0 ]; then
		mount -t overlay fake-iio-dev -o "lowerdir=/dev:$S/stub/dev" /dev
		awk '$5 ~ "^/dev/" {print $5}' /proc/self/mountinfo | sort -u | while read -r m; do
			case $m in "$S"*) continue ;; esac
			rel=${m#/dev/}
			[ -e "/dev/$rel" ] && mountpoint -q "$S/hold/dev/$rel" && mount --rbind "$S/hold/dev/$rel" "/dev/$rel" 2>/dev/null || true
		done
	fi
	mount --bind "$S/dev/iio:device0" /dev/iio:device0
	[ -d /sys/bus/iio ] || mount -t overlay fake-iio-sys -o "lowerdir=/sys/bus:$S/stub/sysbus" /sys/bus
	mount --bind "$S/sys/bus/iio" /sys/bus/iio
	ip link set lo up
	: >"$S/ns.ready"
	exec -a fake-iio-holder sleep infinity
	;;
exec) h=$(holder); exec nsenter -t "$h" -m -n -- "$@" ;;
netexec) h=$(holder); exec nsenter -t "$h" -n -- "$@" ;;
iiod-start)
	port=${1:-30431}; h=$(holder)
	setsid bash -c 'echo $$ >"$1/iiod.pid"; exec nsenter -t "$2" -m -n -- iiod -p "$3"' _ "$S" "$h" "$port" \
		>"$S/iiod.log" 2>&1 </dev/null &
	for _ in $(seq 100); do
		nsenter -t "$h" -n -- ss -ltnH "sport = :$port" 2>/dev/null | grep -q LISTEN && exit 0
		sleep 0.05
	done
	cat "$S/iiod.log" >&2; die "iiod did not start"
	;;
iiod-stop) stop_pid "$S/iiod.pid" ;;
down)
	stop_pid "$S/iiod.pid"
	stop_pid "$S/holder.pid"
	rm -rf "$S"
	;;
*) die "unknown verb $verb" ;;
esac
