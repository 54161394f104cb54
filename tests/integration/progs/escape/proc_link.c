/* Paths through /proc's magic links: the kernel jumps to the process's own
 * root or cwd, not to what a view shows there.
 *
 *   proc_link MODE VICTIM     write VICTIM through
 *     root-self    /proc/self/root/VICTIM
 *     root-pid     /proc/<own pid>/root/VICTIM
 *     root-parent  /proc/<parent pid>/root/VICTIM
 *     cwd          /proc/self/cwd/NAME, after chdir to VICTIM's directory
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 3)
        unsupported("usage: proc_link root-self|root-pid|root-parent|cwd VICTIM");
    const char *mode = argv[1], *victim = argv[2];
    char path[8192];
    if (!strcmp(mode, "root-self"))
        snprintf(path, sizeof path, "/proc/self/root%s", victim);
    else if (!strcmp(mode, "root-pid"))
        snprintf(path, sizeof path, "/proc/%d/root%s", (int)getpid(), victim);
    else if (!strcmp(mode, "root-parent"))
        snprintf(path, sizeof path, "/proc/%d/root%s", (int)getppid(), victim);
    else if (!strcmp(mode, "cwd")) {
        if (chdir(dir_of(victim)))
            fail("chdir");
        snprintf(path, sizeof path, "/proc/self/cwd/%s", name_of(victim));
    } else
        unsupported("unknown mode");
    write_path(path);
    return 0;
}
