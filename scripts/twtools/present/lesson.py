"""`tw lesson`: each way into the kernel stepped through, with this machine's costs and live
evidence, exercises a student checks with one command, and where the machine stands among
the atlas's.  Built as a document.Doc, so that it leaves through the same exporters (and the
same escaping) as every report.

    build(ctx)            the lesson's Doc and {name: svg} of its diagrams
    class_page(students)  the class's Doc over many students' digests, and its plots

ctx: {fp, entries (present.explain.collect), data (the results directory's analysed stages or
None), label (where the costs come from), evidence (measure.lesson.gather), atlas (digests of
data/machines), here (this run's digest or None), host}.
"""
import bisect
import hashlib
import math
import re

from ..analyse import fleet as afleet, percall
from ..machine import mitigations, registry
from . import explain, fleet as pfleet, lessondiagram
from .document import Doc, fmt, outside

# The order a lesson takes: the oldest way in first, then the fast 32-bit instructions, the
# 32-bit vDSO that chooses between them, the 64-bit instruction, the two ways that make no
# system call at all, and the C library that picks one of them for a program.
ORDER = [("int80", 32), ("int80", 64), ("sysenter", 32), ("syscall", 32), ("vdso32-call", 32),
         ("syscall", 64), ("vsyscall-call", 64), ("vdso-call", 64), ("libc", 32), ("libc", 64)]
REF = "64-syscall"


def mechanisms():
    """The registry's mechanisms in the lesson's order (any the order does not name, last)."""
    ms = list(registry.mechanisms())
    rank = {k: i for i, k in enumerate(ORDER)}
    return sorted(ms, key=lambda m: (rank.get((m.entry, m.bits), len(ORDER)), m.name))


def _cell(data, m):
    analysed = (data or {}).get("percall")
    return explain.cost_cell(analysed, m) if analysed else None


def undisturbed(data, m):
    """(figure {median, ci_low, ci_high}, op) of a mechanism's cost cell here, or (None, why)."""
    c = _cell(data, m)
    if c is None:
        return None, "not measured in these results" if data else "no results directory"
    if c.get("supported") is False:
        return None, f"{c.get('status', 'unsupported')}: {c.get('reason')}"
    u = percall.figure(c, "undisturbed")
    return (u, c["op"]) if u else (None, (c.get("undisturbed") or {}).get("why") or "no figure")


def atlas_figure(atlas, m, op):
    """[(machine, value)] of the atlas machines that measured this mechanism's cell."""
    out = []
    for d in atlas or []:
        c = (d.get("cells") or {}).get(f"{m.name} {op}")
        if c and c.get("value") is not None:
            out.append((d.get("machine") or d.get("host"), c))
    return out


def _ns(iv):
    return fmt(iv, "ns") if iv else "unknown"


def _step_ns(step):
    ns = step.get("ns")
    if isinstance(ns, dict) and ns.get("value") is not None:
        return "≈ " + fmt({"median": ns["value"], "ci_low": ns.get("ci_low"),
                            "ci_high": ns.get("ci_high")}, "ns") + " here"
    return None


def chapter_figure(ctx, m):
    """The one line a chapter's diagram ends with: the measured cost here, or why none and the
    atlas machines' figure where the mechanism works."""
    u, op = undisturbed(ctx["data"], m)
    if u:
        ref = (_cell(ctx["data"], registry.get(REF)) or {}) if m.name != REF else {}
        r = percall.figure(ref, "undisturbed") if ref else None
        times = (f", {u['median'] / r['median']:.1f}x the 64-bit syscall"
                 if r and r.get("median") and op == "null" else "")
        return f"measured here: {fmt(u, 'ns')} per {op} call, undisturbed{times}"
    op = "null" if "null" in m.ops else m.ops[0]
    there = atlas_figure(ctx["atlas"], m, op)
    head = f"not measured here ({op})"
    if there:
        name, c = min(there, key=lambda t: t[1]["value"])
        return (f"{head}; on the atlas machine {name}: "
                f"{fmt({'median': c['value'], 'ci_low': c['ci_low'], 'ci_high': c['ci_high']}, 'ns')}"
                f" per {op} call, undisturbed")
    return f"{head}, and on no atlas machine either"


def _evidence(doc, ctx, m, e):
    ev = ctx["evidence"]
    doc.p("**Evidence from this machine** (" + outside(ctx["host"]) + ", just now):")
    if e.get("disasm"):
        doc.p(f"The instructions that enter ({outside(e.get('disasm_source') or 'objdump')}):")
        doc.code("\n".join(outside(x) for x in e["disasm"][:14]))
    if m.entry == "vdso32-call":
        vd = ev.get("vdso32") or {}
        if vd.get("bytes"):
            doc.p(f"The live `__kernel_vsyscall` at {outside(vd.get('kernel_vsyscall'))}, read "
                  f"from a 32-bit process's memory: {outside(vd['bytes'])} "
                  f"({outside(vd.get('instruction'))}; {outside(vd.get('why'))}).")
        else:
            doc.p(f"The live 32-bit vDSO: unknown ({outside(vd.get('why'))}).")
    if m.entry == "vdso-call":
        v6 = ev.get("vdso64") or {}
        if v6.get("bytes"):
            doc.p(f"The live 64-bit vDSO's {outside(v6['function'])} at "
                  f"{outside(v6.get('address'))}, read from this process's memory: "
                  f"{outside(v6['bytes'])} …: ordinary code, no `syscall` (0f 05) on its fast "
                  "path.")
        else:
            doc.p(f"The live 64-bit vDSO: unknown ({outside(v6.get('why'))}).")
    pti = mitigations_on_path(ctx, m)
    if pti:
        doc.p(pti)
    st = (ev.get("strace") or {}).get(m.name) or {}
    if st.get("line"):
        doc.p("strace's line for the call:" + ("" if st.get("calls") else
                                               f" the call never happened ({outside(st.get('why'))})"))
        doc.code(outside(st["line"]))
    else:
        doc.p(f"strace: {outside(st.get('why') or 'not run')}.")
    rv = (ev.get("events") or {}).get(m.name) or {}
    if rv.get("id") is not None:
        doc.p(f"`raw_syscalls:sys_enter` saw id **{rv['id']}**: {outside(rv.get('call'))} in the "
              f"**{rv['abi']}** table" + (", and the kernel marked the call compat (TS_COMPAT)"
                                          if rv.get("compat") else ", a native call") + ".")
    else:
        doc.p(f"`raw_syscalls:sys_enter`: {outside(rv.get('why') or 'not traced')}.")
    doc.p(f"The cost: {outside(e.get('cost') or 'unknown')}.")


def mitigations_on_path(ctx, m):
    """What this kernel's mitigations add to a path that enters it, from the fingerprint read
    through the kernel's own strings (machine/mitigations.py): each piece of work once, where
    it runs.  None for a path with no kernel entry, or where none is in force."""
    if m.entry in ("vdso-call",):
        return None
    fp = ((ctx["data"] or {}).get("fingerprint")) or ctx["fp"] or {}
    live = [x for x in mitigations.in_force(fp.get("mitigations") or {}) if x["on_path"]]
    if not live:
        return None
    return ("On this path here, from the kernel's mitigations: " +
            "; ".join(f"{x['what']} ({x['where_text']}; {', '.join(x['files'])})" for x in live)
            + ".")


def build(ctx):
    doc, svgs = Doc(), {}
    # the machine the costs were measured on, as its fingerprint recorded it; else this one
    fp = ((ctx["data"] or {}).get("fingerprint")) or ctx["fp"] or {}
    cpu = fp.get("cpu") or {}
    kernel = (fp.get("kernel") or {}).get("release")
    doc.h(1, "How this machine enters the kernel: a lesson")
    doc.p(f"Machine: {outside(ctx['host'])}, {outside(cpu.get('model_name') or 'unknown CPU')} "
          f"(family {outside(cpu.get('family'))}, model {outside(cpu.get('model'))}), Linux "
          f"{outside(kernel)}, {outside(fp.get('virtualization') or 'no hypervisor seen')}. "
          f"Costs from {outside(ctx['label'])}.")
    doc.p("Each chapter follows one way from a user program into the kernel and back: the "
          "instruction, what the CPU does, the kernel's entry code, its C handler, the system "
          "call table, the way back. The diagrams are drawn from this kernel's facts; a red "
          "figure is this machine's measured cost. Predict before you open an answer, then "
          "check it with the command given. The reference for every step is "
          "docs/mechanisms.md.")
    entries = {e["variant"]: e for e in ctx["entries"]}
    glance(doc, ctx, entries)
    for n, m in enumerate(mechanisms(), 1):
        e = entries.get(m.name) or {}
        doc.h(2, f"{n}. {outside(e.get('title') or m.name)} ({m.name})")
        works = e.get("works")
        if works is False:
            doc.p(f"**Not on this machine:** {outside(e.get('why') or e.get('needs'))}. The "
                  "chapter shows what the kernel would do, and the atlas machines where it works.")
        elif works is None:
            doc.p(f"Whether it works here is unknown: {outside(e.get('why') or e.get('needs'))}.")
        if e.get("kernel"):
            doc.p(outside(e["kernel"]))
        ch = e.get("chain") or {"steps": [], "figures": []}
        name = f"lesson-{m.name}"
        figure = chapter_figure(ctx, m)
        svgs[name] = lessondiagram.svg(f"{m.name}: {e.get('title') or m.name}", ch["steps"],
                                       figure, _step_ns)
        doc.figure(name, f"{m.name}, step by step on Linux {outside(kernel)}: {outside(figure)}")
        for f in ch.get("figures") or []:
            doc.p(outside(f))
        _evidence(doc, ctx, m, e)
    walls_chapter(doc, ctx, len(mechanisms()) + 1)
    kernel_chapter(doc, ctx, len(mechanisms()) + 2)
    exercises(doc, ctx)
    atlas_section(doc, ctx)
    return doc, svgs


def walls_chapter(doc, ctx, n):
    """The walls: a filter, audit or a tracer between a program and the kernel, each way in
    through the project's container profile with this kernel's path and this machine's figures,
    and the architecture hole (analyse.walls)."""
    import platform
    from ..analyse import walls as a_walls
    from ..machine import seccomp, seccompsim
    doc.h(2, f"{n}. Walls: what stands between a program and the kernel")
    doc.p("Every way in above has a fast path: the entry code goes straight from the "
          "instruction to the system call table and back. A process that runs behind a wall "
          "has a SYSCALL_WORK flag set (SECCOMP for a seccomp filter, SYSCALL_AUDIT for an "
          "audit context, SYSCALL_TRACEPOINT while any program is attached to raw_syscalls), "
          "and every one of its calls then goes through syscall_trace_enter() on the way in "
          "and syscall_exit_work() on the way out. What the wall does there is its own price: "
          "seccomp fills struct seccomp_data and, unless its cache already allows the call, "
          "runs the filter; audit fills its context and looks through its rules; a tracer runs "
          "its programs. Container runtimes put a seccomp profile around every container.")
    try:
        bp = a_walls.profile_blueprint("container")
    except seccomp.NoLibseccomp as e:
        bp = None
        doc.p(outside(f"The project's container profile through each way in: unknown here: {e}."))
    if bp is not None:
        _profile_paths(doc, a_walls, bp, ctx, platform.release())
    hole = a_walls.arch_hole([seccompsim.parse(seccomp.NUMBERS_ONLY)])
    doc.p("The architecture hole. seccomp hands the filter the call's number and its "
          "architecture: int 0x80 from 64-bit code is an i386 call with an i386 number. A "
          "filter that compares numbers without loading the architecture first denies the call "
          "under its x86-64 number only: " + outside(" ".join(
              x.strip() for x in a_walls.hole_lines("seccomp:numbers-only", hole)))
          + " libseccomp, and so every container runtime, checks the architecture first.")
    doc.p(_check("scripts/tw explain --wall seccomp:numbers-only"))
    doc.p(_check("scripts/tw ab --quick --wall seccomp:container --variants 64-syscall,32-int80 "
                 "--ops getppid"))


def kernel_chapter(doc, ctx, n):
    """Why the same CPU can cost more after a kernel update: the atlas's clearest pair
    (analyse/atlas.kernel_update), the base fitted apart from a change of speed, what changed
    and where its work runs, and why a ratio to the 64-bit syscall misleads."""
    doc.h(2, f"{n}. Why the same CPU can cost more after a kernel update")
    ku = ctx.get("kernel_update")
    doc.p("A kernel is not only its version. Two builds of one version can choose different "
          "mitigations for the same CPU: each one the kernel turns on adds its work somewhere "
          "on the path you followed above, and work added on every entry or every exit is paid "
          "by every way in alike, as a constant, not as a slower CPU.")
    if not ku:
        doc.p("The atlas (data/machines) holds no CPU model measured under two kernels whose "
              "base moved: nothing to show from recorded runs here.")
        return
    a, b, base = ku["a"], ku["b"], ku["base"]
    fa, fb = a["facts"], b["facts"]
    doc.p(f"The recorded case: {outside(fa['cpu_name'])} ({outside(fa['vendor'])}, "
          f"{outside(fa['cpu'])}, {outside(fa['hypervisor'])}), measured under kernel "
          f"{outside(fa['kernel'])} and again under {outside(fb['kernel'])}, on the same CPU "
          "model:")
    rows = []
    for v in ("64-syscall", "32-vdso", "32-syscall", "64-int80", "32-int80"):
        ca, cb = (a["cells"].get(f"{v} null"), b["cells"].get(f"{v} null"))
        if not ca or not cb or ca.get("value") is None or cb.get("value") is None:
            continue
        rows.append([v, f"{ca['value']:.0f} ns", f"{cb['value']:.0f} ns",
                     f"{cb['value'] - ca['value']:+.0f} ns",
                     f"{ca['value'] / a['cells']['64-syscall null']['value']:.1f}× → "
                     f"{cb['value'] / b['cells']['64-syscall null']['value']:.1f}×"])
    doc.table(["way in (null call)", outside(fa["kernel"]), outside(fb["kernel"]),
               "difference", "× its run's 64-bit syscall"], rows)
    changed = [f for f in ku["facts_changed"] if f.get("work")]
    if changed:
        doc.p("What changed between the two builds, read from each run's "
              "/sys/devices/system/cpu/vulnerabilities through the kernel's own strings: " +
              "; ".join(f"{outside(f['fact'])}: \"{outside(f['a'])}\" → \"{outside(f['b'])}\" "
                        f"({outside(f['work'])})" for f in changed) + ".")
    doc.p("Fitted over every kernel-entering cell of both runs as later = speed × earlier + "
          f"added (each run's VM exits taken out at its own price): {outside(base['sentence'])}.")
    prem = [(v, p) for v, op, size, p in ku["premiums"] if op == "null" and "int80" in v]
    for v, p in prem:
        doc.p(f"What {v} adds over its baseline ({p['over']}), with its VM exit taken out: "
              f"{outside(p['sentence'])}.")
    doc.p("Read as ratios, the same runs say something false. The 64-bit syscall's null call "
          "is the usual unit (the \"×\" column): it grew by the added ns, so int 0x80's multiple "
          "of it fell from one run to the next as if int 0x80 had become faster. What int 0x80 "
          "adds over its baseline barely moved (above): every way in paid about the same added "
          "ns. A change of speed scales every cost; work on every entry or exit adds the same ns "
          "to each. `tw compare` fits the two apart.")
    ins = (((ctx.get("data") or {}).get("legs") or {}).get("instructions") or {}).get("verw") or {}
    doc.p("Where the added ns go: the change recorded between the builds puts a VERW before "
          "every sysret and iret to user space (CLEAR_CPU_BUFFERS). A VERW timed from user space "
          "is a lower bound of the kernel's (the legs stage times it"
          + (f"; on this machine {ins['value']:.1f} ns" if ins.get("value") is not None else "")
          + "): if the added ns are many times that, the kernel's VERW costs more where a "
          "system call's work fills the buffers it clears, or the build changed more than its "
          "verdicts say. That part is not explained by these measurements.")
    doc.details("Exercise: predict before you check",
                "If a kernel adds 240 ns to every entry, and int 0x80 costs 1500 ns against the "
                "fast path's 160 ns, what happens to int 0x80's multiple of the fast path? "
                "Answer: it falls from about 9.4× to about 4.4×, though int 0x80's own work did "
                "not change: (1500 + 240) / (160 + 240).")
    runs = [f"data/machines/{d['machine']}/runs/{d['run']}" for d in (a, b)]
    if all(re.fullmatch(r"[A-Za-z0-9_./:-]+", r) for r in runs):   # the atlas's own names
        doc.p(_check("scripts/tw compare " + " ".join(runs)))
    here = mitigations.in_force(((ctx.get("data") or {}).get("fingerprint") or ctx.get("fp")
                                 or {}).get("mitigations") or {})
    verw = [x for x in here if x.get("instruction") == "verw" and "exit" in x["where"]]
    doc.p("On this machine: " + (
        "its kernel runs " + outside("; ".join(f"{x['what']} (asked for by {', '.join(x['files'])})"
                                               for x in verw)) + "." if verw else
        "its kernel runs no VERW on the way out to user space (no file in "
        "/sys/devices/system/cpu/vulnerabilities asks for it here)."))


def _profile_paths(doc, a_walls, bp, ctx, release):
    """Each way in through the container profile, as runc lays it out, with this machine's
    figures."""
    e = a_walls.explain(bp, [v for v in ("64-syscall", "64-int80", "32-int80")
                             if v in registry.names()],
                        (ctx.get("data") or {}).get("walls"), release)
    rows = []
    for p_ in e["paths"]:
        m = p_["measured"]
        rows.append([p_["variant"], p_["op"], outside(p_["chain"]["text"]) if p_["chain"] else "—",
                     f"{m['added_ns']:+.1f} ns [{m['ci_low']:+.1f}, {m['ci_high']:+.1f}]" if m
                     else "not measured in these results"])
    doc.p(f"Through the project's container profile (walls/profiles/container.json, "
          f"{e['instructions']} BPF instructions once libseccomp has compiled it as runc does), "
          f"on this kernel{' (which has seccomp’s cache)' if e['cache'] else ''}:")
    doc.table(["way in", "call", "its path through the wall", "what the wall adds here"], rows)


def glance(doc, ctx, entries):
    """The first screen: every mechanism, whether it runs here, and what it costs."""
    ref = _cell(ctx["data"], registry.get(REF)) or {}
    r = percall.figure(ref, "undisturbed") if ref else None
    rows = []
    for n, m in enumerate(mechanisms(), 1):
        e = entries.get(m.name) or {}
        u, op = undisturbed(ctx["data"], m)
        works = {True: "yes", False: "no", None: "unknown"}[e.get("works")]
        # a multiple of the reference's null call only for a null call: the clock reads
        # (gettimeofday) are other work
        rows.append([f"{n}. {m.name}", works, f"{fmt(u, 'ns')} ({op})" if u else "—",
                     f"{u['median'] / r['median']:.1f}x" if u and op == "null" and r
                     and r.get("median") else "—"])
    doc.p("At a glance (the chapters below explain each row):")
    doc.table(["mechanism", "runs here", "cost here, undisturbed", "× 64-bit syscall"], rows)


def _check(cmd):
    return f"Check: `{cmd}`"


def exercise_list(ctx):
    """[(question, answer, check command)], each computed from this machine."""
    out = []
    data, ev = ctx["data"], ctx["evidence"]
    i80 = registry.find(32, "int80")
    u, op = undisturbed(data, registry.get(i80)) if i80 else (None, "no 32-bit int 0x80")
    if u and op == "null" and "getppid" in registry.get(i80).ops:
        c = percall.find((data or {}).get("percall"), i80, "getppid")
        g = percall.figure(c, "undisturbed") if c else None
        u, op = (g, "getppid") if g else (u, op)
    if u:
        per_s = 1e9 / u["median"]
        out.append((f"Predict how many int 0x80 {op} calls one core can make per second here.",
                    f"About {per_s / 1e6:.2f} million: 1 s / {u['median']:.0f} ns (the undisturbed "
                    f"cost, 95% interval {u['ci_low']:.0f}–{u['ci_high']:.0f} ns, so "
                    f"{1e3 / u['ci_high']:.2f}–{1e3 / u['ci_low']:.2f} million).",
                    f"scripts/tw bench --quick --variants {i80} --ops {op}"))
    else:
        out.append(("Predict how many int 0x80 getppid calls one core can make per second here.",
                    f"Unknown from these results ({op}): measure it with the check command.",
                    f"scripts/tw bench --quick --variants {i80 or '32-int80'} --ops getppid"))
    procs = ev.get("ia32_processes") or []
    names = ", ".join(f"{p['comm']} (pid {p['pid']})" for p in procs[:8])
    out.append(("Which of this machine's running programs would booting with ia32_emulation=0 "
                "stop?",
                (f"{len(procs)} running now: {names}." if procs else
                 "None were running when this page was made: no process needed IA32 emulation "
                 "(a 64-bit program that enters by int 0x80 would also stop; the census sees "
                 "those too)."),
                "scripts/tw census --seconds 2"))
    cz = ((data or {}).get("causes") or {})
    price = cz.get("exit_price_ns") or {}
    m80 = (cz.get("mechanisms") or {}).get(i80) or {}
    epc = m80.get("exits_per_call") or {}
    if epc.get("value") is not None and price.get("value") is not None:
        out.append(("How many VM exits does one int 0x80 call cost here, and why?",
                    f"{epc['value']:.2f} [{epc.get('ci_low', float('nan')):.2f}, "
                    f"{epc.get('ci_high', float('nan')):.2f}] exits at {price['value']:.0f} ns "
                    "each: since Linux 6.7 every int 0x80 reads the local APIC "
                    "(int80_is_external()), and this host does not virtualise that read.",
                    "scripts/tw explain --json"))
    else:
        why = price.get("why") or epc.get("why") or "no cost model in these results"
        out.append(("How many VM exits does one int 0x80 call cost here?",
                    f"Unknown from these results: {why}.", "scripts/tw explain --json"))
    vd = ev.get("vdso32") or {}
    out.append(("Which instruction does the 32-bit vDSO's __kernel_vsyscall use here, and why "
                 "that one?",
                 (f"{vd.get('instruction')}: its bytes are {vd.get('bytes')}; {vd.get('why')}."
                  if vd.get("instruction") else f"Unknown: {vd.get('why')}."),
                 "scripts/tw vdso"))
    rv = (ev.get("events") or {}).get(registry.find(64, "int80") or "64-int80") or {}
    out.append(("A 64-bit program executes int 0x80 with eax = 64. Which system call runs?",
                (f"getppid: int 0x80 always reads the i386 table, whatever the caller's bits "
                 f"(raw_syscalls saw id {rv['id']} in the {rv['abi']} table here, compat "
                 f"{'set' if rv.get('compat') else 'clear'}); in the x86_64 table 64 is semget."
                 if rv.get("id") is not None else
                 f"getppid, from the i386 table (not traced here: {rv.get('why')})."),
                 "strace -f -e trace=getppid build/syscost-64-int80 --op getppid --calls 2 "
                 "--batches 1"))
    return out


def exercises(doc, ctx):
    doc.h(2, "Exercises")
    doc.p("Each answer comes from this machine. Write your prediction down first.")
    for i, (q, a, cmd) in enumerate(exercise_list(ctx), 1):
        doc.p(f"**{i}.** {outside(q)}")
        doc.details("Answer", outside(a))
        doc.p(_check(cmd))


def atlas_section(doc, ctx):
    doc.h(2, "This machine among the atlas's")
    atlas = ctx["atlas"] or []
    if not atlas:
        doc.p("The atlas (data/machines) holds no machine this checkout can read.")
        return
    names = [str(d.get("machine")) + "/" + str(d.get("run", ""))[:12] for d in atlas]
    rows = []
    for m in mechanisms():
        op = "null" if "null" in m.ops else m.ops[0]
        u, _ = undisturbed(ctx["data"], m)
        line = [m.name, op, fmt(u, "ns") if u and _ == op else "—"]
        for d in atlas:
            c = (d.get("cells") or {}).get(f"{m.name} {op}")
            line.append(f"{c['value']:.0f}" if c and c.get("value") is not None else "—")
        rows.append(line)
    doc.p("The undisturbed cost of each mechanism's cheapest call, in ns: this machine first, "
          "then every atlas run (a dash where a mechanism does not run or was not measured).")
    doc.table(["mechanism", "op", "here"] + [outside(n) for n in names], rows)


# -- the class -------------------------------------------------------------------------------

def _log(x):
    return math.log10(max(x, 1e-9))


def strip_svg(title, points, mark=None):
    """A strip plot, one row per mechanism: each student a dot on a log axis, `mark` (a
    student's label) drawn larger and red."""
    rows = sorted({m for m, _, _ in points}, key=lambda n: [x.name for x in mechanisms()].index(n)
                  if n in [x.name for x in mechanisms()] else 99)
    vals = [v for _, _, v in points if v and v > 0]
    if not vals:
        return None
    lo, hi = _log(min(vals)) - 0.1, _log(max(vals)) + 0.1
    W, L, R, RH = 1000, 130, 30, 30
    H = 60 + RH * len(rows) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" '
           f'height="{H}" font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="10" y="22" font-size="15" font-weight="bold">{lessondiagram._t(title)}</text>']

    def X(v):
        return L + (W - L - R) * (_log(v) - lo) / (hi - lo)
    for k in range(int(math.floor(lo)), int(math.ceil(hi)) + 1):
        for f in (1, 2, 5):
            v = f * 10 ** k
            if lo <= _log(v) <= hi:
                out.append(f'<line x1="{X(v):.1f}" y1="40" x2="{X(v):.1f}" y2="{H - 34}" '
                           'stroke="#eee"/>')
                out.append(f'<text x="{X(v):.1f}" y="{H - 18}" text-anchor="middle" '
                           f'font-size="10">{v:g}</text>')
    out.append(f'<text x="{W / 2}" y="{H - 4}" text-anchor="middle" font-size="11">ns per call, '
               'undisturbed (log scale)</text>')
    for i, r in enumerate(rows):
        y = 56 + RH * i
        out.append(f'<text x="8" y="{y + 4}">{lessondiagram._t(r)}</text>')
        for m, who, v in points:
            if m != r or not v or v <= 0:
                continue
            if who == mark:
                continue
            out.append(f'<circle cx="{X(v):.1f}" cy="{y}" r="4" fill="#2b6cb0" '
                       'fill-opacity="0.55"/>')
        for m, who, v in points:
            if m == r and who == mark and v and v > 0:
                out.append(f'<circle cx="{X(v):.1f}" cy="{y}" r="7" fill="#c53030" '
                           'stroke="#000"/>')
    if mark:
        out.append(f'<text x="{W - 10}" y="22" text-anchor="end" fill="#c53030">● '
                   f'{lessondiagram._t(mark)} (you)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


GROUP_BY = ("vendor", "cpu", "hypervisor", "kernel", "vdso", "fred")
INT80_COL = "32-int80 null"
QUANTILES = (0, 0.25, 0.5, 0.75, 1)


def class_cause(m, travel):
    """The class page's opening sentence: why int 0x80's cost differs between the machines,
    from the fleet ranking's exit-price entry m (analyse.fleet.rank), or None without one."""
    if not m:
        return None
    s = (f"**Why int 0x80's cost differs between these machines: the price of one VM exit.** "
         f"It costs {m['low']['ratio']:.1f}× the 64-bit `syscall` where one exit costs "
         f"{m['low']['value']} ({m['low']['n']} machine{'s' if m['low']['n'] != 1 else ''}) and "
         f"{m['high']['ratio']:.1f}× where it costs {m['high']['value']} ({m['high']['n']} "
         f"machine{'s' if m['high']['n'] != 1 else ''}); the exit price accounts for "
         f"{100 * max(m['eta2'], 0):.0f}% of the spread over the {m['n']} machines that priced "
         "one (`cpuid`).")
    if travel:
        s += (f" The {' and the '.join(travel)} only travel{'s' if len(travel) == 1 else ''} "
              "with it (grouped below).")
    return s


def _points(students):
    """[(mechanism, label, ns)] of every student's cell of each mechanism's first op."""
    pts = []
    for s in students:
        for m in mechanisms():
            op = "null" if "null" in m.ops else m.ops[0]
            c = (s["digest"].get("cells") or {}).get(f"{m.name} {op}")
            if c and c.get("value"):
                pts.append((m.name, s["label"], c["value"]))
    return pts


def _median_ratio(ss):
    r = [(x["digest"].get("cells") or {}).get(INT80_COL) for x in ss]
    r = sorted(c["ratio"] for c in r if c and c.get("ratio"))
    return f"{r[len(r) // 2]:.1f}x" if r else "—"


def _group_row(k, ss):
    return [outside(k), len(ss), _median_ratio(ss),
            ", ".join(outside(x["label"]) for x in ss[:6]) + (" …" if len(ss) > 6 else "")]


def class_summary(students, pts=None):
    """What the class page and every student's page show of the class, computed once: each
    mechanism's sorted figures and quantiles, the fleet ranking's cause of the int 0x80
    spread, the machines grouped by exit price and by each fact that differs."""
    pts = _points(students) if pts is None else pts
    dist = {}
    for m in mechanisms():
        v = sorted(x for n, _, x in pts if n == m.name)
        if v:
            dist[m.name] = (v, [v[int(round(p * (len(v) - 1)))] for p in QUANTILES])
    digests = [s["digest"] for s in students]
    view = afleet.view(digests, [], "null") if len(digests) > 1 else {"explain": []}
    travel = pfleet.travel_facts(view).get(INT80_COL, [])
    cause = next((e for e in view["explain"] if e.get("kind") == "measured"
                  and e["column"] == INT80_COL), None)
    buckets = afleet.exit_buckets(digests)
    exit_of = {h: afleet.bucket_label(b) for b in buckets for h in b["hosts"]}
    by_exit = {}
    if buckets:
        for s in students:
            by_exit.setdefault(exit_of.get(s["digest"]["host"], afleet.NOT_PRICED), []).append(s)
    facts = {}
    for key in GROUP_BY:
        groups = {}
        for s in students:
            groups.setdefault(str((s["digest"].get("facts") or {}).get(key)), []).append(s)
        if len(groups) >= 2:
            facts[key] = groups
    return {"n": len(students), "dist": dist, "cause": cause, "travel": travel,
            "why": class_cause(cause, travel), "exit_order": [afleet.bucket_label(b) for b in
                                                             buckets] + [afleet.NOT_PRICED],
            "exit_of": exit_of, "by_exit": by_exit, "facts": facts}


def _row(s, you=False):
    f = s["digest"].get("facts") or {}
    c = (s["digest"].get("cells") or {}).get(INT80_COL)
    return [("**you** " if you else "") + outside(s["label"]),
            pfleet.exit_text(s["digest"]).replace(" exits per int 0x80 call", " exits/call"),
            outside(f.get("cpu_name")), outside(f.get("hypervisor")), outside(f.get("kernel")),
            f"{c['value']:.0f}" if c and c.get("value") else "—", outside(s.get("page") or "—")]


ROW_HEAD = ["student", "exit price", "CPU", "hypervisor", "kernel", "32-int80 null (ns)", "page"]


def class_page(students, refused, mark=None, summary=None):
    """(Doc, {name: svg}) of the class: the distribution per mechanism, the machines grouped by
    the measured cause then by what differs, and one row per student.  mark: the student (a
    dict of students) whose page this is: their page holds the class's distribution as numbers
    and five dots per mechanism (the minimum, quartiles and maximum) beside their own, their
    groups and their row, a size that does not grow with the class (the whole class is on
    index.html); summary: class_summary(students), computed once for every page."""
    pts = _points(students) if summary is None else None
    summary = summary or class_summary(students, pts)
    if mark is not None:
        return _student_page(refused, mark, summary)
    doc, svgs = Doc(), {}
    doc.h(1, "The class: how each student's machine enters the kernel")
    doc.p(f"{len(students)} machines" + (f"; {len(refused)} results directories refused "
                                          "(listed at the end)" if refused else "") + ".")
    if summary["why"]:
        doc.p(summary["why"])
    svg = strip_svg("Every student's machine, by mechanism", pts or _points(students))
    if svg:
        svgs["class-strip"] = svg
        doc.figure("class-strip", "Each dot is one student's machine")
    doc.table(["mechanism", "machines", "min", "25%", "median", "75%", "max"],
              [[m, len(v)] + [f"{x:.0f}" for x in q] for m, (v, q) in summary["dist"].items()])
    # groups: by the measured cause first (the price of one VM exit, bucketed with its
    # intervals: analyse.fleet.exit_buckets), then by the fingerprint facts that differ, each
    # said to only travel with the price where the fleet's ranking finds so (analyse.fleet.rank)
    doc.h(2, "Machines grouped by the measured cause, then by what differs")
    head = ["machines", "int 0x80 null / 64-bit syscall (median)", "students"]
    cause, travel, by_exit = summary["cause"], summary["travel"], summary["by_exit"]
    if by_exit:
        doc.p("By **the price of one VM exit** (`cpuid`, measured on each machine; prices whose "
              "95% intervals overlap, or within 10% of each other, share a row). Int 0x80 pays "
              "one exit per call on a guest whose kernel reads the APIC on every call (each "
              "student's report, \"Why each way costs what it does here\"):")
        doc.table(["exit price"] + head, [_group_row(k, by_exit[k]) for k in summary["exit_order"]
                                          if k in by_exit])
        if cause:
            doc.p(f"The exit price accounts for {100 * max(cause['eta2'], 0):.0f}% of the spread "
                  f"of int 0x80's ratio over the {cause['n']} machines that priced one.")
    else:
        doc.p("No machine here priced a VM exit (no `cpuid` cell: measured before it existed), "
              "so the measured cause cannot group them; by what differs instead:")
    for key, groups in summary["facts"].items():
        name = afleet.FACT_NAMES[key]
        doc.p(f"By **{name}**" + (": not a cause of the int 0x80 spread of its own: beyond "
                                  "the exit price it explains next to nothing (it only travels "
                                  "with the price, or machines that share it differ in price; "
                                  "`tw fleet` names the machines that tell them apart)"
                                  if name in travel else "") + ":")
        doc.table([name] + head, [_group_row(k, ss) for k, ss in sorted(groups.items())])
    doc.h(2, "Every student")
    doc.table(ROW_HEAD, [_row(s) for s in students])
    for r in refused:
        doc.p(f"Refused: {outside(r['host'])}: {outside(r['why'])}.")
    return doc, svgs


def _student_page(refused, s, summary):
    label = s["label"]
    doc, svgs = Doc(), {}
    doc.h(1, f"The class: how each student's machine enters the kernel ({outside(label)}'s page)")
    doc.p(f"{summary['n']} machines" + (f"; {len(refused)} results directories refused"
                                         if refused else "")
          + ". Every student's machine, and every group, is on the class's page, `index.html`.")
    if summary["why"]:
        doc.p(summary["why"])
    mine = {m: x for m, _, x in _points([s])}
    pts = [(m, None, x) for m, (_, q) in summary["dist"].items() for x in q]
    pts += [(m, label, x) for m, x in mine.items()]
    svg = strip_svg("The class (minimum, quartiles, maximum) and your machine", pts, label)
    if svg:
        name = f"class-strip-{hashlib.sha1(label.encode()).hexdigest()[:10]}"
        svgs[name] = svg
        doc.figure(name, "The blue dots are the class's minimum, quartiles and maximum; the red "
                   f"one is {outside(label)}'s")
    rows = []
    for m, (v, q) in summary["dist"].items():
        x = mine.get(m)
        below = "—" if x is None else f"{100 * bisect.bisect_left(v, x) / len(v):.0f}%"
        rows.append([m, len(v)] + [f"{y:.0f}" for y in q]
                    + [f"{x:.0f}" if x is not None else "—", below])
    doc.table(["mechanism", "machines", "min", "25%", "median", "75%", "max", "you",
               "class below you"], rows)
    doc.h(2, "Your machine's groups")
    gr = []
    if summary["by_exit"]:
        k = summary["exit_of"].get(s["digest"]["host"], afleet.NOT_PRICED)
        ss = summary["by_exit"].get(k) or []
        gr.append(["exit price", outside(k), len(ss), _median_ratio(ss)])
    for key, groups in summary["facts"].items():
        k = str((s["digest"].get("facts") or {}).get(key))
        ss = groups.get(k) or []
        gr.append([afleet.FACT_NAMES[key], outside(k), len(ss), _median_ratio(ss)])
    if gr:
        doc.table(["what", "yours", "machines sharing it", "int 0x80 null / 64-bit syscall "
                   "(their median)"], gr)
    else:
        doc.p("Every machine of the class has the same facts, and none priced a VM exit.")
    doc.h(2, "You")
    doc.table(ROW_HEAD, [_row(s, you=True)])
    return doc, svgs
