#include "cfuzzer.h"
