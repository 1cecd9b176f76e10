#!/usr/bin/env bash
# Code written for Apple platforms, unchanged, on Linux: builds and tests Tests/UnchangedAppleApp, a package holding
# an iOS app's keychain layer (a keychain protocol and its error, a mock and the real SecItem service, a Secure Enclave
# signing key with a software fallback, biometric authentication behind a protocol, a UserDefaults-to-keychain
# migration) and its XCTest and Swift Testing tests, copied with their `import` lines (Foundation, Security, CryptoKit,
# LocalAuthentication) and built against this repository's `Security`, `LocalAuthentication` and `CryptoKit` products.
#
# The same files are also type-checked against the Apple SDK stand-in (Tests/AppleSDKStandIn), as Apple code: the glue's
# imports are ones Apple platforms need too, and nothing uses a name only Keystone has.
#
# The package builds in its own folder (Tests/UnchangedAppleApp/.build: the first build compiles Keystone and its
# dependencies again). Its tests use the default keychain, a keychain file, as an app does; they run with HOME and the
# XDG folders in a temporary directory, so they never touch the user's keychain or UserDefaults, and with
# KEYSTONE_KEYCHAIN / KEYSTONE_BACKEND unset, so the default is the keychain file.
#
# Decision: `CI` is unset for the test run. The app's Swift Testing suite disables its real-keychain test when `CI` is
# set, because an iOS CI runner's simulator has no usable keychain; on Linux the keychain is a file in the temporary
# directory, so the test runs on CI too rather than being skipped there.
#
# Prints, last, one line:
#   unchanged Apple code: N tests passed (XCTest a, Swift Testing b)
# followed by "; S skipped by the app's own guards: name (reason), …" when the app's tests skipped themselves (its
# Secure Enclave test does so without a Secure Enclave: the app installs no Keystone backend, so there is none).
# Exits non-zero when the package does not build, a test fails, or either library ran no test.
#
# Usage: scripts/check-unchanged-apple-code.sh   (from anywhere; needs the toolchain's XCTest and Swift Testing)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
package="$repo/Tests/UnchangedAppleApp"
work="$(mktemp -d /tmp/keystone-unchanged-apple-code.XXXXXX)"
trap 'rm -rf "$work"' EXIT

fail() { echo "unchanged Apple code: FAILED ($*)"; exit 1; }

# The build, with the caller's environment (SwiftPM's caches of the dependencies' repositories are under HOME).
# This package builds the Linux `Security` module, so a rebuild of swift-certificates' X509 in its build folder (a
# version update) would see that module through X509's `#if canImport(Security)` and fail ("missing required module";
# seen with a touched X509 source). The module is removed first: it is rebuilt after X509, in a second or two.
start=$(date +%s)
rm -f "$package"/.build/*/debug/Modules/Security.*
if ! swift build --build-tests --package-path "$package" > "$work/build.log" 2>&1; then
    errors=$(grep -E "error:" "$work/build.log" | sort -u | head -30 || true)
    if [ -n "$errors" ]; then echo "$errors"; else tail -30 "$work/build.log"; fi
    fail "Tests/UnchangedAppleApp does not build"
fi
built=$(( $(date +%s) - start ))

# The same files as Apple code: type-checked against the Apple SDK stand-in (Tests/AppleSDKStandIn: Security,
# LocalAuthentication and CryptoKit with Apple's signatures), in Swift 5 language mode as Xcode makes new projects.
# This proves that the glue's `import` lines are ones the code needs on Apple platforms too, not Linux-only
# additions, and that nothing here uses a Keystone-only name. swift-crypto's module comes from this package's build.
modules="$(ls -d "$package"/.build/*/debug/Modules | head -n 1)"
sdk="$work/sdk"; mkdir -p "$sdk"
standin() { swiftc -parse-as-library -module-cache-path "$work/module-cache" "$@" > "$work/standin.log" 2>&1 \
    || { grep -E "error:" "$work/standin.log" | sort -u | head -20; fail "Tests/UnchangedAppleApp does not compile against the Apple SDK stand-in"; }; }
for module in Darwin Security LocalAuthentication; do
    standin -swift-version 6 -emit-module -module-name "$module" -emit-module-path "$sdk/$module.swiftmodule" \
        "$repo/Tests/AppleSDKStandIn/$module"/*.swift
done
standin -swift-version 6 -emit-module -module-name CryptoKit -emit-module-path "$sdk/CryptoKit.swiftmodule" -I "$sdk" -I "$modules" \
    "$repo/Tests/AppleSDKStandIn/CryptoKit"/*.swift
standin -swift-version 5 -emit-module -enable-testing -module-name MyApp -emit-module-path "$sdk/MyApp.swiftmodule" -I "$sdk" -I "$modules" \
    "$package"/Sources/MyApp/*.swift
standin -swift-version 5 -typecheck -module-name MyAppTests -I "$sdk" -I "$modules" "$package"/Tests/MyAppTests/*.swift

# The tests, kept off the user's keychain and defaults.
mkdir -p "$work/home" "$work/data" "$work/config"
start=$(date +%s)
status=0
env -u CI -u KEYSTONE_KEYCHAIN -u KEYSTONE_BACKEND -u KEYSTONE_KEYCHAIN_CREATE \
    HOME="$work/home" XDG_DATA_HOME="$work/data" XDG_CONFIG_HOME="$work/config" \
    swift test --skip-build --package-path "$package" > "$work/test.log" 2>&1 || status=$?
tested=$(( $(date +%s) - start ))

# XCTest: "Executed 14 tests, with 1 test skipped and 0 failures (0 unexpected)" for the suite 'All tests'.
xctest_line=$(grep -A1 "Test Suite 'All tests'" "$work/test.log" | grep -E "Executed [0-9]+ tests?" | tail -n 1 | sed 's/^[[:space:]]*//' || true)
xctest_executed=$(echo "$xctest_line" | sed -nE 's/.*Executed ([0-9]+) tests?.*/\1/p')
xctest_skipped=$(echo "$xctest_line" | sed -nE 's/.*with ([0-9]+) tests? skipped.*/\1/p')
xctest_failures=$(echo "$xctest_line" | sed -nE 's/.* ([0-9]+) failures?.*/\1/p')
# Swift Testing: "✔ Test run with 3 tests in 1 suite passed after 0.1 seconds." (or "✘ … failed …").
testing_line=$(grep -E "Test run with [0-9]+ tests?" "$work/test.log" | tail -n 1 || true)
testing_total=$(echo "$testing_line" | sed -nE 's/.*Test run with ([0-9]+) tests?.*/\1/p')
# Its skipped tests: '➜ Test "…" skipped' (XCTest's lines start "Test Case", so never match).
testing_skipped=$(grep -cE '^[^ ]+ Test .+ skipped' "$work/test.log" || true)

if [ "$status" -ne 0 ] || [ -z "$xctest_executed" ] || [ -z "$testing_total" ] || [ "${xctest_failures:-1}" != 0 ] \
    || ! echo "$testing_line" | grep -q "passed"; then
    failures=$(grep -E "error:|: error|failed|✘" "$work/test.log" | head -30 || true)
    if [ -n "$failures" ]; then echo "$failures"; else tail -30 "$work/test.log"; fi
    fail "swift test exited with $status; XCTest: ${xctest_line:-no summary}; Swift Testing: ${testing_line:-no summary}"
fi
xctest_passed=$(( xctest_executed - ${xctest_skipped:-0} ))
testing_passed=$(( testing_total - testing_skipped ))
[ "$xctest_passed" -gt 0 ] || fail "no XCTest test passed"
[ "$testing_passed" -gt 0 ] || fail "no Swift Testing test passed"

# The tests that skipped themselves, with their reasons.
skips=$(python3 - "$work/test.log" <<'PY'
import re, sys
out = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    # XCTest: "/path/File.swift:19: Suite.testName : Test skipped: <XCTest's wording> - <the test's reason>".
    m = re.search(r"(\w+)\.(\w+) : Test skipped:? ?(.*)$", line.rstrip())
    if m:
        out.append(f"{m.group(1)}.{m.group(2)} ({m.group(3).split(' - ', 1)[-1]})")
        continue
    # Swift Testing: '➜ Test "Display name" skipped: "reason"' or '➜ Test name() skipped.'
    m = re.search(r'^\S+ Test (".*?"|\S+) skipped(?:: "(.*)")?', line.rstrip())
    if m: out.append(f"{m.group(1)} ({m.group(2) or 'no reason given'})")
print(", ".join(out))
PY
)
skipped=$(( ${xctest_skipped:-0} + testing_skipped ))

echo "built in ${built} s, tested in ${tested} s (Tests/UnchangedAppleApp/.build)"
line="unchanged Apple code: $(( xctest_passed + testing_passed )) tests passed (XCTest $xctest_passed, Swift Testing $testing_passed)"
[ "$skipped" -eq 0 ] || line+="; $skipped skipped by the app's own guards: $skips"
echo "$line"
