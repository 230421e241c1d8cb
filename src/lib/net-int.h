/*
 * net's private parts, shared by net.c (settings, endpoints, sockets and
 * connecting), net-listen.c (listening) and net-auth.c (the secret and
 * the handshake).
 */
#ifndef OVL_NET_INT_H
#define OVL_NET_INT_H

#include <stddef.h>
#include <stdint.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "net.h"

#define OVL_NET__RUNID_MAX	200

enum { EP_CONNECT, EP_LISTEN };

struct ovl_net {
	char	*spec;		/* as given, options included */
	char	*shown;		/* the endpoint without its options */
	char	*host;		/* NULL: every address (listen); a UNIX socket's path */
	int	 unix_path;	/* unix: or unix-listen: */
	int	 made;		/* this listener made the socket file */
	char	 port[16];
	char	*port_file;
	char	*from;		/* "HOST/HOST...": the hosts a listener takes
				   peers from, or NULL: any */
	int	 kind;		/* EP_* */
	int	 dir;		/* OVL_NET_READ or OVL_NET_WRITE */
	int	 lfd;		/* listening socket, or -1 */
	char	 bound[128];	/* "ADDR:PORT" the listener is bound to */
	char	*name;		/* for messages */
};

/* The process's settings (net.c holds them). */
struct ovl_net__cfg {
	int	 loaded;	/* the environment was read */
	double	 connect_timeout;
	double	 keepalive;
	double	 send_timeout;
	uint64_t sockbuf;
	char	*secret_file;
	char	*run_id;	/* NULL: "" */
	int	 set[OVL_NET_OPT_LAST - OVL_NET_OPT_CONNECT_TIMEOUT + 1];
	uint8_t	*secret;	/* loaded once */
	size_t	 secret_len;
	int	 (*stop)(void);
};

/* The process's settings (net.c's), loaded by ovl_net_new. */
struct ovl_net__cfg *ovl_net__settings(void);
/* 1 when the stop function (ovl_net_set_stop) says stop. */
int	ovl_net__stopping(void);

/* CLOCK_MONOTONIC in seconds. */
double	ovl_net__now(void);
/*
 * Wait until fd is ready for events or the deadline passes, in slices so
 * that the stop function is heard. 1 ready, 0 deadline, -1 stop (EINTR)
 * or error (errno).
 */
int	ovl_net__wait_fd(int fd, short events, double deadline);
/* "ADDR:PORT" or "[ADDR]:PORT" of a socket address, into buf. */
void	ovl_net__addr_text(const struct sockaddr *sa, socklen_t salen,
	    char *buf, size_t len);
/* setsockopt of an int, its failure ignored. */
void	ovl_net__setint(int fd, int level, int opt, int v);
/* Socket buffers (--sockbuf) before connect or listen; else nothing. */
void	ovl_net__tune_buffers(int fd, int dir);
/* A connected socket of dir: TCP_NODELAY, keepalive, TCP_USER_TIMEOUT. */
void	ovl_net__tune(int fd, int dir);
/*
 * The addresses of n: getaddrinfo's for TCP (passive: to listen; 0, or
 * its error), or the one address of a UNIX socket (in *un and *sun).
 * Free with ovl_net__release.
 */
int	ovl_net__resolve(const struct ovl_net *n, int passive,
	    struct addrinfo *un, struct sockaddr_un *sun,
	    struct addrinfo **res);
void	ovl_net__release(const struct ovl_net *n, struct addrinfo *res);
/*
 * The peers of the listeners nets[0..n) into fds (net-listen.c): every
 * handshake at once, bounded by --connect-timeout from now; exits 1 when
 * one has no peer by then. 0, or -1 (EINTR: the stop function) with no
 * stream open.
 */
int	ovl_net__accept_all(struct ovl_net **nets, size_t n, int *fds);

/* 1 when id is a run id: printable ASCII without spaces, short. */
int	ovl_net__valid_run_id(const char *id);
/*
 * Load c's secret once: the file (c->secret_file), readable by its owner
 * only, or else OVL_SECRET. Without one: nothing when optional (a UNIX
 * socket: the handshake then goes by the peer's credentials), else exits
 * 2, naming spec.
 */
void	ovl_net__load_secret(struct ovl_net__cfg *c, const char *spec,
	    int optional);

/* Outcomes of a handshake. */
enum {
	OVL_NET__HS_OK,		/* the peer is of this run */
	OVL_NET__HS_IO,		/* the connection failed (errno): try again */
	OVL_NET__HS_REFUSED,	/* the peer is not of this run */
	OVL_NET__HS_MORE	/* (ovl_net__hs_*) it needs more bytes */
};
/*
 * Authenticate the peer on fd before deadline (see net.h), reading exactly
 * the handshake's bytes: by the secret, or without one (c->secret NULL,
 * UNIX sockets only) by the peer's credentials. why gets the reason when
 * it fails. ovl_net__hs_start and _step, waiting on fd between them.
 */
int	ovl_net__handshake(const struct ovl_net__cfg *c, const struct ovl_net *n,
	    int fd, double deadline, char *why, size_t wlen);

#define OVL_NET__HELLO_MAX	(12 + 32 + OVL_NET__RUNID_MAX)
#define OVL_NET__MAC_LEN	32

/*
 * A handshake in steps, so that one process can run many at once (a
 * listener's unauthenticated peers): its state, owned by the caller.
 */
struct ovl_net__hs {
	int	 fd;
	int	 phase;		/* what is read next (net-auth.c) */
	int	 listener;	/* this side listens */
	int	 dir;		/* OVL_NET_READ or OVL_NET_WRITE */
	size_t	 need, got;	/* bytes of the read in progress */
	double	 deadline;	/* of its sends (short: they fit any buffer) */
	uint8_t	 mine[OVL_NET__HELLO_MAX], theirs[OVL_NET__HELLO_MAX];
	size_t	 mlen, tlen;
	uint8_t	 got_mac[OVL_NET__MAC_LEN];
};
/*
 * Start the handshake of n's side on fd: sends this side's greeting. MORE
 * (wait until fd is readable, then ovl_net__hs_step), or an outcome with
 * why set. Never reads.
 */
int	ovl_net__hs_start(const struct ovl_net__cfg *c, const struct ovl_net *n,
	    struct ovl_net__hs *hs, int fd, double deadline, char *why,
	    size_t wlen);
/*
 * Go on with what fd holds now, without waiting: MORE while the peer owes
 * bytes, else the outcome (why set when it is not OK). Bytes that cannot
 * begin a greeting are refused as soon as they come.
 */
int	ovl_net__hs_step(const struct ovl_net__cfg *c, struct ovl_net__hs *hs,
	    char *why, size_t wlen);
/*
 * The outcome of a handshake that failed with errno e where it stands
 * (ETIMEDOUT: its peer said nothing in time), with why set.
 */
int	ovl_net__hs_fail(struct ovl_net__hs *hs, int e, char *why, size_t wlen);

#endif
