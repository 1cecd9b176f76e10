#!/bin/sh
# The container's entry point: the keychain on the mounted volume ($KEYSTONE_KEYCHAIN_DIR), its password from the
# secret file $KEYSTONE_PASSWORD_FILE (/run/secrets/keychain-password), never from an environment variable.
# Creates the keychain on the first run, unlocks it, then runs the command ("$@") with the keychain unlocked.
set -eu
keychain="${KEYSTONE_KEYCHAIN_NAME:-app.keychain-db}"
if [ ! -e "$KEYSTONE_KEYCHAIN_DIR/$keychain" ]; then
    keystone create-keychain "$keychain"
fi
keystone unlock-keychain "$keychain"
exec "$@"
