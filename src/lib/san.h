/*
 * san: what a sanitized build of the tools adds to every program.
 *
 * configure links each program of an --enable-sanitizers build with
 * -Wl,-u,ovl_san_exit, which pulls san.c out of libovl.a; in any other
 * build the file holds nothing that runs.
 */
#ifndef OVL_SAN_H
#define OVL_SAN_H

/*
 * Maps, in one call, every page of the program's writable segments that
 * no one has touched yet, so that LeakSanitizer's scan of them at exit
 * reads mapped pages instead of taking one page fault per page (most of
 * the runtime's own tables are never touched).  Registered with atexit(3)
 * by a constructor, after the runtime registered its leak check, so it
 * runs before that check.  Harmless and useless without LeakSanitizer.
 */
void	ovl_san_exit(void);

#endif
