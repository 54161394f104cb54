/* open_by_handle_at: a file opened by its handle (name_to_handle_at), not
 * by a path the view sees. Needs CAP_DAC_READ_SEARCH (root).
 *
 *   by_handle VICTIM    name_to_handle_at(VICTIM), open_by_handle_at O_WRONLY
 */
#include "escape.h"

int main(int argc, char **argv)
{
    if (argc != 2)
        unsupported("usage: by_handle VICTIM");
    struct file_handle *handle = malloc(sizeof *handle + MAX_HANDLE_SZ);
    handle->handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, argv[1], handle, &mount_id, 0)) {
        if (errno == EOPNOTSUPP)
            unsupported("this filesystem has no file handles");
        fail("name_to_handle_at");
    }
    int mount_fd = open(dir_of(argv[1]), O_RDONLY | O_DIRECTORY);
    if (mount_fd < 0)
        fail("open the directory");
    int fd = open_by_handle_at(mount_fd, handle, O_WRONLY | O_TRUNC);
    if (fd < 0)
        fail("open_by_handle_at");
    write_mark(fd, "write");
    return 0;
}
