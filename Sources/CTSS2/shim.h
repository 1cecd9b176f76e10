// tpm2-tss (Debian: libtss2-dev): ESAPI, the TCTI loader, the marshalling library and the response-code decoder.
// Only Keystone's C boundary (CTPM) includes these; no TSS2 type reaches Swift.
#ifndef KEYSTONE_CTSS2_SHIM_H
#define KEYSTONE_CTSS2_SHIM_H
#if defined(__linux__)
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#endif
#endif
