// SPDX-License-Identifier: MIT
/*
 * fusecore low-level operations: the inode table (O_PATH fds keyed by the
 * native dev/ino), open files and directories, and every passthrough FUSE
 * operation, each calling the policy's hooks where data or metadata may be
 * held by the policy (see the contract in fusecore.h).
 *
 * Locking: fc_table_lock protects the hash table and every inode's nlookup,
 * refs and hnext.  An open file's refs is atomic.  No core lock is held
 * while a policy hook runs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fc_internal.h"

#define FC_HASH_SIZE 4096

static struct fc_inode fc_root;
static struct fc_inode *fc_hash[FC_HASH_SIZE];	/* fc_table_lock */
static pthread_mutex_t fc_table_lock = PTHREAD_MUTEX_INITIALIZER;

struct fc_dir {
	DIR *dp;
	off_t offset;		/* position of the next entry in dp */
	struct dirent *entry;	/* read ahead but not yet returned */
	pthread_mutex_t lock;	/* readdir of one handle is serialised */
};

static unsigned int fc_hash_of(dev_t dev, ino_t ino)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev;

	return (unsigned int)(h >> 20) % FC_HASH_SIZE;
}

static struct fc_inode *fc_inode_of(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &fc_root;
	return (struct fc_inode *)(uintptr_t)ino;
}

static fuse_ino_t fc_ino_of(struct fc_inode *i)
{
	return i == &fc_root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)i;
}

static struct fc_file *fc_file_of(struct fuse_file_info *fi)
{
	return (struct fc_file *)(uintptr_t)fi->fh;
}

int fc_table_init(const char *source)
{
	struct stat st;

	fc_root.fd = open(source, O_PATH | O_DIRECTORY);
	if (fc_root.fd < 0)
		return -errno;
	if (fstat(fc_root.fd, &st) < 0)
		return -errno;
	fc_root.src_dev = st.st_dev;
	fc_root.src_ino = st.st_ino;
	fc_root.nlookup = 2;	/* never freed */
	pthread_mutex_init(&fc_root.lock, NULL);
	return 0;
}

/* Caller holds fc_table_lock. */
static struct fc_inode *fc_table_find(dev_t dev, ino_t ino)
{
	struct fc_inode *i;

	if (dev == fc_root.src_dev && ino == fc_root.src_ino)
		return &fc_root;
	for (i = fc_hash[fc_hash_of(dev, ino)]; i; i = i->hnext)
		if (i->src_dev == dev && i->src_ino == ino)
			return i;
	return NULL;
}

/* Caller holds fc_table_lock; returns true if i must be freed. */
static bool fc_inode_unlink_if_unused(struct fc_inode *i)
{
	struct fc_inode **pp;

	if (i == &fc_root || i->nlookup || i->refs)
		return false;
	for (pp = &fc_hash[fc_hash_of(i->src_dev, i->src_ino)]; *pp;
	     pp = &(*pp)->hnext)
		if (*pp == i) {
			*pp = i->hnext;
			break;
		}
	return true;
}

static void fc_inode_destroy(struct fc_inode *i)
{
	if (fc_pol->inode_free)
		fc_pol->inode_free(i);
	close(i->fd);
	pthread_mutex_destroy(&i->lock);
	free(i);
}

void fc_inode_get(struct fc_inode *i)
{
	pthread_mutex_lock(&fc_table_lock);
	i->refs++;
	pthread_mutex_unlock(&fc_table_lock);
}

void fc_inode_put(struct fc_inode *i)
{
	bool dead;

	pthread_mutex_lock(&fc_table_lock);
	i->refs--;
	dead = fc_inode_unlink_if_unused(i);
	pthread_mutex_unlock(&fc_table_lock);
	if (dead)
		fc_inode_destroy(i);
}

static void fc_inode_forget(struct fc_inode *i, uint64_t n)
{
	bool dead;

	pthread_mutex_lock(&fc_table_lock);
	i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
	dead = fc_inode_unlink_if_unused(i);
	pthread_mutex_unlock(&fc_table_lock);
	if (dead)
		fc_inode_destroy(i);
}

struct fc_inode *fc_inode_find_child(struct fc_inode *parent, const char *name)
{
	struct fc_inode *i;
	struct stat st;

	if (fstatat(parent->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return NULL;
	pthread_mutex_lock(&fc_table_lock);
	i = fc_table_find(st.st_dev, st.st_ino);
	if (i)
		i->refs++;
	pthread_mutex_unlock(&fc_table_lock);
	return i;
}

int fc_inode_path(struct fc_inode *i, char *buf, size_t size)
{
	char proc[64];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", i->fd);
	n = readlink(proc, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static void fc_proc_path(char *buf, size_t size, int fd)
{
	snprintf(buf, size, "/proc/self/fd/%d", fd);
}

/* stat of an inode, corrected by the policy (buffered sizes). */
static int fc_stat_inode(struct fc_inode *i, struct stat *st)
{
	if (fstatat(i->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (fc_pol->getattr)
		fc_pol->getattr(i, st);
	return 0;
}

/* Look parent/name up, enter it in the table, fill e.  0 or -errno. */
static int fc_do_lookup(struct fc_inode *parent, const char *name,
			struct fuse_entry_param *e)
{
	struct fc_inode *i, *fresh;
	struct stat st;
	int fd;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = fc_cfg.timeout;
	e->entry_timeout = fc_cfg.timeout;

	fd = openat(parent->fd, name, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}

	pthread_mutex_lock(&fc_table_lock);
	i = fc_table_find(st.st_dev, st.st_ino);
	if (i) {
		i->nlookup++;
		pthread_mutex_unlock(&fc_table_lock);
		close(fd);
	} else {
		pthread_mutex_unlock(&fc_table_lock);
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh) {
			close(fd);
			return -ENOMEM;
		}
		fresh->fd = fd;
		fresh->src_dev = st.st_dev;
		fresh->src_ino = st.st_ino;
		fresh->is_reg = S_ISREG(st.st_mode);
		pthread_mutex_init(&fresh->lock, NULL);
		pthread_mutex_lock(&fc_table_lock);
		/* another thread may have entered it meanwhile */
		i = fc_table_find(st.st_dev, st.st_ino);
		if (i) {
			i->nlookup++;
			pthread_mutex_unlock(&fc_table_lock);
			close(fd);
			pthread_mutex_destroy(&fresh->lock);
			free(fresh);
		} else {
			unsigned int h = fc_hash_of(st.st_dev, st.st_ino);

			i = fresh;
			i->nlookup = 1;
			i->hnext = fc_hash[h];
			fc_hash[h] = i;
			pthread_mutex_unlock(&fc_table_lock);
		}
	}
	if (fc_pol->getattr)
		fc_pol->getattr(i, &st);
	e->attr = st;
	e->ino = fc_ino_of(i);
	return 0;
}

/* ---- files ---------------------------------------------------------- */

void fc_file_get(struct fc_file *f)
{
	atomic_fetch_add(&f->refs, 1);
}

void fc_file_put(struct fc_file *f)
{
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	if (f->pt_id)
		fc_pt_close(f);
	close(f->fd);
	fc_inode_put(f->inode);
	free(f);
}

static struct fc_file *fc_file_new(struct fc_inode *i, int fd, int flags)
{
	struct fc_file *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = fd;
	f->flags = flags;
	f->inode = i;
	atomic_init(&f->refs, 1);
	fc_inode_get(i);
	return f;
}

/* Native open flags for the application's flags (see fusecore.h). */
static int fc_native_flags(int flags)
{
	/*
	 * O_DIRECT goes too: data passes through daemon buffers of any
	 * alignment (and may be held by the policy), so the native IO is
	 * buffered; the kernel still bypasses its own page cache.
	 */
	flags &= ~(O_APPEND | O_CREAT | O_EXCL | O_NOCTTY | O_DIRECT);
	if (fc_cfg.writeback_cache && (flags & O_ACCMODE) == O_WRONLY)
		flags = (flags & ~O_ACCMODE) | O_RDWR;
	return flags | O_CLOEXEC;
}

ssize_t fc_pwrite_all(int fd, const void *buf, size_t size, off_t off)
{
	const char *p = buf;
	size_t done = 0;

	while (done < size) {
		ssize_t n = pwrite(fd, p + done, size - done, off + done);

		fc_counter_add(fc_c_pwrite_calls, 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		fc_counter_add(fc_c_pwrite_bytes, n);
		done += n;
	}
	return size;
}

ssize_t fc_pread(int fd, void *buf, size_t size, off_t off)
{
	ssize_t n;

	do {
		n = pread(fd, buf, size, off);
	} while (n < 0 && errno == EINTR);
	fc_counter_add(fc_c_pread_calls, 1);
	if (n < 0)
		return -errno;
	fc_counter_add(fc_c_pread_bytes, n);
	return n;
}

ssize_t fc_pwritev_all(int fd, struct iovec *iov, int iovcnt, off_t off)
{
	size_t total = 0;

	while (iovcnt > 0) {
		int cnt = iovcnt < IOV_MAX ? iovcnt : IOV_MAX;
		ssize_t n = pwritev(fd, iov, cnt, off);

		fc_counter_add(fc_c_pwrite_calls, 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		fc_counter_add(fc_c_pwrite_bytes, n);
		total += n;
		off += n;
		/* skip what was written, trim a partly written vector */
		while (iovcnt > 0 && (size_t)n >= iov->iov_len) {
			n -= iov->iov_len;
			iov++;
			iovcnt--;
		}
		if (iovcnt > 0 && n > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= n;
		}
	}
	return total;
}

ssize_t fc_write_bufvec(struct fc_file *f, struct fuse_bufvec *in, off_t off)
{
	size_t size = fuse_buf_size(in);
	size_t i, done = 0;

	if (in->count && (in->buf[in->idx].flags & FUSE_BUF_IS_FD)) {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
		ssize_t n;

		dst.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		dst.buf[0].fd = f->fd;
		dst.buf[0].pos = off;
		n = fuse_buf_copy(&dst, in, 0);
		fc_counter_add(fc_c_splice_calls, 1);
		if (n > 0)
			fc_counter_add(fc_c_splice_bytes, n);
		return n;
	}
	for (i = in->idx; i < in->count; i++) {
		const struct fuse_buf *b = &in->buf[i];
		size_t skip = i == in->idx ? in->off : 0;
		ssize_t n = fc_pwrite_all(f->fd, (const char *)b->mem + skip,
					  b->size - skip, off + done);

		if (n < 0)
			return done ? (ssize_t)done : n;
		done += n;
	}
	return done;
}

ssize_t fc_copy_bufvec(struct fuse_bufvec *in, void *dst, size_t size)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(size);

	out.buf[0].mem = dst;
	return fuse_buf_copy(&out, in, 0);
}

/* ---- operations ------------------------------------------------------- */

static void fc_ll_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	fc_op_count(FC_OP_INIT, 0);
	if (fc_cfg.io_unit)
		conn->max_write = fc_cfg.io_unit;
	/* O_TRUNC arrives as SETATTR(size) so that it meets the policy hook */
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
	if (fc_cfg.splice) {
		conn->want |= conn->capable & (FUSE_CAP_SPLICE_READ |
					       FUSE_CAP_SPLICE_WRITE |
					       FUSE_CAP_SPLICE_MOVE);
	} else {
		conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
				FUSE_CAP_SPLICE_MOVE);
	}
	if (fc_cfg.writeback_cache &&
	    (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	if (fc_pol->conn_init)
		fc_pol->conn_init(conn);
}

static void fc_ll_destroy(void *userdata)
{
	(void)userdata;
	fc_op_count(FC_OP_DESTROY, 0);
	fc_stop_policy();
}

static void fc_ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err;

	fc_op_count(FC_OP_LOOKUP, 0);
	err = fc_do_lookup(fc_inode_of(parent), name, &e);
	if (err == -ENOENT) {
		/* negative entry, cached for the timeout */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fc_cfg.timeout;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, -err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void fc_ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fc_op_count(FC_OP_FORGET, 0);
	fc_inode_forget(fc_inode_of(ino), nlookup);
	fuse_reply_none(req);
}

static void fc_ll_forget_multi(fuse_req_t req, size_t count,
			       struct fuse_forget_data *forgets)
{
	size_t k;

	fc_op_count(FC_OP_BATCH_FORGET, 0);
	for (k = 0; k < count; k++)
		fc_inode_forget(fc_inode_of(forgets[k].ino),
				forgets[k].nlookup);
	fuse_reply_none(req);
}

static void fc_ll_getattr(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	fc_op_count(FC_OP_GETATTR, 0);
	err = fc_stat_inode(fc_inode_of(ino), &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, fc_cfg.timeout);
}

static void fc_ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			  int to_set, struct fuse_file_info *fi)
{
	struct fc_inode *i = fc_inode_of(ino);
	struct fc_file *f = fi ? fc_file_of(fi) : NULL;
	char path[64];
	struct stat st;
	int err = 0;

	fc_op_count(FC_OP_SETATTR, 0);
	if (fc_pol->setattr) {
		err = fc_pol->setattr(i, f, attr, to_set);
		if (err)
			goto out;
	}
	fc_proc_path(path, sizeof(path), i->fd);
	if (to_set & FUSE_SET_ATTR_MODE) {
		if ((f ? fchmod(f->fd, attr->st_mode) :
			 chmod(path, attr->st_mode)) < 0) {
			err = -errno;
			goto out;
		}
	}
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = to_set & FUSE_SET_ATTR_UID ? attr->st_uid :
			    (uid_t)-1;
		gid_t gid = to_set & FUSE_SET_ATTR_GID ? attr->st_gid :
			    (gid_t)-1;

		if (fchownat(i->fd, "", uid, gid,
			     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
			err = -errno;
			goto out;
		}
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if ((f ? ftruncate(f->fd, attr->st_size) :
			 truncate(path, attr->st_size)) < 0) {
			err = -errno;
			goto out;
		}
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {
			{ .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_OMIT }
		};

		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if ((f ? futimens(f->fd, tv) :
			 utimensat(AT_FDCWD, path, tv, 0)) < 0) {
			err = -errno;
			goto out;
		}
	}
out:
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	err = fc_stat_inode(i, &st);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_attr(req, &st, fc_cfg.timeout);
}

static void fc_ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n;

	fc_op_count(FC_OP_READLINK, 0);
	n = readlinkat(fc_inode_of(ino)->fd, "", buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (n == (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* Common tail of mknod/mkdir/symlink: look the new name up and reply. */
static void fc_reply_new_entry(fuse_req_t req, struct fc_inode *parent,
			       const char *name, int res)
{
	struct fuse_entry_param e;
	int err;

	if (res < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = fc_do_lookup(parent, name, &e);
	if (err)
		fuse_reply_err(req, -err);
	else
		fuse_reply_entry(req, &e);
}

static void fc_ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, dev_t rdev)
{
	struct fc_inode *p = fc_inode_of(parent);

	fc_op_count(FC_OP_MKNOD, 0);
	fc_reply_new_entry(req, p, name, mknodat(p->fd, name, mode, rdev));
}

static void fc_ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode)
{
	struct fc_inode *p = fc_inode_of(parent);

	fc_op_count(FC_OP_MKDIR, 0);
	fc_reply_new_entry(req, p, name, mkdirat(p->fd, name, mode));
}

static void fc_ll_symlink(fuse_req_t req, const char *link,
			  fuse_ino_t parent, const char *name)
{
	struct fc_inode *p = fc_inode_of(parent);

	fc_op_count(FC_OP_SYMLINK, 0);
	fc_reply_new_entry(req, p, name, symlinkat(link, p->fd, name));
}

static void fc_ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		       const char *newname)
{
	struct fc_inode *i = fc_inode_of(ino);
	struct fc_inode *p = fc_inode_of(newparent);
	char path[64];

	fc_op_count(FC_OP_LINK, 0);
	fc_proc_path(path, sizeof(path), i->fd);
	fc_reply_new_entry(req, p, newname,
			   linkat(AT_FDCWD, path, p->fd, newname,
				  AT_SYMLINK_FOLLOW));
}

static void fc_ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fc_inode *p = fc_inode_of(parent);
	int err = 0;

	fc_op_count(FC_OP_UNLINK, 0);
	if (fc_pol->before_unlink)
		err = fc_pol->before_unlink(p, name);
	if (!err && unlinkat(p->fd, name, 0) < 0)
		err = -errno;
	fuse_reply_err(req, -err);
}

static void fc_ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fc_inode *p = fc_inode_of(parent);
	int err = 0;

	fc_op_count(FC_OP_RMDIR, 0);
	if (fc_pol->before_unlink)
		err = fc_pol->before_unlink(p, name);
	if (!err && unlinkat(p->fd, name, AT_REMOVEDIR) < 0)
		err = -errno;
	fuse_reply_err(req, -err);
}

static void fc_ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			 fuse_ino_t newparent, const char *newname,
			 unsigned int flags)
{
	struct fc_inode *p = fc_inode_of(parent);
	struct fc_inode *np = fc_inode_of(newparent);
	int err = 0;

	fc_op_count(FC_OP_RENAME, 0);
	if (fc_pol->before_rename)
		err = fc_pol->before_rename(p, name, np, newname, flags);
	if (!err && renameat2(p->fd, name, np->fd, newname, flags) < 0)
		err = -errno;
	fuse_reply_err(req, -err);
}

static void fc_ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	fc_op_count(FC_OP_STATFS, 0);
	if (fstatvfs(fc_inode_of(ino)->fd, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

/* Open the native file for i; on success fi->fh holds a new fc_file. */
static int fc_open_file(struct fc_inode *i, int fd, struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_new(i, fd, fi->flags);
	int err;

	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	if (fc_pol->open) {
		err = fc_pol->open(f);
		if (err) {
			fc_file_put(f);
			return err;
		}
	}
	fi->fh = (uintptr_t)f;
	/* page cache stays coherent: all data passes through this daemon */
	fi->keep_cache = 0;
	return 0;
}

static void fc_ll_open(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fc_inode *i = fc_inode_of(ino);
	char path[64];
	int fd, err;

	fc_op_count(FC_OP_OPEN, 0);
	if ((fi->flags & O_TRUNC) && fc_pol->sync_inode) {
		err = fc_pol->sync_inode(i, FC_CAUSE_TRUNCATE);
		if (err) {
			fuse_reply_err(req, -err);
			return;
		}
	}
	/*
	 * Reopen through the /proc magic link.  O_NOFOLLOW must go: it would
	 * refuse the link itself (ELOOP); the kernel has already refused a
	 * symlink before sending FUSE_OPEN.
	 */
	fc_proc_path(path, sizeof(path), i->fd);
	fd = open(path, fc_native_flags(fi->flags) & ~O_NOFOLLOW);
	if (fd < 0 && errno == EACCES && fc_cfg.writeback_cache &&
	    (fi->flags & O_ACCMODE) == O_WRONLY)
		fd = open(path, (fi->flags & ~(O_APPEND | O_CREAT | O_EXCL |
					      O_NOFOLLOW)) | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = fc_open_file(i, fd, fi);
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	if (fc_cfg.passthrough)
		fc_pt_open(fc_file_of(fi));
	if (fuse_reply_open(req, fi) == -ENOENT)
		fc_file_put(fc_file_of(fi));	/* interrupted */
}

static void fc_ll_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, struct fuse_file_info *fi)
{
	struct fc_inode *p = fc_inode_of(parent);
	struct fuse_entry_param e;
	int fd, err;

	fc_op_count(FC_OP_CREATE, 0);
	fd = openat(p->fd, name, fc_native_flags(fi->flags) | O_CREAT |
		    (fi->flags & O_EXCL), mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	err = fc_do_lookup(p, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, -err);
		return;
	}
	err = fc_open_file(fc_inode_of(e.ino), fd, fi);
	if (err) {
		fc_inode_forget(fc_inode_of(e.ino), 1);
		fuse_reply_err(req, -err);
		return;
	}
	if (fc_cfg.passthrough)
		fc_pt_open(fc_file_of(fi));
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fc_file_put(fc_file_of(fi));
		fc_inode_forget(fc_inode_of(e.ino), 1);
	}
}

static void fc_ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_of(fi);
	char *buf;
	ssize_t n;
	int err;

	(void)ino;
	if (fc_pol->before_read) {
		err = fc_pol->before_read(f, size, off);
		if (err) {
			fc_op_count(FC_OP_READ, 0);
			fuse_reply_err(req, -err);
			return;
		}
	}
	if (fc_cfg.splice && !fc_pol->read) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);

		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = f->fd;
		bv.buf[0].pos = off;
		fc_op_count(FC_OP_READ, size);
		fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		return;
	}
	buf = malloc(size ? size : 1);
	if (!buf) {
		fc_op_count(FC_OP_READ, 0);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (fc_pol->read)
		n = fc_pol->read(f, buf, size, off);
	else
		n = fc_pread(f->fd, buf, size, off);
	fc_op_count(FC_OP_READ, n > 0 ? n : 0);
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_buf(req, buf, n);
	free(buf);
}

static void fc_ll_write_buf(fuse_req_t req, fuse_ino_t ino,
			    struct fuse_bufvec *in, off_t off,
			    struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_of(fi);
	size_t size = fuse_buf_size(in);
	ssize_t n;

	(void)ino;
	fc_op_count(FC_OP_WRITE, size);
	if (fc_pol->write)
		n = fc_pol->write(f, in, off);
	else
		n = fc_write_bufvec(f, in, off);
	if (n < 0)
		fuse_reply_err(req, -n);
	else
		fuse_reply_write(req, n);
}

static void fc_ll_flush(fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	int err = 0;

	(void)ino;
	fc_op_count(FC_OP_FLUSH, 0);
	if (fc_pol->flush)
		err = fc_pol->flush(fc_file_of(fi));
	fuse_reply_err(req, err < 0 ? -err : 0);
}

static void fc_ll_release(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_of(fi);
	int err = 0;

	(void)ino;
	fc_op_count(FC_OP_RELEASE, 0);
	if (fc_pol->release)
		err = fc_pol->release(f);
	if (err < 0)
		fc_log("release of %s inode %llu: %s (no caller to report to)",
		       fc_pol->name, (unsigned long long)f->inode->src_ino,
		       strerror(-err));
	fc_file_put(f);
	fuse_reply_err(req, 0);
}

static void fc_ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_of(fi);
	int err = 0;

	(void)ino;
	fc_op_count(FC_OP_FSYNC, 0);
	if (fc_pol->fsync)
		err = fc_pol->fsync(f, datasync);
	if (err == 0) {
		if (datasync) {
			fc_counter_add(fc_c_fdatasync_calls, 1);
			err = fdatasync(f->fd) < 0 ? -errno : 0;
		} else {
			fc_counter_add(fc_c_fsync_calls, 1);
			err = fsync(f->fd) < 0 ? -errno : 0;
		}
	} else if (err == FC_HANDLED) {
		err = 0;
	}
	fuse_reply_err(req, -err);
}

static void fc_ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			    off_t off, off_t len, struct fuse_file_info *fi)
{
	struct fc_file *f = fc_file_of(fi);
	int err = 0;

	(void)ino;
	fc_op_count(FC_OP_FALLOCATE, 0);
	if (fc_pol->sync_inode)
		err = fc_pol->sync_inode(f->inode, FC_CAUSE_METADATA);
	if (!err && fallocate(f->fd, mode, off, len) < 0)
		err = -errno;
	fuse_reply_err(req, -err);
}

/* No xattrs: ENOSYS makes the kernel stop asking (no GETXATTR per write). */
static void fc_ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   size_t size)
{
	(void)ino; (void)name; (void)size;
	fc_op_count(FC_OP_GETXATTR, 0);
	fuse_reply_err(req, ENOSYS);
}

static void fc_ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	(void)ino; (void)size;
	fc_op_count(FC_OP_LISTXATTR, 0);
	fuse_reply_err(req, ENOSYS);
}

static void fc_ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   const char *value, size_t size, int flags)
{
	(void)ino; (void)name; (void)value; (void)size; (void)flags;
	fc_op_count(FC_OP_SETXATTR, 0);
	fuse_reply_err(req, ENOSYS);
}

static void fc_ll_removexattr(fuse_req_t req, fuse_ino_t ino,
			      const char *name)
{
	(void)ino; (void)name;
	fc_op_count(FC_OP_REMOVEXATTR, 0);
	fuse_reply_err(req, ENOSYS);
}

/* ---- directories ------------------------------------------------------ */

static void fc_ll_opendir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct fc_dir *d;
	int fd;

	fc_op_count(FC_OP_OPENDIR, 0);
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fd = openat(fc_inode_of(ino)->fd, ".", O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;

		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void fc_ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	struct fc_dir *d = (struct fc_dir *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size);
	size_t used = 0;
	int err = 0;

	(void)ino;
	fc_op_count(FC_OP_READDIR, 0);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (off != d->offset) {
		seekdir(d->dp, off);
		d->entry = NULL;
		d->offset = off;
	}
	for (;;) {
		struct stat st = { 0 };
		size_t len;

		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		st.st_ino = d->entry->d_ino;
		st.st_mode = d->entry->d_type << 12;
		len = fuse_add_direntry(req, buf + used, size - used,
					d->entry->d_name, &st,
					d->entry->d_off);
		if (len > size - used)
			break;	/* keep d->entry for the next call */
		used += len;
		d->offset = d->entry->d_off;
		d->entry = NULL;
	}
	pthread_mutex_unlock(&d->lock);
	if (err && !used)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fc_ll_releasedir(fuse_req_t req, fuse_ino_t ino,
			     struct fuse_file_info *fi)
{
	struct fc_dir *d = (struct fc_dir *)(uintptr_t)fi->fh;

	(void)ino;
	fc_op_count(FC_OP_RELEASEDIR, 0);
	closedir(d->dp);
	pthread_mutex_destroy(&d->lock);
	free(d);
	fuse_reply_err(req, 0);
}

static void fc_ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			   struct fuse_file_info *fi)
{
	struct fc_dir *d = (struct fc_dir *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dp);
	int res;

	fc_op_count(FC_OP_FSYNCDIR, 0);
	if (fc_pol->fsyncdir) {
		res = fc_pol->fsyncdir(fc_inode_of(ino), fd, datasync);
		if (res == FC_HANDLED) {
			fuse_reply_err(req, 0);
			return;
		}
		if (res < 0) {
			fuse_reply_err(req, -res);
			return;
		}
	}
	res = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, res < 0 ? errno : 0);
}

const struct fuse_lowlevel_ops fc_ll_ops = {
	.init = fc_ll_init,
	.destroy = fc_ll_destroy,
	.lookup = fc_ll_lookup,
	.forget = fc_ll_forget,
	.forget_multi = fc_ll_forget_multi,
	.getattr = fc_ll_getattr,
	.setattr = fc_ll_setattr,
	.readlink = fc_ll_readlink,
	.mknod = fc_ll_mknod,
	.mkdir = fc_ll_mkdir,
	.symlink = fc_ll_symlink,
	.link = fc_ll_link,
	.unlink = fc_ll_unlink,
	.rmdir = fc_ll_rmdir,
	.rename = fc_ll_rename,
	.statfs = fc_ll_statfs,
	.open = fc_ll_open,
	.create = fc_ll_create,
	.read = fc_ll_read,
	.write_buf = fc_ll_write_buf,
	.flush = fc_ll_flush,
	.release = fc_ll_release,
	.fsync = fc_ll_fsync,
	.fallocate = fc_ll_fallocate,
	.getxattr = fc_ll_getxattr,
	.listxattr = fc_ll_listxattr,
	.setxattr = fc_ll_setxattr,
	.removexattr = fc_ll_removexattr,
	.opendir = fc_ll_opendir,
	.readdir = fc_ll_readdir,
	.releasedir = fc_ll_releasedir,
	.fsyncdir = fc_ll_fsyncdir,
};
