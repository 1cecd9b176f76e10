#!/bin/sh
# The CI recipe macOS pipelines run with `security` (create-keychain → unlock-keychain → add → find), with keystone on
# Linux, in a container or not. See "Headless Linux: containers, CI, services".
#
# Secrets come from files the CI writes from its secret store, never from environment variables:
#   KEYSTONE_PASSWORD_FILE  the keychain's password (read by create-keychain and unlock-keychain)
#   DEPLOY_TOKEN_FILE       the token to store (one line)
# and the keychains live in a directory of the job: KEYSTONE_KEYCHAIN_DIR (for example "$RUNNER_TEMP/keychains").
set -eu
keystone create-keychain ci.keychain-db
keystone unlock-keychain ci.keychain-db
# The token on standard input (-w last, without a value): it never appears in the process list.
KEYSTONE_KEYCHAIN="$KEYSTONE_KEYCHAIN_DIR/ci.keychain-db" keystone add-generic-password -s example.com -a deploy -w < "$DEPLOY_TOKEN_FILE"
# A later step reads it (here: checked, not printed).
keystone find-generic-password -s example.com -a deploy -w ci.keychain-db | cmp -s - "$DEPLOY_TOKEN_FILE"
keystone lock-keychain ci.keychain-db
echo "the token was stored in ci.keychain-db and read back"
