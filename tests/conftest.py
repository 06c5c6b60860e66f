"""Shared fixtures: paths, the build matrix, and skips that always say why.

A test that needs root, a tool, or a mechanism this CPU lacks skips with the
reason; it never passes vacuously.  A variant is skipped only when the support oracle
(twtools.machine.oracle) names a fact of this machine that rules it out; a variant that must
work here and does not fails every test that needs it.  In CI (root, every package
installed) the only expected skips are mechanisms the machine cannot have."""
import functools
import gc
import lzma
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from twtools.core import paths  # noqa: E402
from twtools.machine import doctor, oracle, probe, registry  # noqa: E402

BUILD = paths.BUILD


# The fast tier, `make check` (pytest -m check): the unit, parser, statistics and fixture
# tests, which need no build of the variants, no root and no live tracing, for the
# edit-test loop (under a minute on an idle 2-core machine).  `make test` runs every test,
# these included, and is what CI runs.  This is the one list of the tier: an entry is a
# test file, or a prefix of test ids in one ("test_doctor.py::test_fake_").  A test in it
# that asks for the `build` fixture (every variant built) or is marked `root` is left to
# `make test`, so the tier cannot grow a dependency on either by accident.
CHECK_TIER = (
    "test_stats.py",
    "test_undisturbed_levels.py",
    "test_sweep_vs_ref.py",
    "test_sweep_host.py",
    "test_legs.py",
    "test_legs_blocks.py",
    "test_sweep_target.py",
    "test_sweep_target_vs_ref.py",
    "test_sweep_missed.py",
    "test_target_reported.py",
    "test_run_target.py::test_target_where",
    "test_compare.py",
    "test_kernels_side_by_side.py",
    "test_mitigation_prices.py",
    "test_verdict.py",
    "test_findings.py",
    "test_layers.py",
    "test_oracle.py",
    "test_tracer_parsers.py",
    "test_tracer_witness.py",
    "test_registry_readers.py",
    "test_extra_work.py",
    "test_tiers.py",
    "test_fleet.py",
    "test_fleetdb.py",
    "test_causes.py",
    "test_census_fixture.py",
    "test_census_images_recorded.py",
    "test_outside_figures.py",
    "test_sweepcheck.py",
    "test_repeat_command.py",
    "test_lesson_diagram.py",
    "test_fleet_views.py",
    "test_today.py",
    "test_fleet_causes.py",
    "test_class_causes.py",
    "test_watch_state.py",
    "test_watch_unit.py",
    "test_fleet_readiness.py",
    "test_ab_copies.py",
    "test_settings_reach.py",
    "test_quiet_first.py",
    "test_coreclock.py",
    "test_sequential.py",
    "test_sequential_coverage.py",
    "test_schema_paths.py",
    "test_hoststate.py",
    "test_version.py",
    "test_watch_exits_unknown.py",
    "test_watch_state_upgrade.py",
    "test_seccomp_sim.py",
    "test_mitigations.py",
    "test_doctor_mitigation_facts.py",
    "test_doctor.py::test_fake_",
    "test_stub_frames.py::test_every_push_and_pop_goes_through_the_macros",
)


# `make test` runs the suite in parallel (pytest-xdist, the Makefile's TEST_JOBS workers,
# scheduled by pytest_xdist_make_scheduler below, by group_of): a file with a fixture that
# outlives a test is one group, so that fixture is built once, on one worker.  The files
# below measure live (the matrix, tw ab, the sweeps, the legs, tw run, the noisy neighbour)
# or trace as root (bpftrace, perf, the watch's BPF programs, the census): they form one
# group, "serial", and run one at a time, first, so that no two of them ever overlap, and
# the rest of the suite shares the other workers meanwhile.  None asserts on a timing (the
# machines are shared and noisy), so a parallel file beside them only slows them.  The fleet's
# playbooks (test_fleet_ansible.py, test_watch_fleet.py) run beside the serial group: they
# wait on ssh and Ansible far more than they work (test_watch_fleet: 40 s of the chain for
# 10 s of CPU), their hosts' measured runs start in the serial group's cgroup, and what they
# check is their own hosts' files and their own program's path, which nothing else touches.
SERIAL = frozenset({
    "test_ab_copies.py", "test_ab_hostile_build.py", "test_ab_selfcheck.py",
    "test_attribution.py", "test_bench.py", "test_census.py", "test_census_images.py",
    "test_deb_systemd.py",
    "test_diagnose.py", "test_entry_counts.py", "test_faults_concurrent.py",
    "test_faults_disk.py", "test_faults_quoting.py", "test_faults_signals.py",
    "test_interrupt_keeps.py", "test_headline_first.py",
    "test_legs_live.py", "test_lesson.py", "test_neighbour.py", "test_run_quick.py",
    "test_speculation.py", "test_stub_frames.py", "test_sweep.py", "test_sweep_target.py",
    "test_syscall_numbers.py",
    "test_tracers_live.py", "test_tracer_counts_live.py", "test_traces_dryrun.py", "test_watch_bpf.py",
    "test_watch_http.py", "test_watch_line_breaks.py", "test_watch_live.py",
    "test_watch_file_identity.py", "test_watch_messages.py", "test_watch_full_disk.py",
    "test_watch_undecodable_names.py", "test_watch_crowds.py", "test_write_counts.py",
    "test_wvbench.py", "test_walls_ab.py", "test_seccomp_live.py", "test_census_walls.py", "test_watch_walls.py",
    "test_walls_host.py", "test_walls_hostile.py", "test_walls_nolibseccomp.py",
    "test_ab_interrupted.py", "test_run_target.py",
})


def in_check_tier(nodeid_tail, fixturenames, markers):
    """Whether a test (its id from the file name on, its fixtures and marker names) is in
    the fast tier."""
    if "build" in fixturenames or "root" in markers:
        return False
    return any(nodeid_tail == e or nodeid_tail.startswith(e if "::" in e else e + "::")
               for e in CHECK_TIER)


def pytest_configure(config):
    config.addinivalue_line("markers", "root: needs root (tracing)")
    config.addinivalue_line("markers", "check: in the fast tier, `make check` (conftest.CHECK_TIER)")
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        import atexit
        atexit.register(_end_worker_now)


def pytest_ignore_collect(collection_path, config):
    """With `-m check`, files outside the tier are not even imported: collecting every
    module would cost more than some of the tier's tests."""
    if config.getoption("markexpr", "") != "check" or collection_path.suffix != ".py" or \
            not collection_path.name.startswith("test_"):
        return None
    return all(e.split("::", 1)[0] != collection_path.name for e in CHECK_TIER) or None


# A fixture that outlives one test (scope module, class, package or session, defined in the
# test file itself) is built once per worker: a file that defines one stays whole on one
# worker, so it is built once.  Every other file's tests are scheduled one by one, so that a
# file of a few long tests (two whole reports, say) does not keep one worker busy while the
# other has finished.
_WIDE_FIXTURE = re.compile(r"""scope\s*=\s*["'](?:module|class|package|session)["']""")


# The other workers take the groups in this order after the serial group: the files that run
# longest beside it (measured: seconds of a full run here), those that wait on ssh, Ansible,
# dpkg or chromium first, so that the end of the run is short CPU work, not a playbook waiting
# on its hosts after the serial group has ended; then the rest, the groups of most tests first
# (as xdist's own --loadscope-reorder would).  A file missing here only starts later.
LONGEST_FIRST = (
    "test_fleet_ansible.py",        # 93-99 s, most of it waiting on ssh and Ansible
    "test_faults_hostile.py",       # 83 s
    "test_report.py",               # 60-67 s
    "test_faults_fleet.py",         # 44-52 s
    "test_deb.py",                  # 31-44 s: two clones built, lintian
    "test_watch_fleet.py",          # 37-41 s, waiting on ssh and Ansible
    "test_browser.py",              # 35-38 s: chromium
    "test_atlas_add.py",            # 24-36 s
    "test_fleetdb_hostile.py",      # 25-36 s
    "test_fleet_names.py",          # 34 s
)


@functools.lru_cache(maxsize=None)
def keeps_together(name):
    """Whether the test file `name` defines a fixture that outlives a test."""
    path = ROOT / "tests" / name
    return path.is_file() and bool(_WIDE_FIXTURE.search(path.read_text()))


def group_of(nodeid):
    """The scheduling group of a test: "serial" for the files in SERIAL; its file for a file
    with a fixture that outlives a test (keeps_together); else the test alone."""
    path = nodeid.split("::", 1)[0]
    name = Path(path).name
    if name in SERIAL:
        return "serial"
    return path if keeps_together(name) else nodeid


# Under xdist the serial group's live measurements and root tracing share the 2 cores with
# the other workers, and its chain is the longest: the suite ends when it does.  A worker
# lowers its own priority (and its children's) before its first test of any other group, so
# the serial chain runs at nearly a whole core's speed and the rest fill what it leaves.  No
# test asserts on a timing; the live measurements are only less disturbed.
OTHERS_NICE = 10


# Nice alone did not do it.  With autogroup scheduling (the kernel's default where it has it,
# Debian's among them), nice orders processes only within one session's group, the groups
# share the CPUs as equals, and the serial group's measured programs run in sessions of their
# own (core/proc.py starts every child so, to stop it whole).  Worse, a program that sleeps
# and wakes (an O_SYNC write waits for the disk) waited at each wake-up for a busy worker's
# time slice: the seed sweep's 21 000 O_SYNC writes took 68 s beside two busy loops at nice
# 10 and 2.7 s alone, and `tw run --quick` 137 s against 52 s (a nice-19 group of their own
# for the loops: 129 s).  So where it can (root, a cpu controller with cpu.idle: Linux 5.15
# and later), the test run gets a cpu cgroup of its own with two groups in it: "serial", where
# the serial group's worker goes, and "others", where the other workers go, marked idle: its
# tasks run when the serial group leaves a CPU free and are preempted at once by anything of
# it that wakes.  Children stay in their parent's group, sessions of their own or not.
# Against the rest of the machine the run is one group like any other, so the others are not
# starved by another user's load.  The controller removes the groups at the end.
CGROUP_ROOTS = ("/sys/fs/cgroup/cpu", "/sys/fs/cgroup")        # cgroup v1's cpu, or v2


def _cgroup_base():
    for base in CGROUP_ROOTS:
        if os.path.exists(os.path.join(base, "cpu.shares")):              # v1's cpu
            return base, 1
        try:
            with open(os.path.join(base, "cgroup.subtree_control")) as f:
                if "cpu" in f.read().split():                                 # v2, cpu on
                    return base, 2
        except OSError:
            pass
    return None, None


def run_cgroup(run, group, create=True):
    """The cgroup `group` ("serial" or "others") of the test run whose controlling process is
    pid `run`, made when create ("others" marked idle), or None where there is none to be had
    (not root, no cpu controller or no cpu.idle, not allowed)."""
    base, version = _cgroup_base()
    if base is None or os.geteuid() != 0:
        return None
    top = os.path.join(base, f"timewrite-tests-{run}")
    path = os.path.join(top, group)
    if not create:
        return path if os.path.isdir(path) else None
    try:
        os.makedirs(top, exist_ok=True)
        if version == 2:
            with open(os.path.join(top, "cgroup.subtree_control"), "w") as f:
                f.write("+cpu")
        os.makedirs(path, exist_ok=True)
        if group == "others":
            with open(os.path.join(path, "cpu.idle"), "w") as f:
                f.write("1")
        return path
    except OSError:
        return None


def join_run_cgroup(group):
    """Move this worker (and so its later children) into the run's `group` cgroup, if any."""
    path = run_cgroup(os.getppid(), group)                  # the parent: xdist's controller
    if path:
        try:
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass


def in_run_cgroup(group):
    """A Popen preexec_fn that starts a program in the run's `group` cgroup, or None: "serial"
    for a test outside the serial group that starts a live measurement (the fleet playbook's
    hosts run tw's bench), so that it is not starved in the idle group; "others" for a busy
    program a serial test only needs running (the census's Go writer, which at nice 19 in the
    serial group still took a core from the idle group for the file's half minute)."""
    path = run_cgroup(os.getppid(), group) if os.environ.get("PYTEST_XDIST_WORKER") else None
    if not path:
        return None

    def join():
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return join


def yield_to_the_serial_chain():
    """Lower this worker's priority (and its children's) below the serial group's: nice, and
    where it can, the run's idle cgroup."""
    os.setpriority(os.PRIO_PROCESS, 0, OTHERS_NICE)
    join_run_cgroup("others")


def pytest_unconfigure(config):
    """The controller removes the run's cgroups once the workers are gone (a process a test
    left running keeps its group).  The workers are still exiting when this runs, and a group
    with a member cannot go: tried for a few seconds (every full run left its empty groups
    behind when this tried once)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None:
        return
    import time
    paths = [p for p in (run_cgroup(os.getpid(), g, create=False) for g in ("others", "serial"))
             if p]
    if not paths:
        return
    left = paths + [os.path.dirname(paths[0])]
    deadline = time.monotonic() + 5
    while left and time.monotonic() < deadline:
        for d in list(left):
            try:
                os.rmdir(d)
                left.remove(d)
            except FileNotFoundError:
                left.remove(d)
            except OSError:
                pass
        if left:
            time.sleep(0.05)


_joined = []


def pytest_runtest_setup(item):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if group_of(item.nodeid) != "serial":
        if os.getpriority(os.PRIO_PROCESS, 0) < OTHERS_NICE:
            yield_to_the_serial_chain()
    elif not _joined:
        _joined.append(True)
        join_run_cgroup("serial")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Each group to one worker, whole, in the order collected (the serial group first).
    xdist's own --dist loadgroup cannot be used: it marks a group by appending to the test's
    id, which pytest 9 no longer lets a plugin change, so every test ran on its own."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return group_of(nodeid)
    # the order pytest_collection_modifyitems gave, not xdist's (most tests first, which put
    # a one-test playbook of 90 s among the last)
    config.option.loadscopereorder = False
    return ByGroup(config, log)


# A test process holds a large heap for as long as it lives: numpy's, scipy's and the
# toolkit's modules, the tests' own, and the fixtures built once per process.  Python's
# collector walked all of it on every full collection: 4.7 s of a 49-s `make check` in one
# process (timed with gc.callbacks).  Frozen once collected, that heap is left out of every
# collection; the larger thresholds let the tests' own short-lived objects go in fewer,
# shorter passes (0.8 s in all).  The cost: a frozen object that later ends in a cycle of
# garbage stays until the process ends; what the tests make is collected as before.
def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()
    gc.set_threshold(10000, 50, 50)


# A worker that has reported its last test and said goodbye to the controller ends there: the
# interpreter's own teardown of that heap (numpy, scipy, DuckDB, matplotlib, the fixtures)
# took a worker about half a second, which the controller waited for at the end of every run.
# Registered when the worker is configured, so it runs after the handlers registered later
# (pytest's, the tests'), and before those the interpreter registered first (logging's
# flush, which no worker's result goes through).
def _end_worker_now():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


def pytest_collection_modifyitems(config, items):
    for item in items:
        # The id from the file name on ("test_x.py::test_y[a/b]"): parameters may hold "/".
        path, _, rest = item.nodeid.partition("::")
        name = Path(path).name
        if in_check_tier(f"{name}::{rest}", item.fixturenames,
                         {m.name for m in item.iter_markers()}):
            item.add_marker(pytest.mark.check)
    items[:] = [i for _, i in sorted(zip(order_keys([i.nodeid for i in items]), items),
                                     key=lambda p: p[0])]


def order_keys(nodeids):
    """The sort keys of the tests' run order: the serial group first (the longest chain, so it
    starts at once); then the others, LONGEST_FIRST's first, then the groups of most tests;
    ties in the order collected.  Every worker collects the same order (xdist checks it), and
    the scheduler (below) keeps it."""
    size = {}
    for n in nodeids:
        g = group_of(n)
        size[g] = size.get(g, 0) + 1
    keys = []
    for k, n in enumerate(nodeids):
        name = Path(n.partition("::")[0]).name
        if name in SERIAL:
            keys.append((0, 0, 0, k))
            continue
        long = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
        keys.append((1, long, -size[group_of(n)], k))
    return keys


@pytest.fixture(scope="session")
def build():
    """The build directory, after checking `make` has been run."""
    if not (BUILD / "timewrite").exists():
        pytest.fail("build/timewrite is missing: run `make` (make test does it)")
    return BUILD


@functools.lru_cache(maxsize=None)
def machine_facts():
    """This machine's entry facts, as the support oracle reads them."""
    return doctor.Doctor().entry_facts()


@functools.lru_cache(maxsize=None)
def judged(program):
    """{variant: row} of probe.check_all: each variant probed and judged by the oracle.
    timewrite has no binary for a mechanism that cannot write (WRITE_VARIANTS), so those
    rows are not timewrite's to judge."""
    rows = {r["name"]: r for r in probe.check_all(program, facts=machine_facts())}
    if program == "timewrite":
        rows = {k: v for k, v in rows.items() if k in WRITE_VARIANTS}
    return rows


# A name a shell would read as code: spaces, quotes, `$(...)`, backquotes, `;`, a backslash,
# and a leading dash (test_faults_quoting: every `$(...)` would touch a file named PWNED*).
HOSTILE = "-x y 'q\" $(touch PWNED1) `touch PWNED2`;touch PWNED3 && a\\b"


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory, build):
    """One `tw run --quick` (every stage, about a minute) for the test run, shared by the
    files that read a complete quick results directory (test_run_quick, test_lesson,
    test_sweep, test_faults_quoting): (the directory, the finished process).  All are in the
    serial group, so under xdist it runs once, on its worker.  A test that changes the
    directory works on a copy.

    Its results directory and its TMPDIR have hostile names (HOSTILE; the directory given
    relative, `./-x y ...`, from its parent folder, the run's working directory), so that
    test_faults_quoting shows on every stage of a real run that such names run nothing and
    blind nothing: one run of the serial chain instead of two."""
    sandbox = tmp_path_factory.mktemp("quick")
    tmp = sandbox / ("-t " + HOSTILE)
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), TW_TMPDIR=str(tmp),
               TW_RESULTS=str(sandbox / "results"))
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "run", "--quick", "--out",
                        "./" + HOSTILE], capture_output=True, text=True, timeout=600,
                       cwd=sandbox, env=env)
    return sandbox / HOSTILE, p


@pytest.fixture(scope="session")
def matrix():
    return list(judged("timewrite").values())


def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (tracing with bpftrace/perf tracepoints)")


def need_watch():
    """tw watch's programs must load here: skip for a fact of this machine (not root, no BTF,
    no tracefs); fail when `make` did not build them (make test builds them)."""
    from twtools.measure import watch
    need_root()
    why = watch.why_not()
    if why and "not built" in why:
        pytest.fail(f"tw watch cannot run: {why}")
    if why:
        pytest.skip(f"tw watch cannot run here: {why}")


def need_tool(name):
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (make test installs it as root)")


def assemble32(source, out):
    """A static 32-bit program from nasm source text, at out (skips without nasm or ld)."""
    need_tool("nasm")
    need_tool("ld")
    src, obj = out.with_suffix(".asm"), out.with_suffix(".o")
    src.write_text(source)
    for cmd in (["nasm", "-f", "elf32", "-o", obj, src], ["ld", "-m", "elf_i386", "-o", out, obj]):
        p = run(cmd, text=True)
        assert p.returncode == 0, p.stderr
    return out


def need_supported(program, variant):
    """Skip only when the support oracle names a fact of this machine that rules the variant
    out; fail, naming the variant, when it must work here and does not."""
    r = judged(program)[variant]
    if r["status"] in ("works", "unpredicted"):
        return          # unpredicted (works against the oracle) fails tests/test_oracle.py
    if r["status"] == "unsupported" and r["expect"] == oracle.CANNOT:
        pytest.skip(f"{program}-{variant} cannot work here: {r['oracle']}")
    pytest.fail(f"{program}-{variant} is {r['status']}: {r['reason']}")


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([str(c) for c in cmd], **kw)


# Every mechanism has a syscost; timewrite copies its input with write(2), so the Makefile
# builds it only for the mechanisms whose operations include write-file.
VARIANTS = [v["name"] for v in registry.variants()]
WRITE_VARIANTS = [m.name for m in registry.mechanisms() if "write-file" in m.ops]


def recorded_run(fixture, tmp, run, stems=("percall",)):
    """A results directory tmp/run made from a pair of recorded runs in tests/fixtures: each
    stem's <run>-<stem>.json.xz as <stem>.json, <run>-meta.json, and the pair's
    fingerprint.json, for a test that replays the two runs of one machine."""
    d = tmp / run
    d.mkdir()
    for stem in stems:
        (d / f"{stem}.json").write_bytes(lzma.open(fixture / f"{run}-{stem}.json.xz").read())
    shutil.copy(fixture / f"{run}-meta.json", d / "meta.json")
    shutil.copy(fixture / "fingerprint.json", d / "fingerprint.json")
    return d


def wait_until(pred, seconds=30, step=0.05):
    """Whether pred() came true within `seconds`, asked every `step` (a last time at the end):
    for what a process or the kernel does a moment after the call that asked for it."""
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def wait_exec(pid, path, guard_s=60):
    """Waits until process pid runs the program at path (its exec done: /proc/PID/exe), where
    a short sleep after starting it was a guess on a loaded machine; guard_s is a hang guard."""
    import time
    want = os.path.realpath(path)
    end = time.monotonic() + guard_s
    while True:
        try:
            if os.readlink(f"/proc/{pid}/exe") == want:
                return
        except OSError:
            pass
        assert time.monotonic() < end, f"process {pid} never ran {path}"
        time.sleep(0.01)
