#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"
#include "frame.h"
#include "io.h"
#include "num.h"

#define HDR_SIZE	4096u
#define HDR_MAGIC	"OVLRING1"
#define WAIT_MS		100	/* a writer with no room looks at its reader */
#define STRANGER_WAITS	50	/* waits (5 s) with the hello read, the ring unmapped */

/* The shared page. Head and tail on their own cache lines. */
struct ring_hdr {
	char		 magic[8];
	uint64_t	 size;
	char		 pad0[48];
	_Atomic uint64_t head;		/* published by the writer */
	char		 pad1[56];
	_Atomic uint64_t tail;		/* consumed by the reader */
	char		 pad2[56];
	_Atomic uint32_t rsleep;	/* the reader waits on the pipe */
	_Atomic uint32_t wsleep;	/* the writer waits on this futex */
	_Atomic uint32_t attached;	/* the reader has the file (unlinked) */
	_Atomic uint32_t ended;		/* the reader has read the END frame */
};

struct ovl_ring {
	int		 fd;		/* the pipe */
	char		*name;
	char		*path;		/* writer: the file, until attached */
	struct ring_hdr	*hdr;
	uint8_t		*data;
	void		*map;
	size_t		 maplen;
	size_t		 size;
	uint64_t	 wpos;		/* writer: bytes written */
	uint64_t	 whole;		/* writer: end of the last whole frame */
	uint64_t	 frame_at;	/* writer: where the frame written begins */
	uint64_t	 frame_end;	/* writer: where it ends (0: not known yet) */
	uint64_t	 head;		/* writer: last published */
	unsigned	 stranger;	/* writer: waits since the hello went unmapped */
};

static int
futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return (int)syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

/*
 * fd is a FIFO made by mkfifo (a path), not a shell's anonymous pipe: a
 * ring needs an overlord stage at the other end, and ovl-run links its
 * stages by named FIFOs, while a pipe to head, a script or a trainer must
 * carry the plain stream whatever the environment says.
 */
static int
named_fifo(int fd)
{
	char p[64], l[16];
	ssize_t n;

	if (!ovl_io_isfifo(fd))
		return 0;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, l, sizeof(l));
	return n > 0 && !(n >= 5 && memcmp(l, "pipe:", 5) == 0);
}

int
ovl_ring_wanted(int fd)
{
	const char *t = getenv("OVL_TRANSPORT");

	if (t == NULL || *t == '\0' || strcmp(t, "fifo") == 0)
		return 0;
	if (strcmp(t, "ring") != 0)
		ovl_errx(OVL_EXIT_USAGE, "bad OVL_TRANSPORT '%s' (ring or fifo)",
		    t);
	return named_fifo(fd);
}

static size_t default_size = OVL_RING_SIZE_DEFAULT;

void
ovl_ring_default_size(size_t size)
{
	default_size = size;
}

static size_t
ring_size(void)
{
	const char *env = getenv("OVL_RING_SIZE");
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t v = default_size;

	if (env != NULL && (ovl_num_size(env, &v) != 0 || v < (64u << 10) ||
	    v > (1u << 30)))
		ovl_errx(OVL_EXIT_USAGE, "bad OVL_RING_SIZE '%s' (64Ki .. 1Gi)",
		    env);
	return ((size_t)v + pg - 1) / pg * pg;
}

static const char *
ring_dir(void)
{
	const char *d = getenv("OVL_RING_DIR");

	if (d != NULL && *d != '\0')
		return d;
	if (access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	d = getenv("TMPDIR");
	return d != NULL && *d != '\0' ? d : "/tmp";
}

/* Map file fd (HDR_SIZE + size bytes): the header, then data twice. */
static int
map_ring(struct ovl_ring *g, int fd)
{
	uint8_t *base;

	g->maplen = HDR_SIZE + 2 * g->size;
	g->map = mmap(NULL, g->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
	    -1, 0);
	if (g->map == MAP_FAILED) {
		g->map = NULL;
		return -1;
	}
	base = g->map;
	if (mmap(base, HDR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_FIXED, fd, 0) == MAP_FAILED ||
	    mmap(base + HDR_SIZE, g->size, PROT_READ | PROT_WRITE, MAP_SHARED |
	    MAP_FIXED, fd, HDR_SIZE) == MAP_FAILED ||
	    mmap(base + HDR_SIZE + g->size, g->size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED, fd, HDR_SIZE) == MAP_FAILED)
		return -1;
	g->hdr = (struct ring_hdr *)(void *)base;
	g->data = base + HDR_SIZE;
	return 0;
}

struct ovl_ring *
ovl_ring_create(int fd, const char *name)
{
	struct ovl_ring *g = ovl_xcalloc(1, sizeof(*g));
	const char *dir = ring_dir();
	uint8_t hello[OVL_RING_HELLO_MAX];
	size_t plen;
	int rfd;

	g->fd = fd;
	g->name = ovl_xstrdup(name);
	g->size = ring_size();
	g->frame_at = OVL_STREAM_HDR_LEN;	/* the stream header goes first */
	plen = strlen(dir) + sizeof("/ovl-ring.XXXXXX");
	g->path = ovl_xmalloc(plen);
	snprintf(g->path, plen, "%s/ovl-ring.XXXXXX", dir);
	if (plen - 1 > OVL_RING_HELLO_MAX - 12)
		ovl_errx(OVL_EXIT_DATA, "ring directory name too long: '%s'",
		    dir);
	rfd = mkstemp(g->path);
	if (rfd < 0)
		ovl_err(OVL_EXIT_DATA, "cannot make a ring file in '%s'", dir);
	/*
	 * The pages are taken now: a tmpfs that fills later would end the
	 * writer by SIGBUS at a store into the mapping. Without the room
	 * (a container's small /dev/shm), the stream goes by the pipe.
	 */
	if ((errno = posix_fallocate(rfd, 0, (off_t)(HDR_SIZE + g->size))) != 0) {
		ovl_warn("'%s': no room for a ring of %zu bytes in '%s': the "
		    "stream goes by the pipe", name, (size_t)(HDR_SIZE + g->size),
		    dir);
		(void)unlink(g->path);
		close(rfd);
		free(g->path);
		free(g->name);
		free(g);
		return NULL;
	}
	if (map_ring(g, rfd) != 0) {
		int e = errno;
		(void)unlink(g->path);
		errno = e;
		ovl_err(OVL_EXIT_DATA, "cannot map ring file '%s'", g->path);
	}
	close(rfd);
	memcpy(g->hdr->magic, HDR_MAGIC, 8);
	g->hdr->size = g->size;
	memcpy(hello, OVL_RING_MAGIC, OVL_RING_MAGIC_LEN);
	ovl_put32(hello + 8, (uint32_t)(plen - 1));
	memcpy(hello + 12, g->path, plen - 1);
	if (ovl_io_write_full(fd, hello, 12 + plen - 1) != 0) {
		(void)unlink(g->path);
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on '%s'", name);
	}
	return g;
}

/* Writer: die as a pipe's writer does when the reader is gone. */
static void
check_reader(struct ovl_ring *g)
{
	struct pollfd p = { g->fd, 0, 0 };

	if (poll(&p, 1, 0) > 0 && (p.revents & POLLERR) &&
	    !atomic_load(&g->hdr->ended)) {
		if (!atomic_load(&g->hdr->attached))
			(void)unlink(g->path);
		ovl_io_die_epipe();
	}
}

static void
publish_to(struct ovl_ring *g, uint64_t pos)
{
	struct ring_hdr *h = g->hdr;
	static const char b = 'w';

	if (pos <= g->head)
		return;
	atomic_store_explicit(&h->head, pos, memory_order_release);
	g->head = pos;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->rsleep, memory_order_relaxed) &&
	    atomic_exchange(&h->rsleep, 0) != 0) {
		if (ovl_io_write_full(g->fd, &b, 1) != 0) {
			if (errno == EPIPE)
				ovl_io_die_epipe();
			ovl_err(OVL_EXIT_DATA, "write error on '%s'", g->name);
		}
	}
}

/*
 * Writer: follow the frames in what was written (the length in each
 * header) to know where the last whole one ends.
 */
static void
track_frames(struct ovl_ring *g)
{
	for (;;) {
		if (g->frame_end == 0) {
			if (g->wpos < g->frame_at + 4)
				return;
			g->frame_end = g->frame_at + OVL_FRAME_HDR_LEN +
			    ovl_le32(g->data + g->frame_at % g->size);
		}
		if (g->wpos < g->frame_end)
			return;
		g->whole = g->frame_at = g->frame_end;
		g->frame_end = 0;
	}
}

void
ovl_ring_publish(struct ovl_ring *g)
{
	publish_to(g, g->whole);
	check_reader(g);
}

/* Writer: the room after the write position (the reader's tail checked). */
static size_t
room(struct ovl_ring *g)
{
	uint64_t tail = atomic_load_explicit(&g->hdr->tail,
	    memory_order_acquire);

	if (tail > g->wpos || g->wpos - tail > g->size)
		ovl_errx(OVL_EXIT_FRAME, "'%s': the ring's reader is at %"
		    PRIu64 ", out of bounds", g->name, tail);
	return g->size - (size_t)(g->wpos - tail);
}

/*
 * Writer with no room: a reader that took the hello off the FIFO and has
 * not mapped the ring within seconds is no overlord stage (head, cat, a
 * script on a named FIFO, with OVL_TRANSPORT=ring in the environment): it
 * would wait on the FIFO while the writer waits on the ring. An error
 * naming the stream instead of that hang.
 */
static void
check_stranger(struct ovl_ring *g)
{
	int pending = 0;

	if (atomic_load(&g->hdr->attached) ||
	    ioctl(g->fd, FIONREAD, &pending) != 0 || pending > 0) {
		g->stranger = 0;
		return;
	}
	if (++g->stranger < STRANGER_WAITS)
		return;
	(void)unlink(g->path);
	ovl_errx(OVL_EXIT_DATA, "'%s': its reader took the ring's hello but "
	    "never opened the ring: not an overlord stage (a ring needs one at "
	    "the other end; OVL_TRANSPORT=fifo gives it the stream)", g->name);
}

/* Writer: wait until the reader frees room for need bytes. */
static void
wait_room(struct ovl_ring *g, size_t need)
{
	struct ring_hdr *h = g->hdr;
	struct timespec ts = { 0, WAIT_MS * 1000000L };

	publish_to(g, g->whole);
	/*
	 * The reader took all that is published and the room is still short:
	 * the frame written is too large to wait for whole (ring.h).
	 */
	if (atomic_load_explicit(&h->tail, memory_order_acquire) == g->head &&
	    g->head < g->wpos && room(g) < need)
		publish_to(g, g->wpos);
	atomic_store(&h->wsleep, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (room(g) >= need) {
		atomic_store(&h->wsleep, 0);
		return;
	}
	(void)futex(&h->wsleep, FUTEX_WAIT, 1, &ts);
	check_reader(g);
	check_stranger(g);
}

size_t
ovl_ring_room(struct ovl_ring *g)
{
	return room(g);
}

uint8_t *
ovl_ring_window(struct ovl_ring *g, size_t need)
{
	while (room(g) < need)
		wait_room(g, need);
	return g->data + g->wpos % g->size;
}

void
ovl_ring_commit(struct ovl_ring *g, size_t n)
{
	g->wpos += n;
	track_frames(g);
}

size_t
ovl_ring_size(const struct ovl_ring *g)
{
	return g->size;
}

void
ovl_ring_put(struct ovl_ring *g, const void *p, size_t n)
{
	const uint8_t *s = p;
	size_t r, k;

	while (n > 0) {
		r = room(g);
		if (r == 0) {
			wait_room(g, 1);
			continue;
		}
		k = n < r ? n : r;
		memcpy(g->data + g->wpos % g->size, s, k);
		g->wpos += k;
		track_frames(g);
		s += k;
		n -= k;
	}
}

long
ovl_ring_hello_len(const uint8_t *p, size_t n)
{
	uint32_t len;

	if (n < 12)
		return 0;
	if (memcmp(p, OVL_RING_MAGIC, OVL_RING_MAGIC_LEN) != 0)
		return -1;
	len = ovl_le32(p + 8);
	if (len == 0 || len > OVL_RING_HELLO_MAX - 12)
		return -1;
	return n < 12 + (size_t)len ? 0 : (long)(12 + len);
}

struct ovl_ring *
ovl_ring_attach(int fd, const uint8_t *p, size_t n, char *err, size_t errlen)
{
	struct ovl_ring *g;
	struct stat st;
	const char *base;
	char magic[8];
	uint64_t size;
	long len = ovl_ring_hello_len(p, n);
	int rfd;

	if (len <= 0 || memchr(p + 12, '\0', (size_t)len - 12) != NULL) {
		snprintf(err, errlen, "malformed ring hello");
		return NULL;
	}
	g = ovl_xcalloc(1, sizeof(*g));
	g->fd = fd;
	g->path = ovl_xmalloc((size_t)len - 12 + 1);
	memcpy(g->path, p + 12, (size_t)len - 12);
	g->path[len - 12] = '\0';
	base = strrchr(g->path, '/');
	base = base != NULL ? base + 1 : g->path;
	if (strncmp(base, "ovl-ring.", 9) != 0) {
		snprintf(err, errlen, "'%s' is not a ring file", g->path);
		goto fail;
	}
	rfd = open(g->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0) {
		snprintf(err, errlen, "cannot open ring '%s': %s", g->path,
		    strerror(errno));
		goto fail;
	}
	/*
	 * A hello names a path, and the reader unlinks it: only a file that
	 * is a ring (a private regular file of ours, its header, its size).
	 */
	if (fstat(rfd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
	    st.st_nlink != 1 || st.st_size < (off_t)HDR_SIZE ||
	    pread(rfd, magic, 8, 0) != 8 || memcmp(magic, HDR_MAGIC, 8) != 0 ||
	    pread(rfd, &size, 8, 8) != 8 || size == 0 ||
	    size % (uint64_t)sysconf(_SC_PAGESIZE) != 0 ||
	    (uint64_t)st.st_size != HDR_SIZE + size) {
		snprintf(err, errlen, "'%s' is not a ring file", g->path);
		close(rfd);
		goto fail;
	}
	(void)unlink(g->path);
	g->size = (size_t)size;
	if (map_ring(g, rfd) != 0) {
		snprintf(err, errlen, "cannot map ring '%s': %s", g->path,
		    strerror(errno));
		close(rfd);
		goto fail;
	}
	close(rfd);
	atomic_store(&g->hdr->attached, 1);
	return g;
fail:
	if (g->map != NULL)
		munmap(g->map, g->maplen);
	free(g->path);
	free(g);
	return NULL;
}

uint8_t *
ovl_ring_data(const struct ovl_ring *g)
{
	return g->data;
}

uint64_t
ovl_ring_head(const struct ovl_ring *g)
{
	return atomic_load_explicit(&g->hdr->head, memory_order_acquire);
}

void
ovl_ring_release(struct ovl_ring *g, uint64_t pos)
{
	struct ring_hdr *h = g->hdr;

	if (pos <= atomic_load_explicit(&h->tail, memory_order_relaxed))
		return;
	atomic_store_explicit(&h->tail, pos, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->wsleep, memory_order_relaxed) &&
	    atomic_exchange(&h->wsleep, 0) != 0)
		(void)futex(&h->wsleep, FUTEX_WAKE, INT_MAX, NULL);
}

void
ovl_ring_ended(struct ovl_ring *g)
{
	atomic_store(&g->hdr->ended, 1);
}

int
ovl_ring_sleep(struct ovl_ring *g, uint64_t have)
{
	struct ring_hdr *h = g->hdr;

	atomic_store(&h->rsleep, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&h->head, memory_order_acquire) > have) {
		atomic_store(&h->rsleep, 0);
		return 1;
	}
	return 0;
}

void
ovl_ring_close(struct ovl_ring *g)
{
	if (g == NULL)
		return;
	/*
	 * The file stays: a reader may still open it after the writer is
	 * gone (a short stream); the reader unlinks it.
	 */
	if (g->map != NULL)
		munmap(g->map, g->maplen);
	free(g->path);
	free(g->name);
	free(g);
}
