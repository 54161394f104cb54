"""Processes the monitor forks to serve a view (vnet's namespace server,
the fs module's mount helper): each serves a socket until EOF."""
import os
import select
import signal


def stop_server(pid, channel, timeout):
    """Close the server's channel (it exits on EOF) and wait up to timeout
    seconds for it to be gone; then kill it."""
    channel.close()
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        if not select.select([pidfd], [], [], timeout)[0]:
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)
