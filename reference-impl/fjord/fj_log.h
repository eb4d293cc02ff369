/*
 * fj_log: Fjord's non-volatile log.
 *
 * A circular file of append-only records written sequentially. Each record
 * has a header (magic, type, sequence number, file id, offset, payload length)
 * and a CRC32C over header and payload. Record types: FILE (introduces a file
 * id: its file handle and path), DATA (bytes at an offset), TRUNC (new size),
 * PAD (skip to the start of the data area).
 *
 * Write-ahead discipline: whoever logs a DATA record has also pwritten the
 * same bytes to the file's final location (into the page cache). A critical
 * fsync then needs only the log to be durable (one sequential write and one
 * flush). Checkpointing, in the background or when the log fills, fdatasyncs
 * the files that have live records and then advances the log's tail past
 * them, freeing the space. Replay on mount applies the records after the tail
 * in sequence order, stopping at the first record that is torn, corrupt or
 * out of sequence; it never applies a record whose CRC does not match.
 *
 * On-disk layout (host byte order; little-endian on every supported target):
 * two superblock slots of 4 KiB (the valid one with the higher generation
 * wins), then the data area. Sequence numbers start a new 2^32 range at every
 * open, so records left over from an earlier run can never pass as current.
 */
#ifndef FJ_LOG_H
#define FJ_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fj_file.h"

#define FJ_LOG_MIN_SIZE (1u << 20)

enum fj_log_rec_type {
	FJ_REC_FILE = 1,
	FJ_REC_DATA = 2,
	FJ_REC_TRUNC = 3,
	FJ_REC_PAD = 4,
};

struct fj_log;

struct fj_log_stats {
	uint64_t records;	/* records appended (all types) */
	uint64_t data_records;	/* DATA records appended */
	uint64_t bytes_written;	/* bytes pwritten to the log file */
	uint64_t syncs;		/* fdatasync calls on the log */
	uint64_t checkpoints;
	uint64_t checkpointed;	/* DATA records retired by checkpoints */
	uint64_t file_syncs;	/* fdatasync calls on files by checkpoints */
	uint64_t used;		/* bytes between tail and head now */
	uint64_t size;
	int error;		/* sticky errno of a failed log write, 0 ok */
};

/* What replay found; stop_reason is a static string. */
struct fj_log_replay_report {
	uint64_t records_applied;	/* DATA and TRUNC records applied */
	uint64_t bytes_applied;
	uint64_t records_skipped;	/* valid, but their file is gone */
	uint64_t records_after_stop;	/* valid-looking records not applied */
	uint64_t files;			/* FILE records seen */
	uint64_t first_seq, last_good_seq;
	uint64_t stop_offset;
	const char *stop_reason;	/* "end", "bad crc", "bad header", ... */
};

/*
 * Opens or creates the log at path with the given size. A new or shorter
 * file is zero-filled up to size when prealloc is set (so log writes never
 * allocate blocks), otherwise only extended (sparse). An existing log keeps
 * its recorded size. Fails with a message in err on: size below
 * FJ_LOG_MIN_SIZE, a read-only filesystem, too little space, or an existing
 * non-empty file that is not a Fjord log.
 */
int fj_log_open(struct fj_log **out, const char *path, uint64_t size,
		bool prealloc, char *err, size_t errlen);

/*
 * Applies the records after the tail to the files under the directory
 * mount_fd (same filesystem: file handles; otherwise paths), fsyncs them,
 * and moves the tail past everything replayed. Call once, before appending.
 */
int fj_log_replay(struct fj_log *log, int mount_fd,
		  struct fj_log_replay_report *rep);

/*
 * Appends a record for f (a FILE record first when f is new to the current
 * epoch). Caller holds f->lock. On success stores the record's sequence in
 * f->log_seq. May run a checkpoint to make room; -ENOSPC when even that does
 * not free enough. A failed log write is sticky: every later call returns it.
 */
int fj_log_append_data(struct fj_log *log, struct fj_file *f, uint64_t off,
		       const void *buf, size_t len);
int fj_log_append_trunc(struct fj_log *log, struct fj_file *f, uint64_t size);

/* Makes every record up to seq durable (group commit). */
int fj_log_sync(struct fj_log *log, uint64_t seq);

/* fdatasyncs the files with live records and advances the tail. */
int fj_log_checkpoint(struct fj_log *log);

/* True when f has records not yet retired by a checkpoint. */
bool fj_log_is_live(struct fj_log *log, struct fj_file *f);

/*
 * Background checkpointing: every interval_ms (0: never by time) and
 * whenever the log is more than half full.
 */
int fj_log_start(struct fj_log *log, unsigned int interval_ms);

void fj_log_get_stats(struct fj_log *log, struct fj_log_stats *st);

/* Stops the thread, checkpoints (unless abandon) and frees. */
void fj_log_close(struct fj_log *log, bool abandon);

#endif
