"""The two test tiers: `make check` (the fast tier, conftest.CHECK_TIER) and `make test`.

Why it can break: an entry of the tier that names a file since renamed (the tier silently
shrinks), a test that needs every variant built or root slipping into the tier (then `make
check` fails on a fresh clone, or stops being fast), or the Makefile's targets drifting from
what the README promises: `make test` runs everything, `make check` the tier."""
import subprocess
from pathlib import Path

import conftest
from conftest import ROOT


def test_every_entry_names_a_test_file():
    for e in conftest.CHECK_TIER:
        name = e.split("::", 1)[0]
        assert (ROOT / "tests" / name).is_file(), f"CHECK_TIER names {name}, which does not exist"


def test_tier_membership():
    assert conftest.in_check_tier("test_stats.py::test_x", ["tmp_path"], set())
    assert conftest.in_check_tier("test_doctor.py::test_fake_amd", [], set())
    # A prefix entry takes only its own tests; a file entry only that file.
    assert not conftest.in_check_tier("test_doctor.py::test_live_x", [], set())
    assert not conftest.in_check_tier("test_stats_more.py::test_x", [], set())
    # Whatever the list says, a test that needs the whole build or root is make test's.
    assert not conftest.in_check_tier("test_oracle.py::test_y", ["build"], set())
    assert not conftest.in_check_tier("test_stats.py::test_x", [], {"root"})


def make_dry_run(target):
    # PYTEST_ARGS set empty: a `make check PYTEST_ARGS=...` running this test passes its own
    # on to this make through MAKEFLAGS, and the targets are checked as the README runs them.
    p = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), target,
                        "TW_DEPS_CHECKED=1", "PYTEST_ARGS="], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return [line for line in p.stdout.splitlines() if " -m pytest " in line]


def test_make_check_runs_the_tier_and_make_test_everything():
    check, test = make_dry_run("check"), make_dry_run("test")
    assert len(check) == 1 and check[0].split(" -m pytest ", 1)[1].split()[-3:] == \
        ["-m", "check", "tests"], check
    args = test[0].split(" -m pytest ", 1)[1].split()
    assert len(test) == 1 and args[-1] == "tests" and "-m" not in args, test
    # in parallel, by groups (conftest.pytest_xdist_make_scheduler): a file's tests on one
    # worker, the serial group one at a time
    assert args[:2] == ["-n", "3"], test


def test_the_serial_files_are_one_group_a_shared_fixture_keeps_a_file_whole():
    assert conftest.group_of("tests/test_watch_live.py::test_x[a/b::c]") == "serial"
    assert conftest.group_of("tests/test_bench.py::test_y") == "serial"
    # test_fleetdb.py builds a module fixture (one ingest for the file): one group, one worker
    assert "scope=\"module\"" in (ROOT / "tests" / "test_fleetdb.py").read_text()
    assert conftest.group_of("tests/test_fleetdb.py::test_z") == "tests/test_fleetdb.py"
    # test_today.py has none: each test is scheduled on its own
    assert "scope=" not in (ROOT / "tests" / "test_today.py").read_text()
    assert conftest.group_of("tests/test_today.py::test_z[a/b::c]") == \
        "tests/test_today.py::test_z[a/b::c]"


def test_every_serial_file_exists():
    for name in conftest.SERIAL:
        assert (ROOT / "tests" / name).is_file(), f"SERIAL names {name}, which does not exist"


def test_the_longest_files_start_first_beside_the_serial_group():
    """conftest.LONGEST_FIRST: files that exist, none of them serial, and the collection
    order (which the scheduler keeps) puts them, in that order, right after the serial
    group.  A name left there after its file was renamed would silently start late."""
    for name in conftest.LONGEST_FIRST:
        assert (ROOT / "tests" / name).is_file(), f"LONGEST_FIRST names {name}, which does not exist"
        assert name not in conftest.SERIAL, name
    # one test of every file, in the order collected (alphabetical), then as run
    ids = [f"tests/{p.name}::test_x" for p in sorted((ROOT / "tests").glob("test_*.py"))]
    files = [Path(n.split("::")[0]).name
             for _, n in sorted(zip(conftest.order_keys(ids), ids), key=lambda p: p[0])]
    serial = [f for f in files if f in conftest.SERIAL]
    assert files[:len(serial)] == serial, "the serial group does not come first"
    assert files[len(serial):len(serial) + len(conftest.LONGEST_FIRST)] == \
        list(conftest.LONGEST_FIRST), files[len(serial):len(serial) + 12]
