/*
 * fj_file: allocation, identity (file handle for log replay) and reference
 * counting of Fjord's per-file state.
 */
#define _GNU_SOURCE
#include "fj_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Next file id; atomic. Ids start at 1 (0 means "none" in records). */
static uint64_t fj_file_next_id = 1;

static void fj_file_fill_handle(struct fj_file *f)
{
	union {
		struct file_handle fh;
		unsigned char raw[sizeof(struct file_handle) + FJ_HANDLE_MAX];
	} u;
	int mount_id;

	u.fh.handle_bytes = FJ_HANDLE_MAX;
	if (name_to_handle_at(f->fd, "", &u.fh, &mount_id, AT_EMPTY_PATH))
		return;
	f->handle_type = u.fh.handle_type;
	f->handle_len = u.fh.handle_bytes;
	memcpy(f->handle, u.fh.f_handle, u.fh.handle_bytes);
}

struct fj_file *fj_file_new(int fd, const char *path, bool critical)
{
	struct fj_file *f = calloc(1, sizeof(*f));

	if (!f || !(f->path = strdup(path ? path : ""))) {
		free(f);
		close(fd);
		return NULL;
	}
	f->id = __atomic_fetch_add(&fj_file_next_id, 1, __ATOMIC_RELAXED);
	f->fd = fd;
	f->critical = critical;
	f->refs = 1;
	f->meta_dirty = true;	/* e.g. a fresh create: sync it once */
	pthread_mutex_init(&f->lock, NULL);
	fj_file_fill_handle(f);
	return f;
}

struct fj_file *fj_file_get(struct fj_file *f)
{
	__atomic_fetch_add(&f->refs, 1, __ATOMIC_RELAXED);
	return f;
}

void fj_file_put(struct fj_file *f)
{
	if (!f || __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (size_t i = 0; i < f->n_ext; i++)
		free(f->ext[i].data);
	free(f->ext);
	pthread_mutex_destroy(&f->lock);
	close(f->fd);
	free(f->path);
	free(f);
}
