"""tw run: the whole investigation, measured into one results directory, then reported.

Stages run in order: doctor -> variants -> per-call matrix -> seed sweep -> TLPI
sweep -> writev/stdio -> tracers -> attribution -> observer effect -> report.
Each stage writes its own JSON file (docs/results-schema.md).  A stage that
fails is recorded in meta.json with its error and the run goes on: the report
then says which section is missing and why, rather than the whole run dying
after minutes of measuring.  The last line on stdout is the report's path.
"""
import datetime as dt
import importlib
import json
import os
import socket
import sys
import time
import traceback
from pathlib import Path

from . import options
from ..core import files, paths, proc, ui
from ..machine import probe

RESULTS = paths.RESULTS

def _call(module, func, **kw):
    """A stage that calls twtools.measure.<module>.<func>(out, mode=mode, **kw), imported lazily."""
    def stage(out, mode):
        mod = importlib.import_module(f"twtools.measure.{module}")
        return getattr(mod, func)(out, mode=mode, **kw)
    return stage


def _doctor(out, mode):
    from ..machine import doctor
    return doctor.fingerprint(out / "fingerprint.json", fs_path=str(out))


def _variants(out, mode):
    rows = probe.check_all("timewrite")
    files.write_json(out / "variants.json", rows)
    for r in rows:
        if r["status"] == "unsupported":
            ui.progress(f"variant {r['name']}: unsupported: {r['reason']}")
        elif r["status"] == "unpredicted":
            ui.warn(f"variant {r['name']}: {r['reason']}",
                    "the support oracle is wrong about this machine; please report it")
    bad = probe.broken(rows)
    if bad:
        raise RuntimeError("; ".join(f"{r['name']}: {r['reason']}" for r in bad))
    return rows


# (stage name, callable(out_dir, mode)), in the order they run.
STAGES = [
    ("doctor", _doctor),
    ("variants", _variants),
    ("bench", _call("bench", "run_matrix")),
    ("seed-sweep", _call("sweep", "seed_sweep")),
    ("tlpi-sweep", _call("sweep", "tlpi_sweep")),
    ("writev", _call("sweep", "writev_bench")),
    ("stdio", _call("sweep", "stdio_bench")),
    ("tracers", _call("trace", "run_tracers")),
    ("attribution", _call("attribution", "attribute")),
    ("observer", _call("observer", "observe")),
    ("field-example", _call("diagnose", "field_example")),
]


def add_arguments(p, name):
    options.add_mode_arguments(p, "a fast, less precise run (about 30 s; used by the tests)",
                              "a slower, more precise run for publication")
    p.add_argument("--out", metavar="DIR",
                   help="results directory (default: results/<host>-<UTC time>)")
    p.add_argument("--only", metavar="STAGES",
                   help="comma list of stages to run (default: all): "
                        + ",".join(s[0] for s in STAGES))
    p.add_argument("--no-report", action="store_true", help="measure only; run `tw report DIR` later")
    p.add_argument("--speculation", choices=("ssbd", "indirect-branch", "all"),
                   help="measure with a per-process speculation mitigation switched on "
                        "(prctl PR_SET_SPECULATION_CTRL, inherited by every program run): "
                        "compare the results with a normal run using `tw compare`")


def new_results_dir():
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = socket.gethostname().split(".")[0] or "host"
    return RESULTS / f"{host}-{stamp}"


def point_latest(out):
    """results/latest -> the newest results directory (relative, so a copied tree still works)."""
    if out.parent.resolve() != RESULTS.resolve():
        return
    link = RESULTS / "latest"
    tmp = RESULTS / ".latest.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(out.name)
    tmp.replace(link)


def merge(out):
    """results.json: every stage file under its stem, so one file carries the run."""
    merged = {"schema": "timewrite-results/1"}
    for f in sorted(out.glob("*.json")):
        if f.name in ("results.json",):
            continue
        merged[f.stem] = json.loads(f.read_text())
    files.write_json(out / "results.json", merged)


def run(out=None, mode="default", only=None, report=True, argv=None, setting=None):
    out = Path(out) if out else new_results_dir()
    out.mkdir(parents=True, exist_ok=True)
    point_latest(out)
    meta = {"schema": "timewrite-results/1",
            "created_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "host": socket.gethostname(), "mode": mode,
            "argv": argv if argv is not None else sys.argv, "command": "make report",
            "stages": {}}
    from ..machine import speculation
    meta["setting"] = setting or {"speculation": None, "status": speculation.status()}
    extra = [f"--{mode}"] if mode != "default" else []
    if setting and setting.get("speculation"):
        extra.append(f"--speculation {setting['speculation']}")
    if extra:
        meta["command"] = f"make report REPORT_ARGS='{' '.join(extra)}'"
    t0 = time.monotonic()
    wanted = [s for s in STAGES if not only or s[0] in only]
    for i, (name, stage) in enumerate(wanted, 1):
        ui.progress(f"[{i}/{len(wanted)}] {name} ({mode}) ...")
        ts = time.monotonic()
        try:
            stage(out, mode)
            meta["stages"][name] = {"ok": True, "seconds": round(time.monotonic() - ts, 2)}
        except KeyboardInterrupt:
            raise
        except Exception as e:  # recorded, reported, and the run goes on
            detail = traceback.format_exc(limit=3)
            meta["stages"][name] = {"ok": False, "seconds": round(time.monotonic() - ts, 2),
                                    "error": f"{type(e).__name__}: {e}"}
            ui.warn(f"stage {name} failed: {type(e).__name__}: {e}",
                        f"the report marks its section as missing; details in {out}/meta.json")
            meta["stages"][name]["traceback"] = detail
        ui.progress(f"[{i}/{len(wanted)}] {name} done in {time.monotonic() - ts:.1f} s")
        meta["duration_s"] = round(time.monotonic() - t0, 2)
        files.write_json(out / "meta.json", meta)
    merge(out)
    if report:
        from ..present import report as rep
        ui.progress("writing the report ...")
        path = rep.build_report(out)
        merge(out)  # the report adds verdict.json
        ui.progress(f"done in {time.monotonic() - t0:.0f} s")
        return path, meta
    return out, meta


def main(args, name):
    only = set(args.only.split(",")) if args.only else None
    if only:
        unknown = only - {s[0] for s in STAGES}
        if unknown:
            print(f"tw run: unknown stage(s) {','.join(sorted(unknown))}; "
                  f"choose from {','.join(s[0] for s in STAGES)}", file=sys.stderr)
            return 2
    if not proc.is_root():
        ui.warn("not running as root: bpftrace and perf tracepoints are blind",
                    "their figures are reported as unknown; re-run as root for the full attribution")
    setting = None
    if args.speculation:
        from ..machine import speculation
        try:
            setting = speculation.apply(args.speculation)
        except OSError as e:
            print(f"tw run: --speculation {args.speculation}: {e.strerror}", file=sys.stderr)
            return 2
        ui.progress(f"speculation mitigation on: {setting['status']}")
    path, meta = run(args.out, args.mode, only, report=not args.no_report, setting=setting)
    failed = [k for k, v in meta["stages"].items() if not v["ok"]]
    if failed:
        ui.warn(f"{len(failed)} stage(s) failed: {', '.join(failed)}",
                    f"see {Path(path).parent if path.is_file() else path}/meta.json")
    print(os.path.relpath(path) if str(path).startswith(os.getcwd()) else path)
    return 1 if failed else 0
