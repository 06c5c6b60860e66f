"""One way into the kernel as a sequence diagram (SVG), drawn from its chain
(present.chains: the steps this machine's kernel takes) and this machine's figures.

Columns are where a step runs: user code, the CPU, the kernel's entry code, its C handler,
the system call table, and the hypervisor when a step exits to it.  Each step is a dot in its
column, joined to the next, with what happens, the kernel function and source file, and the
step's cost where the cost model prices it, written to the right.  The footer carries the
measured cost of the whole call.  Every string is XML-escaped: a step may quote the
fingerprint (a kernel release) or a reason read from a file.
"""
import html

LANES = ("user code", "CPU", "kernel entry", "C handler", "system call", "hypervisor")
W, LANE_W, TOP, ROW = 1000, 58, 74, 50
TEXT_X = 40 + LANE_W * len(LANES) + 16
COLOURS = ("#2b6cb0", "#6b46c1", "#c05621", "#2f855a", "#b7791f", "#c53030")


def lane(step):
    """The column a chain step runs in."""
    s, k = step.get("step", ""), str(step.get("kernel") or "")
    low = (s + " " + k).lower()
    if "hypervisor" in k.lower() or "vm exit" in s.lower():
        return 5
    if k.startswith("the CPU"):
        return 1
    if k in ("libc", "user space") or "vdso" in k.lower() and "entry" not in k:
        return 0
    if "table" in s or "sys_call" in k:
        return 4
    if "back to user" in low or "back to the caller" in low or "sysret" in low:
        return 2           # the entry code's own exit path returns
    if ".S" in k or k.startswith(("entry_", "asm_", "fred_entry")) or "idt vector" in low:
        return 2
    return 3


def _t(x):
    return html.escape(str(x), quote=True)


def _wrap(text, width=92):
    words, lines, cur = str(text).split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    if cur:
        lines.append(cur)
    return lines[:3]


def svg(title, steps, figure, ns_text=None):
    """The diagram as an SVG document.  steps: a chain's [{step, kernel, ns, note}]; figure:
    the call's measured cost as one line; ns_text(step) gives a step's priced figure or None."""
    used = sorted({lane(s) for s in steps} | {0})
    rows = []
    y = TOP
    for s in steps:
        lines = _wrap(s.get("step", "").replace("`", ""))
        k = str(s.get("kernel") or "")
        cost = ns_text(s) if ns_text else None
        h = max(ROW, 16 * (len(lines) + 1) + 10 + (16 if cost else 0))
        rows.append((s, lines, k, cost, y, h))
        y += h
    height = y + 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" '
           f'width="{W}" height="{height}" font-family="sans-serif" font-size="13">',
           f'<title>{_t(title)}</title>',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="12" y="24" font-size="16" font-weight="bold">{_t(title)}</text>']
    for i in used:
        x = 40 + LANE_W * i
        out.append(f'<line x1="{x}" y1="{TOP - 22}" x2="{x}" y2="{y}" stroke="#ddd"/>')
        out.append(f'<text x="{x}" y="{TOP - 28}" font-size="10" text-anchor="middle" '
                   f'fill="{COLOURS[i]}">{_t(LANES[i])}</text>')
    prev = None
    for s, lines, k, cost, top, h in rows:
        i = lane(s)
        x, cy = 40 + LANE_W * i, top + 12
        if prev:
            out.append(f'<line x1="{prev[0]}" y1="{prev[1]}" x2="{x}" y2="{cy}" '
                       'stroke="#555" stroke-width="1.5"/>')
        out.append(f'<circle cx="{x}" cy="{cy}" r="6" fill="{COLOURS[i]}"/>')
        ty = top + 16
        for j, ln in enumerate(lines):
            bold = ' font-weight="bold"' if j == 0 else ""
            out.append(f'<text x="{TEXT_X}" y="{ty + 16 * j}"{bold}>{_t(ln)}</text>')
        ty += 16 * len(lines)
        out.append(f'<text x="{TEXT_X}" y="{ty}" font-size="11" fill="#666">{_t(k)}</text>')
        if cost:
            out.append(f'<text x="{TEXT_X}" y="{ty + 16}" font-size="12" fill="#c53030" '
                       f'font-weight="bold">{_t(cost)}</text>')
        prev = (x, cy)
    # back in user code: the call returns where it was made
    if prev:
        out.append(f'<line x1="{prev[0]}" y1="{prev[1]}" x2="40" y2="{y + 6}" stroke="#555" '
                   'stroke-width="1.5" stroke-dasharray="4 3"/>')
        out.append(f'<circle cx="40" cy="{y + 6}" r="6" fill="{COLOURS[0]}"/>')
        out.append(f'<text x="{TEXT_X}" y="{y + 10}" font-weight="bold">back in user code, '
                   'with the result in eax/rax</text>')
    out.append(f'<rect x="8" y="{y + 26}" width="{W - 16}" height="30" rx="4" fill="#fff5f5" '
               'stroke="#c53030"/>')
    out.append(f'<text x="18" y="{y + 46}" font-size="14" font-weight="bold" fill="#c53030">'
               f'{_t(figure)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
