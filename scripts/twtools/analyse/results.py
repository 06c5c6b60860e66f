"""A results directory, read, validated and analysed: the one way every reader gets at results.

`tw report`, `tw compare`, `tw explain` and the verdict call load(); it reads the stage files
and computes every summary from their raw samples, every time, with the methods of this
checkout.  So a change to the statistics reaches old results directories too, and a
comparison of an old and a new run uses one method.  Figures that an old stage file kept only
as a stored summary are used as stored and listed in analysis.from_stored.

Reading is validation.  A results directory is a directory with a meta.json whose schema is
timewrite-results/<n> (is_results_dir); anything else is refused.  Every stage file is
checked as it is read (twtools.analyse.schema): a regular file inside the directory (not a
symbolic link out of it, not a FIFO), JSON, its schema family and a version this checkout
reads (no schema field: the legacy form, said so in analysis.legacy), the types of every field
a reader uses, and finite numbers only.  A file that fails is one DataError naming the file
and what is wrong.  After analysis no number that is not finite is left anywhere: one that a
computation produced becomes null with a why, and is listed in analysis.nonfinite.

The state of the run (complete, failed, interrupted, in progress) comes from meta.json;
run_state() says it in one line for the top of a report, and stage_problem() says why a
stage's figures must not be used, for whoever draws conclusions from them.
"""
import datetime as dt
import json
import math
import os
import socket
import sys
from pathlib import Path

from ..core import files, version
from ..core.ui import DataError
from . import attribution, causes, census, diagnose, exitdrift, latency, legs, observer, percall, \
    schema, sweeps, tracers, walls

# Bump when a method changes what a figure means; reports print it.
ANALYSIS_VERSION = "2"
STEMS = ("meta", "fingerprint", "variants", "percall", "sweep_seed", "sweep_tlpi", "writev",
         "stdio", "tracers", "attribution", "observer", "latency", "diagnose", "census", "legs",
         "exitprice", "walls")
RESULTS_SCHEMA = "timewrite-results"
# stage-file stem -> the stage of tw run that writes it (meta.json's stage names)
STAGE_OF = {"fingerprint": "doctor", "variants": "variants", "percall": "bench",
            "sweep_seed": "seed-sweep", "sweep_tlpi": "tlpi-sweep", "writev": "writev",
            "stdio": "stdio", "tracers": "tracers", "latency": "tracers",
            "attribution": "attribution", "observer": "observer", "diagnose": "field-example",
            "census": "census", "legs": "legs", "exitprice": "exit-price", "walls": "walls"}
# The stages whose files the verdict reads (twtools.analyse.verdict.decide).
VERDICT_STAGES = ("doctor", "bench", "seed-sweep")
STATES = ("in-progress", "complete", "failed", "interrupted", "aborted")


# ---- is this a results directory? ----------------------------------------------------------

def is_results_dir(path):
    """(True, None) when path is a directory with a meta.json of schema timewrite-results/<n>
    that this checkout reads; else (False, why)."""
    try:
        require_results_dir(path)
        return True, None
    except DataError as e:
        return False, e.message


def require_results_dir(path):
    """The directory as a Path when it is a results directory; else DataError, one line:
    `tw report` and `tw compare` refuse anything else before reading or writing a byte."""
    d = Path(path)
    if not d.exists():
        raise DataError(f"{d}: no such directory", "give a results directory (results/latest, "
                                                   "or one that tw run made)")
    if not d.is_dir():
        raise DataError(f"{d}: is not a directory", "give a results directory")
    meta = d / "meta.json"
    try:
        raw = files.read_regular(meta, inside=d)
    except OSError as e:
        raise DataError(f"{meta}: cannot be read: {e.strerror}") from None
    if raw is None:
        raise DataError(f"{d}: not a results directory (it has no meta.json)",
                        "give a directory made by tw run (results/latest is the newest)")
    obj = _parse(meta, raw)
    if not isinstance(obj, dict) or not isinstance(obj.get("schema"), str) \
            or not obj["schema"].startswith(RESULTS_SCHEMA + "/"):
        raise DataError(f"{meta}: not a results directory's meta.json (no \"schema\": "
                        f"\"{RESULTS_SCHEMA}/<n>\")",
                        "give a directory made by tw run (results/latest is the newest)")
    _check(meta, "meta", obj)
    return d


# ---- reading ------------------------------------------------------------------------------

def _reject_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


def _parse(path, raw):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not UTF-8 text (byte {e.start}): damaged or not a stage "
                        "file") from None
    if not text.strip():
        raise DataError(f"{path}: empty (a write that never finished, or a truncated copy)",
                        "re-run the stage, or copy the directory again")
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as e:
        trunc = " (the file ends early: truncated)" if e.pos >= len(text.rstrip()) else ""
        raise DataError(f"{path}: not valid JSON at line {e.lineno} column {e.colno}: "
                        f"{e.msg}{trunc}", "re-run the stage, or copy the directory again") \
            from None
    except ValueError as e:
        raise DataError(f"{path}: {e} (stage files never hold NaN or infinity)") from None
    except RecursionError:
        raise DataError(f"{path}: nested too deeply to be a stage file") from None


def _check(path, stem, obj):
    """The stage file's schema name ('legacy' when it has none); DataError when obj does not
    fit the stage's spec."""
    family, newest, spec = schema.STAGES[stem]
    try:
        version = schema.schema_of(stem, obj)
        schema.finite(obj)
        schema.check(spec, obj)
    except schema.Invalid as e:
        where = f"{e.path}: " if e.path else ""
        raise DataError(f"{path}: {where}{e.what}", e.hint) from None
    return version


# A stage file larger than any its stage writes is refused before it is read: tw legs
# --long on a dozen mechanisms writes about 55 MB (4.4 MB of stamps each); a 98 MB legs.json
# took 53 s and 650 MB to read and check.
STAGE_LIMIT = {"legs": 64 << 20}


def read_stage(results_dir, stem):
    """(object or None when the file is absent, its schema name) for one stage file: STEM.json,
    or where there is none STEM.json.xz, as the atlas (data/machines/) and a run kept in the
    repository store it (decompressed bounded; a damaged or truncated one refused, named)."""
    d = Path(results_dir)
    path = d / f"{stem}.json"
    limit = STAGE_LIMIT.get(stem, files.MAX_READ)
    try:
        raw = files.read_regular(path, inside=d, limit=limit)
        if raw is None:
            path = d / f"{stem}.json.xz"
            raw = files.read_regular(path, inside=d, limit=limit)
            if raw is not None:
                raw = files.unxz(path, raw, limit)
    except OSError as e:
        raise DataError(f"{path}: cannot be read: {e.strerror}") from None
    if raw is None:
        return None, None
    obj = _parse(path, raw)
    return obj, _check(path, stem, obj)


def read(results_dir):
    """Every stage file of a results directory as {stem: obj or None}, each validated, plus
    '_schemas': {stem: schema name or 'legacy'} of the files present.  DataError (one line,
    naming the file) for the first one that fails, or when the directory is not a results
    directory."""
    d = require_results_dir(results_dir)
    out, schemas = {}, {}
    for s in STEMS:
        out[s], name = read_stage(d, s)
        if out[s] is not None:
            schemas[s] = name
    out["_schemas"] = schemas
    return out


# ---- analysing ----------------------------------------------------------------------------

def _scrub(o, path, found):
    """o without any non-finite float: each becomes None (a summary whose median goes gets a
    why); the paths are appended to found."""
    if isinstance(o, float):
        if math.isfinite(o):
            return o
        found.append(path)
        return None
    if isinstance(o, dict):
        out = {k: _scrub(v, f"{path}.{k}", found) for k, v in o.items()}
        if "median" in o and isinstance(o["median"], float) and not math.isfinite(o["median"]):
            out["why"] = out.get("why") or "the analysis produced a value that is not a number"
            out["unstable"] = True
        return out
    if isinstance(o, list):
        return [_scrub(v, f"{path}[{i}]", found) for i, v in enumerate(o)]
    return o


def analyse(raw):
    """The analysed view of a results directory: the same stems, each stage's figures
    computed from its raw samples, the raw files under 'raw', and 'analysis' saying how."""
    raw = dict(raw)
    schemas = raw.pop("_schemas", {})
    data = dict(raw)
    data["raw"] = raw
    from_stored = []
    data["percall"] = percall.analyse(raw.get("percall"))
    if data["percall"] and data["percall"]["source"] != "raw rounds":
        from_stored.append(f"percall: {data['percall']['source']}")
    for stem in ("sweep_seed", "sweep_tlpi"):
        data[stem] = sweeps.sweep(raw.get(stem))
    # Each call's way in, body and way out, on one clock (tw run's legs stage).
    data["legs"] = legs.analyse(raw.get("legs"))
    # Why each mechanism costs what it does: the cost model over the matrix, the facts and
    # the legs.
    # A mitigation's own instruction timed from user space in the legs' blocks prices it (a
    # lower bound) where the mitigation table names that instruction.
    prices = {op: x for op, x in ((data["legs"] or {}).get("instructions") or {}).items()
              if x.get("value") is not None}
    data["causes"] = causes.compute_from(data["percall"], raw.get("fingerprint"), data["legs"],
                                         raw.get("percall"), prices or None) \
        if data["percall"] else None
    data["writev"] = sweeps.writev(raw.get("writev"))
    data["stdio"] = sweeps.stdio(raw.get("stdio"))
    data["attribution"] = attribution.analyse(raw.get("attribution"), data["percall"])
    data["observer"] = observer.analyse(raw.get("observer"))
    data["latency"] = latency.analyse(raw.get("latency"))
    data["tracers"] = tracers.analyse(raw.get("tracers"))
    fe = raw.get("diagnose")
    if fe and fe.get("raw"):
        data["diagnose"] = dict(fe, diagnosis=diagnose.diagnose(
            fe["raw"], raw.get("percall"), "this results directory's per-call matrix",
            fe.get("overhead")))
    # What a wall adds here (tw run's walls stage): before the census, which prices the
    # processes behind walls with it.
    data["walls"] = walls.analyse(raw.get("walls"))
    if raw.get("census"):
        data["census"] = census.analyse(raw["census"], raw.get("percall"),
                                        "this results directory's per-call matrix" if
                                        raw.get("percall") else "this run has no bench stage",
                                        walls=data["walls"])
    # The exit's price again at the run's end: the cells that pay exits get intervals that
    # hold its move over the run (analyse/exitdrift.py), after every analysis above has
    # used the matrix's own moment.
    data["exitprice"] = exitdrift.hold(raw.get("exitprice"), data["percall"], data["causes"],
                                       [data[x] for x in ("sweep_seed", "sweep_tlpi") if data[x]])
    if data["attribution"] and data["attribution"].get("source", "").startswith("stored"):
        from_stored.append(f"attribution: {data['attribution']['source']}")
    nonfinite = []
    for stem in STEMS:
        if stem not in ("meta", "variants", "fingerprint"):
            data[stem] = _scrub(data[stem], stem, nonfinite)
    data["analysis"] = {"version": ANALYSIS_VERSION,
                        "methods": {m.__name__.rsplit(".", 1)[1]: m.ANALYSIS for m in
                                    (percall, sweeps, attribution, observer, latency, tracers,
                                     exitdrift)},
                        "from_stored": from_stored,
                        "schemas": schemas,
                        "legacy": sorted(f"{s}.json" for s, v in schemas.items() if v == "legacy"),
                        "nonfinite": nonfinite}
    return data


def load(results_dir):
    return analyse(read(results_dir))


# ---- writing: the head of meta.json -------------------------------------------------------

def now_utc():
    """The time meta.json records (created_utc, finished_utc): UTC, to the second."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_meta(mode, stages_wanted, state, argv=None):
    """The head of a results directory's meta.json, as tw run starts it and tw bench writes it
    for the bench stage alone: the schema, the state, who wrote it and when, the stages
    wanted, and none recorded yet."""
    return {"schema": f"{RESULTS_SCHEMA}/1", "state": state, "created_utc": now_utc(),
            "version": version.get(), "host": socket.gethostname(), "pid": os.getpid(),
            "mode": mode, "argv": list(argv if argv is not None else sys.argv),
            "stages_wanted": list(stages_wanted), "stages": {}}


# ---- the state of the run -----------------------------------------------------------------

def _alive(pid, host):
    """Whether the process that wrote an in-progress meta.json may still be running: only
    knowable on the same host."""
    if not isinstance(pid, int) or host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def run_state(data):
    """The state of the run a results directory holds, from meta.json (data from load() or
    read(), or the meta dict itself):

      {state: complete|failed|interrupted|in-progress|aborted|legacy, finished: bool,
       completed: [stages ok], failed: {stage: error}, not_run: [stages wanted, not recorded],
       interrupted_stage, kept: {stage: the file it kept}, headline}

    A stage a signal cut may have kept its raw rounds so far (`kept` in its meta.json entry:
    tw bench's matrix, tw sweep's and tw legs' rounds, tw run's stage that was measuring):
    the report shows them, marked interrupted, and `tw compare` decides on a kept matrix.

    headline is None for a complete run (and for a legacy meta.json without a state, whose
    stages table says what ran); otherwise one sentence for the first line of a report, saying
    what happened, what completed and that nothing missing is concluded from."""
    meta = data.get("meta") if isinstance(data, dict) and "meta" in data else data
    meta = meta or {}
    stages = meta.get("stages") or {}
    completed = [k for k, v in stages.items() if v.get("ok")]
    failed = {k: v.get("error") or "no error recorded" for k, v in stages.items()
              if not v.get("ok") and not v.get("interrupted")}
    cut = next((k for k, v in stages.items() if v.get("interrupted")), None)
    kept = {k: v["kept"] for k, v in stages.items() if v.get("interrupted") and v.get("kept")}
    wanted = meta.get("stages_wanted") or list(stages)
    not_run = [s for s in wanted if s not in stages]
    state = meta.get("state")
    out = {"state": state or "legacy", "finished": state in ("complete", "failed", None),
           "completed": completed, "failed": failed, "not_run": not_run,
           "interrupted_stage": cut, "kept": kept, "headline": None}
    done = f"completed: {', '.join(completed) or 'none'}"
    nothing = "no section, figure or verdict is drawn from the stages that did not complete"
    if state == "interrupted":
        sig = meta.get("signal") or "a signal"
        out["headline"] = (f"This run was interrupted by {sig}" + (f" during stage {cut}" if cut else "")
                           + f" and is incomplete ({done})"
                           + (f"; the rounds stage {cut} measured before the signal are kept "
                              f"({kept[cut]}) and shown, marked interrupted; no verdict is "
                              "drawn from the run, and no section or figure from the stages "
                              "that did not run." if cut in kept else f"; {nothing}."))
    elif state == "in-progress":
        alive = _alive(meta.get("pid"), meta.get("host"))
        who = (f"process {meta.get('pid')} on {meta.get('host')} is still measuring" if alive else
               f"process {meta.get('pid')} that wrote it is gone: it was killed or its disk filled"
               if alive is False else "it was written on another host or by an unknown process")
        out["headline"] = (f"This run did not finish: meta.json still says in progress ({who}; "
                           f"{done}); {nothing}.")
    elif state == "aborted":
        out["headline"] = (f"This run stopped early: {meta.get('error') or 'an error'} ({done}); "
                           f"{nothing}.")
    elif state == "failed" or (state is None and failed):
        out["headline"] = ("This run finished with failed stages: "
                           + "; ".join(f"{k} ({v})" for k, v in failed.items())
                           + f"; {nothing}.")
    elif state not in (None, "complete"):
        out["headline"] = f"This run's state is {state!r}, unknown to this checkout; {nothing}."
    return out


def stage_problem(data, stem):
    """None when the figures of a stage file may be used; else why not ('stage bench was
    interrupted', 'stage tracers failed: ENOSPC ...', 'stage bench did not run', 'percall.json
    is absent').  A stage a signal cut that kept its rounds so far (`kept`) may be used: its
    figures rest on the rounds it measured, and the run's headline says so.  For whoever draws a conclusion (the verdict, a comparison's decisions)."""
    stage = STAGE_OF.get(stem, stem)
    st = ((data.get("meta") or {}).get("stages") or {}).get(stage)
    present = (data.get("raw") or data).get(stem) is not None
    if st is not None and st.get("interrupted"):
        return None if st.get("kept") and present else f"stage {stage} was interrupted"
    if st is not None and not st.get("ok"):
        return f"stage {stage} failed: {st.get('error') or 'no error recorded'}"
    if not present:
        return f"{stem}.json is absent (stage {stage} " + \
            ("ran but wrote nothing)" if st else "did not run)")
    return None


def verdict_blockers(data):
    """Why no verdict may be drawn from this run: [] when it may.  A run that did not finish
    gives none, nor one whose doctor or bench stage failed or was interrupted (the verdict
    reads their files), nor one whose seed-sweep stage failed or was interrupted (it reads
    the 256 B rows).  An absent file is left to the verdict's own rules, which say so."""
    st = run_state(data)
    out = [st["headline"]] if not st["finished"] else []
    for stem in ("fingerprint", "percall", "sweep_seed"):
        p = stage_problem(data, stem)
        if p and ".json is absent" not in p:
            out.append(p)
    return out
