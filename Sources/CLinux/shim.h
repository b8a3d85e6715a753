#pragma once
// Linux interfaces that Glibc's Swift module does not export.
#include <sys/fanotify.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/timex.h>

// A path-only descriptor (fcntl.h offers it only with _GNU_SOURCE).
static const int stepgate_O_PATH = 010000000;

// Whether the kernel counts the wall clock as synchronized (an NTP client cleared STA_UNSYNC).
static inline int stepgate_clock_synchronized(void) {
    struct timex tx = {0};
    int state = adjtimex(&tx);
    return state >= 0 && state != TIME_ERROR && !(tx.status & STA_UNSYNC);
}
