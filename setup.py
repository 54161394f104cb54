# The project is described in pyproject.toml; this file hands the cffi build
# of the C core to setuptools (cffi_modules has no pyproject.toml form), and
# installs what is made from the commands' parsers at build time (man pages,
# shell completion: umview/manuals.py) and the examples, under PREFIX/share.
import glob
import os
import sys
import tomllib

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def data_files():
    files = [("share/umview/examples", sorted(glob.glob(os.path.join("examples", "*"))))]
    sys.path.insert(0, HERE)  # the source's umview (the parsers import nothing compiled)
    try:
        from umview import manuals

        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            version = tomllib.load(f)["project"]["version"]
        made = manuals.write(os.path.join("build", "share"), version)
    except ImportError as exc:  # argparse-manpage or shtab missing: build-system.requires names them
        print(f"umview: no man pages or completion ({exc})", file=sys.stderr)
        return files
    finally:
        sys.path.remove(HERE)
    return files + [(where, [os.path.relpath(p, HERE) for p in paths]) for where, paths in sorted(made.items())]


setup(cffi_modules=["build_core.py:ffi"], data_files=data_files())
