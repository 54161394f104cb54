"""Man pages and shell completion of umview's commands, made from their
argparse parsers when the package is built (setup.py) with argparse-manpage
and shtab, and installed with it: PREFIX/share/man/man1/CMD.1,
PREFIX/share/bash-completion/completions/CMD, PREFIX/share/zsh/site-functions/_CMD.
"""
import os


def parsers():
    """{command: a function that makes its parser}, for every command."""
    from umview import cli, commands, imagecmd
    from umview.modules.viewfs import layercmd

    return {"umview": cli.build_parser, "umview-layer": layercmd.build_parser,
            "umview-image": imagecmd.build_parser, **commands.PARSERS}


SEE_ALSO = ("umview", "umview-layer", "vumount", "um_add_service", "um_ls_service")


def write(outdir, version):
    """Write the man pages and completion scripts under outdir (share/'s
    layout); {install directory under PREFIX: [the files made]}."""
    from argparse_manpage.manpage import Manpage
    import shtab

    made = {}

    def put(where, name, text):
        d = os.path.join(outdir, where)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        made.setdefault(os.path.join("share", where), []).append(path)

    for name, make in parsers().items():
        parser = make()
        summary = (parser.description or name).split(". ")[0].rstrip(".")
        data = {"project_name": "umview", "version": version, "description": summary,
                "url": "docs/user-guide.md in umview's source", "manual_title": "umview manual"}
        page = str(Manpage(parser, _data=data))
        also = ", ".join(rf"\fB{o}\fR(1)" for o in SEE_ALSO if o != name)
        put(os.path.join("man", "man1"), f"{name}.1", page + f"\n.SH SEE ALSO\n{also}\n")
        put(os.path.join("bash-completion", "completions"), name, shtab.complete(parser, shell="bash"))
        put(os.path.join("zsh", "site-functions"), f"_{name}", shtab.complete(parser, shell="zsh"))
    return made
