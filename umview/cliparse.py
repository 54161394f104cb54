"""The argument parser of umview's commands (umview, umview-layer, vumount,
um_add_service...): a usage error is one line that names the cause, then
where the help is, with status 2; every command answers --version."""
import argparse


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.add_argument("--version", action=_VersionAction, nargs=0, help="show the version and exit")

    def error(self, message):
        self.exit(2, f"{self.prog}: {message}\ntry '{self.prog} --help'\n")


class _VersionAction(argparse.Action):
    """--version, looked up only when asked (importlib.metadata costs 20 ms)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog} {version()}")
        parser.exit()


def version():
    """umview's version, as installed."""
    try:
        from importlib.metadata import version as of

        return of("umview")
    except Exception:  # noqa: BLE001 - a tree not installed
        return "unknown"
