/*
 * ovl-ckpt --step-from-readers: the readers of the rank streams first, the
 * checkpoint their step needs restored before the sink starts.
 */
#include "ckpt.h"

#define ANNOUNCE_WAIT	10.0	/* seconds a reader has to say its step */

void
ask_readers(struct ckpt_run *R)
{
	struct ckpt_opts *o = R->o;
	uint32_t n = o->plan_ranks, r;
	struct ovl_net **nets;
	uint64_t step, want = 0;
	char *path, *text = NULL;
	size_t len = 0;
	int64_t ck;
	FILE *fp;
	int fd;

	nets = ovl_xcalloc(n, sizeof(*nets));
	R->pre_fd = ovl_xcalloc(n, sizeof(*R->pre_fd));
	R->pre_peer = ovl_xcalloc(n, sizeof(*R->pre_peer));
	R->npre = n;
	/* every listener first: the ranks' readers connect in any order */
	for (r = 0; r < n; r++) {
		path = pattern_path(o->per_rank, r);
		nets[r] = ovl_net_new(path, OVL_NET_WRITE);
		ovl_net_listen(nets[r]);
		free(path);
		R->pre_fd[r] = -1;
	}
	/* rank by rank: a reader that says no step is named at once */
	for (r = 0; r < n; r++) {
		fd = ovl_net_wait(nets[r]);
		if (fd < 0) {
			ovl_info(0, "stopped while rank%" PRIu32 " waited for its "
			    "reader on '%s'", r, ovl_net_name(nets[r]));
			for (r = 0; r < n; r++)	/* UNIX sockets: their names go */
				ovl_net_free(nets[r]);
			exit(EXIT_STOPPED);
		}
		R->pre_fd[r] = fd;
		R->pre_peer[r] = ovl_xstrdup(ovl_net_name(nets[r]));
		if (ovl_net_recv_next(fd, ANNOUNCE_WAIT, &step) != 0)
			ovl_errx(OVL_EXIT_DATA, "rank%" PRIu32 ": the reader on "
			    "'%s' said no step (%s): with --step-from-readers "
			    "every rank's reader announces the step it needs "
			    "next (ovl-frame(5))", r, R->pre_peer[r],
			    errno == EPROTO ? "it sent other bytes" :
			    errno == ECONNRESET ? "it left" : strerror(errno));
		ovl_info(1, "rank%" PRIu32 ": the reader on '%s' needs step %"
		    PRIu64 " next", r, R->pre_peer[r], step);
		if (r == 0)
			want = step;
		else if (step != want)
			ovl_errx(OVL_EXIT_USAGE, "the ranks' readers need different "
			    "steps: rank0 step %" PRIu64 ", rank%" PRIu32 " step %"
			    PRIu64 "; a trainer's ranks resume from one checkpoint "
			    "(overlord.torch.agree_step)", want, r, step);
	}
	for (r = 0; r < n; r++)
		ovl_net_free(nets[r]);
	free(nets);
	fp = open_memstream(&text, &len);
	if (fp == NULL)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	ck = restore_for_step(R->dir, want, fp);
	if (fclose(fp) != 0)
		ovl_err(OVL_EXIT_DATA, "open_memstream");
	if (ck >= 0) {
		o->resume_set = 1;
		o->resume = (uint64_t)ck;
	} else if (want > 0) {
		o->nskip = 1;
		o->skip[0] = 0;
		o->skip[1] = want - 1;
	}
	if (ovl_atomic_write(o->readers_file, text != NULL ? text : "", len) != 0)
		ovl_err(OVL_EXIT_DATA, "cannot write '%s'", o->readers_file);
	free(text);
}
