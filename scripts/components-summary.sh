#!/usr/bin/env bash
# Which backends and outside components the test run exercised, and which it skipped (and why), read from the run's
# output (.ci/run tees `swift test` into .build/ci-test.log). Prints one line:
#   components: gnome-keyring ran (7 suites), swtpm ran (9 suites), ...; skipped: none
# then how many cases each backend ran in the suites parameterized over backends (`backend → etcd cluster`), and, when
# anything was skipped, one line per skipped suite or test with the reason its trait gives.
#
# A component "ran" when at least one suite known to start it finished (Swift Testing's `✔ Suite "…" passed` or
# `✘ Suite "…" failed`); it is "skipped" when its suites were skipped (`➜ Suite "…" skipped: "reason"`), and "not
# run" when none of its suites appears (a --filter, or a build without the component's trait). Suites are recognised
# by their display names: a new suite that starts a component should name it (as every one does now).
#
# Usage: scripts/components-summary.sh [LOG]   (default .build/ci-test.log). Exits 0 whatever it finds: it reports.
set -euo pipefail
cd "$(dirname "$0")/.."
log="${1:-.build/ci-test.log}"
if [ ! -r "$log" ]; then
    echo "components: no test log at $log"
    exit 0
fi

python3 - "$log" <<'PY'
import re
import sys

# Component, then a pattern (case-insensitive) over the display names of the suites that start it. A skipped test
# is counted against a component when its name or its reason matches the pattern.
COMPONENTS = [
    ("gnome-keyring", r"secret[ -]service"),
    ("swtpm", r"swtpm|real TPM|TPM keys on|sealed to a TPM|sealed to the TPM|unlock with their TPM|SecureEnclaveToken contract|Secure Enclave token"),
    ("etcd", r"etcd (client|keychain|test cluster)|etcd keychains|etcd-server|etcdctl"),
    ("fprintd", r"fprintd|fingerprint"),
    ("PAM", r"\bPAM\b|pamtester|useradd"),
    ("openssl", r"openssl"),
    ("tpm2-openssl", r"tpm2-openssl"),
    ("tpm2-abrmd", r"^tpm2-abrmd:|tpm2-abrmd"),
    ("polkit", r"polkit: "),
    ("polkit GUI agent", r"polkit GUI agent"),
    ("pass/gpg", r"\bpass\b|password-store|gpg"),
    ("TLS server", r"real TLS server"),
    ("git", r"real git|git-credential-libsecret"),
    ("docker credential clients", r"docker's credential-helper protocol through a real client|docker-credential-secretservice|python3-docker"),
    ("no-keyring seccomp", r"no-keyring-exec|kernel keyring is refused|Environment matrix"),
    ("Hummingbird server", r"Hummingbird app"),
    ("systemd-analyze", r"systemd unit"),
]

suite_line = re.compile(r'^(✔|✘|➜) Suite "(.*)" (passed|failed|skipped)(?:: "(.*)")?')
test_skip = re.compile(r'^➜ Test "(.*)" skipped(?:: "(.*)")?')
xctest_skip = re.compile(r"^.*: (\S+) : Test skipped(?: - (.*))?$")

# Parameterized suites over backends (the storage contract, the typed API's stacks): one case per backend.
backend_case = re.compile(r'^◇ Test case passing 1 argument (?:backend|storage|stack) → (.*?) to "')

ran, failed, skipped_suites, skipped_tests, backends = {}, set(), {}, [], {}
with open(sys.argv[1], encoding="utf-8", errors="replace") as log:
    for line in log:
        line = line.rstrip("\n")
        match = backend_case.match(line)
        if match:
            backends[match.group(1)] = backends.get(match.group(1), 0) + 1
            continue
        match = suite_line.match(line)
        if match:
            mark, name, outcome, reason = match.groups()
            if outcome == "skipped":
                skipped_suites[name] = reason or "no reason given"
            else:
                ran[name] = outcome
                if outcome == "failed":
                    failed.add(name)
            continue
        match = test_skip.match(line) or xctest_skip.match(line)
        if match:
            skipped_tests.append((match.group(1), match.group(2) or "no reason given"))

parts, skipped_components = [], []
for component, pattern in COMPONENTS:
    regex = re.compile(pattern, re.IGNORECASE)
    suites = [name for name in ran if regex.search(name)]
    bad = [name for name in suites if name in failed]
    skipped_here = [(name, reason) for name, reason in skipped_suites.items() if regex.search(name)]
    tests_here = [(name, reason) for name, reason in skipped_tests if regex.search(name) or regex.search(reason)]
    if suites:
        detail = f"{len(suites)} suite{'s' if len(suites) != 1 else ''}"
        if bad:
            detail += f", {len(bad)} failed"
        if skipped_here:
            detail += f", {len(skipped_here)} suite{'s' if len(skipped_here) != 1 else ''} skipped"
        if tests_here:
            detail += f", {len(tests_here)} test{'s' if len(tests_here) != 1 else ''} skipped"
        parts.append(f"{component} ran ({detail})")
        if skipped_here or tests_here:
            skipped_components.append(f"{component} in part")
    elif skipped_here:
        reasons = sorted({reason for _, reason in skipped_here})
        parts.append(f"{component} skipped ({'; '.join(reasons)})")
        skipped_components.append(component)
    else:
        parts.append(f"{component} not run (no suite of it in the log)")
        skipped_components.append(component)

regexes = [re.compile(pattern, re.IGNORECASE) for _, pattern in COMPONENTS]
others = sum(1 for name in skipped_suites if not any(r.search(name) for r in regexes))
others += sum(1 for name, reason in skipped_tests if not any(r.search(name) or r.search(reason) for r in regexes))
if others:
    skipped_components.append(f"{others} other suite{'s' if others != 1 else ''} or test{'s' if others != 1 else ''}")
print("components: " + ", ".join(parts) + "; skipped: " + (", ".join(skipped_components) or "none"))
if backends:
    print("backends (cases of the suites parameterized over them): "
          + ", ".join(f"{name} {count}" for name, count in sorted(backends.items(), key=lambda item: (-item[1], item[0]))))
for name, reason in sorted(skipped_suites.items()):
    print(f'  skipped suite "{name}": {reason}')
for name, reason in skipped_tests:
    print(f'  skipped test "{name}": {reason}')
PY
