"""Processes the monitor forks to serve a view (vnet's namespace server,
the fs module's mount helper): each serves a socket until EOF."""
import os
import select
import signal
import socket


def fork_server(serve):
    """Fork a server process that runs serve(its end of a SOCK_SEQPACKET
    socketpair) and exits with its result; return the monitor's end. The
    server is forked twice, so that it is not the monitor's child (the C
    loop's waitpid(-1) must never see it)."""
    monitor_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked processes
        code = 1
        try:
            if os.fork() == 0:
                monitor_end.close()
                code = serve(server_end)
            else:
                code = 0
        finally:
            os._exit(code)
    os.waitpid(child, 0)
    server_end.close()
    return monitor_end


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
