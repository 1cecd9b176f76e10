#!/usr/bin/env bash
# Fuzz/run.sh TARGET SECONDS: builds the libFuzzer targets and runs TARGET for SECONDS with its corpus.
# Targets: FuzzQuery, FuzzKeychainFile, FuzzArguments. A crash writes crash-* into Fuzz/Crashes/ and exits non-zero.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: Fuzz/run.sh TARGET SECONDS}
seconds=${2:-60}
# lld: gold stops with an internal error on these links.
swift build -c release --product "$target" -Xswiftc -sanitize=fuzzer -Xswiftc -parse-as-library -Xswiftc -use-ld=lld >&2
mkdir -p "Corpus/$target" Crashes ".work/$target"
# New inputs go to a scratch corpus (.work, not committed); the committed seed corpus is only read.
exec ".build/release/$target" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix=Crashes/ -print_final_stats=1 ".work/$target" "Corpus/$target"
