#!/bin/sh
# The system test's sensor, made at boot (lis3dh-stub.service): a LIS3DH on the kernel's i2c-stub
# bus, bound to the real st_accel driver, as a board's device tree would bind it. The driver
# reads WHO_AM_I (0x33) and the output registers from the stub's memory; st_sensors reads
# several registers at once with the register's 0x80 bit set, so each value is written at both
# addresses (the walk player, scripts/system-test/walk-player.swift, does the same per sample).
# The full scale is set to ±8 g: a pocket walk reaches 4 g. Installed and first run by the
# guest's side at its first boot (the sensor is there before the package), then at every boot by
# lis3dh-stub.service, before sysinit.target.
set -eu
modprobe i2c-dev
modprobe i2c-stub chip_addr=0x18
bus=
for d in /sys/bus/i2c/devices/i2c-*; do
    if [ "$(cat "$d/name")" = "SMBus stub driver" ]; then bus=${d##*/i2c-}; fi
done
[ -n "$bus" ] || { echo "lis3dh-stub: no i2c-stub bus" >&2; exit 1; }
for r in 0x0f 0x8f; do i2cset -y "$bus" 0x18 $r 0x33; done
# At rest: x = 0, y = 0, z = 1 g (1000 counts of 1 mg at ±2 g, 12 bits left-justified).
i2cset -y "$bus" 0x18 0xa8 0x00 0x00 0x00 0x00 0x80 0x3e i
i2cset -y "$bus" 0x18 0x28 0x00 0x00 0x00 0x00 0x80 0x3e i
modprobe st_accel_i2c
echo lis3dh 0x18 >"/sys/bus/i2c/devices/i2c-$bus/new_device"
for _ in $(seq 50); do
    for dev in /sys/bus/iio/devices/iio:device*; do
        [ -e "$dev/in_accel_scale_available" ] || continue
        # The smallest scale whose 12-bit range (±2048 counts) covers ±5 g.
        scale=$(tr ' ' '\n' <"$dev/in_accel_scale_available" | awk 'NF && $1 * 2048 >= 49 { print $1; exit }')
        echo "$scale" >"$dev/in_accel_x_scale" # one full scale for the three axes
        echo "$bus" >/run/lis3dh-stub-bus
        echo "lis3dh-stub: $dev on i2c-$bus, scale $(cat "$dev/in_accel_x_scale")"
        exit 0
    done
    sleep 0.1
done
echo "lis3dh-stub: the LIS3DH did not appear" >&2
exit 1
