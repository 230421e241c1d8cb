/*
 * The ring transport (ring.h) under frameio: the same frames as a pipe,
 * wrapping, frames larger than the ring, a non-blocking reader; a writer
 * killed inside a frame leaves no half frame; a writer whose reader is
 * gone dies by SIGPIPE; a bad CRC is reported at the same byte offset as
 * over a pipe.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "frameio.h"
#include "ring.h"
#include "testframes.h"
#include "unit.h"

static char ringdir[] = "/tmp/t-ring.XXXXXX";

struct genarg {
	uint32_t	 len;
	int		 kill_at;	/* raise SIGKILL at this call (0: never) */
	int		 calls;
};

static void
gen(void *arg, uint8_t *dst, uint32_t off, uint32_t n)
{
	struct genarg *g = arg;
	uint32_t i;

	if (g->kill_at != 0 && ++g->calls == g->kill_at)
		raise(SIGKILL);
	for (i = 0; i < n; i++)
		dst[i] = pbyte(g->len, off + i);
}

static const uint32_t lens_a[] = { 0, 4, 1000, 60000, 65536, 200000, 12,
	70000, 1u << 20, 8, 300000, 4096 };
/*
 * For a ring of 1 MiB: frames made in pieces (every third) near its size,
 * after and before frames built whole (the writer must not wait for room
 * with frames built but not committed: its reader waits for them).
 */
static const uint32_t lens_b[] = { 100000, 60000, 985168, 29592, 30000,
	1000000, 4, 200000, 1048560, 120000, 8, 1048576, 16, 100000, 917504 };
static const uint32_t *lens = lens_a;
static size_t NLENS = sizeof(lens_a) / sizeof(lens_a[0]);

/* Child: the frames of lens[] (every third made in pieces) into fd. */
static void
writer_child(int fd, int rounds)
{
	struct ovl_writer *w = ovl_writer_new(fd, "ring test");
	struct genarg g = { 0, 0, 0 };
	size_t k;
	int r;

	for (r = 0; r < rounds; r++)
		for (k = 0; k < NLENS; k++) {
			if (k % 3 == 2) {
				g.len = lens[k];
				ovl_writer_frame_gen(w, OVL_STATE, 0, lens[k],
				    gen, &g);
				continue;
			}
			put_frame(w, lens[k]);
		}
	ovl_writer_end(w);
	ovl_writer_free(w);
	_exit(0);
}

/*
 * A named FIFO's two ends (rings are only for named FIFOs, as ovl-run
 * links stages; a pipe() is a shell's anonymous pipe): made in ringdir,
 * opened, then unlinked (the fds stay a named FIFO's).
 */
static int
fifo_pair(int pfd[2])
{
	static int k;
	char path[64];
	int fl;

	snprintf(path, sizeof(path), "%s/fifo%d", ringdir, k++);
	if (mkfifo(path, 0600) != 0 ||
	    (pfd[0] = open(path, O_RDONLY | O_NONBLOCK)) < 0 ||
	    (pfd[1] = open(path, O_WRONLY)) < 0 || unlink(path) != 0 ||
	    (fl = fcntl(pfd[0], F_GETFL)) < 0 ||
	    fcntl(pfd[0], F_SETFL, fl & ~O_NONBLOCK) != 0)
		return -1;
	return 0;
}

static pid_t
spawn_writer(int *rfd, const char *size, int rounds)
{
	int pfd[2];
	pid_t pid;

	if (fifo_pair(pfd) != 0)
		abort();
	pid = fork();
	if (pid == 0) {
		close(pfd[0]);
		setenv("OVL_TRANSPORT", "ring", 1);
		setenv("OVL_RING_SIZE", size, 1);
		setenv("OVL_RING_DIR", ringdir, 1);
		writer_child(pfd[1], rounds);
	}
	close(pfd[1]);
	*rfd = pfd[0];
	return pid;
}

static int
ring_files(void)
{
	DIR *d = opendir(ringdir);
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += strncmp(e->d_name, "ovl-ring.", 9) == 0;
	closedir(d);
	return n;
}

/* Read every frame; nonblock: as ovl-mix does, poll(2) on AGAIN. */
static void
read_all(const char *size, int nonblock)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	int fd, rc, st, bad = 0, rounds = 3;
	size_t k, n = 0;
	pid_t pid = spawn_writer(&fd, size, rounds);

	if (nonblock)
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	r = ovl_reader_new(fd, "ring", 4u << 20);
	for (;;) {
		rc = ovl_reader_next(r, &f);
		if (rc == OVL_RD_AGAIN) {
			struct pollfd p = { fd, POLLIN, 0 };
			CHECK(nonblock);
			(void)poll(&p, 1, -1);
			continue;
		}
		if (rc != OVL_RD_FRAME) {
			CHECK(rc == OVL_RD_EOF);
			if (rc != OVL_RD_EOF)
				printf("# %s\n", ovl_reader_error(r));
			break;
		}
		if (f.kind == OVL_END)
			continue;
		k = n % NLENS;
		bad += !frame_ok(&f, lens[k]);
		n++;
	}
	CHECK(bad == 0);
	CHECK(n == NLENS * (size_t)rounds);
	ovl_reader_free(r);
	close(fd);
	CHECK(waitpid(pid, &st, 0) == pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		printf("# writer: status %d, signal %d\n", WIFEXITED(st) ?
		    WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(ring_files() == 0);	/* the reader unlinked it */
}

static void
test_small_ring_blocking(void)
{
	read_all("64Ki", 0);
}

static void
test_small_ring_nonblocking(void)
{
	read_all("64Ki", 1);
}

static void
test_default_ring(void)
{
	read_all("4Mi", 0);
}

static void
test_frames_near_ring_size(void)
{
	lens = lens_b;
	NLENS = sizeof(lens_b) / sizeof(lens_b[0]);
	read_all("1Mi", 0);
	read_all("1Mi", 1);
	lens = lens_a;
	NLENS = sizeof(lens_a) / sizeof(lens_a[0]);
}

/*
 * The reader r of fd, whose writer pid was killed: its truncation error
 * is at a frame boundary (not "inside a frame"), and pid died by SIGKILL.
 * Frees r and closes fd.
 */
static void
ended_whole(struct ovl_reader *r, int fd, pid_t pid)
{
	int st;

	CHECK(strstr(ovl_reader_error(r), "inside a frame") == NULL);
	printf("# %s\n", ovl_reader_error(r));
	ovl_reader_free(r);
	close(fd);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) &&
	    WTERMSIG(st) == SIGKILL);
}

/*
 * A writer killed inside a frame (made in pieces, the pieces already in
 * the ring): the reader sees the whole frames before it, then end of file
 * without END at the frame's first byte, never a half frame.
 */
static void
test_killed_mid_frame(void)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	int pfd[2], rc, i;
	uint64_t off3 = 0;
	pid_t pid;

	if (fifo_pair(pfd) != 0)
		abort();
	pid = fork();
	if (pid == 0) {
		struct ovl_writer *w;
		struct genarg g = { 512u << 10, 0, 0 };
		uint8_t *p;

		close(pfd[0]);
		setenv("OVL_TRANSPORT", "ring", 1);
		setenv("OVL_RING_SIZE", "1Mi", 1);
		setenv("OVL_RING_DIR", ringdir, 1);
		w = ovl_writer_new(pfd[1], "ring test");
		for (i = 0; i < 3; i++) {
			p = ovl_writer_begin(w, 1000);
			memset(p, i, 1000);
			ovl_writer_finish(w, OVL_STATE, 0);
		}
		ovl_writer_flush(w);
		/* calls 1-4: the CRC pass; 5, 6: two pieces written; 7 dies */
		g.kill_at = 7;
		ovl_writer_frame_gen(w, OVL_STATE, 0, g.len, gen, &g);
		_exit(0);
	}
	close(pfd[1]);
	r = ovl_reader_new(pfd[0], "ring", 0);
	for (i = 0; i < 3; i++) {
		rc = ovl_reader_next(r, &f);
		CHECK(rc == OVL_RD_FRAME && f.kind == OVL_STATE &&
		    f.len == 1000 && f.payload[999] == i);
		off3 = ovl_reader_offset(r) + OVL_FRAME_HDR_LEN + 1000;
	}
	rc = ovl_reader_next(r, &f);
	CHECK(rc == OVL_F_ETRUNC);
	CHECK(ovl_reader_offset(r) == off3);
	ended_whole(r, pfd[0], pid);
}

/*
 * A writer killed while it copies a block of many frames into a ring with
 * less room than the block: what it published ends at a whole frame.
 */
static void
test_killed_mid_block(void)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	int fd, rc, n = 0;
	pid_t pid = spawn_writer(&fd, "64Ki", 1000);

	r = ovl_reader_new(fd, "ring", 4u << 20);
	while ((rc = ovl_reader_next(r, &f)) == OVL_RD_FRAME) {
		if (++n == 40)
			kill(pid, SIGKILL);
	}
	CHECK(n >= 40);
	CHECK(rc == OVL_F_ETRUNC);
	ended_whole(r, fd, pid);
}

/* A writer whose reader is gone dies by SIGPIPE, also while it waits. */
static void
test_reader_gone(void)
{
	struct ovl_reader *r;
	struct ovl_frame f;
	int fd, st;
	pid_t pid = spawn_writer(&fd, "64Ki", 1000);

	r = ovl_reader_new(fd, "ring", 4u << 20);
	CHECK(ovl_reader_next(r, &f) == OVL_RD_FRAME);
	CHECK(ovl_reader_next(r, &f) == OVL_RD_FRAME);
	ovl_reader_free(r);
	close(fd);
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) &&
	    WTERMSIG(st) == SIGPIPE);
}

/* The same damaged bytes over a pipe and a ring: the same message. */
static void
test_bad_crc_offset(void)
{
	uint8_t buf[3 * (OVL_FRAME_HDR_LEN + 64) + OVL_STREAM_HDR_LEN];
	char msg[2][512];
	size_t n = 0;
	int k, i, pfd[2], st;
	pid_t pid;

	ovl_stream_hdr_encode(buf);
	n = OVL_STREAM_HDR_LEN;
	for (i = 0; i < 3; i++) {
		memset(buf + n + OVL_FRAME_HDR_LEN, i, 64);
		ovl_frame_seal(buf + n, OVL_STATE, 0, 64);
		n += OVL_FRAME_HDR_LEN + 64;
	}
	buf[OVL_STREAM_HDR_LEN + 2 * (OVL_FRAME_HDR_LEN + 64) + 20] ^= 1;
	for (k = 0; k < 2; k++) {
		struct ovl_reader *r;
		struct ovl_frame f;

		if (pipe(pfd) != 0)
			abort();
		pid = fork();
		if (pid == 0) {
			close(pfd[0]);
			if (k == 1) {
				struct ovl_ring *g;

				setenv("OVL_RING_DIR", ringdir, 1);
				g = ovl_ring_create(pfd[1], "raw");
				ovl_ring_put(g, buf, n);
				ovl_ring_publish(g);
			} else if (write(pfd[1], buf, n) != (ssize_t)n)
				_exit(1);
			_exit(0);
		}
		close(pfd[1]);
		r = ovl_reader_new(pfd[0], "s", 0);
		CHECK(ovl_reader_next(r, &f) == OVL_RD_FRAME);
		CHECK(ovl_reader_next(r, &f) == OVL_RD_FRAME);
		CHECK(ovl_reader_next(r, &f) == OVL_F_ECRC);
		snprintf(msg[k], sizeof(msg[k]), "%s", ovl_reader_error(r));
		ovl_reader_free(r);
		close(pfd[0]);
		/* the reader left before END: the writer may see it or not */
		CHECK(waitpid(pid, &st, 0) == pid && (WIFEXITED(st) ||
		    (k == 1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE)));
	}
	printf("# %s\n", msg[1]);
	CHECK(strcmp(msg[0], msg[1]) == 0);
	CHECK(strstr(msg[1], "at byte offset 168") != NULL);
}

/*
 * Rings are asked for on a named FIFO and not on a pipe(): a ring size out
 * of range ends the writer with status 2 on the first, not on the second
 * (so the tests above run through rings).
 */
static void
test_named_fifo_only(void)
{
	int pfd[2], k, st;
	char b[4096];
	pid_t pid;

	for (k = 0; k < 2; k++) {
		if ((k == 0 ? fifo_pair(pfd) : pipe(pfd)) != 0)
			abort();
		pid = fork();
		if (pid == 0) {
			struct ovl_writer *w;

			close(pfd[0]);
			/* its expected message is no news for the log */
			if (freopen("/dev/null", "w", stderr) == NULL)
				_exit(1);
			setenv("OVL_TRANSPORT", "ring", 1);
			setenv("OVL_RING_SIZE", "1", 1);
			setenv("OVL_RING_DIR", ringdir, 1);
			w = ovl_writer_new(pfd[1], "probe");
			(void)ovl_writer_begin(w, 8);
			ovl_writer_finish(w, OVL_STATE, 0);
			ovl_writer_end(w);
			_exit(0);
		}
		close(pfd[1]);
		while (read(pfd[0], b, sizeof(b)) > 0)
			;
		close(pfd[0]);
		CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
		CHECK(WEXITSTATUS(st) == (k == 0 ? 2 : 0));
	}
}

int
main(void)
{
	if (mkdtemp(ringdir) == NULL)
		return 1;
	alarm(300);	/* a writer and reader waiting on each other fail */
	RUN(test_named_fifo_only);
	RUN(test_small_ring_blocking);
	RUN(test_small_ring_nonblocking);
	RUN(test_default_ring);
	RUN(test_frames_near_ring_size);
	RUN(test_killed_mid_frame);
	RUN(test_killed_mid_block);
	RUN(test_reader_gone);
	RUN(test_bad_crc_offset);
	(void)rmdir(ringdir);
	UNIT_DONE();
}
