"""tw run: the whole investigation, measured into one results directory, then reported.

Stages run in order: doctor -> variants -> per-call matrix -> seed sweep -> TLPI
sweep -> writev/stdio -> tracers -> attribution -> observer effect -> field example ->
walls -> census -> legs -> report.
Each stage writes its own JSON file (docs/results-schema.md).  A stage that
fails is recorded in meta.json with its error and the run goes on: the report
then says which section is missing and why, rather than the whole run dying
after minutes of measuring.  The last line on stdout is the report's path.

A results directory is a transaction:

  - each run makes a new directory, <host>-<UTC time to the microsecond>Z-<pid>, with
    mkdir(2), which fails rather than share a directory with another run; --out makes the
    named directory the same way, and refuses one that exists unless --force, which
    replaces it (deleted first, never merged) and only when it is a results directory or
    empty;
  - meta.json says "state": "in-progress" from the start and is rewritten after every
    stage; at the end the state is "complete" (every stage ok), "failed" (a stage failed),
    "interrupted" (SIGINT, SIGTERM or SIGHUP: the stage that was cut is recorded as such)
    or "aborted" (the run could not go on: a full disk, an error of tw's own);
  - results/latest moves only to a complete run, atomically (a new symbolic link renamed
    over the old one), so it never points at a partial or failed run;
  - an interrupt stops the current stage (core.proc kills its process group), removes the
    scratch and temporary files (the stages' `finally` blocks, then clean_scratch here),
    records the state, and exits 128 + the signal's number with one line.
"""
import errno
import importlib
import json
import os
import re
import shutil
import socket
import sys
import time
import traceback
from pathlib import Path

from . import options
from ..core import files, paths, proc, ui
from ..machine import probe

RESULTS = paths.RESULTS
# Errors of the system (not of a measurement) that stop the whole run: every later stage
# would fail the same way.
FATAL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)

# The whole default run's time: `make report` ends within it on a noisy host too (issue 42,
# item 6).  The stages whose work can shrink, the matrix's rounds, the sweeps' rounds and the
# legs' blocks, end by a deadline that keeps RESERVE_S[stage] for every stage after them and
# the report; the others are fixed work.  Beside a noisy neighbour on the 2-core Intel guest
# the stages after the sweeps and the report took 97 s (70 s and 18 s on a quiet host, 78 s
# together) when the legs took 2 s; the legs' least (measure.legs.MIN_BLOCKS, about 3 s) and
# the report's reading of their larger file (22-29 s on a busy host) add about 8 s, so 105 s
# is kept after the sweeps, and 25 s more after the matrix for the sweeps' first four rounds.
# The legs add blocks up to their mode's while they can end 35 s before the budget.  On a
# quiet host no deadline binds (the matrix takes about 40 s, the sweeps about 25 s, the legs
# about 17 s).  The exit-price stage after the legs takes about 1.5 s on a quiet host and at
# most 8 s (measure.exitprice.BUDGET_S); its deadline keeps the report's 30 s, and the legs
# keep 3 s more than before for it.  Only a whole run has it: with --only, a stage runs its
# mode's work.  The sweeps run in two sessions (_together): the first takes half the time to
# the seed-sweep stage's deadline, the second (the tlpi-sweep stage, before the legs) as long
# again at most, and keeps 55 s for the legs' usual 12-17 s and what follows them; each gives
# each sweep two rounds at least, past its deadline if need be (about 6 s).  Default runs
# ended 17-23 s within their 180 s on the AMD EPYC guest, beside the neighbour too.
RUN_BUDGET_S = {"default": 180}
# The tlpi-sweep stage (the sweeps' second session) keeps 55 s, not 45: on an AMD EPYC Zen 3
# guest fast in a quarter of its probes the legs got 3 s of a default run (4 blocks, 2 of them
# in the host's fast state) and every leg was unknown (issue 71); with 10 s more, and each
# block waiting for a quiet moment first (measure.legs), they have room for the blocks the
# analysis needs, and the sweeps' last rounds go where their rows are widest (measure.sweep.
# Focus).
RESERVE_S = {"bench": 130, "seed-sweep": 105, "tlpi-sweep": 55, "legs": 38, "exit-price": 30}


def _call(module, func, **kw):
    """A stage that calls twtools.measure.<module>.<func>(out, mode=mode, **kw), imported lazily
    (with the run's deadline for the stage, when it has one)."""
    def stage(out, mode, **extra):
        mod = importlib.import_module(f"twtools.measure.{module}")
        return getattr(mod, func)(out, mode=mode, **kw, **extra)
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


def _exit_price(out, mode, deadline=None):
    """The price of a VM exit again, after every other stage (measure/exitprice.py), judged
    against this run's matrix (analyse/exitdrift.judge): the exit-paying cells' intervals
    then hold the price's move over the run."""
    from ..analyse import exitdrift, percall
    from ..measure import exitprice
    doc = files.read_json(out / "percall.json") if (out / "percall.json").exists() else None
    return exitprice.stage(out, mode, judge=exitdrift.judge(percall.analyse(doc), mode),
                           deadline=deadline)


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
    ("walls", _call("walls", "stage")),
    ("census", _call("census", "stage")),
    ("legs", _call("legs", "stage")),
    ("exit-price", _exit_price),
]


def measured_with(stage):
    """What a stage returns when another stage measured it: meta.json's stages then say so
    (measured_with), and its own seconds are none of the measuring's."""
    return {"measured_with": stage}


# The sweeps' second session (measure.sweep.Together) runs before the first of these stages
# the run has, a minute or more after the first; the first session takes this share of their
# rounds, and of their time to its deadline.
SECOND_SESSION_BEFORE = ("legs", "exit-price")
FIRST_SHARE = 0.5


def _together(wanted):
    """The stages to run, with the seed and TLPI sweeps measured together when both are
    wanted: their rounds take turns (measure.sweep.Together), so that the seed sweep's short
    rounds spread over both sweeps' time.  When other stages lie between the sweeps and the
    legs (a whole run), the seed-sweep stage measures the first half of both sweeps' rounds
    and the tlpi-sweep stage, moved to just before the legs, the rest: two moments a minute
    or more apart, because a copy-bound row moves with the host's memory in states that last
    tens of seconds, which one moment cannot see.  Without stages between them one session
    measures both, and the tlpi-sweep stage only says so.  Either way the tlpi-sweep stage
    fails as the seed-sweep stage did."""
    names = [n for n, _ in wanted]
    if "seed-sweep" not in names or "tlpi-sweep" not in names:
        return wanted
    later = next((n for n in SECOND_SESSION_BEFORE if n in names), None)
    split = bool(later) and any(n != "tlpi-sweep" for n in
                                names[names.index("seed-sweep") + 1:names.index(later)])
    state = {}

    def first(out, mode, deadline=None, **target):
        from ..measure import sweep
        both = None
        try:
            both = sweep.Together(out, mode, sessions=2 if split else 1, **target)
            if split:
                both.session(None if deadline is None else
                             time.monotonic() + (deadline - time.monotonic()) * FIRST_SHARE,
                             share=FIRST_SHARE)
                state["together"] = both
            else:
                both.session(deadline)
        except Exception as e:
            state["failed"] = e
            raise
        finally:
            if both is not None and "together" not in state:
                both.close()
        state["done"] = True

    def second(out, mode, deadline=None, **target):
        if "failed" in state:
            raise RuntimeError(f"measured with the seed sweep, which failed: "
                               f"{describe_error(state['failed'])}")
        if not state.get("done"):
            raise RuntimeError("the seed sweep, which measures it, did not run")
        both = state.pop("together", None)
        if both is None:
            ui.progress("tlpi-sweep: measured with the seed sweep, their rounds taking turns")
            return measured_with("seed-sweep")
        ui.progress("tlpi-sweep: the second session of both sweeps")
        try:
            # no longer than the first took: the legs after it adapt to what is left
            if deadline is not None:
                deadline = min(deadline, time.monotonic() + both.seconds)
            both.session(deadline)
        finally:
            both.close()
        return dict(measured_with("seed-sweep"), session=2)

    out = [(n, first if n == "seed-sweep" else second if n == "tlpi-sweep" else f)
           for n, f in wanted]
    if split:
        tl = next(x for x in out if x[0] == "tlpi-sweep")
        out.remove(tl)
        out.insert(next(i for i, x in enumerate(out) if x[0] == later), tl)
    return out


def add_arguments(p, name):
    options.add_mode_arguments(p, "a fast, less precise run (about a minute, the report "
                                  "included; used by the tests)",
                              "a slower, more precise run for publication")
    p.add_argument("--out", metavar="DIR",
                   help="results directory to create (default: a new results/<host>-<UTC "
                        "time>-<pid>); it must not exist, unless --force")
    p.add_argument("--force", action="store_true",
                   help="with --out: replace an existing results directory (or an empty one): "
                        "its files are deleted first, never merged with the new run's")
    p.add_argument("--only", metavar="STAGES", type=options.names_of([s[0] for s in STAGES], "stage"),
                   help="comma list of stages to run (default: all): "
                        + ", ".join(s[0] for s in STAGES))
    p.add_argument("--no-report", action="store_true", help="measure only; run `tw report DIR` later")
    p.add_argument("--walls", action="store_true",
                   help="the walls stage measures every standard wall (a one-instruction "
                        "seccomp filter, the container profile, audit, a tracer on "
                        "raw_syscalls) on every way in, not only the container profile on the "
                        "first screen's two cells: about two and a half minutes more")
    options.add_target_arguments(
        p, "the seed and TLPI sweeps and the legs measure past their mode's work until precise "
           "to PCT (e.g. 2%%): the sweeps add rounds, at the sizes still wide, until every async "
           "vs_ref row's 95%% half-width is within it (or more rounds narrow nothing), the legs "
           "blocks until every figure is (as tw sweep --target and tw legs --target); the run's "
           "180 s plan then gives way (the matrix measures its mode's rounds: tw bench --target "
           "for it)",
        "with --target, how long the sweeps (both together) and the legs may each try (90s, "
        "10m, 1h; default 10m)")
    p.add_argument("--speculation", choices=("ssbd", "indirect-branch", "all"),
                   help="measure with a per-process speculation mitigation switched on "
                        "(prctl PR_SET_SPECULATION_CTRL, inherited by every program run): "
                        "compare the results with a normal run using `tw compare`")


def _host():
    """The host name as a directory-name part: letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname().split(".")[0]) or "host"


def new_results_dir(parent=None):
    """Make and return a new results directory under parent (results/), named for the host,
    the UTC time to the microsecond and the pid (core.files.new_directory: never shared)."""
    return files.new_directory(parent or RESULTS, _host())


def prepare_out(out, force=False):
    """Make the --out directory, new.  An existing one is refused unless force; with force it
    is replaced (renamed aside, deleted, then made anew), and only if it is a results
    directory or empty: --force must never delete something that is not tw's."""
    from ..analyse import results
    out = Path(out)
    if out.is_symlink():
        raise ui.UserError(f"--out {out} is a symbolic link",
                           "give the path of a new directory (tw writes into directories it "
                           "makes itself)")
    if out.exists():
        if not force:
            raise ui.UserError(f"--out {out} already exists",
                               "choose a new directory, or add --force to replace it (its files "
                               "are deleted first; nothing is merged)")
        if not out.is_dir():
            raise ui.UserError(f"--out {out} exists and is not a directory",
                               "choose a new directory")
        is_results, why = results.is_results_dir(out)
        if not is_results and any(out.iterdir()):
            raise ui.UserError(f"--out {out}: --force replaces only a results directory or an "
                               f"empty one, and this is neither ({why})",
                               "choose a new directory, or remove this one yourself")
        aside = out.with_name(f".{out.name}.replaced-{os.getpid()}")
        os.rename(out, aside)       # the name is free at once; the old files are gone next
        shutil.rmtree(aside)
        ui.progress(f"--force: removed the old {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(out, 0o755)        # fails if another run made it meanwhile: never shared
    except FileExistsError:
        raise ui.UserError(f"--out {out} was created by someone else meanwhile",
                           "choose a new directory") from None
    return out


def _latest_link(out):
    """results/latest when out is directly under results/ (the link is kept there), else None."""
    try:
        return RESULTS / "latest" if out.parent.resolve() == RESULTS.resolve() else None
    except OSError:
        return None


def check_latest(link):
    """Refuse to start a run whose results/latest could not be moved at its end: a real
    directory there may hold results, and tw replaces only its own symbolic link."""
    if link is not None and os.path.lexists(link) and not link.is_symlink():
        raise ui.SystemRefused(f"{link} is a real {'directory' if link.is_dir() else 'file'}, "
                               "not the symbolic link tw keeps pointing at the newest complete run",
                               f"move it away (it may hold results: mv {link} {link}.old) and "
                               "run again")


def point_latest(out):
    """results/latest -> out (relative, so a copied tree still works), atomically: a new link
    under a temporary name, renamed over the old one.  Only for a complete run."""
    link = _latest_link(out)
    if link is None:
        return None
    check_latest(link)
    tmp = link.with_name(f".latest.{os.getpid()}.tmp")
    with proc.deferred_signals():
        if os.path.lexists(tmp):
            tmp.unlink()
        os.symlink(out.name, tmp)
        try:
            os.replace(tmp, link)
        except OSError:
            tmp.unlink()
            raise
        fd = os.open(link.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
    return link


def latest_target(link):
    """Where results/latest points now (for messages), or None."""
    try:
        return os.readlink(link) if link is not None and link.is_symlink() else None
    except OSError:
        return None


def clean_scratch(out):
    """Remove what an interrupted or failed stage can leave in the results directory: the
    sweeps' scratch directory and half-written temporary files (.NAME.PID.tmp)."""
    from ..measure import sweep
    for d in (sweep.SCRATCH, sweep.SESSIONS_SCRATCH):
        shutil.rmtree(Path(out) / d, ignore_errors=True)
    for t in Path(out).glob(f".*.{os.getpid()}.tmp"):
        try:
            t.unlink()
        except OSError:
            pass


def merge(out):
    """results.json: every stage file under its stem, so one file carries the run."""
    merged = {"schema": "timewrite-results/1"}
    for f in sorted(out.glob("*.json")):
        if f.name in ("results.json",):
            continue
        merged[f.stem] = json.loads(f.read_text())
    files.write_json(out / "results.json", merged)


def describe_error(e):
    """A stage's error as recorded and shown: OSErrors by errno name and file."""
    if isinstance(e, OSError) and e.errno:
        return f"{proc.errno_name(e.errno)}: {e.strerror or e}" + \
            (f": {e.filename}" if e.filename else "")
    return f"{type(e).__name__}: {e}"


def repeat_command(mode, only, report, setting, walls=False, target=None, budget_s=None):
    """The command that measures what this run measures, to paste from the checkout: its
    mode, stages, setting and --target (not where it wrote).  The whole default run is `make
    report`; any other is the `tw run` that ran, so that a results directory never claims more
    than it holds (a fleet's `tw run --quick --only doctor,variants,bench` is not `make
    report`)."""
    extra = [f"--{mode}"] if mode != "default" else []
    if setting and setting.get("speculation"):
        extra += ["--speculation", setting["speculation"]]
    if walls:
        extra.append("--walls")
    extra += options.target_argv(target, budget_s)
    if not only and report and not extra:
        return "make report"
    words = ["scripts/tw", "run", *extra]
    if only:
        words += ["--only", ",".join(s[0] for s in STAGES if s[0] in only)]
    if not report:
        words.append("--no-report")
    return ui.command_line(words)


# The stages tw run --target reaches, each with its judge (cli.stages): the sweeps' and the legs'.
TARGET_STAGES = ("seed-sweep", "tlpi-sweep", "legs")


def _target_kw(name, target, budget_s):
    """The keywords that take --target to stage `name` ({} for a stage it does not reach).
    Without --target the sweeps get a focus instead: past their first rounds, their rounds
    measure the async sizes whose vs_ref rows are still wider than the report's ±2%
    (measure.sweep.Focus), so that a noisy host's time goes where the rows are widest."""
    from . import stages
    if target is None:
        if name in ("seed-sweep", "tlpi-sweep"):
            from ..analyse import sweeps
            return {"focus": stages.sweep_judge(sweeps.REPORT_TARGET)}
        return {}
    if name not in TARGET_STAGES:
        return {}
    judge = stages.legs_judge(target) if name == "legs" else stages.sweep_judge(target)
    return {"target": target, "budget_s": budget_s, "judge": judge}


def run(out=None, mode="default", only=None, report=True, argv=None, setting=None, force=False,
        walls=False, target=None, budget_s=None):
    """Measure every stage (or `only` those) into a new results directory; then the report.
    walls: the walls stage measures every standard wall (tw run --walls).  target, budget_s
    (tw run --target, --budget): the sweeps and the legs measure until within the target or
    their budget ends (TARGET_STAGES), and the run's time plan (RUN_BUDGET_S) gives way.
    Returns (report path or the directory, meta)."""
    # An absolute path from here on: a relative name that starts with '-' must never reach a
    # program's command line, where it would read as an option.
    out = Path(out).absolute() if out else None
    # results/latest is checked before anything is made: a run that could not move it at its
    # end must not start.
    link = _latest_link(out if out else RESULTS / "new")
    check_latest(link)
    out = prepare_out(out, force) if out else new_results_dir()
    wanted = _together([s for s in STAGES if not only or s[0] in only])
    from ..analyse import results
    meta = results.new_meta(mode, [s[0] for s in wanted], "in-progress", argv)
    from ..machine import speculation
    meta["setting"] = setting or {"speculation": None, "status": speculation.status()}
    if target is not None and budget_s is None:
        budget_s = options.TARGET_BUDGET_S
    meta["command"] = repeat_command(mode, only, report, setting, walls, target,
                                     budget_s if budget_s != options.TARGET_BUDGET_S else None)
    meta["walls_full"] = walls
    budget = RUN_BUDGET_S.get(mode) if not only and target is None else None
    meta["budget_s"] = budget
    meta["target"] = target
    meta["target_budget_s"] = budget_s if target is not None else None
    t0 = time.monotonic()
    try:
        files.write_json(out / "meta.json", meta)
    except BaseException:
        # Not a results directory yet (no meta.json): leave nothing behind.
        shutil.rmtree(out, ignore_errors=True)
        raise
    current, ts = None, t0
    try:
        for i, (name, stage) in enumerate(wanted, 1):
            current = name
            ui.progress(f"[{i}/{len(wanted)}] {name} ({mode}) ...")
            ts = time.monotonic()
            try:
                kw, rec = {}, {}
                if budget is not None and name in RESERVE_S:
                    kw["deadline"] = t0 + budget - RESERVE_S[name]
                    rec["deadline_s"] = round(kw["deadline"] - t0, 1)
                if name == "walls":
                    kw["full"] = walls
                if name == "legs" and not only and target is None:
                    # the reference's legs known in every whole run, past its time or its
                    # mode's blocks if need be
                    from . import stages
                    kw["known"] = stages.legs_known()
                kw.update(_target_kw(name, target, budget_s))
                got = stage(out, mode, **kw)
                meta["stages"][name] = dict(rec, ok=True, seconds=round(time.monotonic() - ts, 2))
                for k in ("measured_with", "session"):
                    if isinstance(got, dict) and k in got:
                        meta["stages"][name][k] = got[k]
            except Exception as e:  # recorded, reported, and the run goes on
                detail = traceback.format_exc(limit=3)
                meta["stages"][name] = {"ok": False, "seconds": round(time.monotonic() - ts, 2),
                                        "error": describe_error(e), "traceback": detail}
                if isinstance(e, OSError) and e.errno:
                    meta["stages"][name]["errno"] = proc.errno_name(e.errno)
                if isinstance(e, OSError) and e.errno in FATAL_ERRNOS:
                    raise ui.SystemRefused(
                        f"stage {name} failed: {describe_error(e)}",
                        f"free space or write elsewhere (--out DIR, TW_RESULTS=DIR); {out} is "
                        "marked aborted" + (f", and {link} still points at "
                                            f"{latest_target(link) or 'nothing'}" if link else ""))
                ui.warn(f"stage {name} failed: {describe_error(e)}",
                        f"the report marks its section as missing; details in {out}/meta.json")
            current = None      # recorded: an interrupt from here on did not cut this stage
            ui.progress(f"[{i}/{len(wanted)}] {name} done in {time.monotonic() - ts:.1f} s")
            meta["duration_s"] = round(time.monotonic() - t0, 2)
            files.write_json(out / "meta.json", meta)
        current = None
        failed = [k for k, v in meta["stages"].items() if not v["ok"]]
        meta["state"] = "failed" if failed else "complete"
        meta["finished_utc"] = results.now_utc()
        files.write_json(out / "meta.json", meta)
        merge(out)
    except ui.Interrupted as e:
        # Signals are ignored from here on (core.proc): the clean-up runs to its end.
        if current is not None:
            meta["stages"][current] = {"ok": False, "interrupted": True,
                                       "seconds": round(time.monotonic() - ts, 2),
                                       "error": f"interrupted by {e.name}"}
            # the rounds the stage measured before the signal, where it keeps them (the
            # matrix, the sweeps, the legs: measure/ writes them marked interrupted)
            kept = [f"{stem}.json" for stem, st in results.STAGE_OF.items()
                    if st == current and (out / f"{stem}.json").exists()]
            if kept:
                meta["stages"][current]["kept"] = ", ".join(kept)
        meta.update(state="interrupted", signal=e.name, finished_utc=results.now_utc(),
                    duration_s=round(time.monotonic() - t0, 2))
        clean_scratch(out)
        saved = _save_meta(out, meta)
        done = [k for k, v in meta["stages"].items() if v.get("ok")]
        e.message = (f"interrupted by {e.name}" + (f" during stage {current}" if current else
                                                   " between stages")
                     + f"; {out} is {'marked interrupted' if saved else 'incomplete'} (completed: "
                     + (", ".join(done) or "none") + ")"
                     + (f"; {link} still points at {latest_target(link) or 'nothing'}" if link else ""))
        raise
    except BaseException as e:
        # The run cannot go on (a full disk, a bug): say so in meta.json if the disk lets us.
        meta.update(state="aborted", error=(meta["stages"].get(current) or {}).get("error")
                    or describe_error(e), finished_utc=results.now_utc())
        clean_scratch(out)
        _save_meta(out, meta)
        raise
    if meta["state"] == "complete":
        point_latest(out)
    if not report:
        # The digest is written where the run is measured (a fleet compares digests); the
        # report writes it again, so `tw run` with the report writes it there.
        from ..present.report import write_digest
        write_digest(out)
    if report:
        from ..present import report as rep
        ui.progress("writing the report ...")
        try:
            t_rep = time.monotonic()
            with files.confined(out):
                path = rep.build_report(out)
            # the report's own seconds beside the stages' (issue 62: where the time goes)
            meta["report_s"] = round(time.monotonic() - t_rep, 2)
            meta["total_s"] = round(time.monotonic() - t0, 2)
            _save_meta(out, meta)
            merge(out)  # the report adds verdict.json
        except ui.Interrupted as e:
            e.message = (f"interrupted by {e.name} while writing the report; the measurements "
                         f"in {out} are {meta['state']}: rebuild the report with "
                         + ui.command_line(["scripts/tw", "report", str(out)]))
            raise
        ui.progress(f"done in {time.monotonic() - t0:.0f} s")
        return path, meta
    return out, meta


def _save_meta(out, meta):
    """Write meta.json if the system lets us (a full disk may not); True when written."""
    try:
        files.write_json(out / "meta.json", meta)
        return True
    except OSError:
        return False


def main(args, name):
    only = set(args.only) if args.only else None
    if args.force and not args.out:
        raise ui.UserError("--force needs --out DIR (a new run always gets a new directory)")
    options.budget_needs_target(args)
    if args.target is not None and only is not None and not only & set(TARGET_STAGES):
        raise ui.UserError("--target is for the seed and TLPI sweeps and the legs, and --only "
                           "leaves them out",
                           "add seed-sweep, tlpi-sweep or legs to --only (tw bench --target "
                           "for the matrix)")
    if not proc.is_root():
        ui.warn("not running as root: bpftrace and perf tracepoints are blind",
                    "their figures are reported as unknown; re-run as root for the full attribution")
    setting = None
    if args.speculation:
        from ..machine import speculation
        try:
            setting = speculation.apply(args.speculation)
        except speculation.NotControllable as e:
            # e.strerror begins with the control's name: "ssbd: the kernel does not ..."
            print(f"tw run: --speculation {e.strerror}", file=sys.stderr)
            return 2
        except OSError as e:
            print(f"tw run: --speculation {args.speculation}: {e.strerror}", file=sys.stderr)
            return 2
        ui.progress(f"speculation mitigation on: {setting['status']}")
    path, meta = run(args.out, args.mode, only, report=not args.no_report, setting=setting,
                     force=args.force, walls=args.walls, target=args.target,
                     budget_s=args.budget)
    failed = [k for k, v in meta["stages"].items() if not v["ok"]]
    if failed:
        where = Path(path).parent if Path(path).is_file() else path
        link = _latest_link(Path(where))
        ui.warn(f"{len(failed)} stage(s) failed: {', '.join(failed)}",
                f"see {where}/meta.json" + (f"; {link} still points at "
                                            f"{latest_target(link) or 'nothing'}" if link else ""))
    print(os.path.relpath(path) if str(path).startswith(os.getcwd()) else path)
    return ui.EXIT_FAILED if failed else ui.EXIT_OK
