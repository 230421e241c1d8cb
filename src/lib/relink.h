/*
 * relink: a stage's FIFOs outlive the processes at their ends (ovl-run
 * restarts one stage while its neighbours keep running; ovl(7) Recovery).
 *
 * Generations. The FIFO a supervisor makes between two stages is PATH;
 * the link's next generations are PATH@1, PATH@2, ... When the process at
 * one end dies, the survivor moves to the next generation (it makes the
 * FIFO when it is not there yet and opens it, blocking until the other end
 * comes), and the supervisor starts the successor on that same FIFO. Two
 * streams therefore never share one open of a FIFO: the successor's bytes
 * cannot run into what its predecessor left unread.
 *
 * What crosses a new generation: the writer's side replays from its
 * backup (frameio.h, ovl_writer_backup) what it wrote since the last
 * committed checkpoint; a restarted writer sends the stream it resumes
 * from a checkpoint. Either says where its stream starts with the META
 * key "resumed N" (it continues right after BARRIER N; without the key,
 * from the start), and the reader drops what it already has by counting
 * frames from its last BARRIER (frameio.h, ovl_reader_relink).
 *
 * Committed checkpoints. ovl-ckpt writes its last committed checkpoint
 * number to CKPTDIR/committed ("N\n", replaced whole) after the record is
 * durable; a writer's backup drops what lies before that checkpoint.
 */
#ifndef OVL_RELINK_H
#define OVL_RELINK_H

#include <stddef.h>
#include <stdint.h>

/* The file under a checkpoint directory that holds the last commit. */
#define OVL_RELINK_COMMITTED	"committed"

/* A link: the base path of a FIFO and the generation open now. */
struct ovl_link {
	char		*base;		/* PATH, without "@N" */
	uint64_t	 gen;		/* 0 for PATH itself */
};

/*
 * The link fd is open on: its path (from /proc/self/fd), split into the
 * base and the generation. 0, or -1 when fd is not a named FIFO (errno
 * set, or ENOTSUP). The caller frees l->base.
 */
int	ovl_link_of_fd(int fd, struct ovl_link *l);
/*
 * Move to the next generation: make PATH@gen+1 (mode 0600; already there
 * is fine), open it for reading or writing (write nonzero), blocking until
 * the other end opens it, and put it in place of fd (dup2). Returns 0, or
 * -1 with errno (EINTR: a signal came while waiting; the caller decides).
 * *path gets the path opened (the caller frees it).
 */
int	ovl_link_next(struct ovl_link *l, int fd, int write, char **path);
/*
 * A reader's writer wrote nothing and left, or never came: open the same
 * generation again in place of fd (its next writer comes there, see
 * below). 0, or -1 with errno as ovl_link_next.
 */
int	ovl_link_again(struct ovl_link *l, int fd, char **path);
/*
 * Which generation a writer's successor takes. A writer marks the
 * generation it has open (PATH@N.w, made before its first byte) with
 * ovl_link_mark. When it dies, its reader and the supervisor decide alike
 * from the mark alone, once the writer is gone: marked, the reader moves
 * on to the next generation (after what the writer sent) and the
 * successor writes there; not marked, the writer sent nothing, the reader
 * stays (ovl_link_again) and the successor writes to the same generation.
 * Whether the dead writer had opened it does not matter, and no side
 * waits on a generation the other will never open. 0, or -1 with errno.
 */
#define OVL_LINK_MARK	".w"
int	ovl_link_mark(const struct ovl_link *l);
/* Generation l->gen of l is marked (1 also when it cannot be told). */
int	ovl_link_marked(const struct ovl_link *l);
/*
 * A function polled while a reader waits for its successor (a SIGTERM
 * handler's flag): when it says stop, ovl_link_next fails with EINTR.
 */
void	ovl_link_set_stop(int (*stop)(void));
/*
 * The last committed checkpoint recorded in path (CKPTDIR/committed): 1
 * with *n, 0 when there is none yet (no file, or not a number).
 */
int	ovl_link_committed(const char *path, uint64_t *n);
/* Record n as the last committed checkpoint in path (temp and rename). 0 or -1. */
int	ovl_link_set_committed(const char *path, uint64_t n);

/*
 * The options every relinked stage takes (ovl-mix, ovl-construct,
 * ovl-ckpt), parsed once here:
 *   --relink             its input FIFO follows its writer's successors
 *   --backup FILE        its output FIFO keeps a backup in FILE and
 *                        replays it to a successor reader
 *   --committed FILE     where the sink records its commits (with --backup)
 *   --backup-max SIZE    the backup's bound (default 4G)
 */
enum {
	OVL_RELINK_OPT_RELINK = 0x5200,
	OVL_RELINK_OPT_BACKUP,
	OVL_RELINK_OPT_COMMITTED,
	OVL_RELINK_OPT_BACKUP_MAX
};
#define OVL_RELINK_LONGOPTS \
	{ "relink", no_argument, NULL, OVL_RELINK_OPT_RELINK }, \
	{ "backup", required_argument, NULL, OVL_RELINK_OPT_BACKUP }, \
	{ "committed", required_argument, NULL, OVL_RELINK_OPT_COMMITTED }, \
	{ "backup-max", required_argument, NULL, OVL_RELINK_OPT_BACKUP_MAX }
#define OVL_RELINK_HELP \
	"Supervised recovery (ovl(7) Recovery; ovl-run passes these):\n" \
	"  --relink              after its writer dies, read its successor\n" \
	"  --backup FILE         keep the output since the last commit in FILE,\n" \
	"                        replay it to a successor reader\n" \
	"  --committed FILE      the sink's record of commits (CKPTDIR/committed)\n" \
	"  --backup-max SIZE     the backup's bound (4G)\n"
#define OVL_RELINK_BACKUP_MAX	(4ull << 30)

struct ovl_relink_opts {
	int		 relink;
	const char	*backup;
	const char	*committed;
	uint64_t	 max;		/* 0: OVL_RELINK_BACKUP_MAX */
};
struct ovl_cli;
/*
 * One of the options above into o: 1 when opt was one (a bad value exits
 * 2 with the usage), 0 otherwise.
 */
int	ovl_relink_cli(const struct ovl_cli *cli, struct ovl_relink_opts *o,
	    int opt, const char *arg);
/* --backup without --committed, or --committed without it: exit 2. */
void	ovl_relink_check(const struct ovl_cli *cli,
	    const struct ovl_relink_opts *o);

#endif
