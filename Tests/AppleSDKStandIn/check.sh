#!/usr/bin/env bash
# Compiles the Apple-platform branches of Keystone's sources on Linux, against a stand-in of the Apple SDK's
# Swift interface (this directory): `Darwin` (empty: it only makes `canImport(Darwin)` true), `Security`,
# `LocalAuthentication` and `CryptoKit` (swift-crypto plus `SecureEnclave`) with Apple's types and signatures
# (CFString is NSString, CFDictionary NSDictionary, LAContext a non-Sendable NSObject…). It checks types,
# signatures, Sendable and deprecations, not behaviour, and not availability (`os(iOS)` stays false and
# `@available(iOS …)` is not modelled).
#
# Compiled, each with `canImport(Darwin)` true:
#   KeychainServices      (on Apple platforms: AppleReexport.swift alone, re-exporting Security)
#   Keystone              (SystemKeychain.swift's Apple branches; PlatformSecureEnclave.swift's CryptoKit adapter),
#                         against that KeychainServices
#   KeystoneProtectedFiles, KeystoneMigrations, KeystoneImporters (Data Protection, the install marker, pass)
#   KeystoneTesting       against that Keystone
#   AppleStyleKeychain    the fixture of iOS-style code (Tests/Fixtures/AppleStyleKeychain)
#   AppleStyleCryptoKit   the fixture of iOS-style CryptoKit code (Tests/Fixtures/AppleStyleCryptoKit), one file of
#                         which imports CryptoKit alone (as the real framework, the stand-in brings Foundation and
#                         Security along)
#   KeychainServicesTests the test code that compiles on Apple platforms too (AppleStyleCode.swift)
#
# swiftc directly, not SwiftPM: the stand-in modules must stay out of every other build. KeychainEngine and
# Logging come from the normal debug build, so run `swift build --build-tests` first.
#
# Usage: Tests/AppleSDKStandIn/check.sh        (exit 0 and one "passed" line, or the compiler's errors and 1)
set -euo pipefail
cd "$(dirname "$0")/../.."

standin=Tests/AppleSDKStandIn
modules=.build/debug/Modules
if [ ! -e "$modules/KeychainEngine.swiftmodule" ]; then
    echo "check.sh: $modules/KeychainEngine.swiftmodule is missing: run swift build --build-tests first" >&2
    exit 2
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sdk="$work/sdk"   # the stand-in SDK's modules
out="$work/out"   # the Apple-flavoured KeychainServices and Keystone
mkdir -p "$sdk" "$out"

# The package's settings (Swift 6, ExistentialAny), and no warnings. Search order: the first -I wins, so the
# stand-in's Security and this check's KeychainServices/Keystone shadow the Linux ones in $modules.
# The package name SwiftPM gave this package's modules (its identity: the checkout folder's name), so that the
# modules compiled here see the `package` declarations of the build's KeychainEngine as SwiftPM's targets do.
package_name="$(grep -o '"-module-name","KeychainEngine"[^]]*"-package-name","[^"]*"' .build/debug.yaml | head -n 1 | sed 's/.*"-package-name","\([^"]*\)"/\1/')"
[ -n "$package_name" ] || package_name="$(grep -o '"-package-name","[^"]*"' .build/debug.yaml | head -n 1 | cut -d'"' -f4)"
flags=(-parse-as-library -swift-version 6 -enable-upcoming-feature ExistentialAny -warnings-as-errors
       -module-cache-path "$work/module-cache" -package-name "$package_name")

compile() {
    local what="$1"; shift
    if ! swiftc "${flags[@]}" "$@"; then
        echo "Apple SDK stand-in check FAILED: $what does not compile as on Apple platforms" >&2
        exit 1
    fi
}

for module in Darwin Security LocalAuthentication; do
    compile "the stand-in $module" -emit-module -module-name "$module" -emit-module-path "$sdk/$module.swiftmodule" \
        "$standin/$module"/*.swift
done
# CryptoKit: swift-crypto's Crypto (from the debug build) re-exported, plus SecureEnclave. It shadows the package's
# own Linux `CryptoKit` module in $modules (the first -I wins).
compile "the stand-in CryptoKit" -emit-module -module-name CryptoKit -emit-module-path "$sdk/CryptoKit.swiftmodule" \
    -I "$sdk" -I "$modules" "$standin/CryptoKit"/*.swift

compile KeychainServices -emit-module -module-name KeychainServices -emit-module-path "$out/KeychainServices.swiftmodule" \
    -I "$sdk" Sources/KeychainServices/*.swift
compile Keystone -emit-module -module-name Keystone -emit-module-path "$out/Keystone.swiftmodule" \
    -I "$sdk" -I "$out" -I "$modules" $(find Sources/Keystone -name '*.swift' | sort)
compile KeystoneProtectedFiles -emit-module -module-name KeystoneProtectedFiles -emit-module-path "$out/KeystoneProtectedFiles.swiftmodule" \
    -I "$sdk" -I "$out" -I "$modules" $(find Sources/KeystoneProtectedFiles -name '*.swift' | sort)
compile KeystoneMigrations -emit-module -module-name KeystoneMigrations -emit-module-path "$out/KeystoneMigrations.swiftmodule" \
    -I "$sdk" -I "$out" -I "$modules" $(find Sources/KeystoneMigrations -name '*.swift' | sort)
compile KeystoneImporters -typecheck -module-name KeystoneImporters \
    -I "$sdk" -I "$out" -I "$modules" $(find Sources/KeystoneImporters -name '*.swift' | sort)
compile KeystoneTesting -typecheck -module-name KeystoneTesting \
    -I "$sdk" -I "$out" -I "$modules" Sources/KeystoneTesting/*.swift
compile AppleStyleKeychain -typecheck -module-name AppleStyleKeychain \
    -I "$sdk" Tests/Fixtures/AppleStyleKeychain/*.swift
compile KeychainServicesTests -typecheck -module-name KeychainServicesTests \
    -I "$sdk" -I "$out" -I "$modules" Tests/KeychainServicesTests/*.swift
# App code is built without ExistentialAny (the fixture's target too: its protocols are named as types without `any`).
app_flags=()
for flag in "${flags[@]}"; do
    case "$flag" in -enable-upcoming-feature|ExistentialAny) ;; *) app_flags+=("$flag") ;; esac
done
flags=("${app_flags[@]}")
compile AppleStyleCryptoKit -typecheck -module-name AppleStyleCryptoKit \
    -I "$sdk" -I "$modules" Tests/Fixtures/AppleStyleCryptoKit/*.swift

echo "Apple SDK stand-in check passed: KeychainServices, Keystone, KeystoneProtectedFiles, KeystoneMigrations," \
     "KeystoneImporters, KeystoneTesting, AppleStyleKeychain, KeychainServicesTests and" \
     "AppleStyleCryptoKit compile with canImport(Darwin) against Tests/AppleSDKStandIn"
