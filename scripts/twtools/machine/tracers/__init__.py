"""Tracer plug-ins: one module per tracer (see base.py for what each provides).

The modules of this package are found at import time, so adding a tracer is adding its
module; tw doctor, the trace stage, the observer-effect stage and the report iterate over
plugins(), in each tracer's `order`.
"""
import importlib
import pkgutil

_SKIP = {"base"}


def plugins():
    """Every tracer plug-in, in order."""
    out = []
    for m in pkgutil.iter_modules(__path__):
        if m.name in _SKIP or m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{m.name}")
        if hasattr(mod, "TRACER"):
            out.append(mod.TRACER)
    return sorted(out, key=lambda t: (t.order, t.name))


def get(name):
    for t in plugins():
        if t.name == name:
            return t
    raise KeyError(f"no tracer plug-in named {name}")
