import KeystoneCredentialHelpers

// docker-credential-keystone: docker's credential helper (`"credsStore": "keystone"` in ~/.docker/config.json).
CredentialHelperMain.main(.docker)
