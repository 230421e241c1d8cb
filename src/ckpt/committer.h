/*
 * The committer: ovl-ckpt's thread that makes checkpoints durable off the
 * main path (private to ovl-ckpt).
 *
 * The durability contract. The main thread writes a barrier's bytes to the
 * output files, then queues the barrier's log record (committer_push). The
 * committer fdatasyncs every registered file output, then appends the
 * queued records in order (several at once when they piled up) and fsyncs
 * the log. So a record is appended only after every byte it claims is on
 * disk: a checkpoint that is in the log is always whole, and a crash at any
 * moment leaves the log naming only durable bytes. When a group of records
 * does not fit on the disk they are appended one by one, so every
 * checkpoint that fits becomes durable. On any failure the next push or
 * drain exits 1 naming the checkpoint that failed (and says the previous
 * one stays valid when one was durable before).
 */
#ifndef OVL_CKPT_COMMITTER_H
#define OVL_CKPT_COMMITTER_H

#include <stddef.h>
#include <stdint.h>

/* Start the thread over the log open at logfd, appending at logend; durable
 * says a record is already in the log. After every durable append the
 * last record's number goes to the file committed (relink.h), and the
 * base records appended to the index at idxpath (ckptlog.h; an index that
 * cannot be opened, said at -v, or written only makes later reads longer). */
void	committer_start(int logfd, uint64_t logend, int durable,
	    const char *committed, const char *idxpath);
/* Register a regular file output to fdatasync before every append. */
void	committer_add_fd(int fd);
/* Queue record n (len bytes) for appending; waits while 64 MiB are queued.
 * Exits on an earlier failure. */
void	committer_push(const char *logpath, const void *rec, size_t len,
	    uint64_t n);
/* Wait until every queued record is durable. On a failure exit 1, or when
 * quiet return 1 without a message. 0 when all is durable. */
int	committer_drain(const char *logpath, int quiet);
/* Stop the thread (after it appended what is queued) and free it. */
void	committer_join(void);

#endif
