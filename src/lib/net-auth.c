/*
 * net: the run's secret and the handshake. See net.h and net-int.h.
 *
 * Each side sends a hello:
 *   "OVLAUTH\n"  version (1)  role ('R' reads, 'W' writes)  run id length
 *   0  nonce (32 random bytes)  run id
 * then, once the peer's hello is checked (magic, version, the other
 * direction, the same run id), its proof: HMAC-SHA256 under the secret of
 * "overlord stream proof ", 'L' (listener) or 'C' (connecting side), the
 * listener's hello and the connecting side's hello. Both proofs cover
 * both fresh nonces; the role letter keeps a proof from being replayed to
 * its own side.
 *
 * Over a UNIX socket a side without a secret goes by the peer's
 * credentials instead (SO_PEERCRED: this user, or root): it sends
 * "OVLPEER\n" and takes the same 8 bytes from its peer. A side with a
 * secret facing one without refuses it, each naming why.
 */
#include "net-int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "buf.h"
#include "dl.h"
#include "err.h"

#define HELLO_MAGIC	"OVLAUTH\n"	/* 8 bytes, first on the wire */
#define PEER_MAGIC	"OVLPEER\n"	/* 8 bytes, all on the wire: credentials */
#define HELLO_VERSION	1
#define NONCE_LEN	32
#define HELLO_FIXED	(12 + NONCE_LEN)	/* then the run id */
#define MAC_LEN		OVL_NET__MAC_LEN
_Static_assert(OVL_NET__HELLO_MAX == HELLO_FIXED + OVL_NET__RUNID_MAX,
    "net-int.h's hello size");
#define RUNID_MAX	OVL_NET__RUNID_MAX
#define SECRET_MIN	16
#define SECRET_MAX	4096

/*
 * libcrypto, loaded at the first handshake (lib/dl.h): a stage whose
 * streams are pipes and files never maps it.
 */
static struct {
	__typeof__(HMAC)		*hmac;
	__typeof__(EVP_sha256)		*sha256;
	__typeof__(RAND_bytes)		*rand_bytes;
	__typeof__(CRYPTO_memcmp)	*memcmp_ct;
} crypto;
static const struct ovl_dl_sym crypto_syms[] = {
	{ "HMAC", &crypto.hmac }, { "EVP_sha256", &crypto.sha256 },
	{ "RAND_bytes", &crypto.rand_bytes },
	{ "CRYPTO_memcmp", &crypto.memcmp_ct }, { NULL, NULL }
};
static struct ovl_dl crypto_lib = { OVL_SONAME_CRYPTO,
    "streams over TCP and UNIX sockets", "libssl3", crypto_syms, 0, "" };

/* ---- the secret ---- */

static void
take_secret(struct ovl_net__cfg *c, const uint8_t *p, size_t n,
    const char *from)
{
	if (n > 0 && p[n - 1] == '\n')
		n--;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	if (n < SECRET_MIN || n > SECRET_MAX)
		ovl_errx(OVL_EXIT_USAGE, "the secret in %s has %zu bytes: it "
		    "needs %d to %d", from, n, SECRET_MIN, SECRET_MAX);
	c->secret = ovl_xmalloc(n);
	memcpy(c->secret, p, n);
	c->secret_len = n;
}

void
ovl_net__load_secret(struct ovl_net__cfg *c, const char *spec, int optional)
{
	uint8_t buf[SECRET_MAX + 8];
	char from[512];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	const char *env;
	int fd;

	if (c->secret != NULL)
		return;
	if (c->secret_file != NULL) {
		fd = open(c->secret_file, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			ovl_err(OVL_EXIT_USAGE, "cannot open secret file '%s'",
			    c->secret_file);
		if (fstat(fd, &st) != 0)
			ovl_err(OVL_EXIT_USAGE, "cannot stat '%s'",
			    c->secret_file);
		if (!S_ISREG(st.st_mode))
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' is not a "
			    "regular file", c->secret_file);
		if ((st.st_mode & 077) != 0)
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' has mode %04o: "
			    "it must be readable by its owner only (chmod 600)",
			    c->secret_file, (unsigned)(st.st_mode & 07777));
		if (st.st_uid != geteuid())
			ovl_errx(OVL_EXIT_USAGE, "secret file '%s' belongs to "
			    "uid %u, not to this user", c->secret_file,
			    (unsigned)st.st_uid);
		while (len < sizeof(buf)) {
			n = read(fd, buf + len, sizeof(buf) - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				ovl_err(OVL_EXIT_USAGE, "cannot read '%s'",
				    c->secret_file);
			if (n == 0)
				break;
			len += (size_t)n;
		}
		close(fd);
		snprintf(from, sizeof(from), "'%s'", c->secret_file);
		take_secret(c, buf, len, from);
		explicit_bzero(buf, sizeof(buf));
		return;
	}
	env = getenv("OVL_SECRET");
	if (env != NULL && *env != '\0') {
		take_secret(c, (const uint8_t *)env, strlen(env), "OVL_SECRET");
		return;
	}
	if (optional)
		return;
	ovl_errx(OVL_EXIT_USAGE, "'%s' needs the run's secret: --secret-file "
	    "FILE, OVL_SECRET_FILE or OVL_SECRET", spec);
}

/*
 * Exactly n bytes in or out before the deadline: 0; -1 with errno (EOF is
 * ECONNRESET, the deadline ETIMEDOUT, the stop function EINTR). *done
 * (when not NULL) counts the bytes moved either way.
 */
static int
xfer_n(int fd, void *buf, size_t n, int out, double deadline, size_t *done)
{
	uint8_t *p = buf;
	ssize_t k;
	int rc;

	while (n > 0) {
		rc = ovl_net__wait_fd(fd, out ? POLLOUT : POLLIN, deadline);
		if (rc == 0)
			errno = ETIMEDOUT;
		if (rc <= 0)
			return -1;
		k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) :
		    recv(fd, p, n, MSG_DONTWAIT);
		if (k == 0 && !out) {
			errno = ECONNRESET;
			return -1;
		}
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k < 0)
			return -1;
		p += k;
		n -= (size_t)k;
		*done += (size_t)k;
	}
	return 0;
}

static int
xfer(int fd, void *buf, size_t n, int out, double deadline)
{
	size_t done = 0;

	return xfer_n(fd, buf, n, out, deadline, &done);
}

/* ---- the handshake ---- */

static size_t
hello_encode(const struct ovl_net__cfg *c, uint8_t *h, int dir,
    const uint8_t *nonce)
{
	const char *id = c->run_id != NULL ? c->run_id : "";
	size_t idlen = strlen(id);

	memcpy(h, HELLO_MAGIC, 8);
	h[8] = HELLO_VERSION;
	h[9] = dir == OVL_NET_WRITE ? 'W' : 'R';
	h[10] = (uint8_t)idlen;
	h[11] = 0;
	memcpy(h + 12, nonce, NONCE_LEN);
	memcpy(h + HELLO_FIXED, id, idlen);
	return HELLO_FIXED + idlen;
}

/*
 * The proof of side who ('L' the listener, 'C' the connecting side):
 * HMAC-SHA256 under the secret of a label, who, and both hellos (the
 * listener's first). Each side's proof covers the other's fresh nonce, and
 * who keeps one side's proof from being replayed as the other's.
 */
static void
proof(const struct ovl_net__cfg *c, char who, const uint8_t *lh, size_t llen,
    const uint8_t *ch, size_t clen, uint8_t out[MAC_LEN])
{
	static const char label[] = "overlord stream proof ";
	uint8_t msg[sizeof(label) + 2 * (HELLO_FIXED + RUNID_MAX)];
	size_t n = sizeof(label) - 1;
	unsigned olen = MAC_LEN;

	memcpy(msg, label, n);
	msg[n++] = (uint8_t)who;
	memcpy(msg + n, lh, llen);
	n += llen;
	memcpy(msg + n, ch, clen);
	n += clen;
	if (crypto.hmac(crypto.sha256(), c->secret, (int)c->secret_len, msg, n, out,
	    &olen) == NULL || olen != MAC_LEN)
		ovl_errx(OVL_EXIT_DATA, "HMAC-SHA256 failed (libcrypto)");
}

/* The first got bytes of p are a prefix of the 8-byte magic m (got > 0). */
static int
magic_prefix(const uint8_t *p, size_t got, const char *m)
{
	return got > 0 && memcmp(p, m, got < 8 ? got : 8) == 0;
}

/* Phases of a handshake: what it reads next. */
enum { PH_PEER, PH_HELLO, PH_RUNID, PH_PROOF };

/* Expect n more bytes into hs->theirs (PH_*) or hs->got (PH_PROOF). */
static void
expect(struct ovl_net__hs *hs, int phase, size_t n)
{
	hs->phase = phase;
	hs->need = n;
}

/* The handshake without a secret, on a UNIX socket (see the top). */
static int
peer_start(struct ovl_net__hs *hs, char *why, size_t wlen)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(hs->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) {
		snprintf(why, wlen, "no credentials of the peer (%s) and no "
		    "secret", strerror(errno));
		return OVL_NET__HS_REFUSED;
	}
	if (cr.uid != geteuid() && cr.uid != 0) {
		snprintf(why, wlen, "it is of uid %u, not this user's (%u), "
		    "and there is no secret", (unsigned)cr.uid,
		    (unsigned)geteuid());
		return OVL_NET__HS_REFUSED;
	}
	expect(hs, PH_PEER, 8);
	if (xfer(hs->fd, PEER_MAGIC, 8, 1, hs->deadline) != 0)
		return ovl_net__hs_fail(hs, errno, why, wlen);
	return OVL_NET__HS_MORE;
}

int
ovl_net__hs_start(const struct ovl_net__cfg *c, const struct ovl_net *n,
    struct ovl_net__hs *hs, int fd, double deadline, char *why, size_t wlen)
{
	uint8_t nonce[NONCE_LEN];

	memset(hs, 0, sizeof(*hs));
	hs->fd = fd;
	hs->deadline = deadline;
	hs->listener = n->kind == EP_LISTEN;
	hs->dir = n->dir;
	if (c->secret == NULL)	/* a UNIX socket (ovl_net_new) */
		return peer_start(hs, why, wlen);
	if (ovl_dl_load(&crypto_lib) != 0)
		ovl_errx(OVL_EXIT_USAGE, "%s", crypto_lib.err);
	if (crypto.rand_bytes(nonce, sizeof(nonce)) != 1)
		ovl_errx(OVL_EXIT_DATA, "cannot draw a random nonce (RAND_bytes)");
	hs->mlen = hello_encode(c, hs->mine, n->dir, nonce);
	expect(hs, PH_HELLO, HELLO_FIXED);
	if (xfer(fd, hs->mine, hs->mlen, 1, deadline) != 0)
		return ovl_net__hs_fail(hs, errno, why, wlen);
	return OVL_NET__HS_MORE;
}

/* Bytes that are no handshake's: refused, saying what they look like. */
static int
garbage(const struct ovl_net__hs *hs, char *why, size_t wlen)
{
	if (hs->phase == PH_PEER && magic_prefix(hs->theirs, hs->got,
	    HELLO_MAGIC))
		snprintf(why, wlen, "it proves the run's secret and this side "
		    "has none (--secret-file, OVL_SECRET_FILE or OVL_SECRET)");
	else if (hs->phase == PH_HELLO && magic_prefix(hs->theirs, hs->got,
	    PEER_MAGIC))
		snprintf(why, wlen, "it has no secret (it goes by its user's "
		    "credentials): give it the run's secret too, or this side "
		    "none");
	else
		snprintf(why, wlen, "not an overlord peer (it sent no greeting "
		    "but %zu other bytes)", hs->got);
	return OVL_NET__HS_REFUSED;
}

int
ovl_net__hs_fail(struct ovl_net__hs *hs, int e, char *why, size_t wlen)
{
	const char *m = strerror(e);

	errno = e;
	switch (hs->phase) {
	case PH_PEER:
		snprintf(why, wlen, "no greeting: %s", e == ECONNRESET ||
		    e == EPIPE ? "the connection closed (the peer refused "
		    "this user?)" : m);
		return OVL_NET__HS_IO;
	case PH_RUNID:
		snprintf(why, wlen, "a greeting cut short: %s", m);
		return OVL_NET__HS_IO;
	case PH_PROOF:
		snprintf(why, wlen, "no proof: %s", e == ECONNRESET ?
		    "the connection closed (a wrong secret?)" : m);
		/* a peer that leaves here refused us: retrying will not help */
		return e == ECONNRESET || e == EPIPE ? OVL_NET__HS_REFUSED :
		    OVL_NET__HS_IO;
	default:
		snprintf(why, wlen, "no greeting: %s", e == ECONNRESET ?
		    "the connection closed" : m);
		return OVL_NET__HS_IO;
	}
}

/* The peer's whole fixed hello is in: check it, expect its run id. */
static int
hello_in(struct ovl_net__hs *hs, char *why, size_t wlen)
{
	const uint8_t *t = hs->theirs;

	if (t[8] != HELLO_VERSION || (t[9] != 'R' && t[9] != 'W') ||
	    t[11] != 0) {
		snprintf(why, wlen, "a greeting of another version (%u)", t[8]);
		return OVL_NET__HS_REFUSED;
	}
	if (t[10] > RUNID_MAX) {
		snprintf(why, wlen, "a run id too long (%u bytes; at most %d)",
		    t[10], RUNID_MAX);
		return OVL_NET__HS_REFUSED;
	}
	expect(hs, PH_RUNID, t[10]);
	return OVL_NET__HS_MORE;
}

/* The peer's run id is in: check it, send this side's proof. */
static int
runid_in(const struct ovl_net__cfg *c, struct ovl_net__hs *hs, char *why,
    size_t wlen)
{
	const char *myid = c->run_id != NULL ? c->run_id : "";
	uint8_t *t = hs->theirs, mac[MAC_LEN];
	char id[RUNID_MAX + 1];

	hs->tlen = HELLO_FIXED + t[10];
	memcpy(id, t + HELLO_FIXED, t[10]);
	id[t[10]] = '\0';
	if (!ovl_net__valid_run_id(id) || strlen(id) != t[10]) {
		snprintf(why, wlen, "a bad run id in its greeting");
		return OVL_NET__HS_REFUSED;
	}
	if ((t[9] == 'W') == (hs->dir == OVL_NET_WRITE)) {
		snprintf(why, wlen, "it %s the stream too", hs->dir ==
		    OVL_NET_WRITE ? "writes" : "reads");
		return OVL_NET__HS_REFUSED;
	}
	if (strcmp(id, myid) != 0) {
		snprintf(why, wlen, "it is of run '%s', not '%s' (--run-id)",
		    id, myid);
		return OVL_NET__HS_REFUSED;
	}
	if (hs->listener)
		proof(c, 'L', hs->mine, hs->mlen, t, hs->tlen, mac);
	else
		proof(c, 'C', t, hs->tlen, hs->mine, hs->mlen, mac);
	expect(hs, PH_PROOF, MAC_LEN);
	if (xfer(hs->fd, mac, MAC_LEN, 1, hs->deadline) != 0)
		return ovl_net__hs_fail(hs, errno, why, wlen);
	return OVL_NET__HS_MORE;
}

/* The peer's proof is in: is it of the secret? */
static int
proof_in(const struct ovl_net__cfg *c, struct ovl_net__hs *hs, char *why,
    size_t wlen)
{
	uint8_t mac[MAC_LEN];

	if (hs->listener)
		proof(c, 'C', hs->mine, hs->mlen, hs->theirs, hs->tlen, mac);
	else
		proof(c, 'L', hs->theirs, hs->tlen, hs->mine, hs->mlen, mac);
	if (crypto.memcmp_ct(mac, hs->got_mac, MAC_LEN) != 0) {
		snprintf(why, wlen, "a wrong proof (another secret)");
		return OVL_NET__HS_REFUSED;
	}
	return OVL_NET__HS_OK;
}

int
ovl_net__hs_step(const struct ovl_net__cfg *c, struct ovl_net__hs *hs,
    char *why, size_t wlen)
{
	uint8_t *dst;
	size_t off;
	ssize_t k;

	for (;;) {
		off = hs->phase == PH_RUNID ? HELLO_FIXED : 0;
		dst = hs->phase == PH_PROOF ? hs->got_mac : hs->theirs + off;
		if (hs->got - off < hs->need) {
			k = recv(hs->fd, dst + (hs->got - off), hs->need -
			    (hs->got - off), MSG_DONTWAIT);
			if (k < 0 && (errno == EINTR || errno == EAGAIN ||
			    errno == EWOULDBLOCK))
				return OVL_NET__HS_MORE;
			if (k <= 0)
				return ovl_net__hs_fail(hs, k == 0 ? ECONNRESET :
				    errno, why, wlen);
			hs->got += (size_t)k;
			/* bytes of no handshake are refused at once */
			if ((hs->phase == PH_PEER && !magic_prefix(hs->theirs,
			    hs->got, PEER_MAGIC)) || (hs->phase == PH_HELLO &&
			    !magic_prefix(hs->theirs, hs->got, HELLO_MAGIC)))
				return garbage(hs, why, wlen);
			if (hs->got - off < hs->need)
				return OVL_NET__HS_MORE;
		}
		switch (hs->phase) {
		case PH_PEER:
			return OVL_NET__HS_OK;
		case PH_HELLO:
			if ((k = hello_in(hs, why, wlen)) != OVL_NET__HS_MORE)
				return (int)k;
			break;
		case PH_RUNID:
			if ((k = runid_in(c, hs, why, wlen)) != OVL_NET__HS_MORE)
				return (int)k;
			hs->got = 0;
			break;
		default:
			return proof_in(c, hs, why, wlen);
		}
	}
}

int
ovl_net__handshake(const struct ovl_net__cfg *c, const struct ovl_net *n,
    int fd, double deadline, char *why, size_t wlen)
{
	struct ovl_net__hs hs;
	int rc;

	rc = ovl_net__hs_start(c, n, &hs, fd, deadline, why, wlen);
	while (rc == OVL_NET__HS_MORE) {
		rc = ovl_net__wait_fd(fd, POLLIN, deadline);
		if (rc <= 0)
			return ovl_net__hs_fail(&hs, rc == 0 ? ETIMEDOUT :
			    errno, why, wlen);
		rc = ovl_net__hs_step(c, &hs, why, wlen);
	}
	return rc;
}

/* ---- the resume announcement ---- */

#define NEXT_MAGIC	"OVLNEXT\n"	/* then the step, 8 bytes little-endian */
#define NEXT_LEN	16

int
ovl_net_recv_next(int fd, double timeout_s, uint64_t *step)
{
	uint8_t b[NEXT_LEN];
	uint64_t v = 0;
	int i;

	if (xfer(fd, b, sizeof(b), 0, ovl_net__now() + timeout_s) != 0)
		return -1;
	if (memcmp(b, NEXT_MAGIC, 8) != 0) {
		errno = EPROTO;
		return -1;
	}
	for (i = 7; i >= 0; i--)
		v = v << 8 | b[8 + i];
	*step = v;
	return 0;
}
