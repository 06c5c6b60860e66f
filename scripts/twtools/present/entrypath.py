"""The text of `tw vdso` and `tw classify-libc`: what machine/entrypath.py found, for a person.

Paths and disassembly came from files and processes, so they reach the terminal through
core.escape."""
from ..core.escape import path as epath
from ..core.escape import terminal


def format_vdso(r):
    lines = [f"32-bit vDSO __kernel_vsyscall: {r['instruction'] or 'unknown'}"]
    if r.get("source"):
        lines.append(f"  read from: a stopped {epath(r['source'])} (pid's auxv AT_SYSINFO, "
                     "/proc/<pid>/mem)")
    if r.get("kernel_vsyscall"):
        lines.append(f"  vDSO at {r['vdso_base']}, __kernel_vsyscall at {r['kernel_vsyscall']}, "
                     f"landing pad at {r.get('landing_pad') or 'unknown'}")
    if r.get("disasm"):
        lines.append("  disassembly:")
        for d in r["disasm"]:
            mark = "   <- landing pad" if r.get("landing_pad") and \
                d.startswith(r["landing_pad"][2:].rjust(8, "0")) else ""
            lines.append(f"    {terminal(d)}{mark}")
    if r.get("why"):
        lines.append(f"  why: {terminal(r['why'])}")
    if r.get("vdso64"):
        v = r["vdso64"]
        lines.append("64-bit vDSO: " + (terminal(", ".join(v["symbols"])) if v["symbols"]
                                        else terminal(v["why"])))
    return "\n".join(lines)


def format_libc(r):
    lines = [f"{epath(r['path'])}: {r['entry']}"
             + (f" ({r['bits']}-bit, via {terminal(r['symbol'])})" if r.get("symbol") else "")]
    if r.get("why"):
        lines.append(f"  why: {terminal(r['why'])}")
    for e in r.get("evidence", [])[:12]:
        lines.append(f"  evidence: {terminal(e)}")
    if r.get("chain") and len(r["chain"]) > 1:
        lines.append(f"  followed: {terminal(' -> '.join(r['chain'][:8]))}")
    return "\n".join(lines)
