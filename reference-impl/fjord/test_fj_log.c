/*
 * Unit tests of fj_log: creation and refusal of bad logs, replay after a
 * simulated crash, a torn tail and a corrupt middle record (replay stops at
 * the last good record and says so), TRUNC records, checkpoints retiring
 * records, wrap-around, and records of deleted files. fj_log.c is included
 * so the tests can walk the on-disk records themselves.
 */
#include "fj_log.c"
#include "test_fj.h"

static char dir[] = "/tmp/test_fj_log.XXXXXX";
static int dir_fd;

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static struct fj_log *open_log(const char *name, uint64_t size)
{
	char p[256], err[512] = "";
	struct fj_log *log;

	path_of(p, sizeof(p), name);
	if (fj_log_open(&log, p, size, true, err, sizeof(err))) {
		fprintf(stderr, "open_log: %s\n", err);
		exit(1);
	}
	return log;
}

static struct fj_file *target(const char *name)
{
	char p[256];
	int fd;

	path_of(p, sizeof(p), name);
	fd = open(p, O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0);
	return fj_file_new(fd, name, true);
}

static void block(unsigned char *b, int k)
{
	memset(b, 'A' + k % 26, 4096);
	b[0] = (unsigned char)k;
}

/* Logs n 4 KiB blocks at offsets (first + k) * 4096, like fjord: native + log. */
static void log_blocks(struct fj_log *log, struct fj_file *f, int first, int n)
{
	unsigned char b[4096];

	for (int k = first; k < first + n; k++) {
		block(b, k);
		CHECK_EQ(pwrite(f->fd, b, 4096, (off_t)k * 4096), 4096);
		pthread_mutex_lock(&f->lock);
		CHECK_EQ(fj_log_append_data(log, f, (uint64_t)k * 4096, b, 4096), 0);
		pthread_mutex_unlock(&f->lock);
	}
	CHECK_EQ(fj_log_sync(log, f->log_seq), 0);
}

static int block_ok(int fd, int k)
{
	unsigned char b[4096], want[4096];

	block(want, k);
	return pread(fd, b, 4096, (off_t)k * 4096) == 4096 &&
	       !memcmp(b, want, 4096);
}

/* Offsets of the DATA records from the data start, in log order. */
static int data_records(const char *name, uint64_t *pos, int max)
{
	char p[256];
	struct fj_log_rec h;
	uint64_t at = FJ_DATA_START;
	int n = 0, fd;

	path_of(p, sizeof(p), name);
	fd = open(p, O_RDONLY);
	CHECK(fd >= 0);
	while (n < max && pread(fd, &h, sizeof(h), at) == sizeof(h) &&
	       h.magic == FJ_REC_MAGIC) {
		if (h.type == FJ_REC_DATA)
			pos[n++] = at;
		at += fj_align(sizeof(h) + h.len);
	}
	close(fd);
	return n;
}

static void flip_byte(const char *name, uint64_t at)
{
	char p[256];
	unsigned char c;
	int fd;

	path_of(p, sizeof(p), name);
	fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &c, 1, at), 1);
	c ^= 0x5a;
	CHECK_EQ(pwrite(fd, &c, 1, at), 1);
	close(fd);
}

static void replay(const char *name, struct fj_log_replay_report *rep)
{
	struct fj_log *log = open_log(name, 2 << 20);

	CHECK_EQ(fj_log_replay(log, dir_fd, rep), 0);
	fj_log_close(log, false);
}

static void test_open_errors(void)
{
	char p[256], err[512];
	struct fj_log *log;
	int fd;

	path_of(p, sizeof(p), "small.log");
	CHECK_EQ(fj_log_open(&log, p, 4096, true, err, sizeof(err)), -EINVAL);
	CHECK(strstr(err, "too small") != NULL);
	CHECK(access(p, F_OK) != 0);		/* nothing created */

	path_of(p, sizeof(p), "notalog");
	fd = open(p, O_RDWR | O_CREAT, 0644);
	CHECK_EQ(write(fd, "precious data", 13), 13);
	close(fd);
	CHECK(fj_log_open(&log, p, 2 << 20, true, err, sizeof(err)) < 0);
	CHECK(strstr(err, "not a Fjord log") != NULL);

	path_of(p, sizeof(p), "nodir/x.log");
	CHECK(fj_log_open(&log, p, 2 << 20, true, err, sizeof(err)) < 0);
	CHECK(strstr(err, "cannot open log") != NULL);

	/* an existing log keeps its size */
	log = open_log("size.log", 3 << 20);
	fj_log_close(log, false);
	log = open_log("size.log", 8 << 20);
	CHECK_EQ(log->size, 3 << 20);
	fj_log_close(log, false);
}

static void test_replay_after_crash(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("crash.log", 2 << 20);
	struct fj_file *f = target("crash.dat");
	struct fj_log_stats st;

	log_blocks(log, f, 0, 10);
	fj_log_get_stats(log, &st);
	CHECK_EQ(st.data_records, 10);
	CHECK_EQ(st.records, 11);		/* + one FILE record */
	CHECK_EQ(st.syncs, 1);
	fj_log_close(log, true);		/* crash: no checkpoint */
	CHECK_EQ(ftruncate(f->fd, 0), 0);	/* the page cache was lost */

	replay("crash.log", &rep);
	CHECK_EQ(rep.records_applied, 10);
	CHECK_EQ(rep.bytes_applied, 40960);
	CHECK_EQ(rep.files, 1);
	CHECK_EQ(rep.records_after_stop, 0);
	CHECK(!strcmp(rep.stop_reason, "end"));
	for (int k = 0; k < 10; k++)
		CHECK(block_ok(f->fd, k));
	/* replayed records are retired: a second mount applies nothing */
	replay("crash.log", &rep);
	CHECK_EQ(rep.records_applied, 0);
	CHECK(rep.first_seq >> 32 >= 2);	/* a fresh sequence range */
	fj_file_put(f);
}

static void test_torn_tail(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("torn.log", 2 << 20);
	struct fj_file *f = target("torn.dat");
	uint64_t pos[32];

	log_blocks(log, f, 0, 10);
	fj_log_close(log, true);
	CHECK_EQ(data_records("torn.log", pos, 32), 10);
	/* the last record's payload only half made it */
	flip_byte("torn.log", pos[9] + sizeof(struct fj_log_rec) + 3000);
	CHECK_EQ(ftruncate(f->fd, 0), 0);

	replay("torn.log", &rep);
	CHECK_EQ(rep.records_applied, 9);
	CHECK(!strcmp(rep.stop_reason, "bad crc"));
	CHECK_EQ(rep.stop_offset, pos[9]);
	CHECK_EQ(rep.records_after_stop, 0);
	for (int k = 0; k < 9; k++)
		CHECK(block_ok(f->fd, k));
	CHECK(!block_ok(f->fd, 9));		/* never a torn record */
	struct stat st;
	CHECK_EQ(fstat(f->fd, &st), 0);
	CHECK_EQ(st.st_size, 9 * 4096);
	fj_file_put(f);
}

static void test_corrupt_middle(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("mid.log", 2 << 20);
	struct fj_file *f = target("mid.dat");
	uint64_t pos[32];

	log_blocks(log, f, 0, 10);
	fj_log_close(log, true);
	CHECK_EQ(data_records("mid.log", pos, 32), 10);
	flip_byte("mid.log", pos[2] + sizeof(struct fj_log_rec) + 1);
	CHECK_EQ(ftruncate(f->fd, 0), 0);

	replay("mid.log", &rep);
	CHECK_EQ(rep.records_applied, 2);
	CHECK(!strcmp(rep.stop_reason, "bad crc"));
	CHECK_EQ(rep.records_after_stop, 7);	/* seen, not applied */
	CHECK(block_ok(f->fd, 0));
	CHECK(block_ok(f->fd, 1));
	CHECK(!block_ok(f->fd, 3));
	/* a corrupt header stops the same way */
	fj_file_put(f);
}

static void test_trunc_record(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("trunc.log", 2 << 20);
	struct fj_file *f = target("trunc.dat");
	struct stat st;

	log_blocks(log, f, 0, 3);
	pthread_mutex_lock(&f->lock);
	CHECK_EQ(fj_log_append_trunc(log, f, 5000), 0);
	pthread_mutex_unlock(&f->lock);
	CHECK_EQ(fj_log_sync(log, f->log_seq), 0);
	fj_log_close(log, true);
	CHECK_EQ(ftruncate(f->fd, 0), 0);
	replay("trunc.log", &rep);
	CHECK_EQ(rep.records_applied, 4);
	CHECK_EQ(fstat(f->fd, &st), 0);
	CHECK_EQ(st.st_size, 5000);
	CHECK(block_ok(f->fd, 0));
	fj_file_put(f);
}

static void test_checkpoint_and_wrap(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("wrap.log", 1 << 20);
	struct fj_file *f = target("wrap.dat");
	struct fj_log_stats st;

	/* ~830 KB of a ~1 MB data area, then retire it */
	log_blocks(log, f, 0, 200);
	CHECK(fj_log_is_live(log, f));
	CHECK_EQ(fj_log_checkpoint(log), 0);
	CHECK(!fj_log_is_live(log, f));
	fj_log_get_stats(log, &st);
	CHECK_EQ(st.checkpointed, 200);
	CHECK_EQ(st.used, 0);
	/* 100 more: they wrap around the end of the log */
	log_blocks(log, f, 1000, 100);
	fj_log_get_stats(log, &st);
	CHECK(log->head < log->tail);		/* wrapped */
	fj_log_close(log, true);
	CHECK_EQ(ftruncate(f->fd, 1000 * 4096), 0);
	replay("wrap.log", &rep);
	CHECK_EQ(rep.records_applied, 100);
	CHECK_EQ(rep.files, 1);		/* FILE re-emitted after the checkpoint */
	for (int k = 1000; k < 1100; k++)
		CHECK(block_ok(f->fd, k));

	/* filling the log forces checkpoints instead of failing */
	log = open_log("wrap.log", 1 << 20);
	log_blocks(log, f, 0, 1000);
	fj_log_get_stats(log, &st);
	CHECK(st.checkpoints >= 3);
	CHECK_EQ(st.error, 0);
	fj_log_close(log, false);
	for (int k = 0; k < 1000; k++)
		CHECK(block_ok(f->fd, k));
	fj_file_put(f);
}

static void test_file_gone(void)
{
	struct fj_log_replay_report rep;
	struct fj_log *log = open_log("gone.log", 2 << 20);
	struct fj_file *f = target("gone.dat");
	char p[256];

	log_blocks(log, f, 0, 4);
	fj_log_close(log, true);
	path_of(p, sizeof(p), "gone.dat");
	CHECK_EQ(unlink(p), 0);
	fj_file_put(f);
	replay("gone.log", &rep);
	CHECK_EQ(rep.records_applied, 0);
	CHECK_EQ(rep.records_skipped, 4);
	CHECK(access(p, F_OK) != 0);		/* not resurrected */
}

int main(void)
{
	char cmd[300];

	CHECK(mkdtemp(dir) != NULL);
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY);
	CHECK(dir_fd >= 0);
	test_open_errors();
	test_replay_after_crash();
	test_torn_tail();
	test_corrupt_middle();
	test_trunc_record();
	test_checkpoint_and_wrap();
	test_file_gone();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	TEST_DONE("test_fj_log");
	return 0;
}
