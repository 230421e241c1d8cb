/*
 * net's private parts, shared by net.c (settings, endpoints, connecting
 * and listening) and net-auth.c (the secret and the handshake).
 */
#ifndef OVL_NET_INT_H
#define OVL_NET_INT_H

#include <stddef.h>
#include <stdint.h>

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

/* CLOCK_MONOTONIC in seconds. */
double	ovl_net__now(void);
/*
 * Wait until fd is ready for events or the deadline passes, in slices so
 * that the stop function is heard. 1 ready, 0 deadline, -1 stop (EINTR)
 * or error (errno).
 */
int	ovl_net__wait_fd(int fd, short events, double deadline);
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

/* Outcomes of ovl_net__handshake. */
enum {
	OVL_NET__HS_OK,		/* the peer is of this run */
	OVL_NET__HS_IO,		/* the connection failed (errno): try again */
	OVL_NET__HS_REFUSED	/* the peer is not of this run */
};
/*
 * Authenticate the peer on fd before deadline (see net.h), reading exactly
 * the handshake's bytes: by the secret, or without one (c->secret NULL,
 * UNIX sockets only) by the peer's credentials. why gets the reason when
 * it fails.
 */
int	ovl_net__handshake(const struct ovl_net__cfg *c, const struct ovl_net *n,
	    int fd, double deadline, char *why, size_t wlen);

#endif
