"""tw fleet DIR...: one view of many machines (machines × mechanisms on the undisturbed figure,
grouped by what differs, outliers, explaining facts), as HTML, CSV and JSON.

Each DIR is a results directory, or a collection folder as the fleet playbook fills it: one
folder per host, holding that host's results directory (the newest, when there are several).
Every directory is untrusted input: one that is damaged or hostile is one line on stderr
naming the host and what is wrong, and the rest are compared.  Nothing is written outside
--out, and nothing found in a directory is run.
"""
import contextlib
import os
import sys
from pathlib import Path

from ..core import escape, files, paths, proc, ui
from ..core.ui import DataError, UserError
from . import options

# The analysis, the digests and the page are imported by the functions that use them: they
# bring numpy (0.1 s), which `tw fleet --readiness` (analyse/fleetwatch.py, the standard
# library only) never needs.

STATUS = "status.json"   # what the playbook says about a host that sent no results


def add_arguments(p, name):
    p.add_argument("dirs", nargs="*", metavar="DIR",
                   help="results directories, or collection folders (one folder per host)")
    p.add_argument("--out", metavar="DIR",
                   help="folder for fleet.html, fleet.csv, fleet.json (default: a new "
                        "results/fleet-<UTC time>-<pid>); it must not exist or be empty")
    p.add_argument("--json", action="store_true", help="print the fleet view as JSON on stdout")
    p.add_argument("--op", default="null", metavar="OP",
                   help="the operation the heat map shows (default null; 'all' for every "
                        "cell); the CSV and JSON hold every cell")
    p.add_argument("--jobs", type=options.jobs, default=0, metavar="N",
                   help="worker processes reading directories (default: one per CPU)")
    p.add_argument("--atlas", action="store_true",
                   help="compare the atlas's machines too (data/machines/*/runs/*, each named "
                        "machine/run), beside any DIR given")
    p.add_argument("--db", metavar="FILE",
                   help="also keep every compared run in this DuckDB database (created if "
                        "absent; a run already there is not added twice), for SQL queries "
                        "(docs/fleet.md)")
    p.add_argument("--verify", action="store_true",
                   help="recompute each directory's digest.json from its raw rounds and list "
                        "those that disagree (a host that forged its figures); writes nothing; "
                        "exit 3 when one disagrees or cannot be read")
    p.add_argument("--readiness", action="store_true",
                   help="the fleet's readiness for ia32_emulation=0 from each host's tw watch "
                        "report (fleet/watch.yml's report action): which hosts ran a 32-bit "
                        "program in the period, and which")
    p.add_argument("--bench", type=int, metavar="N",
                   help="the scale benchmark: make N synthetic results directories from the "
                        "atlas (data/machines), compare them, print wall time and peak memory")


def _newest(host_dir):
    """(the newest results directory inside a host folder by name, or None; why there is
    none: the reason a folder that looked like one was refused).  Symbolic links are never
    followed."""
    from ..analyse import results
    found, why = [], None
    with os.scandir(host_dir) as it:
        for e in sorted(it, key=lambda e: e.name):
            if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
                ok, w = results.is_results_dir(e.path)
                if ok:
                    found.append(e.name)
                elif os.path.lexists(os.path.join(e.path, "meta.json")):
                    why = w
    return (Path(host_dir) / found[-1] if found else None), why


def _status_why(host_dir):
    """The playbook's reason for a host that sent no results, when it wrote one."""
    import json
    try:
        raw = files.read_regular(Path(host_dir) / STATUS, inside=host_dir, limit=1 << 16)
        st = json.loads(raw) if raw else None
    except (DataError, ValueError, OSError):
        return None
    if isinstance(st, dict) and isinstance(st.get("why"), str):
        return f"{st.get('state', 'failed')}: {st['why'][:500]}"
    return None


def discover(dirs):
    """([(host, results dir)], [{host, why}]) from the command line's DIRs."""
    from ..analyse import results
    jobs, refused = [], []
    for d in dirs:
        p = Path(d)
        if results.is_results_dir(p)[0]:
            jobs.append((p.name or str(p), p))
            continue
        if p.is_symlink() or not p.is_dir():
            refused.append({"host": str(p), "why": "not a results directory or a collection "
                                                   "folder" + (" (a symbolic link)" if p.is_symlink() else "")})
            continue
        with os.scandir(p) as it:
            entries = sorted(it, key=lambda e: e.name)
        hosts = 0
        for e in entries:
            if e.name.startswith("."):
                continue
            if e.is_symlink():
                refused.append({"host": e.name, "why": f"{e.name} is a symbolic link in the "
                                                       "collection; refusing to follow it"})
                continue
            if not e.is_dir(follow_symlinks=False):
                continue
            hosts += 1
            if results.is_results_dir(e.path)[0]:
                jobs.append((e.name, Path(e.path)))
                continue
            newest, why = _newest(e.path)
            if newest is None:
                refused.append({"host": e.name, "why": _status_why(e.path) or why or
                                "no results directory in its folder"})
            else:
                jobs.append((e.name, newest))
        if not hosts:
            refused.append({"host": str(p), "why": "not a results directory, and no host "
                                                   "folders in it"})
    return jobs, refused


def compare(jobs, workers=0, progress=True, op=None):
    """(digests, refused) for [(host, dir)], read by a pool of worker processes; intervals
    for the cells of operation op (every cell when None)."""
    from ..analyse import rundigest
    ops = None if op is None else (op,)
    jobs = [(h, d, ops) for h, d in jobs]
    digests, refused = [], []
    workers = workers or os.cpu_count() or 1
    done = 0
    step = max(1, len(jobs) // 10)

    def take(job, res):
        nonlocal done
        d, why = res
        if d is None:
            refused.append({"host": job[0], "why": why})
        else:
            digests.append(d)
        done += 1
        if progress and len(jobs) >= 20 and done % step == 0:
            ui.progress(f"fleet: {done}/{len(jobs)} directories read")
    if workers <= 1 or len(jobs) < 4:
        for job in jobs:
            take(job, rundigest.safe_digest(job))
    else:
        ex = proc.pool(min(workers, proc.max_jobs()))
        try:
            for job, res in zip(jobs, ex.map(rundigest.safe_digest, jobs,
                                             chunksize=max(1, len(jobs) // (workers * 8)))):
                take(job, res)
            ex.shutdown()
        except BaseException:
            proc.stop_pool(ex)
            raise
    return digests, refused


def out_dir(arg, create=True):
    """The output folder: made new (default) or an existing empty one; never merged.  With
    create False, only checked (it is made once the database has opened)."""
    if arg is None:
        return files.new_directory(paths.RESULTS, "fleet") if create else None
    p = Path(arg)
    if p.is_symlink():
        raise UserError(f"{p}: is a symbolic link; give a real folder for --out")
    if p.exists():
        if not p.is_dir() or any(p.iterdir()):
            raise UserError(f"{p}: exists and is not an empty folder; outputs never merge",
                            "give a new folder with --out")
    elif create:
        p.mkdir(parents=True)
    return p


def atlas_jobs(root=None):
    """[(machine/run, run dir)] of the shipped atlas (analyse.atlas.runs)."""
    from ..analyse import atlas
    return [(f"{m}/{r.name}", r) for m, r in atlas.runs(root or atlas.ATLAS)]


def unique_labels(jobs):
    """[(label, dir)] with each label once: a host name met again is named with its
    directory too ('web1 (/b/web1/run)')."""
    seen, uniq = set(), []
    for h, d in jobs:
        label = h if h not in seen else f"{h} ({d})"
        while label in seen:
            label += "'"
        seen.add(label)
        uniq.append((label, d))
    return uniq


def refuse_out_inside(out_arg, jobs):
    """--out inside an input results directory would write into that host's results
    (issue 25, class 15): refused before anything is read."""
    if out_arg is None:
        return
    o = Path(out_arg).absolute().resolve(strict=False)
    for _, d in jobs:
        d = Path(d).absolute().resolve()
        if o == d or d in o.parents:
            raise UserError(f"{out_arg}: is inside the input results directory {d}; "
                            "tw fleet never writes into a host's results",
                            "give --out a folder outside every DIR")


# What a directory's identity in the database is made of: every file the digest depends on.
SOURCE_FILES = ("meta.json", "fingerprint.json", "percall.json", "percall.json.xz",
                "digest.json")


def source_key(d):
    """A results directory's files as they are now (device, inode, size, modification time of
    each), and the checkout's analysis: equal keys mean the directory need not be read again.
    A file rewritten, replaced or touched changes its key, and so does a new method."""
    from ..analyse import fleet as afleet
    parts = [afleet.ANALYSIS]
    for name in SOURCE_FILES:
        try:
            st = os.stat(Path(d) / name, follow_symlinks=False)
        except OSError:
            continue
        parts.append(f"{name}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}")
    return ";".join(parts)


def _via_database(con, jobs, workers, op):
    """(digests for the view, refused, new runs, labelled): each directory whose files are
    unchanged since it was stored is not read again; the rest are digested and stored; every
    digest the view shows is then read back from the database (store.fleetdb.load), with
    the view's own cells only (op's; every cell's for None).  labelled: [(label, run_id)],
    for fleetdb.all_columns and fleetdb.write_csv."""
    from ..analyse import fleet as afleet
    from ..analyse import rundigest
    from ..store import fleetdb
    known = fleetdb.sources(con)
    want = None if op is None else op
    fresh, labelled, srcs = [], [], {}
    for h, d in jobs:
        k = (str(Path(d).resolve()), source_key(d))
        hit = known.get(k)
        if hit and fleetdb.covers(hit[1], want):
            labelled.append((h, hit[0]))
        else:
            fresh.append((h, d))
            srcs[h] = k
    if len(jobs) >= 20:
        ui.progress(f"fleet: {len(jobs) - len(fresh)} of {len(jobs)} directories unchanged "
                    "since stored; reading the other " + str(len(fresh)))
    digests, refused = compare(fresh, workers, op=want) if fresh else ([], [])
    ids = {}
    added = fleetdb.ingest(con, digests, srcs, ids, method=afleet.ANALYSIS)
    labelled += [(dg["host"], ids[dg["host"]]) for dg in digests]
    bad = []
    digests = fleetdb.load(con, labelled, rundigest.checked, op=want, refused=bad)
    refused += [{"host": r["host"], "why": r["why"]} for r in bad]
    dropped = {r["run_id"] for r in bad}
    return digests, refused, added, [(h, rid) for h, rid in labelled if rid not in dropped]


def _view(con, jobs, workers, op, refused, db):
    """(the fleet view, drawn from the open database; its [(label, run_id)] for fleet.csv);
    every refused host printed once."""
    from ..analyse import fleet as afleet
    from ..store import fleetdb
    digests, bad, added, labelled = _via_database(con, jobs, workers,
                                                  None if op == "all" else op)
    total = con.execute("SELECT count(DISTINCT run_id) FROM runs").fetchall()[0][0]
    refused += bad
    for r in refused:
        ui.say(f"tw fleet: {r['host']}: {r['why']}")
    view = afleet.view(digests, refused, None if op == "all" else op,
                       all_columns=fleetdb.all_columns(con, labelled))
    del digests
    if db is not None:
        ui.progress(f"database: {db}: {added} new run(s), {total} in all")
    return view, labelled


def run(dirs, out_arg, op, workers, as_json, stream=None, atlas=False, db=None):
    from ..present import fleet as pfleet
    stream = stream or sys.stdout
    jobs, refused = discover(dirs)
    if atlas:
        jobs += atlas_jobs(os.environ.get("TW_ATLAS") or None)
    refuse_out_inside(out_arg, jobs)
    refuse_out_inside(db, jobs)
    jobs = unique_labels(jobs)
    if not jobs:
        for r in refused:
            ui.say(f"tw fleet: {r['host']}: {r['why']}")
        raise DataError("no results directory to compare (each refused above); nothing written")
    out_dir(out_arg, create=False)
    # The view is drawn from the database: the one given (--db), kept, or a temporary one.
    import tempfile
    from ..store import fleetdb
    if db is not None:
        fleetdb.check_path(db, out_arg, [d for _, d in jobs] + list(dirs))
    with tempfile.TemporaryDirectory(prefix="tw-fleet-db-") as tmp:
        path = db if db is not None else Path(tmp) / "fleet.duckdb"
        con = fleetdb.connect(path, scratch=Path(tmp))
        out = None
        try:
            with fleetdb.errors(path):
                # --out is made only now that the database has opened: a refused database
                # leaves nothing behind.
                existed = out_arg is not None and Path(out_arg).exists()
                out = out_dir(out_arg)
                view, labelled = _view(con, jobs, workers, op, refused, db)
                with files.confined(out):
                    pfleet.write(view, out, lambda p: fleetdb.write_csv(
                        con, labelled, p, view["all_columns"]))
        except BaseException:
            # A failure after --out was made (a full disk, a database damaged past its
            # header) leaves no empty folder of ours behind (pfleet.write removed its files).
            if out is not None and not existed:
                with contextlib.suppress(OSError):
                    out.rmdir()
            raise
        finally:
            con.close()
    if as_json:
        import json
        stream.write(json.dumps(view, indent=1, allow_nan=False) + "\n")
    else:
        stream.write(pfleet.text(view, out))
    return view, out


def verify(dirs, workers=0, as_json=False, stream=None):
    """tw fleet --verify: each host's digest.json against its raw rounds, one line each;
    returns the exit status (3 when one disagrees or was refused)."""
    from ..analyse import rundigest
    stream = stream or sys.stdout
    jobs, refused = discover(dirs)
    rows = [{"host": r["host"], "state": "refused", "why": r["why"]} for r in refused]
    workers = workers or os.cpu_count() or 1
    if workers <= 1 or len(jobs) < 4:
        got = [rundigest.safe_verify(j) for j in jobs]
    else:
        ex = proc.pool(min(workers, proc.max_jobs()))
        try:
            got = list(ex.map(rundigest.safe_verify, jobs))
            ex.shutdown()
        except BaseException:
            proc.stop_pool(ex)
            raise
    rows += [{"host": h, "state": s, "why": w} for h, s, w in got]
    rows.sort(key=lambda r: (r["state"] == "agrees", r["state"] == "none", r["host"]))
    if as_json:
        import json
        stream.write(json.dumps({"verified": rows}, indent=1) + "\n")
    else:
        for r in rows:
            stream.write(escape.terminal(f"{r['host']}: {r['state']}"
                                         + (f": {r['why']}" if r["why"] else "")) + "\n")
        n = {s: sum(1 for r in rows if r["state"] == s) for s in
             ("agrees", "disagrees", "none", "refused")}
        stream.write(f"{n['agrees']} agree, {n['disagrees']} disagree, {n['none']} without a "
                     f"digest of this method, {n['refused']} refused\n")
    bad = any(r["state"] in ("disagrees", "refused") for r in rows)
    return ui.EXIT_DATA if bad else ui.EXIT_OK


def main(args, name):
    if args.verify:
        if not args.dirs:
            raise UserError("--verify needs the results directories or collection folders "
                            "to check", "see tw fleet --help")
        if args.db or args.out or args.atlas or args.bench is not None:
            raise UserError("--verify only reads: it takes no --db, --out, --atlas or --bench")
        return verify(args.dirs, args.jobs, args.json)
    if args.bench is not None:
        if args.bench < 1:
            raise UserError("--bench N needs N >= 1")
        from ..drivers import fleetbench
        return fleetbench.bench(args.bench, args.jobs or os.cpu_count() or 1, args.out)
    if args.readiness:
        from . import fleetwatch
        if not args.dirs:
            raise UserError("give the collection folder(s) fleet/watch.yml filled")
        return fleetwatch.main(args)
    if not args.dirs and not args.atlas:
        raise UserError("give at least one results directory or collection folder, or --atlas",
                        "see tw fleet --help")
    view, _ = run(args.dirs, args.out, args.op, args.jobs, args.json, atlas=args.atlas,
                  db=args.db)
    if not view["machines"]:
        raise DataError("no directory could be compared (each refused above)")
    return ui.EXIT_DATA if view["refused"] else ui.EXIT_OK
