"""The support oracle: which mechanisms must work on a machine, which cannot, and why.

Why it can break: a vendor missing from (or wrong in) machine/vendors.py, a kernel form the
vDSO classifier does not know, a fact the doctor stops reading (the vsyscall mode, vdso32=0,
ia32_emulation=0), or a stub that no longer works although the machine says it must.  The
first tests replay recorded machines (tests/fixtures/machines/: an AMD EPYC and an Intel Xeon
capture, made with `tw doctor --record`) and kernel forms derived from them, so both vendors'
paths are checked on whichever CPU runs the tests.  The last ones hold this machine's probes
against the oracle."""
import shutil

import pytest

from conftest import ROOT, judged
from twtools.machine import doctor, oracle, registry, vdso32, vendors

MACHINES = ROOT / "tests" / "fixtures" / "machines"
INTEL_VDSO = "51 52 55 89 e5 0f 34 cd 80 5d 5a 59 c3"
AMD_VDSO = "51 52 55 89 cd 0f 05 cd 80 5d 5a 59 c3"
IA32 = {m.name for m in registry.mechanisms() if "ia32" in m.needs}
VDSO32 = {m.name for m in registry.mechanisms() if "vdso32" in m.needs}


def facts_of(root):
    return doctor.Doctor(root=root, live=False).entry_facts()


def expectations(root):
    return {k: v["expect"] for k, v in oracle.predict(facts_of(root)).items()}


def derived(tmp_path, base, cmdline=None, flags=(), vdso=None, maps=None):
    """A copy of a recorded machine with one kernel form changed."""
    root = tmp_path / f"{base}-derived"
    shutil.copytree(MACHINES / base, root)
    if cmdline is not None:
        (root / "proc" / "cmdline").write_text(cmdline + "\n")
    if flags:
        cpu = root / "proc" / "cpuinfo"
        cpu.write_text("\n".join(l + " " + " ".join(flags) if l.startswith("flags") else l
                                 for l in cpu.read_text().splitlines()) + "\n")
    if vdso == "absent":
        (root / "vdso32.so").unlink()
    elif vdso is not None:
        img = bytearray((root / "vdso32.so").read_bytes())
        off = int((root / "vdso32.so.txt").read_text().split("at_sysinfo_offset=")[1], 16)
        img[off:off + len(vdso)] = vdso
        (root / "vdso32.so").write_bytes(bytes(img))
    if maps is not None:
        (root / "proc" / "self" / "maps").write_text(maps)
    return root


# -- recorded machines ------------------------------------------------------------------------

def test_amd_capture():
    f = facts_of(MACHINES / "amd-epyc-zen4-kvm")
    assert f["cpu"]["vendor"] == "AuthenticAMD"
    assert f["vdso32"]["form"] == "syscall" and f["vdso32"]["bytes"] == AMD_VDSO
    assert f["vdso32"]["landing_pad"] == "0x5e9"
    e = expectations(MACHINES / "amd-epyc-zen4-kvm")
    assert e["32-sysenter"] == oracle.CANNOT and e["32-syscall"] == oracle.MUST
    assert {k for k, v in e.items() if v == oracle.CANNOT} == {"32-sysenter"}
    why = oracle.predict(f)["32-sysenter"]["why"]
    assert "AMD" in why and "#UD" in why and "sysenter" in why


def test_intel_capture():
    f = facts_of(MACHINES / "intel-xeon-kvm")
    assert f["cpu"]["vendor"] == "GenuineIntel"
    assert f["vdso32"]["form"] == "sysenter" and f["vdso32"]["bytes"] == INTEL_VDSO
    e = expectations(MACHINES / "intel-xeon-kvm")
    assert e["32-syscall"] == oracle.CANNOT and e["32-sysenter"] == oracle.MUST
    assert {k for k, v in e.items() if v == oracle.CANNOT} == {"32-syscall"}


@pytest.mark.parametrize("base", ["intel-xeon-kvm", "amd-epyc-zen4-kvm"])
def test_recorded_fingerprint_carries_kernel_state(base):
    """The kernel state comes from the recorded machine's files.  The fingerprint's tracer
    checks run this host's bpftrace and perf (0.7 s of probes a fingerprint), which say
    nothing of the recorded machine and nothing this test reads: they are left out (the
    doctor's `which` finds neither), every other tool is this host's."""
    def which(name):
        return None if name in ("bpftrace", "perf") else shutil.which(name)
    fp = doctor.Doctor(root=MACHINES / base, live=False, which=which).fingerprint(fs_path="/")
    ks = fp["kernel_state"]
    assert ks["vsyscall"] == "xonly" and ks["ia32_emulation"] is True and ks["fred"] is False
    assert ks["vdso32_form"] in ("sysenter", "syscall")
    assert ks["seccomp"]["mode"] == "0" and ks["microcode"]
    assert ks["mitigations"]["spectre_v2"].startswith("Mitigation")
    assert fp["consistency"] == []          # the vDSO's instruction agrees with the vendor


# -- kernel forms that cannot be booted here --------------------------------------------------

def test_fred_sends_32bit_syscall_to_ud_and_keeps_sysenter(tmp_path):
    # FRED kernels before 2026 leave the fast instruction out of the frame: nops.
    root = derived(tmp_path, "intel-xeon-kvm", flags=["fred"],
                   vdso=bytes.fromhex("51 52 55 90 90 90 90 cd 80 5d 5a 59 c3"))
    f = facts_of(root)
    assert f["fred"] is True and f["vdso32"]["form"] == "int80-frame"
    assert f["vdso32"]["instruction"] == "int80"
    e = oracle.predict(f)
    assert e["32-syscall"]["expect"] == oracle.CANNOT and "FRED" in e["32-syscall"]["why"]
    assert e["32-sysenter"]["expect"] == oracle.MUST and "fred_other" in e["32-sysenter"]["why"]
    assert e["32-vdso"]["expect"] == oracle.MUST and e["32-int80"]["expect"] == oracle.MUST


def test_2026_kernel_without_fast_path_enters_int80_directly(tmp_path):
    # arch/x86/entry/vdso/vdso32/system_call.S since 2026: ALTERNATIVE "int $0x80; ret", "",
    # X86_FEATURE_SYSFAST32 opens __kernel_vsyscall.
    root = derived(tmp_path, "amd-epyc-zen4-kvm", flags=["fred"],
                   vdso=bytes.fromhex("cd 80 c3 51 52 55 90 90 90 90 cd 80 5d 5a 59 c3"))
    f = facts_of(root)
    assert f["vdso32"]["form"] == "int80-direct" and f["vdso32"]["instruction"] == "int80"
    assert "2026" in f["vdso32"]["why"]


def test_2026_kernel_with_fast_path_keeps_the_frame():
    # With SYSFAST32 set the opening `int $0x80; ret` is patched to a 3-byte nop.
    code = bytes.fromhex("0f 1f 00 51 52 55 89 e5 0f 34 cd 80 5d 5a 59 c3")
    assert vdso32.vdso32_form(code) == "sysenter"
    assert vdso32.vdso32_form(bytes.fromhex(AMD_VDSO)) == "syscall"
    assert vdso32.vdso32_form(bytes.fromhex("90 90 90")) == "unknown"


def test_ia32_emulation_off_rules_out_every_32bit_path(tmp_path):
    root = derived(tmp_path, "intel-xeon-kvm", cmdline="ia32_emulation=0", vdso="absent")
    e = expectations(root)
    assert {k for k, v in e.items() if v == oracle.CANNOT} == IA32
    why = oracle.predict(facts_of(root))["32-int80"]["why"]
    assert "ia32_emulation=0" in why


def test_vdso32_off_rules_out_the_fast_32bit_paths_only(tmp_path):
    root = derived(tmp_path, "amd-epyc-zen4-kvm", cmdline="vdso32=0", vdso="absent")
    e = expectations(root)
    assert {k for k, v in e.items() if v == oracle.CANNOT} == VDSO32
    assert e["32-int80"] == oracle.MUST and e["32-libc"] == oracle.MUST    # glibc falls back to int 0x80
    assert "vdso32=0" in oracle.predict(facts_of(root))["32-vdso"]["why"]


def test_vsyscall_modes(tmp_path):
    none = derived(tmp_path, "intel-xeon-kvm", cmdline="vsyscall=none",
                   maps="7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]\n")
    f = facts_of(none)
    assert f["vsyscall"]["mode"] == "none" and "vsyscall=none" in f["vsyscall"]["why"]
    assert oracle.facts(f)["vsyscall"]["value"] is False
    p = oracle.predict(f)
    vs = registry.find(64, "vsyscall-call")
    assert p[vs]["expect"] == oracle.CANNOT and "vsyscall=none" in p[vs]["why"]
    assert {k for k, v in p.items() if v["expect"] == oracle.CANNOT} == {vs, "32-syscall"}
    emulate = tmp_path / "emulate"
    shutil.copytree(none, emulate)
    (emulate / "proc" / "self" / "maps").write_text(
        "ffffffffff600000-ffffffffff601000 r-xp 00000000 00:00 0 [vsyscall]\n")
    assert facts_of(emulate)["vsyscall"]["mode"] == "emulate"
    assert facts_of(MACHINES / "intel-xeon-kvm")["vsyscall"]["mode"] == "xonly"


def test_unknown_vendor_is_unknown_not_a_guess(tmp_path):
    root = derived(tmp_path, "intel-xeon-kvm")
    cpu = root / "proc" / "cpuinfo"
    cpu.write_text(cpu.read_text().replace("GenuineIntel", "FutureChipsInc"))
    p = oracle.predict(facts_of(root))
    assert p["32-sysenter"]["expect"] == oracle.UNKNOWN
    assert "FutureChipsInc" in p["32-sysenter"]["why"]


# -- the oracle's judgement ------------------------------------------------------------------

def test_judge_tells_broken_from_unsupported():
    must = {"expect": oracle.MUST, "why": "nothing rules it out"}
    cannot = {"expect": oracle.CANNOT, "why": "AMD CPUs raise #UD"}
    assert oracle.judge(must, True, None)["status"] == "works"
    b = oracle.judge(must, False, "a getppid() through vdso returned an error; the hint")
    assert b["status"] == "broken" and "BROKEN" in b["reason"] and "the hint" not in b["reason"]
    u = oracle.judge(cannot, False, "died with Illegal instruction (ILL)")
    assert u["status"] == "unsupported" and u["reason"].startswith("AMD CPUs raise #UD")
    assert oracle.judge(cannot, True, None)["status"] == "unpredicted"


def test_one_vendor_table():
    assert vendors.fast32("GenuineIntel") == "sysenter" and vendors.fast32("AuthenticAMD") == "syscall"
    assert vendors.fast32("HygonGenuine") == "syscall" and vendors.fast32("CentaurHauls") == "sysenter"
    assert vendors.fast32("Shanghai") == "sysenter"         # /proc/cpuinfo strips the padding
    assert vendors.fast32("FutureChipsInc") is None
    for v in vendors.VENDORS.values():
        assert {v["fast32"], v["ud32"]} == {"sysenter", "syscall"}


# -- this machine ----------------------------------------------------------------------------

@pytest.mark.parametrize("program", ["timewrite", "syscost"])
def test_this_machine_agrees_with_the_oracle(build, program):
    """Every variant that must work here works; every one that fails is ruled out by a fact;
    none works against the oracle's expectation."""
    rows = judged(program)
    broken = [f"{k}: {r['reason']}" for k, r in rows.items() if r["status"] == "broken"]
    assert not broken, "broken here: " + " | ".join(broken)
    wrong = [f"{k}: {r['reason']}" for k, r in rows.items() if r["status"] == "unpredicted"]
    assert not wrong, "the oracle is wrong about this machine: " + " | ".join(wrong)
    blind = [f"{k}: {r['reason']}" for k, r in rows.items()
             if r["status"] == "unsupported" and r["expect"] != oracle.CANNOT]
    assert not blind, "failed without a fact that explains it: " + " | ".join(blind)


def test_vdso_off_rules_out_the_64bit_vdso(tmp_path):
    root = derived(tmp_path, "intel-xeon-kvm", cmdline="vdso=0",
                   maps="ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n")
    p = oracle.predict(facts_of(root))
    vd = registry.find(64, "vdso-call")
    assert p[vd]["expect"] == oracle.CANNOT and "vdso=0" in p[vd]["why"]
    # a recording that simply kept no [vdso] line proves nothing either way
    assert oracle.predict(facts_of(MACHINES / "amd-epyc-zen4-kvm"))[vd]["expect"] == oracle.UNKNOWN
    assert oracle.predict(facts_of(MACHINES / "intel-xeon-kvm"))[vd]["expect"] == oracle.MUST
