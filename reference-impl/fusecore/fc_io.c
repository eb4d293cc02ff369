// SPDX-License-Identifier: MIT
/*
 * fusecore's custom io (libfuse's fuse_session_custom_io, installed after
 * the mount on the same /dev/fuse descriptor): every raw request the daemon
 * reads and every reply it writes pass here, for the two parts of the core
 * that must see them: kernel passthrough (fc_passthrough.c: the INIT offer,
 * the INIT and open replies) and the request log (fc_reqlog.c).  Without
 * either, libfuse reads and writes /dev/fuse itself.
 *
 * Splice (-o splice=1) moves a request from /dev/fuse into a pipe of
 * libfuse's (one per worker thread) without the daemon seeing its bytes.
 * The log needs the header, so the hook copies the first bytes of that pipe
 * with tee(2) into a pipe of its own and reads them there (two system calls
 * more per request, and the request stays in libfuse's pipe untouched).
 * libfuse hands the hook only the pipe's write end; the read end is found
 * once per thread: pipe2(2) gives the two lowest free descriptors, read end
 * first, so it is the descriptor below with the same pipe inode, opened
 * read-only.  A spliced reply (a READ served from a file with splice) has
 * its header in a pipe too: it is this thread's request (replies are
 * synchronous), logged without looking.
 *
 * State: fc_io_scratch and the found read end are per thread (a worker's
 * pipe is its own); the scratch pipe closes with its thread (pthread key).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/fuse.h>

#include "fc_internal.h"

#define FC_IO_PEEK (sizeof(struct fuse_in_header) + \
		    sizeof(struct fuse_read_in))

static __thread int fc_io_pipe_w = -1, fc_io_pipe_r = -1;
static __thread int *fc_io_scratch;	/* [0] read, [1] write */
static pthread_key_t fc_io_key;
static pthread_once_t fc_io_key_once = PTHREAD_ONCE_INIT;

bool fc_io_wanted(void)
{
	return fc_cfg.passthrough || fc_cfg.requests_path;
}

void fc_io_received(const void *req, size_t n)
{
	uint64_t now = fc_now_ns();

	if (fc_cfg.passthrough)
		fc_pt_received(req, n);
	if (fc_cfg.requests_path)
		fc_rl_received(req, n, now);
}

static ssize_t fc_io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	if (n > 0)
		fc_io_received(buf, n);
	return n;
}

static ssize_t fc_io_writev(int fd, struct iovec *iov, int count,
			    void *userdata)
{
	const struct fuse_out_header *out = iov[0].iov_base;

	(void)userdata;
	if (fc_cfg.requests_path && iov[0].iov_len >= sizeof(*out))
		fc_rl_replying(out->unique, out->error, out->len);
	if (fc_cfg.passthrough)
		return fc_pt_writev(fd, iov, count);
	return writev(fd, iov, count);
}

static void fc_io_close_scratch(void *p)
{
	int *fds = p;

	close(fds[0]);
	close(fds[1]);
	free(fds);
}

static void fc_io_make_key(void)
{
	pthread_key_create(&fc_io_key, fc_io_close_scratch);
}

/* The read end of the pipe whose write end is wr, or -1. */
static int fc_io_read_end(int wr)
{
	struct stat ws, st;
	int fd, fl;

	if (wr == fc_io_pipe_w)
		return fc_io_pipe_r;
	if (fstat(wr, &ws) < 0 || !S_ISFIFO(ws.st_mode))
		return -1;
	for (fd = wr - 1; fd >= 0; fd--) {
		if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) ||
		    st.st_ino != ws.st_ino || st.st_dev != ws.st_dev)
			continue;
		fl = fcntl(fd, F_GETFL);
		if (fl >= 0 && (fl & O_ACCMODE) == O_RDONLY) {
			fc_io_pipe_w = wr;
			fc_io_pipe_r = fd;
			return fd;
		}
	}
	return -1;
}

/* Copy the first len bytes waiting in the pipe rd into buf; bytes or -1. */
static ssize_t fc_io_peek(int rd, void *buf, size_t len)
{
	ssize_t n;

	if (!fc_io_scratch) {
		int *fds = malloc(2 * sizeof(int));

		if (!fds || pipe2(fds, O_CLOEXEC | O_NONBLOCK) < 0) {
			free(fds);
			return -1;
		}
		pthread_once(&fc_io_key_once, fc_io_make_key);
		pthread_setspecific(fc_io_key, fds);
		fc_io_scratch = fds;
	}
	n = tee(rd, fc_io_scratch[1], len, SPLICE_F_NONBLOCK);
	if (n <= 0)
		return -1;
	return read(fc_io_scratch[0], buf, n);
}

static ssize_t fc_io_splice_receive(int fdin, off_t *offin, int fdout,
				    off_t *offout, size_t len,
				    unsigned int flags, void *userdata)
{
	ssize_t n = splice(fdin, offin, fdout, offout, len, flags);
	uint64_t now = fc_now_ns();
	char head[FC_IO_PEEK];
	ssize_t got;
	int rd;

	(void)userdata;
	if (n <= 0 || !fc_cfg.requests_path)
		return n;
	rd = fc_io_read_end(fdout);
	got = rd < 0 ? -1 : fc_io_peek(rd, head, (size_t)n < sizeof(head) ?
				       (size_t)n : sizeof(head));
	fc_rl_received(got >= (ssize_t)sizeof(struct fuse_in_header) ?
		       head : NULL, got > 0 ? (size_t)got : (size_t)n, now);
	return n;
}

static ssize_t fc_io_splice_send(int fdin, off_t *offin, int fdout,
				 off_t *offout, size_t len, unsigned int flags,
				 void *userdata)
{
	(void)userdata;
	if (fc_cfg.requests_path)
		fc_rl_replying(0, 0, len);
	return splice(fdin, offin, fdout, offout, len, flags);
}

int fc_io_attach(struct fuse_session *se)
{
	static const struct fuse_custom_io io = {
		.writev = fc_io_writev,
		.read = fc_io_read,
		.splice_receive = fc_io_splice_receive,
		.splice_send = fc_io_splice_send,
	};

	if (fc_cfg.passthrough)
		fc_pt_attach(se);
	if (fc_cfg.requests_path)
		fc_rl_init();
	return fuse_session_custom_io(se, &io, fuse_session_fd(se)) ? -1 : 0;
}
