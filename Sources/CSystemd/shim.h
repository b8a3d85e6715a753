// sd-bus from libsystemd (Debian: libsystemd-dev), for desktop notifications on a user's
// session bus. Only the non-variadic calls are used from Swift. Not linked: libsystemd.so.0
// is opened when the first notice is sent (Sources/Notifications/LibSystemd.swift).
#include <systemd/sd-bus.h>
