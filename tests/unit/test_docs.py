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


def test_relative_links_in_docs_point_to_files():
    """Every relative markdown link in docs/*.md and README.md names a file that exists."""
    import glob
    import re

    root = os.path.dirname(DOCS)
    link = re.compile(r"\]\(([^)\s]+)\)")
    broken = []
    for md in sorted(glob.glob(os.path.join(DOCS, "*.md"))) + [os.path.join(root, "README.md")]:
        with open(md, encoding="utf-8") as f:
            text = f.read()
        for target in link.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor in the same page
            path = target.split("#", 1)[0]
            if not os.path.exists(os.path.join(os.path.dirname(md), path)):
                broken.append(f"{os.path.relpath(md, root)}: {target}")
    assert not broken, "broken relative links:\n" + "\n".join(broken)
