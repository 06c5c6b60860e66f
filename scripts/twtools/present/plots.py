"""The report's plots (matplotlib, Agg).

Every function takes already-loaded stage data and an output directory, writes
`<name>.png` and `<name>.svg`, and returns the name, or None when it has nothing
to draw.  Output is deterministic: fixed svg.hashsalt, no dates, fixed
creator, sorted inputs, so rebuilding a report gives identical files.
"""
import contextlib
import io
import multiprocessing
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from ..core import files  # noqa: E402

CREATOR = "timewrite report"
matplotlib.rcParams.update({
    "svg.hashsalt": "timewrite",
    "svg.fonttype": "none",  # text stays text: smaller, faster, still deterministic
    "font.size": 9,
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
})
SEED_STYLE = {"color": "0.55", "linestyle": "--", "linewidth": 1, "marker": "x", "markersize": 4}


# A log axis's tick labels as plain text: 2¹⁷, 10⁻¹, 3×10², the same labels matplotlib's
# LogFormatterSciNotation gives, written with Unicode superscripts instead of mathtext.
# Parsing mathtext ($\mathdefault{2^{17}}$, with pyparsing, again for each of the layout, the
# SVG and the PNG) was a fifth of the CPU of drawing a report's plots.
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_MATHTEXT = re.compile(r"\$\\mathdefault\{(.*)\}\$")
_POWER = re.compile(r"\^\{(-?\d+)\}")


class PlainLogFormatter(matplotlib.ticker.LogFormatterSciNotation):
    """LogFormatterSciNotation's choice of ticks and labels, each label in plain text."""

    def __call__(self, x, pos=None):
        s = super().__call__(x, pos)
        m = _MATHTEXT.fullmatch(s)
        if not m:
            return s
        body = _POWER.sub(lambda p: p.group(1).translate(_SUPERSCRIPT),
                          m.group(1).replace("\\times", "×"))
        return body.replace("-", "\N{MINUS SIGN}")


def _plain_log_ticks(fig):
    """Every log axis of fig that has matplotlib's default tick labels gets them in plain text
    (PlainLogFormatter, with the same base and the same rule for which ticks are labelled)."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                             (axis.get_minor_formatter, axis.set_minor_formatter)):
                f = get()
                if type(f) is matplotlib.ticker.LogFormatterSciNotation:
                    put(PlainLogFormatter(base=f._base, labelOnlyBase=f.labelOnlyBase,
                                          minor_thresholds=f.minor_thresholds,
                                          linthresh=f._linthresh))


def _draw(fig):
    """{fmt: bytes} of the figure as SVG and PNG, laid out and rendered in memory."""
    _plain_log_ticks(fig)
    fig.tight_layout()
    out = {}
    for fmt, meta in (("svg", {"Date": None, "Creator": CREATOR}), ("png", {"Software": CREATOR})):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100 if fmt == "png" else None, metadata=meta)
        out[fmt] = buf.getvalue()
    plt.close(fig)
    return out


def _write(outdir, name, drawn):
    for fmt, data in drawn.items():
        files.write_bytes(Path(outdir) / f"{name}.{fmt}", data)


def _child(fig, conn):
    """In a forked child: the figure drawn, its bytes sent back, and out without the parent's
    exit handlers."""
    code = 1
    try:
        conn.send(_draw(fig))
        code = 0
    finally:
        conn.close()
        os._exit(code)


class _Renderer:
    """Forked children that draw figures while the report goes on (rendering())."""

    def __init__(self, n):
        self.n, self.ctx, self.running, self.done = n, multiprocessing.get_context("fork"), [], []

    def submit(self, fig, outdir, name):
        while len(self.running) >= self.n:
            self._collect(self.running.pop(0))
        recv, send = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=_child, args=(fig, send), daemon=True)
        p.start()
        send.close()
        self.running.append((p, recv, fig, outdir, name))

    def _collect(self, job):
        p, recv, fig, outdir, name = job
        try:
            drawn = recv.recv()
        except (EOFError, OSError):          # a child that failed or died: drawn here
            drawn = None
        recv.close()
        p.join()
        if drawn is None:
            drawn = _draw(fig)
        plt.close(fig)
        self.done.append((outdir, name, drawn))

    def finish(self):
        while self.running:
            self._collect(self.running.pop(0))
        for outdir, name, drawn in self.done:
            _write(outdir, name, drawn)

    def kill(self):
        for p, recv, fig, _, _ in self.running:
            p.kill()
            p.join()
            recv.close()
            plt.close(fig)
        self.running = []


# While a rendering() block is open: its _Renderer.
_RENDER = None


def _save(fig, outdir, name):
    """<name>.svg and <name>.png in outdir, rendered in memory and written through
    core.files (whole or not at all, never through a symbolic link, inside the directory
    the caller confined writes to).  Inside rendering(), drawn by a forked child and written
    when the block ends."""
    if _RENDER is not None:
        _RENDER.submit(fig, outdir, name)
        return name
    _write(outdir, name, _draw(fig))
    return name


@contextlib.contextmanager
def rendering():
    """Plots saved inside the block are laid out and rendered by forked children (one a CPU
    this process may use, at most 4) while the report goes on, and written when the block
    ends, in the order they were saved.  Laying out and rendering a report's nine plots twice
    (SVG and PNG) was about half of `tw report`'s time on a quick run (4-5 s of 9 on an AMD
    EPYC guest), at the end of a run whose two CPUs are otherwise idle.  A child draws the
    very figure the report made (a fork of this process, not a copy through pickle, which
    laid one plot's tick labels out 3 px apart), so the bytes are the same as drawn here.
    Where there is one CPU, or no fork, they are drawn in this process, as outside the block."""
    global _RENDER
    try:
        n = min(len(os.sched_getaffinity(0)), 4)
    except (AttributeError, OSError):
        n = 1
    if n < 2 or _RENDER is not None or "fork" not in multiprocessing.get_all_start_methods():
        yield
        return
    r = _RENDER = _Renderer(n)
    ok = False
    try:
        yield
        r.finish()
        ok = True
    finally:
        _RENDER = None
        if not ok:
            r.kill()


def _legend(ax, **kw):
    """A legend only where something carries a label: matplotlib warns on an empty one, and
    a panel whose parts are all blind (no root, say) has none."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _med(s):
    if not isinstance(s, dict) or s.get("median") is None:
        return None
    return s["median"]


def _err(s):
    m = s["median"]
    return [[max(m - s["ci_low"], 0)], [max(s["ci_high"] - m, 0)]]


# -- plots -----------------------------------------------------------------------------------

def _compact(x, _pos=None):
    """Tick label: 950, 1.5k, 45k."""
    if abs(x) >= 1000:
        v = x / 1000
        return f"{v:.0f}k" if v == int(v) or abs(v) >= 10 else f"{v:.1f}k"
    return f"{x:.0f}"


def plot_percall(percall, outdir, ops=("null", "getppid", "write-devnull", "write-file", "write-sync")):
    """Every mechanism by operation on one log axis shared by all panels, so that a 22 ns vDSO
    call, a 90 ns syscall and a 6 µs int 0x80 read on one page: the undisturbed cost as a
    filled dot with its 95% interval, the typical cost (median) as an open circle with its
    own, fainter; red marks a cell whose primary figure is unstable."""
    cells = [c for c in (percall or {}).get("cells", []) if c.get("op") in ops
             and (c.get("shape") or "ret") == "ret"]
    if not cells:
        return None
    variants = sorted({c["variant"] for c in cells}, key=lambda v: (-int(v[:2]), v))
    ops = [o for o in ops if any(c["op"] == o for c in cells)]
    fig, axes = plt.subplots(1, len(ops), figsize=(2.7 * len(ops) + 1, 0.35 * len(variants) + 1.8),
                             sharey=True, sharex=True, squeeze=False)
    for ax, op in zip(axes[0], ops):
        # One size per panel: the smallest measured (write-file has 256 B and 4096 B cells).
        size = min((c.get("size") for c in cells if c["op"] == op and c.get("size")), default=None)
        for i, v in enumerate(variants):
            c = next((c for c in cells if c["variant"] == v and c["op"] == op
                      and c.get("size") == size), None)
            if not c or c.get("supported") is False or _med(c) is None:
                ax.text(0.02, i, "unsupported" if c and c.get("supported") is False else "unknown",
                        transform=ax.get_yaxis_transform(), va="center", fontsize=7, color="0.5")
                continue
            color = "tab:red" if c.get("unstable") else "tab:blue"
            ax.errorbar([c["median"]], [i + 0.18], xerr=_err(c), fmt="o", mfc="white",
                        color=color, alpha=0.6, capsize=2, ms=4)
            u = c.get("undisturbed_ns")
            if u is not None and c.get("undisturbed_ci_low") is not None:
                ax.errorbar([u], [i - 0.12], xerr=[[max(u - c["undisturbed_ci_low"], 0)],
                                                   [max(c["undisturbed_ci_high"] - u, 0)]],
                            fmt="o", color=color, capsize=3, ms=4)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_compact))
        ax.grid(axis="x", which="major", color="0.9")
        ax.set_title(f"{op} {size} B" if size else op)
        ax.set_xlabel("ns per call, log scale")
    axes[0][0].set_yticks(range(len(variants)))
    axes[0][0].set_yticklabels(variants)
    axes[0][0].invert_yaxis()
    fig.suptitle("Per-call cost by mechanism: undisturbed (dot) and typical (circle), 95% CI; "
                 "red: unstable", fontsize=9)
    return _save(fig, outdir, "percall")


def plot_host(host, outdir):
    """The reference cell's batches over the run: the host's fast and slow states, with the
    undisturbed figure and the slow-state line (undisturbed + the margin) drawn across."""
    pts = [(t, v) for t, v in (host or {}).get("series") or [] if t is not None and v is not None]
    ref = (host or {}).get("reference_ns")
    if not pts or ref is None:
        return None
    probes = host.get("probe_series") or []
    clock = host.get("clock_series") or []
    if probes:
        if clock:
            fig, (ax, ax2, ax3) = plt.subplots(3, 1, figsize=(8, 5), sharex=True,
                                               gridspec_kw={"height_ratios": [3, 1, 1.2]})
            ax3.plot([c[0] for c in clock], [c[1] for c in clock], ".", ms=2, color="tab:purple")
            ax3.set_ylabel("core GHz")
        else:
            fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 4), sharex=True,
                                          gridspec_kw={"height_ratios": [3, 1]})
            ax3 = None
        pt = [p[0] for p in probes]
        ax2.scatter(pt, [1 if p[2] else 0 for p in probes], s=6,
                    c=["tab:green" if p[2] else "tab:red" for p in probes])
        ax2.set_yticks([0, 1], ["slow", "fast"])
        ax2.set_ylim(-0.5, 1.5)
        ax2.set_ylabel("probe")
    else:
        fig, ax = plt.subplots(figsize=(8, 3))
        ax2 = ax3 = None
    ts, vs = zip(*pts)
    slow = ref * (1 + host.get("slow_margin", 0.1))
    ax.scatter(ts, vs, s=4, c=["tab:orange" if v > slow else "tab:blue" for v in vs])
    ax.axhline(ref, color="tab:blue", lw=1, label=f"undisturbed {ref:.1f} ns")
    ax.axhline(slow, color="tab:orange", lw=1, ls="--",
               label=f"slow state above {slow:.1f} ns")
    hi = float(np.percentile(vs, 99)) if len(vs) > 10 else max(vs)
    ax.set_ylim(min(vs) * 0.97, max(hi * 1.05, slow * 1.1))
    (ax3 or ax2 or ax).set_xlabel("seconds into the matrix")
    ax.set_ylabel("ns per call")
    ax.set_title("The reference cell (64-bit syscall, null) over the run: each dot a batch")
    _legend(ax, fontsize=7)
    return _save(fig, outdir, "host")


def plot_sweep_per_byte(sweep, outdir, name="sweep_seed"):
    runs = [r for r in (sweep or {}).get("runs", []) if r.get("supported", True) and r.get("rows")]
    nbytes = (sweep or {}).get("input_bytes")
    if not runs or not nbytes:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, mode in zip(axes, ("async", "sync")):
        for run in sorted(runs, key=lambda r: r["variant"]):
            if run["mode"] != mode:
                continue
            xs, ys, lo, hi = [], [], [], []
            for r in run["rows"]:
                s = r.get("real_s")
                if _med(s) is None:
                    continue
                xs.append(r["buffsize"])
                ys.append(s["median"] * 1e9 / nbytes)
                lo.append(max(s["median"] - s["ci_low"], 0) * 1e9 / nbytes)
                hi.append(max(s["ci_high"] - s["median"], 0) * 1e9 / nbytes)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=3, capsize=2, label=run["variant"])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{mode}: real time per byte")
        ax.set_xlabel("BUFFSIZE (bytes)")
        _legend(ax, fontsize=7)
    axes[0].set_ylabel(f"ns per byte ({nbytes} bytes per pass)")
    return _save(fig, outdir, f"{name}_per_byte")


def acc_series(sync_rows, async_rows, key="real_s"):
    """[(buffsize, acc)] with acc = (t_sync - t_async) / t_sync; rows without a sync time skipped."""
    def size(r):
        return r["buffsize"] if "buffsize" in r else r["bufsize"]

    a = {size(r): r for r in async_rows}
    out = []
    for r in sorted(sync_rows, key=size):
        s = r.get(key)
        ts = _med(s) if isinstance(s, dict) else s
        o = a.get(size(r))
        if o is None or not ts:
            continue
        ta = _med(o.get(key)) if isinstance(o.get(key), dict) else o.get(key)
        if ta is None:
            continue
        out.append((size(r), (ts - ta) / ts))
    return out


def plot_acc(sweep, outdir, seed_ref=None):
    runs = [r for r in (sweep or {}).get("runs", []) if r.get("supported", True) and r.get("rows")]
    if not runs and not seed_ref:
        return None
    fig, ax = plt.subplots(figsize=(8, 4))
    for v in sorted({r["variant"] for r in runs}):
        sync = next((r for r in runs if r["variant"] == v and r["mode"] == "sync"), None)
        asy = next((r for r in runs if r["variant"] == v and r["mode"] == "async"), None)
        if sync and asy:
            pts = acc_series(sync["rows"], asy["rows"])
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=f"{v} (this machine)")
    if seed_ref:
        for plat in sorted({r["platform"] for r in seed_ref}):
            sync = [r for r in seed_ref if r["platform"] == plat and r["mode"] == "sync"]
            asy = [r for r in seed_ref if r["platform"] == plat and r["mode"] == "async"]
            pts = acc_series(sync, asy)
            if pts:
                ax.plot(*zip(*pts), label=f"{plat} (seed, theirs)", **SEED_STYLE)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("BUFFSIZE (bytes)")
    ax.set_ylabel("acc = (t_sync - t_async) / t_sync")
    ax.set_title("Async speed-up by BUFFSIZE (seed's acc)")
    _legend(ax, fontsize=6, ncol=2)
    return _save(fig, outdir, "acc")


def plot_fit(sweep, outdir, mode="async"):
    """The analysed sweep's per-variant fits (twtools.analyse.fits) over its medians, and the
    knee; None when nothing was fitted."""
    fits = {f["variant"]: f for f in (sweep or {}).get("fits") or []
            if f.get("mode") == mode and "a_ns" in f}
    if not fits:
        return None
    k = ((sweep or {}).get("knee") or {}).get(mode) or {}
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in sorted((sweep or {}).get("runs", []), key=lambda r: r["variant"]):
        f = fits.get(run["variant"])
        if run.get("mode") != mode or not run.get("rows") or f is None:
            continue
        # each row's leading figure (undisturbed, or typical where it waits), as the table
        pts = [(r["buffsize"], _med(r.get("lead") or r.get("ns_per_call"))) for r in run["rows"]]
        pts = [(x, y) for x, y in pts if y is not None]
        if not pts:
            continue
        line = ax.plot([x for x, _ in pts], [y for _, y in pts], "o", ms=3)[0]
        for g in (f, f.get("copy")):
            if not g or "a_ns" not in g:
                continue
            a, b = g["a_ns"]["value"], g["b_ns_per_byte"]["value"]
            lo, hi = g.get("sizes") or (pts[0][0], pts[-1][0])
            gx = np.geomspace(lo, hi, 50)
            ax.plot(gx, a + b * gx, "-", color=line.get_color(),
                    label=f"{run['variant']}: a={a:.0f} ns, b={b:.3f} ns/B" if g is f else None)
    if k.get("value") is not None and k["value"] > 0:
        ax.axvline(k["value"], color="k", linestyle=":", label=f"knee {k['value']:.0f} B")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("BUFFSIZE (bytes)")
    ax.set_ylabel("ns per write call")
    ax.set_title(f"T(size) = a_mech + b*size ({mode}), per regime; knee: mechanism spread < 1% "
                 "of a call")
    _legend(ax, fontsize=6)
    return _save(fig, outdir, f"fit_{mode}")


def plot_tlpi(sweep, outdir, tlpi_ref=None):
    runs = [r for r in (sweep or {}).get("runs", []) if r.get("supported", True) and r.get("rows")]
    if not runs and not tlpi_ref:
        return None
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in sorted(runs, key=lambda r: (r["variant"], r["mode"])):
        rows = [r for r in run["rows"] if _med(r.get("real_s"))]
        if not rows:
            continue
        base = max(rows, key=lambda r: r["buffsize"])["real_s"]["median"]
        ax.plot([r["buffsize"] for r in rows], [r["real_s"]["median"] / base for r in rows],
                marker="o", ms=3, label=f"{run['variant']} {run['mode']} (this machine)")
    if tlpi_ref:
        base = max(tlpi_ref, key=lambda r: r["buf_size"])["elapsed_s"]
        ax.plot([r["buf_size"] for r in tlpi_ref], [r["elapsed_s"] / base for r in tlpi_ref],
                label="TLPI Table 13-2 (theirs, 2.6.30/ext2)", **SEED_STYLE)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("buffer size (bytes)")
    ax.set_ylabel("elapsed / elapsed at largest buffer")
    ax.set_title("TLPI sweep: time relative to the largest buffer")
    _legend(ax, fontsize=7)
    return _save(fig, outdir, "tlpi")


PARTS = [("entry_exit_ns", "entry/exit"), ("penalty_ns", "post-return penalty"),
         ("body_ns", "kernel body"), ("waiting_ns", "waiting")]


def _grid(n, ncols, w, h):
    """n panels in rows of at most ncols (a single long row shrinks to nothing on a page);
    returns the figure and the first n axes, hiding the unused ones."""
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def plot_attribution(att, outdir):
    rows = (att or {}).get("rows", [])
    if not rows:
        return None
    ops = sorted({r["op"] for r in rows})
    fig, axes = _grid(len(ops), 3, 5, 0.4 * len(rows) / max(len(ops), 1) + 2)
    colors = ["tab:orange", "tab:red", "tab:blue", "tab:green"]
    for ax, op in zip(axes, ops):
        rs = sorted([r for r in rows if r["op"] == op], key=lambda r: r["variant"])
        for i, r in enumerate(rs):
            left = 0.0
            for (key, label), col in zip(PARTS, colors):
                # A sync write's traced body contains its wait: draw the CPU part only.
                if key == "body_ns" and r.get("body_cpu_ns"):
                    key = "body_cpu_ns"
                if key == "waiting_ns" and not r.get("body_cpu_ns"):
                    continue  # no separate wait (async: rounding around zero)
                m = _med(r.get(key))
                if m is None or m <= 0:
                    continue
                ax.barh(i, m, left=left, color=col, label=label if i == 0 else None)
                left += m
        ax.set_yticks(range(len(rs)))
        ax.set_yticklabels([r["variant"] for r in rs])
        ax.invert_yaxis()
        ax.set_xlabel("ns per call (medians; blind parts not drawn)")
        ax.set_title(f"{op}, {rs[0]['size']} B" if rs and rs[0].get("size") else op)
        _legend(ax, fontsize=7)
    return _save(fig, outdir, "attribution")


def plot_latency(lat, outdir):
    runs = [r for r in (lat or {}).get("runs", []) if r.get("log2")]
    variants = sorted({r["variant"] for r in runs})
    if not variants:
        return None
    fig, axes = _grid(len(variants), 4, 4.5, 3.5)
    for ax, v in zip(axes, variants):
        for run in sorted([r for r in runs if r["variant"] == v], key=lambda r: r["mode"]):
            bins = [b for b in run["log2"] if b["hi_ns"] is not None]
            p50 = (run.get("percentiles") or {}).get("p50")
            ax.bar([b["lo_ns"] for b in bins], [b["count"] for b in bins],
                   width=[b["hi_ns"] - b["lo_ns"] for b in bins], align="edge", alpha=0.5,
                   label=f"{run['mode']} (p50 {p50:.0f} ns)" if p50 is not None else run["mode"])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("write latency (ns, log2 bins)")
        ax.set_ylabel("calls")
        ax.set_title(f"{v}, {runs[0].get('buffsize')} B")
        _legend(ax, fontsize=7)
    return _save(fig, outdir, "latency")


def plot_seed_beside(sweep, outdir, seed_ref):
    """Real time per write call by BUFFSIZE: the seed's platforms (theirs) beside this machine."""
    runs = [r for r in (sweep or {}).get("runs", []) if r.get("supported", True) and r.get("rows")]
    if not runs and not seed_ref:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, mode in zip(axes, ("sync", "async")):
        for run in sorted(runs, key=lambda r: r["variant"]):
            if run["mode"] != mode or run["variant"] not in ("64-libc", "32-libc"):
                continue
            rows = [r for r in run["rows"] if _med(r.get("ns_per_call"))]
            ax.plot([r["buffsize"] for r in rows], [r["ns_per_call"]["median"] / 1e3 for r in rows],
                    marker="o", ms=3, label=f"{run['variant']} (this machine)")
        for plat in sorted({r["platform"] for r in seed_ref or []}):
            rows = [r for r in seed_ref if r["platform"] == plat and r["mode"] == mode
                    and r.get("real_s") and r.get("loops")]
            if rows:
                ax.plot([r["bufsize"] for r in rows], [r["real_s"] / r["loops"] * 1e6 for r in rows],
                        label=f"{plat} (seed, theirs)", **dict(SEED_STYLE, color=None))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("BUFFSIZE (bytes)")
        ax.set_title(f"{mode}: real time per write call")
        _legend(ax, fontsize=6)
    axes[0].set_ylabel("µs per call (seed rows with 0.00 s omitted)")
    return _save(fig, outdir, "seed_beside")


def plot_compare_percall(sets, outdir, op="null", name="compare_percall"):
    """sets: [(label, percall)] -> dot plot of each variant's cost per set."""
    variants = sorted({c["variant"] for _, pc in sets for c in (pc or {}).get("cells", [])
                       if c.get("op") == op}, key=lambda v: (-int(v[:2]), v))
    if not variants:
        return None
    fig, ax = plt.subplots(figsize=(8, 0.4 * len(variants) + 1.5))
    n = len(sets)
    for j, (label, pc) in enumerate(sets):
        for i, v in enumerate(variants):
            c = next((c for c in (pc or {}).get("cells", []) if c["variant"] == v and c["op"] == op
                      and (c.get("shape") or "ret") == "ret"), None)
            if not c or _med(c) is None:
                continue
            # The undisturbed figure where the cell has one: what compares across runs.
            if c.get("undisturbed_ns") is not None and c.get("undisturbed_ci_low") is not None:
                c = {"median": c["undisturbed_ns"], "ci_low": c["undisturbed_ci_low"],
                     "ci_high": c["undisturbed_ci_high"]}
            y = i + (j - (n - 1) / 2) * 0.8 / max(n, 1)
            ax.errorbar([c["median"]], [y], xerr=_err(c), fmt="o", ms=4, capsize=3,
                        color=f"C{j}", label=label if i == 0 or not ax.get_legend_handles_labels()[1].count(label) else None)
    ax.set_yticks(range(len(variants)))
    ax.set_yticklabels(variants)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(f"ns per {op} call, undisturbed (95% CI), log scale")
    h, lab = ax.get_legend_handles_labels()
    seen = {}
    for hh, ll in zip(h, lab):
        seen.setdefault(ll, hh)
    if seen:
        ax.legend(seen.values(), seen.keys(), fontsize=7)
    ax.set_title(f"Per-call cost ({op}) across results sets")
    return _save(fig, outdir, name)
