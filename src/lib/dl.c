/*
 * dl: optional libraries, loaded at their first use (see dl.h).
 */
#include "dl.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef OVL_PKGLIBDIR
#define OVL_PKGLIBDIR "/usr/local/lib/overlord"
#endif

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int
load(struct ovl_dl *lib)
{
	const struct ovl_dl_sym *s;
	const char *e;
	void *h;

	/* RTLD_LOCAL: its names never bind another library's calls */
	if ((h = dlopen(lib->file, RTLD_NOW | RTLD_LOCAL)) == NULL) {
		e = dlerror();
		snprintf(lib->err, sizeof(lib->err), "cannot load %s (%s need "
		    "it; Debian package %s): %s", lib->file, lib->need,
		    lib->pkg, e != NULL ? e : "unknown error");
		return -1;
	}
	for (s = lib->syms; s->name != NULL; s++) {
		void *p;

		(void)dlerror();
		p = dlsym(h, s->name);
		if (p == NULL) {
			e = dlerror();
			snprintf(lib->err, sizeof(lib->err), "cannot load %s "
			    "(%s need it; Debian package %s): no function %s%s%s",
			    lib->file, lib->need, lib->pkg, s->name,
			    e != NULL ? ": " : "", e != NULL ? e : "");
			dlclose(h);
			return -1;
		}
		/* POSIX: a function's address passes through void * */
		memcpy(s->fn, &p, sizeof(p));
	}
	return 0;
}

int
ovl_dl_load(struct ovl_dl *lib)
{
	int st;

	pthread_mutex_lock(&mu);
	if (lib->state == 0)
		lib->state = load(lib) == 0 ? 1 : -1;
	st = lib->state;
	pthread_mutex_unlock(&mu);
	return st == 1 ? 0 : -1;
}

const char *
ovl_dl_own(const char *name, const char *env)
{
	static char path[PATH_MAX];
	char exe[PATH_MAX];
	const char *e = getenv(env);
	ssize_t n;
	char *slash;

	if (e != NULL && *e != '\0')
		return e;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if ((slash = strrchr(exe, '/')) != NULL) {
			*slash = '\0';
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", exe,
			    name) < sizeof(path) && access(path, R_OK) == 0)
				return path;
		}
	}
	snprintf(path, sizeof(path), "%s/%s", OVL_PKGLIBDIR, name);
	return path;
}
