// libsecret (Debian: libsecret-1-dev) for the Secret Service benchmark's C baseline (CLibSecretBaseline): this target
// carries libsecret's compiler and linker flags (pkg-config libsecret-1). Named apart from the main package's CLibSecret,
// which is not a product of Keystone.
#ifndef KEYSTONE_BENCHMARKS_CBASELINELIBSECRET_SHIM_H
#define KEYSTONE_BENCHMARKS_CBASELINELIBSECRET_SHIM_H
#include <libsecret/secret.h>
#endif
