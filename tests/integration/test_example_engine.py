"""The example engine exercises the three actions on real programs."""
import os

from conftest import EXAMPLES, run, umview_argv

ENGINE = ["--engine", os.path.join(EXAMPLES, "lying_engine.py") + ":LyingEngine"]


def lying(cmd, tmp_path, **env):
    e = dict(os.environ, LYING_PROTECT=str(tmp_path / "protected"), LYING_ALIAS=str(tmp_path / "alias"), **env)
    return run(umview_argv(*ENGINE, "--", "bash", "-c", cmd), env=e, cwd=tmp_path)


def test_getpid_is_skipped_and_lies(tmp_path):
    r = lying("echo $$; python3 -S -c 'import os; print(os.getpid())'", tmp_path, LYING_PID="777")
    assert r.stdout.split() == [b"777", b"777"]
    assert r.returncode == 0


def test_uname_nodename_fixed_at_exit(tmp_path):
    r = lying("uname -n; uname -s", tmp_path, LYING_NODENAME="elsewhere")
    assert r.stdout.split() == [b"elsewhere", b"Linux"]


def test_unlink_of_protected_path_refused_with_eperm(tmp_path):
    prot = tmp_path / "protected"
    prot.mkdir()
    (prot / "f").write_text("keep")
    (tmp_path / "other").write_text("go")
    r = lying("rm protected/f; echo rm=$?; rm other; echo rm=$?", tmp_path)
    assert b"Operation not permitted" in r.stderr
    assert r.stdout.split() == [b"rm=1", b"rm=0"]
    assert (prot / "f").read_text() == "keep"
    assert not (tmp_path / "other").exists()


def test_open_path_rewritten_and_restored(tmp_path):
    (tmp_path / "target").write_text("the target\n")
    r = lying("cat alias; cat alias", tmp_path, LYING_TARGET=str(tmp_path / "target"))
    assert r.stdout == b"the target\nthe target\n"
    assert r.returncode == 0


def test_engine_given_as_module_and_class_is_loaded_by_import(tmp_path):
    # MODULE:CLASS (not a file): imported from sys.path; the engine lies about getpid
    (tmp_path / "lying_mod.py").write_text(open(ENGINE[1].rpartition(":")[0]).read())
    env = dict(os.environ, PYTHONPATH=str(tmp_path), LYING_PID="4242",
               LYING_PROTECT=str(tmp_path / "protected"), LYING_ALIAS=str(tmp_path / "alias"))
    r = run(umview_argv("--engine", "lying_mod:LyingEngine", "--", "bash", "-c", "echo $$"), env=env)
    assert (r.stdout, r.returncode) == (b"4242\n", 0), r.stderr


def test_engine_that_is_not_an_engine_class_is_refused_with_a_message():
    r = run(umview_argv("--engine", "json:JSONDecoder", "--", "true"))
    assert r.returncode == 2
    assert b"JSONDecoder is not an engine" in r.stderr and b"Traceback" not in r.stderr
