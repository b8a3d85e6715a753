// sd-bus from libsystemd (Debian: libsystemd-dev), for desktop notifications on a user's
// session bus. Only the non-variadic calls are used from Swift.
#include <systemd/sd-bus.h>
