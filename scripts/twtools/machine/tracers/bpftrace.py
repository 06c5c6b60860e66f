"""bpftrace: the project's own tools in traces/*.bt, on the raw_syscalls tracepoints.

raw_syscalls fire for every system call with the number of the caller's ABI (write is 4 for
i386, 1 for x86-64; tracepoint:syscalls:sys_enter_write never fires for compat calls), and
curtask->thread_info.status & 2 (TS_COMPAT) marks a compat call, so one session tells the
ABIs apart.  The trace stage runs traces/writelat.bt (per-call write latency histograms) and
traces/entrypath.bt (compat/native, and where each call will return to) over every variant
in one session each.  It needs root, tracefs and BTF; kfunc and kprobe probes are checked
and reported, since some kernels lack them.  A vsyscall-page call raises a page fault: the
raw_syscalls tracepoints do not fire for it.

Several programs run in one session through a small driver script that records each
program's pid with its label; every path in it is quoted for the shell that reads it.
bpftrace's -c takes one string that it splits at spaces, quotes and all, so it gets only
plain words: `/bin/sh driver-TAG.sh`, run in the scratch directory (base.command_word).
"""
import itertools
import re
from pathlib import Path

from ...core import paths
from .base import (Tracer, command_word, first_line, json_lines, kernel_entry_blind,
                   observer_why_not, quote_command)

PROBE_TRACEPOINT = "tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @n = count(); }"
PROBE_KFUNC = "kfunc:vmlinux:ksys_write { @n = count(); }"
PROBE_KPROBE = "kprobe:ksys_write { @n = count(); }"
OBSERVER_PROG = ("tracepoint:raw_syscalls:sys_enter /pid == cpid/ { @s[tid] = nsecs; } "
                 "tracepoint:raw_syscalls:sys_exit /@s[tid]/ { @ns = hist(nsecs - @s[tid]); "
                 "delete(@s[tid]); } END { clear(@s); }")


def parse_json(text):
    """bpftrace -f json NDJSON -> {map name: {key tuple: value}}.

    Keys are split on ',' into a tuple of strings (a one-key map gives a 1-tuple, a keyless
    map the empty tuple); histograms stay lists of {min, max, count} buckets."""
    maps = {}
    for o in json_lines(text):
        if o.get("type") not in ("map", "hist", "stats"):
            continue
        for name, val in o.get("data", {}).items():
            d = maps.setdefault(name, {})
            if isinstance(val, dict):
                for k, v in val.items():
                    d[tuple(k.split(","))] = v
            else:
                d[()] = val
    return maps


def hist_buckets(buckets, scale=1):
    """bpftrace JSON hist buckets -> [{lo_ns, hi_ns, count}] (hi None for overflow)."""
    out = []
    for b in buckets or []:
        lo, hi = b.get("min"), b.get("max")
        out.append({"lo_ns": (lo * scale if lo is not None else 0),
                    "hi_ns": ((hi + 1) * scale if hi is not None and hi >= 0 else None),
                    "count": int(b.get("count", 0))})
    return out


def session(script, runs, tmp, tag, timeout=300):
    """Run traces/<script> once over several programs: runs is [(label, argv, stdin path)].

    Returns (maps, {pid: (label, exit status)}, completed process, raw text)."""
    from ...core import proc
    tmp = Path(tmp)
    pids = tmp / f"pids-{tag}"
    pids.write_text("")
    lines = ["set -u"]
    for label, cmd, stdin in runs:
        lines.append(f"{quote_command(cmd)} < {quote_command([stdin])} > /dev/null 2>&1 & p=$!; "
                     f"wait $p; echo {quote_command([label])} $p $? >> {quote_command([pids])}")
    driver = tmp / f"driver-{tag}.sh"
    driver.write_text("\n".join(lines) + "\n")
    out = tmp / f"bpftrace-{tag}.ndjson"
    # The driver by its plain relative name, from the scratch directory: whatever the
    # scratch directory's path holds, bpftrace's space-splitting cannot cut it.
    p = proc.run(["bpftrace", "-f", "json", "-o", out, paths.TRACES / script,
                  "-c", f"/bin/sh {driver.name}"], timeout=timeout, cwd=tmp)
    text = out.read_text() if out.exists() else ""
    labels = {}
    for line in pids.read_text().split("\n"):
        f = line.split()
        if len(f) == 3:
            labels[f[1]] = (f[0], int(f[2]))
    return parse_json(text), labels, p, text


class Bpftrace(Tracer):
    name = "bpftrace"
    title = "bpftrace"
    order = 40
    skips = {"bpftrace": ["tracers.json bpftrace_abi", "latency.json", "attribution.json body_ns",
                          "observer.json bpftrace rows", "counts.bpftrace"],
             "bpftrace-kfunc": ["kfunc:/kretfunc: probes on kernel functions (use tracepoints)"],
             "bpftrace-kprobe": ["kprobe:/kretprobe: probes on kernel functions (use tracepoints)"]}

    def check(self, d):
        if not d.which("bpftrace"):
            return [self.instrument(n, False, "bpftrace is not installed")
                    for n in ("bpftrace", "bpftrace-kfunc", "bpftrace-kprobe")]
        notroot = "" if d.euid == 0 else "not root: bpftrace needs CAP_BPF and CAP_PERFMON; "

        def attempt(prog):
            r = d.run(["bpftrace", "-e", prog, "-c", d.true_path()], timeout=60)
            text = (r.stdout or "") + "\n" + (r.stderr or "")
            err = [l for l in text.split("\n") if "ERROR" in l and "RLIMIT_MEMLOCK" not in l]
            return r, text, err
        out = []
        r, text, err = attempt(PROBE_TRACEPOINT)
        m = re.search(r"@n:\s*(\d+)", text)
        if r.returncode == 0 and m and int(m.group(1)) > 0:
            out.append(self.instrument("bpftrace", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = (" (is tracefs mounted? mount -t tracefs nodev /sys/kernel/tracing)"
                    if "tracepoint not found" in e else "")
            out.append(self.instrument("bpftrace", False, notroot + "tracepoint raw_syscalls:"
                                       "sys_enter did not attach: " + e + hint))
        r, text, err = attempt(PROBE_KFUNC)
        if r.returncode == 0 and not err:
            out.append(self.instrument("bpftrace-kfunc", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = ""
            if not d.exists("/sys/kernel/btf/vmlinux"):
                hint = " (no BTF at /sys/kernel/btf/vmlinux)"
            elif "not available" in e:
                hint = " (this bpftrace cannot attach kfunc/fentry probes on this kernel)"
            out.append(self.instrument("bpftrace-kfunc", False, notroot + e + hint))
        r, text, err = attempt(PROBE_KPROBE)
        if r.returncode == 0 and not err:
            out.append(self.instrument("bpftrace-kprobe", True, None))
        else:
            e = err[0].strip() if err else first_line(text, f"exit status {r.returncode}")
            hint = " (kernel built without CONFIG_KPROBES)" if d.config("CONFIG_KPROBES") == "n" else ""
            out.append(self.instrument("bpftrace-kprobe", False, notroot + e + hint))
        return out

    def blind(self, mech, root):
        return kernel_entry_blind(mech, "the raw_syscalls tracepoints", root, "bpftrace needs root")

    def observer_wrapper(self, tmp, root):
        why = observer_why_not("bpftrace", root, "bpftrace needs root")
        if why:
            return None, why
        prog = Path(tmp) / "observer.bt"
        prog.write_text(OBSERVER_PROG + "\n")
        # bpftrace -c takes the whole command as one string: wrap_command() puts the measured
        # command into it (as a script in tmp when a word is not plain; the observer stage
        # runs every command with tmp as its working directory).
        return ["bpftrace", "-o", "/dev/null", str(prog), "-c"], None

    _scripts = itertools.count()

    def wrap_command(self, wrapper, cmd):
        """The full argv: bpftrace -c with a command string of plain words
        (base.command_word), its script beside the observer program."""
        word, _ = command_word(cmd, Path(wrapper[3]).parent, f"observed-{next(self._scripts)}.sh")
        return list(wrapper) + [word]

    def trace(self, variants, workload, tmp, root):
        from ...core import proc
        why = None if root else "bpftrace needs root"
        if why is None and not proc.which("bpftrace"):
            why = "bpftrace is not installed"
        if why or not variants:
            return {"records": {"bpftrace_abi": []}, "counts": {}, "own": {},
                    "files": {"latency": {"runs": [
                        {"variant": v, "mode": m, "buffsize": workload.chunk, "count": None,
                         "log2": [], "lin_ns": [], "lin_us": [], "why": why}
                        for v in variants for m in ("async", "sync")]}},
                    "why": why}
        lat, counts = self.latency(variants, workload, tmp)
        return {"records": {"bpftrace_abi": self.entry(variants, workload, tmp)},
                "counts": counts, "own": {}, "files": {"latency": {"runs": lat}}}

    def latency(self, variants, workload, tmp):
        """writelat.bt over every variant, async and sync, in one session: raw histograms."""
        runs = []
        for v in variants:
            for m in ("async", "sync"):
                runs.append((f"{v}/{m}", workload.command(v, Path(tmp) / f"out-bt-{v}-{m}", m == "sync"),
                             workload.input))
        maps, labels, p, _ = session("writelat.bt", runs, tmp, "writelat")
        out, counts = [], {}
        for pid, (label, rc) in labels.items():
            v, m = label.split("/")
            keys = [k for k in maps.get("@count", {}) if k[0] == pid and int(k[2]) >= 3]
            if not keys:
                out.append({"variant": v, "mode": m, "buffsize": workload.chunk, "count": None,
                            "log2": [], "lin_ns": [], "lin_us": [],
                            "why": f"bpftrace saw no write to a file from pid {pid} "
                                   f"(timewrite exit {rc}; bpftrace exit {p.returncode})"})
                continue
            k = max(keys, key=lambda k: maps["@count"][k])
            n = int(maps["@count"][k])
            out.append({"variant": v, "mode": m, "buffsize": workload.chunk, "count": n,
                        "abi": k[1], "fd": int(k[2]), "pid": int(pid),
                        "sum_ns": maps.get("@sum_ns", {}).get(k),
                        "min_ns": maps.get("@min_ns", {}).get(k),
                        "max_ns": maps.get("@max_ns", {}).get(k),
                        "log2": hist_buckets(maps.get("@ns", {}).get(k)),
                        "lin_ns": hist_buckets(maps.get("@lin_ns", {}).get(k)),
                        "lin_us": hist_buckets(maps.get("@lin_us", {}).get(k), scale=1000),
                        "why": None})
            if m == "async":
                counts[v] = n
        out.sort(key=lambda r: (r["variant"], r["mode"]))
        return out, counts

    def entry(self, variants, workload, tmp):
        """entrypath.bt over every variant in one session: ABI and origin counts."""
        runs = [(v, workload.command(v, Path(tmp) / f"out-ep-{v}"), workload.input) for v in variants]
        maps, labels, p, _ = session("entrypath.bt", runs, tmp, "entrypath")
        rows = []
        for pid, (v, rc) in labels.items():
            counts = {"compat": 0, "native": 0}
            origin = {"vdso": 0, "text": 0, "other": 0}
            classes = []
            for k, n in maps.get("@calls", {}).items():
                # k = (pid, comm, abi, origin, insn, caller, cs); calls the driver shell's
                # fork made before execve carry its comm, not timewrite's
                if k[0] != pid or not k[1].startswith("timewrite"):
                    continue
                counts[k[2]] = counts.get(k[2], 0) + n
                origin[k[3]] = origin.get(k[3], 0) + n
                classes.append({"abi": k[2], "origin": k[3], "insn": k[4], "caller": k[5],
                                "cs": int(k[6]), "calls": n})
            writes = [{"abi": k[2], "origin": k[3], "id": int(k[4]), "calls": n}
                      for k, n in maps.get("@write_like", {}).items()
                      if k[0] == pid and k[1].startswith("timewrite")]
            classes.sort(key=lambda c: -c["calls"])
            rows.append({"variant": v, "pid": int(pid), "counts": counts, "origin": origin,
                         "classes": classes, "writes": writes,
                         "regs_ok": maps.get("@regs_ok", {}).get(("1",))})
        rows.sort(key=lambda r: r["variant"])
        return rows

    def tables(self, stage):
        abi = stage.get("bpftrace_abi") or []
        if not abi:
            return []

        def n(d, k):
            return "unknown" if (d or {}).get(k) is None else d[k]
        return [("bpftrace (traces/entrypath.bt): every call of the workload by ABI and by where "
                 "the kernel returns to", ["variant", "compat", "native", "from vDSO", "from text", "other"],
                 [[r["variant"], n(r.get("counts"), "compat"), n(r.get("counts"), "native"),
                   n(r.get("origin"), "vdso"), n(r.get("origin"), "text"), n(r.get("origin"), "other")]
                  for r in abi])]


TRACER = Bpftrace()
