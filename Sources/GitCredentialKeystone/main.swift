import KeystoneCredentialHelpers

// git-credential-keystone: git's credential helper (`git config --global credential.helper keystone`).
CredentialHelperMain.main(.git)
