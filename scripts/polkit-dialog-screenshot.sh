#!/bin/bash
# Takes the screenshot of the real polkit dialog that Keystone's desktop prompt shows (the DocC article
# AuthenticationOnLinux shows it): the REAL polkitd and polkit-gnome's authentication agent under Xvfb, asked by
# `keystone authenticate --policy password --reason ...` with no terminal, as on a desktop. Nothing is typed: the
# picture is the dialog waiting for the password. Needs root; changes nothing outside a private mount namespace
# except a temporary user and a temporary cgroup, both removed at the end.
#
# Usage: sudo scripts/polkit-dialog-screenshot.sh [OUTPUT.png] (default: the DocC catalog's Resources/polkit-dialog.png)
#   KEYSTONE=path/to/keystone (default .build/debug/keystone); REASON=text (keystone's --reason); KEEP=1 keeps the
#   work directory (logs, the full screen). Prints what polkitd asked the agent to show, then the file written.
#
# Without systemd (containers, CI) there is no systemd-logind, and a GUI agent registers for the logind session
# of its process. libsystemd's sd-login (which polkitd and libpolkit use) only reads files, so in the namespace the
# script plants what logind would have written: /run/systemd/system (sd_booted), /run/systemd/sessions/1 (an
# active local x11 session of the user on seat0), and puts the agent and keystone in a cgroup named
# user.slice/user-UID.slice/session-1.scope (sd_pid_get_session). polkitd then routes keystone's request to the
# agent registered for session 1, as on a real desktop.
#
# Debian packages: polkitd, policykit-1-gnome, xvfb, x11-utils (xwininfo), imagemagick (import), dbus-daemon,
# util-linux (unshare, setpriv, setsid).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
output=${1:-$here/Sources/SystemAuthentication/SystemAuthentication.docc/Resources/polkit-dialog.png}
keystone=${KEYSTONE:-$here/.build/debug/keystone}
agent=/usr/lib/policykit-1-gnome/polkit-gnome-authentication-agent-1
reason=${REASON:-Unlock the deploy key to sign release 2.4}

fail() { echo "polkit-dialog-screenshot: $*" >&2; exit 1; }

if [ "${1:-}" != "--inside" ]; then
    [ "$(id -u)" = 0 ] || fail "run as root (it starts polkitd, mounts in a private namespace and adds a temporary user)"
    for tool in /usr/lib/polkit-1/polkitd "$agent" /usr/bin/Xvfb /usr/bin/xwininfo /usr/bin/import /usr/bin/dbus-daemon \
                /usr/bin/unshare /usr/bin/setpriv /usr/bin/setsid; do
        [ -x "$tool" ] || fail "$tool is missing (apt-get install polkitd policykit-1-gnome xvfb x11-utils imagemagick dbus-daemon util-linux)"
    done
    [ -x "$keystone" ] || fail "no keystone at $keystone (swift build --traits NIO, or set KEYSTONE)"
    mkdir -p "$(dirname "$output")"
    output=$(cd "$(dirname "$output")" && pwd)/$(basename "$output")
    # env --default-signal: signals blocked or ignored by whoever started us (a test runner) would make every
    # process here deaf to SIGTERM; the teardown needs them to hear it.
    exec /usr/bin/env --default-signal /usr/bin/unshare -m --propagation private -- "$0" --inside "$output"
fi

# ---- inside the private mount namespace ----
output=$2
work=$(mktemp -d /tmp/keystone-polkit-shot-XXXXXX)
chmod 755 "$work"
pids=()
cgroup=
made_user=
cleanup() {
    local status=$?
    # The last started first: keystone, the agent, dbus-monitor, polkitd, Xvfb, the bus; SIGKILL after 5 s.
    local i pid
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        pid=${pids[i]}
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$cgroup" ]; then
        # Processes that outlived their parent (none expected) are killed before the cgroup goes.
        for pid in $(cat "$cgroup/cgroup.procs" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        for _ in 1 2 3 4 5 6 7 8 9 10; do rmdir "$cgroup" 2>/dev/null && break; sleep 0.2; done
        rmdir "$(dirname "$cgroup")" "$(dirname "$(dirname "$cgroup")")" 2>/dev/null || true
    fi
    [ -n "$made_user" ] && userdel "$user" 2>/dev/null || true
    if [ -n "${KEEP:-}" ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
    exit $status
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# Waits until the command succeeds: a hang guard of 600 tries (at least 120 s; more when each try is slow), generous
# for a loaded CI machine, where the dialog's painting took over 30 s once.
wait_for() {
    local what=$1; shift
    for _ in $(seq 1 600); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    fail "timed out waiting for $what; logs in $work (KEEP=1 keeps them): $(tail -n 5 "$work"/*.log 2>/dev/null)"
}

# The user whose program asks: a fresh one (its name unique to this run), with a password pam_unix must ask for.
user=ks-polkit-$$
getent passwd "$user" >/dev/null && fail "a user $user exists already"
useradd --no-create-home --home-dir "$work/home" --shell /usr/sbin/nologin --comment "Alex Example" "$user"
made_user=1
echo "$user:$(head -c 18 /dev/urandom | base64)" | chpasswd
uid=$(id -u "$user"); gid=$(id -g "$user")
mkdir -p "$work/home"; chown "$uid:$gid" "$work/home"

# Keystone's action, with the user as an owner so the dialog names the program and the reason.
mkdir "$work/actions"
"$keystone" install-polkit --owner "$user" --action-dir "$work/actions" >/dev/null
mount --bind "$work/actions" /usr/share/polkit-1/actions

# The system bus, private to the namespace, where every client looks for it.
mount -t tmpfs tmpfs /run/dbus
cat > "$work/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/dbus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/>
    <allow send_type="method_call"/> <allow send_type="signal"/> <allow send_type="method_return"/> <allow send_type="error"/>
    <allow receive_type="method_call"/> <allow receive_type="signal"/> <allow receive_type="method_return"/> <allow receive_type="error"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
EOF
unset DBUS_SYSTEM_BUS_ADDRESS DBUS_SESSION_BUS_ADDRESS
/usr/bin/dbus-daemon --config-file="$work/bus.conf" --nofork --print-address=1 > "$work/bus.address" 2> "$work/dbus-daemon.log" &
pids+=($!)
wait_for "dbus-daemon" test -s "$work/bus.address"

# The X server, on a free display it names once it accepts clients.
/usr/bin/Xvfb -displayfd 3 -screen 0 1024x768x24 -nolisten tcp 3> "$work/display" > "$work/xvfb.log" 2>&1 &
pids+=($!)
wait_for "Xvfb" grep -q '^[0-9]' "$work/display"
export DISPLAY=:$(head -n 1 "$work/display")

# What systemd-logind would have written: session 1, active, local, x11 on seat0, of $user.
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/system /run/systemd/sessions /run/systemd/users /run/systemd/seats /run/systemd/machines
cat > /run/systemd/sessions/1 <<EOF
UID=$uid
USER=$user
ACTIVE=1
IS_DISPLAY=1
STATE=active
REMOTE=0
TYPE=x11
ORIGINAL_TYPE=x11
CLASS=user
SEAT=seat0
VTNR=1
DISPLAY=$DISPLAY
SCOPE=session-1.scope
EOF
cat > "/run/systemd/users/$uid" <<EOF
NAME=$user
STATE=active
DISPLAY=1
SESSIONS=1
SEATS=seat0
ACTIVE_SESSIONS=1
ONLINE_SESSIONS=1
ACTIVE_SEATS=seat0
ONLINE_SEATS=seat0
EOF
cat > /run/systemd/seats/seat0 <<EOF
IS_SEAT0=1
CAN_MULTI_SESSION=1
CAN_TTY=1
CAN_GRAPHICAL=1
ACTIVE=1
ACTIVE_UID=$uid
SESSIONS=1
UIDS=$uid
EOF

# The session's cgroup on the cgroup v2 hierarchy sd-login reads ("0::" in /proc/PID/cgroup), relative to PID 1's.
if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then base=/sys/fs/cgroup
elif [ "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then base=/sys/fs/cgroup/unified
else fail "no cgroup v2 hierarchy (sd_pid_get_session needs one here)"; fi
root=$(sed -n 's/^0:://p' /proc/1/cgroup); root=${root%/init.scope}; root=${root%/system.slice}; root=${root%/}
cgroup=$base$root/user.slice/user-$uid.slice/session-1.scope
mkdir -p "$cgroup" || fail "cannot create $cgroup"

# polkitd (its log says when the agent registers).
/usr/lib/polkit-1/polkitd > "$work/polkitd.log" 2>&1 &
pids+=($!)
wait_for "polkitd on the bus" grep -q "Acquired the name org.freedesktop.PolicyKit1" "$work/polkitd.log"

# Runs a command as $user in session 1, without a terminal (exec: a background job's $! is the command's pid).
in_session() {
    exec /bin/sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cgroup" \
        /usr/bin/setpriv --reuid="$uid" --regid="$gid" --clear-groups \
        /usr/bin/env -i DISPLAY="$DISPLAY" HOME="$work/home" PATH=/usr/bin:/bin XDG_SESSION_ID=1 XDG_SESSION_TYPE=x11 \
        NO_AT_BRIDGE=1 LANG=C.UTF-8 "$@"
}

# GTK: the default theme, and a cursor that does not blink (two captures in a row must agree).
mkdir -p "$work/home/.config/gtk-3.0"
printf '[Settings]\ngtk-theme-name=Adwaita\ngtk-cursor-blink=false\n' > "$work/home/.config/gtk-3.0/settings.ini"
chown -R "$uid:$gid" "$work/home"

# What polkitd asks the agent to show (the agent's BeginAuthentication call on the bus).
/usr/bin/dbus-monitor --system "type='method_call',interface='org.freedesktop.PolicyKit1.AuthenticationAgent',member='BeginAuthentication'" \
    > "$work/monitor.log" 2>&1 &
pids+=($!)
wait_for "dbus-monitor" grep -q "NameLost\|member=NameAcquired" "$work/monitor.log"

# The agent, registered for session 1.
in_session /usr/bin/setsid "$agent" < /dev/null > "$work/agent.log" 2>&1 &
pids+=($!)
wait_for "the agent's registration" grep -q "Added authentication agent\|Registered Authentication Agent" "$work/polkitd.log"

# The program that asks: keystone, as a desktop app would (no terminal, DISPLAY set).
in_session /usr/bin/setsid "$keystone" authenticate --policy password --reason "$reason" \
    < /dev/null > "$work/keystone.log" 2>&1 &
pids+=($!)

# The dialog: polkit-gnome's window, once mapped with its password field.
dialog_id() { xwininfo -root -tree | grep -i '"Authenticate"' | grep -o '0x[0-9a-f]*' | head -n 1; }
has_dialog() { [ -n "$(dialog_id)" ]; }
wait_for "the dialog" has_dialog
grep -qF "string \"Authentication requested by keystone: $reason\"" "$work/monitor.log" \
    || fail "polkitd asked the agent without the program and the reason: $(cat "$work/monitor.log")"
echo "the agent was asked: $(grep -m 1 -o '"Authentication requested by [^"]*"' "$work/monitor.log")"

# The picture: the dialog's rectangle of the screen, once two captures in a row agree (GTK has painted it).
id=$(dialog_id)
geometry=$(xwininfo -id "$id" | awk '/Absolute upper-left X/{x=$NF} /Absolute upper-left Y/{y=$NF} /Width:/{w=$NF} /Height:/{h=$NF} END{print w "x" h "+" x "+" y}')
capture() { import -window root -crop "$geometry" +repage -strip "$1"; }
painted() {
    capture "$work/next.png"
    if [ -f "$work/last.png" ] && [ "$(compare -metric AE "$work/last.png" "$work/next.png" null: 2>&1)" = 0 ] \
        && [ "$(/usr/bin/convert "$work/next.png" -format '%[fx:standard_deviation>0]' info:)" = 1 ]; then return 0; fi
    mv "$work/next.png" "$work/last.png"; return 1
}
wait_for "the dialog's painting" painted
import -window root "$work/screen.png"
cp "$work/next.png" "$output"
echo "wrote $output (the dialog, $geometry of the screen)"
