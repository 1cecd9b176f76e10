#!/usr/bin/env bash
# Builds the DocC documentation of every module that has a catalog (Sources/<Module>/<Module>.docc) with the
# swift-docc-plugin, and fails when DocC reports any warning (a broken or ambiguous link, an undocumented
# parameter, an article that overrides a symbol). SwiftPM's own build warnings (-pthread, a dependency's unhandled
# file) are not DocC's and are left out. Run after `swift build --traits NIO` (with the NIO trait, as every build here).
#
# Usage: scripts/check-docs.sh        (one line per module, then exit 0, or the warnings and exit 1)
set -euo pipefail
cd "$(dirname "$0")/.."

# The docc plugin builds symbol graphs with flags of its own, so swift-certificates' X509 is recompiled on the first
# documentation build after a normal build and again on the next normal build. X509 says `#if canImport(Security)`,
# and a rebuild of it beside this package's Linux `Security` module fails ("missing required module"). So the
# `Security` module is removed before the documentation builds and after them: X509 is then rebuilt first, and the
# `Security` module after it, which always works (Package.swift, the X509 dependency's comment).
remove_security_module() { rm -rf .build/*/debug/Modules/Security.swiftmodule .build/*/debug/Modules/Security.swiftdoc \
                               .build/*/debug/Modules/Security.swiftsourceinfo .build/*/debug/Modules/Security.abi.json; }
remove_security_module
trap remove_security_module EXIT

failed=0
# The Linux shims last: documenting `Security` builds that module again.
catalogs=$(ls -d Sources/*/*.docc | grep -Ev '^Sources/(Security|LocalAuthentication|CryptoKit)/'; ls -d Sources/{CryptoKit,LocalAuthentication,Security}/*.docc)
for catalog in $catalogs; do
    module="$(basename "$(dirname "$catalog")")"
    log="$(mktemp)"
    if ! swift package --traits NIO --disable-sandbox generate-documentation --target "$module" >"$log" 2>&1; then
        echo "docs: $module: the documentation did not build" >&2
        tail -n 20 "$log" >&2
        failed=1
    else
        warnings="$(grep -E "warning:" "$log" | grep -vE "prohibited flag|unhandled; explicitly declare" || true)"
        if [ -n "$warnings" ]; then
            echo "docs: $module: DocC warnings" >&2
            grep -vE "prohibited flag|unhandled; explicitly declare" "$log" | grep -A8 "warning:" >&2 || true
            failed=1
        else
            echo "docs: $module: built, no warnings"
        fi
    fi
    rm -f "$log"
done
exit "$failed"
