#!/usr/bin/env bash
# The light default build, measured: a consumer package that depends on the `Keystone` product only (default traits),
# built on Linux from an empty build folder, beside swift-crypto alone built the same way in the same run.
#
# Prints and checks:
#   - packages resolved (at most 5), and that none is a SwiftNIO / networking package (also what an iOS-style
#     consumer resolves: `swift package show-dependencies`, the same graph, since traits, not platforms, gate them);
#   - modules compiled, clean build time, and swift-crypto's clean build time as the baseline;
#   - the binary's NEEDED libraries (only libc/libm/libstdc++/libgcc/libz, SQLite, the Swift runtime and Foundation);
#   - that the consumer builds with the headers of libsecret, PAM, tpm2-tss and GLib/GIO hidden (a private mount
#     namespace bind-mounts empty folders over them), and runs its round trip (Keychain() on the default keychain
#     file) with libsecret-1.so*, libtss2-*.so* and libgio-2.0.so* hidden;
#   - that a second `swift build` after touching the consumer's Package.swift recompiles no Keystone module, and a
#     rebuild of swift-certificates' X509 in the same build folder succeeds;
#   - that a backend the app did not install is an error naming the product (KEYSTONE_BACKEND=secret-service), and
#     SecPKCS12Import without its reader is errSecUnimplemented.
#
# Usage: scripts/check-consumer.sh   (needs root for `unshare -m`, as in CI; exits non-zero when a target is missed)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d /tmp/keystone-consumer.XXXXXX)"
trap 'rm -rf "$work"' EXIT
fail=0
problem() { echo "FAILED: $*"; fail=1; }

# The consumer: Keystone only, default traits.
mkdir -p "$work/app/Sources/App" "$work/crypto/Sources/App"
cat > "$work/app/Package.swift" <<EOF
// swift-tools-version: 6.1
import PackageDescription
let package = Package(name: "App", platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [.package(name: "Keystone", path: "$repo")],
    targets: [.executableTarget(name: "App", dependencies: [
        .product(name: "Keystone", package: "Keystone"),
        // The same package's core modules, named for the checks below: no other package is resolved for them.
        .product(name: "KeychainServices", package: "Keystone"), .product(name: "KeychainEngine", package: "Keystone"),
    ])])
EOF
cat > "$work/app/Sources/App/main.swift" <<'EOF'
import Foundation
import KeychainEngine
import KeychainServices
import Keystone

// The round trip an app makes: the default keychain (a file), save, read, delete.
let keychain = Keychain()
let item = try GenericPassword(service: "com.example.consumer-check", account: "alice")
try keychain.save("consumer-check-secret", for: item)
guard try keychain.string(for: item) == "consumer-check-secret" else { fatalError("read back something else") }
try keychain.delete(item)

// A backend the program did not install is an error that names the product to add, never another keychain.
do {
    _ = try KeychainServicesDefaults.environmentEngine(["KEYSTONE_BACKEND": "secret-service"])
    fatalError("KEYSTONE_BACKEND=secret-service was accepted without the backend")
} catch let error as EngineError {
    guard error.status == errSecParam, error.reason.contains("KeychainSecretService"),
          error.reason.contains("bootstrap(.secretService)") else { fatalError("unclear error: \(error)") }
}
// PKCS#12 import without its reader: errSecUnimplemented.
var items: CFArray?
guard SecPKCS12Import(NSData(), [:], &items) == errSecUnimplemented else { fatalError("SecPKCS12Import without a reader") }
print("round trip: ok; missing backends named")
EOF
# The baseline: swift-crypto alone, the largest package Keystone builds on.
cat > "$work/crypto/Package.swift" <<'EOF'
// swift-tools-version: 6.1
import PackageDescription
let package = Package(name: "App", dependencies: [.package(url: "https://github.com/apple/swift-crypto", from: "4.5.2")],
    targets: [.executableTarget(name: "App", dependencies: [.product(name: "Crypto", package: "swift-crypto")])])
EOF
printf 'import Crypto\nprint(SHA256.hash(data: [1, 2, 3]))\n' > "$work/crypto/Sources/App/main.swift"

# Hidden: the development files of the optional backends' system libraries.
hidden_headers=(/usr/include/libsecret-1 /usr/include/tss2 /usr/include/security /usr/include/glib-2.0
                /usr/include/gio-unix-2.0 /usr/lib/x86_64-linux-gnu/glib-2.0)
pc_dir=/usr/lib/x86_64-linux-gnu/pkgconfig
mkdir -p "$work/empty" "$work/pkgconfig"
for pc in "$pc_dir"/*.pc; do
    case "$(basename "$pc")" in libsecret*|tss2*|gio*|glib*|gobject*|gmodule*|gthread*|pam*) ;; *) cp "$pc" "$work/pkgconfig/" ;; esac
done
hide_headers() {
    local mounts="mount --make-rprivate / 2>/dev/null || true;"
    for d in "${hidden_headers[@]}"; do [ -d "$d" ] && mounts+=" mount --bind '$work/empty' '$d';"; done
    [ -d "$pc_dir" ] && mounts+=" mount --bind '$work/pkgconfig' '$pc_dir';"
    echo "$mounts"
}
hide_libraries() {
    local mounts="mount --make-rprivate / 2>/dev/null || true;"
    for lib in /usr/lib/x86_64-linux-gnu/libsecret-1.so* /usr/lib/x86_64-linux-gnu/libtss2-*.so* /usr/lib/x86_64-linux-gnu/libgio-2.0.so*; do
        [ -e "$lib" ] && [ ! -L "$lib" ] && mounts+=" mount --bind /dev/null '$lib';"
    done
    echo "$mounts"
}

cd "$work/app"
swift package resolve >/dev/null 2>&1
packages=$(grep -c '"identity"' Package.resolved || true)
names=$(grep '"identity"' Package.resolved | sed 's/.*: "\(.*\)".*/\1/' | tr '\n' ' ')
[ "$packages" -le 5 ] || problem "$packages packages resolved (at most 5): $names"
if echo "$names" | grep -Eq 'nio|async-http-client|service-lifecycle|configuration'; then problem "a networking package is resolved: $names"; fi
deps=$(swift package show-dependencies --format flatlist 2>/dev/null | tr '\n' ' ')
if echo "$deps" | grep -Eq 'nio|async-http-client'; then problem "show-dependencies lists a networking package: $deps"; fi

# The clean build, with the optional backends' headers hidden.
start=$(date +%s.%N)
if ! unshare -m bash -c "$(hide_headers) swift build" > "$work/build.log" 2>&1; then
    tail -20 "$work/build.log"; problem "the consumer does not build with libsecret, PAM, tpm2-tss and GLib headers hidden"
fi
app_time=$(echo "$(date +%s.%N) - $start" | bc)
# Targets compiled: those whose build folder holds object files (SwiftPM makes a folder for every target it plans).
compiled=$(for d in .build/debug/*.build; do if ls "$d" | grep -q '\.o$' || find "$d" -name '*.o' -print -quit | grep -q .; then basename "$d" .build; fi; done)
modules=$(echo "$compiled" | grep -c . || true)
keystone_modules=$(echo "$compiled" | while read -r m; do if [ -d "$repo/Sources/$m" ]; then echo "$m"; fi; done | tr '\n' ' ')

needed=$(readelf -d .build/debug/App | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
unexpected=$(echo "$needed" | grep -Ev '^(libc|libm|libstdc\+\+|libgcc_s|libz|libsqlite3|libswift[A-Za-z_]*|libFoundation[A-Za-z]*|lib_FoundationICU|libdispatch|libBlocksRuntime|ld-linux-x86-64|libpthread|libdl|librt|libutil)\.so' || true)
[ -z "$unexpected" ] || problem "unexpected NEEDED libraries: $(echo $unexpected)"

export KEYSTONE_KEYCHAIN_DIR="$work/keychains"
mkdir -p "$KEYSTONE_KEYCHAIN_DIR"
if ! round_trip=$(unshare -m bash -c "$(hide_libraries) .build/debug/App" 2>"$work/run.err"); then
    problem "the round trip failed with libsecret, tpm2-tss and GIO hidden: $round_trip $(cat "$work/run.err")"
fi
# The one line the app logs: SecPKCS12Import naming the product to add.
grep -q "add the product KeychainPKCS12" "$work/run.err" || problem "SecPKCS12Import without its reader logged no hint: $(cat "$work/run.err")"

# A second build after touching the consumer's manifest recompiles no Keystone module.
# Three times: SwiftPM evaluates the manifest anew each time, and a flag order that changes shows within three.
: > "$work/rebuild.log"
for attempt in 1 2 3; do
    touch Package.swift
    swift build >> "$work/rebuild.log" 2>&1 || { tail -20 "$work/rebuild.log"; problem "build $attempt after touching Package.swift failed"; }
done
recompiled=$(grep -oE 'Compiling [A-Za-z0-9_]+ ' "$work/rebuild.log" | awk '{print $2}' | sort -u | while read -r m; do if [ -d "$repo/Sources/$m" ]; then echo "$m"; fi; done | tr '\n' ' ')
[ -z "$recompiled" ] || problem "touching Package.swift recompiled Keystone modules: $recompiled"

# A rebuild of swift-certificates' X509 in this build folder (a version update, a touched checkout) succeeds: an app
# of the core builds no module named `Security`, which X509's `#if canImport(Security)` would pick up.
touch .build/checkouts/swift-certificates/Sources/X509/Certificate.swift
swift build > "$work/x509.log" 2>&1 || { tail -20 "$work/x509.log"; problem "rebuilding X509 in an existing build folder failed"; }
grep -q 'Compiling X509' "$work/x509.log" || problem "touching X509's sources did not rebuild it (the check proves nothing)"

cd "$work/crypto"
swift package resolve >/dev/null 2>&1
start=$(date +%s.%N)
swift build > "$work/crypto.log" 2>&1 || { tail -20 "$work/crypto.log"; problem "swift-crypto alone does not build"; }
crypto_time=$(echo "$(date +%s.%N) - $start" | bc)

printf '\nA consumer of the Keystone product (default traits), clean debug build on %s cores:\n' "$(nproc)"
printf '  packages resolved:        %s (%s)\n' "$packages" "$names"
printf '  targets compiled:         %s (Keystone'"'"'s: %s)\n' "$modules" "$keystone_modules"
printf '  clean build:              %.0f s (swift-crypto alone: %.0f s; ratio %.2f)\n' "$app_time" "$crypto_time" "$(echo "$app_time / $crypto_time" | bc -l)"
printf '  NEEDED:                   %s\n' "$(echo $needed)"
printf '  built with libsecret/PAM/tpm2-tss/GLib headers hidden; round trip with their libraries hidden: %s\n' "${round_trip:-failed}"
printf '  modules recompiled after touching Package.swift (3 builds): %s\n' "${recompiled:-none}"
printf '  X509 rebuilt in the existing build folder: ok\n'
[ $fail -eq 0 ] && echo "consumer check: every target met" || echo "consumer check: FAILED"
exit $fail
