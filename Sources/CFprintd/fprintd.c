#include "cfprintd.h"
#include <gio/gio.h>
