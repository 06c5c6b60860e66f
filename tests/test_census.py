"""tw census: every process on the machine, its entry paths, their cost per second, and what
booting with ia32_emulation=0 would stop.

A 32-bit program made here (NASM: int 0x80 forever, 50 getppid calls then a 1 ms nanosleep)
and Go's GOARCH=386 build (tests/goprog.py: inline int 0x80, code nobody here wrote) run while
`tw census` watches the machine; both must be named with their executables, their int 0x80
path, a per-second cost with an interval, and the ia32_emulation=0 statement.  Without root,
the census must say what it cannot see and still name the 32-bit process from /proc.

Why it can break: census.bt's pt_regs or TS_COMPAT reads on a new kernel (the compat calls
then look native, or their origin is lost), bpftrace's JSON map keys, a process's executable
not read from /proc, the readiness sentence changing its form, the per-call matrix lacking the
int 0x80 or vDSO cell.  Skips: not root, or bpftrace cannot attach here (its error quoted);
nasm/ld or Go missing (said so); 32-bit programs cannot run here (the oracle's fact).
"""
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (ROOT, assemble32, in_run_cgroup, need_root, need_supported, need_tool, run,
                      wait_exec)
from faults_util import checkout_for_others, hostile_crashes, trimmed
from goprog import go_program

LOOP32 = """; int 0x80 forever from the program's own text: 50 getppid, then a 1 ms nanosleep.
section .data
ts: dd 0, 1000000
section .text
global _start
_start:
.loop:
    mov esi, 50
.inner:
    mov eax, 64         ; getppid (i386)
    int 0x80
    dec esi
    jnz .inner
    mov eax, 162        ; nanosleep (i386)
    mov ebx, ts
    xor ecx, ecx
    int 0x80
    jmp .loop
"""
GO_WRITES = 2_000_000_000   # more than the test lasts (and an int on 386): killed at the end


def loop32(tmp_path):
    return assemble32(LOOP32, tmp_path / "loop32")


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """The 32-bit loop and the Go 386 program, running (at the lowest priority: the Go one
    writes as fast as it can), as {name: (path, Popen)}."""
    from twtools.machine import process
    need_supported("syscost", "32-int80")       # skips only where the oracle says 32-bit cannot run
    tmp = tmp_path_factory.mktemp("census")
    paths = {"loop32": loop32(tmp), "go386": go_program("386")}
    procs = {}
    try:
        procs["loop32"] = subprocess.Popen([str(paths["loop32"])], stdout=subprocess.DEVNULL)
        # the Go program writes as fast as it can: in the run's idle group (where the suite has
        # one), so that it takes what the other workers leave rather than a core from them
        procs["go386"] = subprocess.Popen(["nice", "-n", "19", str(paths["go386"]), str(GO_WRITES)],
                                          stdout=subprocess.DEVNULL,
                                          preexec_fn=in_run_cgroup("others"))
        for name, p in procs.items():
            wait_exec(p.pid, paths[name])       # nice execs the Go program in its own pid
            assert p.poll() is None, f"{name} ended at once (exit {p.returncode})"
            # nice execs the program: its pid then runs the Go binary
            assert process.read(p.pid, vdso=False)["bits"] == 32
        yield {k: (paths[k], procs[k]) for k in procs}
    finally:
        for p in procs.values():
            p.send_signal(signal.SIGKILL)
            p.wait()


@pytest.fixture(scope="module")
def traced(programs):
    """One census (3 s, --measure) while the two programs run, and a third 32-bit process,
    the loop again under `timeout 1`, that starts and ends inside its window once the census
    watches (its progress line)."""
    need_root()
    need_tool("bpftrace")
    out = census_watching(3, "--measure")
    subprocess.run(["timeout", "1", str(programs["loop32"][0])])
    stdout, stderr = out.communicate(timeout=600)
    assert out.returncode == 0, stderr[-3000:]
    d = json.loads(stdout)
    if d["why_not"]:
        pytest.skip(f"bpftrace cannot trace every process here: {d['why_not']}")
    return d


def proc_of(d, pid):
    return next((p for p in d["processes"] if p["pid"] == pid), None)


def test_both_programs_named_with_paths_paths_and_cost(traced, programs):
    for name, (path, p) in programs.items():
        row = proc_of(traced, p.pid)
        assert row is not None, f"{name} (pid {p.pid}) not in the census"
        assert row["exe"] == str(path), (name, row["exe"])
        assert row["bits"] == 32 and row["needs_ia32"]
        int80 = [g for g in row["paths"] if g["entry"] == "int80"]
        assert int80 and int80[0]["abi"] == "compat" and int80[0]["origin"] == "text", row["paths"]
        assert int80[0]["variant"] == "32-int80"
        s = row["slow_ns_per_s"]
        assert s is not None and s["ci_low"] <= s["median"] <= s["ci_high"], row
        assert int80[0]["figure"] in ("median", "undisturbed_ns")
    top = {t["name"] for t in proc_of(traced, programs["loop32"][1].pid)["top"]}
    assert {"getppid", "nanosleep"} <= top, top
    top = {t["name"] for t in proc_of(traced, programs["go386"][1].pid)["top"]}
    assert "write" in top, top


def test_readiness_statement_names_both(traced, programs):
    from twtools.present import census as present
    stop = {p["pid"] for p in traced["readiness"]["stop"]}
    int80 = {p["pid"] for p in traced["readiness"]["int80"]}
    for name, (path, p) in programs.items():
        assert p.pid in stop and p.pid in int80, name
    text = present.format_text(traced)
    first = text.splitlines()[0]
    assert first.startswith("Booting with ia32_emulation=0 here would stop "), first
    for name, (path, p) in programs.items():
        assert f"{p.pid} " in first and str(path) in first, (name, first)
    assert "These programs enter by int 0x80, costing " in text
    assert " ms [" in text.split("These programs enter by int 0x80, costing ")[1].splitlines()[0]


def test_tracer_cost_is_measured_or_says_why(traced):
    t = traced["tracer_cost"]
    assert t is not None
    if t["ns_per_s"] is None:
        assert t["why"]
    else:
        assert t["ns_per_s"]["ci_low"] <= t["ns_per_s"]["ci_high"]
        assert set(t["added_ns"]) == {"64-syscall", "32-int80"}
    assert traced["regs_ok"]["ok"] > 0 and traced["regs_ok"]["bad"] == 0


def test_census_json_is_versioned_and_reanalysable(traced):
    """Another checkout reads the JSON: the schema is named and versioned, and the raw census
    under 'raw' gives the same processes when analysed again."""
    from twtools.analyse import census as analyse
    assert traced["schema"] == analyse.SCHEMA == "timewrite-census-report/1"
    assert traced["raw"]["schema"] == "timewrite-census/3"
    again = analyse.analyse(traced["raw"])
    assert [p["pid"] for p in again["processes"]] == [p["pid"] for p in traced["processes"]]


def census_watching(seconds, *more):
    """tw census --json (with `more` arguments), started and waited for until it watches every
    process (its progress line)."""
    p = subprocess.Popen([sys.executable, ROOT / "scripts" / "tw", "census", "--seconds",
                          str(seconds), *more, "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    line = ""
    while "watching every process" not in line and time.monotonic() < deadline:
        line = p.stderr.readline()
        if not line and p.poll() is not None:
            break
    if p.poll() is not None:
        pytest.fail(f"tw census ended early: {p.stderr.read()[-2000:]}")
    return p


def test_short_lived_process_counts(traced, programs):
    """A 32-bit process that starts and ends inside the window (the census fixture's `timeout
    1` loop) is counted, with its path as execve was given it."""
    loop, d = programs["loop32"][0], traced
    # timeout forks and execs the loop: the loop's own pid is timeout's child
    rows = [p for p in d["processes"] if p["exe"] == str(loop) and p["started"] and p["exited"]]
    assert rows, [(p["pid"], p["exe"], p["started"], p["exited"]) for p in d["processes"][:20]]
    assert rows[0]["bits"] == 32 and rows[0]["exe_from"] in ("execve", "/proc")
    assert any(p["pid"] == rows[0]["pid"] for p in d["readiness"]["stop"])


DROP = """
import os, sys
sys.path.insert(0, {scripts!r})
import twtools.cli as cli
import twtools.cli.census, twtools.analyse.census, twtools.present.census  # noqa: F401
import twtools.measure.census, twtools.measure.syscost  # noqa: F401
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
sys.exit(cli.main(["census", "--seconds", "1", "--json"]))
"""


def test_without_root_says_what_it_cannot_see(programs):
    """As the user nobody (a root process that drops to it, having loaded the toolkit, since
    the project's Python may lie where nobody cannot read it): no call counts, said so, and
    the 32-bit loop still named from /proc."""
    need_root()
    # the loop as nobody too, from a directory nobody can enter: another user's executable
    # is what /proc hides from an unprivileged reader
    pub = Path(tempfile.mkdtemp(prefix="tw-census-"))
    try:
        pub.chmod(0o755)
        path = pub / "loop32"
        shutil.copy(programs["loop32"][0], path)
        path.chmod(0o755)
        loop = subprocess.Popen([str(path)], user=65534, group=65534, extra_groups=[],
                                stdout=subprocess.DEVNULL)
        try:
            # A clone under a mode-0700 directory (root's home, `mktemp -d`) is out of
            # nobody's reach: faults_util gives a copy it can reach, or skips saying why.
            with checkout_for_others() as checkout:
                p = run([sys.executable, "-c", DROP.format(scripts=str(checkout / "scripts"))],
                        text=True, cwd="/tmp", timeout=300)
        finally:
            loop.kill()
            loop.wait()
    finally:
        shutil.rmtree(pub)
    assert p.returncode == 0, p.stderr[-3000:]
    d = json.loads(p.stdout)
    assert d["root"] is False and d["why_not"] and "root" in d["why_not"]
    assert d["tracer_cost"] is None and all(not q["paths"] for q in d["processes"])
    stop = {q["pid"]: q for q in d["readiness"]["stop"]}
    assert loop.pid in stop and stop[loop.pid]["exe"] == str(path)
    from twtools.present import census as present
    text = present.format_text(d)
    assert text.startswith("Booting with ia32_emulation=0 here would stop ")
    assert "No call counts: tracing every process needs root" in text


# --- tw run's census stage and the report ---------------------------------------------------

@pytest.fixture(scope="module")
def stage_run(programs, tmp_path_factory):
    """tw run --quick --only census: census.json, and the report built from it."""
    need_root()
    out = tmp_path_factory.mktemp("run") / "res"
    p = run([sys.executable, ROOT / "scripts" / "tw", "run", "--quick", "--only", "census",
             "--out", out], text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_run_stage_writes_census_and_the_report_shows_it(stage_run, programs):
    raw = json.loads((stage_run / "census.json").read_text())
    assert raw["schema"] == "timewrite-census/3"
    md = (stage_run / "report.md").read_text()
    assert "## The running system: who enters the old ways" in md
    if raw["why_not"]:
        assert "No call counts" in md
    else:
        # the 32-bit loop is named; with --only census there is no matrix to price it with
        assert str(programs["loop32"][0]).replace(".", "\\.").replace("-", "\\-") in md or \
            str(programs["loop32"][0]) in md
        assert "No per-call matrix (this run has no bench stage): every cost is unknown." in md


HOSTILE = ["x", -1, None, 1e300, [], {}, True, "\x1b[2J"]


def test_damaged_census_json_is_read_or_refused(stage_run, tmp_path):
    """Each value of census.json replaced by a hostile one: the report's analysis and section
    either work or stop at DataError naming census.json, never a crash."""
    from twtools.analyse import census as analyse, results
    from twtools.present import census as present
    from twtools.present.document import Doc
    d = tmp_path / "res"
    shutil.copytree(stage_run, d)
    good = trimmed(json.loads((stage_run / "census.json").read_text()))

    def check(doc):
        (d / "census.json").write_text(json.dumps(doc))
        # what results.load does for this stage: read and check, then analyse
        obj, _ = results.read_stage(d, "census")
        c = analyse.analyse(obj, None, "none")
        present.report_section(Doc(), c)
        present.format_text(c)
    crashes = hostile_crashes(good, HOSTILE, check, "census.json")
    assert not crashes, "\n".join(crashes[:20])


def test_int80_calls_counted_in_vm_exits():
    """Issue 24 item 5: the readiness statement prices the int 0x80 callers in VM exits per
    second at the measured exit price, or says why it cannot."""
    from twtools.present import census as pcensus
    r = {"exit_price_ns": {"value": 4500.0, "ci_low": 4400.0, "ci_high": 4600.0},
         "int80_exits_per_s": {"median": 120.4, "ci_low": 110.2, "ci_high": 131.0}}
    assert pcensus.exits_text(r) == ("At 4500 ns [4400, 4600] an exit here (cpuid), that is "
                                     "120 [110, 131] exits' worth per second.")
    r["int80_exits_per_s"] = None
    assert "unknown, because" in pcensus.exits_text(r)
    r["exit_price_ns"] = {"value": None, "why": "unknown: these results have no cpuid cell"}
    assert pcensus.exits_text(r) == "In VM exits: unknown: these results have no cpuid cell."
