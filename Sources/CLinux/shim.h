#pragma once
// Linux interfaces that Glibc's Swift module does not export.
#include <sys/fanotify.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/timex.h>

// A path-only descriptor (fcntl.h offers it only with _GNU_SOURCE).
static const int stepgate_O_PATH = 010000000;

// Whether the kernel counts the wall clock as synchronized (an NTP client cleared STA_UNSYNC).
static inline int stepgate_clock_synchronized(void) {
    struct timex tx = {0};
    int state = adjtimex(&tx);
    return state >= 0 && state != TIME_ERROR && !(tx.status & STA_UNSYNC);
}

#include <string.h>
#include <sys/un.h>

// Sends one datagram with file descriptors attached (SCM_RIGHTS), as sd_notify's FDSTORE=1
// needs. Returns what sendmsg returns.
static inline long stepgate_send_with_fds(int sock, const struct sockaddr_un *address, socklen_t length,
                                          const char *message, size_t size, const int *fds, int count) {
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 8)]; } control;
    if (count < 0 || count > 8) return -1;
    struct iovec vector = { (void *)message, size };
    struct msghdr header;
    memset(&header, 0, sizeof header);
    memset(&control, 0, sizeof control);
    header.msg_name = (void *)address;
    header.msg_namelen = length;
    header.msg_iov = &vector;
    header.msg_iovlen = 1;
    if (count > 0) {
        header.msg_control = control.space;
        header.msg_controllen = CMSG_SPACE(sizeof(int) * count);
        struct cmsghdr *c = CMSG_FIRSTHDR(&header);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * count);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
    }
    return sendmsg(sock, &header, MSG_NOSIGNAL);
}

// Receives one datagram and up to `capacity` attached descriptors (for tests that play systemd).
// Returns the message length; `*count` is the number of descriptors received.
static inline long stepgate_receive_with_fds(int sock, char *buffer, size_t size, int *fds, int capacity,
                                             int *count) {
    union { struct cmsghdr header; char space[CMSG_SPACE(sizeof(int) * 8)]; } control;
    struct iovec vector = { buffer, size };
    struct msghdr header;
    memset(&header, 0, sizeof header);
    header.msg_iov = &vector;
    header.msg_iovlen = 1;
    header.msg_control = control.space;
    header.msg_controllen = sizeof control.space;
    *count = 0;
    long received = recvmsg(sock, &header, MSG_CMSG_CLOEXEC);
    if (received < 0) return received;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&header); c; c = CMSG_NXTHDR(&header, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < n; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*count < capacity) fds[(*count)++] = fd; else close(fd);
        }
    }
    return received;
}

// A network namespace of the calling thread's own (tests of the nftables shield).
extern int unshare(int flags);
static inline int stepgate_unshare_network(void) { return unshare(0x40000000); /* CLONE_NEWNET */ }

#include <sys/resource.h>
#include <errno.h>
#include <sys/syscall.h>

// Sets the calling thread's nice value (Linux keeps one per thread); 0 on success.
static inline int stepgate_set_thread_nice(int nice) {
    return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

#include <pthread.h>
#include <sched.h>

// Puts the calling thread in the round-robin real-time class at `priority` (1 is the lowest);
// 0 on success, an errno value otherwise (EPERM without CAP_SYS_NICE).
static inline int stepgate_set_thread_realtime(int priority) {
    struct sched_param parameter = { .sched_priority = priority };
    return pthread_setschedparam(pthread_self(), SCHED_RR, &parameter);
}

// The calling thread's scheduling policy (SCHED_OTHER, SCHED_RR, ...).
static inline int stepgate_thread_policy(void) {
    int policy = -1;
    struct sched_param parameter;
    if (pthread_getschedparam(pthread_self(), &policy, &parameter) != 0) return -1;
    return policy;
}

#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>

// Sends `sig` to every process of user `uid` (kill(-1) with that user's id as the effective
// one: all of the user's processes but the sender), from a child made with vfork that takes the
// ids by raw system calls. The kernel sends a kill(-1) signal to a process being forked as well
// as to the new child, so no process of the user escapes it by forking. The child's real and
// saved ids are `stranger`, a uid no process has: the user's processes may not signal it (a
// user could otherwise stop it and hold the caller in vfork for good), and its kill(-1) reaches
// only the user's processes (a real id of 0 would reach root's too). 0 on success, an errno
// value otherwise (ESRCH: the user has no process).
static inline int stepgate_signal_every_process_of(unsigned int uid, unsigned int gid, int sig) {
    const unsigned int stranger = 4294967294u; // (uid_t)-2
    pid_t child = vfork();
    if (child < 0) return errno;
    if (child == 0) {
        if (syscall(SYS_setgroups, 0, (void *)0) != 0) _exit(120);
        if (syscall(SYS_setresgid, gid, gid, gid) != 0) _exit(121);
        if (syscall(SYS_setresuid, stranger, uid, stranger) != 0) _exit(122);
        long result = syscall(SYS_kill, -1, sig);
        _exit(result == 0 ? 0 : errno == ESRCH ? 3 : 4);
    }
    int status = 0;
    while (waitpid(child, &status, __WALL) < 0) {
        if (errno != EINTR) return errno;
    }
    if (!WIFEXITED(status)) return ECHILD;
    switch (WEXITSTATUS(status)) {
    case 0: return 0;
    case 3: return ESRCH;
    default: return EPERM;
    }
}

#include <stdint.h>
#include <sys/ioctl.h>

// PROCMAP_QUERY (Linux 6.11, <linux/fs.h>): one mapping of a process, asked by address on its
// open `/proc/PID/maps`, without the text of the whole file.
struct stepgate_procmap_query {
    uint64_t size;
    uint64_t query_flags;
    uint64_t query_addr;
    uint64_t vma_start;
    uint64_t vma_end;
    uint64_t vma_flags;
    uint64_t vma_page_size;
    uint64_t vma_offset;
    uint64_t inode;
    uint32_t dev_major;
    uint32_t dev_minor;
    uint32_t vma_name_size;
    uint32_t build_id_size;
    uint64_t vma_name_addr;
    uint64_t build_id_addr;
};

// The file-backed mapping at or after `*address` in the maps file `fd`: its device, inode and
// start, and, when `name` is given, its path (`PATH (deleted)` for a file no longer linked).
// 0 on success (`*address` moves past the mapping), ENOENT past the last one, ENOTTY where the
// kernel has no PROCMAP_QUERY, another errno value otherwise.
static inline int stepgate_next_file_mapping(int fd, uint64_t *address, uint32_t *major, uint32_t *minor,
                                             uint64_t *inode, char *name, uint32_t name_size) {
    struct stepgate_procmap_query query = {0};
    query.size = sizeof(query);
    query.query_flags = 0x10 | 0x20; // COVERING_OR_NEXT_VMA | FILE_BACKED_VMA
    query.query_addr = *address;
    if (name && name_size > 0) {
        query.vma_name_addr = (uint64_t)(uintptr_t)name;
        query.vma_name_size = name_size;
    }
    if (ioctl(fd, _IOWR('f', 17, struct stepgate_procmap_query), &query) != 0) return errno;
    *address = query.vma_end;
    *major = query.dev_major;
    *minor = query.dev_minor;
    *inode = query.inode;
    return 0;
}

// Whether a file-backed mapping of the process whose maps file is `fd` lies in [start, end):
// 1 if one does, 0 if none, a negative errno value (-ENOTTY where the kernel has no
// PROCMAP_QUERY; -ESRCH and the like when the process is gone).
static inline int stepgate_file_backed_between(int fd, uint64_t start, uint64_t end) {
    struct stepgate_procmap_query query = {0};
    query.size = sizeof(query);
    query.query_flags = 0x10 | 0x20; // COVERING_OR_NEXT_VMA | FILE_BACKED_VMA
    query.query_addr = start;
    if (ioctl(fd, _IOWR('f', 17, struct stepgate_procmap_query), &query) != 0) {
        return errno == ENOENT ? 0 : -(errno == 0 ? EIO : errno);
    }
    return query.vma_start < end ? 1 : 0;
}

#include <stdio.h>

// The fields of the kernel's `struct statx` (<linux/stat.h>) that are read here; 256 bytes.
struct stepgate_statx {
    uint32_t mask, blksize;
    uint64_t attributes;
    uint32_t nlink, uid, gid;
    uint16_t mode, spare0;
    uint64_t ino, size, blocks, attributes_mask;
    uint64_t times[8];
    uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
    uint64_t spare[14];
};

// The device (major, minor) and inode of the program process `pid` runs (`/proc/PID/exe`),
// from the kernel's cached attributes (AT_STATX_DONT_SYNC: a file on a network or FUSE mount
// is not asked, so a server that never answers cannot stall the caller). 0 on success, an
// errno value otherwise.
static inline int stepgate_exe_identity(int pid, uint32_t *major, uint32_t *minor, uint64_t *inode) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    struct stepgate_statx info;
    // AT_FDCWD, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_INO
    if (syscall(SYS_statx, -100, path, 0x4000 | 0x800, 0x100, &info) != 0) return errno;
    *major = info.dev_major;
    *minor = info.dev_minor;
    *inode = info.ino;
    return 0;
}

// Whether processes `a` and `b` share their memory (KCMP_VM) or their descriptor table
// (KCMP_FILES): 1 when they share either, 0 when neither, -2 when one is gone (ESRCH), -1 when
// it cannot be told otherwise.
static inline int stepgate_shares_memory_or_files(int a, int b) {
    long vm = syscall(SYS_kcmp, a, b, 1, 0, 0);
    if (vm == 0) return 1;
    int vmError = vm < 0 ? errno : 0;
    long files = syscall(SYS_kcmp, a, b, 2, 0, 0);
    if (files == 0) return 1;
    int filesError = files < 0 ? errno : 0;
    if (vmError == ESRCH || filesError == ESRCH) return -2;
    if (vm < 0 || files < 0) return -1;
    return 0;
}
