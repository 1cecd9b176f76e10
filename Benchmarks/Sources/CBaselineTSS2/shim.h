// tpm2-tss (Debian: libtss2-dev) for the TPM benchmark's C baseline (CTPMBaseline): this target carries ESAPI's
// compiler and linker flags (pkg-config tss2-esys). Named apart from the main package's CTSS2, which is not a product
// of Keystone.
#ifndef KEYSTONE_BENCHMARKS_CBASELINETSS2_SHIM_H
#define KEYSTONE_BENCHMARKS_CBASELINETSS2_SHIM_H
#if defined(__linux__)
#include <tss2/tss2_esys.h>
#include <tss2/tss2_tctildr.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#endif
#endif
