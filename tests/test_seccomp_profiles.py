"""Docker's and podman's default seccomp profiles, exactly as published, read as their engines
read them and laid out as runc, crun and libseccomp lay them out.

Users bring the profiles their runtimes ship, and a profile read differently here than the
runtime reads it measures another wall.  This breaks if archMap is not read (Docker's profile
then kills every 32-bit call, where Docker allows them), if includes/excludes are decided for
another architecture than the native one, if minKernel is not compared with the kernel, if
the capabilities assumed are not Docker's default set (chroot then comes out denied), if two
conditions on one argument are refused where runc and crun add one rule each, if the flags a
runtime installs with are dropped (SPEC_ALLOW by default), if TRACE without errnoRet does not
answer EPERM, if what crun or runc refuse is accepted (errnoRet on ALLOW, NOTIFY as the
default), if runc's layout (its -ENOSYS stub, libseccomp's binary tree past 32 rules) stops
being runc's own (checked byte for byte against what runc itself made of the same profiles:
tests/fixtures/walls/runc/README.md), or if a large filter's export hangs (a pipe of 64 KiB
filled once).  Docker's profile is walls/profiles/docker.json (moby/profiles, Apache-2.0, its
licence beside it); podman's is the one Debian ships in golang-github-containers-common."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from twtools.machine import seccomp, seccompprofile as sp, seccompruntime as sr, seccompsim

X64, I386 = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_I386
DOCKER = ROOT / "walls" / "profiles" / "docker.json"
PODMAN = Path("/usr/share/containers/seccomp.json")
RUNC = ROOT / "tests" / "fixtures" / "walls" / "runc"
SIZES = {X64: 470, I386: 470}


def docker():
    return json.loads(DOCKER.read_text())


def podman():
    if not PODMAN.exists():
        pytest.fail(f"{PODMAN} is missing: make test installs golang-github-containers-common")
    return json.loads(PODMAN.read_text())


def answer(prog, name, arch, args=(0, 0, 0)):
    nr = seccomp.number(name, arch)
    return seccompsim.run(prog, nr, arch, args)[0]


def compiled(doc, runtime="runc", caps=None, release=None):
    spec, notes = sp.read(doc, caps, release)
    f = sr.compile(spec, runtime)
    return seccompsim.load(f.program), f, notes


def test_the_docker_profile_is_mobys_as_published_with_its_licence():
    doc = docker()
    assert [a["architecture"] for a in doc["archMap"]][0] == "SCMP_ARCH_X86_64"
    lic = (ROOT / "walls" / "profiles" / "docker.json.LICENSE").read_text()
    assert "Apache License" in lic and "Version 2.0" in lic
    assert "docker.json" in (ROOT / "packaging" / "copyright").read_text()


@pytest.mark.parametrize("which", ["docker", "podman"])
@pytest.mark.parametrize("runtime", sr.RUNTIMES)
def test_a_32_bit_program_in_a_container_is_allowed_what_the_profile_allows(which, runtime):
    doc = docker() if which == "docker" else podman()
    spec, notes = sp.read(doc)
    assert spec["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"]
    prog, f, _ = compiled(doc, runtime)
    for arch in (X64, I386):
        assert answer(prog, "getppid", arch) == seccomp.RET_ALLOW
        assert answer(prog, "write", arch, (3, 0, 1)) == seccomp.RET_ALLOW
        assert answer(prog, "kexec_load", arch) & seccomp.RET_ACTION_FULL == seccomp.RET_ERRNO
    # the cache holds getppid for both, as the kernel will
    for arch in (X64, I386):
        assert seccompsim.cached([prog], seccomp.number("getppid", arch), arch, SIZES)


def test_dockers_default_capabilities_decide_its_rules():
    prog, _, notes = compiled(docker())
    assert answer(prog, "chroot", X64) == seccomp.RET_ALLOW          # CAP_SYS_CHROOT
    assert answer(prog, "reboot", X64) == seccomp.RET_ERRNO | 1        # no CAP_SYS_BOOT
    assert any("CAP_SYS_BOOT" in n for n in notes)
    # with no capabilities chroot is denied; with CAP_SYS_BOOT reboot is allowed
    prog, _, _ = compiled(docker(), caps=sp.caps_set("none"))
    assert answer(prog, "chroot", X64) == seccomp.RET_ERRNO | 1
    prog, _, _ = compiled(docker(), caps=sp.caps_set("docker,SYS_BOOT"))
    assert answer(prog, "reboot", X64) == seccomp.RET_ALLOW
    # CAP_SYS_ADMIN swaps clone's argument rule for an unconditional allow
    plain, _, _ = compiled(docker())
    admin, _, _ = compiled(docker(), caps=sp.caps_set("docker,CAP_SYS_ADMIN"))
    newns = 0x10000000                                                  # CLONE_NEWUSER
    assert answer(plain, "clone", X64, (newns, 0, 0)) == seccomp.RET_ERRNO | 1
    assert answer(admin, "clone", X64, (newns, 0, 0)) == seccomp.RET_ALLOW
    with pytest.raises(sp.ProfileError):
        sp.caps_set("docker,CAP_NOT_A_CAP")


def test_includes_and_excludes_are_decided_for_the_native_architecture_alone():
    prog, _, notes = compiled(docker())
    # arch_prctl is included for amd64 and x32: the native one is amd64, so it is in, for
    # every architecture of the filter (the engine decides the rule, not the call's arch)
    assert answer(prog, "arch_prctl", X64) == seccomp.RET_ALLOW
    # the s390 clone rule is left out: s390 is not the native architecture
    assert any("s390" in n and "left out" in n for n in notes)


def test_min_kernel_is_compared_with_the_running_kernels_major_and_minor():
    doc = {"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"],
           "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ALLOW",
                         "includes": {"minKernel": "6.18"}},
                        {"names": ["getpid"], "action": "SCMP_ACT_ALLOW",
                         "excludes": {"minKernel": "6.1"}}]}
    spec, _ = sp.read(doc, release="6.18.44-fc-v1300")
    assert [r["names"] for r in spec["syscalls"]] == [["getppid"]]
    spec, notes = sp.read(doc, release="5.10.0-28-amd64")
    assert [r["names"] for r in spec["syscalls"]] == [["getpid"]]
    assert any("minKernel 6.18: the kernel is older" in n for n in notes)
    with pytest.raises(sp.ProfileError, match="minKernel"):
        sp.read(dict(doc, syscalls=[dict(doc["syscalls"][0], includes={"minKernel": "6"})]))


def test_podmans_errno_names_and_default_errno_are_read():
    prog, f, _ = compiled(podman(), "crun")
    # defaultErrno ENOSYS (38) for a call no rule names
    assert seccompsim.run(prog, 0x7FFF, X64)[0] == seccomp.RET_ERRNO | 38
    # rules with "errno": "EPERM"
    assert answer(prog, "kexec_file_load", X64) == seccomp.RET_ERRNO | 1


def two_on_one(runtime):
    doc = {"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"],
           "syscalls": [{"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                         "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"},
                                  {"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}]}]}
    spec, _ = sp.read(doc)
    return sr.compile(spec, runtime)


@pytest.mark.parametrize("runtime", ["runc", "crun"])
def test_two_conditions_on_one_argument_are_two_rules_as_runc_and_crun_make_them(runtime):
    f = two_on_one(runtime)
    prog = seccompsim.load(f.program)
    for persona in (0, 8):
        assert answer(prog, "personality", X64, (persona, 0, 0)) == seccomp.RET_ALLOW
    assert answer(prog, "personality", X64, (3, 0, 0)) == seccomp.RET_ERRNO | 1
    assert f.rules == 2 and any("two conditions on one argument" in n for n in f.notes)


def test_libseccomp_alone_refuses_two_conditions_on_one_argument():
    with pytest.raises(sp.ProfileError, match="libseccomp refused the rule"):
        two_on_one("libseccomp")


def test_flags_are_the_runtimes():
    doc = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
        {"names": ["mount"], "action": "SCMP_ACT_ERRNO"}]}
    spec, _ = sp.read(doc)
    assert sr.compile(spec, "runc").flags == sr.FLAG_SPEC_ALLOW
    assert sr.compile(spec, "crun").flags == sr.FLAG_SPEC_ALLOW
    assert sr.compile(spec, "libseccomp").flags == 0
    spec, _ = sp.read(dict(doc, flags=["SECCOMP_FILTER_FLAG_LOG"]))
    for rt in sr.RUNTIMES:
        assert sr.compile(spec, rt).flags == sr.FLAG_LOG        # named: no default added
    spec, _ = sp.read(dict(doc, flags=[]))
    assert sr.compile(spec, "runc").flags == 0
    spec, _ = sp.read(dict(doc, flags=["SECCOMP_FILTER_FLAG_NOPE"]))
    with pytest.raises(sp.ProfileError, match="not known"):
        sr.compile(spec, "runc")
    spec, _ = sp.read(dict(doc, flags=["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]))
    with pytest.raises(sp.ProfileError, match="supervisor"):
        sr.compile(spec, "crun")


def test_trace_without_errno_ret_answers_eperm_as_runc_and_crun_do():
    doc = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"],
           "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_TRACE"}]}
    spec, _ = sp.read(doc)
    for rt in sr.RUNTIMES:
        prog = seccompsim.load(sr.compile(spec, rt).program)
        assert answer(prog, "getppid", X64) == seccomp.RET_TRACE | 1


def test_the_refusals_of_the_engines_and_the_runtimes():
    base = {"defaultAction": "SCMP_ACT_ERRNO", "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["getppid"], "action": "SCMP_ACT_ALLOW"}]}
    with pytest.raises(sp.ProfileError, match="both 'architectures' and 'archMap'"):
        sp.read(dict(base, archMap=docker()["archMap"]))
    with pytest.raises(sp.ProfileError, match="both 'name' and 'names'"):
        sp.read(dict(base, syscalls=[{"name": "getpid", "names": ["getppid"],
                                      "action": "SCMP_ACT_ALLOW"}]))
    with pytest.raises(sp.ProfileError, match="seccomp turned off"):
        sp.read({"syscalls": []})
    # errnoRet on ALLOW: crun refuses it, runc does not read it
    spec, _ = sp.read(dict(base, syscalls=[{"names": ["getppid"], "action": "SCMP_ACT_ALLOW",
                                            "errnoRet": 5}]))
    with pytest.raises(sp.ProfileError, match="errno value specified"):
        sr.compile(spec, "crun")
    prog = seccompsim.load(sr.compile(spec, "runc").program)
    assert answer(prog, "getppid", X64) == seccomp.RET_ALLOW
    # NOTIFY as the default action: refused; on write under runc: refused
    spec, _ = sp.read(dict(base, defaultAction="SCMP_ACT_NOTIFY"))
    for rt in sr.RUNTIMES:
        with pytest.raises(sp.ProfileError, match="default action"):
            sr.compile(spec, rt)
    spec, _ = sp.read(dict(base, syscalls=[{"names": ["write"], "action": "SCMP_ACT_NOTIFY"}]))
    with pytest.raises(sp.ProfileError, match="write syscall"):
        sr.compile(spec, "runc")


def runc_made(name):
    """What runc itself made of the profile: (flags, [(code, jt, jf, k)]) per order seen."""
    out = []
    for f in sorted(RUNC.glob(f"{name}-order*.txt")):
        lines = f.read_text().splitlines()
        out.append((int(lines[0].split()[1]), [tuple(map(int, ln.split())) for ln in lines[1:]]))
    return out


@pytest.mark.parametrize("name", ["docker", "podman", "container", "args"])
def test_runcs_layout_is_runcs_own(name):
    if seccomp.version() != "2.5.4":
        pytest.skip(f"the fixtures were made with libseccomp 2.5.4; this is {seccomp.version()}")
    made = runc_made(name)
    assert made, name
    spec = json.loads((RUNC / f"oci-{name}.json").read_text())
    spec = {"defaultAction": spec["defaultAction"], "defaultErrnoRet": spec.get("defaultErrnoRet"),
            "architectures": spec.get("architectures") or [], "flags": spec.get("flags"),
            "syscalls": [{"names": r["names"], "action": r["action"],
                          "errnoRet": r.get("errnoRet"), "args": [
                              {"index": a["index"], "value": a.get("value", 0),
                               "valueTwo": a.get("valueTwo", 0), "op": a["op"]}
                              for a in r.get("args") or []], "at": i}
                         for i, r in enumerate(spec["syscalls"])]}
    f = sr.compile(spec, "runc")
    ours = seccompsim.load(f.program)
    stubs = []
    for flags, prog in made:
        assert flags == f.flags
        # libseccomp's program after the stub: byte for byte
        assert prog[f.stub:] == ours[f.stub:]
        stubs.append(prog[:f.stub])
        # the stub: runc lays its sections out in Go's map order, drawn anew each time, so
        # the same answers and the same instructions run, in one order or another
        for arch in (X64, I386, 0xC00000B7):
            for nr in list(range(0, 480, 7)) + [0x7FFF, 0x40000000 + 100, 0x40000000 + 600]:
                assert seccompsim.run(prog, nr, arch)[0] == seccompsim.run(ours, nr, arch)[0]
    assert ours[:f.stub] in stubs or name == "docker"       # runc drew 3 of docker's 4 orders


def test_the_stub_answers_enosys_past_the_profiles_newest_call_under_runc_only():
    for rt, want in (("runc", seccomp.RET_ERRNO | 38), ("crun", seccomp.RET_ERRNO | 1)):
        prog, f, _ = compiled(docker(), rt)
        assert seccompsim.run(prog, 0x7FFF, X64)[0] == want
    prog, f, _ = compiled(docker(), "runc")
    r, n, _ = seccompsim.run(prog, 0x7FFF, X64)
    assert n == 6 and f.stub == 14          # the null call runs 6 of runc's instructions


def test_a_filter_larger_than_a_pipe_is_exported_whole():
    # 9000 argument rules on ioctl (libseccomp shares identical chains, so the values
    # differ): more than 64 KiB of filter, which a pipe's capacity
    # stopped (the export blocked for ever); the kernel would refuse it, past BPF_MAXINSNS,
    # and the refusal says so.  In a child with a deadline: a hang fails, it does not stall.
    code = (
        "import json, sys\n"
        "from twtools.machine import seccompprofile as sp, seccompruntime as sr\n"
        "doc = {'defaultAction': 'SCMP_ACT_ERRNO', 'architectures': ['SCMP_ARCH_X86_64'],\n"
        "       'syscalls': [{'names': ['ioctl'], 'action': 'SCMP_ACT_ALLOW', 'args':\n"
        "                     [{'index': 1, 'value': v, 'op': 'SCMP_CMP_EQ'}]} for v in range(9000)]}\n"
        "try:\n"
        "    sr.compile(sp.read(doc)[0], 'libseccomp')\n"
        "except sp.ProfileError as e:\n"
        "    print(e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "scripts")))
    assert p.returncode == 0, p.stderr
    m = re.search(r"(\d+) bytes: not a whole number of 8-byte instructions, 1 to 4096", p.stdout)
    assert m and int(m.group(1)) > 65536, p.stdout


def test_a_70_kb_profile_and_two_conditions_on_one_argument_as_published_fixtures():
    fx = ROOT / "tests" / "fixtures" / "walls"
    big = json.loads((fx / "docker-ioctl-70k.json").read_text())
    assert (fx / "docker-ioctl-70k.json").stat().st_size > 65536
    prog, f, _ = compiled(big)
    assert len(prog) > 1500
    ioctl = seccomp.number("ioctl", X64)
    assert seccompsim.run(prog, ioctl, X64, (0, 0x5401, 0))[0] == seccomp.RET_ALLOW
    assert seccompsim.run(prog, ioctl, X64, (0, 0x6000, 0))[0] == seccomp.RET_ERRNO | 1
    two = json.loads((fx / "two-on-one-arg.json").read_text())
    for rt in ("runc", "crun"):
        prog, f, _ = compiled(two, rt)
        for a0, want in ((0, seccomp.RET_ALLOW), (8, seccomp.RET_ALLOW), (1, seccomp.RET_ERRNO | 1)):
            assert answer(prog, "getppid", X64, (a0, 0, 0)) == want, (rt, a0)
