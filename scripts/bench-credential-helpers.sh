#!/usr/bin/env bash
# Whole-process `get` of git's and docker's credential helpers, timed with hyperfine on this machine:
#   git:    git-credential-keystone (default keychain file, unlocked; and the Secret Service) against git-credential-store
#           (a plaintext file) and git-credential-cache (a daemon holding it in memory); and `keystone credential-helper
#           git get` (the whole keystone binary, as a symbolic link to it would run).
#   docker: docker-credential-keystone against docker-credential-secretservice (a private gnome-keyring on its own
#           bus) and docker-credential-pass (a throwaway gpg key without passphrase).
# Everything runs in a temporary HOME; nothing of the user's is read or written.
#
#   scripts/bench-credential-helpers.sh [BUILD_DIR]     (default .build/release, else .build/debug)
#
# Needs hyperfine, git, gnome-keyring, dbus-daemon, golang-docker-credential-helpers, pass and gnupg (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-}"
if [ -z "$build" ]; then
    if [ -x .build/release/git-credential-keystone ]; then build=.build/release; else build=.build/debug; fi
fi
build="$(cd "$build" && pwd)"
for tool in hyperfine git gnome-keyring-daemon dbus-run-session docker-credential-secretservice docker-credential-pass pass gpg; do
    command -v "$tool" >/dev/null || { echo "bench-credential-helpers: $tool is not installed" >&2; exit 2; }
done
for binary in keystone git-credential-keystone docker-credential-keystone; do
    [ -x "$build/$binary" ] || { echo "bench-credential-helpers: $build/$binary is not built (swift build --product $binary)" >&2; exit 2; }
done

work="$(mktemp -d /tmp/kbench.XXXXXX)"
trap 'GNUPGHOME="$work/gnupg" gpgconf --kill gpg-agent 2>/dev/null || true; git credential-cache --socket "$work/cache.sock" exit 2>/dev/null || true; rm -rf "$work"' EXIT
export HOME="$work/home" XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" XDG_RUNTIME_DIR="$work" \
       GNUPGHOME="$work/gnupg" PASSWORD_STORE_DIR="$work/pass" GIT_CONFIG_NOSYSTEM=1 PATH="$build:$PATH"
unset KEYSTONE_KEYCHAIN KEYSTONE_BACKEND KEYSTONE_KEYCHAIN_DIR
mkdir -p "$HOME" "$GNUPGHOME" && chmod 700 "$GNUPGHOME"

request='protocol=https\nhost=git.example.com\nusername=alice\npassword=bench-password\n\n'
printf 'protocol=https\nhost=git.example.com\n\n' > "$work/git-get"
printf 'https://registry.example.com\n' > "$work/docker-get"
printf "$request" | git-credential-keystone store 2>/dev/null
printf "$request" | git credential-store --file "$work/plain" store
printf "$request" | git credential-cache --socket "$work/cache.sock" --timeout 3600 store
docker_item='{"ServerURL":"https://registry.example.com","Username":"alice","Secret":"bench-password"}'
printf '%s' "$docker_item" | docker-credential-keystone store
gpg --batch --quiet --passphrase '' --quick-gen-key 'Keystone Bench <bench@example.invalid>' default default never 2>/dev/null
pass init "$(gpg --list-keys --with-colons | awk -F: '/^fpr/ {print $10; exit}')" >/dev/null
printf '%s' "$docker_item" | docker-credential-pass store

# Sanity: each helper answers with the password before it is timed.
for check in "git-credential-keystone get < $work/git-get" "git credential-store --file $work/plain get < $work/git-get" \
             "git credential-cache --socket $work/cache.sock get < $work/git-get" "docker-credential-keystone get < $work/docker-get" \
             "docker-credential-pass get < $work/docker-get"; do
    sh -c "$check" | grep -q bench-password || { echo "bench-credential-helpers: no password from: $check" >&2; exit 1; }
done

runs="${BENCH_RUNS:-200}"
echo "== git: get, whole process ($build) =="
# hyperfine 1.15 has no --input: each command is `sh -c '… < FILE'` without hyperfine's own shell (-N), so every row
# includes the same sh start (about 0.7 ms; the `sh -c true` row) rather than a shell-time correction that is noisy
# below 5 ms.
hyperfine -N --warmup 10 --runs "$runs" --style basic --export-markdown "$work/git.md" \
    -n "sh -c true (the wrapper alone)" "sh -c true" \
    -n git-credential-store "sh -c 'git credential-store --file $work/plain get < $work/git-get'" \
    -n git-credential-cache "sh -c 'git credential-cache --socket $work/cache.sock get < $work/git-get'" \
    -n git-credential-keystone "sh -c 'git-credential-keystone get < $work/git-get'" \
    -n "keystone credential-helper git get" "sh -c 'keystone credential-helper git get < $work/git-get'"
cat "$work/git.md"

echo "== docker: get, whole process; the Secret Service helpers on a private gnome-keyring =="
dbus-run-session -- bash -c '
    set -e
    printf bench | gnome-keyring-daemon --unlock --components=secrets >/dev/null
    printf "%s" "$1" | docker-credential-secretservice store
    printf "%s" "$1" | KEYSTONE_KEYCHAIN=secret-service: docker-credential-keystone store
    printf "protocol=https\nhost=git.example.com\nusername=alice\npassword=bench-password\n\n" | git-credential-keystone --keychain secret-service: store
    hyperfine -N --warmup 10 --runs "$2" --style basic --export-markdown "$3/docker.md" \
        -n docker-credential-pass "sh -c \"docker-credential-pass get < $3/docker-get\"" \
        -n docker-credential-secretservice "sh -c \"docker-credential-secretservice get < $3/docker-get\"" \
        -n "docker-credential-keystone (keychain file)" "sh -c \"docker-credential-keystone get < $3/docker-get\"" \
        -n "docker-credential-keystone (Secret Service)" "sh -c \"KEYSTONE_KEYCHAIN=secret-service: docker-credential-keystone get < $3/docker-get\"" \
        -n "git-credential-keystone (Secret Service)" "sh -c \"git-credential-keystone --keychain secret-service: get < $3/git-get\""
    cat "$3/docker.md"
' bench "$docker_item" "$runs" "$work"
