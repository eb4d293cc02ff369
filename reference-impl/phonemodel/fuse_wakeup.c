/*
 * fuse_wakeup.so: a phone's FUSE request wake-up latency, preloaded into a FUSE daemon on a fast host.
 *
 * On the papers' phone (Galaxy S3: Exynos 4412, quad Cortex-A9 at 1.4 GHz, Linux 3.0) every FUSE request cost
 * the sdcard daemon a wake-up: the writer sleeps in the kernel, the daemon's thread is woken through the
 * scheduler on a core that often had to leave an idle state first, and runs cache-cold. Paper 000's Fig. 6
 * puts that cost at about 0.43 ms per request (4 KiB unit: 7 MB/s; 512 KiB unit: 30 MB/s; the difference,
 * 1/7 - 1/30 s per MB over 256 - 2 requests per MB). On this host the same round trip costs a few microseconds,
 * so the per-request price that made the legacy 4 KiB FUSE unit slow is missing; a CPU share alone cannot
 * bring it back (it slows every byte of every configuration alike).
 *
 * With LD_PRELOAD=fuse_wakeup.so and FUSE_WAKEUP_NS=N in its environment, a daemon's read(2), readv(2) or
 * splice(2) that receives a request from /dev/fuse (character device 10:229) returns N ns late: the request
 * waited that long for its daemon thread. It is a sleep, not a spin: the latency of a wake-up, not CPU time
 * (the CPU share is modelled by the cgroup of mobiperf.stack.cpu_share). The sleep uses 1 ns timer slack.
 *
 * Only calls through the dynamic linker are seen (libfuse's and the daemon's own read()), which is every
 * receive path of the reference daemons. Nothing else in the daemon is changed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FW_MAX_FD 1024
#define FW_FUSE_MAJOR 10
#define FW_FUSE_MINOR 229

/* Set once in the constructor, read-only afterwards: no lock needed. */
static long long fw_delay_ns;
static ssize_t (*fw_read)(int, void *, size_t);
static ssize_t (*fw_readv)(int, const struct iovec *, int);
static ssize_t (*fw_splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);

/* Per fd: 0 unknown, 1 /dev/fuse, 2 something else. Racy writes store the same value: benign. */
static unsigned char fw_kind[FW_MAX_FD];

__attribute__((constructor)) static void fw_init(void)
{
	const char *env = getenv("FUSE_WAKEUP_NS");

	fw_read = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	fw_readv = (ssize_t (*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "readv");
	fw_splice = (ssize_t (*)(int, loff_t *, int, loff_t *, size_t, unsigned int))dlsym(RTLD_NEXT, "splice");
	fw_delay_ns = env ? atoll(env) : 0;
	if (fw_delay_ns < 0)
		fw_delay_ns = 0;
	if (fw_delay_ns)
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

static int fw_is_fuse(int fd)
{
	struct stat st;
	int kind;

	if (fd < 0)
		return 0;
	if (fd < FW_MAX_FD && fw_kind[fd])
		return fw_kind[fd] == 1;
	kind = (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == FW_FUSE_MAJOR &&
		minor(st.st_rdev) == FW_FUSE_MINOR) ? 1 : 2;
	if (fd < FW_MAX_FD)
		fw_kind[fd] = (unsigned char)kind;
	return kind == 1;
}

/* Sleep the modelled wake-up after a request arrived; errno is the caller's. */
static void fw_wake_late(ssize_t got, int fd)
{
	struct timespec ts;
	int saved = errno;

	if (got <= 0 || !fw_delay_ns || !fw_is_fuse(fd))
		return;
	ts.tv_sec = fw_delay_ns / 1000000000LL;
	ts.tv_nsec = fw_delay_ns % 1000000000LL;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
	errno = saved;
}

ssize_t read(int fd, void *buf, size_t count)
{
	ssize_t n = fw_read(fd, buf, count);

	fw_wake_late(n, fd);
	return n;
}

ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	ssize_t n = fw_readv(fd, iov, iovcnt);

	fw_wake_late(n, fd);
	return n;
}

ssize_t splice(int fd_in, loff_t *off_in, int fd_out, loff_t *off_out, size_t len, unsigned int flags)
{
	ssize_t n = fw_splice(fd_in, off_in, fd_out, off_out, len, flags);

	fw_wake_late(n, fd_in);
	return n;
}
