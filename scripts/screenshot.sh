#!/usr/bin/env bash
# Takes the README's picture of the shield screen: what the gated person sees when the exec
# shield denies a launch. Everything is real: a virtual X display (Xvfb), the gated user's own
# session bus (dbus-daemon as `nobody`), a notification daemon (dunst) drawing on that display,
# and `stepgate daemon` with the exec shield, whose denial of a launch by `nobody` posts the
# notice. Needs root (the exec shield, and becoming `nobody`); installs xvfb, dunst, x11-apps
# and imagemagick with apt-get where they are missing.
#
#   sudo bash scripts/screenshot.sh [OUT.png]    (default docs/figures/shield-screen.png)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${1:-docs/figures/shield-screen.png}"
[ "$(id -u)" -eq 0 ] || { echo "screenshot.sh: needs root (the exec shield, and becoming nobody)" >&2; exit 1; }

missing=()
for pair in Xvfb:xvfb dunst:dunst xwd:x11-apps; do
    command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
[ -x /usr/bin/convert ] || missing+=(imagemagick)
if [ "${#missing[@]}" -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

swift build >&2  # stepgate and stepgate-full
stepgate="$(swift build --show-bin-path)/stepgate"
work="$(mktemp -d /tmp/stepgate-screenshot.XXXXXX)"
chmod 755 "$work"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups) # setpriv execs: $! is the program

display=":$((90 + RANDOM % 9))"
Xvfb "$display" -screen 0 700x120x24 -ac -nolisten tcp >/dev/null 2>&1 &
pids+=($!)
home="$work/nobody"
mkdir "$home" && chown nobody:nogroup "$home"
bus="$home/bus-$(id -u nobody)"
"${nobody[@]}" dbus-daemon --session --nofork --nopidfile --address="unix:path=$bus" >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S "$bus" ] && break; sleep 0.05; done
cat >"$home/dunstrc" <<'EOF'
[global]
    width = 560
    height = 100
    origin = top-left
    offset = 20x10
    font = DejaVu Sans 12
    frame_width = 2
    frame_color = "#4c7899"
    padding = 14
    horizontal_padding = 14
    format = "<b>%s</b>\n%b"
    show_indicators = no
[urgency_normal]
    background = "#1e2430"
    foreground = "#e8ecf2"
    timeout = 0
[urgency_critical]
    background = "#1e2430"
    foreground = "#ffffff"
    frame_color = "#d08770"
    timeout = 0
EOF
chown nobody:nogroup "$home/dunstrc"
DISPLAY="$display" DBUS_SESSION_BUS_ADDRESS="unix:path=$bus" "${nobody[@]}" dunst -config "$home/dunstrc" >/dev/null 2>&1 &
pids+=($!)
sleep 1

mkdir "$work/games"
cp /bin/true "$work/games/supertux2"
cat >"$work/config.json" <<EOF
{
  "input": {"replay": "$root/samples/drive-wrist-0.csv", "speed": 1},
  "policy": {"stores": {"games": {
     "selection": {"executables": ["$work/games/supertux2"]},
     "gate": {"goals": [{"steps": 100, "minutes": 30}]}}}},
  "stateDirectory": "$work/state",
  "controlSocket": "$work/control.sock",
  "shields": {"exec": {"enabled": true}},
  "messages": {"games": {"title": "Games are shielded", "subtitle": "A walk unlocks them: 100 steps for 30 minutes."}},
  "notifications": {"busAddress": "unix:path=$home/bus-%u"}
}
EOF
"$stepgate" daemon --config "$work/config.json" >"$work/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    "$stepgate" status --socket "$work/control.sock" 2>/dev/null | grep -q shielded && break
    sleep 0.1
done
# The gated user starts the game from a launcher: denied, and the shield screen appears.
if "${nobody[@]}" "$work/games/supertux2" 2>/dev/null; then
    echo "screenshot.sh: the launch was not denied" >&2
    cat "$work/daemon.log" >&2
    exit 1
fi
sleep 2
mkdir -p "$(dirname "$out")"
xwd -root -display "$display" -silent | /usr/bin/convert xwd:- -crop 626x114+0+0 +repage "$out"
echo "wrote $out" >&2
