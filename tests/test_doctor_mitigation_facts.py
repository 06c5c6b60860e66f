"""tw doctor's facts that decide the mitigations: the CPU's bug list, /proc/version's compiler,
the kernel config's mitigation options, the raw CPUID leaves and the kernel log's mitigation
lines, each recorded or unknown with the reason, on this machine and on recorded ones.

Why it can break: /proc/version's form differs between gcc and clang kernels; the cpuid
device answers a leaf beyond the CPU's highest with another leaf's data (read unchecked, a
wrong VERW_CLEAR); /dev/kmsg gives one record per read and EPIPE for one overwritten meanwhile,
and a kernel log can hold bytes that are not UTF-8; a recording (tw doctor --record) that does
not copy a new file leaves the fact unknown on replay; a fact read without the root prefix
reads this machine inside a fake one.
"""
import json
import os

import pytest

from conftest import ROOT
from twtools.analyse import schema
from twtools.machine import doctor
from twtools.machine.doctor import Doctor

MACHINES = ROOT / "tests" / "fixtures" / "machines"


def fake(root, **kw):
    return Doctor(root=root, which=lambda n: None, euid=1000, **kw).fingerprint()


def test_the_zen3_tsa_guest_replays_its_facts():
    fp = fake(MACHINES / "amd-epyc-zen3-kvm-tsa")
    schema.check(schema.FINGERPRINT, fp, "fingerprint.json")
    assert fp["cpu"]["bugs"] == ["sysret_ss_attrs", "spectre_v1", "spectre_v2", "spec_store_bypass",
                                 "srso", "ibpb_no_ret", "spectre_v2_user", "tsa"]
    c = fp["cpuid"]
    assert c["source"] == "recorded"
    assert c["leaves"] == {"0x80000021.0": {"eax": "0x18000265", "ecx": "0x00000080"}}
    assert "VERW_CLEAR" in c["flags"]
    assert "TSA_SQ_NO" not in c["flags"] and "TSA_L1_NO" not in c["flags"]
    assert fp["kernel_log"]["lines"] == [
        "Transient Scheduler Attacks: Mitigation: Clear CPU buffers: user/kernel boundary",
        "active return thunk: srso_alias_return_thunk"]
    # not kept of that host: unknown, each with its reason
    assert fp["kernel"]["proc_version"] is None and fp["why"]["kernel.proc_version"]
    assert fp["kernel"]["compiler"] is None and fp["why"]["kernel.compiler"]
    assert fp["kernel_config"]["options"] is None and fp["kernel_config"]["why"]
    assert fp["why"]["kernel_config"] == fp["kernel_config"]["why"]


def test_a_recorded_machine_without_the_new_files_says_why():
    fp = fake(MACHINES / "intel-xeon-kvm")
    for key in ("cpuid", "kernel_log"):
        assert fp[key]["why"].startswith("not recorded"), key
        assert fp["why"][key] == fp[key]["why"]
    # its recorded kernel config has the options that decide mitigations
    opts = fp["kernel_config"]["options"]
    assert fp["kernel_config"]["source"].startswith("/boot/config-")
    assert any(k.startswith("CONFIG_MITIGATION_") for k in opts), opts
    assert all(doctor.MITIGATION_CONFIG.match(k) for k in opts)


def test_the_compiler_is_read_from_proc_version():
    gcc = ("Linux version 6.18.44-fc-v1300 (builder@sandboxing) (gcc (GCC) 15.3.0, GNU ld "
           "(GNU Binutils) 2.46) #1 SMP PREEMPT_DYNAMIC @0")
    clang = ("Linux version 6.1.0-40-amd64 (debian-kernel@lists.debian.org) (Debian clang version "
             "16.0.6 (15~deb12u1), Debian LLD 16.0.6) #1 SMP PREEMPT_DYNAMIC Debian 6.1.153-1")
    deb = ("Linux version 6.1.0-40-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian "
           "12.2.0-14+deb12u1) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP")
    assert doctor.compiler(gcc) == "gcc (GCC) 15.3.0"
    assert doctor.compiler(clang) == "Debian clang version 16.0.6 (15~deb12u1)"
    assert doctor.compiler(deb) == "gcc-12 (Debian 12.2.0-14+deb12u1) 12.2.0"
    assert doctor.compiler("Linux version 6.1 (someone@somewhere) #1 SMP") is None


def test_proc_version_and_a_kernel_log_with_bad_bytes_on_a_fake_root(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "version").write_text(
        "Linux version 6.6.0 (u@h) (gcc (GCC) 13.2.0, GNU ld 2.41) #1 SMP\n")
    (tmp_path / "proc" / "cpuinfo").write_text("vendor_id\t: GenuineIntel\nflags\t\t: fpu\n")
    (tmp_path / "kernel-log.txt").write_bytes(
        b"[    0.244147] Spectre V2 : Mitigation: Retpolines\n"
        b"[    0.3] random: crng init done\n"
        b"MDS: Mitigation: Clear CPU buffers \xff\xfe\n"
        b"Kernel command line: mitigations=auto\n")
    fp = fake(tmp_path)
    assert fp["kernel"]["compiler"] == "gcc (GCC) 13.2.0"
    assert fp["kernel_log"]["lines"] == ["Spectre V2 : Mitigation: Retpolines",
                                         "MDS: Mitigation: Clear CPU buffers \ufffd\ufffd"]
    # a cpuinfo without a bugs line: unknown, with the reason
    assert fp["cpu"]["bugs"] is None and "bugs line" in fp["why"]["cpu.bugs"]


def test_the_cpuid_device_is_read_leaf_by_leaf_and_no_further_than_the_cpu_goes(tmp_path):
    """A sparse file laid out as /dev/cpu/N/cpuid answers: offset = subleaf << 32 | leaf."""
    import struct
    dev = tmp_path / "cpuid"
    regs = {(0, 0): (0x20, 0, 0, 0), (0x80000000, 0): (0x80000008, 0, 0, 0),
            (7, 0): (1, 0, 0, 0x20814010), (7, 2): (0, 0, 0, 0x1f),
            (0x80000008, 0): (0x3030, 0x1d000, 0, 0),
            (0x80000021, 0): (0x18000265, 0, 0x80, 0)}
    with open(dev, "wb") as f:
        for (leaf, sub), r in regs.items():
            f.seek((sub << 32) | leaf)
            f.write(struct.pack("<4I", *r))
    got = doctor.read_cpuid_device(dev)
    assert got["0x7.0"]["edx"] == "0x20814010"
    assert got["0x7.2"] is None  # leaf 7 reports subleaf 1 as its highest
    assert got["0x80000008.0"]["ebx"] == "0x0001d000"
    assert got["0x80000021.0"] is None  # beyond the highest extended leaf, 0x80000008
    assert doctor.cpuid_flags(got) == ["ARCH_CAPABILITIES", "AMD_IBPB", "AMD_IBRS", "AMD_STIBP"]
    assert doctor.parse_cpuid(doctor.format_cpuid(got)) == got


def test_the_kernel_log_lines_are_the_mitigation_lines_each_once():
    msgs = ["[    0.24] Spectre V2 : Mitigation: Retpolines", "Spectre V2 : Mitigation: Retpolines",
            "active return thunk: its_return_thunk", "ACPI: DSDT 0x0000", "RETBleed: Vulnerable",
            "Kernel command line: mitigations=auto,nosmt", "x86/fpu: Supporting XSAVE"]
    assert doctor.klog_lines(msgs) == ["Spectre V2 : Mitigation: Retpolines",
                                       "active return thunk: its_return_thunk",
                                       "RETBleed: Vulnerable"]
    assert len(doctor.klog_lines([f"MDS: Mitigation: {i}" for i in range(1000)])) == \
        doctor.MAX_KLOG_LINES


def test_without_root_the_cpuid_device_is_unknown_with_the_reason(tmp_path):
    d = Doctor(root=tmp_path, which=lambda n: None, euid=1000, live=True)
    c = d.cpuid()
    assert c["leaves"] is None and "/dev/cpu/0/cpuid" in c["why"]
    assert "only root may load it" in c["why"] and c["how"] is None


@pytest.mark.root
def test_a_recording_keeps_this_machine_s_facts(tmp_path):
    """tw doctor --record copies the new facts, and the recording replays them as read live."""
    if os.geteuid() != 0:
        pytest.skip("reading /dev/cpu/0/cpuid and /dev/kmsg needs root")
    live = Doctor().fingerprint()
    dest, _ = doctor.record(tmp_path / "rec")
    again = fake(dest)
    assert again["cpu"]["bugs"] == live["cpu"]["bugs"]
    assert again["kernel"]["compiler"] == live["kernel"]["compiler"]
    if live["cpuid"]["leaves"]:
        assert again["cpuid"]["leaves"] == live["cpuid"]["leaves"]
    if live["kernel_log"]["lines"] is not None:
        assert again["kernel_log"]["lines"] == live["kernel_log"]["lines"]
    if live["kernel_config"]["options"] is not None:
        assert again["kernel_config"]["options"] == live["kernel_config"]["options"]
    schema.check(schema.FINGERPRINT, json.loads(json.dumps(again)), "fingerprint.json")
