#pragma once
// Linux interfaces that Glibc's Swift module does not export.
#include <sys/fanotify.h>
#include <fcntl.h>
#include <sys/socket.h>
