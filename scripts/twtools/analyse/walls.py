"""Why a wall costs what `tw ab --wall` measured: per cell, the path the call takes through it.

The chain is the kernel's (Linux 6.x, kernel/entry/common.c, kernel/seccomp.c,
kernel/auditsc.c, kernel/trace/trace_syscalls.c):

  any wall   a SYSCALL_WORK flag on the task sends the call from the entry's fast path into
             syscall_trace_enter() and, on the way out, syscall_exit_work();
  seccomp    SYSCALL_WORK_SECCOMP: __secure_computing() fills struct seccomp_data (number,
             arch, instruction pointer, six arguments), then seccomp_cache_check_allow()
             looks the number up in the bitmap of the call's arch (native x86-64, or the
             compat i386 one for int 0x80 from 64-bit code and for 32-bit code), below that
             table's size only, and, where the bit is clear, runs every filter of the stack
             (seccomp_run_filters);
  audit      SYSCALL_WORK_SYSCALL_AUDIT, given at fork to every task once audit has been
             enabled in the boot (audit_alloc): __audit_syscall_entry() fills the task's
             context, __audit_syscall_exit() runs audit_filter_syscall() over the exit rules
             of this arch that name this call, and resets the context;
  tracer     SYSCALL_WORK_SYSCALL_TRACEPOINT, set on every task while a program is attached
             to raw_syscalls (syscall_regfunc): trace_sys_enter() and trace_sys_exit() run
             the attached programs.

The numbers come from the run: each measured call's number and architecture as the run
recorded them (ab.json's wall.up.calls), the kernel's table sizes it recorded (the cache's),
the filter's instructions from the program run in user space on the call's seccomp_data
(machine.seccompsim), the flags from bpftrace's read of each process, the rules from the
rules file.  Nothing here needs a native library: a number the run did not record comes from
the kernel's UAPI headers (machine.seccomp.cell_call).
"""
from ..machine import registry, seccomp, seccompsim
from ..machine.walldefs import HEADLINE_WALL


def _abi(variant):
    return registry.get(variant).abi


def _sizes(table_sizes):
    """The cache's table sizes as seccompsim.cached takes them, or None where unknown."""
    t = table_sizes or {}
    if t.get("x86_64") is None or t.get("i386") is None:
        return None
    return {seccompsim.NATIVE: int(t["x86_64"]), seccompsim.COMPAT: int(t["i386"])}


def cell_call(variant, op, recorded=None):
    """(name, nr, arch, args) of a cell's call: as the run recorded it (ab.json's
    wall.up.calls), else from the UAPI headers; None where its table has no such call."""
    r = (recorded or {}).get(f"{variant} {op}")
    if isinstance(r, dict) and isinstance(r.get("nr"), int) and \
            r.get("arch") in seccomp.ARCH_VALUES:
        return (r.get("name"), r["nr"], seccomp.ARCH_VALUES[r["arch"]],
                tuple(a for a in r.get("args") or () if isinstance(a, int)))
    return seccomp.cell_call(_abi(variant), op)


def seccomp_chain(prog, times, variant, op, kernel_release=None, table_sizes=None,
                  recorded=None, stub=0, runtime=None):
    """The seccomp part of a cell's path: {'arch', 'nr', 'action', 'cached', 'instructions',
    'reads', 'text'}, or None where the call has no number in its table.  cached is None
    where the run did not record the kernel's table sizes (the cache's bitmaps)."""
    c = cell_call(variant, op, recorded)
    if c is None:
        return None
    name, nr, arch, args = c
    progs = [prog] * times
    ret, n, read = seccompsim.run_stack(progs, nr, arch, args)
    has_cache = seccomp.kernel_has_cache(kernel_release)
    sizes = _sizes(table_sizes)
    cached = seccompsim.cached(progs, nr, arch, sizes) if has_cache else False
    compat = arch == seccomp.AUDIT_ARCH_I386
    how = ("int 0x80 from 64-bit code, checked as i386" if variant == "64-int80" else
           "a 32-bit call, checked as i386" if compat else "a native call, checked as x86_64")
    size = (sizes or {}).get(arch)
    label = name or "no call: an invalid number"
    if cached:
        path = (f"the {'compat' if compat else 'native'} cache bitmap allows {nr} ({label}) "
                "whatever its arguments: no filter runs")
    elif not has_cache:
        path = f"this kernel has no seccomp cache (before 5.11): {n} filter instructions run"
    else:
        if cached is None:
            why = "unknown: this run did not record the kernel's table sizes"
        elif size is not None and not 0 <= nr < size:
            why = (f"{nr} is past the {'i386' if compat else 'x86-64'} table's {size} calls, "
                   "and the bitmap holds only numbers below it")
        elif any(r.startswith("args") for r in read):
            why = "a rule inspects " + ", ".join(r for r in sorted(read) if r.startswith("args"))
        elif "ip" in read:
            why = "a rule reads the instruction pointer"
        else:
            why = "the filter does not allow it on number and arch alone"
        path = (f"not cached ({why}): {n} filter instruction{'s' if n != 1 else ''} run"
                + (f" over {times} filters" if times > 1 else ""))
        if stub and n <= stub * times and seccomp.action_name(ret).startswith("errno 38"):
            path += (f", all of them {runtime or 'runc'}'s -ENOSYS stub: the number is past "
                     "every call the profile names")
    text = (f"SECCOMP flag -> syscall_trace_enter -> seccomp_data filled; {how} (nr {nr}); "
            f"{path}; answer: {seccomp.action_name(ret)}")
    return {"arch": seccomp.ARCH_NAMES[arch], "nr": nr, "action": seccomp.action_name(ret),
            "cached": cached, "instructions": 0 if cached else n,
            "instructions_run_if_not": n, "reads": sorted(read), "text": text}


def audit_chain(rules, variant, op, host=None):
    """The audit part of a cell's path: how many of the exit rules name this call.  host:
    what the host gives a new process (audit_host), when asked: the chain says whether the
    call takes the audit path at all here."""
    abi = _abi(variant)
    name = seccomp.OP_CALL.get(op)
    arch_word = "b64" if abi == "x86_64" else "b32"
    exit_rules = [r for r in rules if r and r[0] in ("-a", "-A") and "exit" in r[1]]
    naming = 0
    for r in exit_rules:
        sys_words = [r[i + 1] for i, w in enumerate(r[:-1]) if w == "-S"]
        arches = [r[i + 1].split("=", 1)[1] for i, w in enumerate(r[:-1])
                  if w == "-F" and r[i + 1].startswith("arch=")]
        if arches and arch_word not in arches:
            continue
        if not sys_words or "all" in sys_words or (name and name in
                                                   ",".join(sys_words).split(",")):
            naming += 1
    watches = sum(1 for r in rules if r and r[0] == "-w")
    if host is not None and host.get("context") is False and not rules:
        return {"rules_naming": 0, "exit_rules": 0, "watches": 0, "context": False,
                "text": "no audit context here: " + host["why"] + "; the call takes no audit "
                        "path, and audit:context adds nothing"}
    text = ("SYSCALL_AUDIT flag (audit context given at fork) -> __audit_syscall_entry fills "
            "the context; __audit_syscall_exit -> audit_filter_syscall: "
            f"{naming} of {len(exit_rules)} exit rule(s) name this call for {arch_word}"
            + (f", {watches} watch(es) (on file calls, not this one)" if watches else "")
            + "; context reset")
    if host is not None and host.get("context") is None:
        text += f" (whether a new process gets a context here is unknown: {host['why']})"
    elif host is not None and host.get("context"):
        text = f"{host['why']}: " + text
    return {"rules_naming": naming, "exit_rules": len(exit_rules), "watches": watches,
            "context": (host or {}).get("context"), "text": text}


TRACER_TEXT = ("SYSCALL_TRACEPOINT flag on every task while attached -> trace_sys_enter runs "
               "the program (a per-CPU count, a hash update of the thread's start) -> the call "
               "-> trace_sys_exit runs the other (a hash lookup and delete, a histogram slot)")


def host_tracers(doc):
    """The programs that were on raw_syscalls during the run and not the run's own, as one
    phrase, or None: every call of A and B paid for them."""
    ht = (doc or {}).get("host_tracers") or {}
    rows = [r for r in (ht.get("before") or []) + (ht.get("after") or [])
            if isinstance(r, dict)]
    seen, names = set(), []
    for r in rows:
        key = (r.get("pid"), r.get("kind"), r.get("tracepoint"))
        if key in seen:
            continue
        seen.add(key)
        who = r.get("comm") or "?"
        names.append(f"{who}" + (f" (pid {r['pid']})" if r.get("pid") else "")
                     + (f", {r['kind']}" if r.get("kind") else "")
                     + (f" on {r['tracepoint']}" if r.get("tracepoint") else ""))
    return "; ".join(names) if names else None


def explain_rows(rows, doc):
    """Each row of compare.ab(doc) gets 'why' (one line) and 'chain' (the numbers), from the
    wall doc['wall'] describes (a seccomp wall's program is kept in it, as hex)."""
    w = ((doc or {}).get("wall") or {}).get("up") or {}
    kind = w.get("kind")
    prog = None
    if kind == "seccomp" and isinstance(w.get("program_hex"), str):
        try:
            prog = seccompsim.load(bytes.fromhex(w["program_hex"]))
        except (ValueError, seccompsim.BadFilter):
            prog = None
    rules = [r.split() for r in (w.get("rules") or [])]
    spoiled = host_tracers(doc)
    for r in rows:
        c = None
        if kind == "seccomp" and prog is not None:
            c = seccomp_chain(prog, int(w.get("times") or 1), r["variant"], r["op"],
                              w.get("kernel") or doc.get("kernel"), w.get("table_sizes"),
                              w.get("calls"), int(w.get("stub") or 0), w.get("runtime"))
        elif kind == "audit":
            c = audit_chain(rules, r["variant"], r["op"])
            ev = (doc.get("wall") or {}).get("evidence") or {}
            if ev.get("b") is not None and "SYSCALL_AUDIT" not in ev["b"]:
                c = {"rules_naming": None, "exit_rules": c["exit_rules"], "text":
                     "no SYSCALL_AUDIT flag on B's processes (read at their exit_group): audit "
                     "was never enabled in this boot, or a task rule says never, so a new "
                     "process gets no audit context and the call takes no audit path"}
        elif kind == "tracer":
            c = {"text": TRACER_TEXT}
        if c is not None and spoiled:
            c["text"] += (f"; NOTE: {spoiled} was on raw_syscalls during the run: A and B both "
                          "paid its slow path, so this figure is what the wall adds on top of it"
                          if kind == "tracer" else
                          f"; NOTE: {spoiled} was on raw_syscalls during the run: A and B both "
                          "paid for it")
        r["chain"] = c
        r["why"] = c["text"] if c else None
    return rows


def host_lines(doc):
    """What the run put up and took down, in lines for the terminal and the JSON's caller."""
    w = (doc or {}).get("wall") or {}
    up, down, ev = w.get("up") or {}, w.get("down") or {}, w.get("evidence") or {}
    out = []
    kind = up.get("kind")
    if kind == "seccomp":
        out.append(f"wall: {up.get('spec')}: {up.get('source')}, {up.get('instructions')} BPF "
                   f"instructions, installed {up.get('times')} time(s) in each B process")
        if up.get("runtime"):
            out.append(f"  laid out as {up['runtime']} lays it out: {up.get('layout')}; "
                       f"installed with flags {', '.join(up.get('flag_names') or []) or 'none'}"
                       f"; capabilities assumed: {up.get('caps')}")
        notes = up.get("notes") or []
        for n in notes[:8]:
            out.append(f"  note: {n}")
        if len(notes) > 8:
            out.append(f"  note: ... and {len(notes) - 8} more (ab.json's wall.up.notes)")
    elif kind == "audit":
        out.append(f"wall: {up.get('spec')}: {len(up.get('rules') or [])} rule(s) added; audit "
                   f"was {'on' if up.get('enabled_before') == 1 else 'off'} before"
                   + ("; turned on for the run" if up.get("turned_on") else ""))
        out.append(f"  {up.get('separation')}")
        for r in down.get("host_had") or up.get("host_had") or []:
            out.append(f"  the host had this rule already, and keeps it: {r}")
        if down:
            out.append("  the host's audit rules after the run are "
                       + ("as before" if down.get("restored") else
                          "NOT as before: " + "; ".join(down.get("errors") or ["they differ"])))
            if down.get("left_behind"):
                out.append(f"  left behind: {down['left_behind']}")
    elif kind == "tracer":
        out.append(f"wall: {up.get('spec')}: {up.get('program')} on {up.get('attach')}")
        if down.get("calls_seen") is not None:
            out.append(f"  the tracer counted {down['calls_seen']} system calls of the machine "
                       f"over its {down.get('attaches')} attaches")
    st = ev.get("b_status")
    if st:
        out.append("  B's processes: " + ", ".join(f"{k} {v}" for k, v in sorted(st.items())))
    if ev.get("a") is not None:
        out.append(f"  work flags at their exit_group (bpftrace): A {', '.join(ev['a']) or 'none'}"
                   f"; B {', '.join(ev['b']) or 'none'}"
                   + (" (a tracer's own flag, SYSCALL_TRACEPOINT, is set on every task while "
                      "bpftrace reads them, and so is not shown: the tracer's count above is its "
                      "evidence)" if kind == "tracer" else ""))
    elif ev.get("why"):
        out.append(f"  work flags: unknown ({ev['why']})")
    spoiled = host_tracers(doc)
    if spoiled:
        out.append(f"  NOTE: on raw_syscalls during the run, not the wall's: {spoiled}; every "
                   "call of A and B paid for it, and the figures above include it")
    elif ((doc or {}).get("host_tracers") or {}).get("why"):
        out.append(f"  programs on raw_syscalls during the run: unknown "
                   f"({doc['host_tracers']['why']})")
    return out


# ---- the architecture hole ----------------------------------------------------------------

# The ways in whose calls seccomp checks as i386: int 0x80 from 64-bit code (the kernel sets
# TS_COMPAT, so syscall_get_arch() says I386 and the number is read from the i386 table), and
# every 32-bit one.  A 64-bit `syscall` or libc call is checked as x86_64.
I386_WAYS = ("64-int80", "32-int80", "32-syscall", "32-sysenter", "32-vdso", "32-libc")
X86_64_WAYS = ("64-syscall", "64-libc")


def arch_hole(progs):
    """The calls the filter stack denies when made natively (x86_64, by their x86-64 number)
    but allows when made by their i386 number as an i386 call: what int 0x80 from 64-bit
    code (or any 32-bit code) can still do.  A filter that checks numbers without checking
    the architecture has this hole; libseccomp's filters check the architecture first.
    {'denied': n, 'holes': [{'name', 'nr_x86_64', 'nr_i386', 'x86_64', 'i386'}],
    'no_i386': [names denied natively that i386 has no number for]}.  The tables are the
    kernel's UAPI headers': no native library."""
    x64, i386 = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_I386
    denied, holes, missing = 0, [], []
    for nr, name in sorted(seccomp.names(x64).items()):
        r64 = seccompsim.run_stack(progs, nr, x64)[0]
        if r64 & seccomp.RET_ACTION_FULL in (seccomp.RET_ALLOW, seccomp.RET_LOG):
            continue
        denied += 1
        nr32 = seccomp.number(name, i386)
        if nr32 is None:
            missing.append(name)
            continue
        r32 = seccompsim.run_stack(progs, nr32, i386)[0]
        if r32 & seccomp.RET_ACTION_FULL in (seccomp.RET_ALLOW, seccomp.RET_LOG):
            holes.append({"name": name, "nr_x86_64": nr, "nr_i386": nr32,
                          "x86_64": seccomp.action_name(r64), "i386": seccomp.action_name(r32)})
    return {"denied": denied, "holes": holes, "no_i386": missing}


def hole_lines(spec, hole):
    """arch_hole's answer in lines, per way in."""
    n = len(hole["holes"])
    if not hole["denied"]:
        return [f"{spec}: it denies no x86-64 call, so it has no hole to find"]
    out = [f"{spec}: of the {hole['denied']} calls it denies by their x86-64 number, "
           + (f"{n} can still be made by their i386 number" if n else
              "none can be made by its i386 number: it checks the architecture")]
    if n:
        eg = ", ".join(f"{h['name']} (i386 {h['nr_i386']}: {h['i386']})"
                       for h in hole["holes"][:6])
        out.append(f"  through {', '.join(I386_WAYS[:1])} (int 0x80 from 64-bit code) and "
                   f"every 32-bit way in ({', '.join(I386_WAYS[1:])}): {eg}"
                   + (", ..." if n > 6 else ""))
        out.append(f"  not through {' or '.join(X86_64_WAYS)}: checked as x86_64, they are "
                   "denied")
    return out


# ---- tw run's walls stage ------------------------------------------------------------------

def analyse(doc):
    """walls.json analysed: {'walls': [{'spec', 'kind', 'rows', 'why', 'lines'}], 'host',
    'headline': {(variant, op): row} of the container profile, 'audit_why'}."""
    from . import compare
    if not doc:
        return None
    out = {"walls": [], "host": doc.get("host") or {}, "full": doc.get("full"),
           "audit_why": doc.get("audit_why"), "headline": {}}
    for w in doc.get("walls") or []:
        entry = {"spec": w.get("spec"), "why": w.get("why"), "rows": [], "lines": [],
                 "kind": (w.get("spec") or "").split(":")[0]}
        if w.get("ab"):
            rows = explain_rows(compare.ab(w["ab"]), w["ab"])
            entry["rows"], entry["lines"] = rows, host_lines(w["ab"])
            if w.get("spec") == HEADLINE_WALL:
                out["headline"] = {(r["variant"], r["op"]): r for r in rows}
        out["walls"].append(entry)
    return out


def added(row):
    """(added ns, low, high) of a row, or None when it has no added figure."""
    a = (row or {}).get("added") or {}
    if a.get("median") is None:
        return None
    return a["median"], a["ci_low"], a["ci_high"]


# ---- tw explain --wall --------------------------------------------------------------------

EXPLAIN_OPS = ("null", "getppid", "write-devnull")


def profile_blueprint(name):
    """A blueprint (as measure.walls.blueprint gives) of one of the project's OCI profiles,
    walls/profiles/NAME.json, read and compiled here as runc compiles it: for the lesson,
    which measures nothing.  It needs libseccomp: machine.seccomp.NoLibseccomp without it,
    which the lesson turns into "unknown" with the reason."""
    import json
    from ..core import paths
    from ..machine import seccompprofile, seccompruntime, sysnr
    path = paths.ROOT / "walls" / "profiles" / f"{name}.json"
    spec, notes = seccompprofile.read(json.loads(path.read_text()))
    f = seccompruntime.compile(spec)
    return {"kind": "seccomp", "spec": f"seccomp:{name}", "program": f.program, "times": 1,
            "rules": [], "source": f"walls/profiles/{name}.json", "notes": notes + f.notes,
            "runtime": f.runtime, "layout": f.layout, "stub": f.stub,
            "table_sizes": sysnr.table_sizes()}


def explain(bp, variants, measured=None, kernel_release=None, host=None):
    """Every way in through one wall (measure.walls.blueprint), for a null call, getppid and a
    write: the path with the numbers (seccomp_chain, audit_chain, the tracer's), and what
    this machine measured behind that wall where a results directory has it (measured:
    analyse() of its walls.json).  For a seccomp filter, also the architecture hole; for
    audit, host: what the host gives a new process (measure.workflags.audit_host)."""
    rows = {}
    for w in (measured or {}).get("walls") or []:
        if w.get("spec") == bp["spec"]:
            rows = {(r["variant"], r["op"]): r for r in w.get("rows") or []}
    prog = seccompsim.load(bp["program"]) if bp.get("program") else None
    out = {"spec": bp["spec"], "kind": bp["kind"], "source": bp.get("source"),
           "instructions": len(prog) if prog else None, "times": bp.get("times"),
           "runtime": bp.get("runtime"), "layout": bp.get("layout"),
           "flag_names": bp.get("flag_names"), "caps": bp.get("caps"),
           "table_sizes": bp.get("table_sizes"), "notes": bp.get("notes") or [],
           "cache": seccomp.kernel_has_cache(kernel_release), "host": host, "paths": []}
    for v in variants:
        for op in EXPLAIN_OPS:
            if op not in registry.get(v).ops:
                continue
            if bp["kind"] == "seccomp":
                c = seccomp_chain(prog, bp["times"], v, op, kernel_release,
                                  bp.get("table_sizes"), None, int(bp.get("stub") or 0),
                                  bp.get("runtime"))
            elif bp["kind"] == "audit":
                c = audit_chain(bp["rules"], v, op, host)
            else:
                c = {"text": TRACER_TEXT}
            m = added(rows.get((v, op)))
            out["paths"].append({"variant": v, "op": op, "chain": c,
                                 "measured": None if m is None else
                                 {"added_ns": m[0], "ci_low": m[1], "ci_high": m[2]}})
    if prog is not None:
        out["hole"] = arch_hole([prog] * bp["times"])
    return out


def explain_lines(e, esc=str):
    """explain()'s answer as text."""
    head = f"Behind {esc(e['spec'])}" + (f" ({esc(e['source'])}" + (
        f", {e['instructions']} BPF instructions" if e.get("instructions") else "") +
        (f", {e['times']} times over" if (e.get("times") or 1) > 1 else "") + ")"
        if e.get("source") else "") + ":"
    out = [head]
    if e.get("runtime"):
        out.append(f"  laid out as {e['runtime']} lays it out: {esc(e.get('layout') or '')}; "
                   f"flags {', '.join(e.get('flag_names') or []) or 'none'}; capabilities "
                   f"assumed: {esc(e.get('caps') or '')}")
        for n in (e.get("notes") or [])[:6]:
            out.append(f"  note: {esc(n)}")
    if e["kind"] == "seccomp":
        t = e.get("table_sizes") or {}
        out.append("  seccomp's constant-action cache (Linux 5.11+): "
                   + ("this kernel has it" if e["cache"] else "this kernel has none")
                   + (f"; its bitmaps cover numbers below {t['x86_64']} (x86-64) and "
                      f"{t['i386']} (i386): {t.get('source')}" if t.get("x86_64") else
                      f"; the tables' sizes are {t.get('source') or 'unknown'}"))
    if e["kind"] == "audit" and e.get("host"):
        h = e["host"]
        out.append(f"  audit here: enabled {h.get('enabled')}; a new process gets "
                   + {True: "an audit context", False: "no audit context",
                      None: "unknown"}[h.get("context")] + f" ({esc(h.get('why') or '')})")
    for p in e["paths"]:
        m = p["measured"]
        cost = (f"measured here: {m['added_ns']:+.1f} ns [{m['ci_low']:+.1f}, "
                f"{m['ci_high']:+.1f}] a call" if m else
                f"not measured here (tw ab --wall {e['spec']})")
        out.append(f"  {p['variant']} {p['op']}: {esc(p['chain']['text']) if p['chain'] else 'no number in its table'}"
                   f"; {cost}")
    if e.get("hole") is not None:
        out += ["  " + esc(x) for x in hole_lines(e["spec"], e["hole"])]
    return out
