#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
/* LD_PRELOAD shim for tests/test_parse_exit.py: delays every GIL acquisition through
   PyGILState_Ensure by a thread other than the main one (in a reader, Arrow's threads) by
   SLOWGIL_US microseconds (default 20 ms), so that a thread still about to take the GIL when
   the interpreter starts finalising (the process then aborts) does so in every run, not once
   in hundreds. */
typedef int (*ensure_fn)(void);
int PyGILState_Ensure(void) {
    static ensure_fn real;
    if (!real) real = (ensure_fn)dlsym(RTLD_NEXT, "PyGILState_Ensure");
    if (syscall(SYS_gettid) != getpid()) {
        const char *us = getenv("SLOWGIL_US");
        usleep(us ? atoi(us) : 20000);
    }
    return real();
}
