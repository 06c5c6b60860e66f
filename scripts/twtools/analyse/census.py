"""What a census says: per process, its calls per entry path and what the slow ones cost this
machine per second; what booting with ia32_emulation=0 would stop; what the tracer cost.

From the raw census (twtools.measure.census) and a per-call matrix (percall.json):

  processes  one row per process seen: in /proc at the start or end of the window, or making
             a call in it (tw's own children, the tracer and its overhead probe, are left
             out).  Its executable comes from /proc/<pid>/exe, or for a process that started
             and ended inside the window from the file name execve was given.  Its bitness is
             the code segment its calls came from (0x23 is 32-bit code), else /proc's ELF
             header.
  paths      each call on one entry path: native `syscall`; compat through the 32-bit vDSO
             (the instruction __kernel_vsyscall uses here, read from the live vDSO); compat
             `int 0x80` (or an inline sysenter/syscall) from the program's own text or from a
             library; a vsyscall-page call, counted from its page fault.
  cost       per path, calls per second x (the path's per-call cost - the fastest path open
             to the same process), op null, ret shape: the 32-bit vDSO for a 32-bit process,
             64-bit syscall for a 64-bit one (analyse.diagnose.fastest).  The per-call figure
             is each cell's `undisturbed_ns` with its interval where the matrix has it, else
             the paired per-round difference of medians (analyse.diagnose.
             per_call_difference); `figure` says which.
  readiness  the processes IA32 emulation keeps running: every 32-bit process, and every
             64-bit process that entered by int 0x80 (without IA32 emulation the kernel
             installs no int 0x80 gate, so the instruction faults); and the int 0x80 callers'
             cost per second summed.
  tracer     syscost getppid bare and under census.bt: ns added per call, times the calls per
             second the census saw, as CPU time per second: what the census cost the
             machine.  The page-fault probe's cost is not in it (stated).

Every figure carries its 95% CI or says why it is unknown.
"""
from ..machine import registry
# SYSCALL_WORK flags (include/linux/thread_info.h), as census.bt reads them: defined once.
from ..machine.walldefs import PRICE_CELLS, WORK_AUDIT
from . import causes, diagnose, percall, stats

SCHEMA = "timewrite-census-report/1"
CS32 = 0x23
TOP = 5


def _entry(row):
    if row["abi"] == "native":
        return "syscall"
    if row["insn"] == "vdso":
        return "vdso32-call"
    return row["insn"] if row["insn"] in ("int80", "sysenter", "syscall") else "unknown"


def processes(raw):
    """[{pid, start, gen, comm, exe, exe_from, bits, needs_ia32, seen_at_start, alive_at_end,
    started, exited, calls, rows, top, vsyscall_faults, why}] by calls, most first.

    One row per image, not per pid: (pid, start, gen) as census.bt keys its counts.  A pid
    alone would give a shell's calls and those of the 32-bit program it exec'd to the shell's
    executable, read from /proc at the window's start, and a reused pid's calls to the process
    that had it before.  So /proc's row names an image only when its start time is the
    image's, at the start for generation 0 and at the end for the last generation; an image
    born by execve inside the window is named by the file execve was given; a child that never
    called execve runs its parent's image at the fork.  A census without start times
    (timewrite-census/1) matches by pid, as it was analysed then."""
    trace = raw.get("trace") or {}
    own = raw.get("own_pid")

    def image(r):
        return (r["pid"], r.get("start"), r.get("gen") or 0)

    def by_pid(rows):
        out = {}
        for r in rows or []:
            out.setdefault(r["pid"], []).append(r)
        return out

    start, end = by_pid(raw.get("snapshot")), by_pid(raw.get("snapshot_end"))
    execs = {image(e): e["filename"] for e in trace.get("exec") or []}
    last = {}
    for pid, st, gen in execs:
        last[(pid, st)] = max(gen, last.get((pid, st), 0))
    exits = {(e, None) if isinstance(e, int) else (e["pid"], e.get("start"))
             for e in trace.get("exit") or []}
    parent = {f["pid"]: image({**f, "pid": f["parent"]}) for f in trace.get("fork") or []}

    def snap(rows, pid, st):
        """/proc's row for this pid if it is this process (same start time, where both know
        one)."""
        for r in rows.get(pid, []):
            if st is None or r.get("start") is None or r["start"] == st:
                return r
        return None

    def named(img, seen):
        """(exe, exe_from, /proc's row or None) for one image."""
        pid, st, gen = img
        row = None
        if gen == 0:
            row = snap(start, pid, st)
        if row is None and gen == last.get((pid, st), 0):
            row = snap(end, pid, st)
        if row and row.get("exe"):
            return row["exe"], "/proc", row
        if img in execs:
            return execs[img], "execve", row
        if gen == 0 and pid in parent and parent[pid] not in seen:
            exe, _, prow = named(parent[pid], seen | {img})
            if exe:
                return exe, "parent", {"bits": (prow or {}).get("bits"),
                                       "needs_ia32": (prow or {}).get("needs_ia32")}
        return None, None, row

    byp = {}

    def proc_(img):
        if img not in byp:
            pid, st, gen = img
            exe, src, row = named(img, frozenset())
            row = row or {}
            end_row = snap(end, pid, st) if gen == last.get((pid, st), 0) else None
            byp[img] = {"pid": pid, "start": st, "gen": gen, "comm": row.get("comm"),
                        "exe": exe, "exe_from": src, "bits": row.get("bits"),
                        "needs_ia32": row.get("needs_ia32"),
                        "seccomp": (end_row or row).get("seccomp"),
                        "seccomp_filters": (end_row or row).get("seccomp_filters"),
                        "seen_at_start": gen == 0 and snap(start, pid, st) is not None,
                        "alive_at_end": end_row is not None,
                        "started": img in execs or (gen == 0 and snap(start, pid, st) is None),
                        "exited": gen == last.get((pid, st), 0) and (pid, st) in exits,
                        "calls": 0, "rows": [], "top": [], "vsyscall_faults": 0,
                        "why": row.get("why"), "_cs": set(), "_comms": {}}
        return byp[img]

    for r in trace.get("calls") or []:
        if r.get("own") or r["pid"] == own:
            continue
        p = proc_(image(r))
        p["calls"] += r["calls"]
        p["rows"].append(r)
        p["_cs"].add(r["cs"])
        p["_comms"][r["comm"]] = p["_comms"].get(r["comm"], 0) + r["calls"]
    for v in trace.get("vsyscall") or []:
        if v["pid"] != own:
            p = proc_(image(v))
            p["vsyscall_faults"] += v["faults"]
            p["_comms"].setdefault(v["comm"], 0)
    # Processes /proc showed that made no call in the window, where they matter: 32-bit ones
    # (readiness), and ones whose bitness could not be read (what the census could not see).
    for rows, at_end in ((start, False), (end, True)):
        for pid, snaps in rows.items():
            for s_ in snaps:
                if not (s_.get("needs_ia32") or s_.get("bits") is None and s_.get("why")):
                    continue
                st = s_.get("start")
                if st is None and any(k[0] == pid for k in byp):
                    continue
                proc_((pid, st, last.get((pid, st), 0) if at_end else 0))
    table = {abi: diagnose.names(abi) for abi in ("compat", "native")}
    nr = {}
    for r in trace.get("nr") or []:
        if image(r) in byp:
            nr.setdefault(image(r), []).append(r)
    out = []
    for img, p in byp.items():
        cs, comms = p.pop("_cs"), p.pop("_comms")
        if comms:
            p["comm"] = max(comms.items(), key=lambda kv: kv[1])[0]
        if CS32 in cs:
            p["bits"] = 32
        elif cs:
            p["bits"] = p["bits"] or 64
        if p["bits"] == 32:
            p["needs_ia32"] = True
        rows = sorted(nr.get(img, []), key=lambda r: -r["calls"])[:TOP]
        p["top"] = [{"abi": r["abi"], "id": r["id"],
                     "name": table.get(r["abi"], {}).get(r["id"], f"#{r['id']}"),
                     "calls": r["calls"]} for r in rows]
        out.append(p)
    out.sort(key=lambda p: (-p["calls"], p["pid"], p["gen"]))
    return out


def paths(p, vdso_instruction):
    """A process's calls grouped by entry path: [{bits, abi, origin, entry, label, calls}]."""
    groups = {}
    for r in p["rows"]:
        bits = 32 if r["cs"] == CS32 else 64
        key = (bits, r["abi"], r["origin"], _entry(r))
        groups[key] = groups.get(key, 0) + r["calls"]
    out = []
    for (bits, abi, origin, entry), n in groups.items():
        how = f"__kernel_vsyscall ({vdso_instruction or 'instruction unknown'} here)"
        out.append({"bits": bits, "abi": abi, "origin": origin, "entry": entry, "calls": n,
                    "label": diagnose.path_label((bits, abi, origin, entry), how)})
    if p.get("vsyscall_faults"):
        out.append({"bits": 64, "abi": "native", "origin": "vsyscall", "entry": "vsyscall-call",
                    "calls": p["vsyscall_faults"],
                    "label": "the vsyscall page (emulated on a page fault)"})
    out.sort(key=lambda g: -g["calls"])
    return out


# ---------------------------------------------------------------- prices

def _undisturbed(c):
    if c and c.get("undisturbed_ns") is not None and c.get("undisturbed_ci_low") is not None \
            and c.get("undisturbed_ci_high") is not None:
        return {"median": c["undisturbed_ns"], "ci_low": c["undisturbed_ci_low"],
                "ci_high": c["undisturbed_ci_high"], "n": c.get("n_rounds"),
                "unstable": c.get("unstable")}
    return None


def per_call(doc, analysed, v, fast):
    """(difference summary, figure, method) or (None, None, why): v - fast per call."""
    ca = percall.find(analysed, v, diagnose.OP, shape=diagnose.SHAPE)
    cb = percall.find(analysed, fast, diagnose.OP, shape=diagnose.SHAPE)
    ua, ub = _undisturbed(ca), _undisturbed(cb)
    if ua and ub:
        return (stats.diff_summary(ua, ub), "undisturbed_ns",
                f"difference of the two cells' undisturbed_ns, CI by quadrature "
                f"({diagnose.OP}, {diagnose.SHAPE} shape)")
    d, how = diagnose.per_call_difference(doc, analysed, v, fast)
    if d is None:
        return None, None, how
    return d, "median", how


def price(path, bits, doc, analysed, seconds):
    """The path's variant, the fastest open to the process, per call and per second."""
    row = {"variant": None, "fastest": None, "per_call_ns": None, "ns_per_s": None,
           "figure": None, "method": None, "is_fastest": False, "why": None}
    if path["entry"] == "vsyscall-call":
        row["variant"] = registry.find(64, "vsyscall-call")
        row["why"] = ("the per-call matrix prices op null, and the vsyscall page has only time, "
                      "gettimeofday and getcpu: no like-for-like figure")
        return row
    v = registry.find(path["bits"], path["entry"]) if path["entry"] in registry.ENTRIES else None
    row["variant"] = v
    if v is None:
        row["why"] = f"no mechanism in variants/registry enters by {path['entry']} from " \
                     f"{path['bits']}-bit code"
        return row
    if analysed is None:
        row["why"] = "no per-call matrix"
        return row
    fast, why = diagnose.fastest(bits, analysed)
    row["fastest"] = fast
    if fast is None:
        row["why"] = why
        return row
    if v == fast:
        zero = {"median": 0.0, "ci_low": 0.0, "ci_high": 0.0, "n": None, "unstable": False}
        row.update(is_fastest=True, per_call_ns=zero, ns_per_s=dict(zero),
                   method="the fastest path itself")
        return row
    d, figure, how = per_call(doc, analysed, v, fast)
    if d is None:
        row["why"] = how
        return row
    row.update(per_call_ns=d, ns_per_s=stats.scale(d, path["calls"] / seconds), figure=figure,
               method=how)
    return row


# ---------------------------------------------------------------- the tracer

def tracer_cost(raw, procs, seconds):
    """Per probe variant the ns per call census.bt added, and the bound: calls per second seen
    x that, as CPU time per second and as a share of the machine's CPUs."""
    added = {v: diagnose.overhead(o) for v, o in (raw.get("overhead") or {}).items()}
    native = sum(r["calls"] for p in procs for r in p["rows"] if r["abi"] == "native")
    compat = sum(r["calls"] for p in procs for r in p["rows"] if r["abi"] == "compat")
    out = {"added_ns": added, "calls_per_s": {"native": native / seconds, "compat": compat / seconds},
           "ns_per_s": None, "share_of_cpus": None, "cpus": raw.get("cpus"),
           "not_counted": "the page-fault probe (vsyscall page) runs on every user page fault; "
                          "its cost is not measured here",
           "why": None}
    an = added.get(registry.find(64, "syscall")) or {}
    ac = added.get(registry.find(32, "int80")) or an
    if an.get("median") is None:
        out["why"] = an.get("why") or "the tracer's cost was not measured"
        return out
    if compat and ac.get("median") is None:
        ac = an
        out["note"] = "compat calls priced with the native probe's figure (no 32-bit figure)"
    parts = [stats.scale(an, native / seconds) if native else None,
             stats.scale(ac, compat / seconds) if compat else None]
    parts = [x for x in parts if x]
    if not parts:
        zero = {"median": 0.0, "ci_low": 0.0, "ci_high": 0.0}
        out["ns_per_s"] = zero
        return out
    tot = {k: sum(x[k] for x in parts) for k in ("median", "ci_low", "ci_high")}
    cpus = raw.get("cpus")
    # A rate has a physical bound: the machine's CPUs give at most cpus seconds of CPU per
    # second.  A figure beyond it says the counts or the window are wrong, not that the
    # tracer cost that much (a 1 ms window once read as 3.1e+07% of 2 CPUs).
    if cpus and tot["median"] > cpus * 1e9:
        out["why"] = (f"the counts imply {tot['median'] / 1e9:.3g} s of CPU per second over "
                      f"{seconds:.3g} s, more than this machine's {cpus} CPUs can give: the "
                      "window is too short or the counts are wrong")
        return out
    out["ns_per_s"] = tot
    if cpus:
        out["share_of_cpus"] = {k: v / 1e9 / cpus for k, v in tot.items()}
    return out


# ---------------------------------------------------------------- the census

def _sum_intervals(rows):
    """Figures per second added up; their intervals too (the bounds added: the paths share
    cells, so their errors move together, and adding bounds covers that)."""
    known = [r for r in rows if r is not None]
    if not known:
        return None
    return {k: sum(r[k] for r in known) for k in ("median", "ci_low", "ci_high")}



def _wall_price(walls, spec, abi):
    """(added ns per call, low, high, the cell it came from) for a call of this ABI behind
    the wall `spec` as this results directory measured it (walls.json), or None: a native
    call is priced by getppid through glibc's wrapper (then the bare 64-bit syscall's, in a
    walls.json written before glibc's cell led), a compat one by 32-bit int 0x80's (then the
    64-bit int 0x80's): machine.walldefs.PRICE_CELLS."""
    from . import walls as a_walls
    want = PRICE_CELLS[abi]
    for w in (walls or {}).get("walls") or []:
        if w.get("spec") != spec:
            continue
        rows = {(r["variant"], r["op"]): r for r in w.get("rows") or []}
        for cell in want:
            a = a_walls.added(rows.get(cell))
            if a:
                return a + (f"{spec} {cell[0]} {cell[1]}",)
    return None


def walls_of(raw, procs, seconds, walls=None):
    """Who runs behind which wall here, and what it costs them per second: processes behind
    a seccomp filter (/proc's Seccomp 2), processes whose calls carry an audit context
    (SYSCALL_AUDIT, read by census.bt at their calls), and programs on raw_syscalls, which
    every process pays for.  Priced with this results directory's walls stage where it has
    the wall (seccomp: the container profile's measured price, since another process's own
    filter is not read), else unknown with why."""
    hw = raw.get("host_walls")
    traced = raw.get("trace") is not None
    if hw is None and not any("seccomp" in r for r in raw.get("snapshot") or []):
        return {"why": "this census predates the walls (timewrite-census/2): unknown"}
    work = {(w["pid"], w.get("start"), w.get("gen") or 0): w["work"]
            for w in (raw.get("trace") or {}).get("work") or []}

    def rate(p, abi):
        return sum(g["calls"] for g in p.get("paths") or [] if g["abi"] == abi) / seconds \
            if seconds and traced else None

    def group(members, spec, what):
        out = {"processes": len(members), "who": [_brief(p) | {
            "seccomp_filters": p.get("seccomp_filters")} for p in members[:20]]}
        if not traced or not seconds:
            out["why"] = "no call counts (the census could not trace)"
            return out
        native = sum(rate(p, "native") or 0 for p in members)
        compat = sum(rate(p, "compat") or 0 for p in members)
        out.update(native_calls_per_s=native, compat_calls_per_s=compat)
        pn, pc = _wall_price(walls, spec, "native"), _wall_price(walls, spec, "compat")
        out["price"] = {"native": pn, "compat": pc, "as": what}
        if (pn or not native) and (pc or not compat):
            lo = sum(r * (p[1] if p else 0) for r, p in ((native, pn), (compat, pc)))
            hi = sum(r * (p[2] if p else 0) for r, p in ((native, pn), (compat, pc)))
            mid = sum(r * (p[0] if p else 0) for r, p in ((native, pn), (compat, pc)))
            out["ns_per_s"] = {"median": mid, "ci_low": lo, "ci_high": hi}
        else:
            out["why"] = (f"{spec} was not measured in this results directory (tw run's walls "
                          f"stage{'; tw run --walls for every wall' if spec != 'seccomp:container' else ''}"
                          "): their calls' price is unknown")
        return out

    behind = [p for p in procs if p.get("seccomp") == 2]
    audited = [p for p in procs
               if work.get((p["pid"], p.get("start"), p.get("gen") or 0), 0) & WORK_AUDIT]
    audit = (hw or {}).get("audit") or {}
    tr = (hw or {}).get("tracers") or {}
    out = {"seccomp": group(behind, "seccomp:container",
                            "behind the project's container profile, as measured here (their "
                            "own filters are not read)"),
           "audit": group(audited, "audit:compliance" if audit.get("enabled") == 1 else
                          "audit:context", "with an audit context, as measured here"),
           "audit_state": audit,
           "audit_silent": bool(audited) and audit.get("enabled") == 0,
           "tracers": tr.get("rows"), "tracers_why": tr.get("why"),
           "work_read": bool(work)}
    if not work and traced:
        out["audit"]["why"] = "census.bt read no work flags (an older script)"
    everyone = [p for p in procs if not p.get("own")]
    if tr.get("rows"):
        out["tracer_all"] = group(everyone, "tracer:raw_syscalls",
                                  "every process: a program on raw_syscalls slows every call of "
                                  "the machine (priced as the project's tracer, measured here)")
    return out


def analyse(raw, percall_doc=None, percall_source=None, walls=None):
    """The census document (SCHEMA): host, window, processes with paths and prices,
    readiness, tracer cost, and what could not be seen."""
    seconds = raw.get("wall_s") or raw.get("seconds") or None
    analysed = percall.analyse(percall_doc) if percall_doc else None
    # The price of one VM exit (the cpuid cell): int 0x80's excess is counted in exits too.
    one_exit = causes.exit_price((analysed or {}).get("cells"))
    vd = raw.get("vdso32") or {}
    procs = processes(raw)
    traced = raw.get("trace") is not None
    out_procs = []
    for p in procs:
        ps = paths(p, vd.get("instruction")) if traced else []
        for g in ps:
            g.update(price(g, p["bits"] or g["bits"], percall_doc, analysed, seconds) if seconds
                     else {"why": "no window"})
            g["per_s"] = g["calls"] / seconds if seconds else None
            if g["entry"] == "int80":
                e = diagnose.in_exits(g.get("per_call_ns"), one_exit)
                g.update(exits_per_call=e, exits_per_s=stats.scale(e, g["per_s"]) if e and g["per_s"]
                         else None)
                if g["exits_per_s"] is None:
                    # Unknown, and why: the exit's price (no cpuid figure), else the cost.
                    g["exits_why"] = ((one_exit or {}).get("why") if (one_exit or {}).get("value") is None
                                      else f"unknown: {g.get('why') or 'the per-call cost is unknown'}")
        slow = [g.get("ns_per_s") for g in ps if not g.get("is_fastest")]
        q = {k: v for k, v in p.items() if k != "rows"}
        q.update(paths=ps, calls_per_s=(p["calls"] / seconds) if seconds and traced else None,
                 slow_ns_per_s=(_sum_intervals(slow) if None not in slow else None) if slow
                 else ({"median": 0.0, "ci_low": 0.0, "ci_high": 0.0} if ps else None),
                 int80_calls=sum(g["calls"] for g in ps if g["entry"] == "int80"))
        i80 = [g.get("ns_per_s") for g in ps if g["entry"] == "int80"]
        q["int80_ns_per_s"] = _sum_intervals(i80) if i80 and None not in i80 else None
        out_procs.append(q)
    stop = [p for p in out_procs if p["needs_ia32"] or (p["bits"] == 64 and any(
        g["abi"] == "compat" for g in p["paths"]))]
    for p in stop:
        p["stops_because"] = "32-bit" if p["needs_ia32"] else "64-bit, enters by int 0x80"
    int80 = [p for p in out_procs if p["int80_calls"]]
    int80_cost = _sum_intervals([g.get("ns_per_s") for p in int80 for g in p["paths"]
                                 if g["entry"] == "int80"])
    i80x = [g.get("exits_per_s") for p in int80 for g in p["paths"] if g["entry"] == "int80"]
    unknown_cost = sorted({f"{g['label']}: {g.get('why') or 'not priced'}" for p in int80
                           for g in p["paths"] if g["entry"] == "int80" and g.get("ns_per_s") is None})
    unreadable = [p for p in out_procs if p["bits"] is None and p.get("why")]
    figures = sorted({g["figure"] for p in out_procs for g in p["paths"] if g.get("figure")})
    d = {"schema": SCHEMA, "host": raw.get("host"), "kernel": raw.get("kernel"),
         "utc": raw.get("utc"), "seconds": raw.get("seconds"), "window_s": seconds,
         "window_utc": raw.get("window_utc"),
         "root": raw.get("root"), "tracer": raw.get("tracer"), "script": raw.get("script"),
         "why_not": raw.get("why_not"),
         "blind": _blind(raw),
         "vdso32": vd, "ia32": raw.get("ia32") or {},
         "percall_source": percall_source if percall_doc else None,
         "percall_why": None if percall_doc or not traced else
         f"no per-call matrix ({percall_source or 'none given'}): every cost is unknown",
         "figure": figures,
         "processes": out_procs,
         "readiness": {"stop": [_brief(p) for p in stop],
                       "int80": [_brief(p) for p in int80],
                       "int80_ns_per_s": int80_cost, "int80_unknown": unknown_cost,
                       "exit_price_ns": one_exit,
                       "int80_exits_per_s": _sum_intervals(i80x) if i80x and None not in i80x else None,
                       "unreadable": [_brief(p) | {"why": p.get("why")} for p in unreadable]},
         "tracer_cost": tracer_cost(raw, procs, seconds) if traced and seconds else None,
         "walls": walls_of(raw, out_procs, seconds, walls),
         "regs_ok": (raw.get("trace") or {}).get("regs_ok"),
         "maps_full": (raw.get("trace") or {}).get("maps_full") or [],
         "witness": witnesses(raw)}
    return d


def witnesses(raw):
    """Every count of the census against a second witness: {checked, agree, calls, by_number,
    regs_ok, images_differing, maps_full, collapsed, lost_events, warnings, disagreements,
    why}.  census.bt counts each call three times at one probe: by entry path (@calls), by
    call number (@nr) and by the pt_regs check (@regs_ok); summed over the machine they must be
    equal, and per process image the path counts must equal the number counts.  A full map
    (judged on the entries bpftrace printed), a lost event or an unreadable line is a
    disagreement too: the counts are then short by an unknown number."""
    t = raw.get("trace")
    out = {"checked": False, "agree": None, "disagreements": [], "why": None}
    if t is None:
        out["why"] = "no trace: " + (raw.get("why_not") or "the census did not trace")
        return out
    w = t.get("witness")
    if not w:
        out["why"] = ("this census was recorded before timewrite checked its counts against a "
                      "second witness")
        return out
    bad = out["disagreements"]
    calls, nrs, regs = w.get("calls_total"), w.get("nr_total"), w.get("regs_total")
    out.update(checked=True, calls=calls, by_number=nrs, regs_ok=regs,
               maps_full=t.get("maps_full") or [], map_keys=w.get("map_keys"),
               **{k: w.get(k) for k in ("collapsed", "lost_events", "warnings", "entries")})
    if not (calls == nrs == regs):
        bad.append(f"the calls counted by entry path ({calls}), by call number ({nrs}) and by "
                   f"the probe's own total ({regs}) differ")

    def per_image(rows):
        acc = {}
        for r in rows:
            k = (r["pid"], r.get("start"), r.get("gen") or 0)
            acc[k] = acc.get(k, 0) + r["calls"]
        return acc
    a, b = per_image(t.get("calls") or []), per_image(t.get("nr") or [])
    differ = [{"pid": k[0], "start": k[1], "gen": k[2], "by_path": a.get(k, 0),
               "by_number": b.get(k, 0)}
              # a start the record does not know (schema: int?) sorts first
              for k in sorted(set(a) | set(b), key=lambda k: (k[0], -1 if k[1] is None else k[1],
                                                             k[2]))
              if a.get(k, 0) != b.get(k, 0)]
    out["images_differing"] = differ[:20]
    if differ:
        bad.append(f"{len(differ)} process image(s) counted differently by path and by number, "
                   "e.g. pid {pid}: {by_path} against {by_number}".format(**differ[0]))
    if w.get("lost_events"):
        bad.append(f"bpftrace lost {w['lost_events']} events")
    if w.get("unread_lines"):
        bad.append(f"{w['unread_lines']} lines of bpftrace's output were not JSON (cut short?)")
    # a full map is a witness too: its calls after it filled are missing from every total
    out["agree"] = not bad and not out["maps_full"]
    return out


def full_text(t):
    """A full map in words: which, and that calls went uncounted."""
    return ("bpftrace's maps filled up (" + ", ".join(t["maps_full"]) + "): some calls were not "
            "counted")


def _brief(p):
    return {k: p.get(k) for k in ("pid", "comm", "exe", "exe_from", "bits", "alive_at_end",
                                  "started", "exited", "calls", "calls_per_s", "int80_calls",
                                  "int80_ns_per_s", "slow_ns_per_s", "stops_because")}


def _blind(raw):
    """What this census could not see, each with why."""
    out = []
    if raw.get("why_not"):
        out.append(f"no call counts, entry paths or costs: {raw['why_not']}; the 32-bit "
                   "processes come from /proc alone, and processes that start and end between "
                   "two reads are missed")
    elif raw.get("vsyscall_why"):
        out.append(raw["vsyscall_why"])
    t = raw.get("trace") or {}
    if t.get("maps_full"):
        out.append(full_text(t))
    w = witnesses(raw)
    if w["disagreements"]:
        out.append("every count, since the census's counts disagree: " + "; ".join(w["disagreements"]))
    regs = t.get("regs_ok") or {}
    if regs.get("bad"):
        out.append(f"{regs['bad']} calls had pt_regs whose orig_ax did not match the call: "
                   "their entry path may be wrong")
    return out
