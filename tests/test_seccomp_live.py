"""syscost --seccomp puts the filter between the measured process and the kernel, and the
kernel answers each call as the user-space run of the same filter says it will.

tw ab --wall seccomp:... measures B behind a filter that syscost installs after its set-up;
the cell's explanation comes from running the same bytes in user space.  This breaks if the
filter is not installed (the process is then measured bare: Seccomp 0 in its status), is
installed the wrong number of times (a stack of N filters must show N), is installed before
the set-up (the set-up's own calls are then refused), or if the simulator's answer differs
from the kernel's: syscost checks every call's result against the answer it was told
(--errno N for a filter that answers -N), so a wrong prediction fails the run.  The
architecture hole is checked live: a filter that denies getppid by its x86-64 number alone
lets int 0x80 from 64-bit code make getppid under its i386 number, and a filter that checks
the architecture does not."""
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, need_supported, run
from twtools.machine import registry, seccomp, seccompprofile, seccompruntime, seccompsim
from twtools.measure import walls
from twtools.measure.walls.seccompwall import UNDEFINED, SeccompWall

X64, I386 = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_I386
WAYS = ("64-syscall", "64-int80", "32-int80", "32-syscall", "32-sysenter", "32-vdso",
        "64-libc", "32-libc")
OPS = ("null", "getppid", "write-devnull")


def bpf(*prog):
    return b"".join(struct.pack("<HBBI", c, jt, jf, k) for c, jt, jf, k in prog)


def syscost(variant, op, *extra):
    p = run([BUILD / f"syscost-{variant}", "--op", op, "--batches", "1", "--batch-ms", "0.2",
             "--warmup-ms", "1", *extra], text=True)
    return p, (json.loads(p.stdout) if p.returncode == 0 else None)


PROFILES = {"container": ROOT / "walls" / "profiles" / "container.json",
            "args": ROOT / "walls" / "profiles" / "args.json",
            "docker": ROOT / "walls" / "profiles" / "docker.json",
            "podman": Path("/usr/share/containers/seccomp.json"),
            "docker-ioctl-70k": ROOT / "tests" / "fixtures" / "walls" / "docker-ioctl-70k.json",
            "two-on-one-arg": ROOT / "tests" / "fixtures" / "walls" / "two-on-one-arg.json"}


def compiled(name, runtime="runc", doc=None):
    spec, _ = seccompprofile.read(doc or json.loads(PROFILES[name].read_text()))
    return seccompruntime.compile(spec, runtime)


def profile_filter(tmp_path, name, runtime="runc"):
    f = compiled(name, runtime)
    path = tmp_path / f"{name}-{runtime}.bpf"
    path.write_bytes(f.program)
    return path, seccompsim.load(f.program), f


@pytest.mark.parametrize("variant", [v for v in WAYS if v in registry.names()])
@pytest.mark.parametrize("profile,runtime", [("container", "runc"), ("args", "runc"),
                                             ("docker", "runc"), ("docker", "crun"),
                                             ("podman", "runc"), ("podman", "crun"),
                                             ("podman", "libseccomp"),
                                             ("docker-ioctl-70k", "runc"),
                                             ("two-on-one-arg", "runc"),
                                             ("two-on-one-arg", "crun")])
def test_the_kernel_answers_as_the_simulator_says(build, tmp_path, variant, profile, runtime):
    need_supported("syscost", variant)
    f, prog, c = profile_filter(tmp_path, profile, runtime)
    wall = SeccompWall(walls.parse(f"seccomp:bpf:{f}"))
    for op in OPS:
        _, nr, arch, args = seccomp.cell_call(registry.get(variant).abi, op)
        ret = seccompsim.run(prog, nr, arch, args)[0]
        if wall.answer(variant, op, registry.get(variant).abi)[1] is None:
            # the answer hangs on arguments the call leaves undefined: glibc's getppid
            # passes whatever its registers hold, and the wall refuses to measure it
            assert registry.get(variant).entry == "libc" and op == "getppid", (variant, op)
            assert wall.before(variant, op, registry.get(variant).abi).why == UNDEFINED
            continue
        extra = ["--seccomp", f, "--seccomp-flags", str(c.flags)]
        if ret & seccomp.RET_ACTION_FULL == seccomp.RET_ERRNO:
            extra += ["--errno", str(ret & seccomp.RET_DATA)]
        else:
            assert ret == seccomp.RET_ALLOW, (op, hex(ret))
        p, out = syscost(variant, op, *extra)
        assert p.returncode == 0, (op, extra, p.stderr)
        assert out["wall"]["status"]["Seccomp"] == "2"
        assert out["wall"]["status"]["Seccomp_filters"] == "1"
        assert out["wall"]["status"]["NoNewPrivs"] == "1"
        assert out["wall"]["seccomp_flags"] == c.flags
        # the opposite prediction fails: syscost checks every result
        # (a wrong errno, not its absence: runc's ENOSYS for the null call is also what the
        # bare kernel answers it)
        wrong = extra[:4] + ["--errno", str(int(extra[5]) % 4095 + 1) if "--errno" in extra
                             else "1"]
        assert syscost(variant, op, *wrong)[0].returncode == 1, (op, wrong)


def test_a_stack_of_n_filters_is_n_filters_and_the_bare_side_has_none(build, tmp_path):
    f, _, _ = profile_filter(tmp_path, "container")
    p, out = syscost("64-syscall", "getppid", "--seccomp", f, "--seccomp-times", "3")
    assert p.returncode == 0, p.stderr
    assert out["wall"]["status"]["Seccomp_filters"] == "3"
    assert out["wall"]["seccomp_times"] == 3
    p, out = syscost("64-syscall", "getppid")
    assert p.returncode == 0, p.stderr
    assert out["wall"]["status"]["Seccomp"] == "0" and out["wall"]["seccomp"] is None


def test_syscost_refuses_what_is_not_a_filter(build, tmp_path):
    f = tmp_path / "odd.bpf"
    f.write_bytes(b"\x06\x00\x00")
    p, _ = syscost("64-syscall", "getppid", "--seccomp", f)
    assert p.returncode == 1 and "not a seccomp filter" in p.stderr
    p, _ = syscost("64-syscall", "getppid", "--errno", "1")
    assert p.returncode == 2 and "--errno applies with --seccomp only" in p.stderr


LD_NR, LD_ARCH = (0x20, 0, 0, 0), (0x20, 0, 0, 4)
DENY_GETPPID_BY_NUMBER = bpf(LD_NR, (0x15, 0, 1, 110), (0x06, 0, 0, 0x00050001),
                             (0x06, 0, 0, seccomp.RET_ALLOW))
# The same with the architecture checked first: any other arch answers EPERM.
DENY_GETPPID_CHECKED = bpf(LD_ARCH, (0x15, 1, 0, X64), (0x06, 0, 0, 0x00050001), LD_NR,
                           (0x15, 0, 1, 110), (0x06, 0, 0, 0x00050001),
                           (0x06, 0, 0, seccomp.RET_ALLOW))


def test_the_architecture_hole_live(build, tmp_path):
    need_supported("syscost", "64-int80")
    holey, checked = tmp_path / "numbers-only.bpf", tmp_path / "checked.bpf"
    holey.write_bytes(DENY_GETPPID_BY_NUMBER)
    checked.write_bytes(DENY_GETPPID_CHECKED)
    # the 64-bit syscall is denied by both
    for f in (holey, checked):
        p, _ = syscost("64-syscall", "getppid", "--seccomp", f, "--errno", "1")
        assert p.returncode == 0, p.stderr
    # int 0x80 from the same 64-bit code gets through the numbers-only filter...
    p, _ = syscost("64-int80", "getppid", "--seccomp", holey)
    assert p.returncode == 0, p.stderr
    # ...and not through the one that checks the architecture
    p, _ = syscost("64-int80", "getppid", "--seccomp", checked, "--errno", "1")
    assert p.returncode == 0, p.stderr
    # the analysis says the same of both
    from twtools.analyse import walls
    assert [h["name"] for h in walls.arch_hole([seccompsim.parse(DENY_GETPPID_BY_NUMBER)])
            ["holes"]] == ["getppid"]
    assert walls.arch_hole([seccompsim.parse(DENY_GETPPID_CHECKED)])["holes"] == []


def test_the_stack_limit_is_where_the_kernel_refuses(build, tmp_path):
    # seccompsim.stack_refused predicts the filter seccomp_attach_filter refuses (ENOMEM past
    # MAX_INSNS_PER_PATH): the kernel takes that many and refuses one more
    f, prog, _ = profile_filter(tmp_path, "container")
    bad = seccompsim.stack_refused([prog] * 64)
    assert bad is not None and bad < 64
    p, out = syscost("64-syscall", "getppid", "--seccomp", f, "--seccomp-times", str(bad))
    assert p.returncode == 0, p.stderr
    assert out["wall"]["status"]["Seccomp_filters"] == str(bad)
    p, _ = syscost("64-syscall", "getppid", "--seccomp", f, "--seccomp-times", str(bad + 1))
    assert p.returncode == 1 and f"filter {bad + 1} of {bad + 1}" in p.stderr, p.stderr
    assert "Cannot allocate memory" in p.stderr


def test_trace_and_notify_without_a_tracer_or_supervisor_answer_enosys(build, tmp_path):
    for action in ("SCMP_ACT_TRACE", "SCMP_ACT_NOTIFY"):
        doc = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
               "syscalls": [{"names": ["getppid"], "action": action}]}
        c = compiled(None, "crun", doc)
        path = tmp_path / f"{action}.bpf"
        path.write_bytes(c.program)
        p, _ = syscost("64-syscall", "getppid", "--seccomp", path, "--errno", "38")
        assert p.returncode == 0, (action, p.stderr)


def test_the_log_flag_and_spec_allow_are_taken_by_the_kernel(build, tmp_path):
    f, _, _ = profile_filter(tmp_path, "container")
    for flags in (2, 4, 6):
        p, out = syscost("64-syscall", "getppid", "--seccomp", f, "--seccomp-flags", str(flags))
        assert p.returncode == 0, p.stderr
        assert out["wall"]["seccomp_flags"] == flags


def test_the_cache_check_runs_against_the_kernel(build):
    # tw explain --check-cache: each category predicted, and what the kernel showed (its
    # /proc file, or the price of the call): the figures are the host's, not judged here
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "tw"), "explain", "--wall",
                        "seccomp:allow", "--check-cache", "--json"], capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert p.returncode in (0, 1), p.stderr
    v = json.loads(p.stdout)["verdicts"]
    whats = {(r["arch"], r["what"].split(" (")[0]) for r in v["rows"]}
    assert ("x86_64", "a number past the table") in whats
    assert ("x86_64", "a number below the table's size that no call has") in whats
    for r in v["rows"]:
        assert r["predicted"] is (r["what"] != "a number past the table")
        assert r["measured"] is not None or r.get("why")
