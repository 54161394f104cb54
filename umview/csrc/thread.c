/* thread.c - per-thread state and the outstanding stop */
#include "internal.h"

tflag_t *tflags;
long pid_max = 4194304;

pid_t first_pid;
int first_status = -1;
int ssi_state; /* 0 unknown, 1 works, -1 absent */

/* the one outstanding stop handed to Python, and its thread */
struct um_sci cur_sci;
pid_t cur_tid;

int um_core_version(void) { return UM_CORE_VERSION; }

tflag_t *tf(pid_t tid)
{
    static tflag_t dummy;
    if (tid <= 0 || tid > pid_max) {
        dummy = 0;
        return &dummy;
    }
    return &tflags[tid];
}


int um_set_vcwd(int tid, int on)
{
    if (tid <= 0 || tid > pid_max)
        return -EINVAL;
    *tf(tid) &= (tflag_t)~(TF_VCWD | TF_FAITHFUL);
    if (on & UM_VCWD)
        *tf(tid) |= TF_VCWD;
    if ((on & UM_VCWD) && (on & UM_VCWD_FAITHFUL))
        *tf(tid) |= TF_FAITHFUL;
    return 0;
}
