"""Every set of syscall names is derived from the table's rows
(syscalls/table.py): a module asks for a class (``calls("opens")``), it
does not spell the names out, so a call added to the table joins every
module that acts on its class at once."""
import ast
import pathlib

import pytest

from umview.syscalls import table
from umview.syscalls import calls

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: where project code lives (tests may name calls: they check behaviour)
CODE = ("umview", "modules", "syscalls", "arch", "bench", "docs", "examples")
NAMES = set(table.SIGNATURES)


def spelled_lists(path):
    """(line, names) of each literal set, tuple or list of two or more
    strings that are all syscall names."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and len(node.elts) >= 2:
            values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if all(isinstance(v, str) and v in NAMES for v in values):
                out.append((node.lineno, values))
    return out


def test_no_module_spells_out_a_list_of_syscall_names():
    found = []
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, values in spelled_lists(path):
                found.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(values)}")
    assert not found, "use syscalls.calls(CLASS) (a class of the table's rows):\n" + "\n".join(found)


def test_the_check_finds_a_spelled_list(tmp_path):
    p = tmp_path / "m.py"
    p.write_text('OPENS = frozenset({"open", "openat"})\nMODES = ("r", "w")\n')
    assert spelled_lists(p) == [(1, ["open", "openat"])]


def test_calls_gives_a_class_and_refuses_an_unknown_one():
    assert calls("opens") == {"open", "openat", "openat2", "creat"}
    assert calls("unlinks", "renames") == {"unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2"}
    with pytest.raises(KeyError):
        calls("opnes")


def test_every_row_is_one_call_with_known_kinds():
    kinds = {"path", "dirfd", "fd", "atflags", "oflags", "str", "ptr", "int"}
    assert len({r.name for r in table.ROWS}) == len(table.ROWS)
    for r in table.ROWS:
        assert {k for k, _ in r.args} <= kinds, r.name
        for n in r.i386_variants:
            assert n in table.BY_NAME, (r.name, n)
        # an empty path or a nofollow rule reads an argument the row has
        if r.empty_path is not None:
            assert r.args[r.empty_path][0] == "atflags", r.name
        if r.nofollow and len(r.nofollow) > 1:
            assert r.nofollow[1] < len(r.args), r.name


def test_a_class_of_both_abis_holds_the_i386_variants_of_its_calls():
    """stat's class holds stat64 and oldstat: an engine that acts on a
    class acts on i386's calls of it too (socketcall and ipc multiplex
    whole families: not theirs)."""
    for r in table.ROWS:
        for n in r.i386_variants:
            if n in ("socketcall", "ipc"):
                continue
            v = table.BY_NAME[n]
            assert r.classes - {"TP", "TN"} <= v.classes, (r.name, n)
