#!/bin/bash
# The system test's guest side (scripts/system-test.sh): run at every boot of the Debian guest by
# stepgate-system-test.service, from the host's folder mounted at /mnt/host. Goes on from the
# phase in /mnt/host/phase: `install` (first boot: install, walk, unlock, reboot inside the
# window), `reboot` (relock on the original deadline, SIGKILL, the full version's extras, purge),
# then `done` and power off. Each check is one `ok - …` or `not ok - …` line in /mnt/host/results.
set -u
host=/mnt/host
exec >>"$host/guest.log" 2>&1
phase=$(cat "$host/phase")
mode=$(cat "$host/mode")
results=$host/results
walker=walker
walker_uid=$(id -u "$walker")
bus=unix:path=/run/user/$walker_uid/bus
game=/usr/games/sgt-game
domain=games.example.org
window_minutes=3
notices=/var/tmp/notices.log
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8

log() { echo "[$(date +%T)] $*"; }
ok() { echo "ok - $*" >>"$results"; }
not_ok() { echo "not ok - $*" >>"$results"; }
# check DESCRIPTION COMMAND...: one result line, from the command's exit status.
check() {
    local description=$1
    shift
    log "check: $description: $*"
    if "$@"; then ok "$description"; else not_ok "$description"; fi
}
figure() { echo "figure: $*" >>"$results"; }
note() { echo "# $*" >>"$results"; }
# until_true SECONDS COMMAND...: true once COMMAND succeeds, false after SECONDS.
until_true() {
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 1
    done
}
as_walker() { runuser -u "$walker" -- "$@"; }
game_runs() { as_walker "$game" 0; }
game_denied() { ! as_walker "$game" 0 2>/dev/null; }
status_text() { stepgate status 2>&1; }
shielded() { status_text | grep -q '^games: shielded'; }
open_now() { status_text | grep -q '^games: open.*unlocked until'; }
# The managed block names the domain (with its www. name and trailing-dot forms) on its lines.
hosts_blocks() { grep -v '^#' /etc/hosts | grep -q -E "[[:space:]]${domain//./\\.}([.[:space:]]|\$)"; }
# The unlock deadline the daemon reports (unlockedUntil), in seconds since the epoch.
deadline() {
    local until
    until=$(stepgate status --json 2>/dev/null | grep -o '"unlockedUntil" *: *"[^"]*"' | head -1 | sed 's/.*: *"//; s/"$//')
    [ -n "$until" ] && date -d "$until" +%s
}
daemon_active() { [ "$(systemctl is-active stepgate.service)" = active ]; }
daemon_pid() { systemctl show -p MainPID --value stepgate.service; }
sensor() { ls -d /sys/bus/iio/devices/iio:device* 2>/dev/null | head -1; }
stub_bus() { cat /run/lis3dh-stub-bus; }
# Whether the walker's desktop (notice-server.py on their session bus) got a notice.
noticed() { grep -q "$1" "$notices"; }
# play SECONDS [--still]: the walk (or stillness) into the sensor's registers, in the background.
play() {
    if [ "${2:-}" = --still ]; then
        "$host/walk-player" --still "$(stub_bus)" "$(sensor)" "$1" &
    else
        "$host/walk-player" "$host/walk.csv" "$(stub_bus)" "$(sensor)" "$1" &
    fi
    player=$!
}
write_config() {
    cat >/etc/stepgate/config.json <<EOF
{
  "input": { "rate": 100 },
  "policy": {
    "emergency": { "perWeek": 3, "minutes": 1 },
    "stores": {
      "games": {
        "selection": { "executables": ["$game"], "domains": ["$domain"] },
        "gate": { "goals": [{ "steps": 100, "minutes": $window_minutes }] }
      }
    }
  },
  "stateDirectory": "/var/lib/stepgate",
  "controlSocket": "/run/stepgate/control.sock",
  "shields": {
    "exec": { "enabled": true, "graceSeconds": 5 },
    "domains": { "path": "/etc/hosts", "format": "hosts" }
  }
}
EOF
}
# Files outside the volatile and per-boot places, for the purge's "nothing behind".
file_list() {
    find / -xdev \( -path /proc -o -path /sys -o -path /run -o -path /dev -o -path /tmp -o -path /var/tmp \
        -o -path /var/log -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg \
        -o -path /var/lib/systemd -o -path /home -o -path /mnt -o -path /root -o -path /lost+found \) -prune \
        -o -print | sort
}
# The daemon's CPU time (ticks), voluntary context switches of all its threads, and RSS (kB).
daemon_counters() {
    local pid=$1 ticks switches=0 t
    ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    for t in /proc/"$pid"/task/*/status; do
        switches=$((switches + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t")))
    done
    echo "$ticks $switches $(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")"
}
# measure LABEL SECONDS: the daemon's CPU share, wake-ups per second and resident memory.
measure() {
    local pid a b seconds=$2 hz
    pid=$(daemon_pid)
    hz=$(getconf CLK_TCK)
    read -r -a a <<<"$(daemon_counters "$pid")"
    sleep "$seconds"
    read -r -a b <<<"$(daemon_counters "$pid")"
    figure "$1: CPU $(awk -v t=$((b[0] - a[0])) -v hz="$hz" -v s="$seconds" 'BEGIN { printf "%.1f", 100 * t / hz / s }') %," \
        "wake-ups $(awk -v n=$((b[1] - a[1])) -v s="$seconds" 'BEGIN { printf "%.1f", n / s }')/s," \
        "RSS $((b[2] / 1024)) MiB ($seconds s, pid $pid, $(ls /proc/"$pid"/task | wc -l) threads)"
}

log "phase $phase ($mode), boot $(cat /proc/sys/kernel/random/boot_id), kernel $(uname -r)"
case "$phase" in
install)
    install -m 0755 "$host/lis3dh-stub.sh" /usr/local/sbin/lis3dh-stub
    systemctl start lis3dh-stub.service
    dev=$(sensor)
    check "the st_accel driver binds the LIS3DH on i2c-stub at boot ($dev: $(cat "$dev/name" 2>/dev/null))" \
        test "$(cat "$dev/name" 2>/dev/null)" = lis3dh
    cp /usr/bin/sleep "$game"
    # The walker's desktop: a notification server started with their user manager, which
    # lingering starts at boot (a login session's bus at /run/user/UID/bus).
    install -m 0755 "$host/notice-server.py" /usr/local/lib/notice-server.py
    printf '%s\n' "[Unit]" "Description=Notification server (the system test's desktop)" "[Service]" \
        "ExecStart=/usr/local/lib/notice-server.py $notices" "[Install]" "WantedBy=default.target" \
        >/etc/systemd/user/notice-server.service
    systemctl --global enable notice-server.service
    cp /etc/hosts /var/tmp/hosts.before
    file_list >/var/tmp/files.before
    cp "$host/stepgate.deb" /var/tmp/stepgate.deb
    check "apt-get installs the package offline (its dependencies are in the root)" \
        apt-get install -y /var/tmp/stepgate.deb
    check "the package made the group 'stepgate' (sysusers.d)" getent group stepgate
    check "a fresh install is neither enabled nor started" \
        test "$(systemctl is-enabled stepgate.service)-$(systemctl is-active stepgate.service)" = disabled-inactive
    # README.Debian's steps, in its order: configure, check, enable; then the group and udev.
    write_config
    check "daemon --check accepts the configuration" stepgate daemon --check --config /etc/stepgate/config.json
    loginctl enable-linger "$walker"
    check "the walker has a session bus (/run/user/$walker_uid/bus)" until_true 90 test -S "/run/user/$walker_uid/bus"
    check "the walker's notification server owns org.freedesktop.Notifications" \
        until_true 60 as_walker env DBUS_SESSION_BUS_ADDRESS="$bus" busctl --user status org.freedesktop.Notifications
    check "systemctl enable --now stepgate (Type=notify: ready once the shields are in force)" \
        systemctl enable --now stepgate.service
    usermod -aG stepgate "$walker"
    udevadm trigger -s iio --settle
    check "the udev rule gives the group the sensor: $(stat -c '%G %a' /dev/iio:device0)" \
        test "$(stat -c '%G:%a' /dev/iio:device0)" = stepgate:660
    check "a member of the group opens the sensor" as_walker sh -c 'exec 3</dev/iio:device0'
    check "the shielded program is denied to the walker" game_denied
    check "the shielded domain is in /etc/hosts" hosts_blocks
    status_text
    check "the daemon reads the sensor through the driver, polled ($(status_text | head -1))" \
        sh -c "stepgate status | head -1 | grep -q 'IIO accelerometer'"
    log "sampling_frequency $(cat "$(sensor)/sampling_frequency")"
    walk_start=$(date +%s)
    play 180
    until_true 240 open_now
    unlocked=$?
    unlock_at=$(date +%s)
    kill "$player" 2>/dev/null
    wait "$player"
    status_text
    if [ "$unlocked" -eq 0 ]; then ok "the walk unlocks the goal ($((unlock_at - walk_start)) s of walking)"; else not_ok "the walk unlocks the goal: $(status_text | tr '\n' ' ')"; fi
    check "the walker runs the program while unlocked" game_runs
    check "the domain's block is lifted while unlocked" until_true 10 eval '! hosts_blocks'
    cat /etc/hosts
    check "a desktop notice reaches the walker's session bus ('games unlocked until …')" \
        until_true 20 noticed 'games unlocked until'
    cat "$notices"
    deadline >/var/tmp/deadline
    log "deadline $(date -d @"$(cat /var/tmp/deadline)" +%T), $(($(cat /var/tmp/deadline) - $(date +%s))) s from now"
    check "the unlock has a deadline ($window_minutes minutes after the unlock)" test -s /var/tmp/deadline
    echo reboot >"$host/phase"
    date +%s >/var/tmp/reboot-asked
    log "systemctl reboot"
    sync
    systemctl reboot
    ;;
reboot)
    deadline=$(cat /var/tmp/deadline)
    check "after the reboot the enabled daemon runs ($(($(date +%s) - $(cat /var/tmp/reboot-asked))) s after 'systemctl reboot')" \
        until_true 120 daemon_active
    status_text
    # A reboot ends a window on time or up to a minute early (docs/policy.md, Time: the state
    # may be a minute old at a power cut), so the window goes on after the boot when more than
    # a minute of it is left.
    left=$((deadline - $(date +%s)))
    now_deadline=$(deadline)
    if [ "$left" -gt 70 ]; then
        check "still unlocked after the reboot ($left s left), until the original deadline ($(date -d @"$deadline" +%T))" \
            test "${now_deadline:-0}" -ge $((deadline - 61)) -a "${now_deadline:-0}" -le "$deadline"
    else
        note "the reboot took long: $left s of the window left at boot, under the minute a reboot may take off"
    fi
    as_walker "$game" 3600 &
    running_game=$!
    until_true $((deadline - $(date +%s) + 90)) shielded
    relocked_at=$(date +%s)
    status_text
    check "relocked on the original deadline ($((relocked_at - deadline)) s from it; a reboot may end it up to 60 s early)" \
        test $((relocked_at - deadline)) -ge -61 -a $((relocked_at - deadline)) -le 5
    check "the program the walker left running is ended at the relock" until_true 30 sh -c "! kill -0 $running_game"
    check "the program is denied again" game_denied
    check "the domain is blocked again" hosts_blocks
    check "a desktop notice reaches the walker's bus ('games is shielded again')" \
        until_true 20 noticed 'games is shielded again'

    # SIGKILL: systemd restarts the daemon (RestartSec=5); the exec shield's fanotify group waits
    # in systemd's descriptor store, so a launch in the gap waits for the new instance instead of
    # going through. The launches start once the killed daemon is gone (a launch pending at the
    # instant it dies is the full version's case: see guest-full.sh).
    old_pid=$(daemon_pid)
    restarts=$(systemctl show -p NRestarts --value stepgate.service)
    systemctl kill -s KILL stepgate.service
    until_true 30 sh -c "[ \"\$(systemctl show -p MainPID --value stepgate.service)\" != $old_pid ]"
    as_walker sh -c "while :; do if $game 0 2>/dev/null; then echo \"RAN \$(date +%s.%N)\"; else echo \"denied \$(date +%s.%N)\"; fi; done" >/var/tmp/launches &
    launcher=$!
    check "systemctl kill -s KILL: systemd restarts the daemon" \
        until_true 60 sh -c "[ \"\$(systemctl show -p NRestarts --value stepgate.service)\" -gt $restarts ] && [ \"\$(systemctl is-active stepgate.service)\" = active ]"
    restarted=$(date +%s)
    sleep 2
    kill "$launcher"
    # runuser's child shell (the loop) outlives runuser: end it too, or its next launch is pending
    # at the purge's stop (the known hang).
    pkill -KILL -u "$walker" -f 'while :; do if ' 2>/dev/null || true
    wait "$launcher" 2>/dev/null
    first=$(head -1 /var/tmp/launches | cut -d' ' -f2 | cut -d. -f1)
    check "no launch went through while the daemon was down ($(grep -c denied /var/tmp/launches) denied, $(grep -c RAN /var/tmp/launches) ran; the first launch waited $((restarted - ${first:-$restarted})) s for the new instance)" \
        sh -c "! grep -q RAN /var/tmp/launches && grep -q denied /var/tmp/launches"
    log "daemon pid $old_pid -> $(daemon_pid)"
    refused=$(journalctl -k --no-pager | grep 'SECCOMP' | grep stepgate | grep -o 'comm="[^"]*".*syscall=[0-9]*' | sort | uniq -c)
    check "the unit's system call filter refused the daemon nothing${refused:+: $(echo $refused)}" test -z "$refused"
    if [ "$mode" = full ]; then
        . "$host/guest-full.sh"
    fi

    journalctl -b -1 -u stepgate --no-pager -o short-monotonic >"$host/journal.txt" 2>&1
    journalctl -b 0 -u stepgate --no-pager -o short-monotonic >>"$host/journal.txt" 2>&1
    check "journalctl -u stepgate tells the unlock" grep -q 'unlocked' "$host/journal.txt"
    check "journalctl -u stepgate tells the relock" grep -q 'shielded again\|relock' "$host/journal.txt"
    check "journalctl -u stepgate tells the SIGKILL and the restart" \
        sh -c "grep -q 'status=9/KILL' '$host/journal.txt' && grep -q 'Scheduled restart' '$host/journal.txt'"

    # Purge: no shield in force, no file behind, the hosts file as it was.
    check "apt-get purge stepgate" apt-get purge -y stepgate
    check "no shield in force: the walker runs the program" game_runs
    check "the hosts file is as it was before the install" cmp /etc/hosts /var/tmp/hosts.before
    file_list >/var/tmp/files.after
    # The group stays (Debian keeps system groups) and the walker is in it: /etc/group and
    # /etc/gshadow change, and their backups appear.
    left=$(comm -13 /var/tmp/files.before /var/tmp/files.after | grep -v -x -E '/etc/(group|gshadow)-?' || true)
    check "no file left behind${left:+: $(echo $left)}" test -z "$left"
    units=$(systemctl list-units --all --no-legend stepgate.service | grep -v 'not-found' || true)
    check "no unit left but a name (not-found: udev's record of the sensor still names it)${units:+: $units}" test -z "$units"
    check "no StepGate cgroup left" test ! -e /sys/fs/cgroup/stepgate
    echo done >"$host/phase"
    log "power off"
    sync
    systemctl poweroff
    ;;
*)
    log "nothing to do in phase $phase"
    systemctl poweroff
    ;;
esac
