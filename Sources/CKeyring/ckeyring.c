#include "ckeyring.h"
int ckeyring_available(void) { return 0; }
