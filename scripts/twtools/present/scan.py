"""The text of `tw scan`: the readiness answer first, then a table of the ELF files that
matter to it (those that need IA32 emulation or enter the kernel themselves), then a line for
each file that could not be scanned, and what was scanned.

Every path and reason came from the scanned tree, so it reaches the terminal through
core.escape (a file name can hold a newline or an escape sequence)."""
from ..core.escape import path as epath
from ..core.escape import terminal

# The table's columns for the entry kinds, in machine/scan.KINDS order.
KIND_COLUMNS = {"int80": "int80", "sysenter": "sysenter", "syscall": "syscall",
                "vdso32-call": "AT_SYSINFO", "vsyscall-call": "vsyscall"}


def _some(paths, limit):
    shown = ", ".join(epath(p) for p in paths[:limit])
    more = len(paths) - limit
    return shown + (f" and {more} more (--json lists every one)" if more > 0 else "")


def readiness(summary, paths, limit=10):
    """The first lines: what booting with ia32_emulation=0 would stop, plainly either way,
    and the 64-bit programs that use int 0x80."""
    stops, n = summary["needs_ia32"], len(summary["needs_ia32"])
    where = ", ".join(epath(p) for p in paths)
    if stops:
        lines = [f"Booting with ia32_emulation=0 here would stop {n} installed file"
                 f"{'s' if n != 1 else ''} under {where} (i386 programs and libraries): "
                 + _some(stops, limit)]
    else:
        lines = [f"Booting with ia32_emulation=0 here would stop no installed file under "
                 f"{where}: none of its {summary['elf']} ELF files is i386 code"]
    t = summary["int80_in_64bit"]
    if t:
        lines.append(f"int 0x80 in 64-bit code (the 32-bit ABI: every pointer argument is cut "
                     f"to 32 bits): {len(t)} file{'s' if len(t) != 1 else ''}: " + _some(t, limit))
    return lines


def table(records):
    """The files that need IA32 emulation or hold entry sites, as aligned text."""
    rows = [["path", "class", "machine", "type", "IA32"] + list(KIND_COLUMNS.values())]
    for r in sorted(records, key=lambda r: r["path"]):
        if not (r["needs_ia32"] or r["sites"]):
            continue
        cells = [epath(r["path"]), f"{r['bits']}-bit", terminal(r["machine"]), r["type"],
                 "yes" if r["needs_ia32"] else "no"]
        for k in KIND_COLUMNS:
            n = r["sites"].get(k)
            cells.append((str(n) + ("!" if k == "int80" and r["int80_in_64bit"] else ""))
                         if n else "-")
        rows.append(cells)
    if len(rows) == 1:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) if i < 5 else c.rjust(w) for i, (c, w) in
                     enumerate(zip(row, widths))).rstrip() for row in rows]
    if any(r["int80_in_64bit"] for r in records):
        out.append("(! int 0x80 in 64-bit code: pointers cut to 32 bits)")
    return out


def problem(rec):
    return f"cannot scan: {terminal(rec['why'])}"


def summary_line(summary):
    s = summary
    return (f"scanned {s['files']} files ({s['elf']} ELF, {s['bytes'] / 1e6:.1f} MB read) in "
            f"{s['wall_s']:.1f} s with {s['jobs']} job{'s' if s['jobs'] != 1 else ''}; "
            f"{s['links']} symbolic links not followed; "
            + (f"{s['hard_links']} hard links to files already read; " if s.get("hard_links") else "")
            + (f"{s['not_entered_count']} file systems not entered ("
               + ", ".join(terminal(m) for m in s["not_entered"][:5])
               + (", ..." if s["not_entered_count"] > 5 else "")
               + "; --cross-filesystems enters all but the kernel's); " if s.get("not_entered_count") else "")
            + f"{s['problems']} could not be scanned")


def bench(summary, cpu):
    s = summary
    rate = s["bytes"] / 1e6 / s["wall_s"] if s["wall_s"] else None
    return [f"wall time: {s['wall_s']:.2f} s",
            f"files: {s['files']} regular files, {s['elf']} ELF, {s['problems']} not scanned",
            f"bytes read: {s['bytes']} ({s['bytes'] / 1e9:.2f} GB"
            + (f", {rate:.0f} MB/s)" if rate is not None else ")"),
            f"jobs: {s['jobs']}; CPU: {terminal(cpu) or 'unknown'}"]
