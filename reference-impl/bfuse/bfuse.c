// SPDX-License-Identifier: MIT
/*
 * bFUSE: the buffered FUSE daemon of Jeong & Won, "Buffered FUSE: optimising
 * the Android IO stack for user-level filesystem" (IJES 2014), as a fusecore
 * policy.  Three ingredients, each an option:
 *
 *   1. the FUSE IO unit (max_write): 4 KiB on the legacy Android sdcard
 *      daemon, 512 KiB in bFUSE (io_unit=);
 *   2. a user-level write buffer: an array of fixed-size entries (8 MiB of
 *      2 MiB entries); a write that continues the newest entry of the same
 *      file joins it (coalesced), otherwise it takes a new entry
 *      (buffer=, entry=);
 *   3. a management thread that writes entries out, one pwritev per entry:
 *      at once when an entry is full, and every flush_ms for entries idle
 *      for flush_ms (or older than 100 x flush_ms) (flush_ms=).
 *
 * An entry's bytes live in segments: buffers of fusecore's receive-buffer
 * pool.  A large write (at least half a receive buffer) becomes a segment of
 * its own: with fusecore's own receive loop (own_loop=1, the bfuse preset)
 * the buffer the kernel wrote the request into is adopted; with splice it
 * is read from the pipe straight into a pool buffer;
 * either way each byte is copied once into the daemon and once out (kernel
 * -> daemon memory -> native file).  With libfuse's loop and no splice it
 * is copied once more.  Small writes are packed by memcpy into
 * the spare room of the entry's last segment.  Buffers go back to the pool
 * after the flush: nothing is allocated per entry once warm.
 *
 * POSIX semantics with the buffer on: a read is served from the native file
 * with the buffered bytes of the file laid over it (no flush); stat sizes
 * include buffered data; truncate and utimes flush first; close
 * (FUSE_FLUSH) and release of a writable descriptor, fsync and fdatasync
 * flush the file's entries before returning; a failed deferred pwrite
 * (ENOSPC, EIO) is kept on the inode and returned by the next fsync or
 * close of a writable descriptor of the file, and later
 * writes of that file go straight to the native file; unmount flushes all.
 * Entries hold a reference to the open file whose fd they write with, so
 * rename and unlink need no flush.
 *
 * The buffer itself is a unit of its own, tested without a mount
 * (test_bf_buf.c): its rules and the way bytes come in are bf_buf.c, the
 * way out bf_flush.c, its data with the ordering and lock rules
 * bf_internal.h.  This file is the daemon around it: options and presets,
 * a FUSE request's bytes (adopted, read from the pipe, or copied into a
 * pool buffer), the counters, the policy table.
 *
 * Configuration (bf_buffer_size ... bf_flush_ms) is written by option
 * parsing, single threaded, before the mount; bf_buffer is made in
 * bf_start, before the first request.  Both are constant while serving.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bf_buf.h"
#include "fusecore.h"

/* the writer (buffer full) and the management thread scan every entry */
#define BF_MAX_ENTRIES 4096

/* Configuration: set by options, constant once serving. */
static uint64_t bf_buffer_size = 8 << 20;
static uint64_t bf_entry_size = 2 << 20;
#define BF_PHASE_AUTO UINT64_MAX	/* 1M for 2M entries, else 0 */
static uint64_t bf_entry_phase = BF_PHASE_AUTO;	/* 0: cut where they fill */
static uint64_t bf_flush_ms = 10;
static unsigned int bf_nentries;

static struct bf_buf *bf_buffer;	/* NULL: buffer off */

static struct bf_counters bf_ctr;
static struct fc_counter *bf_c_adopted, *bf_c_copied;
static char bf_flush_names[FC_CAUSE_COUNT][48];

/* ---- options ---------------------------------------------------------- */

static int bf_preset(const char *name, struct fc_config *cfg)
{
	cfg->splice = false;
	cfg->writeback_cache = false;
	cfg->own_loop = false;
	cfg->passthrough = false;
	if (!strcmp(name, "legacy")) {
		/* old Android sdcard: 4 KiB, one thread, pwrite per request */
		cfg->io_unit = 4096;
		cfg->threads = 1;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "bfuse")) {
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		bf_buffer_size = 8 << 20;
		bf_entry_size = 2 << 20;
		bf_flush_ms = 10;
		/* no native write covers a 2 MiB-aligned range: see README */
		bf_entry_phase = BF_PHASE_AUTO;
		/*
		 * One kernel->user copy per byte: the request is spliced
		 * into a pipe and the pipe read straight into the entry's
		 * pool buffer (seed 003).  fusecore's own loop (adopted
		 * receive buffers) is the same copy count and takes over
		 * with splice=0; it measured equal in a fast VM state and
		 * 2-4x more daemon CPU per GiB in a slow one (README).
		 */
		cfg->splice = true;
		cfg->own_loop = true;
	} else if (!strcmp(name, "nobuf")) {
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "passthrough")) {
		/*
		 * Today's /sdcard (Android 12+): kernel FUSE passthrough, no
		 * data through the daemon, so no buffer either: the baseline
		 * bFUSE's buffering is compared with.  fusecore's own loop.
		 */
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		cfg->passthrough = true;
		cfg->own_loop = true;
		bf_buffer_size = 0;
	} else if (!strcmp(name, "zerocopy")) {
		/* seed 003: big writes and splice, no buffer */
		cfg->io_unit = 512 << 10;
		cfg->threads = 4;
		cfg->splice = true;
		bf_buffer_size = 0;
	} else {
		return -EINVAL;
	}
	return 0;
}

static struct fc_policy bf_policy;

static int bf_bad(const struct fc_config *cfg, const char *key,
		  const char *val, const char *why)
{
	fprintf(stderr, "%s: invalid option %s=%s: %s\n", cfg->progname, key,
		val ? val : "", why);
	return -EINVAL;
}

static int bf_parse_opt(const char *key, const char *val,
			struct fc_config *cfg)
{
	uint64_t v;

	if (!strcmp(key, "buffer")) {
		if (fc_parse_size(val, &v))
			return bf_bad(cfg, key, val, "not a size (0, 8M)");
		if (v > (1ULL << 30))
			return bf_bad(cfg, key, val, "at most 1G");
		bf_buffer_size = v;
		return 1;
	}
	if (!strcmp(key, "entry")) {
		if (fc_parse_size(val, &v))
			return bf_bad(cfg, key, val, "not a size (2M)");
		if (v < 4096 || v > (64 << 20) || v % 4096)
			return bf_bad(cfg, key, val, "must be a multiple of "
				      "4k between 4k and 64M");
		bf_entry_size = v;
		return 1;
	}
	if (!strcmp(key, "entry_phase")) {
		if (fc_parse_size(val, &v) || v % 4096)
			return bf_bad(cfg, key, val, "not a size, a multiple "
				      "of 4k (0, 1M)");
		bf_entry_phase = v;
		return 1;
	}
	if (!strcmp(key, "flush_ms")) {
		if (fc_parse_duration_ms(val, &v))
			return bf_bad(cfg, key, val, "not a duration (10ms)");
		if (v < 1 || v > 60000)
			return bf_bad(cfg, key, val, "must be 1ms..60s");
		bf_flush_ms = v;
		return 1;
	}
	return 0;
}

static int bf_validate(struct fc_config *cfg)
{
	/*
	 * Only 2 MiB entries need a phase: smaller ones never cover a whole
	 * 2 MiB-aligned range, larger ones always do.
	 */
	if (bf_entry_phase == BF_PHASE_AUTO)
		bf_entry_phase = bf_entry_size == (2 << 20) ? 1 << 20 : 0;
	if (!bf_buffer_size) {
		bf_nentries = 0;
		return 0;
	}
	if (bf_buffer_size < bf_entry_size || bf_buffer_size % bf_entry_size) {
		fprintf(stderr, "%s: invalid option buffer=%llu: must be 0 or a "
			"multiple of entry=%llu\n", cfg->progname,
			(unsigned long long)bf_buffer_size,
			(unsigned long long)bf_entry_size);
		return -EINVAL;
	}
	if (cfg->io_unit && bf_entry_size < cfg->io_unit) {
		fprintf(stderr, "%s: invalid option entry=%llu: smaller than "
			"io_unit=%u, no write would fit an entry\n",
			cfg->progname, (unsigned long long)bf_entry_size,
			cfg->io_unit);
		return -EINVAL;
	}
	if (bf_entry_phase >= bf_entry_size) {
		fprintf(stderr, "%s: invalid option entry_phase=%llu: must be "
			"smaller than entry=%llu\n", cfg->progname,
			(unsigned long long)bf_entry_phase,
			(unsigned long long)bf_entry_size);
		return -EINVAL;
	}
	if (bf_buffer_size / bf_entry_size > BF_MAX_ENTRIES) {
		fprintf(stderr, "%s: invalid option buffer: more than %d "
			"entries\n", cfg->progname, BF_MAX_ENTRIES);
		return -EINVAL;
	}
	bf_nentries = bf_buffer_size / bf_entry_size;
	return 0;
}

static int bf_validate_hook(struct fc_config *cfg)
{
	int res = bf_validate(cfg);

	/* without a buffer the core's read (splice when on) is the fastest */
	if (!res && !bf_nentries)
		bf_policy.read = NULL;
	return res;
}

/* ---- writes ----------------------------------------------------------- */

/*
 * The request's bytes, contiguous, before the buffer's lock is taken.  A large
 * write gets a buffer of its own (*own): the receive buffer itself when
 * fusecore's loop lets us adopt it, else a pool buffer filled from the
 * pipe or libfuse's buffer.  A small one is used in place (libfuse's or our
 * receive buffer, valid until the reply) or read from the pipe into *tmp.
 * Returns the bytes, or NULL with *err set.
 */
static const char *bf_request_bytes(struct fuse_bufvec *in, size_t size,
				    struct bf_seg *own, void **tmp, int *err)
{
	const struct fuse_buf *b = &in->buf[in->idx];
	size_t own_min = bf_buf_own_min(bf_buffer);
	bool in_memory = in->count - in->idx == 1 &&
			 !(b->flags & FUSE_BUF_IS_FD);
	void *buf;
	ssize_t n;

	if (in_memory && size >= own_min &&
	    (own->base = fc_rbuf_adopt(b->mem))) {
		fc_counter_add(bf_c_adopted, 1);
		own->data = (char *)b->mem + in->off;
		own->len = size;
		return own->data;
	}
	if (in_memory && size < own_min)
		return (const char *)b->mem + in->off;
	buf = fc_rbuf_alloc();
	if (!buf) {
		*err = -ENOMEM;
		return NULL;
	}
	n = fc_copy_bufvec(in, buf, size);
	if (n != (ssize_t)size) {
		fc_rbuf_free(buf);
		*err = n < 0 ? (int)n : -EIO;
		return NULL;
	}
	fc_counter_add(bf_c_copied, 1);
	if (size >= own_min)
		*own = (struct bf_seg){ buf, buf, size };
	else
		*tmp = buf;
	return buf;
}

/* A write that is not buffered, straight from the request. */
static ssize_t bf_write_direct(struct fc_file *f, struct fuse_bufvec *in,
			       off_t off)
{
	struct bf_inode *bi;
	ssize_t n;

	fc_counter_add(bf_ctr.direct, 1);
	bi = bf_buf_direct_begin(f);
	n = fc_write_bufvec(f, in, off);
	bf_buf_direct_end(bi);
	return n;
}

static ssize_t bf_write(struct fc_file *f, struct fuse_bufvec *in, off_t off)
{
	size_t size = fuse_buf_size(in);
	struct bf_seg own = { 0 };
	void *tmp = NULL;
	const char *src;
	ssize_t res;
	int err = 0;

	if (!bf_buffer || !bf_buf_takes(bf_buffer, f, size))
		return bf_write_direct(f, in, off);
	src = bf_request_bytes(in, size, &own, &tmp, &err);
	if (!src)
		return err;
	res = bf_buf_write(bf_buffer, f, src, size, off, &own);
	/* bytes rewritten inside an entry leave their own buffer unused */
	fc_rbuf_free(own.base);
	fc_rbuf_free(tmp);
	return res;
}

/* ---- life ------------------------------------------------------------- */

static int bf_start(const struct fc_config *cfg)
{
	struct bf_buf_params p = {
		.entry_size = bf_entry_size,
		.entry_phase = bf_entry_phase,
		.nentries = bf_nentries,
		.flush_ms = bf_flush_ms,
	};

	(void)cfg;
	if (!bf_nentries)
		return 0;
	bf_buffer = bf_buf_new(&p, &bf_ctr);
	if (!bf_buffer)
		return -ENOMEM;
	return bf_buf_start(bf_buffer);
}

static void bf_stop(void)
{
	if (bf_buffer)
		bf_buf_stop(bf_buffer);
}

static int bf_open(struct fc_file *f)
{
	return bf_buf_open(bf_buffer, f);
}

static void bf_counters_json(FILE *out)
{
	fprintf(out, "    \"buffer_bytes\": %llu,\n    \"entry_bytes\": %llu,\n"
		"    \"entries\": %u,\n    \"flush_ms\": %llu,\n"
		"    \"entry_phase_bytes\": %llu",
		(unsigned long long)bf_buffer_size,
		(unsigned long long)bf_entry_size, bf_nentries,
		(unsigned long long)bf_flush_ms,
		(unsigned long long)bf_entry_phase);
}

static void bf_register_counters(void)
{
	int c;

	bf_ctr.buffered = fc_counter_new("buffered_writes", FC_COUNTER_SUM);
	bf_ctr.direct = fc_counter_new("direct_writes", FC_COUNTER_SUM);
	bf_ctr.coalesced = fc_counter_new("coalesced_requests", FC_COUNTER_SUM);
	bf_ctr.entries_filled = fc_counter_new("entries_filled", FC_COUNTER_SUM);
	bf_ctr.full_waits = fc_counter_new("buffer_full_waits", FC_COUNTER_SUM);
	bf_ctr.hwm_bytes = fc_counter_new("buffer_hwm_bytes", FC_COUNTER_MAX);
	bf_ctr.hwm_entries = fc_counter_new("buffer_hwm_entries",
					    FC_COUNTER_MAX);
	bf_ctr.deferred_errors = fc_counter_new("deferred_write_errors",
						FC_COUNTER_SUM);
	bf_ctr.errors_reported = fc_counter_new("deferred_errors_reported",
						FC_COUNTER_SUM);
	bf_ctr.reads_from_buffer = fc_counter_new("reads_from_buffer",
						  FC_COUNTER_SUM);
	bf_c_adopted = fc_counter_new("adopted_writes", FC_COUNTER_SUM);
	bf_c_copied = fc_counter_new("copied_writes", FC_COUNTER_SUM);
	for (c = 0; c < FC_CAUSE_COUNT; c++) {
		snprintf(bf_flush_names[c], sizeof(bf_flush_names[c]),
			 "flushed_entries_%s", fc_cause_names[c]);
		bf_ctr.flushed[c] = fc_counter_new(bf_flush_names[c],
						   FC_COUNTER_SUM);
	}
}

static struct fc_policy bf_policy = {
	.name = "bfuse",
	.options_help =
	"    -o preset=NAME       legacy | bfuse (default) | nobuf | zerocopy |\n"
	"                         passthrough (kernel FUSE passthrough)\n"
	"    -o buffer=SIZE       write buffer total, 0 = off (8M)\n"
	"    -o entry=SIZE        buffer entry size (2M)\n"
	"    -o flush_ms=DURATION management thread period (10ms)\n"
	"    -o entry_phase=SIZE  cut entries at this offset modulo entry\n"
	"                         (1M for 2M entries; 0 = where they fill)\n",
	.preset = bf_preset,
	.parse_opt = bf_parse_opt,
	.validate = bf_validate_hook,
	.start = bf_start,
	.stop = bf_stop,
	.open = bf_open,
	.write = bf_write,
	/* the buffer's hooks do nothing for inodes it has no state for */
	.read = bf_buf_read,	/* dropped when the buffer is off */
	.flush = bf_buf_close,
	.release = bf_buf_release,
	.fsync = bf_buf_fsync,
	.sync_inode = bf_buf_sync_inode,
	.getattr = bf_buf_getattr,
	.setattr = bf_buf_setattr,
	.inode_free = bf_buf_inode_free,
	.counters_json = bf_counters_json,
};

int main(int argc, char *argv[])
{
	bf_register_counters();
	bf_preset("bfuse", &fc_cfg);	/* no preset means bfuse */
	return fc_main(argc, argv, &bf_policy);
}
