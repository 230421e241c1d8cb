/*
 * ovl-ckpt: the committer thread (its contract is in committer.h).
 */
#include "ckpt.h"
#include "committer.h"

#define QUEUE_MAX	(64u << 20)	/* queued record bytes before waiting */

static struct committer {
	pthread_t	 th;
	pthread_mutex_t	 mu;
	pthread_cond_t	 cv;
	int		 started;
	struct ovl_buf	 queue;		/* records not yet appended */
	uint64_t	 queue_last;	/* n of the last queued record */
	int		 busy, stop;
	int		 *fds;		/* regular file outputs */
	size_t		 nfds, capfds;
	int		 logfd;
	uint64_t	 logend;
	struct ovl_ckptidx idx;		/* the base records' offsets */
	int		 failed, err;	/* errno of the failure */
	uint64_t	 fail_n;
	int		 durable;	/* a record was appended before */
	const char	*fail_what;
	const char	*committed;	/* relink.h: the last durable record */
} C = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/*
 * A group of queued records did not fit on the disk: append them one by
 * one, so that every checkpoint that fits becomes durable (records are
 * self-contained). *done gets the bytes appended; on failure *failed_n the
 * checkpoint that did not fit. Called by the committer without the lock
 * (it alone moves C.logend). 0, or -1 with errno.
 */
static int
append_each(const struct ovl_buf *b, size_t *done, uint64_t *failed_n)
{
	size_t off = 0, rl;

	while (off + OVL_CKPTREC_HDR_LEN <= b->len) {
		rl = OVL_CKPTREC_HDR_LEN + (size_t)ovl_le32(b->p + off + 4);
		if (rl > b->len - off)
			break;
		if (ovl_ckptlog_append(C.logfd, C.logend + off, b->p + off,
		    rl) != 0) {
			*failed_n = ovl_le64(b->p + off + 16);
			*done = off;
			return -1;
		}
		off += rl;
	}
	*done = off;
	return 0;
}

static void *
committer_main(void *arg)
{
	struct ovl_buf b = { 0 }, tmp;
	uint64_t last;
	size_t i, nfds, done;
	int *fds = NULL, rc;

	(void)arg;
	pthread_mutex_lock(&C.mu);
	for (;;) {
		while (C.queue.len == 0 && !C.stop)
			pthread_cond_wait(&C.cv, &C.mu);
		if (C.queue.len == 0)
			break;
		tmp = b;
		b = C.queue;
		C.queue = tmp;
		C.queue.len = 0;
		last = C.queue_last;
		nfds = C.nfds;
		fds = ovl_xrealloc(fds, (nfds + 1) * sizeof(*fds));
		if (nfds > 0)
			memcpy(fds, C.fds, nfds * sizeof(*fds));
		C.busy = 1;
		pthread_cond_broadcast(&C.cv);
		pthread_mutex_unlock(&C.mu);
		rc = 0;
		done = 0;
		for (i = 0; i < nfds && rc == 0; i++)
			if (fdatasync(fds[i]) != 0)
				rc = -1;
		if (rc == 0)
			rc = ovl_ckptlog_append(C.logfd, C.logend, b.p, b.len);
		if (rc == 0) {
			done = b.len;
			ovl_ckptidx_note(&C.idx, b.p, b.len, C.logend);
			/* a hint for writers' backups: never ahead of the log */
			(void)ovl_link_set_committed(C.committed, last);
		}
		else if (i == nfds && (errno == ENOSPC || errno == EDQUOT)) {
			rc = append_each(&b, &done, &last);
			ovl_ckptidx_note(&C.idx, b.p, done, C.logend);
		}
		pthread_mutex_lock(&C.mu);
		C.busy = 0;
		C.logend += done;
		if (done > 0)
			C.durable = 1;
		if (rc != 0) {
			C.failed = 1;
			C.err = errno;
			C.fail_n = last;
			C.fail_what = i < nfds ? "sync an output for" : "append";
			pthread_cond_broadcast(&C.cv);
			break;
		}
		pthread_cond_broadcast(&C.cv);
	}
	pthread_mutex_unlock(&C.mu);
	free(fds);
	ovl_buf_free(&b);
	return NULL;
}

void
committer_start(int logfd, uint64_t logend, int durable,
    const char *committed, const char *idxpath)
{
	if (ovl_ckptidx_open(&C.idx, idxpath) != 0)
		ovl_info(1, "cannot open '%s' (%s): a restore reads the whole "
		    "log", idxpath, strerror(errno));
	C.committed = committed;
	C.logfd = logfd;
	C.logend = logend;
	C.durable = durable;
	if (pthread_create(&C.th, NULL, committer_main, NULL) != 0)
		ovl_errx(OVL_EXIT_DATA, "cannot start the committer thread");
	C.started = 1;
}

/* Exit with the committer's failure (called with the lock held). */
static void
committer_die(const char *logpath)
{
	int err = C.err, durable = C.durable;
	uint64_t n = C.fail_n;
	const char *what = C.fail_what;

	pthread_mutex_unlock(&C.mu);
	errno = err;
	ovl_err(OVL_EXIT_DATA, "cannot %s checkpoint %" PRIu64 " to '%s'%s",
	    what, n, logpath, durable ?
	    " (the previous checkpoint stays valid)" : "");
}

void
committer_add_fd(int fd)
{
	pthread_mutex_lock(&C.mu);
	if (C.nfds == C.capfds) {
		C.capfds = C.capfds ? C.capfds * 2 : 16;
		C.fds = ovl_xrealloc(C.fds, C.capfds * sizeof(*C.fds));
	}
	C.fds[C.nfds++] = fd;
	pthread_mutex_unlock(&C.mu);
}

void
committer_push(const char *logpath, const void *rec, size_t len, uint64_t n)
{
	pthread_mutex_lock(&C.mu);
	while (!C.failed && C.queue.len > QUEUE_MAX)
		pthread_cond_wait(&C.cv, &C.mu);
	if (C.failed)
		committer_die(logpath);
	ovl_buf_append(&C.queue, rec, len);
	C.queue_last = n;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mu);
}

/* Wait until every queued record is durable; exit on a failure unless quiet. */
int
committer_drain(const char *logpath, int quiet)
{
	int failed;

	if (!C.started)
		return 0;
	pthread_mutex_lock(&C.mu);
	while (!C.failed && (C.queue.len > 0 || C.busy))
		pthread_cond_wait(&C.cv, &C.mu);
	failed = C.failed;
	if (failed && !quiet)
		committer_die(logpath);
	pthread_mutex_unlock(&C.mu);
	return failed;
}

void
committer_join(void)
{
	if (!C.started)
		return;
	pthread_mutex_lock(&C.mu);
	C.stop = 1;
	pthread_cond_broadcast(&C.cv);
	pthread_mutex_unlock(&C.mu);
	pthread_join(C.th, NULL);
	ovl_ckptidx_close(&C.idx);
	C.started = 0;
	ovl_buf_free(&C.queue);
	free(C.fds);
}
