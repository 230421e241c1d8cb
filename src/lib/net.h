/*
 * net: ovl-frame(5) streams over TCP, authenticated per run.
 *
 * Wherever a stage takes a path for a stream it also takes an endpoint:
 *
 *   tcp:HOST:PORT            connect to HOST:PORT, retrying until
 *                            --connect-timeout
 *   tcp-listen:[HOST]:PORT   listen on HOST (every address when empty) and
 *                            take one authenticated peer
 *   unix:PATH                connect to the UNIX socket PATH, retrying
 *   unix-listen:PATH         make the UNIX socket PATH (mode 0600; a stale
 *                            socket there is replaced, removed again by
 *                            ovl_net_free) and take one authenticated peer
 *
 * HOST is a name, an IPv4 address or an IPv6 address in brackets ([::1]).
 * PORT is a number, or N+M (their sum: a per-rank pattern "7000+%d"); a
 * listener on port 0 takes a free port. Options follow after commas:
 * ",port-file=FILE" (tcp-listen) writes the bound port, one line,
 * atomically, once the socket listens; ",from=HOST[/HOST...]" (tcp-listen)
 * takes peers only from the addresses of those hosts (looked up at each
 * connection), and refuses and logs any other before its handshake.
 *
 * The stream is plain ovl-frame(5) after a handshake in which each side
 * sends a hello (magic, version, whether it reads or writes, a 32-byte
 * random nonce, the run id) and then proves that it knows the run's secret:
 * HMAC-SHA256 over both hellos and the side's role (OpenSSL libcrypto:
 * HMAC, RAND_bytes, CRYPTO_memcmp). A peer that sends something else,
 * another run id, the same direction or a wrong proof is refused and
 * logged naming it; a listener then waits for the next peer, a connecting
 * side stops (exit 2). No byte of a refused peer reaches the reader.
 * Over a UNIX socket (its listener makes it mode 0600) a side without a
 * secret takes a peer of its own user or root instead (SO_PEERCRED), with
 * a marker of its own ("OVLPEER\n" both ways); TCP always needs the secret,
 * and a side with a secret refuses a peer without one.
 *
 * Sockets are blocking (a slow reader holds its writer back, as a pipe
 * does), with TCP_NODELAY (the writers write large blocks; the last
 * segment of a block goes at once), keepalive and TCP_USER_TIMEOUT so that
 * a dead peer is noticed within --keepalive seconds, and, with --sockbuf,
 * fixed socket buffers (by default the kernel's autotuning).
 *
 * Settings come from the options below, or from the environment when an
 * option is not given: OVL_CONNECT_TIMEOUT, OVL_KEEPALIVE,
 * OVL_SEND_TIMEOUT, OVL_SOCKBUF, OVL_SECRET_FILE (a file of mode 0600 or
 * 0400 holding the secret) or OVL_SECRET (the secret itself), OVL_RUN_ID.
 *
 * Failures exit through err.h: 2 for a bad endpoint, a missing or exposed
 * secret, or a peer that the connecting side refuses; 1 when no peer came
 * within the timeout or the network fails.
 */
#ifndef OVL_NET_H
#define OVL_NET_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

/* Which way the stream flows for this side. */
enum { OVL_NET_READ = 0, OVL_NET_WRITE = 1 };

/* getopt_long values of the shared network options (beyond every tool's). */
enum {
	OVL_NET_OPT_CONNECT_TIMEOUT = 0x4e00,
	OVL_NET_OPT_KEEPALIVE,
	OVL_NET_OPT_SEND_TIMEOUT,
	OVL_NET_OPT_SOCKBUF,
	OVL_NET_OPT_SECRET_FILE,
	OVL_NET_OPT_RUN_ID,
	OVL_NET_OPT_LAST = OVL_NET_OPT_RUN_ID
};

#define OVL_NET_LONGOPTS \
	{ "connect-timeout", required_argument, NULL, OVL_NET_OPT_CONNECT_TIMEOUT }, \
	{ "keepalive", required_argument, NULL, OVL_NET_OPT_KEEPALIVE }, \
	{ "send-timeout", required_argument, NULL, OVL_NET_OPT_SEND_TIMEOUT }, \
	{ "sockbuf", required_argument, NULL, OVL_NET_OPT_SOCKBUF }, \
	{ "secret-file", required_argument, NULL, OVL_NET_OPT_SECRET_FILE }, \
	{ "run-id", required_argument, NULL, OVL_NET_OPT_RUN_ID }

/* The help lines of those options, for each tool's --help. */
#define OVL_NET_HELP \
	"Streams over sockets (tcp:HOST:PORT, tcp-listen:[HOST]:PORT, unix:PATH,\n" \
	"unix-listen:PATH; ovl-frame(5)):\n" \
	"  --connect-timeout S   wait S s for the peer (60)\n" \
	"  --keepalive S         a silent dead peer is an error after S s (10; 0 off)\n" \
	"  --send-timeout S      a writer whose data waits S s ends (0: never)\n" \
	"  --sockbuf SIZE        fixed socket buffers (default: kernel autotuning)\n" \
	"  --secret-file FILE    the run's secret (mode 0600), or OVL_SECRET\n" \
	"  --run-id ID           the run's id: peers of other runs are refused\n"

/*
 * Handle one of the options above: returns 1 when opt was one (a bad value
 * is a usage error through cli), 0 when it was not.
 */
int	ovl_net_cli(const struct ovl_cli *cli, int opt, const char *arg);
/* 1 when spec names an endpoint (tcp:, tcp-listen:, unix:, unix-listen:). */
int	ovl_net_is_endpoint(const char *spec);
/*
 * A function that says whether to give up waiting (a SIGTERM, say):
 * polled while a listener waits for its peer or a connection is retried.
 */
void	ovl_net_set_stop(int (*stop)(void));

struct ovl_net;

/*
 * An endpoint for a stream this side reads or writes (OVL_NET_*). Parses
 * spec and loads the secret: a bad spec, a missing secret (TCP; a UNIX
 * socket goes by the peer's credentials without one) or a secret file
 * readable by others exit 2. Freed with ovl_net_free.
 */
struct ovl_net *ovl_net_new(const char *spec, int dir);
/*
 * tcp-listen: bind and listen now (and write the port file), so that a
 * peer can connect before ovl_net_wait is called; exits 1 when the address
 * cannot be had. tcp: nothing. Called by ovl_net_wait when not before.
 */
void	ovl_net_listen(struct ovl_net *n);
/*
 * The stream's socket, connected and authenticated, blocking: connects
 * (retrying with backoff) or accepts (refusing bad peers), bounded by
 * --connect-timeout from this call. The caller owns the fd. Failures exit
 * (see above); -1 with errno EINTR only when the stop function said so.
 * A listener stays bound: the next call takes the next peer.
 *
 * A listener greets every peer that connects at once and takes the first
 * that proves itself: a peer gets 5 seconds for its handshake, and at
 * most 32 are in one at a time (a new one beyond that closes the oldest),
 * so peers that send nothing cannot hold the stream's real peer back.
 * The other peers in their handshake when one wins are closed.
 */
int	ovl_net_wait(struct ovl_net *n);
/*
 * ovl_net_wait for n endpoints at once, their streams in fds[0..n): the
 * listeners' handshakes all run together (a peer that comes for one
 * listener never waits for another's), then the connecting ones in turn.
 * 0, or -1 (EINTR, the stop function) with no stream left open.
 */
int	ovl_net_wait_all(struct ovl_net **nets, size_t n, int *fds);
/*
 * The endpoint for messages: "tcp:HOST:PORT", or after a listener's
 * ovl_net_wait "peer ADDR:PORT on tcp-listen:HOST:PORT". Owned by n.
 */
const char *ovl_net_name(const struct ovl_net *n);
/* 0 when spec is a well-formed endpoint (its syntax only), else -1. */
int	ovl_net_spec_valid(const char *spec);
/*
 * Check an endpoint early (its syntax, the secret) without opening it:
 * exits as ovl_net_new does; nothing for a spec that is not an endpoint.
 */
void	ovl_net_check(const char *spec, int dir);
/* Close the listening socket (not the streams returned) and free n. */
void	ovl_net_free(struct ovl_net *n);

/*
 * One stream at once: ovl_net_new, ovl_net_wait, ovl_net_free. The peer's
 * name is copied to name (size len). Returns the fd, or -1 (EINTR) when
 * the stop function said so.
 */
int	ovl_net_open(const char *spec, int dir, char *name, size_t len);
/*
 * Put the stream spec on target (STDIN_FILENO or STDOUT_FILENO, with dir
 * OVL_NET_READ or OVL_NET_WRITE): an endpoint, or a file or FIFO (created
 * and truncated for writing), or "-" for target itself. Its name for
 * messages goes to name ("standard input" or "standard output" for "-").
 * Failures exit 1 naming spec (or as ovl_net_wait does). 0, or -1 with
 * errno EINTR when the stop function (ovl_net_set_stop) said stop while an
 * endpoint waited for its peer.
 */
int	ovl_net_redirect(const char *spec, int dir, int target, char *name,
	    size_t len);
/*
 * The end of a written stream: shut the sending side down and wait until
 * the peer has acknowledged every byte, for as long as it keeps taking
 * some (at most timeout_s seconds without progress). 0, or -1 with errno
 * (ETIMEDOUT, or the socket's error: the peer went away).
 */
int	ovl_net_drain(int fd, double timeout_s);
/*
 * The resume announcement a reader may send right after the handshake
 * (ovl-frame(5)): "OVLNEXT\n" and the step it needs next, 8 bytes
 * little-endian. Waits up to timeout_s seconds for it on fd (a stream this
 * side writes). 0 with *step; -1 with errno: ETIMEDOUT (none came),
 * ECONNRESET (the reader left), EPROTO (other bytes), or the socket's.
 */
int	ovl_net_recv_next(int fd, double timeout_s, uint64_t *step);

#endif
