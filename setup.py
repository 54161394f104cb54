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


def _source_packages(config):
    """The source tree laid out as an install lays it out (package-dir of
    pyproject.toml: umview.modules is modules/, ...), for the parsers of
    commands whose code lives there (umview-layer: modules/viewfs)."""
    import importlib.util

    for name, folder in config["tool"]["setuptools"]["package-dir"].items():
        if name == folder or name in sys.modules:
            continue
        where = os.path.join(HERE, folder)
        spec = importlib.util.spec_from_file_location(name, os.path.join(where, "__init__.py"),
                                                      submodule_search_locations=[where])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def data_files():
    files = [("share/umview/examples", sorted(glob.glob(os.path.join("examples", "*"))))]
    sys.path.insert(0, HERE)  # the source's umview (the parsers import nothing compiled)
    try:
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            config = tomllib.load(f)
        import umview  # noqa: F401 - the parent of the packages laid out next

        _source_packages(config)
        from umview import manuals

        version = config["project"]["version"]
        made = manuals.write(os.path.join("build", "share"), version)
    except ImportError as exc:  # argparse-manpage or shtab missing: build-system.requires names them
        print(f"umview: no man pages or completion ({exc})", file=sys.stderr)
        return files
    finally:
        sys.path.remove(HERE)
    return files + [(where, [os.path.relpath(p, HERE) for p in paths]) for where, paths in sorted(made.items())]


setup(cffi_modules=["build_core.py:ffi"], data_files=data_files())
