"""The trace stage: every variant's known workload under every tracer plug-in.

Every instrument reads a known workload: timewrite writing FULL*256+17 bytes in 256-byte
chunks, so each run makes FULL+1 write() calls to its output file (22+1 = 23 in quick mode),
plus one write of its report to stdout.  Each tracer (twtools.machine.tracers) is asked to
count only the file's writes, in its own way, so the counts must agree with timewrite's own:

  perf stat   raw_syscalls:sys_exit filtered on id == write (of the variant's ABI) and
              ret == 256 / ret == 17: the full chunks and the tail;
  strace      -P outfile -e trace=write -T (per-call microseconds too);
  bpftrace    traces/writelat.bt, keyed by [pid, abi, fd]: the fd >= 3.

tracers.json keeps each tracer's records (raw output included) under its own keys, the
workload, and the counts per variant; latency.json keeps bpftrace's raw histograms.  The
cross-check and every summary are computed at report time (twtools.analyse.tracers).
"""
import os
import tempfile
from pathlib import Path

from ..core import files, proc, ui
from ..machine import probe, tracers
from ..machine.tracers.base import Workload

CHUNK = 256
TAIL = 17
FULL = {"quick": 22, "default": 200, "long": 2000}
LATENCY_SCHEMA = "timewrite-latency/1"


def tmp_dir():
    """Where tracing scratch directories (tw-trace-*, tw-obs-*, tw-attr-*) go: $TW_TMPDIR,
    else the system default ($TMPDIR, else /tmp).  They are made by
    tempfile.TemporaryDirectory, so they go when the stage ends however it ends, after
    core.proc has killed the programs writing in them; their paths reach programs only as
    argument-list items or shlex-quoted words, so any name works."""
    return os.environ.get("TW_TMPDIR") or None


def workload(tmp, mode):
    full = FULL.get(mode, FULL["default"])
    inp = Path(tmp) / f"input-{full}x{CHUNK}+{TAIL}"
    if not inp.exists():
        inp.write_bytes(b"x" * (full * CHUNK + TAIL))
    return Workload(inp, full, CHUNK, TAIL)


def run_tracers(out_dir, mode="default", variants=None):
    """Run every tracer plug-in over the supported variants; write tracers.json and
    latency.json into out_dir.  Returns the tracers.json dict."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [v for v in probe.check_all("timewrite") if not variants or v["name"] in variants]
    ok = [v["name"] for v in rows if v["supported"]]
    root = proc.is_root()
    res = {"schema": "timewrite-tracers/2", "workload": {},
           "variants": [{k: v.get(k) for k in ("name", "bits", "abi", "mechanism", "supported",
                                                "status", "reason")} for v in rows],
           "tracers": {}, "counts": [], "notes": []}
    latency = {"runs": []}
    per = {v: {} for v in ok}
    own = {}
    with tempfile.TemporaryDirectory(prefix="tw-trace-", dir=tmp_dir()) as tmp:
        w = workload(tmp, mode)
        res["workload"] = {"program": "timewrite", "input_bytes": w.input.stat().st_size,
                           "buffsize": CHUNK, "expected_file_writes": w.expected,
                           "note": "each run also writes its one-line report to stdout; "
                                   "the counts below are of writes to the output file"}
        for tr in tracers.plugins():
            ui.progress(f"trace: {tr.title} over {len(ok)} variants")
            got = tr.trace(ok, w, tmp, root)
            res.update(got["records"])
            res["tracers"][tr.name] = {"why": got.get("why")}
            for v, n in got["counts"].items():
                per[v][tr.name] = n
            for v, n in (got.get("own") or {}).items():
                if n is not None:
                    own.setdefault(v, n)
            if "latency" in got["files"]:
                latency = got["files"]["latency"]
            if got.get("why"):
                ui.warn(f"{tr.title}: {got['why']}", "its figures are reported as unknown")
                res["notes"].append(f"{tr.title}: {got['why']}")
    for v in rows:
        if not v["supported"]:
            res["counts"].append({"variant": v["name"], "supported": False, "reason": v["reason"],
                                  "expected": w.expected, "timewrite": None, "by_tracer": {}})
            continue
        res["counts"].append({"variant": v["name"], "supported": True, "expected": w.expected,
                              "timewrite": own.get(v["name"]), "by_tracer": per[v["name"]]})
    files.write_json(out_dir / "tracers.json", res)
    files.write_json(out_dir / "latency.json", dict({"schema": LATENCY_SCHEMA}, **latency))
    return res
