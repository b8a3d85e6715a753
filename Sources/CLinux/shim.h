#pragma once
// Linux interfaces that Glibc's Swift module does not export.
#include <sys/fanotify.h>
#include <fcntl.h>
#include <sys/socket.h>

// A path-only descriptor (fcntl.h offers it only with _GNU_SOURCE).
static const int stepgate_O_PATH = 010000000;
