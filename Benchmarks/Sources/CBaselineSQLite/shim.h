// SQLite (Debian: libsqlite3-dev) for the keychain file benchmark's raw-SQLite baseline. Named apart from the main
// package's CSQLite: module names are unique across a package graph, and CSQLite is not a product of Keystone.
#include <sqlite3.h>
