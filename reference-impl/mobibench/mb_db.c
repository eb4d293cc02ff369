/*
 * mb_db.c - mobibench's SQLite workload, in the semantics of Mobibench
 * 1.0.8 (default) and of 1.0.1 (--compat=1.0.1).
 *
 * 1.0.8: per thread k and database d a file PATH/test.db<k>_<d> with
 * page_size 4096, the journal mode and synchronous level; T tables
 * tblMyList<i>(id INTEGER PRIMARY KEY, Value, creation_date); databases
 * d >= 1 are ATTACHed to connection 0, and every timed transaction is one
 * "BEGIN; ... COMMIT;" exec touching every table of every database.
 * 1.0.1: one file PATH/test.db<k>, one AUTOINCREMENT table, and every timed
 * transaction is one autocommit statement.
 *
 * Ids come from glibc's rand() sequence re-seeded with srand(tx) for every
 * transaction, as in the original; each thread has its own generator state
 * (random_r), so a single-thread run draws exactly the original's ids.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mb.h"

#ifndef MB_NO_SQLITE
#include <sqlite3.h>

#define MB_DB_MAX 20
#define MB_DB_MIN_BYTES_PER_TABLE 40960
#define MB_DB_MIN_ROWS 296	/* (40960 / 4096 - 2) * 37 */

static const char *const mb_journal_sql[] = {
	"DELETE", "TRUNCATE", "PERSIST", "WAL", "MEMORY", "OFF",
};

static const char mb_insert_str[] =
	"aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee"
	"ffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj";
static const char mb_update_str[] =
	"ffffffffffgggggggggghhhhhhhhhhiiiiiiiiiijjjjjjjjjj"
	"aaaaaaaaaabbbbbbbbbbccccccccccddddddddddeeeeeeeeee";

/* glibc's rand() algorithm with per-thread state */
struct mb_rand {
#ifdef __GLIBC__
	struct random_data rd;
	char state[128];
#else
	unsigned int seed;
#endif
};

static void mb_srand(struct mb_rand *r, unsigned int seed)
{
#ifdef __GLIBC__
	memset(&r->rd, 0, sizeof(r->rd));
	initstate_r(seed, r->state, sizeof(r->state), &r->rd);
	srandom_r(seed, &r->rd);
#else
	r->seed = seed;
#endif
}

static int mb_rand(struct mb_rand *r)
{
#ifdef __GLIBC__
	int32_t v;

	random_r(&r->rd, &v);
	return v;
#else
	return rand_r(&r->seed);
#endif
}

/* a growable string for SQL text */
struct mb_sql {
	char *s;
	size_t len, cap;
};

static int mb_sql_add(struct mb_sql *q, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int mb_sql_add(struct mb_sql *q, const char *fmt, ...)
{
	va_list ap;
	size_t need;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	need = q->len + (size_t)n + 1;
	if (need > q->cap) {
		size_t cap = q->cap ? q->cap : 4096;

		while (cap < need)
			cap *= 2;
		p = realloc(q->s, cap);
		if (!p)
			return -1;
		q->s = p;
		q->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(q->s + q->len, q->cap - q->len, fmt, ap);
	va_end(ap);
	q->len += (size_t)n;
	return 0;
}

struct mb_db {
	struct mb_worker *w;
	const struct mb_config *c;
	int ndb;
	sqlite3 *conn[MB_DB_MAX];
	char *file[MB_DB_MAX];
	long long universe[MB_DB_MAX];	/* ids 0 .. universe-1 exist */
	unsigned char *used[MB_DB_MAX];	/* ids drawn (-R, delete) */
	struct mb_rand rnd;
	struct mb_sql sql;
};

static int mb_db_exec(struct mb_db *db, sqlite3 *conn, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(conn, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	mb_fail(db->w->run, "SQL error", "SQL error (%s) in: %.200s",
		msg ? msg : sqlite3_errmsg(conn), sql);
	sqlite3_free(msg);
	return -1;
}

static int mb_db_execf(struct mb_db *db, sqlite3 *conn, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int mb_db_execf(struct mb_db *db, sqlite3 *conn, const char *fmt, ...)
{
	va_list ap;
	char *sql;
	int ret;

	va_start(ap, fmt);
	sql = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	if (!sql) {
		mb_fail(db->w->run, "Memory alloc failed", "out of memory");
		return -1;
	}
	ret = mb_db_exec(db, conn, sql);
	sqlite3_free(sql);
	return ret;
}

static long long mb_db_query_int(sqlite3 *conn, const char *sql)
{
	sqlite3_stmt *st;
	long long v = -1;

	if (sqlite3_prepare_v2(conn, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static void mb_db_print_info(struct mb_db *db, int d)
{
	sqlite3_stmt *st;
	const char *jm = "?";

	printf("%s\n", MB_DASHES);
	if (db->c->old)
		printf("[DB information]\n");
	else
		printf("[DB information of db %s]\n", db->file[d]);
	printf("%s\n", MB_DASHES);
	printf("sqlite_version=%s\n", sqlite3_libversion());
	printf("page_size=%lld\n",
	       mb_db_query_int(db->conn[d], "PRAGMA page_size;"));
	if (sqlite3_prepare_v2(db->conn[d], "PRAGMA journal_mode;", -1, &st,
			       NULL) == SQLITE_OK) {
		if (sqlite3_step(st) == SQLITE_ROW &&
		    sqlite3_column_text(st, 0))
			jm = (const char *)sqlite3_column_text(st, 0);
		printf("journal_mode=%s\n", jm);
		sqlite3_finalize(st);
	}
	printf("synchronous=%lld\n",
	       mb_db_query_int(db->conn[d], "PRAGMA synchronous;"));
}

static int mb_db_open(struct mb_db *db, int d)
{
	const struct mb_config *c = db->c;

	if (sqlite3_open(db->file[d], &db->conn[d]) != SQLITE_OK) {
		printf("%s Open failed\n", db->file[d]);
		mb_fail(db->w->run, "DB open failed", "cannot open %s: %s",
			db->file[d], db->conn[d] ? sqlite3_errmsg(db->conn[d]) :
			"out of memory");
		return -1;
	}
	if (mb_db_exec(db, db->conn[d], "PRAGMA page_size = 4096;") ||
	    mb_db_execf(db, db->conn[d], "PRAGMA journal_mode=%s;",
			mb_journal_sql[c->journal]) ||
	    mb_db_execf(db, db->conn[d], "PRAGMA synchronous=%d;",
			c->synchronous))
		return -1;
	return 0;
}

/* 1.0.8: make sure tables hold enough rows for update/delete (untimed) */
static int mb_db_prepopulate(struct mb_db *db, int d)
{
	const struct mb_config *c = db->c;
	sqlite3 *conn = db->conn[d];
	long long rows0 = 0, cnt, m = 0, id, need = c->trs_thread;
	long long min_bytes = (long long)MB_DB_MIN_BYTES_PER_TABLE * c->tables;
	struct stat st;
	char sql[96];
	int i, last = -1;

	for (i = 0; i < c->tables; i++) {
		snprintf(sql, sizeof(sql), "SELECT count(*) from tblMyList%d;",
			 i);
		cnt = mb_db_query_int(conn, sql);
		if (cnt < 0) {
			mb_fail(db->w->run, "SQL error", "%s failed on %s: %s",
				sql, db->file[d], sqlite3_errmsg(conn));
			return -1;
		}
		if (i == 0) {
			rows0 = cnt;
			continue;
		}
		if (cnt < rows0) {
			printf("Filling in the missing record in Table...\n");
			for (id = cnt; id < rows0; id++)
				if (mb_db_execf(db, conn,
						"INSERT INTO TblMyList%d(id,Value)"
						" VALUES(%lld,'%s');", i, id,
						mb_insert_str))
					return -1;
		}
	}
	printf("%lld\n", min_bytes);
	if (stat(db->file[d], &st))
		st.st_size = 0;
	if (rows0 < need || st.st_size < min_bytes) {
		printf("%lld\n", min_bytes);
		m = need < MB_DB_MIN_ROWS ? MB_DB_MIN_ROWS - rows0 :
		    need - rows0;
		if (m < 0)
			m = 0;
		printf("init_db_for_update\ntrs : %lld\n", m);
		for (id = rows0; id < rows0 + m; id++) {
			db->sql.len = 0;
			if (mb_sql_add(&db->sql, "BEGIN;"))
				goto oom;
			for (i = 0; i < c->tables; i++)
				if (mb_sql_add(&db->sql,
					       "INSERT INTO tblMyList%d(id,Value)"
					       " VALUES(%lld,'%s');", i, id,
					       mb_insert_str))
					goto oom;
			if (mb_sql_add(&db->sql, "COMMIT;"))
				goto oom;
			if (mb_db_exec(db, conn, db->sql.s))
				return -1;
			mb_progress(db->w, id - rows0, m, &last);
		}
		printf("\ninit end\n");
	}
	db->universe[d] = rows0 + m;
	return 0;
oom:
	mb_fail(db->w->run, "Memory alloc failed", "out of memory");
	return -1;
}

static int mb_db_setup_new(struct mb_db *db)
{
	const struct mb_config *c = db->c;
	int d, i, first;

	for (d = 0; d < db->ndb; d++) {
		db->file[d] = mb_strdupf("%s/test.db%d_%d", c->path, db->w->id,
					 d);
		if (mb_db_open(db, d))
			return -1;
		if (c->db_op == 0)
			for (i = 0; i < c->tables; i++)
				if (mb_db_execf(db, db->conn[d],
						"DROP TABLE IF EXISTS "
						"tblMyList%d;", i))
					return -1;
		db->sql.len = 0;
		if (mb_sql_add(&db->sql, "BEGIN;"))
			goto oom;
		for (i = 0; i < c->tables; i++)
			if (mb_sql_add(&db->sql, " CREATE TABLE IF NOT EXISTS "
				       "tblMyList%d (id INTEGER PRIMARY KEY, "
				       "Value TEXT not null, creation_date "
				       "long);", i))
				goto oom;
		if (mb_sql_add(&db->sql, "COMMIT;"))
			goto oom;
		if (mb_db_exec(db, db->conn[d], db->sql.s))
			return -1;
		if (c->db_op != 0 && mb_db_prepopulate(db, d))
			return -1;
		if (c->db_op == 0 || c->random_ids) {
			db->used[d] = calloc((size_t)(c->trs_thread > 0 ?
						      c->trs_thread : 1), 1);
			if (!db->used[d])
				goto oom;
		}
		if (c->db_op == 2) {
			db->used[d] = calloc((size_t)(db->universe[d] > 0 ?
						      db->universe[d] : 1), 1);
			if (!db->used[d])
				goto oom;
		}
	}

	pthread_mutex_lock(&db->w->run->lock);
	first = !db->w->run->db_info_printed;
	db->w->run->db_info_printed = 1;
	pthread_mutex_unlock(&db->w->run->lock);
	if (first)
		for (d = 0; d < db->ndb; d++)
			mb_db_print_info(db, d);

	for (d = 1; d < db->ndb; d++) {
		/* %q doubles quotes in the path (no printf attribute) */
		char *att = sqlite3_mprintf("ATTACH DATABASE '%q' AS 'db%d';",
					    db->file[d], d);
		int bad = !att || mb_db_exec(db, db->conn[0], att);

		sqlite3_free(att);
		if (bad ||
		    mb_db_execf(db, db->conn[0], "PRAGMA db%d.journal_mode=%s;",
				d, mb_journal_sql[c->journal]))
			return -1;
	}
	return 0;
oom:
	mb_fail(db->w->run, "Memory alloc failed", "out of memory");
	return -1;
}

static int mb_db_setup_old(struct mb_db *db)
{
	const struct mb_config *c = db->c;
	long long cnt, k;
	int first, last = -1;

	db->file[0] = mb_strdupf("%s/test.db%d", c->path, db->w->id);
	if (mb_db_open(db, 0))
		return -1;
	pthread_mutex_lock(&db->w->run->lock);
	first = !db->w->run->db_info_printed;
	db->w->run->db_info_printed = 1;
	pthread_mutex_unlock(&db->w->run->lock);
	if (first)
		mb_db_print_info(db, 0);
	if (c->db_op == 0 &&
	    mb_db_exec(db, db->conn[0], "DROP TABLE IF EXISTS tblMyList;"))
		return -1;
	if (mb_db_exec(db, db->conn[0], "CREATE TABLE IF NOT EXISTS tblMyList "
		       "(id INTEGER PRIMARY KEY autoincrement, Value TEXT not "
		       "null, creation_date long);"))
		return -1;
	if (c->db_op == 0)
		return 0;
	cnt = mb_db_query_int(db->conn[0], "SELECT count(*) from tblMyList;");
	if (cnt < 0) {
		mb_fail(db->w->run, "SQL error", "count(*) failed on %s: %s",
			db->file[0], sqlite3_errmsg(db->conn[0]));
		return -1;
	}
	if (cnt < c->trs_thread) {
		printf("init_db_for_update\ntrs : %lld\n", c->trs_thread - cnt);
		for (k = cnt; k < c->trs_thread; k++) {
			if (mb_db_execf(db, db->conn[0], "INSERT INTO tblMyList"
					"(Value) VALUES('%s');", mb_insert_str))
				return -1;
			mb_progress(db->w, k - cnt, c->trs_thread - cnt, &last);
		}
		printf("\ninit end\n");
	}
	return 0;
}

/* one 1.0.8 transaction: BEGIN; statements for every database; COMMIT; */
static int mb_db_build_tx(struct mb_db *db, long long tx)
{
	const struct mb_config *c = db->c;
	long long id = tx, u;
	char pre[16];
	int d, i;

	db->sql.len = 0;
	if (mb_sql_add(&db->sql, "BEGIN;"))
		return -1;
	mb_srand(&db->rnd, (unsigned int)tx);
	for (d = 0; d < db->ndb; d++) {
		if (d)
			snprintf(pre, sizeof(pre), "db%d.", d);
		else
			pre[0] = 0;
		u = db->universe[d];
		if (c->db_op == 0 && c->random_ids) {
			do
				id = mb_rand(&db->rnd) % c->trs_thread;
			while (db->used[d][id]);
			db->used[d][id] = 1;
		} else if (c->db_op == 2) {
			do
				id = mb_rand(&db->rnd) % u;
			while (db->used[d][id]);
			db->used[d][id] = 1;
		}
		for (i = 0; i < c->tables; i++) {
			int ret;

			if (c->db_op == 0)
				ret = mb_sql_add(&db->sql, "INSERT INTO "
						 "%stblMyList%d(id,Value) "
						 "VALUES(%lld,'%s');", pre, i,
						 id, mb_insert_str);
			else if (c->db_op == 1)
				ret = mb_sql_add(&db->sql, "UPDATE %stblMyList%d"
						 " SET Value = '%s' WHERE id "
						 "= %lld;", pre, i,
						 mb_update_str,
						 u ? mb_rand(&db->rnd) % u + 1 :
						 1);
			else
				ret = mb_sql_add(&db->sql, "DELETE FROM "
						 "%stblMyList%d WHERE id=%lld;",
						 pre, i, id);
			if (ret)
				return -1;
		}
	}
	return mb_sql_add(&db->sql, "COMMIT;");
}

static int mb_db_build_tx_old(struct mb_db *db, long long tx)
{
	const struct mb_config *c = db->c;

	db->sql.len = 0;
	if (c->db_op == 0)
		return mb_sql_add(&db->sql, "INSERT INTO tblMyList(Value) "
				  "VALUES('%s');", mb_insert_str);
	if (c->db_op == 1) {
		mb_srand(&db->rnd, (unsigned int)tx);
		return mb_sql_add(&db->sql, "UPDATE tblMyList SET Value = '%s' "
				  "WHERE id = %lld;", mb_update_str,
				  mb_rand(&db->rnd) % c->trs_thread + 1);
	}
	return mb_sql_add(&db->sql, "DELETE FROM tblMyList WHERE id=%lld;", tx);
}

void *mb_db_worker(void *arg)
{
	struct mb_worker *w = arg;
	const struct mb_config *c = w->run->cfg;
	struct mb_db *db;
	long long tx, n = c->trs_thread;
	int d, i, last = -1, ok = 0;
	uint64_t t0;

	w->tid = (pid_t)syscall(SYS_gettid);
	db = calloc(1, sizeof(*db));
	w->lat_ns = malloc(sizeof(uint64_t) * (size_t)n);
	if (!db || !w->lat_ns) {
		mb_fail(w->run, "Memory alloc failed", "out of memory");
		mb_ready_and_wait(w->run);
		free(db);
		return NULL;
	}
	db->w = w;
	db->c = c;
	db->ndb = c->old ? 1 : c->dbs;

	if (c->old ? mb_db_setup_old(db) : mb_db_setup_new(db)) {
		mb_ready_and_wait(w->run);
		goto out;
	}
	if (mb_ready_and_wait(w->run))
		goto out;

	/* ---- timed window ---- */
	mb_sched_sample(w, 0);
	for (tx = 0; tx < n; tx++) {
		if (c->old ? mb_db_build_tx_old(db, tx) :
		    mb_db_build_tx(db, tx)) {
			mb_fail(w->run, "Memory alloc failed", "out of memory");
			break;
		}
		t0 = mb_now_ns();
		if (mb_db_exec(db, db->conn[0], db->sql.s))
			break;
		w->lat_ns[tx] = mb_now_ns() - t0;
		w->n_lat++;
		if (c->interval_ms) {
			if (c->old)
				sleep((unsigned int)c->interval_ms);
			else
				usleep((useconds_t)c->interval_ms * 1000);
		}
		mb_progress(w, tx, n, &last);
	}
	if (c->journal == 3)
		for (d = 0; d < db->ndb; d++)
			sqlite3_wal_checkpoint(db->conn[d], NULL);
	ok = tx == n;
	mb_sched_sample(w, 1);
	last = -1;
	mb_progress(w, 100, 100, &last);
	mb_signal_end(w->run);
	/* ---- end of timed window ---- */

	if (ok && c->db_op == 2) {
		if (c->old)
			mb_db_exec(db, db->conn[0], "DROP TABLE tblMyList;");
		else
			for (d = 0; d < db->ndb; d++)
				for (i = 0; i < c->tables; i++)
					mb_db_execf(db, db->conn[d],
						    "DROP TABLE IF EXISTS "
						    "tblMyList%d;", i);
	}
out:
	for (d = 0; d < db->ndb; d++) {
		if (db->conn[d])
			sqlite3_close(db->conn[d]);
		if (ok && c->db_op == 2 && db->file[d])
			unlink(db->file[d]);
		free(db->file[d]);
		free(db->used[d]);
	}
	free(db->sql.s);
	free(db);
	return NULL;
}

#else /* MB_NO_SQLITE */

void *mb_db_worker(void *arg)
{
	struct mb_worker *w = arg;

	mb_fail(w->run, "No SQLite", "this build has no SQLite");
	mb_ready_and_wait(w->run);
	return NULL;
}

#endif
