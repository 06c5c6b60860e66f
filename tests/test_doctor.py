"""tw doctor: the machine fingerprint and the list of instruments that work, with reasons.

What it checks: on this machine, that the fingerprint has every field of the schema, that no
null figure lacks a reason and no broken instrument lacks one; then, on FAKE machines built in
a temporary directory (an AMD CPU, FRED, no BTF, lockdown, a non-root user, no tools, no IA32
emulation), that doctor reports the right values and reasons. Fakes are used only for machines
that cannot exist here; the runner and which() are injected, never patched in.

Why it can break: /proc and /sys files change format between kernels; perf, strace and
bpftrace change their error messages; a new check that reads a path without the root prefix
would read the real machine inside a fake one."""
import gzip
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from twtools.machine import vendors
from twtools.machine.tracers import bpftrace
from twtools.machine.doctor import Doctor, Result
from twtools.present import doctor as present_doctor

SCHEMA_KEYS = ["host", "kernel", "os", "cpu", "virtualization", "mitigations", "clocksource",
               "invariant_tsc", "smt", "governor", "fred", "ia32_emulation", "root",
               "perf_event_paranoid", "ptrace_scope", "lockdown", "btf", "pmu", "vdso32", "libc",
               "output_fs", "tools", "instruments", "kernel_config", "cpuid", "kernel_log"]


# --- this machine ---------------------------------------------------------------

@pytest.fixture(scope="module")
def live():
    return Doctor().fingerprint()


def test_live_fingerprint_has_schema_fields(live):
    for k in SCHEMA_KEYS:
        assert k in live, k
    assert live["cpu"]["vendor"] and live["cpu"]["flags"]
    assert live["kernel"]["release"]
    json.dumps(live)  # serialisable


def test_live_nulls_and_failures_say_why(live):
    for key in ("governor", "clocksource", "smt", "lockdown", "perf_event_paranoid",
                "ptrace_scope", "pmu", "ia32_emulation"):
        if live[key] is None:
            assert live["why"].get(key), f"{key} is null without a reason"
    # the facts that decide the mitigations: each read, or null with its reason
    for key, value in (("kernel_config", live["kernel_config"]["options"]),
                       ("cpuid", live["cpuid"]["leaves"]), ("kernel_log", live["kernel_log"]["lines"]),
                       ("cpu.bugs", live["cpu"]["bugs"]),
                       ("kernel.compiler", live["kernel"]["compiler"])):
        if value is None:
            assert live["why"].get(key), f"{key} is null without a reason"
    for ins in live["instruments"]:
        assert ins["works"] in (True, False, None)
        assert ins["works"] != 0 or ins["works"] is False  # a bool, never a count
        if not ins["works"]:
            assert ins["why"], f"{ins['name']} does not work and says nothing"
            assert ins["skipped"], f"{ins['name']} does not work and skips nothing"


def test_live_vdso_matches_cpu(live):
    """The vDSO instruction read from a real 32-bit process agrees with the vendor."""
    v = live["vdso32"]
    if not live["ia32_emulation"]:
        assert v["instruction"] is None and v["why"]
        return
    want = "int80" if live["fred"] else vendors.fast32(live["cpu"]["vendor"])
    assert v["instruction"] == want, v
    assert live["consistency"] == []


def test_cli_json_and_out(tmp_path):
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "doctor", "--json", "--out", tmp_path],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert json.loads((tmp_path / "fingerprint.json").read_text())["host"] == doc["host"]


def test_cli_table():
    p = subprocess.run([sys.executable, ROOT / "scripts" / "tw", "doctor"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for word in ("Machine", "Entry paths", "Instruments", "vDSO32 instruction"):
        assert word in p.stdout


# --- fake machines --------------------------------------------------------------

INTEL = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143",
         "model name": "Fake Xeon", "stepping": "8"}
AMD = {"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "1",
       "model name": "Fake EPYC", "stepping": "1"}
BASE_FLAGS = "fpu sep syscall constant_tsc nonstop_tsc"


def make_root(tmp, cpu=INTEL, flags=BASE_FLAGS, config=None, cmdline="quiet", files=None,
              drop=()):
    """A fake system root: /proc, /sys and /etc files a doctor reads."""
    cpuinfo = "".join(
        f"processor\t: {n}\n" + "".join(f"{k}\t: {v}\n" for k, v in cpu.items()) + f"flags\t\t: {flags}\n\n"
        for n in range(2))
    tree = {
        "proc/cpuinfo": cpuinfo,
        "proc/cmdline": cmdline,
        "proc/sys/kernel/hostname": "fakehost",
        "proc/sys/kernel/osrelease": "6.12.0-fake",
        "proc/sys/kernel/version": "#1 SMP",
        "proc/sys/kernel/perf_event_paranoid": "2",
        "proc/sys/kernel/yama/ptrace_scope": "1",
        "proc/self/mounts": "/dev/sda1 / ext4 rw 0 0\n",
        "etc/os-release": 'PRETTY_NAME="Fake Linux 1"\n',
        "sys/devices/system/clocksource/clocksource0/current_clocksource": "tsc",
        "sys/devices/system/cpu/smt/control": "on",
        "sys/devices/system/cpu/vulnerabilities/meltdown": "Not affected",
        "sys/devices/system/cpu/vulnerabilities/spectre_v2": "Mitigation: Retpolines",
        "sys/kernel/btf/vmlinux": "BTF",
        "sys/kernel/security/lockdown": "[none] integrity confidentiality",
        "sys/bus/event_source/devices/cpu/type": "4",
    }
    tree.update(files or {})
    for k in drop:
        tree.pop(k, None)
    for rel, text in tree.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    cfg = {"CONFIG_IA32_EMULATION": "y", "CONFIG_KPROBES": "y", "CONFIG_X86_FRED": "n",
           "CONFIG_SECURITY_LOCKDOWN_LSM": "y"}
    cfg.update(config or {})
    text = "".join(f"# {k} is not set\n" if v == "n" else f"{k}={v}\n" for k, v in cfg.items())
    (tmp / "proc" / "config.gz").write_bytes(gzip.compress(text.encode()))
    return tmp


class FakeRunner:
    """Answers commands by their first words; records what ran."""

    def __init__(self, answers=None):
        self.answers = dict(DEFAULT_ANSWERS)
        self.answers.update(answers or {})
        self.ran = []

    def __call__(self, cmd, timeout=60):
        self.ran.append(cmd)
        for n in range(len(cmd), 0, -1):
            key = " ".join(cmd[:n])
            if key in self.answers:
                a = self.answers[key]
                return a(cmd) if callable(a) else a
        # perf stat: answer by event
        if cmd[:2] == ["perf", "stat"]:
            ev = cmd[cmd.index("-e") + 1]
            return Result(0, "", "".join(f"12,,{e},100,100.00,,\n" for e in ev.split(",")))
        return Result(0, "", "")


DEFAULT_ANSWERS = {
    "gcc -dumpfullversion": Result(0, "13.2.0\n"),
    "nasm -v": Result(0, "NASM version 2.16.01\n"),
    "objdump --version": Result(0, "GNU objdump (GNU Binutils) 2.41\n"),
    "perf --version": Result(0, "perf version 6.12\n"),
    "strace -V": Result(0, "strace -- version 6.8\n"),
    "bpftrace --version": Result(0, "bpftrace v0.21.0\n"),
    "systemd-detect-virt --version": Result(0, "systemd 255 (255.4)\n"),
    "systemd-detect-virt --vm": Result(1, "none\n"),
    "systemd-detect-virt --container": Result(1, "none\n"),
    "stat -f -c %T": Result(0, "ext2/ext3\n"),
    "perf trace -s": Result(0, "", " Summary of events:\n execve 1 calls\n"),
    "bpftrace -e " + bpftrace.PROBE_TRACEPOINT: Result(0, "Attaching 1 probe...\n\n@n: 31\n"),
    "bpftrace -e " + bpftrace.PROBE_KFUNC: Result(0, "Attaching 1 probe...\n\n"),
    "bpftrace -e " + bpftrace.PROBE_KPROBE: Result(0, "Attaching 1 probe...\n\n"),
}
ALL_TOOLS = {"gcc", "nasm", "objdump", "perf", "strace", "bpftrace", "systemd-detect-virt", "stat", "true"}


def vdso(kind):
    return lambda: {"available": True, "instruction": kind, "disasm": [f"fake {kind}"],
                    "why": "fake", "source": "fake-32"}


def no_ia32():
    return {"available": False, "instruction": None, "disasm": [], "source": "fake-32",
            "why": "the kernel cannot execute 32-bit programs (Exec format error): no IA32 emulation"}


def fake_libc():
    return {b: {"path": f"/fake/{b}", "entry": "vdso" if b == "32" else "syscall", "evidence": []}
            for b in ("32", "64")}


def make_doctor(root, runner=None, tools=ALL_TOOLS, euid=0, vdso32=vdso("sysenter")):
    return Doctor(root=root, runner=runner or FakeRunner(),
                  which=lambda n: f"/usr/bin/{n}" if n in tools else None,
                  euid=euid, live=False, vdso32=vdso32, libc=fake_libc)


def instrument(fp, name):
    return next(i for i in fp["instruments"] if i["name"] == name)


def test_fake_intel_everything_works(tmp_path):
    fp = make_doctor(make_root(tmp_path)).fingerprint(fs_path="/")
    assert fp["host"] == "fakehost" and fp["os"] == "Fake Linux 1"
    assert fp["cpu"]["vendor"] == "GenuineIntel" and fp["cpu"]["family"] == 6
    assert fp["cpu"]["count"] == 2
    assert fp["lockdown"] == "none" and fp["btf"] is True and fp["pmu"] is True
    assert fp["perf_event_paranoid"] == 2 and fp["ptrace_scope"] == 1
    assert fp["invariant_tsc"] is True and fp["fred"] is False
    assert fp["ia32_emulation"] is True  # from the vDSO probe having run a 32-bit program
    assert fp["virtualization"] == "none"
    assert fp["output_fs"]["fstype"] == "ext4"
    assert fp["tools"]["gcc"] == "13.2.0" and fp["tools"]["bpftrace"] == "0.21.0"
    assert all(i["works"] for i in fp["instruments"]), fp["instruments"]
    assert fp["consistency"] == []


def test_fake_amd_expects_syscall_in_vdso(tmp_path):
    root = make_root(tmp_path, cpu=AMD)
    fp = make_doctor(root, vdso32=vdso("syscall")).fingerprint()
    assert fp["cpu"]["vendor"] == "AuthenticAMD" and fp["consistency"] == []
    fp = make_doctor(root, vdso32=vdso("sysenter")).fingerprint()
    assert fp["consistency"] and "syscall" in fp["consistency"][0]


def test_fake_fred(tmp_path):
    root = make_root(tmp_path, flags=BASE_FLAGS + " fred", config={"CONFIG_X86_FRED": "y"})
    fp = make_doctor(root, vdso32=vdso("int80")).fingerprint()
    assert fp["fred"] is True and fp["fred_detail"]["config"] == "y"
    assert fp["consistency"] == []


def test_fake_fred_off_in_config(tmp_path):
    fp = make_doctor(make_root(tmp_path)).fingerprint()
    assert fp["fred"] is False and "CONFIG_X86_FRED" in fp["fred_detail"]["why"]


def test_fake_no_btf_no_kprobes(tmp_path):
    root = make_root(tmp_path, drop=["sys/kernel/btf/vmlinux"], config={"CONFIG_KPROBES": "n"})
    r = FakeRunner({
        "bpftrace -e " + bpftrace.PROBE_KFUNC: Result(1, "", "ERROR: kfunc/kretfunc not available for your kernel version."),
        "bpftrace -e " + bpftrace.PROBE_KPROBE: Result(1, "", "ERROR: Error attaching probe: 'kprobe:ksys_write'"),
    })
    fp = make_doctor(root, runner=r).fingerprint()
    assert fp["btf"] is False and "BTF" in fp["why"]["btf"]
    kf = instrument(fp, "bpftrace-kfunc")
    assert kf["works"] is False and "BTF" in kf["why"] and kf["skipped"]
    kp = instrument(fp, "bpftrace-kprobe")
    assert kp["works"] is False and "CONFIG_KPROBES" in kp["why"]


def test_fake_lockdown(tmp_path):
    root = make_root(tmp_path, files={"sys/kernel/security/lockdown": "none [integrity] confidentiality"})
    assert make_doctor(root).fingerprint()["lockdown"] == "integrity"


def test_fake_lockdown_unreadable(tmp_path):
    root = make_root(tmp_path, drop=["sys/kernel/security/lockdown"])
    fp = make_doctor(root).fingerprint()
    assert fp["lockdown"] is None and "securityfs" in fp["why"]["lockdown"]


def test_fake_non_root(tmp_path):
    root = make_root(tmp_path, files={"proc/sys/kernel/perf_event_paranoid": "3"})
    denied = Result(255, "", "Error:\nAccess to performance monitoring and observability operations "
                             "is limited.\nConsider adjusting /proc/sys/kernel/perf_event_paranoid")
    bpf_denied = Result(1, "", "ERROR: bpftrace currently only supports running as the root user.")
    r = FakeRunner({"perf stat": denied, "perf trace -s": denied,
                    "bpftrace -e " + bpftrace.PROBE_TRACEPOINT: bpf_denied,
                    "bpftrace -e " + bpftrace.PROBE_KFUNC: bpf_denied,
                    "bpftrace -e " + bpftrace.PROBE_KPROBE: bpf_denied})
    fp = make_doctor(root, runner=r, euid=1000).fingerprint()
    assert fp["root"] is False and fp["perf_event_paranoid"] == 3
    ps = instrument(fp, "perf-stat")
    assert ps["works"] is False and "perf_event_paranoid=3" in ps["why"] and "not root" in ps["why"]
    assert fp["pmu"] is None and "paranoid" in fp["why"]["pmu"]  # blind, not "no PMU"
    assert instrument(fp, "perf-pmu")["works"] is None
    for n in ("bpftrace", "bpftrace-kfunc", "bpftrace-kprobe"):
        b = instrument(fp, n)
        assert b["works"] is False and b["why"].startswith("not root"), b
    assert instrument(fp, "strace")["works"] is True


def test_fake_strace_blocked_by_yama(tmp_path):
    root = make_root(tmp_path, files={"proc/sys/kernel/yama/ptrace_scope": "3"})
    r = FakeRunner({"strace -f -c": Result(1, "", "strace: attach: ptrace(PTRACE_SEIZE, 7): Operation not permitted\n")})
    st = instrument(make_doctor(root, runner=r, euid=1000).fingerprint(), "strace")
    assert st["works"] is False and "ptrace_scope=3" in st["why"] and st["skipped"]


def test_fake_no_tools(tmp_path):
    root = make_root(tmp_path)
    r = FakeRunner()
    fp = make_doctor(root, runner=r, tools=set()).fingerprint()
    assert r.ran == []  # nothing missing was run
    for t in ("gcc", "nasm", "perf", "strace", "bpftrace"):
        assert fp["tools"][t] is None and "not installed" in fp["why"][f"tools.{t}"]
    assert fp["tools"]["python"]
    for n in ("perf-stat", "perf-tracepoints", "perf-trace", "strace", "bpftrace"):
        i = instrument(fp, n)
        assert i["works"] is False and "not installed" in i["why"], i
    # no perf: the PMU is judged from sysfs, and the reason says so
    assert fp["pmu"] is True and "perf is not installed" in fp["why"]["pmu"]
    assert fp["virtualization"] == "none"


def test_fake_no_pmu_in_guest(tmp_path):
    root = make_root(tmp_path, flags=BASE_FLAGS + " hypervisor", drop=["sys/bus/event_source/devices/cpu/type"])
    r = FakeRunner({"perf stat -x, -e instructions": Result(0, "", "<not supported>,,instructions,0,100.00,,\n"),
                    "systemd-detect-virt --vm": Result(0, "kvm\n")})
    fp = make_doctor(root, runner=r).fingerprint()
    assert fp["pmu"] is False and "not supported" in fp["why"]["pmu"]
    assert fp["virtualization"] == "kvm"
    assert fp["governor"] is None and "virtual machine" in fp["why"]["governor"]


def test_fake_no_ia32(tmp_path):
    root = make_root(tmp_path, config={"CONFIG_IA32_EMULATION": "n"})
    fp = make_doctor(root, vdso32=no_ia32).fingerprint()
    assert fp["ia32_emulation"] is False
    ia = instrument(fp, "ia32")
    assert ia["works"] is False and "32-bit" in ia["why"]
    assert any("32-bit variant" in s for s in ia["skipped"])


def test_fake_ia32_disabled_on_cmdline_without_live_probe(tmp_path):
    root = make_root(tmp_path, cmdline="quiet ia32_emulation=0")
    d = make_doctor(root, vdso32=lambda: {"available": None, "instruction": None, "why": "not probed"})
    fp = d.fingerprint()
    assert fp["ia32_emulation"] is False and "ia32_emulation=0" in fp["ia32_detail"]["why"]


def test_fake_governor_and_smt(tmp_path):
    root = make_root(tmp_path, files={"sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance"},
                     drop=["sys/devices/system/cpu/smt/control"])
    fp = make_doctor(root).fingerprint()
    assert fp["governor"] == "performance" and "governor" not in fp["why"]
    assert fp["smt"] is None and fp["why"]["smt"]


def test_fake_missing_proc_never_crashes(tmp_path):
    """An almost empty root: everything unknown with a reason, nothing raised."""
    (tmp_path / "proc").mkdir()
    d = Doctor(root=tmp_path, runner=FakeRunner(), which=lambda n: None, euid=1000, live=False)
    fp = d.fingerprint()
    assert fp["cpu"]["vendor"] is None and fp["why"]["cpu"]
    assert fp["ia32_emulation"] is None and fp["why"]["ia32_emulation"]
    assert fp["clocksource"] is None and fp["why"]["clocksource"]
    text = present_doctor.format_table(fp)
    assert "unknown" in text
