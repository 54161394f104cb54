/* acct(VICTIM): the kernel appends an accounting record to VICTIM at each
 * process exit. Needs CAP_SYS_PACCT (root). A child is made to exit, then
 * accounting is turned off again.
 *
 *   acct VICTIM
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: acct VICTIM");
    if (acct(argv[1])) {
        if (errno == ENOSYS)
            unsupported("no process accounting in this kernel");
        fail("acct");
    }
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    if (acct(NULL))
        fail("acct(NULL)");
    return 0;
}
