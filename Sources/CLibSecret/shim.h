// libsecret, the freedesktop Secret Service client library (Debian: libsecret-1-dev), with its D-Bus path API.
#ifndef KEYSTONE_CLIBSECRET_SHIM_H
#define KEYSTONE_CLIBSECRET_SHIM_H
#define SECRET_API_SUBJECT_TO_CHANGE 1
#include <libsecret/secret.h>
#endif
