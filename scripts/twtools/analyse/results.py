"""A results directory, read and analysed: the one way every reader gets at results.

`tw report`, `tw compare`, `tw explain` and the verdict call load(); it reads the stage files
and computes every summary from their raw samples, every time, with the methods of this
checkout.  So a change to the statistics reaches old results directories too, and a
comparison of an old and a new run uses one method.  Figures that an old stage file kept only
as a stored summary are used as stored and listed in analysis.from_stored.
"""
from pathlib import Path

from ..core import files
from . import attribution, diagnose, latency, observer, percall, sweeps, tracers

# Bump when a method changes what a figure means; reports print it.
ANALYSIS_VERSION = "2"
STEMS = ("meta", "fingerprint", "variants", "percall", "sweep_seed", "sweep_tlpi", "writev",
         "stdio", "tracers", "attribution", "observer", "latency", "diagnose")


def read(results_dir):
    """Every stage file of a results directory as {stem: obj or None}."""
    d = Path(results_dir)
    return {s: files.read_json(d / f"{s}.json") for s in STEMS}


def analyse(raw):
    """The analysed view of a results directory: the same stems, each stage's figures
    computed from its raw samples, the raw files under 'raw', and 'analysis' saying how."""
    data = dict(raw)
    data["raw"] = raw
    from_stored = []
    data["percall"] = percall.analyse(raw.get("percall"))
    if data["percall"] and data["percall"]["source"] != "raw rounds":
        from_stored.append(f"percall: {data['percall']['source']}")
    for stem in ("sweep_seed", "sweep_tlpi"):
        data[stem] = sweeps.sweep(raw.get(stem))
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
    if data["attribution"] and data["attribution"].get("source", "").startswith("stored"):
        from_stored.append(f"attribution: {data['attribution']['source']}")
    data["analysis"] = {"version": ANALYSIS_VERSION,
                        "methods": {m.__name__.rsplit(".", 1)[1]: m.ANALYSIS for m in
                                    (percall, sweeps, attribution, observer, latency, tracers)},
                        "from_stored": from_stored}
    return data


def load(results_dir):
    return analyse(read(results_dir))
