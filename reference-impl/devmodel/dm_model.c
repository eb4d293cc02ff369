/*
 * dm_model.c - devmodel's device timing model, profile table, option value
 * parsers and counters (see dm_model.h for the model itself).
 *
 * The profile numbers are data shared with mobiperf/stack/device_model.py, which holds
 * the same table with its sources; tests/unit/test_devmodel_profiles.py checks
 * that the two agree through `devmodel --list-profiles`.
 */
#include "dm_model.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NS_PER_US 1000ULL
#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL

const struct dm_profile dm_profiles[] = {
	{
		.name = "emmc-2012",
		.write_bw = 40000000, .read_bw = 80000000,
		.rand_write_lat_ns = 2 * NS_PER_MS,
		.rand_read_lat_ns = 500 * NS_PER_US,
		.seq_lat_ns = 50 * NS_PER_US, .flush_lat_ns = 5 * NS_PER_MS,
		.burst_bytes = 256 << 10, .seq_window = 4,
		.description = "Galaxy S3 class eMMC 4.5: 40 MB/s seq write, "
			       "80 MB/s read, 2 ms random write, 5 ms flush",
	},
	{
		.name = "ufs-2020",
		.write_bw = 500000000, .read_bw = 1000000000,
		.rand_write_lat_ns = 100 * NS_PER_US,
		.rand_read_lat_ns = 100 * NS_PER_US,
		.seq_lat_ns = 10 * NS_PER_US, .flush_lat_ns = 1 * NS_PER_MS,
		.burst_bytes = 1 << 20, .seq_window = 4,
		.description = "UFS 3.x class: 500 MB/s write, 1 GB/s read, "
			       "0.1 ms random IO, 1 ms flush",
	},
	{
		.name = "host",
		.seq_window = 4,
		.sync_backing = 1,	/* the host's own flush cost, too */
		.description = "no throttling: the host's own speed, counters "
			       "only",
	},
};

const unsigned int dm_nr_profiles = sizeof(dm_profiles) / sizeof(dm_profiles[0]);

static const char *const dm_op_names[DM_NR_OPS] = {
	[DM_OP_READ] = "read",
	[DM_OP_WRITE] = "write",
	[DM_OP_FLUSH] = "flush",
	[DM_OP_DISCARD] = "discard",
};

const struct dm_profile *dm_profile_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < dm_nr_profiles; i++)
		if (strcmp(dm_profiles[i].name, name) == 0)
			return &dm_profiles[i];
	return NULL;
}

/* Split "123.5ms" into a non-negative number and its suffix. */
static int dm_split_number(const char *s, double *num, const char **suffix)
{
	char *end;

	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	*num = strtod(s, &end);
	if (errno || end == s || *num < 0)
		return -1;
	*suffix = end;
	return 0;
}

/* Sizes: bytes, or k/M/G (powers of 1024, the project's vocabulary). */
int dm_parse_size(const char *s, uint64_t *out)
{
	static const struct { const char *sfx; uint64_t mul; } units[] = {
		{ "", 1 }, { "b", 1 }, { "B", 1 },
		{ "k", 1ULL << 10 }, { "K", 1ULL << 10 },
		{ "KiB", 1ULL << 10 },
		{ "m", 1ULL << 20 }, { "M", 1ULL << 20 },
		{ "MiB", 1ULL << 20 },
		{ "g", 1ULL << 30 }, { "G", 1ULL << 30 },
		{ "GiB", 1ULL << 30 },
	};
	const char *sfx;
	double num;
	unsigned int i;

	if (dm_split_number(s, &num, &sfx))
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(sfx, units[i].sfx) == 0) {
			double v = num * (double)units[i].mul;

			if (v > 9.0e18)
				return -1;
			*out = (uint64_t)(v + 0.5);
			return 0;
		}
	}
	return -1;
}

/* Durations need a unit (ns, us, ms, s) unless they are 0. */
int dm_parse_duration(const char *s, uint64_t *out_ns)
{
	static const struct { const char *sfx; double mul; } units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
	};
	const char *sfx;
	double num;
	unsigned int i;

	if (dm_split_number(s, &num, &sfx))
		return -1;
	if (*sfx == '\0' && num == 0) {
		*out_ns = 0;
		return 0;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(sfx, units[i].sfx) == 0) {
			double v = num * units[i].mul;

			if (v > 3.6e12 * 24)	/* a day is plenty */
				return -1;
			*out_ns = (uint64_t)(v + 0.5);
			return 0;
		}
	}
	return -1;
}

unsigned int dm_log2_bucket(uint64_t v)
{
	unsigned int b = 0;

	while (v > 1 && b < DM_HIST_BUCKETS - 1) {
		v >>= 1;
		b++;
	}
	return b;
}

void dm_model_init(struct dm_model *m, const struct dm_profile *p,
		   uint64_t now_ns)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->lock, NULL);
	m->prof = *p;
	if (m->prof.seq_window < 1)
		m->prof.seq_window = 1;
	if (m->prof.seq_window > DM_SEQ_WINDOW_MAX)
		m->prof.seq_window = DM_SEQ_WINDOW_MAX;
	m->start_ns = now_ns;
}

void dm_model_destroy(struct dm_model *m)
{
	pthread_mutex_destroy(&m->lock);
}

static uint64_t dm_transfer_ns(uint64_t len, uint64_t bw)
{
	if (!bw)
		return 0;
	/* 128-bit intermediate: len * 1e9 overflows 64 bits above 18 GB */
	return (uint64_t)(((unsigned __int128)len * NS_PER_S + bw - 1) / bw);
}

/*
 * Caller holds m->lock.  Returns the slot of the recent request whose end
 * is off (a sequential continuation), or -1 for a random request.
 */
static int dm_find_stream(struct dm_model *m, int dir, uint64_t off)
{
	unsigned int i;

	for (i = 0; i < m->recent_len[dir]; i++)
		if (m->recent_end[dir][i] == off)
			return (int)i;
	return -1;
}

/*
 * Caller holds m->lock.  A continued stream moves its own slot forward; a
 * new one takes the oldest slot, so up to seq_window interleaved streams
 * (or requests reordered by the daemon's threads) stay sequential.
 */
static void dm_remember_end(struct dm_model *m, int dir, int slot,
			    uint64_t end)
{
	unsigned int w = m->prof.seq_window;

	if (slot >= 0) {
		m->recent_end[dir][slot] = end;
		return;
	}
	m->recent_end[dir][m->recent_next[dir]] = end;
	m->recent_next[dir] = (m->recent_next[dir] + 1) % w;
	if (m->recent_len[dir] < w)
		m->recent_len[dir]++;
}

/*
 * Caller holds m->lock.  Serve a request of latency lat_ns plus transfer_ns
 * on direction dir, arriving at now_ns; returns its completion time.
 *
 * The transfer part draws on a token bucket: idle time of the direction is
 * banked up to `burst` bytes' worth and pays for transfer (never for the
 * latency), as a device's write cache would program data while the host
 * is busy elsewhere.  Over any interval the direction moves at most
 * burst + bandwidth * interval bytes.
 */
static uint64_t dm_occupy(struct dm_model *m, int dir, uint64_t now_ns,
			  uint64_t lat_ns, uint64_t transfer_ns, uint64_t bw,
			  uint64_t *occupied_ns)
{
	uint64_t cap = dm_transfer_ns(m->prof.burst_bytes, bw);
	uint64_t start = m->busy_until_ns[dir];
	uint64_t credit;

	if (now_ns > start) {
		m->banked_ns[dir] += now_ns - start;
		start = now_ns;
	}
	if (m->banked_ns[dir] > cap)
		m->banked_ns[dir] = cap;
	credit = transfer_ns < m->banked_ns[dir] ? transfer_ns :
						   m->banked_ns[dir];
	m->banked_ns[dir] -= credit;
	*occupied_ns = lat_ns + transfer_ns - credit;
	m->busy_until_ns[dir] = start + *occupied_ns;
	return m->busy_until_ns[dir];
}

struct dm_ticket dm_model_admit(struct dm_model *m, enum dm_op op,
				uint64_t off, uint64_t len, uint64_t now_ns)
{
	const struct dm_profile *p = &m->prof;
	struct dm_ticket t = { .op = op, .arrival_ns = now_ns };
	uint64_t lat, bw, occupied = 0;
	int dir, slot;

	pthread_mutex_lock(&m->lock);
	switch (op) {
	case DM_OP_READ:
	case DM_OP_WRITE:
		dir = op;
		bw = op == DM_OP_READ ? p->read_bw : p->write_bw;
		slot = dm_find_stream(m, dir, off);
		t.seq = slot >= 0;
		if (t.seq)
			lat = p->seq_lat_ns;
		else if (op == DM_OP_READ)
			lat = p->rand_read_lat_ns;
		else
			lat = p->rand_write_lat_ns;
		dm_remember_end(m, dir, slot, off + len);
		t.deadline_ns = dm_occupy(m, dir, now_ns, lat,
					  dm_transfer_ns(len, bw), bw,
					  &occupied);
		break;
	case DM_OP_FLUSH:
		/* the cache drains after every write admitted before it */
		t.deadline_ns = dm_occupy(m, DM_OP_WRITE, now_ns,
					  p->flush_lat_ns, 0, p->write_bw,
					  &occupied);
		break;
	default:
		/* discards are metadata updates for this model: free */
		t.deadline_ns = now_ns;
		break;
	}
	m->ops[op].service_ns += occupied;
	m->inflight++;
	if (m->inflight > m->max_inflight)
		m->max_inflight = m->inflight;
	pthread_mutex_unlock(&m->lock);
	return t;
}

void dm_model_complete(struct dm_model *m, const struct dm_ticket *t,
		       uint64_t len, uint64_t done_ns, uint64_t slept_ns,
		       int err)
{
	struct dm_op_counters *c = &m->ops[t->op];
	uint64_t lat_us = (done_ns - t->arrival_ns) / NS_PER_US;

	pthread_mutex_lock(&m->lock);
	m->inflight--;
	c->count++;
	if (err) {
		c->errors++;
	} else {
		c->bytes += len;
		if (t->op == DM_OP_READ || t->op == DM_OP_WRITE) {
			if (t->seq)
				c->seq++;
			else
				c->rand++;
			c->size_log2[dm_log2_bucket(len)]++;
		}
	}
	c->throttled_ns += slept_ns;
	c->latency_us_log2[dm_log2_bucket(lat_us)]++;
	pthread_mutex_unlock(&m->lock);
}

static void dm_write_hist(FILE *f, const uint64_t *h)
{
	unsigned int i, last = 0;

	for (i = 0; i < DM_HIST_BUCKETS; i++)
		if (h[i])
			last = i + 1;
	fputc('[', f);
	for (i = 0; i < last; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", h[i]);
	fputc(']', f);
}

static void dm_write_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void dm_write_profile_json(FILE *f, const struct dm_profile *p,
				  const char *indent)
{
	fprintf(f, "{\n%s  \"name\": ", indent);
	dm_write_json_string(f, p->name);
	fprintf(f, ",\n%s  \"write_bw_bytes_per_s\": %" PRIu64, indent,
		p->write_bw);
	fprintf(f, ",\n%s  \"read_bw_bytes_per_s\": %" PRIu64, indent,
		p->read_bw);
	fprintf(f, ",\n%s  \"rand_write_lat_ns\": %" PRIu64, indent,
		p->rand_write_lat_ns);
	fprintf(f, ",\n%s  \"rand_read_lat_ns\": %" PRIu64, indent,
		p->rand_read_lat_ns);
	fprintf(f, ",\n%s  \"seq_lat_ns\": %" PRIu64, indent, p->seq_lat_ns);
	fprintf(f, ",\n%s  \"flush_lat_ns\": %" PRIu64, indent,
		p->flush_lat_ns);
	fprintf(f, ",\n%s  \"burst_bytes\": %" PRIu64, indent,
		p->burst_bytes);
	fprintf(f, ",\n%s  \"seq_window\": %u", indent, p->seq_window);
	fprintf(f, ",\n%s  \"sync_backing\": %s", indent,
		p->sync_backing ? "true" : "false");
	if (p->description) {
		fprintf(f, ",\n%s  \"description\": ", indent);
		dm_write_json_string(f, p->description);
	}
	fprintf(f, "\n%s}", indent);
}

void dm_profiles_write_json(FILE *f)
{
	unsigned int i;

	fputs("[\n", f);
	for (i = 0; i < dm_nr_profiles; i++) {
		fputs("  ", f);
		dm_write_profile_json(f, &dm_profiles[i], "  ");
		fputs(i + 1 < dm_nr_profiles ? ",\n" : "\n", f);
	}
	fputs("]\n", f);
}

void dm_model_write_json(struct dm_model *m, FILE *f, uint64_t now_ns)
{
	struct dm_model snap;
	unsigned int i;

	/* copy under the lock, format without it */
	pthread_mutex_lock(&m->lock);
	m->dumps++;
	memcpy(&snap, m, sizeof(snap));
	pthread_mutex_unlock(&m->lock);

	fprintf(f, "{\n  \"component\": \"devmodel\",\n  \"version\": 1,\n");
	fprintf(f, "  \"dump_seq\": %" PRIu64 ",\n", snap.dumps);
	fprintf(f, "  \"elapsed_ns\": %" PRIu64 ",\n", now_ns - snap.start_ns);
	fputs("  \"profile\": ", f);
	snap.prof.description = NULL;
	dm_write_profile_json(f, &snap.prof, "  ");
	fprintf(f, ",\n  \"inflight\": %u,\n  \"max_inflight\": %u,\n",
		snap.inflight, snap.max_inflight);
	fputs("  \"ops\": {\n", f);
	for (i = 0; i < DM_NR_OPS; i++) {
		const struct dm_op_counters *c = &snap.ops[i];

		fprintf(f, "    \"%s\": {\"count\": %" PRIu64
			", \"bytes\": %" PRIu64 ", \"seq\": %" PRIu64
			", \"rand\": %" PRIu64 ", \"errors\": %" PRIu64
			", \"service_ns\": %" PRIu64
			", \"throttled_ns\": %" PRIu64 ",\n",
			dm_op_names[i], c->count, c->bytes, c->seq, c->rand,
			c->errors, c->service_ns, c->throttled_ns);
		fputs("      \"latency_us_log2\": ", f);
		dm_write_hist(f, c->latency_us_log2);
		fputs(",\n      \"size_log2\": ", f);
		dm_write_hist(f, c->size_log2);
		fprintf(f, "}%s\n", i + 1 < DM_NR_OPS ? "," : "");
	}
	fputs("  }\n}\n", f);
}
