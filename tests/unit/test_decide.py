"""The fast-path decision (um_decide) as a pure function: a table of cases
through cffi, no ptrace, no tracee. Each case gives what the C core would
have gathered at a trapped call (path strings and the directories they are
relative to) and the decision and resolved paths it must come to."""
import os

import pytest

from umview.core import ffi, lib

X32_BIT = 0x40000000
AT_FDCWD = -100 & 0xFFFFFFFFFFFFFFFF
AT_EMPTY_PATH = 0x1000
NATIVE, PYTHON, REFUSE = lib.UM_DECIDE_NATIVE, lib.UM_DECIDE_PYTHON, lib.UM_DECIDE_REFUSE

# a small syscall table: neutral index -> (numbers per ABI, path slots, write kind)
OPENAT, FACCESSAT, NEWFSTATAT, MKDIR, REFUSED = range(5)
NUMBERS = {
    OPENAT: {lib.UM_ABI_X86_64: 257, lib.UM_ABI_I386: 295, lib.UM_ABI_X32: 257 | X32_BIT},
    FACCESSAT: {lib.UM_ABI_X86_64: 269},
    NEWFSTATAT: {lib.UM_ABI_X86_64: 262},
    MKDIR: {lib.UM_ABI_X86_64: 83},
    REFUSED: {lib.UM_ABI_I386: 11},
}


@pytest.fixture(autouse=True)
def tables():
    assert lib.um_table_reset(5) == 0
    for sc, numbers in NUMBERS.items():
        for abi, nr in numbers.items():
            assert lib.um_map_nr(abi, nr, sc) == 0
            claim = lib.UM_CLAIM_REFUSE if sc == REFUSED else lib.UM_CLAIM_PATH
            assert lib.um_set_claim(abi, sc, claim) == 0
            if sc == MKDIR:
                assert lib.um_set_path_arg(abi, sc, 0, 0, -1, -1) == 0
            elif sc != REFUSED:
                assert lib.um_set_path_arg(abi, sc, 0, 1, 0, 3 if sc == NEWFSTATAT else -1) == 0
    assert lib.um_set_write(OPENAT, lib.UM_WRITE_OFLAGS, 2) == 0
    assert lib.um_set_write(FACCESSAT, lib.UM_WRITE_ACCESS, 2) == 0
    assert lib.um_set_write(MKDIR, lib.UM_WRITE_ALWAYS, -1) == 0
    lib.um_prefix_clear()
    for prefix, kind in [(b"/foo", lib.UM_PREFIX_PLAIN), (b"/lay", lib.UM_PREFIX_LAYERED),
                         (b"/lay/real", lib.UM_PREFIX_REAL), (b"/upper", lib.UM_PREFIX_ALIAS),
                         (b"/foo/src", lib.UM_PREFIX_ALIAS),  # a move mount of /foo whose source lies in /foo
                         (b"/foo/clean", lib.UM_PREFIX_ALIAS_CLEAN)]:  # ... one with nothing mounted below
        assert lib.um_prefix_add_kind(prefix, kind) == 0
    lib.um_layer_clear()
    assert lib.um_layer_add(b"/lay/hidden", lib.UM_LAYER_HIDE) == 0
    assert lib.um_layer_add(b"/lay/dir", lib.UM_LAYER_DIR) == 0
    lib.um_set_fd_check(1)
    yield
    lib.um_set_fd_check(0)
    lib.um_layer_clear()
    lib.um_prefix_clear()
    lib.um_table_reset(0)


def decide(sc, path, base=None, *, flags=0, abi=lib.UM_ABI_X86_64, vcwd=0, state=None, dirfd=AT_FDCWD,
           at_flags=0, walk=False):
    """um_decide for call sc with one path argument as given (relative ones
    start from base); returns (decision, resolved path or None, its kind)."""
    d = ffi.new("struct um_decide_in *")
    d.abi = abi
    d.nr = NUMBERS[sc][abi]
    args = [0] * 6
    if sc == MKDIR:
        args[0] = 1 if path is not None else 0
    else:
        args[:4] = [dirfd, 1 if path is not None else 0, flags, at_flags]
    d.args = args
    d.vcwd = vcwd
    d.walk = int(walk)  # pure unless asked: no symlink check on the real tree
    s = d.slot[0]
    if state is not None:
        s.state = state
    elif path is None:
        s.state = lib.UM_SLOT_NULL
    elif path == b"" and at_flags & AT_EMPTY_PATH:
        s.state = lib.UM_SLOT_EMPTY
    else:
        s.state = lib.UM_SLOT_PATH
    s.err = -2
    s.cwd_relative = dirfd == AT_FDCWD
    s.str = path or b""
    s.base_known = base is not None
    s.base = base or b""
    d.slot[1].state = lib.UM_SLOT_NONE
    r = lib.um_decide(d)
    resolved = ffi.buffer(d.path[0], d.path_len[0])[:] if d.path_len[0] >= 0 else None
    assert d.sc == sc
    last["move"] = d.move
    last["upper"] = d.upper
    return r, resolved, d.path_kind[0]


last = {}  # what the last decide() left in um_decide_in.move and .upper


R, W = os.O_RDONLY, os.O_WRONLY | os.O_CREAT


@pytest.mark.parametrize("path, want", [
    (b"/foo/bar", PYTHON),
    (b"/foo", PYTHON),
    (b"/foo/", PYTHON),
    (b"/", NATIVE),
    (b"/etc/passwd", NATIVE),
    (b"/foobar", NATIVE),          # a string prefix, not a path prefix
    (b"/foobar/x", NATIVE),
    (b"//foo//./bar", PYTHON),
    (b"/etc/../foo/x", PYTHON),    # ".." climbing into the prefix
    (b"/foo/../etc", PYTHON),      # ... and out of it: the view must walk /foo, the kernel would walk the real one
    (b"/foo/../foo", PYTHON),
])
def test_absolute_path_goes_to_python_only_under_a_plain_prefix(path, want):
    assert decide(OPENAT, path, flags=R)[0] == want


def test_relative_path_climbing_out_of_a_prefix_stays_native_and_is_resolved():
    assert decide(OPENAT, b"../../etc/x", b"/foo/a", flags=R) == (NATIVE, b"/etc/x", -1)


@pytest.mark.parametrize("path, base, want", [
    (b"/lay/hidden/../f", None, PYTHON),     # removed in the view: ENOENT there, not /lay/f
    (b"/lay/hidden/x/../../f", None, PYTHON),
    (b"/lay/dir/../f", None, NATIVE),        # a merged directory: the lower one is there too
    (b"/lay/other/../f", None, NATIVE),      # untouched: the kernel walks what the view shows
    (b"/lay/./hidden/..", None, PYTHON),
    (b"hidden/../f", b"/lay", PYTHON),       # relative: a name the kernel walks
    (b"../f", b"/lay/hidden", NATIVE),       # ... but not the directory the call starts from
    (b"/foo/x/../../lay/f", None, PYTHON),   # a mount's directory: the view walks it
])
def test_dotdot_out_of_a_directory_the_view_hides_or_serves_goes_to_python(path, base, want):
    assert decide(NEWFSTATAT, path, base)[0] == want


def test_reads_of_upper_files_with_dot_components_are_not_served_on_the_upper_layer():
    assert lib.um_layer_add(b"/lay/file", lib.UM_LAYER_FILE) == 0
    decide(NEWFSTATAT, b"/lay/file/.")
    assert last["upper"] < 0  # ENOTDIR is the kernel's, on the path as written


def test_a_relative_path_too_long_for_the_c_core_once_absolute_goes_to_python():
    rel = b"/".join([b"d" * 200] * 20)  # 4,019 bytes: the kernel takes it
    assert decide(NEWFSTATAT, rel, b"/lay/" + b"b" * 100) == (PYTHON, None, -1)
    assert decide(NEWFSTATAT, rel, b"/lay") == (NATIVE, b"/lay/" + rel, lib.UM_PREFIX_LAYERED)  # it fits


def test_relative_path_climbing_into_a_prefix_goes_to_python_and_is_resolved():
    assert decide(OPENAT, b"../foo/./x", b"/etc", flags=R) == (PYTHON, b"/foo/x", lib.UM_PREFIX_PLAIN)


@pytest.mark.parametrize("sc, flags, want", [
    (OPENAT, R, NATIVE),
    (OPENAT, W, PYTHON),
    (OPENAT, os.O_RDWR, PYTHON),
    (OPENAT, os.O_TRUNC, PYTHON),
    (FACCESSAT, os.R_OK, NATIVE),
    (FACCESSAT, os.W_OK, PYTHON),
    (MKDIR, 0, PYTHON),
])
def test_layered_prefix_sends_writes_to_python_and_lets_reads_run(sc, flags, want):
    assert decide(sc, b"/lay/file", flags=flags) == (want, b"/lay/file", lib.UM_PREFIX_LAYERED)


def test_real_prefix_inside_a_layered_one_stays_native_even_for_writes():
    assert decide(OPENAT, b"/lay/real/f", flags=W) == (NATIVE, b"/lay/real/f", lib.UM_PREFIX_REAL)


def test_alias_prefix_is_native_by_absolute_path():
    assert decide(OPENAT, b"/upper/a/f", flags=W) == (NATIVE, b"/upper/a/f", lib.UM_PREFIX_ALIAS)


def test_alias_prefix_climbed_out_of_with_dotdot_goes_to_python():
    assert decide(OPENAT, b"../x", b"/upper/a", flags=R)[0] == PYTHON
    assert decide(OPENAT, b"../../etc", b"/upper/a", flags=R)[0] == PYTHON  # raw path under the alias


@pytest.mark.parametrize("path, want", [
    (b"/lay/hidden", PYTHON),
    (b"/lay/hidden/below/x", PYTHON),  # a HIDE entry hides all below it
    (b"/lay/dir", PYTHON),             # a DIR entry: the directory itself
    (b"/lay/dir/lower-only", NATIVE),  # ... names below it not in the set are the lower's
    (b"/lay/other", NATIVE),
])
def test_layer_set_hide_and_dir_entries_decide_reads(path, want):
    assert decide(OPENAT, path, flags=R)[0] == want


def test_empty_path_with_at_empty_path_is_decided_by_its_fd_file():
    assert decide(NEWFSTATAT, b"", b"/foo/d", at_flags=AT_EMPTY_PATH, dirfd=3) == (
        PYTHON, b"/foo/d", lib.UM_PREFIX_PLAIN)
    assert decide(NEWFSTATAT, b"", b"/etc/d", at_flags=AT_EMPTY_PATH, dirfd=3) == (NATIVE, b"/etc/d", -1)


def test_empty_path_without_at_empty_path_is_the_kernels_enoent():
    assert decide(NEWFSTATAT, b"", b"/foo", state=lib.UM_SLOT_ERROR) == (NATIVE, None, -1)


def test_empty_path_on_a_pipe_is_native():
    assert decide(NEWFSTATAT, b"", b"pipe:[123]", at_flags=AT_EMPTY_PATH, dirfd=3) == (NATIVE, None, -1)


@pytest.mark.parametrize("abi", [lib.UM_ABI_X86_64, lib.UM_ABI_I386, lib.UM_ABI_X32])
def test_every_abi_maps_openat_to_the_same_neutral_call(abi):
    assert decide(OPENAT, b"/foo/x", abi=abi) == (PYTHON, b"/foo/x", lib.UM_PREFIX_PLAIN)
    assert decide(OPENAT, b"/etc/x", abi=abi)[0] == NATIVE


def test_claim_refuse_on_one_abi_refuses_that_abi_only():
    d = ffi.new("struct um_decide_in *")
    d.abi, d.nr = lib.UM_ABI_I386, 11
    assert lib.um_decide(d) == REFUSE and d.sc == REFUSED
    assert lib.um_set_claim(lib.UM_ABI_I386, OPENAT, lib.UM_CLAIM_REFUSE) == 0
    assert decide(OPENAT, b"/etc/x", abi=lib.UM_ABI_I386)[0] == REFUSE
    assert decide(OPENAT, b"/etc/x", abi=lib.UM_ABI_X86_64)[0] == NATIVE


def test_relative_path_of_a_virtual_cwd_goes_to_python_unresolved():
    assert decide(OPENAT, b"x", b"/etc", vcwd=lib.UM_VCWD) == (PYTHON, None, -1)


def test_faithful_virtual_cwd_lets_a_relative_path_without_dotdot_be_decided():
    faithful = lib.UM_VCWD | lib.UM_VCWD_FAITHFUL
    assert decide(OPENAT, b"x", b"/etc", vcwd=faithful) == (NATIVE, b"/etc/x", -1)
    assert decide(OPENAT, b"../x", b"/etc", vcwd=faithful) == (PYTHON, None, -1)


def test_unreadable_or_overlong_path_is_left_to_the_kernel():
    assert decide(OPENAT, b"/foo/x", state=lib.UM_SLOT_ERROR) == (NATIVE, None, -1)


def test_a_real_path_under_an_alias_inside_a_plain_prefix_is_the_alias():
    # the sandbox's /tmp: a move mount of /tmp (plain) whose source lies in
    # the real /tmp (an alias). A path the process wrote is the view's: the
    # plain prefix takes it, although it names the source lexically
    assert decide(OPENAT, b"/foo/src/f", flags=R)[0] == PYTHON
    # an fd's path is real: a file of the source, not of the view's /foo
    assert decide(NEWFSTATAT, b"", b"/foo/src/d", at_flags=AT_EMPTY_PATH, dirfd=3)[0] == NATIVE
    assert decide(NEWFSTATAT, b"", b"/foo/other", at_flags=AT_EMPTY_PATH, dirfd=3)[0] == PYTHON
    # a faithful cwd in the source: the kernel reaches what the view means
    faithful = lib.UM_VCWD | lib.UM_VCWD_FAITHFUL
    assert decide(OPENAT, b"d/f", b"/foo/src", vcwd=faithful, flags=R)[0] == NATIVE
    assert decide(OPENAT, b"d/f", b"/foo/src", vcwd=faithful, flags=W)[0] == NATIVE
    assert decide(OPENAT, b"../f", b"/foo/src/d", vcwd=faithful, flags=R)[0] == PYTHON
    assert decide(OPENAT, b"f", b"/foo/x", vcwd=faithful, flags=R)[0] == PYTHON  # not under the source
    # relative to a dirfd (no cwd check by the view): still the view's
    assert decide(OPENAT, b"d/f", b"/foo/src", dirfd=3, flags=R)[0] == PYTHON


def test_a_dirfd_in_a_clean_alias_lets_a_relative_path_without_dotdot_run():
    assert decide(OPENAT, b"d/f", b"/foo/clean", dirfd=3, flags=W)[0] == NATIVE
    assert decide(OPENAT, b"d/f", b"/foo/clean/x", dirfd=3, flags=R)[0] == NATIVE
    assert decide(OPENAT, b"../f", b"/foo/clean/d", dirfd=3, flags=R)[0] == PYTHON  # climbs
    assert decide(OPENAT, b"../../f", b"/foo/clean/d", dirfd=3, flags=R)[0] == PYTHON  # out of it
    assert decide(OPENAT, b"/foo/clean/f", flags=R)[0] == PYTHON  # a view path: the plain prefix's
    assert decide(OPENAT, b"clean/f", b"/foo", dirfd=3, flags=R)[0] == PYTHON  # from outside it


@pytest.fixture
def move():
    """A move mount of /srcdir on /mv (prefix index 6, after the fixture's six),
    with /mv/keep an exception and the source's alias /mv/src below it."""
    assert lib.um_prefix_add_move(b"/mv", b"/srcdir") == 0
    assert lib.um_prefix_add_kind(b"/mv/keep", lib.UM_PREFIX_REAL) == 0
    assert lib.um_prefix_add_kind(b"/mv/src", lib.UM_PREFIX_ALIAS) == 0
    return 6


@pytest.mark.parametrize("path, want, served", [
    (b"/mv/x", PYTHON, True),
    (b"/mv", PYTHON, True),
    (b"//mv/./a//b/", PYTHON, True),
    (b"/mv/a/../b", PYTHON, True),        # ".." that stays below the target
    (b"/mv/src/x", PYTHON, True),         # the source's alias: a path of the view here
    (b"/mv/keep/x", NATIVE, False),       # an exception: real
    (b"/mv/keep/../x", PYTHON, False),    # through an exception: Python walks it
    (b"/mv/../mv/x", PYTHON, False),      # above the target on the way
    (b"/mvx", NATIVE, False),
    (b"/foo/x", PYTHON, False),           # another engine's plain prefix
])
def test_a_path_under_a_move_prefix_may_be_served_by_c_only_where_its_walk_stays_in_the_mount(
        move, path, want, served):
    r, _, kind = decide(OPENAT, path, flags=R)
    assert r == want
    assert (last["move"] == move) == served
    if served:
        assert kind == lib.UM_PREFIX_MOVE


def test_a_relative_path_under_a_move_prefix_goes_to_python_not_to_c(move):
    assert decide(OPENAT, b"x", b"/mv/a", flags=R)[0] == PYTHON
    assert last["move"] == -1


def test_a_real_path_in_a_move_mounts_source_is_left_to_the_kernel(move):
    # a relative path from a dirfd or cwd the kernel has in the source
    assert decide(OPENAT, b"x", b"/srcdir/a", flags=R)[0] == NATIVE


AT_SYMLINK_NOFOLLOW = 0x100


@pytest.fixture
def links(tmp_path):
    """A real tree for the symlink check: T/link -> T/plain/f and T/dirlink ->
    T/plain, where T/plain is a plain prefix (a link leads a path under it);
    T/dir and T/file are real. openat and newfstatat get their nofollow rules
    (syscalls.table NOFOLLOW), mkdir never follows."""
    top = os.fsencode(tmp_path)
    (tmp_path / "plain").mkdir()
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "plain" / "f", tmp_path / "link")
    os.symlink(tmp_path / "plain", tmp_path / "dirlink")
    assert lib.um_prefix_add_kind(top + b"/plain", lib.UM_PREFIX_PLAIN) == 0
    assert lib.um_set_nofollow(lib.UM_ABI_X86_64, OPENAT, 0, lib.UM_NOFOLLOW_OFLAGS, 2, 0) == 0
    assert lib.um_set_nofollow(lib.UM_ABI_X86_64, NEWFSTATAT, 0, lib.UM_NOFOLLOW_IF_SET, 3,
                               AT_SYMLINK_NOFOLLOW) == 0
    assert lib.um_set_nofollow(lib.UM_ABI_X86_64, MKDIR, 0, lib.UM_NOFOLLOW_ALWAYS, -1, 0) == 0
    lib.um_set_symlink_check(1)
    yield top
    lib.um_set_symlink_check(0)


@pytest.mark.parametrize("path, at_flags, want", [
    (b"link", 0, PYTHON),                       # followed: it leads under the prefix
    (b"link", AT_SYMLINK_NOFOLLOW, NATIVE),     # the link itself: the kernel's
    (b"./link", AT_SYMLINK_NOFOLLOW, NATIVE),
    (b"dir/../link", AT_SYMLINK_NOFOLLOW, NATIVE),  # walked: dir is a real directory
    (b"link/", AT_SYMLINK_NOFOLLOW, PYTHON),    # a trailing "/" follows it anyway
    (b"dirlink/f", AT_SYMLINK_NOFOLLOW, PYTHON),  # a link on the way is walked
    (b"dirlink/..", AT_SYMLINK_NOFOLLOW, PYTHON),
    (b"file", 0, NATIVE),
    (b"dir/file", 0, NATIVE),
    (b"missing", 0, NATIVE),
    (b"..", 0, NATIVE),
])
def test_a_relative_path_walks_a_symlink_only_where_the_kernel_would(links, path, at_flags, want):
    assert decide(NEWFSTATAT, path, links, dirfd=3, at_flags=at_flags, walk=True)[0] == want
    assert decide(NEWFSTATAT, path, links, at_flags=at_flags, walk=True)[0] == want  # from the cwd


@pytest.mark.parametrize("sc, name, flags, at_flags, want", [
    (NEWFSTATAT, b"link", 0, 0, PYTHON),
    (NEWFSTATAT, b"link", 0, AT_SYMLINK_NOFOLLOW, NATIVE),
    (NEWFSTATAT, b"dirlink/f", 0, AT_SYMLINK_NOFOLLOW, PYTHON),
    (OPENAT, b"link", R, 0, PYTHON),
    (OPENAT, b"link", R | os.O_NOFOLLOW, 0, NATIVE),
    (OPENAT, b"link", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0, NATIVE),  # creates the name: not followed
    (OPENAT, b"link", W, 0, PYTHON),           # O_CREAT alone follows a dangling link
    (MKDIR, b"link", 0, 0, NATIVE),
    (MKDIR, b"dirlink/new", 0, 0, PYTHON),
])
def test_an_absolute_path_walks_a_last_symlink_only_if_the_call_follows_it(links, sc, name, flags, at_flags, want):
    assert decide(sc, links + b"/" + name, flags=flags, at_flags=at_flags, walk=True)[0] == want


@pytest.fixture
def upper_files():
    """/lay (layered) with an upper directory: an upper file, a merged
    directory with an upper file in it, a file under a hidden directory."""
    assert lib.um_prefix_set_upper(b"/lay", b"/upper") == 0
    for path, kind in ((b"/lay/f", lib.UM_LAYER_FILE), (b"/lay/dir/g", lib.UM_LAYER_FILE),
                       (b"/lay/hidden/h", lib.UM_LAYER_FILE)):
        assert lib.um_layer_add(path, kind) == 0


@pytest.mark.parametrize("sc, path, base, flags, served", [
    (OPENAT, b"/lay/f", None, R, True),           # an upper file, read: C serves it on /upper/f
    (NEWFSTATAT, b"/lay/dir/g", None, 0, True),
    (NEWFSTATAT, b"/lay/dir", None, 0, True),     # a merged directory's lookup
    (NEWFSTATAT, b"f", b"/lay", 0, True),         # relative to a cwd the view shares with the kernel
    (OPENAT, b"/lay/f", None, W, False),          # writes: Python (a copy, a new name)
    (FACCESSAT, b"/lay/f", None, os.W_OK, False),
    (NEWFSTATAT, b"/lay/dir/../f", None, 0, False),  # "..": the view's walk may differ from the lexical one
    (NEWFSTATAT, b"/lay/f/", None, 0, False),     # a trailing "/": ENOTDIR is the kernel's, via Python
    (NEWFSTATAT, b"/lay/dir/.", None, 0, True),   # "." on an upper directory: the directory
    (NEWFSTATAT, b".", b"/lay/dir", 0, True),     # stat(".") in a cwd the layer holds (make, gcc)
    (NEWFSTATAT, b"/lay/./dir/./g", None, 0, True),  # a "." inside: the entry below shows a directory
    (NEWFSTATAT, b"/lay/f/.", None, 0, False),    # "." on a file: ENOTDIR, the path as written
    (NEWFSTATAT, b"/lay/hidden/h", None, 0, False),  # below a hidden directory: Python's
    (NEWFSTATAT, b"/lay", None, 0, False),        # the mount point itself: its lower attributes
    (NEWFSTATAT, b"/lay/other", None, 0, False),  # not in the set: the kernel's, natively
])
def test_reads_of_upper_files_are_for_c_to_serve_and_nothing_else(upper_files, sc, path, base, flags, served):
    r = decide(sc, path, base, flags=flags)[0]
    assert (r == PYTHON and last["upper"] >= 0) == served, (r, last["upper"])
    assert last["upper"] < 0 or r == PYTHON  # C serves it, or Python does: never let through unseen


def test_no_upper_directory_no_serving(upper_files):
    lib.um_prefix_clear()
    assert lib.um_prefix_add_kind(b"/lay", lib.UM_PREFIX_LAYERED) == 0
    assert decide(NEWFSTATAT, b"/lay/f")[0] == PYTHON and last["upper"] == -1
    assert lib.um_prefix_set_upper(b"/nowhere", b"/upper") == -2  # ENOENT: no such layered prefix
    assert lib.um_prefix_set_upper(b"/lay", b"/") == -22  # "/" is no upper layer
