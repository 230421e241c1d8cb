/*
 * dl: optional libraries, loaded at their first use.
 *
 * A library that only some inputs need (libcurl for http(s):// and s3://,
 * libarchive for tar and gzip/bzip2/xz, libcrypto for the socket
 * handshake, libsnappy for parquet pages, the SentencePiece shim) is not
 * linked: every process would map it and its dependencies (libcurl brings
 * a TLS stack, Kerberos and LDAP; libarchive ICU and libxml2; snappy and
 * sentencepiece libstdc++), about 9 MB of resident pages per ovl-source
 * before its first byte, counted in the RSS of each of a run's sources.
 * The module that calls a library holds a table of its functions (typed
 * with __typeof__ from the library's own header) and fills it here.
 */
#ifndef OVL_DL_H
#define OVL_DL_H

#include <stddef.h>

/*
 * The sonames come from configure (the NEEDED entry of a program linked
 * with each library); these are Debian's, for a build without configure
 * (scripts/fuzz compiles src/lib on its own).
 */
#ifndef OVL_SONAME_CURL
#define OVL_SONAME_CURL		"libcurl.so.4"
#endif
#ifndef OVL_SONAME_CRYPTO
#define OVL_SONAME_CRYPTO	"libcrypto.so.3"
#endif
#ifndef OVL_SONAME_ARCHIVE
#define OVL_SONAME_ARCHIVE	"libarchive.so.13"
#endif
#ifndef OVL_SONAME_PCRE2
#define OVL_SONAME_PCRE2	"libpcre2-8.so.0"
#endif
#ifndef OVL_SONAME_SNAPPY
#define OVL_SONAME_SNAPPY	"libsnappy.so.1"
#endif
#ifndef OVL_SONAME_LZ4
#define OVL_SONAME_LZ4		"liblz4.so.1"
#endif
#ifndef OVL_SONAME_BROTLI
#define OVL_SONAME_BROTLI	"libbrotlidec.so.1"
#endif

/* One function of a library: its name and where its address goes. */
struct ovl_dl_sym {
	const char	*name;
	void		*fn;		/* the address of a function pointer */
};

/* One library, the state of its loading; static, zero after the strings. */
struct ovl_dl {
	const char	*file;		/* soname, or a path (the shim) */
	const char	*need;		/* "http(s):// and s3:// inputs" */
	const char	*pkg;		/* the Debian package that has it */
	const struct ovl_dl_sym *syms;	/* NULL-named entry ends it */
	int		 state;		/* 0 not tried, 1 loaded, -1 failed */
	char		 err[512];	/* why it failed */
};

/*
 * Load lib (once: later calls give the first result, from any thread) and
 * fill every function pointer of lib->syms. 0, or -1 with lib->err:
 * "cannot load FILE (NEED need it; Debian package PKG): dlerror".
 */
int	ovl_dl_load(struct ovl_dl *lib);

/*
 * The path of one of overlord's own shared objects (name, "ovl-spm.so"):
 * the environment variable env when set and not empty (the tests: a
 * unit test's program is not beside it), else beside the running program
 * when it is there (a build tree), else in the installed $(pkglibdir).
 * Static storage.
 */
const char *ovl_dl_own(const char *name, const char *env);

#endif
