/*
 * fj_log: the circular, append-only, checksummed log (see fj_log.h for the
 * format and the write-ahead discipline).
 *
 * Locks, in the order they may be taken:
 *   ckpt_lock  serialises checkpoints (a checkpoint does IO without lock).
 *   f->lock    (caller's, held across fj_log_append_*)
 *   lock       head, tail, sequence, staging buffer, live list, epoch,
 *              stats, sticky error, and the log_* fields of struct fj_file.
 *   sync_lock  synced_seq; held across the log's fdatasync (group commit).
 */
#define _GNU_SOURCE
#include "fj_log.h"
#include "fj_crc32c.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define FJ_SB_SLOT 4096u
#define FJ_DATA_START (2u * FJ_SB_SLOT)
#define FJ_REC_ALIGN 16u
#define FJ_REC_MAGIC 0x434a5246u		/* "FRJC" */
#define FJ_SB_MAGIC 0x3142534c524f4a46ull	/* "FJORLSB1" */
#define FJ_SB_VERSION 1u
#define FJ_STAGE_CAP (1u << 20)
#define FJ_SEQ_RANGE_SHIFT 32

struct fj_log_sb {
	uint64_t magic;
	uint32_t version;
	uint32_t crc;		/* over the struct with crc = 0 */
	uint64_t gen;
	uint64_t size;
	uint64_t tail_off;
	uint64_t tail_seq;
};

struct fj_log_rec {
	uint32_t magic;
	uint16_t type;
	uint16_t hdr_len;
	uint32_t crc;		/* over header (crc = 0) and payload */
	uint32_t len;		/* payload bytes */
	uint64_t seq;
	uint64_t file_id;
	uint64_t offset;
};

struct fj_log {
	int fd;
	uint64_t size;			/* immutable after open */

	pthread_mutex_t ckpt_lock;

	pthread_mutex_t lock;		/* see the top of the file */
	uint64_t head, next_seq;
	uint64_t tail, tail_seq;
	uint64_t epoch;
	unsigned char *stage;		/* bytes of [stage_off, head) */
	size_t stage_len;
	uint64_t stage_off;
	uint64_t last_seq;		/* last record appended */
	uint64_t written_seq;		/* records <= this are pwritten */
	uint64_t data_since_ckpt;
	struct fj_file *live;		/* files with live records, refs */
	uint64_t sb_gen;		/* ckpt_lock (open/replay: one thread) */
	struct fj_log_stats st;
	pthread_cond_t wake;		/* checkpoint thread, under lock */
	bool stop, running;
	unsigned int interval_ms;

	pthread_mutex_t sync_lock;
	uint64_t synced_seq;

	pthread_t thread;
};

static size_t fj_align(size_t n)
{
	return (n + FJ_REC_ALIGN - 1) & ~(size_t)(FJ_REC_ALIGN - 1);
}

static void fj_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int fj_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

static ssize_t fj_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	unsigned char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, off + done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += n;
	}
	return done;
}

static uint32_t fj_sb_crc(const struct fj_log_sb *sb)
{
	struct fj_log_sb c = *sb;

	c.crc = 0;
	return fj_crc32c(0, &c, sizeof(c));
}

static int fj_sb_write(struct fj_log *log, uint64_t tail, uint64_t tail_seq)
{
	struct fj_log_sb sb = {
		.magic = FJ_SB_MAGIC,
		.version = FJ_SB_VERSION,
		.gen = ++log->sb_gen,
		.size = log->size,
		.tail_off = tail,
		.tail_seq = tail_seq,
	};
	int r;

	sb.crc = fj_sb_crc(&sb);
	r = fj_pwrite_all(log->fd, &sb, sizeof(sb),
			  (sb.gen & 1) * FJ_SB_SLOT);
	if (!r && fdatasync(log->fd))
		r = -errno;
	return r;
}

/* The valid superblock with the higher generation; -ENOENT if none. */
static int fj_sb_read(int fd, struct fj_log_sb *out)
{
	bool found = false;

	for (unsigned int slot = 0; slot < 2; slot++) {
		struct fj_log_sb sb;

		if (fj_pread_all(fd, &sb, sizeof(sb), slot * FJ_SB_SLOT) !=
		    sizeof(sb))
			continue;
		if (sb.magic != FJ_SB_MAGIC || sb.version != FJ_SB_VERSION ||
		    sb.crc != fj_sb_crc(&sb) || sb.size < FJ_LOG_MIN_SIZE ||
		    sb.tail_off < FJ_DATA_START || sb.tail_off >= sb.size)
			continue;
		if (!found || sb.gen > out->gen)
			*out = sb;
		found = true;
	}
	return found ? 0 : -ENOENT;
}

static bool fj_all_zero(int fd, uint64_t len)
{
	unsigned char buf[4096];

	for (uint64_t off = 0; off < len; off += sizeof(buf)) {
		ssize_t n = fj_pread_all(fd, buf, sizeof(buf), off);

		if (n <= 0)
			return true;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i])
				return false;
	}
	return true;
}

static int fj_zero_fill(int fd, uint64_t from, uint64_t to)
{
	size_t chunk = 1u << 20;
	unsigned char *z = calloc(1, chunk);
	int r = 0;

	if (!z)
		return -ENOMEM;
	while (!r && from < to) {
		size_t n = to - from < chunk ? to - from : chunk;

		r = fj_pwrite_all(fd, z, n, from);
		from += n;
	}
	free(z);
	if (!r && fdatasync(fd))
		r = -errno;
	return r;
}

int fj_log_open(struct fj_log **out, const char *path, uint64_t size,
		bool prealloc, char *err, size_t errlen)
{
	struct fj_log *log;
	struct fj_log_sb sb;
	struct stat stbuf;
	bool created = false;
	int fd, r;

	*out = NULL;
	if (size < FJ_LOG_MIN_SIZE) {
		fj_err(err, errlen,
		       "log size %llu is too small (minimum %u bytes)",
		       (unsigned long long)size, FJ_LOG_MIN_SIZE);
		return -EINVAL;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		created = fd >= 0;
	}
	if (fd < 0) {
		r = -errno;
		fj_err(err, errlen, "cannot open log %s: %s%s", path,
		       strerror(errno),
		       errno == EROFS ? " (the log needs a writable filesystem)"
				      : "");
		return r;
	}
	if (fstat(fd, &stbuf) || !S_ISREG(stbuf.st_mode)) {
		fj_err(err, errlen, "log %s is not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	if (fj_sb_read(fd, &sb) == 0) {
		size = sb.size;		/* an existing log keeps its size */
		if ((uint64_t)stbuf.st_size < size &&
		    ftruncate(fd, size)) {
			r = -errno;
			fj_err(err, errlen, "cannot extend log %s: %s", path,
			       strerror(errno));
			close(fd);
			return r;
		}
	} else {
		struct statvfs vfs;

		if (stbuf.st_size > 0 && !fj_all_zero(fd, FJ_DATA_START)) {
			fj_err(err, errlen,
			       "%s exists and is not a Fjord log; refusing to overwrite it",
			       path);
			close(fd);
			return -EINVAL;
		}
		if (prealloc && !fstatvfs(fd, &vfs) &&
		    (uint64_t)vfs.f_bavail * vfs.f_frsize + stbuf.st_blocks * 512ull < size) {
			fj_err(err, errlen,
			       "not enough free space for a %llu-byte log at %s",
			       (unsigned long long)size, path);
			r = -ENOSPC;
			goto fail_new;
		}
		r = prealloc ? fj_zero_fill(fd, 0, size)
			     : (ftruncate(fd, size) ? -errno : 0);
		if (r) {
			fj_err(err, errlen, "cannot create a %llu-byte log at %s: %s",
			       (unsigned long long)size, path, strerror(-r));
			goto fail_new;
		}
		memset(&sb, 0, sizeof(sb));
		sb.tail_off = FJ_DATA_START;
		sb.tail_seq = 1ull << FJ_SEQ_RANGE_SHIFT;
		sb.size = size;
	}

	log = calloc(1, sizeof(*log));
	if (!log || !(log->stage = malloc(FJ_STAGE_CAP))) {
		free(log);
		close(fd);
		return -ENOMEM;
	}
	log->fd = fd;
	log->size = size;
	log->sb_gen = sb.gen;
	log->tail = log->head = log->stage_off = sb.tail_off;
	log->tail_seq = log->next_seq = sb.tail_seq;
	log->written_seq = log->last_seq = log->synced_seq = sb.tail_seq - 1;
	log->epoch = 1;
	log->st.size = size;
	pthread_mutex_init(&log->lock, NULL);
	pthread_mutex_init(&log->sync_lock, NULL);
	pthread_mutex_init(&log->ckpt_lock, NULL);
	pthread_cond_init(&log->wake, NULL);
	if (!sb.gen) {
		r = fj_sb_write(log, log->tail, log->tail_seq);
		if (r) {
			fj_err(err, errlen, "cannot write log %s: %s", path,
			       strerror(-r));
			fj_log_close(log, true);
			if (created)
				unlink(path);
			return r;
		}
	}
	*out = log;
	return 0;

fail_new:
	close(fd);
	if (created)
		unlink(path);
	return r;
}

/* Used bytes between tail and head; caller holds lock. */
static uint64_t fj_used(const struct fj_log *log)
{
	if (log->head >= log->tail)
		return log->head - log->tail;
	return (log->size - log->tail) + (log->head - FJ_DATA_START);
}

/* Writes out the staging buffer; caller holds lock. */
static int fj_stage_flush(struct fj_log *log)
{
	int r = 0;

	if (log->stage_len) {
		r = fj_pwrite_all(log->fd, log->stage, log->stage_len,
				  log->stage_off);
		if (r) {
			if (!log->st.error) {
				fprintf(stderr,
					"fjord: LOG WRITE FAILED (%s): critical fsyncs will fail until remount\n",
					strerror(-r));
			}
			log->st.error = -r;
			return r;
		}
		log->st.bytes_written += log->stage_len;
	}
	log->stage_len = 0;
	log->stage_off = log->head;
	log->written_seq = log->last_seq;
	return r;
}

static void fj_rec_fill(struct fj_log_rec *h, uint16_t type, uint64_t seq,
			uint64_t file_id, uint64_t off, const void *p1,
			size_t l1, const void *p2, size_t l2)
{
	uint32_t crc;

	memset(h, 0, sizeof(*h));
	h->magic = FJ_REC_MAGIC;
	h->type = type;
	h->hdr_len = sizeof(*h);
	h->len = l1 + l2;
	h->seq = seq;
	h->file_id = file_id;
	h->offset = off;
	crc = fj_crc32c(0, h, sizeof(*h));
	if (l1)
		crc = fj_crc32c(crc, p1, l1);
	if (l2)
		crc = fj_crc32c(crc, p2, l2);
	h->crc = crc;
}

/*
 * Is there room for a record of n bytes (aligned) at head, wrapping if
 * needed? Caller holds lock.
 */
static bool fj_room(const struct fj_log *log, size_t n)
{
	uint64_t head = log->head;

	if (head >= log->tail) {
		if (head + n <= log->size &&
		    !(head + n == log->size && log->tail == FJ_DATA_START))
			return true;
		head = FJ_DATA_START;	/* would wrap */
		return head + n < log->tail;
	}
	return head + n < log->tail;
}

/*
 * Appends one record; caller holds lock and has checked room. Payload is
 * p1 then p2.
 */
static int fj_put(struct fj_log *log, uint16_t type, uint64_t file_id,
		  uint64_t off, const void *p1, size_t l1, const void *p2,
		  size_t l2)
{
	size_t n = fj_align(sizeof(struct fj_log_rec) + l1 + l2);
	struct fj_log_rec h;
	int r;

	if (log->st.error)
		return -log->st.error;
	if (log->head + n > log->size) {
		/* wrap: a PAD record if a header fits, then restart */
		if (log->size - log->head >= sizeof(h)) {
			fj_rec_fill(&h, FJ_REC_PAD, log->next_seq, 0, 0,
				    NULL, 0, NULL, 0);
			if (log->stage_len + sizeof(h) > FJ_STAGE_CAP &&
			    (r = fj_stage_flush(log)))
				return r;
			memcpy(log->stage + log->stage_len, &h, sizeof(h));
			log->stage_len += sizeof(h);
			log->last_seq = log->next_seq++;
			log->st.records++;
		}
		log->head = log->size;
		if ((r = fj_stage_flush(log)))
			return r;
		log->head = log->stage_off = FJ_DATA_START;
	}
	fj_rec_fill(&h, type, log->next_seq, file_id, off, p1, l1, p2, l2);
	if (log->stage_len + n > FJ_STAGE_CAP) {
		if ((r = fj_stage_flush(log)))
			return r;
	}
	if (n > FJ_STAGE_CAP) {
		static const unsigned char zero[FJ_REC_ALIGN];
		struct iovec iov[4] = {
			{ &h, sizeof(h) },
			{ (void *)p1, l1 },
			{ (void *)p2, l2 },
			{ (void *)zero, n - sizeof(h) - l1 - l2 },
		};
		uint64_t at = log->head;
		size_t left = n;
		int i = 0;

		while (left) {
			ssize_t w = pwritev(log->fd, iov + i, 4 - i, at);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				log->st.error = w < 0 ? errno : EIO;
				fprintf(stderr, "fjord: LOG WRITE FAILED (%s)\n",
					strerror(log->st.error));
				return -log->st.error;
			}
			at += w;
			left -= w;
			while (i < 4 && (size_t)w >= iov[i].iov_len) {
				w -= iov[i].iov_len;
				iov[i++].iov_len = 0;
			}
			if (i < 4) {
				iov[i].iov_base = (char *)iov[i].iov_base + w;
				iov[i].iov_len -= w;
			}
		}
		log->st.bytes_written += n;
		log->head += n;
		log->last_seq = log->next_seq++;
		log->stage_off = log->head;
		log->written_seq = log->last_seq;
	} else {
		unsigned char *p = log->stage + log->stage_len;

		memcpy(p, &h, sizeof(h));
		if (l1)
			memcpy(p + sizeof(h), p1, l1);
		if (l2)
			memcpy(p + sizeof(h) + l1, p2, l2);
		memset(p + sizeof(h) + l1 + l2, 0, n - sizeof(h) - l1 - l2);
		log->stage_len += n;
		log->head += n;
		log->last_seq = log->next_seq++;
	}
	log->st.records++;
	return 0;
}

static size_t fj_file_rec_len(const struct fj_file *f)
{
	return 8 + f->handle_len + strlen(f->path) + 1;
}

static int fj_append(struct fj_log *log, struct fj_file *f, uint16_t type,
		     uint64_t off, const void *buf, size_t len)
{
	size_t need = fj_align(sizeof(struct fj_log_rec) + len) +
		      fj_align(sizeof(struct fj_log_rec) + fj_file_rec_len(f)) +
		      2 * sizeof(struct fj_log_rec);
	bool tried = false;
	int r;

	if (need + FJ_DATA_START >= log->size / 2)
		return -EFBIG;	/* the caller writes such data directly */
	pthread_mutex_lock(&log->lock);
	while (!fj_room(log, need)) {
		pthread_mutex_unlock(&log->lock);
		if (tried)
			return -ENOSPC;
		r = fj_log_checkpoint(log);
		if (r)
			return r;
		tried = true;
		pthread_mutex_lock(&log->lock);
	}
	if (f->log_epoch != log->epoch) {
		uint32_t meta[2] = { (uint32_t)f->handle_type, f->handle_len };
		size_t plen = strlen(f->path) + 1;
		unsigned char *rec = malloc(f->handle_len + plen);

		if (!rec) {
			pthread_mutex_unlock(&log->lock);
			return -ENOMEM;
		}
		memcpy(rec, f->handle, f->handle_len);
		memcpy(rec + f->handle_len, f->path, plen);
		r = fj_put(log, FJ_REC_FILE, f->id, 0, meta, sizeof(meta), rec,
			   f->handle_len + plen);
		free(rec);
		if (r)
			goto out;
		f->log_epoch = log->epoch;
	}
	r = fj_put(log, type, f->id, off, buf, len, NULL, 0);
	if (r)
		goto out;
	if (type == FJ_REC_DATA) {
		log->st.data_records++;
		log->data_since_ckpt++;
	}
	f->log_seq = log->last_seq;
	if (!f->log_listed) {
		f->log_listed = true;
		f->log_next = log->live;
		log->live = fj_file_get(f);
	}
	if (fj_used(log) > (log->size - FJ_DATA_START) / 2)
		pthread_cond_signal(&log->wake);
out:
	pthread_mutex_unlock(&log->lock);
	if (r && r != -ENOSPC && r != -ENOMEM)
		f->log_failed = -r;
	return r;
}

int fj_log_append_data(struct fj_log *log, struct fj_file *f, uint64_t off,
		       const void *buf, size_t len)
{
	return fj_append(log, f, FJ_REC_DATA, off, buf, len);
}

int fj_log_append_trunc(struct fj_log *log, struct fj_file *f, uint64_t size)
{
	return fj_append(log, f, FJ_REC_TRUNC, size, NULL, 0);
}

int fj_log_sync(struct fj_log *log, uint64_t seq)
{
	uint64_t target;
	int r = 0;

	pthread_mutex_lock(&log->lock);
	if (log->st.error) {
		r = -log->st.error;
	} else if (seq > log->written_seq) {
		r = fj_stage_flush(log);
	}
	target = log->written_seq;
	pthread_mutex_unlock(&log->lock);
	if (r)
		return r;
	pthread_mutex_lock(&log->sync_lock);
	if (log->synced_seq < seq) {
		if (fdatasync(log->fd)) {
			r = -errno;
			pthread_mutex_lock(&log->lock);
			log->st.error = -r;
			pthread_mutex_unlock(&log->lock);
			fprintf(stderr, "fjord: LOG SYNC FAILED (%s)\n",
				strerror(-r));
		} else {
			log->synced_seq = target;
			pthread_mutex_lock(&log->lock);
			log->st.syncs++;
			pthread_mutex_unlock(&log->lock);
		}
	}
	pthread_mutex_unlock(&log->sync_lock);
	return r;
}

int fj_log_checkpoint(struct fj_log *log)
{
	struct fj_file *list, *f;
	uint64_t new_tail, new_seq, retired;
	int r = 0;

	pthread_mutex_lock(&log->ckpt_lock);
	pthread_mutex_lock(&log->lock);
	if (log->st.error) {
		r = -log->st.error;
		pthread_mutex_unlock(&log->lock);
		goto out;
	}
	new_tail = log->head;
	new_seq = log->next_seq;
	list = log->live;
	log->live = NULL;
	for (f = list; f; f = f->log_next)
		f->log_listed = false;
	log->epoch++;
	retired = log->data_since_ckpt;
	log->data_since_ckpt = 0;
	pthread_mutex_unlock(&log->lock);

	for (f = list; f; f = f->log_next) {
		if (fdatasync(f->fd) && !r)
			r = -errno;
	}
	if (!r)
		r = fj_sb_write(log, new_tail, new_seq);

	pthread_mutex_lock(&log->lock);
	if (r) {
		/* keep the records live: put the files back */
		log->data_since_ckpt += retired;
		while (list) {
			f = list;
			list = f->log_next;
			if (f->log_listed) {
				fj_file_put(f);
				continue;
			}
			f->log_listed = true;
			f->log_next = log->live;
			log->live = f;
		}
		pthread_mutex_unlock(&log->lock);
		fprintf(stderr, "fjord: checkpoint failed: %s\n", strerror(-r));
		goto out;
	}
	log->tail = new_tail;
	log->tail_seq = new_seq;
	log->st.checkpoints++;
	log->st.checkpointed += retired;
	pthread_mutex_unlock(&log->lock);
	while (list) {
		f = list;
		list = f->log_next;
		pthread_mutex_lock(&log->lock);
		log->st.file_syncs++;
		pthread_mutex_unlock(&log->lock);
		fj_file_put(f);
	}
out:
	pthread_mutex_unlock(&log->ckpt_lock);
	return r;
}

bool fj_log_is_live(struct fj_log *log, struct fj_file *f)
{
	bool live;

	pthread_mutex_lock(&log->lock);
	live = f->log_listed;
	pthread_mutex_unlock(&log->lock);
	return live;
}

static void *fj_log_thread(void *arg)
{
	struct fj_log *log = arg;
	struct timespec last, now;

	clock_gettime(CLOCK_MONOTONIC, &last);
	pthread_mutex_lock(&log->lock);
	while (!log->stop) {
		struct timespec ts;
		bool full, due;
		uint64_t ms;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&log->wake, &log->lock, &ts);
		if (log->stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		ms = (now.tv_sec - last.tv_sec) * 1000 +
		     (now.tv_nsec - last.tv_nsec) / 1000000;
		full = fj_used(log) > (log->size - FJ_DATA_START) / 2;
		due = log->interval_ms && ms >= log->interval_ms && log->live;
		if (!(full || due) || log->st.error)
			continue;
		pthread_mutex_unlock(&log->lock);
		fj_log_checkpoint(log);
		clock_gettime(CLOCK_MONOTONIC, &last);
		pthread_mutex_lock(&log->lock);
	}
	pthread_mutex_unlock(&log->lock);
	return NULL;
}

int fj_log_start(struct fj_log *log, unsigned int interval_ms)
{
	int r;

	log->interval_ms = interval_ms;
	r = pthread_create(&log->thread, NULL, fj_log_thread, log);
	if (r)
		return -r;
	log->running = true;
	return 0;
}

void fj_log_get_stats(struct fj_log *log, struct fj_log_stats *st)
{
	pthread_mutex_lock(&log->lock);
	*st = log->st;
	st->used = fj_used(log);
	pthread_mutex_unlock(&log->lock);
}

void fj_log_close(struct fj_log *log, bool abandon)
{
	if (!log)
		return;
	if (log->running) {
		pthread_mutex_lock(&log->lock);
		log->stop = true;
		pthread_cond_signal(&log->wake);
		pthread_mutex_unlock(&log->lock);
		pthread_join(log->thread, NULL);
	}
	if (!abandon) {
		pthread_mutex_lock(&log->lock);
		fj_stage_flush(log);
		pthread_mutex_unlock(&log->lock);
		fj_log_checkpoint(log);
	}
	while (log->live) {
		struct fj_file *f = log->live;

		log->live = f->log_next;
		f->log_listed = false;
		fj_file_put(f);
	}
	close(log->fd);
	free(log->stage);
	pthread_mutex_destroy(&log->lock);
	pthread_mutex_destroy(&log->sync_lock);
	pthread_mutex_destroy(&log->ckpt_lock);
	pthread_cond_destroy(&log->wake);
	free(log);
}

/* ---- replay ------------------------------------------------------------ */

struct fj_replay_file {
	uint64_t id;
	int fd;			/* -1: gone */
};

struct fj_replay {
	struct fj_replay_file *v;
	size_t n, cap;
};

static struct fj_replay_file *fj_replay_find(struct fj_replay *rp,
					     uint64_t id)
{
	for (size_t i = 0; i < rp->n; i++)
		if (rp->v[i].id == id)
			return &rp->v[i];
	return NULL;
}

static void fj_replay_open(struct fj_replay *rp, int mount_fd, uint64_t id,
			   const unsigned char *p, size_t len)
{
	struct fj_replay_file *rf = fj_replay_find(rp, id);
	uint32_t meta[2];
	int fd = -1;

	if (!rf) {
		if (rp->n == rp->cap) {
			size_t cap = rp->cap ? 2 * rp->cap : 16;
			void *v = realloc(rp->v, cap * sizeof(*rp->v));

			if (!v)
				return;
			rp->v = v;
			rp->cap = cap;
		}
		rf = &rp->v[rp->n++];
		rf->id = id;
	} else if (rf->fd >= 0) {
		close(rf->fd);
	}
	rf->fd = -1;
	if (len < sizeof(meta))
		return;
	memcpy(meta, p, sizeof(meta));
	if (meta[1] > FJ_HANDLE_MAX || sizeof(meta) + meta[1] >= len)
		return;
	if (meta[1]) {
		union {
			struct file_handle fh;
			unsigned char raw[sizeof(struct file_handle) +
					  FJ_HANDLE_MAX];
		} u;

		u.fh.handle_type = meta[0];
		u.fh.handle_bytes = meta[1];
		memcpy(u.fh.f_handle, p + sizeof(meta), meta[1]);
		fd = open_by_handle_at(mount_fd, &u.fh, O_RDWR | O_CLOEXEC);
		if (fd < 0 && errno != ESTALE && errno != ENOENT) {
			/* handles unusable here (EPERM...): fall back */
			fd = -2;
		}
	}
	if (!meta[1] || fd == -2) {
		const char *path = (const char *)p + sizeof(meta) + meta[1];

		if (memchr(path, 0, len - sizeof(meta) - meta[1]) && *path)
			fd = openat(mount_fd, path,
				    O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		else
			fd = -1;
	}
	rf->fd = fd < 0 ? -1 : fd;
}

int fj_log_replay(struct fj_log *log, int mount_fd,
		  struct fj_log_replay_report *rep)
{
	struct fj_replay rp = { 0 };
	uint64_t pos = log->tail, seq = log->tail_seq, max_seq = seq;
	size_t cap = 1u << 20;
	unsigned char *buf = malloc(cap);
	struct fj_log_rec h;
	bool counting = false;	/* past the stop: only count records */
	int r = 0;

	memset(rep, 0, sizeof(*rep));
	rep->first_seq = seq;
	rep->stop_reason = "end";
	if (!buf)
		return -ENOMEM;
	for (;;) {
		const char *bad = NULL;
		uint32_t crc, want;
		ssize_t n;

		if (log->size - pos < sizeof(h))
			pos = FJ_DATA_START;
		n = fj_pread_all(log->fd, &h, sizeof(h), pos);
		if (n != (ssize_t)sizeof(h))
			bad = "torn header";
		else if (h.magic != FJ_REC_MAGIC || h.hdr_len != sizeof(h) ||
			 h.type < FJ_REC_FILE || h.type > FJ_REC_PAD)
			bad = "end";
		else if (h.seq != seq)
			bad = h.seq < seq ? "end" : "sequence gap";
		else if (pos + fj_align(sizeof(h) + h.len) > log->size)
			bad = "bad length";
		if (!bad && h.len > cap) {
			unsigned char *nb = realloc(buf, h.len);

			if (!nb) {
				r = -ENOMEM;
				break;
			}
			buf = nb;
			cap = h.len;
		}
		if (!bad) {
			n = fj_pread_all(log->fd, buf, h.len, pos + sizeof(h));
			if (n != (ssize_t)h.len) {
				bad = "torn record";
			} else {
				want = h.crc;
				h.crc = 0;
				crc = fj_crc32c(0, &h, sizeof(h));
				crc = fj_crc32c(crc, buf, h.len);
				h.crc = want;
				if (crc != want)
					bad = "bad crc";
			}
		}
		if (bad) {
			if (counting)
				break;
			rep->stop_offset = pos;
			rep->stop_reason = bad;
			if (strcmp(bad, "bad crc"))
				break;
			/*
			 * The header was sane: look past the damaged record
			 * to tell a torn tail from a corrupt middle.
			 */
			counting = true;
			pos += fj_align(sizeof(h) + h.len);
			seq++;
			continue;
		}
		if (h.seq > max_seq)
			max_seq = h.seq;
		if (counting) {
			if (h.type != FJ_REC_PAD)
				rep->records_after_stop++;
		} else if (h.type == FJ_REC_FILE) {
			fj_replay_open(&rp, mount_fd, h.file_id, buf, h.len);
			rep->files++;
		} else if (h.type == FJ_REC_DATA || h.type == FJ_REC_TRUNC) {
			struct fj_replay_file *rf =
				fj_replay_find(&rp, h.file_id);

			if (!rf || rf->fd < 0) {
				rep->records_skipped++;
			} else if (h.type == FJ_REC_DATA) {
				if (fj_pwrite_all(rf->fd, buf, h.len,
						  h.offset) == 0) {
					rep->records_applied++;
					rep->bytes_applied += h.len;
				} else {
					rep->records_skipped++;
				}
			} else if (ftruncate(rf->fd, h.offset) == 0) {
				rep->records_applied++;
			} else {
				rep->records_skipped++;
			}
		}
		if (!counting)
			rep->last_good_seq = h.seq;
		if (h.type == FJ_REC_PAD)
			pos = FJ_DATA_START;
		else
			pos += fj_align(sizeof(h) + h.len);
		seq++;
		if (!counting)
			rep->stop_offset = pos;
	}
	free(buf);
	for (size_t i = 0; i < rp.n; i++) {
		if (rp.v[i].fd < 0)
			continue;
		if (fsync(rp.v[i].fd) && !r)
			r = -errno;
		close(rp.v[i].fd);
	}
	free(rp.v);
	if (r)
		return r;
	/* start a fresh sequence range right after what was replayed */
	pthread_mutex_lock(&log->lock);
	log->tail = log->head = log->stage_off = rep->stop_offset;
	if (log->size - log->tail < sizeof(h))
		log->tail = log->head = log->stage_off = FJ_DATA_START;
	log->tail_seq = log->next_seq =
		((max_seq >> FJ_SEQ_RANGE_SHIFT) + 1) << FJ_SEQ_RANGE_SHIFT;
	log->written_seq = log->last_seq = log->next_seq - 1;
	pthread_mutex_unlock(&log->lock);
	pthread_mutex_lock(&log->sync_lock);
	log->synced_seq = log->next_seq - 1;
	pthread_mutex_unlock(&log->sync_lock);
	return fj_sb_write(log, log->tail, log->tail_seq);
}
