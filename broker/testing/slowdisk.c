/*
 * A slow disk for fault tests, loaded with LD_PRELOAD into a broker process (Samsa's Python or
 * Kafka's JVM alike): write, pwrite, writev, pwritev and fsync, fdatasync on regular files under a
 * directory sleep first, for as long as a control file says. pwritev2 too: CPython's os.pwritev calls
 * it, not pwritev, where the C library has it.
 *
 *   SAMSA_SLOWDISK_CONTROL  a file holding "<write delay ms> <fsync delay ms> [<errno>]" (absent:
 *                           no delay); read again at most every 100 ms, so a test switches the
 *                           fault on and off while the broker runs. A non-zero errno makes those
 *                           calls fail with it instead (EIO = 5: a failed disk)
 *   SAMSA_SLOWDISK_PREFIX   only files whose path starts with this are slowed (default: all)
 *
 * Built by broker/testing/slowdisk.py with the system C compiler; nothing else uses it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static const char *control_path;
static char prefix[4096];
static size_t prefix_len;
static atomic_long write_delay_us, fsync_delay_us, fail_errno, next_read_ns;

__attribute__((constructor)) static void slowdisk_init(void) {
    control_path = getenv("SAMSA_SLOWDISK_CONTROL");
    const char *p = getenv("SAMSA_SLOWDISK_PREFIX");
    if (p != NULL && strlen(p) < sizeof(prefix)) {
        strcpy(prefix, p);
        prefix_len = strlen(prefix);
    }
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void read_control(void) {
    long now = now_ns();
    if (control_path == NULL || now < atomic_load(&next_read_ns))
        return;
    atomic_store(&next_read_ns, now + 100000000L);
    long w = 0, f = 0, e = 0;
    int fd = open(control_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[64];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n > 0) {
            buf[n] = '\0';
            if (sscanf(buf, "%ld %ld %ld", &w, &f, &e) < 1)
                w = f = e = 0;
        }
    }
    atomic_store(&write_delay_us, w * 1000);
    atomic_store(&fsync_delay_us, f * 1000);
    atomic_store(&fail_errno, e);
}

static int on_slow_disk(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    if (prefix_len == 0)
        return 1;
    char link[64], path[4096];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0)
        return 0;
    path[n] = '\0';
    return strncmp(path, prefix, prefix_len) == 0;
}

/* Sleep the delay, or return the errno the call is to fail with (0: go on). */
static int slow_down(int fd, atomic_long *delay) {
    read_control();
    long us = atomic_load(delay), e = atomic_load(&fail_errno);
    if ((us > 0 || e > 0) && on_slow_disk(fd)) {
        if (e > 0)
            return (int)e;
        struct timespec t = {us / 1000000, (us % 1000000) * 1000};
        nanosleep(&t, NULL);
    }
    return 0;
}

#define SLOW_DOWN(fd, delay) \
    do { \
        int e_ = slow_down(fd, delay); \
        if (e_ != 0) { \
            errno = e_; \
            return -1; \
        } \
    } while (0)

typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*pwritev2_fn)(int, const struct iovec *, int, off_t, int);
typedef int (*sync_fn)(int);

#define REAL(name, type) \
    static type real; \
    if (real == NULL) \
        real = (type)dlsym(RTLD_NEXT, name)

ssize_t write(int fd, const void *buf, size_t n) {
    REAL("write", write_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    REAL("pwrite", pwrite_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    REAL("pwrite64", pwrite_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    REAL("writev", writev_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, iov, cnt);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off) {
    REAL("pwritev", pwritev_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, iov, cnt, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off) {
    REAL("pwritev64", pwritev_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, iov, cnt, off);
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) {
    REAL("pwritev2", pwritev2_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, iov, cnt, off, flags);
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags) {
    REAL("pwritev64v2", pwritev2_fn);
    SLOW_DOWN(fd, &write_delay_us);
    return real(fd, iov, cnt, off, flags);
}

int fsync(int fd) {
    REAL("fsync", sync_fn);
    SLOW_DOWN(fd, &fsync_delay_us);
    return real(fd);
}

int fdatasync(int fd) {
    REAL("fdatasync", sync_fn);
    SLOW_DOWN(fd, &fsync_delay_us);
    return real(fd);
}
