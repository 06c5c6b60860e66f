"""Hostile and odd walls, tried as a new user would: each is refused with its reason, exit 2,
before anything is made or run, or measured correctly.

A wall spec is the user's input: a filter file, a profile, a rules file, a stack's depth.
This breaks if a filter the kernel would refuse (a jump out of range, a load outside
seccomp_data, no return, opcode 0xffff, a scratch word read before it is stored) reaches
tw explain or tw ab as an internal error (exit 70), as an answer ("allow"), or as a folder
left behind holding only the filter; if a FIFO given as a profile blocks the command that
reads it; if a stack deeper than the kernel's MAX_INSNS_PER_PATH is described as installed;
if an audit spec refused for want of consent leaves a folder; if a measured call the wall
logs or traps is not said before the run; if `tw explain --wall audit:context` walks every
call through audit's hooks where no process gets an audit context; or if a child a signal
killed is reported as "exit -31: no message"."""
import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import ROOT, need_root
from twtools.machine import hostwalls
from twtools.measure import syscost

TW = [sys.executable, str(ROOT / "scripts" / "tw")]
ALLOW = 0x7FFF0000


def raw(*prog):
    return b"".join(struct.pack("<HBBI", c, jt, jf, k) for c, jt, jf, k in prog)


HOSTILE_BPF = {
    "jump-out-of-range": (raw((0x20, 0, 0, 0), (0x15, 9, 0, 1), (0x06, 0, 0, ALLOW)),
                          "conditional jump"),
    "load-outside": (raw((0x20, 0, 0, 200), (0x06, 0, 0, ALLOW)), "outside struct seccomp_data"),
    "no-return": (raw((0x06, 0, 0, ALLOW), (0x20, 0, 0, 0)), "does not end with a return"),
    "opcode-ffff": (raw((0xFFFF, 0, 0, 0), (0x06, 0, 0, ALLOW)), "not a classic BPF opcode"),
    "scratch-unset": (raw((0x60, 0, 0, 3), (0x16, 0, 0, 0)), "never stored"),
}


def tw(*args, timeout=120):
    return subprocess.run(TW + list(args), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.parametrize("name", sorted(HOSTILE_BPF))
def test_a_filter_the_kernel_refuses_is_refused_first_with_its_reason(tmp_path, name):
    data, why = HOSTILE_BPF[name]
    f = tmp_path / f"{name}.bpf"
    f.write_bytes(data)
    p = tw("explain", "--wall", f"seccomp:bpf:{f}")
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "the kernel would refuse this filter" in p.stderr and why in p.stderr, p.stderr
    assert "internal error" not in p.stderr and "Traceback" not in p.stderr
    out = tmp_path / "ab"
    p = tw("ab", "--wall", f"seccomp:bpf:{f}", "--variants", "64-syscall", "--ops", "getppid",
           "--rounds", "2", "--out", str(out))
    assert p.returncode == 2 and why in p.stderr, p.stderr
    assert not out.exists()                     # nothing made: no folder holding the filter


@pytest.mark.parametrize("spec", ["seccomp:{}", "seccomp:bpf:{}", "seccomp:stack:2:{}",
                                  "audit:{}"])
def test_a_fifo_as_the_walls_file_is_refused_without_blocking(tmp_path, spec):
    fifo = tmp_path / "profile"
    os.mkfifo(fifo)
    for cmd in (["explain", "--wall", spec.format(fifo)],
                ["ab", "--wall", spec.format(fifo), "--variants", "64-syscall", "--ops",
                 "getppid", "--out", str(tmp_path / "ab")]):
        p = tw(*cmd, timeout=60)             # a blocked read would time out here
        if spec.startswith("audit") and os.geteuid() != 0:
            assert p.returncode == 2
            continue
        assert p.returncode == 2 and "not a regular file" in p.stderr, (cmd, p.stderr)
    assert not (tmp_path / "ab").exists()


def test_a_stack_the_kernel_refuses_is_refused_with_how_many_fit(tmp_path):
    p = tw("explain", "--wall", "seccomp:stack:40")
    assert p.returncode == 2, p.stdout
    assert "the kernel refuses filter 24 of this stack" in p.stderr, p.stderr
    assert "MAX_INSNS_PER_PATH" in p.stderr and "at most 23 of these filters fit" in p.stderr
    p = tw("ab", "--wall", "seccomp:stack:40", "--variants", "64-syscall", "--ops", "getppid",
           "--out", str(tmp_path / "ab"))
    assert p.returncode == 2 and "filter 24" in p.stderr
    assert not (tmp_path / "ab").exists()
    # 23 fit: explained, installed 23 times over
    p = tw("explain", "--wall", "seccomp:stack:23")
    assert p.returncode == 0 and "23 times over" in p.stdout, p.stderr


def test_a_profile_that_is_not_one_is_exit_2(tmp_path):
    for text, why in (("{", "not JSON"), ("[]", "not a JSON object"),
                      ('{"defaultAction": "SCMP_ACT_NOPE"}', "defaultAction"),
                      ('{"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["X"], '
                       '"archMap": [{"architecture": "SCMP_ARCH_X86_64"}]}', "archMap")):
        f = tmp_path / "p.json"
        f.write_text(text)
        p = tw("explain", "--wall", f"seccomp:{f}")
        assert p.returncode == 2 and why in p.stderr, (text, p.stderr)
    p = tw("explain", "--wall", f"seccomp:{tmp_path / 'missing.json'}")
    assert p.returncode == 2 and "no such file" in p.stderr
    p = tw("ab", "--wall", "seccomp:docker", "--caps", "docker,CAP_NOPE", "--out",
           str(tmp_path / "ab"))
    assert p.returncode == 2 and "CAP_NOPE" in p.stderr
    assert not (tmp_path / "ab").exists()


def test_calls_the_wall_logs_or_traps_are_said_before_the_run(build, tmp_path):
    prof = tmp_path / "log-trap.json"
    prof.write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_LOG"},
                     {"names": ["uname"], "action": "SCMP_ACT_TRAP"}]}))
    p = tw("ab", "--wall", f"seccomp:{prof}", "--variants", "64-syscall", "--ops",
           "getppid,null", "--rounds", "2", "--copies", "2", "--format", "json",
           "--out", str(tmp_path / "ab"), timeout=600)
    err = p.stderr
    assert p.returncode == 0, err
    assert "allowed and logged" in err and "kernel" in err and "log" in err, err
    # said before the run starts
    assert err.index("allowed and logged") < err.index("ab: A (bare) against")
    rows = {r["op"]: r for r in json.loads(p.stdout)}
    assert rows["getppid"]["added_ns"] is not None


def test_a_wall_that_stops_syscost_itself_is_said_and_left_out(build, tmp_path):
    # trapping write kills every process that reports, the measured call or not: each cell
    # is said before the run and reported without a figure, never a run killed by SIGSYS
    prof = tmp_path / "trap-write.json"
    prof.write_text(json.dumps({
        "defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [{"names": ["write"], "action": "SCMP_ACT_TRAP"}]}))
    p = tw("ab", "--wall", f"seccomp:{prof}", "--variants", "64-syscall", "--ops",
           "getppid,write-devnull", "--rounds", "2", "--copies", "2", "--format", "json",
           "--out", str(tmp_path / "ab"), timeout=600)
    err = p.stderr
    assert "syscost's own write" in err and "SIGSYS (trap)" in err, err
    assert err.index("syscost's own write") < err.index("ab: A (bare) against")
    assert "killed by" not in err
    rows = {r["op"]: r for r in json.loads(p.stdout)}
    assert all(r["decision"] == "unknown" for r in rows.values())


def test_audit_context_is_explained_as_the_host_is():
    need_root()
    if hostwalls.auditctl() is None:
        pytest.fail("auditctl is missing: make test unpacks it into build/auditd")
    p = tw("explain", "--wall", "audit:context")
    assert p.returncode == 0, p.stderr
    from twtools.measure import workflags
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        host = workflags.audit_host(t)
    if host["context"] is None:
        pytest.skip(f"what audit gives a new process here is unknown: {host['why']}")
    if host["context"]:
        assert "a new process gets an audit context" in p.stdout
        pytest.skip("audit was enabled in this boot: every new process has a context, "
                    "so the no-context path cannot be shown here")
    assert "a new process gets no audit context" in p.stdout
    assert "no audit context here" in p.stdout and "adds nothing" in p.stdout
    assert "audit_filter_syscall" not in p.stdout


def test_an_audit_spec_refused_for_want_of_consent_leaves_no_folder(tmp_path):
    need_root()
    if hostwalls.auditctl() is None:
        pytest.fail("auditctl is missing: make test unpacks it into build/auditd")
    st = hostwalls.audit_status()
    if st["enabled"] != 0:
        pytest.skip(f"audit is on here (enabled {st['enabled']}): consent is asked only where "
                    "it is off")
    out = tmp_path / "ab"
    p = tw("ab", "--wall", "audit:compliance", "--variants", "64-syscall", "--ops", "getppid",
           "--out", str(out))
    assert p.returncode == 2 and "--enable-audit" in p.stderr, p.stderr
    assert not out.exists()
    assert hostwalls.audit_status()["enabled"] == 0


def test_a_child_a_signal_killed_is_named_by_its_signal(build):
    with pytest.raises(syscost.SyscostError) as e:
        syscost.measure("64-syscall", "getppid", sampling=syscost.Sampling(batches=1),
                        launch=syscost.Launch(
                            command_wrapper=lambda cmd: ["/bin/sh", "-c", "kill -SYS $$"]))
    assert "killed by SIGSYS (signal 31)" in str(e.value)
    assert "exit -31" not in str(e.value)


@pytest.mark.parametrize("profile", ["docker-ioctl-70k", "two-on-one-arg"])
def test_a_large_profile_and_two_conditions_on_one_argument_are_measured(build, tmp_path,
                                                                        profile):
    # a 70 KB profile that refuses ioctl but for terminal requests (stdio's own isatty is
    # one), and one with two conditions on getppid's argument: runc adds a rule for each
    f = ROOT / "tests" / "fixtures" / "walls" / f"{profile}.json"
    p = tw("ab", "--wall", f"seccomp:{f}", "--variants", "64-syscall", "--ops", "getppid",
           "--rounds", "2", "--copies", "2", "--format", "json", "--out", str(tmp_path / "ab"),
           timeout=600)
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["added_ns"] is not None and "answer: allow" in row["why"]
