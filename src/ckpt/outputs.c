/*
 * ovl-ckpt: the sink's outputs (files and streams, per-rank streams) and
 * the META that decides them.
 */
#include "ckpt.h"
#include "committer.h"
#include "chunk.h"

#include <sys/xattr.h>

/* The extended attribute naming the checkpoint directory of a file output. */
#define OWNER_XATTR	"user.ovl.ckpt-dir"

/* ---- outputs ---- */

/*
 * out->ends holds the stream offset end: the reader of o stopped right
 * after a STEP frame. Then o is done and 1; else 0.
 */
static int
stopped_at_step(struct out *o, uint64_t consumed)
{
	size_t i, n = o->nends < STEP_ENDS ? o->nends : STEP_ENDS;

	for (i = 0; i < n; i++)
		if (o->ends[i] == consumed) {
			o->done = 1;
			o->done_step = o->endstep[i];
			ovl_info(1, "%s: the reader of '%s' stopped after step %"
			    PRIu64, o->name, o->path, o->done_step);
			return 1;
		}
	return 0;
}

/*
 * Write a rank stream whose reader may stop at a step end: 0 written (or
 * the reader stopped there: o is done), -1 with errno.
 */
static int
flush_stoppable(struct out *o)
{
	size_t off = 0;
	ssize_t w;
	int unread, e;

	while (off < o->buf.len) {
		w = write(o->fd, o->buf.p + off, o->buf.len - off);
		if (w >= 0) {
			off += (size_t)w;
			continue;
		}
		if (errno == EINTR)
			continue;
		e = errno;
		if (e == EPIPE && ioctl(o->fd, FIONREAD, &unread) == 0 &&
		    stopped_at_step(o, o->len - o->buf.len + off -
		    (uint64_t)unread))
			return 0;
		errno = e;
		return -1;
	}
	return 0;
}

void
out_step_end(struct out *o, uint64_t step)
{
	if (!o->stops && o->ahead == 0)
		return;
	if (o->ends == NULL) {
		o->ends = ovl_xcalloc(STEP_ENDS, sizeof(*o->ends));
		o->endstep = ovl_xcalloc(STEP_ENDS, sizeof(*o->endstep));
	}
	o->ends[o->nends % STEP_ENDS] = o->len;
	o->endstep[o->nends % STEP_ENDS] = step;
	o->nends++;
}

/* Bytes of o written and not yet taken by its reader, or -1. */
static int64_t
out_unread(const struct out *o)
{
	int n;

	/* TIOCOUTQ is SIOCOUTQ: unacknowledged bytes on TCP, on a UNIX
	 * socket what the peer has not read (counted with its buffers) */
	if (ioctl(o->fd, o->peer != NULL ? TIOCOUTQ : FIONREAD, &n) != 0 ||
	    n < 0)
		return -1;
	return n;
}

void
out_run_ahead(struct out *o)
{
	struct pollfd p;
	uint64_t end, sent;
	int64_t unread;
	int said = 0;

	if (o->ahead == 0 || o->done || o->nends < o->ahead)
		return;
	/* the ahead-th newest step end */
	end = o->ends[(o->nends - o->ahead) % STEP_ENDS];
	sent = o->len - o->buf.len;
	while (end > o->taken) {
		if ((unread = out_unread(o)) < 0)
			return;
		/* (a UNIX socket's count, with its buffers, may pass sent) */
		if ((uint64_t)unread < sent && sent - (uint64_t)unread > o->taken)
			o->taken = sent - (uint64_t)unread;
		if (end <= o->taken || ckpt_stopping())
			return;
		if (!said) {
			ovl_info(1, "%s: %" PRIu64 " steps ahead of the reader "
			    "of '%s': waiting (--run-ahead)", o->name, o->ahead,
			    o->peer != NULL ? o->peer : o->path);
			said = 1;
		}
		/* the nap is a poll: the sink is seen waiting on its reader */
		p.fd = o->fd;
		p.events = POLLRDHUP;
		p.revents = 0;
		if (poll(&p, 1, 10) > 0 &&
		    (p.revents & (POLLERR | POLLHUP | POLLRDHUP)))
			return;
	}
}

int64_t
readers_stopped(const struct ckpt_run *R)
{
	int64_t least = -1;
	size_t r;

	for (r = 0; r < R->nrank; r++)
		if (R->rank[r] != NULL && R->rank[r]->done &&
		    (least < 0 || R->rank[r]->done_step < (uint64_t)least))
			least = (int64_t)R->rank[r]->done_step;
	return least;
}

void
out_flush(struct out *o)
{
	int rc;

	if (o->buf.len == 0 || o->done) {
		o->buf.len = 0;
		return;
	}
	ckpt_write_begin(o->name, o->peer != NULL ? o->peer : o->path != NULL ?
	    o->path : "standard output");
	rc = o->stops ? flush_stoppable(o) : ovl_io_write_full(o->fd,
	    o->buf.p, o->buf.len);
	ckpt_write_end();
	if (rc != 0) {
		/* a named stream's reader leaving loses data: an error */
		if ((errno == EPIPE || errno == ECONNRESET) && o->path != NULL)
			ovl_errx(OVL_EXIT_DATA, "%s: the reader of '%s' went "
			    "away", o->name, o->peer != NULL ? o->peer : o->path);
		if (o->peer != NULL)
			ovl_err(OVL_EXIT_DATA, "%s: write error on '%s'",
			    o->name, o->peer);
		if (errno == EPIPE)
			ovl_io_die_epipe();
		ovl_err(OVL_EXIT_DATA, "write error on '%s'",
		    o->path != NULL ? o->path : "standard output");
	}
	o->buf.len = 0;
}

/* Append hashed bytes. */
void
out_put(struct out *o, const void *p, size_t n)
{
	ovl_hash64_update(&o->h, p, n);
	o->seg += n;
	o->len += n;
	if (o->buf.len + n > OUT_FLUSH) {
		out_flush(o);
		if (n >= OUT_FLUSH) {
			o->buf.len = 0;
			ovl_buf_append(&o->buf, p, n);
			out_flush(o);
			return;
		}
	}
	ovl_buf_append(&o->buf, p, n);
}

void
out_frame(struct out *o, const struct ovl_frame *f)
{
	out_put(o, f->payload - OVL_FRAME_HDR_LEN, f->size);
	o->nframes++;
}

/*
 * A SEQ of the output's width goes out from the frame as it is (16-bit
 * ids always fit); otherwise one widening or narrowing pass.
 */
void
out_tokens(struct ckpt_run *R, struct out *o, const struct ovl_seq *s,
    int bits16, uint32_t limit)
{
	uint32_t w = bits16 ? 2 : 4, max = 0;
	void *t;

	if (w == s->width) {
		if (w == 4 && limit < UINT32_MAX)
			max = ovl_tok_max(s->tokens, 4, s->ntokens);
		if (max <= limit) {
			out_put(o, s->tokens, (size_t)s->ntokens * w);
			return;
		}
	} else {
		R->scratch.len = 0;	/* storage from malloc: aligned */
		t = ovl_buf_reserve(&R->scratch, (size_t)s->ntokens * w);
		max = ovl_tok_copy(t, w, s->tokens, s->width, s->ntokens);
		if (max <= limit) {
			out_put(o, t, (size_t)s->ntokens * w);
			return;
		}
	}
	ovl_errx(OVL_EXIT_DATA, "SEQ of step %" PRIu64 " rank %" PRIu32
	    ": token id %" PRIu32 " does not fit %s (META vocab %" PRIu64
	    ")", s->step, s->rank, max, bits16 ? "uint16" : "int32",
	    R->vocab);
}

const char *
type_name(const struct out *o)
{
	return o->type == OT_FRAMES ? "frames" : o->type == OT_NPY ? "npy" :
	    "raw";
}

struct out *
out_new(struct ckpt_run *R, const char *name, const char *path, int type)
{
	struct out *o = ovl_xcalloc(1, sizeof(*o));

	o->name = ovl_xstrdup(name);
	o->path = path == NULL ? NULL : ovl_net_is_endpoint(path) ?
	    ovl_xstrdup(path) : abspath(path, 1);
	o->type = type;
	o->fd = -1;
	o->itemsize = 1;
	o->cols = 1;
	if (type == OT_NPY)
		o->hdr = NPY_HDR;
	R->outs = ovl_xrealloc(R->outs, (R->nouts + 1) * sizeof(*R->outs));
	R->outs[R->nouts++] = o;
	return o;
}

static void __attribute__((noreturn))
stopped_waiting(struct ckpt_run *R, const struct out *o)
{
	ovl_info(0, "stopped while %s waited for its peer on '%s'; resume "
	    "with 'ovl-ckpt restore %s'", o->name, o->path, R->dir);
	exit(EXIT_STOPPED);
}

/*
 * A file output belongs to the checkpoint directory whose sink wrote it
 * (OWNER_XATTR). Taking a file another directory's run wrote (one that
 * still has a checkpoint log) is refused, exit 2, unless --overwrite-output;
 * a file this directory's checkpoint holds (resume), an unmarked one or one
 * on a file system without user attributes is taken. fd is locked.
 */
static void
owner_take(struct ckpt_run *R, const struct out *o, int resumed)
{
	char owner[PATH_MAX], *log;
	ssize_t n;
	int other;

	n = fgetxattr(o->fd, OWNER_XATTR, owner, sizeof(owner) - 1);
	if (n >= 0) {
		owner[n] = '\0';
		if (strcmp(owner, R->dir) == 0)
			return;
		log = xasprintf("%s/ckpt.log", owner);
		other = access(log, F_OK) == 0;
		free(log);
		if (other && !resumed && !R->o->overwrite)
			ovl_errx(OVL_EXIT_USAGE, "'%s' belongs to the run of "
			    "checkpoint directory '%s': resume that run, write "
			    "another output, or overwrite it (--overwrite-output, "
			    "the plan's output overwrite=yes)", o->path, owner);
		if (other)
			ovl_info(0, "'%s': taking over the output of '%s'",
			    o->path, owner);
	}
	if (fsetxattr(o->fd, OWNER_XATTR, R->dir, strlen(R->dir), 0) != 0)
		ovl_info(1, "'%s': cannot mark its checkpoint directory (%s): "
		    "another run's sink will not see it", o->path,
		    strerror(errno));
}

void
out_open(struct ckpt_run *R, struct out *o)
{
	const struct ovl_kvsec *os = &R->prev.sec[OVL_SEC_OUT];
	const char *v = R->have_prev ? ovl_kvsec_get(os, o->name) : NULL;
	char key[256];
	const char *rpath;
	uint64_t len = 0, hash = 0, frames = 0;
	struct stat st;

	if (v != NULL) {
		snprintf(key, sizeof(key), "%s.path", o->name);
		rpath = ovl_kvsec_get(os, key);
		if (rpath == NULL || strcmp(rpath, o->path != NULL ? o->path :
		    "-") != 0)
			ovl_errx(OVL_EXIT_USAGE, "output '%s' was '%s' at "
			    "checkpoint %" PRIu64 ", not '%s'", o->name,
			    rpath != NULL ? rpath : "?", R->last_n,
			    o->path != NULL ? o->path : "-");
		if (sscanf(v, "%" SCNu64 " %" SCNx64 " %" SCNu64, &len, &hash,
		    &frames) != 3)
			ovl_errx(OVL_EXIT_FRAME, "checkpoint %" PRIu64 ": bad "
			    "output line '%s %s'", R->last_n, o->name, v);
	}
	if (o->path == NULL) {
		o->fd = STDOUT_FILENO;
		o->regular = 0;	/* standard output always starts a new stream */
	} else if (ovl_net_is_endpoint(o->path)) {
		char peer[512];

		/* a new stream on every run, like a FIFO's */
		if (o->fd < 0) {	/* not taken by ask_readers */
			o->fd = ovl_net_open(o->path, OVL_NET_WRITE, peer,
			    sizeof(peer));
			if (o->fd < 0)
				stopped_waiting(R, o);
			o->peer = ovl_xstrdup(peer);
		}
		o->regular = 0;
	} else {
		struct stat fst;

		/*
		 * A FIFO is opened for writing only, once its reader has
		 * opened it: never read-write, which would let the bytes sit
		 * in a pipe nobody reads and vanish at exit.
		 */
		if (stat(o->path, &fst) == 0 && S_ISFIFO(fst.st_mode))
			o->fd = fifo_open(R, o);
		else	/* not O_TRUNC: the lock first (another run may own it) */
			o->fd = open(o->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (o->fd < 0)
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o->path);
		o->regular = fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode);
		if (!o->regular)
			ovl_io_pipe_grow(o->fd);
		else {
			/* One writer per output file, held until exit. */
			if (flock(o->fd, LOCK_EX | LOCK_NB) != 0)
				ovl_errx(OVL_EXIT_USAGE, "'%s' is being written by "
				    "another ovl-ckpt (two runs with one output)",
				    o->path);
			owner_take(R, o, v != NULL);
			if (v == NULL && ftruncate(o->fd, 0) != 0)
				ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'",
				    o->path);
			committer_add_fd(o->fd);
		}
	}
	o->len = len;
	o->hash = hash;
	o->nframes = frames;
	ovl_hash64_init(&o->h, hash);
	o->fresh = v == NULL || !o->regular;
	if (!o->fresh) {
		if ((uint64_t)st.st_size < len)
			ovl_errx(OVL_EXIT_DATA, "'%s' has %jd bytes, fewer than "
			    "the %" PRIu64 " of checkpoint %" PRIu64, o->path,
			    (intmax_t)st.st_size, len, R->last_n);
		if (ftruncate(o->fd, (off_t)len) != 0 ||
		    lseek(o->fd, 0, SEEK_END) < 0)
			ovl_err(OVL_EXIT_DATA, "cannot truncate '%s'", o->path);
		if (o->type == OT_NPY)
			npy_rewrite(o);
		return;
	}
	if (v == NULL)
		o->len = 0;
	/* a stream starts anew: its END counts the frames of this stream */
	o->nframes = 0;
	if (o->type == OT_FRAMES) {
		uint8_t sh[OVL_STREAM_HDR_LEN];

		ovl_stream_hdr_encode(sh);
		out_put(o, sh, sizeof(sh));
		if (R->have_meta) {
			out_put(o, R->meta.p, R->meta.len);
			o->nframes++;
		}
	} else if (o->type == OT_NPY) {
		uint8_t hdr[NPY_HDR];

		o->len = NPY_HDR;
		npy_header(hdr, o->descr, 0, o->cols);
		ovl_buf_append(&o->buf, hdr, NPY_HDR);	/* outside the hash */
	}
}

/*
 * Write out, fix the npy header, fold the segment into the chain. The
 * committer thread fdatasyncs the file before the record goes to the log.
 */
void
out_commit(struct out *o)
{
	out_flush(o);
	if (o->type == OT_NPY && o->regular)
		npy_rewrite(o);
	if (o->seg > 0) {
		o->hash = ovl_hash64_digest(&o->h);
		ovl_hash64_init(&o->h, o->hash);
		o->seg = 0;
	}
}

struct out *
out_add(struct ckpt_run *R, const char *name, const char *path, int type)
{
	struct out *o = out_new(R, name, path, type);

	out_open(R, o);
	return o;
}

/* Rank r's output path: the pattern's, served to its trainer host. */
static char *
rank_path(struct ckpt_run *R, uint32_t r)
{
	char *ep = pattern_path(R->o->per_rank, r), *path;

	path = rank_endpoint(ep, R->o->trainer_hosts, r, R->meta_ranks > 0 ?
	    R->meta_ranks : R->o->plan_ranks);
	free(ep);
	return path;
}

void
rank_streams(struct ckpt_run *R, uint32_t n)
{
	struct ovl_net **nets;
	char *path;
	uint32_t r;

	if (R->npre > 0 || n == 0)
		return;
	path = rank_path(R, 0);
	if (!ovl_net_is_endpoint(path)) {
		free(path);
		return;
	}
	free(path);
	nets = ovl_xcalloc(n, sizeof(*nets));
	R->pre_fd = ovl_xcalloc(n, sizeof(*R->pre_fd));
	R->pre_peer = ovl_xcalloc(n, sizeof(*R->pre_peer));
	R->npre = n;
	for (r = 0; r < n; r++) {
		path = rank_path(R, r);
		nets[r] = ovl_net_new(path, OVL_NET_WRITE);
		free(path);
	}
	if (ovl_net_wait_all(nets, n, R->pre_fd) != 0) {
		ovl_info(0, "stopped while the ranks waited for their readers "
		    "on '%s'...; resume with 'ovl-ckpt restore %s'",
		    ovl_net_name(nets[0]), R->dir);
		for (r = 0; r < n; r++)	/* UNIX sockets: their names go */
			ovl_net_free(nets[r]);
		exit(EXIT_STOPPED);
	}
	for (r = 0; r < n; r++) {
		R->pre_peer[r] = ovl_xstrdup(ovl_net_name(nets[r]));
		ovl_net_free(nets[r]);
	}
	free(nets);
}

struct out *
rank_out(struct ckpt_run *R, uint32_t r)
{
	char *path, name[32];

	if (r < R->nrank && R->rank[r] != NULL)
		return R->rank[r];
	if (r >= MAX_RANKS)
		ovl_errx(OVL_EXIT_FRAME, "SEQ for rank %" PRIu32 ": more than %u "
		    "ranks", r, MAX_RANKS);
	if (r >= R->nrank) {
		R->rank = ovl_xrealloc(R->rank, ((size_t)r + 1) *
		    sizeof(*R->rank));
		memset(R->rank + R->nrank, 0, ((size_t)r + 1 - R->nrank) *
		    sizeof(*R->rank));
		R->nrank = (size_t)r + 1;
	}
	snprintf(name, sizeof(name), "rank%" PRIu32, r);
	path = rank_path(R, r);
	R->rank[r] = out_new(R, name, path, OT_FRAMES);
	free(path);
	if (r < R->npre && R->pre_fd[r] >= 0) {	/* its reader is here */
		R->rank[r]->fd = R->pre_fd[r];
		R->rank[r]->peer = R->pre_peer[r];
		R->pre_fd[r] = -1;
		R->pre_peer[r] = NULL;
	}
	out_open(R, R->rank[r]);
	/* a FIFO's reader may end at a step end (sockets cannot tell) */
	R->rank[r]->stops = !R->rank[r]->regular && R->rank[r]->peer == NULL &&
	    R->rank[r]->path != NULL;
	if (!R->rank[r]->regular && R->rank[r]->path != NULL)
		R->rank[r]->ahead = R->o->run_ahead;
	return R->rank[r];
}

/* ---- META ---- */

static void meta_files(struct ckpt_run *R, const char *text, uint32_t len);

void
meta_parse(struct ckpt_run *R, const char *text, uint32_t len)
{
	const char *p = text, *end = text + len, *nl;
	char line[512], name[256];
	uint64_t v;
	unsigned id;

	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if ((size_t)(nl - p) < sizeof(line)) {
			memcpy(line, p, (size_t)(nl - p));
			line[nl - p] = '\0';
			if (strncmp(line, "vocab ", 6) == 0 &&
			    ovl_num_u64(line + 6, &v) == 0) {
				R->vocab = v;
				R->have_vocab = 1;
			} else if (strncmp(line, "cp ", 3) == 0 &&
			    ovl_num_u64(line + 3, &v) == 0 && v >= 1 &&
			    v <= OVL_PLAN_MAX_CP) {
				R->cp = (uint32_t)v;
			} else if (strcmp(line, "cp-balance hybrid") == 0) {
				R->cp_hybrid = 1;
			} else if (strncmp(line, "cp-pad ", 7) == 0) {
				R->cp_pad = ovl_cli_choice(ovl_plan_cp_pads,
				    line + 7);
				if (R->cp_pad < 0)
					ovl_errx(OVL_EXIT_FRAME, "META: unknown "
					    "cp-pad '%s'", line + 7);
			} else if (strncmp(line, "ranks ", 6) == 0 &&
			    ovl_num_u64(line + 6, &v) == 0 && v >= 1 &&
			    v <= MAX_RANKS)
				R->meta_ranks = (uint32_t)v;
			else if (sscanf(line, "source %u %255s", &id, name) == 2 &&
			    id < 65536) {
				if (id >= R->nsrc) {
					R->srcname = ovl_xrealloc(R->srcname,
					    ((size_t)id + 1) * sizeof(char *));
					memset(R->srcname + R->nsrc, 0,
					    ((size_t)id + 1 - R->nsrc) *
					    sizeof(char *));
					R->srcfiles = ovl_xrealloc(R->srcfiles,
					    ((size_t)id + 1) *
					    sizeof(*R->srcfiles));
					memset(R->srcfiles + R->nsrc, 0,
					    ((size_t)id + 1 - R->nsrc) *
					    sizeof(*R->srcfiles));
					R->nsrc = (size_t)id + 1;
				}
				free(R->srcname[id]);
				R->srcname[id] = ovl_xstrdup(name);
			}
		}
		p = nl + 1;
	}
	meta_files(R, text, len);
}

/* --wait-readers S has passed since t0 (never when S is 0: forever). */
static int
waited_out(const struct ckpt_run *R, const struct timespec *t0)
{
	return R->o->wait_readers > 0 &&
	    ovl_io_since(t0) >= (double)R->o->wait_readers;
}

int
fifo_open(struct ckpt_run *R, struct out *o)
{
	struct timespec t0, nap = { 0, 20 * 1000 * 1000 };
	int fd, fl, said = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		fd = open(o->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != ENXIO)	/* ENXIO: no reader yet */
			ovl_err(OVL_EXIT_DATA, "cannot open '%s'", o->path);
		if (ckpt_stopping()) {
			ovl_info(0, "stopped while %s waited for the reader of "
			    "'%s'; resume with 'ovl-ckpt restore %s'", o->name,
			    o->path, R->dir);
			exit(EXIT_STOPPED);
		}
		if (!said) {
			ovl_info(1, "%s: waiting for a reader of '%s'", o->name,
			    o->path);
			said = 1;
		}
		if (waited_out(R, &t0))
			ovl_errx(OVL_EXIT_DATA, "%s: no reader opened '%s' "
			    "within %" PRIu64 " s (--wait-readers)", o->name,
			    o->path, R->o->wait_readers);
		nanosleep(&nap, NULL);
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot set up '%s'", o->path);
	return fd;
}

void
fifo_drain(struct ckpt_run *R, struct out *o)
{
	/* no events: poll sleeps until the reader closes (POLLERR) */
	struct pollfd p = { o->fd, 0, 0 };
	struct timespec t0;
	int n, last = -1;

	if (o->done)
		return;
	if (o->peer != NULL) {	/* every byte acknowledged by the peer */
		/* 0: forever (a century without progress) */
		if (ovl_net_drain(o->fd, R->o->wait_readers > 0 ?
		    (double)R->o->wait_readers : 3.2e9) == 0)
			return;
		if (errno == ETIMEDOUT)
			ovl_errx(OVL_EXIT_DATA, "%s: the reader of '%s' took "
			    "nothing for %" PRIu64 " s (--wait-readers)", o->name,
			    o->peer, R->o->wait_readers);
		ovl_errx(OVL_EXIT_DATA, "%s: the reader of '%s' went away (%s)",
		    o->name, o->peer, strerror(errno));
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ioctl(o->fd, FIONREAD, &n) != 0 || n == 0)
			return;
		if (n != last) {	/* the reader is reading */
			last = n;
			clock_gettime(CLOCK_MONOTONIC, &t0);
		}
		p.revents = 0;
		if (poll(&p, 1, 50) > 0 && (p.revents & (POLLERR | POLLHUP))) {
			/* the reader closed: after taking every byte, or not */
			if (ioctl(o->fd, FIONREAD, &n) != 0 || n == 0)
				return;
			if (o->stops && stopped_at_step(o, o->len - (uint64_t)n))
				return;
			ovl_errx(OVL_EXIT_DATA, "%s: the reader of '%s' went "
			    "away with %d bytes unread", o->name, o->path, n);
		}
		if (ckpt_stopping())
			ckpt_stop_blocked(o->name, o->path);
		if (!waited_out(R, &t0))
			continue;
		/* a reader that took the last bytes meanwhile is done */
		if (ioctl(o->fd, FIONREAD, &n) != 0 || n == 0)
			return;
		ovl_errx(OVL_EXIT_DATA, "%s: the reader of '%s' read "
		    "nothing for %" PRIu64 " s (--wait-readers); %d bytes "
		    "unread", o->name, o->path, R->o->wait_readers, n);
	}
}

/* The source id of NAME (len bytes), or -1. */
static long
src_id(const struct ckpt_run *R, const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < R->nsrc; i++)
		if (R->srcname[i] != NULL && strlen(R->srcname[i]) == len &&
		    memcmp(R->srcname[i], name, len) == 0)
			return (long)i;
	return -1;
}

/*
 * The chunk lines of the META, after the source names are known:
 * "source.NAME.chunk.K OFF LEN|- PATH" and "source.NAME.shuffle SEED".
 */
static void
meta_files(struct ckpt_run *R, const char *text, uint32_t len)
{
	const char *p = text, *end = text + len, *nl, *dot, *k;
	char line[8192], path[8192];
	unsigned long long off, n;
	char lenw[32];
	struct srcfiles *f;
	unsigned ci;
	long id;

	for (; p < end; p = nl + 1) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (nl == NULL)
			nl = end;
		if ((size_t)(nl - p) >= sizeof(line) || nl - p < 8 ||
		    memcmp(p, "source.", 7) != 0)
			continue;
		memcpy(line, p, (size_t)(nl - p));
		line[nl - p] = '\0';
		k = line + 7;
		if ((dot = strchr(k, '.')) == NULL ||
		    (id = src_id(R, k, (size_t)(dot - k))) < 0)
			continue;
		f = &R->srcfiles[id];
		if (sscanf(dot, ".shuffle %llu", &off) == 1) {
			f->shuffle = 1;
			f->seed = off;
			continue;
		}
		if (sscanf(dot, ".chunk.%u %llu %31s %8191[^\n]", &ci, &off,
		    lenw, path) != 4 || ci >= (1u << 24))
			continue;
		if (ci >= f->nchunks) {
			f->path = ovl_xrealloc(f->path, ((size_t)ci + 1) *
			    sizeof(*f->path));
			f->off = ovl_xrealloc(f->off, ((size_t)ci + 1) *
			    sizeof(*f->off));
			f->len = ovl_xrealloc(f->len, ((size_t)ci + 1) *
			    sizeof(*f->len));
			memset(f->path + f->nchunks, 0, ((size_t)ci + 1 -
			    f->nchunks) * sizeof(*f->path));
			f->nchunks = ci + 1;
		}
		free(f->path[ci]);
		f->path[ci] = ovl_xstrdup(path);
		f->off[ci] = off;
		f->len[ci] = strcmp(lenw, "-") == 0 ||
		    sscanf(lenw, "%llu", &n) != 1 ? UINT64_MAX : n;
	}
}

const char *
src_file(struct ckpt_run *R, uint32_t src, uint32_t epoch, uint32_t chunk,
    uint64_t *off, uint64_t *len)
{
	struct srcfiles *f;
	uint32_t i;

	if (src >= R->nsrc || (f = &R->srcfiles[src])->nchunks == 0 ||
	    chunk >= f->nchunks)
		return NULL;
	if (f->perm == NULL) {
		f->perm = ovl_xcalloc(f->nchunks, sizeof(*f->perm));
		f->perm_epoch = -1;
	}
	if (f->perm_epoch != (int64_t)epoch) {
		ovl_chunks_perm(f->nchunks, f->shuffle, f->seed, epoch, f->perm);
		f->perm_epoch = epoch;
	}
	i = f->perm[chunk];
	*off = f->off[i];
	*len = f->len[i];
	return f->path[i];
}

void
srcfiles_free(struct ckpt_run *R)
{
	size_t s;
	uint32_t i;

	for (s = 0; s < R->nsrc; s++) {
		for (i = 0; i < R->srcfiles[s].nchunks; i++)
			free(R->srcfiles[s].path[i]);
		free(R->srcfiles[s].path);
		free(R->srcfiles[s].off);
		free(R->srcfiles[s].len);
		free(R->srcfiles[s].perm);
	}
	free(R->srcfiles);
}
