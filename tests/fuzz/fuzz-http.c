/*
 * libFuzzer target: HTTP answers to the remote reader (src/lib/remote.c:
 * libcurl's parse of status lines, headers and chunked bodies, then ours
 * of the status, Content-Range, Content-Length, ETag and Last-Modified,
 * the retries and the resumed ranges). A server thread on 127.0.0.1
 * answers each connection with the next piece of the input (pieces end
 * at "@@\n"), whatever was asked, then closes it; a connection past the
 * last piece is closed at once. Every request goes through it, as a proxy
 * (all_proxy), so a redirect never leaves the machine.
 *
 * The first byte picks the reading: a HEAD then one ranged read
 * (ovl_remote_pread), a HEAD then sequential reads (ovl_remote_seek,
 * ovl_remote_read), or a whole body (a listing's GET); the next two pick
 * the offset and the length. Nothing may crash or hang; no read returns
 * more than was asked or lies past the size; every failure says why.
 */
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "remote-int.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define PIECES	32
#define SEP	"@@\n"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const uint8_t *piece[PIECES];
static size_t plen[PIECES], npieces, next_piece;
static int lfd = -1;
static char url[64];

/* The request's head, up to its blank line (or 2 s, or 16 KB). */
static void
read_request(int c)
{
	char b[16384];
	size_t got = 0;
	struct pollfd p = { c, POLLIN, 0 };
	ssize_t k;

	while (got < sizeof(b) - 1 && poll(&p, 1, 2000) == 1) {
		if ((k = recv(c, b + got, sizeof(b) - 1 - got, 0)) <= 0)
			return;
		got += (size_t)k;
		b[got] = '\0';
		if (strstr(b, "\r\n\r\n") != NULL)
			return;
	}
}

static void *
serve(void *arg)
{
	int c;

	(void)arg;
	for (;;) {
		if ((c = accept(lfd, NULL, NULL)) < 0)
			continue;
		read_request(c);
		pthread_mutex_lock(&mu);
		if (next_piece < npieces) {
			(void)send(c, piece[next_piece], plen[next_piece],
			    MSG_NOSIGNAL);
			next_piece++;
		}
		pthread_mutex_unlock(&mu);
		shutdown(c, SHUT_WR);
		close(c);
	}
	return NULL;
}

static void
server_start(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	static char proxy[64];
	pthread_t t;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(lfd, 64) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) != 0)
		abort();
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/obj",
	    (unsigned)ntohs(a.sin_port));
	snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%u",
	    (unsigned)ntohs(a.sin_port));
	setenv("all_proxy", proxy, 1);
	setenv("http_proxy", proxy, 1);
	unsetenv("no_proxy");
	unsetenv("NO_PROXY");
	if (pthread_create(&t, NULL, serve, NULL) != 0)
		abort();
	pthread_detach(t);
}

/* Split the input into the server's answers. */
static void
pieces_set(const uint8_t *p, size_t n)
{
	const uint8_t *e, *s;

	pthread_mutex_lock(&mu);
	npieces = next_piece = 0;
	for (e = p != NULL ? p + n : NULL; p != NULL && npieces < PIECES;) {
		s = memmem(p, (size_t)(e - p), SEP, 3);
		piece[npieces] = p;
		plen[npieces++] = (s != NULL ? s : e) - p;
		if (s == NULL)
			break;
		p = s + 3;
	}
	pthread_mutex_unlock(&mu);
}

static void
sequential(struct ovl_remote *r, uint64_t off, uint64_t len)
{
	uint64_t end = len == 0 ? UINT64_MAX : off + len, total = 0;
	uint64_t size = ovl_remote_size(r);
	char buf[700];
	ssize_t k;
	int calls = 0;

	ovl_remote_seek(r, off, end);
	while (calls++ < 2000 && (k = ovl_remote_read(r, buf,
	    sizeof(buf))) != 0) {
		if (k < 0) {
			if (ovl_remote_err(r)[0] == '\0')
				abort();
			return;
		}
		if ((size_t)k > sizeof(buf))
			abort();
		total += (uint64_t)k;
		if (off + total > size || (end != UINT64_MAX &&
		    off + total > end))
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	struct ovl_remote_conf conf = { 2, 0.0, 3.0, NULL };
	struct ovl_remote *r;
	char err[1024];
	uint8_t *copy, buf[4096];
	uint64_t off, size;
	size_t len;
	ssize_t k;

	if (n < 3 || n > 16384)
		return 0;
	if (lfd < 0)
		server_start();
	ovl_remote_configure(&conf);
	copy = malloc(n > 3 ? n - 3 : 1);
	if (copy == NULL)
		abort();
	memcpy(copy, data + 3, n - 3);
	pieces_set(copy, n - 3);
	off = data[1] * 7u;
	len = data[2] * 16u;
	switch (data[0] % 3) {
	case 0:
	case 1:
		err[0] = '\0';
		if ((r = ovl_remote_open(url, err, sizeof(err))) == NULL) {
			if (err[0] == '\0')
				abort();
			break;
		}
		size = ovl_remote_size(r);
		if (data[0] % 3 == 1)
			sequential(r, off, len);
		else if ((k = ovl_remote_pread(r, buf, len, off)) < 0) {
			if (ovl_remote_err(r)[0] == '\0')
				abort();
		} else if ((size_t)k > len || (k > 0 && off + (uint64_t)k >
		    size))
			abort();
		ovl_remote_close(r);
		break;
	default:
		if ((r = ovl_remote__new(url, NULL)) == NULL)
			abort();
		if (ovl_remote__get_all(r) != 0 && ovl_remote_err(r)[0] ==
		    '\0')
			abort();
		ovl_remote_close(r);
	}
	pieces_set(NULL, 0);
	free(copy);
	return 0;
}
