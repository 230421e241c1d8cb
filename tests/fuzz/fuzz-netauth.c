/*
 * libFuzzer target: the handshake of streams over sockets (src/lib/
 * net-auth.c), on a socketpair whose other end sends the input as a
 * peer would. The first byte picks the side: listener or connecting
 * (bit 0), reading or writing (bit 1), with a secret or by the peer's
 * credentials (bit 2), a correct proof appended after the input (bit 3,
 * with a secret: so the run id and proof checks are reached), and the
 * size of the pieces the input arrives in (bits 4-7, 0: all at once).
 * With bits 2 and 3 both set the input is a resume announcement instead
 * (ovl_net_recv_next).
 *
 * Nothing may crash or read past what was sent; every outcome but OK
 * says why; once the peer has closed, a step never asks for more; and
 * the outcome is the same whether the bytes came all at once or one by
 * one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "net-int.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t n);

#define HELLO_FIXED	44
static const char run_id[] = "fuzz-run";
static uint8_t secret[] = "0123456789abcdef0123456789abcdef";

/* The peer's proof: as net-auth.c's (see the top of that file). */
static void
peer_proof(int listener, const uint8_t *mine, size_t mlen,
    const uint8_t *theirs, size_t tlen, uint8_t out[OVL_NET__MAC_LEN])
{
	static const char label[] = "overlord stream proof ";
	uint8_t msg[sizeof(label) + 2 * OVL_NET__HELLO_MAX];
	size_t k = sizeof(label) - 1;
	unsigned olen = OVL_NET__MAC_LEN;

	memcpy(msg, label, k);
	/* the peer of a listener connects ('C'), and the other way round */
	msg[k++] = listener ? 'C' : 'L';
	memcpy(msg + k, listener ? mine : theirs, listener ? mlen : tlen);
	k += listener ? mlen : tlen;
	memcpy(msg + k, listener ? theirs : mine, listener ? tlen : mlen);
	k += listener ? tlen : mlen;
	if (HMAC(EVP_sha256(), secret, (int)sizeof(secret) - 1, msg, k, out,
	    &olen) == NULL)
		abort();
}

/* Read what the side under test sent, without waiting: its hello first. */
static void
drain(int fd, uint8_t *hello, size_t *got)
{
	uint8_t b[512];
	ssize_t k;

	while ((k = recv(fd, b, sizeof(b), MSG_DONTWAIT)) > 0) {
		size_t take = (size_t)k;

		if (*got < OVL_NET__HELLO_MAX) {
			if (take > OVL_NET__HELLO_MAX - *got)
				take = OVL_NET__HELLO_MAX - *got;
			memcpy(hello + *got, b, take);
			*got += take;
		}
	}
}

/* One handshake over the input, in pieces of piece bytes (0: one). */
static int
handshake(unsigned flags, const uint8_t *p, size_t n, size_t piece)
{
	struct ovl_net__cfg c = { .run_id = (char *)run_id };
	struct ovl_net ep = { .kind = flags & 1 ? EP_LISTEN : EP_CONNECT,
	    .dir = flags & 2 ? OVL_NET_WRITE : OVL_NET_READ };
	struct ovl_net__hs hs;
	uint8_t mine[OVL_NET__HELLO_MAX], mac[OVL_NET__MAC_LEN];
	char why[512];
	size_t off = 0, k, mgot = 0, tlen;
	int sv[2], rc;

	if (!(flags & 4)) {
		c.secret = secret;
		c.secret_len = sizeof(secret) - 1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	why[0] = '\0';
	rc = ovl_net__hs_start(&c, &ep, &hs, sv[0], ovl_net__now() + 5, why,
	    sizeof(why));
	while (rc == OVL_NET__HS_MORE && off < n) {
		k = piece == 0 || piece > n - off ? n - off : piece;
		if (send(sv[1], p + off, k, MSG_NOSIGNAL) != (ssize_t)k)
			abort();
		off += k;
		rc = ovl_net__hs_step(&c, &hs, why, sizeof(why));
		drain(sv[1], mine, &mgot);
	}
	if (rc == OVL_NET__HS_MORE && (flags & 8) && c.secret != NULL &&
	    n >= HELLO_FIXED && mgot >= HELLO_FIXED) {
		tlen = HELLO_FIXED + p[10];
		if (tlen <= n && tlen <= OVL_NET__HELLO_MAX) {
			peer_proof(flags & 1, mine, hs.mlen, p, tlen, mac);
			if (send(sv[1], mac, sizeof(mac), MSG_NOSIGNAL) !=
			    (ssize_t)sizeof(mac))
				abort();
			rc = ovl_net__hs_step(&c, &hs, why, sizeof(why));
		}
	}
	if (rc == OVL_NET__HS_MORE) {
		/* the peer is gone: the step must say how it ended */
		shutdown(sv[1], SHUT_WR);
		rc = ovl_net__hs_step(&c, &hs, why, sizeof(why));
		if (rc == OVL_NET__HS_MORE)
			abort();
	}
	if (rc != OVL_NET__HS_OK && why[0] == '\0')
		abort();
	close(sv[0]);
	close(sv[1]);
	return rc;
}

static void
next(const uint8_t *p, size_t n)
{
	uint64_t step;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	if (send(sv[1], p, n, MSG_NOSIGNAL) != (ssize_t)n)
		abort();
	shutdown(sv[1], SHUT_WR);
	errno = 0;
	if (ovl_net_recv_next(sv[0], 5, &step) == 0) {
		if (n < 16 || memcmp(p, "OVLNEXT\n", 8) != 0)
			abort();
	} else if (errno != EPROTO && errno != ECONNRESET)
		abort();
	close(sv[0]);
	close(sv[1]);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
	unsigned flags;
	int whole, bytes;

	if (n == 0 || n > 4096)
		return 0;
	flags = data[0];
	data++;
	n--;
	if ((flags & 12) == 12) {
		next(data, n);
		return 0;
	}
	whole = handshake(flags, data, n, flags >> 4);
	/* how the bytes arrive does not change the outcome */
	bytes = handshake(flags, data, n, 1);
	if (whole != bytes)
		abort();
	return 0;
}
