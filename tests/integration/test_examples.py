"""The runnable examples in examples/ do what their comments say."""
import os
import subprocess
import sys

from conftest import REPO, run

BIN = os.path.dirname(sys.executable)


def test_sandboxed_tests_changes_nothing_real_and_reaches_no_network(tmp_path):
    probe = f"/etc/umview-example-{os.getpid()}"
    script = (f"echo x > {probe} && rm -f /etc/hostname && test ! -e /etc/hostname && "
              f"{sys.executable} -c \"import socket; socket.create_connection(('127.0.0.1', 9), timeout=2)\"")
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], TMPDIR=str(tmp_path))
    r = run([os.path.join(REPO, "examples", "sandboxed_tests.sh"), "sh", "-c", script], env=env)
    err = r.stderr.decode()
    assert r.returncode == 1  # the connection failed, as the command's status says
    assert "Address family not supported" in err
    assert f"C {probe} (file)\n" in err and "D /etc/hostname (file)\n" in err
    assert not os.path.exists(probe) and os.path.exists("/etc/hostname")
    assert os.listdir(tmp_path) == []  # the layer is gone
    r = subprocess.run([os.path.join(REPO, "examples", "sandboxed_tests.sh")], capture_output=True)
    assert r.returncode == 2 and b"usage" in r.stderr
