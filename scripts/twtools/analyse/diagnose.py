"""What a traced run says: system calls per entry path, latency per syscall, and what the entry
path cost on this machine.

From the raw result of twtools.measure.diagnose (a traced run), with the per-call matrix
(percall.json, analysed by twtools.analyse.percall) and the tracer's measured overhead:

  paths     every call is put on one entry path: its ABI (compat: the i386 table, native:
            x86-64), where the kernel returns to (the vDSO's landing pad, the program's own
            text, another mapping such as a shared library or the dynamic loader) and the
            instruction (int 0x80, syscall, sysenter; through the vDSO: what the kernel
            patched into __kernel_vsyscall, read from the traced process itself).  Each path
            maps to the registry's mechanism of the same bitness and entry kind
            (registry.find), e.g. compat int 0x80 from a 32-bit program -> 32-int80.
  sites     each instruction pointer (for the vDSO: the return address __kernel_vsyscall
            goes back to) resolved to file, function and offset with the program's and
            libraries' own symbols (twtools.machine.elf.Elf), against the process's
            memory map.
  cost      per path: calls x (the path's per-call cost - the fastest path's available to
            the same program here), op null, ret shape.  The fastest path keeps the
            program's bitness: the 32-bit vDSO (registry.fast32's first that works) for a
            32-bit program, 64-bit syscall for a 64-bit one.  The difference is the paired
            per-round difference of the two cells (stats.paired over percall.rounds_of /
            usable: drift that moves both cancels) when percall.json has raw rounds for
            both, else the difference of the two cells' estimates by quadrature.
  penalty   the post-return penalty (ret minus jmp shape, analysed percall's "penalties")
            of both paths, where the matrix measured the jmp shape; else unknown, saying
            so.  A program's wrappers return with ret, as the ret-shape cells do, so each
            path's penalty is already inside the difference above: it is shown beside it,
            not added to it a second time.
  run time  the traced wall time less what the tracer added: calls x the tracer's added ns
            per call, measured with syscost bare and under the same tracer.

Every figure carries its 95% CI or says why it is unknown.
"""
import math

from ..machine import elf, registry, sysnr
from . import causes, percall, stats

OP = "null"
SHAPE = "ret"
CS_BITS = {0x23: 32, 0x33: 64}
INSN_ENTRY = {"int80": "int80", "syscall": "syscall", "sysenter": "sysenter"}
ORIGIN_TEXT = {"text": "the program's text", "vdso": "the vDSO", "other": "a library"}
INSN_TEXT = {"int80": "int 0x80", "syscall": "syscall", "sysenter": "sysenter",
             "vdso32-call": "__kernel_vsyscall", "unknown": "an unknown instruction"}
TOP = 5          # syscalls with latency histograms, besides write


def names(abi):
    tab = sysnr.syscall_numbers("i386" if abi == "compat" else "x86_64")
    return {v: k for k, v in tab.items()}


def write_id(abi):
    return sysnr.syscall_nr("i386" if abi == "compat" else "x86_64", "write")


# ---------------------------------------------------------------- addresses

class Resolver:
    """Addresses of a traced process -> {where, path, symbol, offset}, from its memory map
    (read at execve and at exit) and the ELF files mapped there."""

    def __init__(self, raw):
        proc_ = raw.get("process") or {}
        self.exe = proc_.get("exe")
        self.maps = list(raw.get("maps_at_exit") or []) + list(proc_.get("maps") or [])
        vd = proc_.get("vdso") or {}
        self.vdso = vd
        self.vdso_lo, self.vdso_hi = vd.get("base"), vd.get("end")
        self._elves = {}

    def elf(self, path):
        if path not in self._elves:
            try:
                if path == "[vdso]":
                    img = self.vdso.get("image")
                    if isinstance(img, str):        # as a stage file keeps it: hex
                        img = bytes.fromhex(img)
                    self._elves[path] = elf.Elf(img, "[vdso]") if img else None
                else:
                    self._elves[path] = elf.load(path)
            except (elf.ElfError, OSError):
                self._elves[path] = None
        return self._elves[path]

    def mapping(self, addr):
        for m in self.maps:
            if m["lo"] <= addr < m["hi"] and m.get("path"):
                return m
        return None

    def where(self, addr):
        if self.vdso_lo is not None and self.vdso_lo <= addr < self.vdso_hi:
            return "vdso"
        m = self.mapping(addr)
        if m and self.exe and m["path"] == self.exe:
            return "text"
        return "other"

    def _file_vaddr(self, addr):
        """(path, ELF, vaddr inside the file) for addr, or (path, None, None)."""
        if self.vdso_lo is not None and self.vdso_lo <= addr < self.vdso_hi:
            e = self.elf("[vdso]")
            if e is None:
                return "[vdso]", None, None
            return "[vdso]", e, e.offset_to_vaddr(addr - self.vdso_lo)   # mapped from offset 0
        m = self.mapping(addr)
        if m is None:
            return None, None, None
        e = self.elf(m["path"])
        if e is None:
            return m["path"], None, None
        va = e.offset_to_vaddr(addr - m["lo"] + m["offset"])
        return m["path"], e, va

    def resolve(self, addr):
        if addr is None:
            return {"addr": None, "path": None, "symbol": None, "offset": None}
        path, e, va = self._file_vaddr(addr)
        fn = off = None
        if e is not None and va is not None:
            fn, off = e.function_at(va)
        return {"addr": addr, "path": path, "symbol": fn, "offset": off}

    def insn_before(self, addr):
        """The entry instruction whose end is addr, from the file's (or vDSO's) bytes."""
        path, e, va = self._file_vaddr(addr)
        if e is None or va is None or va < 2:
            return "unknown"
        b = e.bytes_at(va - 2, 2)
        return {b"\xcd\x80": "int80", b"\x0f\x05": "syscall", b"\x0f\x34": "sysenter"}.get(b, "unknown")


def label(r):
    if r is None or r.get("addr") is None:
        return "unknown"
    if r.get("child"):
        return f"{r['addr']:#x} in child process {r['child']} (not resolved)"
    if r.get("symbol"):
        return f"{r['symbol']}+{r['offset']:#x}"
    base = (r.get("path") or "?").rsplit("/", 1)[-1]
    return f"{base} {r['addr']:#x}"


# ---------------------------------------------------------------- paths

def classify_rows(raw):
    """Each site row with its path: bits, abi, origin, entry kind (the registry's), the site
    address (the ip, or for the vDSO the caller's return address) and its resolution."""
    res = Resolver(raw)
    prog_bits = (raw.get("process") or {}).get("bits")
    form = (res.vdso or {}).get("form")
    vdso_ins = (res.vdso or {}).get("instruction")
    out = []
    for r in (raw.get("rows") or {}).get("sites", []):
        if r.get("comm") == "bpftrace":
            continue        # bpftrace -c's child before its execve (never with tw diagnose's launcher)
        row = dict(r)
        bits = CS_BITS.get(r.get("cs")) or prog_bits
        origin = r.get("origin") or (res.where(r["ip"]) if r.get("ip") is not None else "other")
        insn = r.get("insn")
        if insn is None or origin != "vdso" and insn == "unknown" and r.get("ip"):
            insn = res.insn_before(r["ip"]) if r.get("ip") is not None else "unknown"
        if origin == "vdso" and r["abi"] == "compat":
            entry = "vdso32-call"
            caller = r.get("ret0") if form == "int80-direct" else r.get("ret12")
            site = caller or None
            how = f"__kernel_vsyscall ({vdso_ins or 'instruction unknown'} here)"
        else:
            entry = INSN_ENTRY.get(insn)
            site = r.get("ip")
            how = INSN_TEXT.get(insn, insn)
        # bpftrace's pid is the process (tgid): a child's addresses are in its own map, which
        # only the traced process's was read, so they are not resolved against it
        child = raw.get("tracer") == "bpftrace" and raw.get("pid") is not None \
            and r["pid"] != raw["pid"]
        resolved = res.resolve(site) if site and not child else \
            {"addr": site, "path": None, "symbol": None, "offset": None, "child": r["pid"] if child else None}
        row.update(bits=bits, origin=origin, insn=insn, entry=entry, site_addr=site,
                   site=resolved, how=how)
        row["name"] = names(r["abi"]).get(r["id"], f"#{r['id']}")
        out.append(row)
    return out, res


def path_key(row):
    return (row["bits"], row["abi"], row["origin"], row["entry"] or "unknown")


def path_label(key, how=None):
    bits, abi, origin, entry = key
    if entry == "vdso32-call":
        return f"{abi} through the vDSO, {how or '__kernel_vsyscall'}"
    return f"{abi} {INSN_TEXT.get(entry, entry)} from {ORIGIN_TEXT[origin]}"


def group_paths(rows):
    """[{key, label, bits, abi, origin, entry, calls, writes, sites: [...] }] by calls."""
    groups = {}
    for r in rows:
        k = path_key(r)
        g = groups.setdefault(k, {"key": list(k), "bits": k[0], "abi": k[1], "origin": k[2],
                                  "entry": k[3], "calls": 0, "writes": 0, "sites": {},
                                  "how": r["how"]})
        g["calls"] += r["calls"]
        if r["id"] == write_id(r["abi"]):
            g["writes"] += r["calls"]
        sk = r["site_addr"]
        where = label(r["site"]) if sk else (
            "caller of __kernel_vsyscall not seen" if r["entry"] == "vdso32-call" else "unknown")
        s = g["sites"].setdefault(sk, {"addr": hex(sk) if sk else None, "site": where,
                                       "path": r["site"].get("path"), "calls": 0, "syscalls": {}})
        s["calls"] += r["calls"]
        s["syscalls"][r["name"]] = s["syscalls"].get(r["name"], 0) + r["calls"]
    out = []
    for k, g in groups.items():
        g["label"] = path_label(k, g["how"])
        g["sites"] = sorted(g["sites"].values(), key=lambda s: -s["calls"])
        for s in g["sites"]:
            s["syscalls"] = dict(sorted(s["syscalls"].items(), key=lambda kv: -kv[1]))
        out.append(g)
    out.sort(key=lambda g: -g["calls"])
    return out


# ---------------------------------------------------------------- latency

def hist_percentiles(buckets, ps=(50, 90, 99)):
    """Percentiles from [{lo_ns, hi_ns, count}] by linear interpolation inside a bucket;
    None where one falls in the open overflow bucket."""
    total = sum(b["count"] for b in buckets)
    out = {}
    for p in ps:
        val, acc, target = None, 0, total * p / 100.0
        for b in buckets:
            if b["count"] and acc + b["count"] >= target:
                if b["hi_ns"] is not None:
                    val = b["lo_ns"] + (target - acc) / b["count"] * (b["hi_ns"] - b["lo_ns"])
                break
            acc += b["count"]
        out[f"p{p}"] = val if total else None
    return out


def _merge(bucket_lists):
    acc = {}
    for bl in bucket_lists:
        for b in bl:
            k = (b["lo_ns"], b["hi_ns"])
            acc[k] = acc.get(k, 0) + b["count"]
    return [{"lo_ns": lo, "hi_ns": hi, "count": n}
            for (lo, hi), n in sorted(acc.items(), key=lambda kv: kv[0][0])]


def latency(raw, top=TOP):
    """Per syscall (ABI, number) over every traced process: count, mean, percentiles and the
    log2 histogram; write first, then the `top` most frequent others."""
    rows = (raw.get("rows") or {}).get("latency", [])
    by = {}
    for r in rows:
        k = (r["abi"], r["id"])
        d = by.setdefault(k, {"abi": r["abi"], "id": r["id"], "name": names(r["abi"]).get(r["id"], f"#{r['id']}"),
                              "calls": 0, "sum_ns": 0, "log2": []})
        d["calls"] += r["exits"]
        d["sum_ns"] += r.get("sum_ns") or 0
        d["log2"].append(r["log2"])
    lin = {}
    for w in (raw.get("rows") or {}).get("write_linear", []):
        lin.setdefault(w["abi"], []).append(w["linear"])
    out = []
    for d in by.values():
        d["log2"] = _merge(d["log2"])
        d["mean_ns"] = d["sum_ns"] / d["calls"] if d["calls"] else None
        d["linear"] = _merge(lin[d["abi"]]) if d["id"] == write_id(d["abi"]) and d["abi"] in lin else []
        best = d["linear"] if d["linear"] and not any(b["hi_ns"] is None and b["count"] for b in d["linear"]) \
            else d["log2"]
        d["percentiles"] = hist_percentiles(best)
        d["is_write"] = d["id"] == write_id(d["abi"])
        out.append(d)
    writes = [d for d in out if d["is_write"]]
    others = sorted((d for d in out if not d["is_write"]), key=lambda d: -d["calls"])
    return writes + others[:top], len(out)


# ---------------------------------------------------------------- cost

def fastest(bits, analysed):
    """The fastest path available to a program of this bitness here, as a registry variant,
    with why: the 32-bit vDSO (registry.fast32, first that the matrix measured), or the
    64-bit syscall."""
    if bits == 32:
        for v in registry.fast32():
            c = percall.find(analysed, v, OP, shape=SHAPE)
            if c and c.get("supported") and c.get("median") is not None:
                return v, None
        return None, "no fast 32-bit path (vDSO, sysenter, syscall) was measured here"
    v = registry.find(64, "syscall")
    c = percall.find(analysed, v, OP, shape=SHAPE)
    if c and c.get("supported") and c.get("median") is not None:
        return v, None
    return None, f"{v} {OP} was not measured"


def _raw_cell(doc, variant):
    for c in (doc or {}).get("cells", []):
        if c.get("variant") == variant and c.get("op") == OP and (c.get("shape") or "ret") == SHAPE:
            return c
    return None


def per_call_difference(doc, analysed, a, b):
    """a - b in ns per call, op null, ret shape: (summary, method) or (None, why)."""
    ca, cb = percall.find(analysed, a, OP, shape=SHAPE), percall.find(analysed, b, OP, shape=SHAPE)
    for v, c in ((a, ca), (b, cb)):
        if c is None:
            return None, f"{v} {OP} is not in the per-call matrix"
        if not c.get("supported") or c.get("median") is None:
            return None, f"{v} {OP} was not measured: {c.get('reason') or 'no samples'}"
    ra, rb = _raw_cell(doc, a), _raw_cell(doc, b)
    rounds_a, legacy_a = percall.rounds_of(doc, ra)
    rounds_b, legacy_b = percall.rounds_of(doc, rb)
    if not (legacy_a or legacy_b):
        by_b = {r.get("round"): percall.usable(r)[0] for r in rounds_b}
        pa, pb = [], []
        for r in rounds_a:
            if r.get("round") in by_b:
                pa.append(percall.usable(r)[0])
                pb.append(by_b[r.get("round")])
        s = stats.paired(pa, pb, "diff")
        if s.get("median") is not None and math.isfinite(s["median"]) and s["n"] >= 2:
            return s, (f"paired per-round difference over {s['n']} rounds "
                       f"({OP}, {SHAPE} shape; stats.paired)")
    d = stats.diff_summary(ca, cb)
    if d is None:
        return None, "the two cells have no estimate to subtract"
    return d, f"difference of the two cells' estimates, CI by quadrature ({OP}, {SHAPE} shape)"


def penalties(analysed, variants):
    """The post-return penalty (ret minus jmp shape, op null) of each variant, or why not."""
    out = {}
    for v in variants:
        p = next((x for x in (analysed or {}).get("penalties", [])
                  if x["variant"] == v and x["op"] == OP), None)
        out[v] = p["penalty_ns"] if p and p.get("penalty_ns") else \
            {"value": None, "why": f"the per-call matrix has no jmp-shape {OP} cell for {v}"}
    return out


def _lite(c):
    """A matrix cell's estimate without its raw detail (the diagnosis shows what it used)."""
    if not c:
        return None
    return {k: c.get(k) for k in ("median", "ci_low", "ci_high", "n_rounds", "unstable", "supported",
                                  "reason")}


def in_exits(per_call, price):
    """A per-call excess in VM exits: per_call / the exit price (analyse.causes.exit_price),
    with the ratio's interval; None when either is unknown.  On a VM a program that enters by
    int 0x80 pays an APIC read per call since Linux 6.7, one exit where the host does not
    virtualise it: this is how many exits its excess is worth at this machine's price."""
    if not per_call or not price or price.get("value") is None:
        return None
    return stats.ratio_summary(per_call, {"median": price["value"], "ci_low": price["ci_low"],
                                          "ci_high": price["ci_high"]})


def cost(groups, doc, analysed, prog_bits):
    """Per path: its variant, the fastest variant, the per-call difference and the total."""
    fast, why_fast = fastest(prog_bits, analysed)
    price = causes.exit_price((analysed or {}).get("cells"))
    out = []
    for g in groups:
        row = {"label": g["label"], "calls": g["calls"], "writes": g["writes"], "variant": None,
               "fastest": fast, "per_call_ns": None, "total_ns": None, "method": None,
               "why": None, "is_fastest": False}
        v = registry.find(g["bits"], g["entry"]) if g["entry"] in registry.ENTRIES else None
        row["variant"] = v
        if v is None:
            row["why"] = f"no mechanism in variants/registry enters by {g['entry']} from {g['bits']}-bit code"
        elif fast is None:
            row["why"] = why_fast
        elif v == fast:
            row["is_fastest"] = True
            zero = {"median": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": None, "unstable": False}
            row.update(per_call_ns=zero, total_ns=dict(zero), method="the fastest path itself")
        else:
            d, how = per_call_difference(doc, analysed, v, fast)
            if d is None:
                row["why"] = how
            else:
                row.update(per_call_ns=d, total_ns=stats.scale(d, g["calls"]), method=how)
                if g["entry"] == "int80":
                    e = in_exits(d, price)
                    row.update(exits_per_call=e, exit_price_ns=price,
                               exits=stats.scale(e, g["calls"]) if e else None,
                               exits_why=None if e else price.get("why"))
        if v and fast and v != fast:
            row["penalty_ns"] = penalties(analysed, [v, fast])
            row["cells"] = {x: _lite(percall.find(analysed, x, OP, shape=SHAPE)) for x in (v, fast)}
        out.append(row)
    return out, fast, why_fast


# ---------------------------------------------------------------- the tracer's cost

def overhead(raw_overhead):
    """ns per call the tracer added: traced - bare, CI by quadrature, or unknown (why)."""
    if not raw_overhead:
        return {"value": None, "why": "not measured (--no-overhead)"}
    if raw_overhead.get("why"):
        return {"value": None, "why": raw_overhead["why"]}
    bare, traced = stats.summarize(raw_overhead["bare"]), stats.summarize(raw_overhead["traced"])
    d = stats.diff_summary(traced, bare)
    if d is None:
        return {"value": None, "why": "no samples"}
    d.update(variant=raw_overhead["variant"], op=raw_overhead["op"], bare_ns=bare, traced_ns=traced)
    return d


def run_time(wall_s, calls, added):
    """The run time without the tracer, in seconds: wall less calls x added ns.  The
    subtraction assumes the calls ran one after another; calls that other threads made while
    the main one ran overlap, so for a threaded program this is a lower bound on the
    untraced time (and the shares computed from it upper bounds)."""
    if added.get("median") is None:
        return {"median": wall_s, "ci_low": None, "ci_high": None, "traced": True,
                "why": f"the tracer's cost is unknown ({added.get('why')}); this is the traced time"}
    lo = wall_s - calls * added["ci_high"] * 1e-9
    hi = wall_s - calls * added["ci_low"] * 1e-9
    med = wall_s - calls * added["median"] * 1e-9
    if med <= 0 or lo <= 0:
        return {"median": wall_s, "ci_low": None, "ci_high": None, "traced": True,
                "why": (f"the tracer's measured cost ({calls} calls x {added['median']:.0f} ns, up "
                        f"to {added['ci_high']:.0f}) is not below the traced time "
                        f"({wall_s * 1e3:.2f} ms); this is the traced time")}
    return {"median": med, "ci_low": lo, "ci_high": hi, "traced": False, "why": None}


# ---------------------------------------------------------------- the witnesses

# The calls that never return, by ABI: exit and exit_group (the thread ends inside them).
NO_RETURN = {"native": {60, 231}, "compat": {1, 252}}


def witnesses(raw):
    """Every count the tracer gave, against a second witness: {checked, agree, entries,
    regs_ok, exits, no_return, collapsed, lost_events, warnings, disagreements: [text]}.

    bpftrace: diagnose.bt's @site and @regs_ok count every call at the same probe, so their
    totals must be equal (a site dropped by a full map or lost by a reader makes @site
    short); @exits counts the calls that came back, so entries less exits must lie between 0
    and the calls that never return (exit, exit_group) plus one in flight per traced process
    (pid mode: the call a process is blocked in when the trace stops).  A count it could not
    check says why.  strace: every call it printed is one line; its own exits (the resumed
    and unfinished halves) are joined by the parser, so the check is the parser's count of
    lines against the rows' sum."""
    rows = raw.get("rows") or {}
    w = rows.get("witness")
    out = {"checked": False, "agree": None, "disagreements": [], "why": None}
    if not w:
        out["why"] = ("this trace was recorded before timewrite checked its counts against a "
                      "second witness")
        return out
    out.update({k: w.get(k) for k in ("collapsed", "lost_events", "warnings", "unread_lines")})
    sites = w.get("sites_total")
    regs = w.get("regs_total")
    exits = w.get("exits_total")
    out.update(entries=sites, regs_ok=regs, exits=exits, checked=True)
    bad = out["disagreements"]
    if raw.get("tracer") == "bpftrace":
        no_ret = sum(r["calls"] for r in rows.get("sites", [])
                     if r["id"] in NO_RETURN.get(r["abi"], ()))
        procs = len({r["pid"] for r in rows.get("sites", [])})
        out["no_return"] = no_ret
        if regs is not None and sites != regs:
            bad.append(f"the sites counted {sites} calls where the same probe's own total "
                       f"(@regs_ok) counted {regs}: {abs(regs - sites)} calls "
                       f"{'missing from' if sites < regs else 'too many in'} the sites")
        if exits is not None and sites is not None and not (
                0 <= sites - exits <= no_ret + (procs if raw.get("mode") == "pid" else 0)):
            bad.append(f"{sites} calls entered and {exits} came back, {no_ret} of them calls "
                       f"that never return (exit, exit_group)")
    elif w.get("lines") is not None and sites != w["lines"]:
        un = w.get("unnamed") or {}
        bad.append(f"strace printed {w['lines']} calls; the rows hold {sites}" + (
            " (no number on this machine for " + ", ".join(f"{k} x{n}" for k, n in un.items())
            + ")" if un else ""))
    if w.get("lost_events"):
        bad.append(f"bpftrace lost {w['lost_events']} events")
    if w.get("unread_lines"):
        bad.append(f"{w['unread_lines']} lines of the tracer's output were not JSON (cut short?)")
    out["agree"] = not bad
    return out


# ---------------------------------------------------------------- the diagnosis

def diagnose(raw, percall_doc, percall_source, raw_overhead=None):
    """The diagnosis document: program, tracer, paths, sites, latency, cost, the extra calls
    (data only: present.diagnose.headline says it in a sentence)."""
    rows, res = classify_rows(raw)
    groups = group_paths(rows)
    prog_bits = (raw.get("process") or {}).get("bits") or (groups[0]["bits"] if groups else 64)
    analysed = percall.analyse(percall_doc) if percall_doc else None
    costs, fast, why_fast = cost(groups, percall_doc, analysed, prog_bits) if analysed else \
        ([dict(label=g["label"], calls=g["calls"], writes=g["writes"], variant=None, fastest=None,
               per_call_ns=None, total_ns=None, method=None, is_fastest=False,
               why=f"no per-call matrix ({percall_source})") for g in groups], None,
         f"no per-call matrix ({percall_source})")
    total_calls = sum(g["calls"] for g in groups)
    added = overhead(raw_overhead)
    rt = run_time(raw["wall_s"], total_calls, added) if raw.get("wall_s") is not None else None
    lat, n_sys = latency(raw)
    vd = (raw.get("process") or {}).get("vdso") or {}
    d = {"schema": "timewrite-diagnosis/1",
         "program": {"cmd": raw.get("cmd"), "pid": raw.get("pid"), "exe": res.exe, "bits": prog_bits,
                     "status": raw.get("status"), "mode": raw.get("mode")},
         "tracer": {"name": raw["tracer"], "not_used": raw.get("not_used") or {},
                    "script": "traces/diagnose.bt" if raw["tracer"] == "bpftrace" else
                    "strace -f -i -T", "regs_ok": (raw.get("rows") or {}).get("regs_ok"),
                    "note": raw.get("note"),
                    "overhead_ns": added},
         "vdso": {k: vd.get(k) for k in ("form", "instruction", "landing_pad", "kernel_vsyscall", "why")},
         "calls": total_calls,
         "wall_s": raw.get("wall_s"), "run_time_s": rt,
         "paths": groups, "cost": costs, "fastest": fast, "fastest_why": why_fast,
         "percall_source": percall_source,
         "latency": lat, "syscalls_seen": n_sys, "witness": witnesses(raw)}
    d["extra"] = extra(d)
    return d


def extra(d):
    """The calls through slower paths, summed: {calls, by: {label: calls}, total_ns, share}."""
    slow = [c for c in d["cost"] if not c["is_fastest"]]
    known = [c for c in slow if c["total_ns"] is not None]
    unknown = [c for c in slow if c["total_ns"] is None]
    out = {"calls": sum(c["calls"] for c in slow), "by": {c["label"]: c["calls"] for c in slow},
           "total_ns": None, "share": None, "unknown": [{"label": c["label"], "calls": c["calls"],
                                                          "why": c["why"]} for c in unknown]}
    if known:
        med = sum(c["total_ns"]["median"] for c in known)
        # independent paths: half-widths in quadrature on each side
        lo = med - math.sqrt(sum((c["total_ns"]["median"] - c["total_ns"]["ci_low"]) ** 2 for c in known))
        hi = med + math.sqrt(sum((c["total_ns"]["ci_high"] - c["total_ns"]["median"]) ** 2 for c in known))
        out["total_ns"] = {"median": med, "ci_low": lo, "ci_high": hi}
        rt = d.get("run_time_s") or {}
        if rt.get("median"):
            r_lo = rt["ci_low"] if rt.get("ci_low") else rt["median"]
            r_hi = rt["ci_high"] if rt.get("ci_high") else rt["median"]
            out["share"] = {"median": med * 1e-9 / rt["median"], "ci_low": lo * 1e-9 / r_hi if lo > 0 else lo * 1e-9 / r_lo,
                            "ci_high": hi * 1e-9 / r_lo if hi > 0 else hi * 1e-9 / r_hi,
                            "of": "run time without the tracer" if not rt.get("traced") else "traced run time"}
    return out
