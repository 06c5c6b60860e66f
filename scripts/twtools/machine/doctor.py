"""`tw doctor`: what this machine is, how it enters the kernel, and which instruments work.

Writes the fingerprint.json document (docs/results-schema.md). Every /proc and /sys file is
read through one root prefix and every command through one runner, so tests can build a fake
machine (an AMD CPU, FRED, no BTF, lockdown, a non-root user, missing tools) in a temporary
directory. A figure that could not be seen is null, with the reason in `why` under the same
key; never 0, never a guess.
"""
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path

from ..core import files, paths, proc
from . import vendors
from .tracers.base import first_line

# What each instrument feeds; listed as skipped when the instrument does not work.
# What each machine instrument feeds; listed as skipped when it does not work.  The tracers'
# own instruments and skips live in their plug-ins (twtools.machine.tracers).
SKIPS = {
    "perf-pmu": ["cycles and instructions per call (perf_event events read null)"],
    "ia32": ["every 32-bit variant (<program>-32-*)", "64-int80 (int 0x80 needs IA32 emulation)",
             "the live 32-bit vDSO (tw vdso)"],
    "tsc": ["cycle-exact timing: per-call figures use clock_gettime(CLOCK_MONOTONIC)"],
}
TOOLS = {
    "gcc": ["gcc", "-dumpfullversion"],
    "nasm": ["nasm", "-v"],
    "objdump": ["objdump", "--version"],
    "perf": ["perf", "--version"],
    "strace": ["strace", "-V"],
    "bpftrace": ["bpftrace", "--version"],
    "systemd-detect-virt": ["systemd-detect-virt", "--version"],
}
# Where a recorded machine (tw doctor --record) keeps its 32-bit vDSO image.
RECORDED_VDSO32 = "/vdso32.so"
# Boot parameters that switch a CPU vulnerability mitigation (Documentation/admin-guide/
# kernel-parameters.txt); the fingerprint records those present, since each changes entry cost.
MITIGATION_PARAMS = frozenset((
    "mitigations", "nospectre_v1", "nospectre_v2", "spectre_v2", "spectre_v2_user", "spectre_bhi",
    "spec_store_bypass_disable", "nospec_store_bypass_disable", "ssbd", "pti", "nopti", "kpti",
    "retbleed", "spec_rstack_overflow", "mds", "tsx", "tsx_async_abort", "mmio_stale_data",
    "reg_file_data_sampling", "gather_data_sampling", "l1tf", "l1d_flush", "srbds",
    "indirect_target_selection", "tsa", "vmscape", "nosmt", "ibt", "nospectre_bhb",
    "spectre_v1", "mitigations_off", "nopku", "nosmap", "nosmep", "init_on_alloc", "init_on_free",
    "cfi", "retpoline",
))
# Bounds on what doctor reads (core.files.read_regular): the largest /proc or /sys file it
# reads is /proc/cpuinfo, about 1.5 KiB per CPU (under 2 MiB for 1024 CPUs) or
# /proc/self/maps; a kernel config is about 300 KiB, decompressed; a 32-bit vDSO is two
# or three pages.  Anything far larger is not one of them.
MAX_FILE = 16 << 20
MAX_CONFIG = 16 << 20
MAX_VDSO = 1 << 20
VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)*)")
# The kernel config options that decide which mitigations the kernel can select and what an
# entry costs besides them (docs/doctor.md): the mitigations under their 6.9+ names
# (CONFIG_MITIGATION_*) and their older ones, the preemption model, context tracking, audit,
# the randomised kernel stack offset and seccomp's cache debugging.
MITIGATION_CONFIG = re.compile(
    r"^CONFIG_(MITIGATION_\w+|SPECULATION_MITIGATIONS|PAGE_TABLE_ISOLATION|RETPOLINE|RETHUNK|"
    r"CPU_UNRET_ENTRY|CPU_IBPB_ENTRY|CPU_IBRS_ENTRY|CPU_SRSO|SLS|CALL_DEPTH_TRACKING|"
    r"CALL_THUNKS|GDS_FORCE_MITIGATION|X86_KERNEL_IBT|PREEMPT(_NONE|_VOLUNTARY|_RT|_DYNAMIC|"
    r"_LAZY|_LAZIEST|_BUILD|_COUNT)?|CONTEXT_TRACKING(_USER|_USER_FORCE|_FORCE)?|NO_HZ_FULL|"
    r"VIRT_CPU_ACCOUNTING_GEN|AUDIT|AUDITSYSCALL|RANDOMIZE_KSTACK_OFFSET(_DEFAULT)?|"
    r"SECCOMP_CACHE_DEBUG)$")
# The CPUID leaves (leaf, subleaf) whose bits gate the mitigations: 7.0 EDX (MD_CLEAR,
# SPEC_CTRL, STIBP, FLUSH_L1D, ARCH_CAPABILITIES, SSBD), 7.2 EDX (PSFD, IPRED/RRSBA/BHI
# controls), 0x80000008 EBX (AMD IBPB/IBRS/STIBP/SSBD, BTC_NO), 0x80000021 EAX/ECX (AMD
# VERW_CLEAR, AUTOIBRS, SBPB, IBPB_BRTYPE, SRSO_NO, TSA_SQ_NO/TSA_L1_NO).
CPUID_LEAVES = ((0x7, 0), (0x7, 2), (0x80000008, 0), (0x80000021, 0))
CPUID_BITS = {
    ("0x7.0", "edx"): {10: "MD_CLEAR", 26: "SPEC_CTRL", 27: "INTEL_STIBP", 28: "FLUSH_L1D",
                       29: "ARCH_CAPABILITIES", 31: "SPEC_CTRL_SSBD"},
    ("0x7.2", "edx"): {0: "PSFD", 1: "IPRED_CTRL", 2: "RRSBA_CTRL", 3: "DDPD_U", 4: "BHI_CTRL",
                       5: "MCDT_NO"},
    ("0x80000008.0", "ebx"): {12: "AMD_IBPB", 14: "AMD_IBRS", 15: "AMD_STIBP",
                              17: "AMD_STIBP_ALWAYS_ON", 19: "AMD_IBRS_SAME_MODE", 24: "AMD_SSBD",
                              25: "VIRT_SSBD", 26: "AMD_SSB_NO", 28: "AMD_PSFD", 29: "BTC_NO",
                              30: "AMD_IBPB_RET"},
    ("0x80000021.0", "eax"): {0: "NO_NESTED_DATA_BP", 2: "LFENCE_RDTSC", 5: "VERW_CLEAR",
                              6: "NULL_SEL_CLR_BASE", 8: "AUTOIBRS", 24: "ERAPS", 27: "SBPB",
                              28: "IBPB_BRTYPE", 29: "SRSO_NO", 30: "SRSO_USER_KERNEL_NO"},
    ("0x80000021.0", "ecx"): {1: "TSA_SQ_NO", 2: "TSA_L1_NO"},
}
# Where a recorded machine keeps its CPUID leaves and the mitigation lines of its kernel log.
RECORDED_CPUID = "/cpuid.txt"
RECORDED_KLOG = "/kernel-log.txt"
# The kernel log's mitigation lines: bugs.c's pr_fmt prefixes, PTI's, the return thunk's, and
# any line that says Mitigation or vulnerable.
KLOG_LINE = re.compile(
    r"^(Spectre V[12] : |Spectre BHI: |Speculative Store Bypass: |L1TF: |MDS: |TAA: |"
    r"MMIO Stale Data: |Register File Data Sampling: |SRBDS: |GDS: |RETBleed: |ITS: |"
    r"Transient Scheduler Attacks: |Speculative Return Stack Overflow: |VMSCAPE: |"
    r"L1D Flush : |Speculation prctl: |active return thunk: |mitigations: |x86/bugs: |"
    r"Kernel/User page tables isolation: )|Mitigation:|[Vv]ulnerab")
MAX_KLOG = 4 << 20
MAX_KLOG_RECORDS = 200000
MAX_KLOG_LINES = 200


class Result:
    """What a runner returns: the fields of subprocess.CompletedProcess that doctor reads."""

    def __init__(self, returncode, stdout="", stderr=""):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def real_runner(cmd, timeout=60):
    try:
        p = proc.run(cmd, timeout=timeout)
        return Result(p.returncode, p.stdout, p.stderr)
    except FileNotFoundError as e:
        return Result(127, "", f"{cmd[0]}: not found ({e.strerror})")
    except PermissionError as e:
        return Result(126, "", f"{cmd[0]}: {e.strerror}")
    except OSError as e:
        return Result(126, "", f"{cmd[0]}: {e.strerror}")
    except subprocess.TimeoutExpired:
        return Result(124, "", f"{cmd[0]}: timed out after {timeout} s")


def compiler(proc_version):
    """The compiler that built the kernel, from /proc/version's second parenthesised group
    ("gcc (GCC) 15.3.0", "Debian clang version 16.0.6 (15)"), or None."""
    groups, depth, start = [], 0, None
    for i, ch in enumerate(proc_version):
        if ch == "(":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            if depth == 0:
                groups.append(proc_version[start:i])
    for g in groups:
        # the first comma at depth 0 ends the compiler ("gcc (GCC) 15.3.0, GNU ld ...")
        depth, cut = 0, len(g)
        for i, ch in enumerate(g):
            depth += ch == "("
            depth -= ch == ")"
            if ch == "," and depth == 0:
                cut = i
                break
        head = g[:cut].strip()
        if re.search(r"\b(gcc|clang|GCC|icx|icc)\b", head):
            return head
    return None


def read_cpuid_device(path):
    """{"0xLEAF.SUB": {eax, ebx, ecx, edx} | None} for CPUID_LEAVES, read from a
    /dev/cpu/N/cpuid device (the file offset is the leaf, its high 32 bits the subleaf).  A
    leaf beyond the CPU's highest basic or extended leaf, or a subleaf beyond leaf 7's
    highest, is None: CPUID would answer it with another leaf's data."""
    import struct
    fd = os.open(path, os.O_RDONLY)
    try:
        def one(leaf, sub=0):
            b = os.pread(fd, 16, (sub << 32) | leaf)
            if len(b) != 16:
                raise OSError(0, f"short read of CPUID leaf {leaf:#x}")
            return struct.unpack("<4I", b)
        max_basic, max_ext = one(0)[0], one(0x80000000)[0]
        max_sub7 = one(7)[0] if max_basic >= 7 else -1
        out = {}
        for leaf, sub in CPUID_LEAVES:
            key = f"{leaf:#x}.{sub}"
            have = (leaf <= max_ext if leaf >= 0x80000000 else leaf <= max_basic) and \
                (leaf != 7 or sub <= max_sub7)
            out[key] = (dict(zip(("eax", "ebx", "ecx", "edx"),
                                 (f"{r:#010x}" for r in one(leaf, sub)))) if have else None)
        return out
    finally:
        os.close(fd)


def format_cpuid(leaves):
    """A recording's cpuid.txt: one line per leaf, "leaf=0x7 subleaf=0 eax=0x... ...", or
    "leaf=... subleaf=... absent" where the CPU has no such leaf."""
    lines = ["# CPUID leaves that gate the mitigations (tw doctor --record)"]
    for key, regs in (leaves or {}).items():
        leaf, sub = key.split(".")
        lines.append(f"leaf={leaf} subleaf={sub} " + (
            " ".join(f"{r}={v}" for r, v in regs.items()) if regs else "absent"))
    return "\n".join(lines)


def parse_cpuid(text):
    """cpuid.txt's lines back into {"0xLEAF.SUB": {reg: hex} | None}.  A line may give only
    some registers (a machine recorded by hand from notes); the others are left out."""
    out = {}
    for line in text.splitlines():
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if line.lstrip().startswith("#") or "leaf" not in kv:
            continue
        try:
            key = f"{int(kv['leaf'], 16):#x}.{int(kv.get('subleaf', '0'), 0)}"
            regs = {r: f"{int(kv[r], 16):#010x}" for r in ("eax", "ebx", "ecx", "edx") if r in kv}
        except ValueError:
            continue
        out[key] = None if line.split()[-1] == "absent" else regs
    return out


def cpuid_flags(leaves):
    """The names (CPUID_BITS) of the bits set in the leaves read."""
    out = []
    for (key, reg), bits in CPUID_BITS.items():
        v = ((leaves or {}).get(key) or {}).get(reg)
        if v is None:
            continue
        n = int(v, 16)
        out.extend(name for bit, name in sorted(bits.items()) if n >> bit & 1)
    return out


def read_kmsg(path):
    """The messages of the kernel's ring buffer through /dev/kmsg, as text: bytes read
    record by record without blocking, at most MAX_KLOG_RECORDS records and MAX_KLOG bytes,
    decoded with errors replaced.  OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    msgs, total = [], 0
    try:
        for _ in range(MAX_KLOG_RECORDS):
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == 32:  # EPIPE: the record was overwritten while we read
                    continue
                raise
            if not rec:
                break
            total += len(rec)
            if total > MAX_KLOG:
                break
            head, _, msg = rec.partition(b";")
            msgs.append(msg.split(b"\n", 1)[0].decode(errors="replace"))
    finally:
        os.close(fd)
    return msgs


def klog_lines(msgs):
    """The mitigation lines (KLOG_LINE) of kernel log messages, a timestamp ("[    0.24] ")
    taken off, each once, at most MAX_KLOG_LINES."""
    out = []
    for m in msgs:
        m = re.sub(r"^\[\s*\d+\.\d+\]\s*", "", m.rstrip())
        if m and KLOG_LINE.search(m) and m not in out and not m.startswith("Kernel command line"):
            out.append(m[:300])
            if len(out) >= MAX_KLOG_LINES:
                break
    return out


class Doctor:
    """One look at one machine.

    root    prefix for every /proc, /sys, /etc path ("/" = this machine)
    runner  runner(cmd: list[str], timeout) -> Result(returncode, stdout, stderr)
    which   which(name) -> path or None
    euid    effective uid
    live    run probes that look at the real machine (a 32-bit process's vDSO, libc
            disassembly); off by default when root is not "/"
    vdso32, libc   callables replacing those probes (tests)"""

    def __init__(self, root="/", runner=None, which=None, euid=None, live=None,
                 vdso32=None, libc=None):
        self.root = Path(root)
        self.runner = runner or real_runner
        self.which = which or shutil.which
        self.euid = os.geteuid() if euid is None else euid
        self.live = (str(root) == "/") if live is None else live
        self._vdso32 = vdso32
        self._libc = libc
        self.why = {}
        self._config = None
        self._config_source = None

    # --- access ----------------------------------------------------------------
    def path(self, p):
        return self.root / str(p).lstrip("/")

    def read_bytes(self, p, limit=MAX_FILE):
        """The bytes of one file under the root, or None when it is absent or unreadable.
        Read through core.files.read_regular: a FIFO, a device or an oversized file in a
        recording given with --sysroot is refused (DataError naming it, exit 3), never
        waited on or read without end."""
        try:
            return files.read_regular(self.path(p), limit=limit, what="file tw doctor reads")
        except OSError:
            return None

    def read(self, p):
        b = self.read_bytes(p)
        return None if b is None else b.decode(errors="replace").strip()

    def exists(self, p):
        return self.path(p).exists()

    def run(self, cmd, timeout=60):
        if not self.which(cmd[0]):
            return None
        return self.runner([str(c) for c in cmd], timeout)

    def blind(self, key, why):
        self.why[key] = why
        return None

    # --- kernel and CPU ------------------------------------------------------------
    def kernel_config(self):
        """{CONFIG_X: 'y'|'m'|value} from /proc/config.gz or /boot/config-<release>, or None."""
        if self._config is not None:
            return self._config or None
        text = None
        gz = self.read_bytes("/proc/config.gz")
        if gz is not None:
            text = files.gunzip(self.path("/proc/config.gz"), gz, MAX_CONFIG).decode(
                errors="replace")
            self._config_source = "/proc/config.gz"
        if text is None:
            rel = self.read("/proc/sys/kernel/osrelease") or platform.release()
            text = self.read(f"/boot/config-{rel}")
            self._config_source = f"/boot/config-{rel}" if text is not None else None
        cfg = {}
        for line in (text or "").splitlines():
            m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
            if m:
                cfg[m.group(1)] = m.group(2).strip('"')
            m = re.match(r"^# (CONFIG_\w+) is not set", line)
            if m:
                cfg[m.group(1)] = "n"
        self._config = cfg
        return cfg or None

    def config(self, name):
        """'y', 'm', 'n' or None when there is no config to read."""
        cfg = self.kernel_config()
        if cfg is None:
            return None
        return cfg.get(name, "n")

    def cmdline(self):
        return self.read("/proc/cmdline") or ""

    def cmdline_opt(self, name):
        """The value of name= on the kernel command line (last one wins), or None."""
        val = None
        for tok in self.cmdline().split():
            if tok == "--":
                break
            if tok.startswith(name + "="):
                val = tok.split("=", 1)[1]
            elif tok == name:
                val = ""
        return val

    def cpu(self):
        text = self.read("/proc/cpuinfo")
        if text is None:
            self.blind("cpu", "/proc/cpuinfo is unreadable")
            return {"vendor": None, "model": None, "model_name": None, "family": None,
                    "stepping": None, "microcode": None, "count": None, "flags": [],
                    "bugs": None}
        first, count = {}, 0
        for line in text.splitlines():
            if ":" not in line:
                continue
            k, v = (s.strip() for s in line.split(":", 1))
            if k == "processor":
                count += 1
            first.setdefault(k, v)

        def num(k):
            v = first.get(k)
            try:
                return int(v, 0) if v is not None else None
            except ValueError:
                return None
        bugs = first.get("bugs")
        if bugs is None:
            self.blind("cpu.bugs", "no bugs line in /proc/cpuinfo (a kernel before 4.15, or not "
                                   "an x86 kernel)")
        return {"vendor": first.get("vendor_id"), "model": num("model"),
                "model_name": first.get("model name"), "family": num("cpu family"),
                "stepping": num("stepping"), "microcode": first.get("microcode"),
                "count": count or None, "flags": sorted(set(first.get("flags", "").split())),
                # the kernel's own list of this CPU's bugs (X86_BUG_*), in its order
                "bugs": bugs.split() if bugs is not None else None}

    def mitigations(self):
        d = self.path("/sys/devices/system/cpu/vulnerabilities")
        if not d.is_dir():
            self.blind("mitigations", "/sys/devices/system/cpu/vulnerabilities is absent "
                                      "(kernel older than 4.15 or sysfs not mounted)")
            return {}
        return {f.name: self.read(f"/sys/devices/system/cpu/vulnerabilities/{f.name}")
                for f in sorted(d.iterdir())}

    # --- the facts that decide mitigations ---------------------------------------------
    def proc_version(self):
        """(/proc/version, the compiler that built the kernel) or (None, None) with why."""
        t = self.read("/proc/version")
        if t is None:
            self.blind("kernel.proc_version", "/proc/version is unreadable"
                       + ("" if self.live else " (not recorded)"))
            self.blind("kernel.compiler", "no /proc/version to read it from")
            return None, None
        cc = compiler(t)
        if cc is None:
            self.blind("kernel.compiler", "/proc/version names no compiler this reader knows")
        return t, cc

    def config_facts(self):
        """{source, options, why}: the kernel config options that decide mitigations and
        what an entry costs (MITIGATION_CONFIG), as the config says them ('y', 'm', 'n' for
        "is not set", or a value)."""
        cfg = self.kernel_config()
        if cfg is None:
            rel = self.read("/proc/sys/kernel/osrelease") or "RELEASE"
            why = (f"neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /boot/config-{rel} is "
                   "readable")
            self.blind("kernel_config", why)
            return {"source": None, "options": None, "why": why}
        return {"source": self._config_source, "why": None,
                "options": {k: v for k, v in sorted(cfg.items()) if MITIGATION_CONFIG.match(k)}}

    def cpuid(self):
        """{source, how, leaves, flags, why}: the raw CPUID leaves that gate the mitigations
        (CPUID_LEAVES), each {eax, ebx, ecx, edx} as hex, or None where the CPU has no such
        leaf; flags names the bits of CPUID_BITS that are set.  Read from /dev/cpu/0/cpuid on
        this machine (root; `modprobe cpuid` first when the device is missing), from the
        recording's cpuid.txt on a recorded one."""
        out = {"source": None, "how": None, "leaves": None, "flags": None, "why": None}
        if not self.live:
            text = self.read(RECORDED_CPUID)
            if text is None:
                out["why"] = f"not recorded: no {RECORDED_CPUID.lstrip('/')} under {self.root}"
                self.blind("cpuid", out["why"])
                return out
            out["source"] = "recorded"
            out["leaves"] = parse_cpuid(text)
        else:
            dev = self.path("/dev/cpu/0/cpuid")
            if not dev.exists() and self.euid == 0 and self.which("modprobe"):
                r = self.run(["modprobe", "cpuid"], timeout=20)
                out["how"] = ("modprobe cpuid: /dev/cpu/0/cpuid was missing"
                              + ("" if r is not None and r.returncode == 0 else
                                 f" (it failed: {first_line((r.stderr if r else '') or '', 'no message')})"))
            try:
                out["leaves"] = read_cpuid_device(dev)
                out["source"] = "/dev/cpu/0/cpuid"
            except OSError as e:
                why = f"/dev/cpu/0/cpuid: {e.strerror or e}"
                if not dev.exists():
                    why += (" (the cpuid module is not loaded" +
                            ("; modprobe cpuid did not make it" if out["how"] else
                             "; only root may load it" if self.euid != 0 else "") + ")")
                elif self.euid != 0:
                    why += " (readable by root only)"
                out["why"] = why
                self.blind("cpuid", why)
                return out
        out["flags"] = cpuid_flags(out["leaves"])
        return out

    def kernel_log(self):
        """{source, lines, why}: the mitigation lines of the kernel log (KLOG_LINE), without
        their timestamps: /dev/kmsg on this machine (root, or dmesg_restrict=0), else
        `journalctl -k -b`; a recording's kernel-log.txt.  Read as bytes, bounded, decoded
        with errors replaced."""
        if not self.live:
            b = self.read_bytes(RECORDED_KLOG, limit=MAX_KLOG)
            if b is None:
                why = f"not recorded: no {RECORDED_KLOG.lstrip('/')} under {self.root}"
                self.blind("kernel_log", why)
                return {"source": None, "lines": None, "why": why}
            return {"source": "recorded", "lines": klog_lines(b.decode(errors="replace").splitlines()),
                    "why": None}
        whys = []
        try:
            msgs = read_kmsg(self.path("/dev/kmsg"))
            lines = klog_lines(msgs)
            return {"source": "/dev/kmsg", "lines": lines,
                    "why": None if lines else "no mitigation line in the kernel log: the ring "
                                              "buffer may have been overwritten since boot"}
        except OSError as e:
            whys.append(f"/dev/kmsg: {e.strerror or e}")
        if self.which("journalctl"):
            try:
                p = proc.run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q"],
                             timeout=30, text=False, limit=MAX_KLOG)
                if p.returncode == 0:
                    return {"source": "journalctl -k -b", "why": None,
                            "lines": klog_lines(p.stdout.decode(errors="replace").splitlines())}
                whys.append("journalctl -k: " + first_line(
                    p.stderr.decode(errors="replace"), f"exit status {p.returncode}"))
            except (OSError, subprocess.TimeoutExpired, proc.OutputTooLarge) as e:
                whys.append(f"journalctl -k: {e}")
        else:
            whys.append("journalctl is not installed")
        why = "; ".join(whys)
        self.blind("kernel_log", why)
        return {"source": None, "lines": None, "why": why}

    def governor(self, flags):
        g = self.read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        if g is None:
            vm = " (usual in a virtual machine: the host owns the clock frequency)" \
                if "hypervisor" in flags else ""
            return self.blind("governor", "no cpufreq driver: /sys/devices/system/cpu/cpu0/cpufreq "
                                          f"is absent{vm}")
        return g

    def virtualization(self, flags):
        detail = {"hypervisor_flag": "hypervisor" in flags, "vm": None, "container": None,
                  "sys_vendor": self.read("/sys/class/dmi/id/sys_vendor"),
                  "product_name": self.read("/sys/class/dmi/id/product_name"),
                  "hypervisor_type": self.read("/sys/hypervisor/type"),
                  # PV or HVM on Xen: a PV guest's int 0x80 reads no APIC (analyse/causes.py).
                  "xen_guest_type": self.read("/sys/hypervisor/guest_type")}
        for kind in ("vm", "container"):
            r = self.run(["systemd-detect-virt", f"--{kind}"], timeout=20)
            if r is not None and r.stdout.strip():
                detail[kind] = r.stdout.strip()
        vm = detail["vm"]
        if vm is None:
            vendor = (detail["sys_vendor"] or "") + " " + (detail["product_name"] or "")
            for needle, name in (("QEMU", "qemu"), ("KVM", "kvm"), ("VMware", "vmware"),
                                 ("Microsoft", "microsoft"), ("Xen", "xen"), ("innotek", "oracle"),
                                 ("Amazon EC2", "amazon"), ("Google", "google")):
                if needle in vendor:
                    vm = name
                    break
            if vm is None and detail["hypervisor_type"]:
                vm = detail["hypervisor_type"]
            if vm is None:
                vm = "unknown-hypervisor" if detail["hypervisor_flag"] else "none"
        if vm == "none" and detail["hypervisor_flag"]:
            vm = "unknown-hypervisor"
        return vm, detail

    def lockdown(self):
        t = self.read("/sys/kernel/security/lockdown")
        if t is None:
            if self.config("CONFIG_SECURITY_LOCKDOWN_LSM") == "y":
                why = ("/sys/kernel/security/lockdown is unreadable: securityfs is not mounted "
                       "here (mount -t securityfs none /sys/kernel/security), so the lockdown "
                       "mode cannot be seen")
            elif self.config("CONFIG_SECURITY_LOCKDOWN_LSM") == "n":
                return "none"  # the LSM is not built in: nothing can lock the kernel down
            else:
                why = "no /sys/kernel/security/lockdown and no kernel config to tell whether the LSM exists"
            return self.blind("lockdown", why)
        m = re.search(r"\[(\w+)\]", t)
        return m.group(1) if m else t

    def int_sysctl(self, key, path, absent_why):
        t = self.read(path)
        if t is None:
            return self.blind(key, absent_why)
        try:
            return int(t.split()[0])
        except (ValueError, IndexError):
            return self.blind(key, f"unparsable {path}: {t!r}")

    # --- entry paths ------------------------------------------------------------------
    def fred(self, flags):
        cfg = self.config("CONFIG_X86_FRED")
        arg = self.cmdline_opt("fred")
        on = "fred" in flags
        detail = {"cpu_flag": on, "config": cfg, "cmdline": arg}
        if on:
            detail["why"] = "the kernel enabled FRED (the fred flag in /proc/cpuinfo is the kernel's view)"
        elif cfg in ("n", None) and cfg is not None:
            detail["why"] = "this kernel is built without CONFIG_X86_FRED"
        elif arg == "off":
            detail["why"] = "booted with fred=off"
        else:
            detail["why"] = ("no fred flag in /proc/cpuinfo: the CPU lacks FRED (only new Intel CPUs "
                             "have it) or the kernel left it off (early FRED kernels need fred=on)")
        return on, detail

    def ia32(self, vdso):
        cfg = self.config("CONFIG_IA32_EMULATION")
        default_off = self.config("CONFIG_IA32_EMULATION_DEFAULT_DISABLED")
        arg = self.cmdline_opt("ia32_emulation")
        detail = {"config": cfg, "default_disabled": default_off, "cmdline": arg, "ran_32bit": None}
        ran = None
        if vdso is not None and vdso.get("source"):
            if vdso.get("available") is True:
                ran = True
            elif vdso.get("available") is False and "cannot execute 32-bit" in (vdso.get("why") or ""):
                ran = False
        detail["ran_32bit"] = ran
        if ran is not None:
            if not ran:
                detail["why"] = vdso["why"]
            elif vdso.get("source") == "recorded":
                detail["why"] = "the recorded machine ran a 32-bit process (its vDSO was captured)"
            else:
                detail["why"] = "a 32-bit program from build/ ran (its vDSO was read)"
            return ran, detail
        # No live evidence: infer from the configuration.
        if cfg == "n":
            detail["why"] = "kernel built without CONFIG_IA32_EMULATION"
            return False, detail
        if arg is not None:
            on = arg.lower() in ("1", "y", "yes", "on", "true", "")
            detail["why"] = f"booted with ia32_emulation={arg} (not checked by running a 32-bit program)"
            return on, detail
        if cfg == "y":
            on = default_off != "y"
            detail["why"] = ("CONFIG_IA32_EMULATION=y" + (" but DEFAULT_DISABLED" if not on else "")
                             + " (not checked by running a 32-bit program)")
            return on, detail
        detail["why"] = "no kernel config, no ia32_emulation= and no 32-bit program could be run"
        self.why["ia32_emulation"] = detail["why"]
        return None, detail

    # --- tools and instruments -------------------------------------------------------
    def tools(self):
        out = {}
        for name, cmd in TOOLS.items():
            r = self.run(cmd, timeout=20)
            if r is None:
                out[name] = self.blind(f"tools.{name}", f"{name} is not installed")
                continue
            m = VERSION_RE.search(r.stdout + " " + r.stderr)
            out[name] = m.group(1) if m else self.blind(f"tools.{name}", f"`{' '.join(cmd)}` printed no version")
        out["python"] = platform.python_version()
        return out

    def true_path(self):
        """/bin/true, resolved on a live machine: the command every instrument check runs."""
        t = self.which("true") or "/bin/true"
        return os.path.realpath(t) if self.live else t

    def instruments(self, fp):
        """Every instrument: each tracer plug-in's own checks, then the machine's."""
        from . import tracers
        ins = []
        for tr in tracers.plugins():
            ins.extend(tr.check(self))

        def add(name, works, why):
            ins.append({"name": name, "works": works, "why": why,
                        "skipped": [] if works else SKIPS.get(name, [])})
        pmu = fp.get("pmu")
        add("perf-pmu", pmu, self.why.get("pmu"))
        ia = fp.get("ia32_emulation")
        add("ia32", ia, None if ia else (fp.get("ia32_detail") or {}).get("why"))
        inv = fp.get("invariant_tsc")
        add("tsc", inv and fp.get("clocksource") == "tsc",
            None if inv and fp.get("clocksource") == "tsc" else
            f"clocksource={fp.get('clocksource')}, invariant TSC={inv}: TSC readings are not a "
            "stable time base here")
        return ins

    def output_fs(self, fs_path):
        p = os.path.realpath(fs_path)
        out = {"path": p, "fstype": None, "statfs": None, "mount_point": None}
        r = self.run(["stat", "-f", "-c", "%T", p], timeout=20)
        if r is not None and r.returncode == 0:
            out["statfs"] = r.stdout.strip()
        mounts = self.read("/proc/self/mounts") or ""
        best = None
        for line in mounts.splitlines():
            f = line.split()
            if len(f) < 3:
                continue
            mp = f[1].replace("\\040", " ")
            if p == mp or p.startswith(mp.rstrip("/") + "/") or mp == "/":
                if best is None or len(mp) >= len(best[0]):
                    best = (mp, f[2])
        if best:
            out["mount_point"], out["fstype"] = best
        else:
            out["fstype"] = out["statfs"]
        if out["fstype"] is None:
            self.why["output_fs.fstype"] = "neither /proc/self/mounts nor stat -f could tell"
        return out

    # --- entry facts ------------------------------------------------------------------
    def vsyscall(self):
        """{mode: xonly|emulate|none|None, why}: how the legacy vsyscall page is mapped.

        The page is global, so this process's /proc/self/maps tells: `--xp` is xonly (the
        default since 5.3: an instruction fetch faults and the kernel emulates the call),
        `r-xp` is emulate (also readable), and no [vsyscall] line means none."""
        arg = self.cmdline_opt("vsyscall")
        maps = self.read("/proc/self/maps")
        boot = f"; booted with vsyscall={arg}" if arg is not None else ""
        if maps is not None:
            line = next((l for l in maps.splitlines() if l.rstrip().endswith("[vsyscall]")), None)
            if line:
                perms = line.split()[1]
                mode = "emulate" if perms.startswith("r") else "xonly"
                return {"mode": mode, "why": f"[vsyscall] is mapped {perms} ({mode}){boot}"}
            if arg == "none":
                why = "booted with vsyscall=none: no vsyscall page"
            elif self.config("CONFIG_X86_VSYSCALL_EMULATION") == "n":
                why = "kernel built without CONFIG_X86_VSYSCALL_EMULATION: no vsyscall page"
            elif self.config("CONFIG_LEGACY_VSYSCALL_NONE") == "y":
                why = "kernel built with CONFIG_LEGACY_VSYSCALL_NONE: no vsyscall page by default"
            else:
                why = "no [vsyscall] line in /proc/self/maps: no vsyscall page"
            return {"mode": "none", "why": why}
        if arg in ("none", "xonly", "emulate"):
            return {"mode": arg, "why": f"booted with vsyscall={arg} (/proc/self/maps unreadable)"}
        for mode in ("none", "xonly", "emulate"):
            if self.config(f"CONFIG_LEGACY_VSYSCALL_{mode.upper()}") == "y":
                return {"mode": mode, "why": f"CONFIG_LEGACY_VSYSCALL_{mode.upper()}=y "
                                             "(/proc/self/maps unreadable)"}
        self.why["vsyscall"] = "neither /proc/self/maps, vsyscall= nor the kernel config tells"
        return {"mode": None, "why": self.why["vsyscall"]}

    def vdso64(self):
        """{available: bool|None, why}: whether 64-bit processes get a vDSO."""
        maps = self.read("/proc/self/maps")
        arg = self.cmdline_opt("vdso")
        if maps is not None:
            if any(l.rstrip().endswith("[vdso]") for l in maps.splitlines()):
                return {"available": True, "why": "this 64-bit process has a [vdso] mapping"}
            if self.live or arg is not None:
                return {"available": False, "why": "no [vdso] mapping in a 64-bit process"
                        + (f" (booted with vdso={arg})" if arg is not None else "")}
            # A recording keeps only some lines of /proc/self/maps: no [vdso] line there is
            # no evidence either way.
            return {"available": None, "why": "the recorded /proc/self/maps has no [vdso] line"}
        if arg is not None:
            return {"available": arg not in ("0", "off"), "why": f"booted with vdso={arg}"}
        return {"available": None, "why": "/proc/self/maps is unreadable"}

    def recorded_vdso32(self):
        """The 32-bit vDSO a recorded machine captured (tw doctor --record), read as a live one."""
        from . import vdso32
        meta = self.read(RECORDED_VDSO32 + ".txt") or ""
        m = re.search(r"at_sysinfo_offset=(0x[0-9a-f]+)", meta)
        image = self.read_bytes(RECORDED_VDSO32, limit=MAX_VDSO)
        if image is None:
            return {"available": None, "instruction": None, "disasm": [],
                    "why": f"{self.path(RECORDED_VDSO32)} is unreadable"}
        v = vdso32.classify_vdso32(image, 0, int(m.group(1), 16) if m else None)
        v["source"] = "recorded"
        return v

    def entry_facts(self):
        """What the support oracle (twtools.machine.oracle) reads: the CPU, FRED, the live
        32-bit vDSO, IA32 emulation, the vsyscall page and the 64-bit vDSO.  Cheap enough to
        take before every run; fingerprint() includes it."""
        cpu = self.cpu()
        out = {"cpu": cpu}
        out["fred"], out["fred_detail"] = self.fred(cpu["flags"])
        from . import entrypath
        if self._vdso32 is not None:
            v = self._vdso32()
        elif self.live:
            v = entrypath.vdso32()
        elif self.exists(RECORDED_VDSO32):
            v = self.recorded_vdso32()
        else:
            v = {"available": None, "instruction": None, "disasm": [],
                 "why": f"not probed: the system root is {self.root}, not this machine"}
        if v.get("available") is None and self.cmdline_opt("vdso32") == "0":
            v = dict(v, available=False, why="booted with vdso32=0: 32-bit processes get no vDSO "
                                             "and no AT_SYSINFO")
        out["vdso32"] = v
        out["ia32_emulation"], out["ia32_detail"] = self.ia32(v)
        out["vsyscall"] = self.vsyscall()
        out["vdso64"] = self.vdso64()
        return out

    # --- kernel state that changes what a system call costs ----------------------------
    def audit(self):
        """{rules: [..]|None, why}: audit rules make every audited call pay for its record."""
        cfg = self.config("CONFIG_AUDITSYSCALL")
        if cfg == "n":
            return {"rules": [], "why": "kernel built without CONFIG_AUDITSYSCALL: no syscall auditing"}
        if not self.which("auditctl"):
            return {"rules": None, "why": "auditctl is not installed (package auditd): the rules "
                                          "cannot be listed" + (f"; CONFIG_AUDITSYSCALL={cfg}" if cfg else "")}
        r = self.run(["auditctl", "-l"], timeout=20)
        if r is None or r.returncode != 0:
            return {"rules": None, "why": "auditctl -l failed"
                    + ("" if self.euid == 0 else " (not root)") + ": "
                    + first_line((r.stderr if r else "") or "", "no message")}
        lines = [l.strip() for l in r.stdout.splitlines() if l.strip()]
        if lines == ["No rules"]:
            lines = []
        return {"rules": lines, "why": None}

    def status_lines(self, keys):
        """{key: value} from /proc/self/status for the keys asked (None when absent)."""
        text = self.read("/proc/self/status") or ""
        got = {}
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k in keys:
                got[k] = v.strip()
        return {k: got.get(k) for k in keys}

    def kernel_state(self, fp):
        """The kernel settings that change a system call's cost and must travel with every
        result: audit rules, seccomp, microcode, the entry facts, mitigations and the
        mitigation-related boot parameters."""
        st = self.status_lines(("Seccomp", "Seccomp_filters", "NoNewPrivs",
                                "Speculation_Store_Bypass", "SpeculationIndirectBranch"))
        vd = fp.get("vdso32") or {}
        return {
            "audit": self.audit(),
            "seccomp": {"mode": st["Seccomp"], "filters": st["Seccomp_filters"],
                        "no_new_privs": st["NoNewPrivs"],
                        "why": None if st["Seccomp"] is not None else "no Seccomp line in /proc/self/status"},
            "speculation": {"store_bypass": st["Speculation_Store_Bypass"],
                            "indirect_branch": st["SpeculationIndirectBranch"]},
            "microcode": (fp.get("cpu") or {}).get("microcode"),
            "vsyscall": (fp.get("vsyscall") or {}).get("mode"),
            "ia32_emulation": fp.get("ia32_emulation"),
            "fred": fp.get("fred"),
            "vdso32_form": vd.get("form"),
            "vdso32_bytes": vd.get("bytes"),
            "mitigations": fp.get("mitigations") or {},
            "mitigation_params": self.mitigation_params(),
        }

    def mitigation_params(self):
        """{param: value} of the mitigation-related parameters on the kernel command line
        ("" for a bare flag such as nopti)."""
        out = {}
        for tok in self.cmdline().split():
            if tok == "--":
                break
            k, eq, v = tok.partition("=")
            if k in MITIGATION_PARAMS:
                out[k] = v if eq else ""
        return out

    # --- the whole document ------------------------------------------------------------
    def fingerprint(self, fs_path="."):
        self.why = {}
        ef = self.entry_facts()
        cpu = ef["cpu"]
        flags = cpu["flags"]
        fp = {"schema": "timewrite-fingerprint/2"}
        fp["host"] = self.read("/proc/sys/kernel/hostname") or socket.gethostname()
        fp["kernel"] = {"release": self.read("/proc/sys/kernel/osrelease"),
                        "version": self.read("/proc/sys/kernel/version"),
                        "cmdline": self.cmdline(), "config_available": self.kernel_config() is not None}
        osr = self.read("/etc/os-release") or ""
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', osr, re.M)
        fp["os"] = m.group(1) if m else self.blind("os", "no /etc/os-release")
        fp["cpu"] = cpu
        fp["virtualization"], fp["virtualization_detail"] = self.virtualization(flags)
        fp["mitigations"] = self.mitigations()
        fp["mitigations_cmdline"] = self.cmdline_opt("mitigations")
        # the facts that decide the mitigations (docs/doctor.md, "What decides the mitigations")
        fp["kernel"]["proc_version"], fp["kernel"]["compiler"] = self.proc_version()
        fp["kernel_config"] = self.config_facts()
        fp["cpuid"] = self.cpuid()
        fp["kernel_log"] = self.kernel_log()
        cs = self.read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        fp["clocksource"] = cs if cs else self.blind("clocksource", "no current_clocksource in sysfs")
        fp["invariant_tsc"] = ("constant_tsc" in flags and "nonstop_tsc" in flags) if flags else \
            self.blind("invariant_tsc", "no CPU flags to read")
        smt = self.read("/sys/devices/system/cpu/smt/control")
        fp["smt"] = smt if smt else self.blind("smt", "no /sys/devices/system/cpu/smt/control (kernel without HOTPLUG_SMT)")
        fp["governor"] = self.governor(flags)
        fp["fred"], fp["fred_detail"] = ef["fred"], ef["fred_detail"]
        fp["root"] = self.euid == 0
        fp["perf_event_paranoid"] = self.int_sysctl(
            "perf_event_paranoid", "/proc/sys/kernel/perf_event_paranoid",
            "no /proc/sys/kernel/perf_event_paranoid: kernel without perf events")
        fp["ptrace_scope"] = self.int_sysctl(
            "ptrace_scope", "/proc/sys/kernel/yama/ptrace_scope",
            "Yama is not in this kernel: ptrace is limited only by uid and capabilities")
        fp["lockdown"] = self.lockdown()
        fp["btf"] = self.exists("/sys/kernel/btf/vmlinux")
        if not fp["btf"]:
            self.why["btf"] = "no /sys/kernel/btf/vmlinux (kernel without CONFIG_DEBUG_INFO_BTF): " \
                              "bpftrace cannot use kernel struct types or kfunc"
        fp["pmu"] = self.pmu()
        fp["exit_price"] = self.exit_price()

        # Entry paths: the live vDSO of a 32-bit process, the vsyscall page, the 64-bit vDSO,
        # and how each libc enters.
        from . import entrypath
        for k in ("vdso32", "ia32_emulation", "ia32_detail", "vsyscall", "vdso64"):
            fp[k] = ef[k]
        if self._libc is not None:
            fp["libc"] = self._libc()
        elif self.live:
            fp["libc"] = entrypath.libc_entries()
        else:
            fp["libc"] = {b: {"path": None, "entry": "unknown", "evidence": [],
                              "why": "not probed: fake system root"} for b in ("32", "64")}
        fp["kernel_state"] = self.kernel_state(fp)
        fp["output_fs"] = self.output_fs(fs_path)
        fp["tools"] = self.tools()
        fp["instruments"] = self.instruments(fp)
        fp["consistency"] = self.consistency(fp)
        fp["why"] = dict(self.why)
        return fp

    def exit_price(self):
        """Raw batches of one cpuid (leaf 0) per call, from build/syscost-64-syscall: the price of
        one VM exit in a guest (cpuid always exits there), a few hundred cycles on bare metal.
        Only the batches are kept; the figure is computed where figures are (analyse.stats),
        and the per-call matrix measures the same cell in rounds with an interval."""
        prog = paths.BUILD / "syscost-64-syscall"
        if not self.live:
            return {"samples_ns": None, "why": "not measured: a recorded machine (--sysroot)"}
        if not prog.is_file():
            return {"samples_ns": None, "why": f"not measured: {prog.name} is not built (run make)"}
        r = self.run([str(prog), "--op", "cpuid", "--batches", "40", "--batch-ms", "0.5",
                      "--warmup-ms", "5", "--calibrate-ms", "20"], timeout=30)
        if r is None or r.returncode != 0:
            last = ((r.stderr if r is not None else "") or "it did not run").strip().splitlines()
            return {"samples_ns": None,
                    "why": "not measured: syscost --op cpuid failed: " + (last[-1] if last else "")[:200]}
        try:
            doc = json.loads(r.stdout)
            samples = [float(x) for x in doc["samples_ns"]]
        except (ValueError, KeyError, TypeError):
            return {"samples_ns": None, "why": "not measured: syscost printed no samples"}
        return {"samples_ns": samples, "why": None,
                "how": "syscost-64-syscall --op cpuid: 40 batches of 0.5 ms in one process"}

    def pmu(self):
        from .tracers import perf_stat
        ok, why, text = perf_stat.check_events(self, "instructions")
        if ok:
            return True
        if not self.which("perf"):
            if self.path("/sys/bus/event_source/devices").is_dir():
                has = any(self.exists(f"/sys/bus/event_source/devices/{d}") for d in ("cpu", "cpu_core", "cpu_atom"))
                self.why["pmu"] = ("perf is not installed; judged from /sys/bus/event_source/devices, "
                                   + ("which has a cpu PMU" if has else "which has no cpu PMU"))
                return has
            return self.blind("pmu", "perf is not installed and /sys/bus/event_source is absent")
        if "not supported" in (why or ""):
            vm = " (the hypervisor exposes no PMU to this guest)" if \
                not any(self.exists(f"/sys/bus/event_source/devices/{d}") for d in ("cpu", "cpu_core", "cpu_atom")) else ""
            self.why["pmu"] = f"hardware counters unavailable: {why}{vm}"
            return False
        return self.blind("pmu", why or "perf stat -e instructions failed")

    def consistency(self, fp):
        """Cross-checks between independent observations: each a sentence, empty when all agree."""
        notes = []
        vendor = fp["cpu"].get("vendor")
        ins = (fp.get("vdso32") or {}).get("instruction")
        expect = "int80" if fp.get("fred") else vendors.fast32(vendor)
        if ins and expect and ins != expect:
            notes.append(f"the vDSO uses {ins} but a {vendor} CPU{' with FRED' if fp.get('fred') else ''} "
                         f"would be expected to use {expect}")
        return notes


# The kernel config lines a recording keeps: those the oracle and the fingerprint read.
RECORD_CONFIG = re.compile(r"^(# )?CONFIG_(?!CRYPTO)\w*(IA32|FRED|VSYSCALL|KPROBES|BTF|MITIGATION|AUDIT|"
                           r"SECCOMP|COMPAT_VDSO|LOCKDOWN|X86_64|PREEMPT|HZ)\w*")


def record(dest):
    """Write this machine's facts as a system root under dest, for replay with --sysroot.

    Only the files the doctor and the oracle read are kept (the first CPU of /proc/cpuinfo,
    its bugs line with it, /proc/version, the [vsyscall] and [vdso] lines of /proc/self/maps,
    the relevant kernel config lines, ...), the CPUID leaves that gate the mitigations
    (cpuid.txt), the kernel log's mitigation lines (kernel-log.txt), plus the live 32-bit
    vDSO image.  tests/fixtures/machines/ holds such recordings,
    so the tests of one vendor's path run on the other vendor's machine.

    Every file is written through core.files confined to dest: a `proc` or `boot` inside
    dest that is a symbolic link (to /proc, to /boot) is refused, never written through,
    and nothing is written outside dest."""
    from . import entrypath
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    d = Doctor()
    facts = {}

    def put(rel, text):
        if text is not None:
            facts[rel] = text.rstrip("\n") + "\n"
    cpuinfo = d.read("/proc/cpuinfo") or ""
    put("/proc/cpuinfo", cpuinfo.split("\n\n", 1)[0])
    put("/proc/cmdline", d.read("/proc/cmdline"))
    put("/proc/version", d.read("/proc/version"))
    status = d.read("/proc/self/status") or ""
    put("/proc/self/status", "\n".join(l for l in status.splitlines()
                                       if l.split(":")[0] in ("NoNewPrivs", "Seccomp", "Seccomp_filters",
                                                              "Speculation_Store_Bypass",
                                                              "SpeculationIndirectBranch")))
    maps = d.read("/proc/self/maps") or ""
    put("/proc/self/maps", "\n".join(l for l in maps.splitlines()
                                     if l.rstrip().endswith(("[vsyscall]", "[vdso]"))))
    for f in ("osrelease", "version", "perf_event_paranoid"):
        put(f"/proc/sys/kernel/{f}", d.read(f"/proc/sys/kernel/{f}"))
    put("/sys/devices/system/clocksource/clocksource0/current_clocksource",
        d.read("/sys/devices/system/clocksource/clocksource0/current_clocksource"))
    for k, v in d.mitigations().items():
        put(f"/sys/devices/system/cpu/vulnerabilities/{k}", v)
    cfg = d.kernel_config() or {}
    lines = [(f"# {k} is not set" if v == "n" else f"{k}={v}") for k, v in sorted(cfg.items())]
    put(f"/boot/config-{d.read('/proc/sys/kernel/osrelease')}",
        "\n".join(l for l in lines if RECORD_CONFIG.match(l)
                  or MITIGATION_CONFIG.match(l.lstrip("# ").split("=")[0].split(" ")[0])))
    c = d.cpuid()
    if c.get("leaves"):
        put(RECORDED_CPUID, format_cpuid(c["leaves"]))
    k = d.kernel_log()
    if k.get("lines") is not None:
        put(RECORDED_KLOG, "\n".join(k["lines"]))
    with files.confined(dest) as root:
        # Every directory the recording writes into is checked before the first file is
        # written, so that a planted link is refused before anything lands, not half-way.
        files.refuse_links(root, sorted({rel.lstrip("/").split("/")[0] for rel in facts}
                                        | {RECORDED_VDSO32.lstrip("/"),
                                           RECORDED_VDSO32.lstrip("/") + ".txt",
                                           RECORDED_CPUID.lstrip("/"),
                                           RECORDED_KLOG.lstrip("/")}))
        for rel, text in facts.items():
            files.write_text(root / rel.lstrip("/"), text)
        v = entrypath.vdso32(save=root / RECORDED_VDSO32.lstrip("/"))
    return dest, v


def fingerprint(out_path=None, fs_path="."):
    """The orchestrator's API: the fingerprint of this machine, written to out_path if given."""
    fp = Doctor(root=os.environ.get("TW_SYSROOT", "/")).fingerprint(fs_path=fs_path)
    if out_path:
        files.write_json(out_path, fp)
    return fp
