"""Generated documentation stays in step with the tables it is generated from."""
import os
import subprocess
import sys

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs")


def test_path_syscall_table_is_up_to_date():
    out = subprocess.run([sys.executable, os.path.join(DOCS, "gen_path_table.py")],
                         capture_output=True, check=True).stdout
    with open(os.path.join(DOCS, "path-syscalls.md"), "rb") as f:
        assert f.read() == out, "run: python3 docs/gen_path_table.py > docs/path-syscalls.md"
