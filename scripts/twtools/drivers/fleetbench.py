"""tw fleet --bench N: does the fleet view scale?  N synthetic results directories are made
from the atlas's real runs (data/machines/), then `tw fleet` compares them in a child process
whose wall time and peak memory are printed (cli/fleet.py parses the arguments and calls
bench()).  The targets (issue 21): 1000 directories in at
most 60 s and 2 GiB.  Figures are printed, never asserted: the machine's load decides them.

Synthetic, but of the real schema and size: each directory is one atlas run with every batch
value of each variant scaled by a factor drawn for that machine (a log-normal spread of 15%,
and a machine-wide factor), its facts (CPU model, hypervisor, kernel) drawn from a small set so
that groups form, and a host name of its own.  Every stage file the fleet reads is as large as
a default-mode run's (percall.json about 3 MB), so reading is measured at full cost.
"""
import concurrent.futures as cf
import functools
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from ..analyse import atlas, results
from ..core import files, paths, ui
from ..core.ui import UserError

TARGET_S = 60.0
TARGET_BYTES = 2 << 30
HYPERVISORS = ("kvm", "kvm", "xen", "microsoft", "none")
KERNELS = ("6.1.0-28-amd64", "6.12.9-amd64", "6.18.44")


def _templates():
    out = []
    for machine, run in atlas.runs():
        meta, _ = results.read_stage(run, "meta")
        fp, _ = results.read_stage(run, "fingerprint")
        out.append((machine, run, meta, fp))
    if not out:
        raise UserError(f"no atlas runs in {paths.shown(atlas.ATLAS)}: the benchmark makes its "
                        "directories from them")
    return out


def _scale_rounds(cell, k):
    for rd in cell.get("rounds") or []:
        for key in ("samples_ns", "raw_ns"):
            if isinstance(rd.get(key), list):
                rd[key] = np.round(np.asarray(rd[key], dtype=float) * k, 4).tolist()


@functools.lru_cache(maxsize=8)
def _template_text(run):
    """An atlas run's percall.json, decompressed once per worker process."""
    return orjson.dumps(atlas._percall_xz(Path(run)))


def make_one(job):
    """Write one synthetic results directory; returns its path."""
    i, run, meta, fp, root = job
    rng = random.Random(i)
    doc = orjson.loads(_template_text(run))
    machine_k = rng.lognormvariate(0, 0.10)
    per_variant = {}
    for c in doc.get("cells", []):
        v = c.get("variant")
        if v not in per_variant:
            per_variant[v] = machine_k * rng.lognormvariate(0, 0.15)
        _scale_rounds(c, per_variant[v])
    host = f"bench-{i:05d}"
    fp = json.loads(json.dumps(fp))
    fp["host"] = host
    cpu = fp.setdefault("cpu", {})
    cpu["model"] = int(cpu.get("model") or 0) + rng.choice((0, 0, 1, 2))
    fp["virtualization"] = rng.choice(HYPERVISORS)
    fp.setdefault("kernel", {})["release"] = rng.choice(KERNELS)
    meta = dict(meta, host=host, pid=100000 + i)
    d = Path(root) / host / f"{host}-run"
    d.mkdir(parents=True)
    files.write_text(d / "meta.json", json.dumps(meta))
    files.write_text(d / "fingerprint.json", json.dumps(fp))
    # Indented as tw writes it (core.files.write_json), so the file is as large as a real one.
    files.write_bytes(d / "percall.json", orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return str(d)


@functools.lru_cache(maxsize=8)
def _template_digest(run):
    """The digest tw report would write for an atlas run (analyse/rundigest.py), once per
    worker process."""
    from ..analyse import rundigest
    return orjson.dumps(rundigest.compute(Path(run)))


def digest_one(job):
    """Write digest.json into one synthetic directory: its template run's real digest, bound to
    this directory's raw rounds (their sha256) and host, as the host itself would have written
    it after `tw report`.  Returns its path."""
    d, run = job
    import hashlib
    dg = orjson.loads(_template_digest(run))
    raw = (Path(d) / "percall.json").read_bytes()
    dg["raw"] = {"file": "percall.json", "sha256": hashlib.sha256(raw).hexdigest(),
                 "bytes": len(raw)}
    dg["host"] = Path(d).parent.name
    files.write_bytes(Path(d) / "digest.json", orjson.dumps(dg, option=orjson.OPT_INDENT_2))
    return d


def add_digests(dirs, runs, workers):
    t = time.perf_counter()
    with cf.ProcessPoolExecutor(max_workers=workers) as ex:
        list(ex.map(digest_one, list(zip(dirs, runs)), chunksize=16))
    return time.perf_counter() - t


def make(n, root, workers):
    """N synthetic directories under root/<host>/; returns the seconds it took."""
    tpl = _templates()
    jobs = [(i, str(tpl[i % len(tpl)][1]), tpl[i % len(tpl)][2], tpl[i % len(tpl)][3], str(root))
            for i in range(n)]
    t = time.perf_counter()
    step = max(1, n // 10)
    with cf.ProcessPoolExecutor(max_workers=workers) as ex:
        for k, _ in enumerate(ex.map(make_one, jobs, chunksize=4), 1):
            if k % step == 0:
                ui.progress(f"fleet bench: {k}/{n} synthetic directories written")
    return time.perf_counter() - t


def measure(collection, out, workers, db=None):
    """Run `tw fleet` on the collection in a child; (wall s, CPU s of the child and its
    workers, exit status, peak RSS of the largest of them in bytes, its stdout, stderr).
    Both come from wait4() on that child alone: its own usage and its workers', not that of
    any process this benchmark ran before it (the generation pool).  The CPU time is what a
    loaded machine does not change much: on a shared host the wall time measures the
    neighbours too."""
    cmd = [sys.executable, str(paths.ROOT / "scripts" / "tw"), "fleet", str(collection),
           "--out", str(out), "--jobs", str(workers)] + (["--db", str(db)] if db else [])
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=o, stderr=e)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        o.seek(0)
        e.seek(0)
        stdout, stderr = o.read(), e.read()
    cpu = ru.ru_utime + ru.ru_stime
    return wall, cpu, p.returncode, ru.ru_maxrss * 1024, stdout.decode(errors="replace"), \
        stderr.decode(errors="replace")


def big(n, base, workers):
    """The view of a database of n runs: n synthetic digests made from the atlas's real ones
    (each machine's figures scaled by a factor drawn per run), stored with fleetdb.ingest,
    then drawn as `tw fleet` draws its view (fleetdb.load, analyse.fleet.view, the pages).
    Prints wall time and peak memory of the view alone."""
    import hashlib
    from ..analyse import fleet as afleet
    from ..analyse import rundigest
    from ..store import fleetdb
    # Copied by a JSON round trip (orjson), ten times faster than copy.deepcopy.
    tpl = [orjson.dumps(rundigest.digest(run, f"{m}/{run.name}")) for m, run in atlas.runs()]
    db = base / "big.duckdb"
    con = fleetdb.connect(db)
    t = time.perf_counter()
    rng = random.Random(1)
    labelled, chunk = [], []
    for i in range(n):
        d = orjson.loads(tpl[i % len(tpl)])
        k = rng.lognormvariate(0, 0.1)
        d["host"] = f"big-{i:06d}"
        # facts drawn as make_one draws them, so that groups form as in a real fleet
        d["facts"] = dict(d["facts"], hypervisor=rng.choice(HYPERVISORS),
                          kernel=rng.choice(KERNELS))
        d["raw"] = {"file": "percall.json", "sha256": hashlib.sha256(str(i).encode()).hexdigest(),
                    "bytes": 0}
        for c in d["cells"].values():
            for f in ("value", "ci_low", "ci_high"):
                if c.get(f) is not None:
                    c[f] *= k
        chunk.append(d)
        if len(chunk) == 5000 or i == n - 1:
            ids = {}
            fleetdb.ingest(con, chunk, ids=ids, method=afleet.ANALYSIS)
            labelled += [(h, r) for h, r in ids.items()]
            chunk = []
            ui.progress(f"fleet bench: {i + 1}/{n} synthetic digests stored")
    stored = time.perf_counter() - t
    con.close()
    (base / "big-runs.json").write_bytes(orjson.dumps(labelled))
    out = base / "view-big"
    out.mkdir()
    # The view in a fresh process, measured alone (wait4): what `tw fleet` does once the runs
    # are stored.
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from twtools.drivers import fleetbench; "
            "fleetbench.view_of(sys.argv[2], sys.argv[3], sys.argv[4])")
    with tempfile.TemporaryFile() as e:
        t = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", code, str(paths.ROOT / "scripts"), str(db),
                              str(base / "big-runs.json"), str(out)], stderr=e)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        e.seek(0)
        err = e.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise UserError(f"the view of {n} stored runs failed: {err.strip().splitlines()[-1:]}")
    # The child's own high-water mark (VmHWM), which it prints last: wait4's ru_maxrss is
    # no use here, Linux carries the forking parent's peak (this process, which stored the
    # digests) into the child's at exec.
    lines = err.strip().splitlines()
    hwm = [ln for ln in lines if ln.startswith("VmHWM:")]
    peak = int(hwm[-1].split()[1]) * 1024 if hwm else ru.ru_maxrss * 1024
    size = (out / "fleet.html").stat().st_size
    groups = next((ln for ln in reversed(lines) if " groups of " in ln), "?")
    print(f"  {n} synthetic digests in a database (stored in {stored:.1f} s, not counted): the "
          f"view drawn from it in {wall:.1f} s (target <= 120 s: "
          f"{'met' if wall <= 120 else 'NOT met'}), peak {peak >> 20} MiB (target <= 2048 MiB: "
          f"{'met' if peak <= 2 << 30 else 'NOT met'}); fleet.html {size >> 20} MiB, {groups}")


def view_of(db, runs, out):
    """The child of big(): the view of the stored runs, written as `tw fleet` writes it."""
    from ..analyse import fleet as afleet
    from ..analyse import rundigest
    from ..present import fleet as pfleet
    from ..store import fleetdb
    con = fleetdb.connect(db)
    labelled = [tuple(x) for x in orjson.loads(Path(runs).read_bytes())]
    digests = fleetdb.load(con, labelled, rundigest.checked, op="null")
    view = afleet.view(digests, [], "null", all_columns=fleetdb.all_columns(con, labelled))
    del digests
    pfleet.write(view, Path(out), lambda p: fleetdb.write_csv(con, labelled, p, view["all_columns"]))
    con.close()
    print(f"{len(view['groups'])} groups of {len(view['machines'])} machines", file=sys.stderr)
    with open("/proc/self/status") as f:
        print(next((ln.strip() for ln in f if ln.startswith("VmHWM:")), ""), file=sys.stderr)


def bench(n, workers, out=None):
    """The benchmark (the module docstring) over n directories with that many workers, kept
    in out when it is given (a new or empty folder), else in a temporary one removed after."""
    keep = out is not None
    base = Path(out) if keep else Path(tempfile.mkdtemp(prefix="tw-fleet-bench-"))
    if keep:
        if base.exists() and any(base.iterdir()):
            raise UserError(f"{base}: exists and is not empty; outputs never merge")
        base.mkdir(parents=True, exist_ok=True)
    try:
        coll, out = base / "collection", base / "view"
        coll.mkdir()
        ui.progress(f"fleet bench: writing {n} synthetic results directories from the atlas "
                    f"({workers} workers)")
        gen = make(n, coll, workers)
        # The child must not inherit the generation pool's peak: it is measured alone.
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        ui.progress(f"fleet bench: tw fleet over {n} directories ({workers} workers) ...")
        wall, cpu, rc, peak, stdout, stderr = measure(coll, out, workers)
        if rc not in (0, ui.EXIT_DATA):
            raise UserError(f"tw fleet failed (exit {rc}): {stderr.strip().splitlines()[-1:] or ''}")
        first = stdout.splitlines()[0] if stdout else ""
        peak_note = "" if peak > before else \
            f" (the generation pool peaked higher, {before >> 20} MiB: the child's own peak is at most that)"
        print(f"tw fleet --bench {n}: {first.removeprefix('tw fleet: ')}")
        print(f"  writing the synthetic directories: {gen:.1f} s (not counted)")
        print(f"  comparing them: wall time {wall:.1f} s (target <= {TARGET_S:.0f} s: "
              f"{'met' if wall <= TARGET_S else 'NOT met'})")
        print(f"  CPU time: {cpu:.1f} s over tw fleet and its workers ({cpu / workers:.1f} s "
              f"each if shared evenly: the wall time on {workers} idle CPUs)")
        print(f"  peak memory: {peak / (1 << 20):.0f} MiB in the largest process{peak_note}; at "
              f"most {(peak * (workers + 1)) / (1 << 20):.0f} MiB over tw fleet and its {workers} "
              f"workers together (target <= {TARGET_BYTES >> 20} MiB: "
              f"{'met' if peak * (workers + 1) <= TARGET_BYTES else 'NOT met'})")
        print(f"  on {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end")
        # Issue 27: the same directories with the digests their hosts would write, into a
        # cold database, then one directory more into the warm one.
        tpl = _templates()
        dirs = sorted(str(p) for p in coll.glob("*/*-run"))
        runs = [str(tpl[int(Path(d).parent.name.split("-")[1]) % len(tpl)][1]) for d in dirs]
        dg_s = add_digests(dirs, runs, workers)
        print(f"  writing their digests: {dg_s:.1f} s (not counted)")
        db = base / "fleet.duckdb"
        for label, o, target in (("with digests, cold database", base / "view-db", 10.0),):
            w, c, rc, pk, _, err = measure(coll, o, workers, db)
            if rc not in (0, ui.EXIT_DATA):
                raise UserError(f"tw fleet --db failed (exit {rc}): {err.strip().splitlines()[-1:]}")
            print(f"  {n} {label}: wall time {w:.1f} s (target <= {target:.0f} s: "
                  f"{'met' if w <= target else 'NOT met'}), CPU {c:.1f} s, peak {pk >> 20} MiB")
        make_one((n, str(tpl[n % len(tpl)][1]), tpl[n % len(tpl)][2], tpl[n % len(tpl)][3],
                  str(coll)))
        new = coll / f"bench-{n:05d}" / f"bench-{n:05d}-run"
        digest_one((str(new), str(tpl[n % len(tpl)][1])))
        w, c, rc, pk, _, err = measure(coll, base / "view-warm", workers, db)
        print(f"  {n} + 1 with digests, warm database: wall time {w:.1f} s (target <= 2 s: "
              f"{'met' if w <= 2 else 'NOT met'}), CPU {c:.1f} s, peak {pk >> 20} MiB"
              " (the unchanged directories are not read again: fleetdb.sources)")
        if os.environ.get("FLEET_BIG"):
            big(int(os.environ["FLEET_BIG"]), base, workers)
        if keep:
            print(f"  kept: {base}")
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0
