"""What each stage file must look like for the analysis to read it: one spec per file, checked
on every load (twtools.analyse.results.read).

A spec describes the fields the analysis, the verdict, the tables and the report read, with
their types; fields nobody reads are not constrained, so that additions stay compatible.  A
damaged or hostile file is refused with one line naming the file, the field and what is wrong
(`percall.json: cells[3].rounds[0].samples_ns[2]: expected a number, found "abc"`), before any
figure is computed from it.  Every number anywhere in a file must be finite: JSON has no NaN
or infinity, and tw's writer refuses them (core.files.write_json), so one in a file was put
there by something else.

Spec forms:
  "num" "int" "posint" "posnum" "str" "bool" "any" "variant"   a value of that kind;
      a trailing "?" also allows null.  "num" is any finite number but not true/false;
      "posnum"/"posint" are > 0; "variant" is a string <32|64>-<name>, the form every reader
      relies on (the bitness is read from the name).
  [spec]              a list of spec
  {"key": spec}       an object; each listed key is checked when present, "!key" must be
                      present (its spec may still allow null); "*" checks every other value;
                      "__check__" names a function(obj) -> None or what is wrong, for rules
                      across fields (sample lists of one row must have one length)
  ("opt", spec)       spec, or null
  ("or", a, b, ...)   the first spec that fits
  ("enum", a, b, ...) one of these strings: a value the analysis looks up in a table of its
                      own (a site's origin, an ABI), where any other would be a KeyError
"""
import math
import re

VARIANT_RE = re.compile(r"^(32|64)-[A-Za-z0-9_.+-]+$")
# No number in a stage file may be larger than MAGNITUDE.  Every figure tw stores is a time
# (ns or s), a count, a size or a frequency; the largest is a duration in ns, and a whole tw
# run lasts hours (1e13 ns in 3 h).  1e15 ns is 11.6 days, longer than any stage, and
# 1e15 s, bytes or calls is beyond any machine.  The bound is also what the analysis can
# carry: the statistics square and sum samples (variances, bootstrap means), and a sample of
# 1e300 or 1.7e308 overflows to infinity and then NaN there, where 1e15 squared (1e30) and
# summed a million times stays far from a float's 1.8e308.
MAGNITUDE = 1e15
# The exception: addresses (a process's maps, its auxiliary vector, the vDSO, a call site)
# are unsigned 64-bit numbers, up to 0xffffffffff601000 for the [vsyscall] page.  They are
# read as addresses, never summed or squared.
ADDRESS_KEYS = frozenset(("lo", "hi", "offset", "ip", "base", "end"))
ADDRESS_PARENTS = frozenset(("auxv",))
INT_LIMIT = 1 << 64     # beyond this an int is not even an address
# A census window: shorter than a millisecond it measured nothing (and a rate over it is no
# rate), longer than a week no census was run.
MIN_WINDOW_S, MAX_WINDOW_S = 1e-3, 7 * 86400

SCALARS = {
    "num": "a number", "int": "an integer", "posint": "a positive integer",
    "posnum": "a positive number", "str": "a string", "bool": "true or false", "any": "a value",
    "variant": "a variant name <32|64>-<mechanism>",
    "count": "a count (an integer, 0 or more)",
    "window": f"a census window in seconds ({MIN_WINDOW_S} to {MAX_WINDOW_S})",
}


DAMAGED = "the file is damaged or was not written by tw; re-run its stage"


class Invalid(ValueError):
    """A value that does not fit its spec: .path is where, str() is what, .hint what to do."""

    def __init__(self, path, what, hint=DAMAGED):
        super().__init__(what)
        self.path, self.what, self.hint = path, what, hint


def _show(v):
    if isinstance(v, str):
        return repr(v if len(v) <= 40 else v[:37] + "...")
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "null"
    return repr(v).lower() if isinstance(v, bool) else repr(v)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# Each scalar kind's test, looked up once per value: a stage file's raw rounds hold hundreds of
# thousands of numbers, so only the kind asked for is evaluated.
_OK = {
    "any": lambda v: True,
    "num": _is_num,
    "posnum": lambda v: _is_num(v) and v > 0,
    "int": _is_int,
    "posint": lambda v: _is_int(v) and v > 0,
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "variant": lambda v: isinstance(v, str) and bool(VARIANT_RE.match(v)),
    "count": lambda v: _is_int(v) and v >= 0,
    "window": lambda v: _is_num(v) and MIN_WINDOW_S <= v <= MAX_WINDOW_S,
}


# The types a scalar kind takes whatever the value (fits()'s shortcut for a list of them).
_PLAIN = {"num": frozenset({int, float}), "num?": frozenset({int, float, type(None)}),
          "any": frozenset({int, float, str, bool, type(None), list, dict}),
          "str": frozenset({str}), "str?": frozenset({str, type(None)}),
          "bool": frozenset({bool}), "bool?": frozenset({bool, type(None)})}


def _scalar(kind, v, path):
    if not _OK[kind](v):
        raise Invalid(path, f"expected {SCALARS[kind]}, found {_show(v)}")


def _scalar_ok(spec):
    """The test of a scalar spec ("num", "num?"), or None for any other spec."""
    if not isinstance(spec, str):
        return None
    if spec.endswith("?"):
        ok = _OK[spec[:-1]]
        return lambda v: v is None or ok(v)
    return _OK[spec]


# Specs are module constants read on every load of a stage file: what the checks derive from
# one (an object's fields, fits()'s test) is derived once and kept by the spec's identity,
# with the spec itself, so an identity is never reused by another spec.
_DERIVED = {}


def _once(kind, spec, make):
    hit = _DERIVED.get((kind, id(spec)))
    if hit is None or hit[0] is not spec:
        hit = _DERIVED[(kind, id(spec))] = (spec, make(spec))
    return hit[1]


def _fields(spec):
    """([(key, spec, must be present)], {listed keys}) of an object spec's listed keys
    ("!key": must be present), without "*" and "__check__"."""
    def make(spec):
        fields = [(key.lstrip("!"), sub, key.startswith("!")) for key, sub in spec.items()
                  if key not in ("*", "__check__")]
        return fields, frozenset(key for key, _, _ in fields)
    return _once("fields", spec, make)


def check(spec, v, path=""):
    """Raise Invalid when v does not fit spec."""
    if not fits(spec, v):
        _check_at(spec, v, path)


def fits(spec, v):
    """Whether v fits spec, by check()'s rules, with no path built: a stage file is almost
    always sound and holds hundreds of thousands of values, so the walk that names where a
    value does not fit (_check_at) runs only when this says one does not."""
    return _test(spec)(v)


def _test(spec):
    """fits()'s test of spec as one function of the value, made once per spec: the spec's
    form is looked at when the test is made, not at every value."""
    return _once("test", spec, _make_test)


def _make_test(spec):
    if isinstance(spec, str):
        if spec.endswith("?"):
            ok = _OK[spec[:-1]]
            return lambda v: v is None or ok(v)
        return _OK[spec]
    if isinstance(spec, list):
        item = _test(spec[0])
        plain = _PLAIN.get(spec[0]) if isinstance(spec[0], str) else None
        if plain is not None:
            # a list of numbers (a round's batches): when every item's type is one the kind
            # always takes, the list fits without a test per item; else each item is tested
            return lambda v: isinstance(v, list) and (set(map(type, v)) <= plain
                                                      or all(map(item, v)))
        return lambda v: isinstance(v, list) and all(map(item, v))
    if isinstance(spec, tuple) and spec[0] == "opt":
        sub = _test(spec[1])
        return lambda v: v is None or sub(v)
    if isinstance(spec, tuple) and spec[0] == "enum":
        names = spec[1:]
        return lambda v: isinstance(v, str) and v in names
    if isinstance(spec, tuple) and spec[0] == "or":
        subs = [_test(s) for s in spec[1:]]
        return lambda v: any(sub(v) for sub in subs)
    if isinstance(spec, dict):
        fields, listed = _fields(spec)
        tests = [(key, _test(sub), need) for key, sub, need in fields]
        rest = _test(spec["*"]) if "*" in spec else None
        rule = spec.get("__check__")

        def obj(v):
            if not isinstance(v, dict):
                return False
            for key, sub, need in tests:
                if key in v:
                    if not sub(v[key]):
                        return False
                elif need:
                    return False
            if rest is not None and not all(rest(x) for k, x in v.items() if k not in listed):
                return False
            return rule is None or not rule(v)
        return obj
    raise TypeError(f"bad spec {spec!r}")


def _check_at(spec, v, path=""):
    """check()'s walk that names where v does not fit: run only when fits() said it does not."""
    if isinstance(spec, str):
        if spec.endswith("?"):
            if v is None:
                return
            spec = spec[:-1]
        _scalar(spec, v, path)
    elif isinstance(spec, list):
        if not isinstance(v, list):
            raise Invalid(path, f"expected a list, found {_show(v)}")
        ok = _scalar_ok(spec[0])
        if ok is not None and all(map(ok, v)):
            return      # a list of scalars that all fit: no path is built for each item
        for i, x in enumerate(v):
            _check_at(spec[0], x, f"{path}[{i}]")
    elif isinstance(spec, tuple) and spec[0] == "opt":
        if v is not None:
            _check_at(spec[1], v, path)
    elif isinstance(spec, tuple) and spec[0] == "enum":
        if v not in spec[1:] or not isinstance(v, str):
            raise Invalid(path, f"expected one of {', '.join(spec[1:])}, found {_show(v)}")
    elif isinstance(spec, tuple) and spec[0] == "or":
        errors = []
        for s in spec[1:]:
            try:
                _check_at(s, v, path)
                return
            except Invalid as e:
                errors.append(e)
        # the alternative that got furthest into the value says the most
        raise max(errors, key=lambda e: len(e.path))
    elif isinstance(spec, dict):
        if not isinstance(v, dict):
            raise Invalid(path, f"expected an object, found {_show(v)}")
        fields, listed = _fields(spec)
        for key, sub, need in fields:
            here = f"{path}.{key}" if path else key
            if key not in v:
                if need:
                    raise Invalid(here, "is missing")
                continue
            _check_at(sub, v[key], here)
        if "*" in spec:
            for key, x in v.items():
                if key not in listed:
                    _check_at(spec["*"], x, f"{path}.{key}" if path else key)
        if "__check__" in spec:
            what = spec["__check__"](v)
            if what:
                raise Invalid(path, what)
    else:
        raise TypeError(f"bad spec {spec!r}")


_FLOATS, _INTS = {float}, {int}
_INERT = frozenset({str, bool, type(None)})       # what finite() never refuses


def _finite_ok(v, key=None, parent=None):
    """Whether every number in v passes finite(); no paths are built (a stage file is almost
    always sound, and its lists hold hundreds of thousands of numbers)."""
    t = type(v)
    if t is float:
        return math.isfinite(v) and abs(v) <= MAGNITUDE
    if t is int:
        return abs(v) <= MAGNITUDE     # larger may still be an address: the walk decides
    if t is list:
        if not v:
            return True
        # The items' types are gathered in C (a generator's test per item was most of a
        # stage file's check): a list of floats, or of ints, is judged whole.
        types = set(map(type, v))
        if types == _FLOATS:
            # NaN or an infinity makes the sum NaN or infinite; so may a sum of huge values,
            # which then go to the walk, as they must
            return math.isfinite(sum(v)) and max(map(abs, v)) <= MAGNITUDE
        if types == _INTS:
            return max(map(abs, v)) <= MAGNITUDE
        if types <= _INERT:
            return True
        return all(_finite_ok(x, key, parent) for x in v)
    if t is dict:
        # an object's scalars judged here, without a call each (a stage file's objects hold
        # most of its values); a float's abs() is above MAGNITUDE when infinite, and NaN
        # compares false
        for k, x in v.items():
            tx = type(x)
            if tx is float or tx is int:
                if not abs(x) <= MAGNITUDE:
                    return False
            elif tx not in _INERT and not _finite_ok(x, k, key):
                return False
        return True
    # a subclass of a number or container (never from JSON): the walk decides
    return not isinstance(v, (int, float, list, dict)) or t is bool


def finite(v, path="", key=None, parent=None):
    """Raise Invalid at the first number that is not finite, or larger than any figure a
    stage file holds (MAGNITUDE; an address up to 2**64: ADDRESS_KEYS)."""
    if not _finite_ok(v, key, parent):
        _finite_at(v, path, key, parent)


def _finite_at(v, path="", key=None, parent=None):
    """finite()'s walk that names where: run only when the quick pass found something to
    look at (an int, which may be an address, or a bad number)."""
    if isinstance(v, float):
        if not math.isfinite(v):
            raise Invalid(path, f"{v} is not a finite number")
        if abs(v) > MAGNITUDE:
            raise Invalid(path, f"{v:g} is larger than any time, count or size a stage file "
                                f"holds ({MAGNITUDE:g} at most)")
    elif isinstance(v, int) and not isinstance(v, bool):
        if abs(v) >= INT_LIMIT:
            raise Invalid(path, "an integer too large to be a count, size or time")
        if abs(v) > MAGNITUDE and key not in ADDRESS_KEYS and parent not in ADDRESS_PARENTS:
            raise Invalid(path, f"{v} is larger than any time, count or size a stage file "
                                f"holds ({MAGNITUDE:g} at most)")
    elif isinstance(v, dict):
        for k, x in v.items():
            _finite_at(x, f"{path}.{k}" if path else str(k), k, key)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _finite_at(x, f"{path}[{i}]", key, parent)


# ---- the specs ----------------------------------------------------------------------------

def _same_lengths(*keys, where="samples", nonempty=False):
    def rule(obj):
        s = obj.get(where) if where else obj
        if not isinstance(s, dict):
            return None
        lens = {k: len(s[k]) for k in keys if isinstance(s.get(k), list)}
        if len(set(lens.values())) > 1:
            return (f"{where + ': ' if where else ''}sample lists of different lengths ("
                    + ", ".join(f"{k} {n}" for k, n in lens.items()) + ")")
        if nonempty and any(n == 0 for n in lens.values()):
            return f"{where}: an empty sample list"
        return None
    return rule


def _supported_needs(*keys, then=None):
    """A rule: a row with supported:true must carry keys (and pass `then`)."""
    def rule(obj):
        if obj.get("supported") is False:
            return None
        missing = [k for k in keys if obj.get(k) is None]
        if missing:
            return f"a supported row without {', '.join(missing)}"
        return then(obj) if then else None
    return rule


def _summary_rule(obj):
    if obj.get("median") is not None and (obj.get("ci_low") is None or obj.get("ci_high") is None):
        return "a summary with a median but no ci_low/ci_high"
    return None


# A summary, stored by an old writer (new files keep samples only), or a blind figure.
SUMMARY = {"median": "num?", "ci_low": "num?", "ci_high": "num?", "min": "num?", "max": "num?",
           "cv": "num?", "n": "int?", "unstable": "bool?", "value": "num?", "why": "str?",
           "samples": ["num"], "__check__": _summary_rule}
BLIND = {"!value": "num?", "why": "str?"}
STRS = ["str"]

STAGE = {"ok": "bool?", "seconds": "num?", "error": "str?", "traceback": "str?", "errno": "str?",
         "interrupted": "bool?", "measured_with": "str?", "session": "int?", "kept": "str?",
         "deadline_s": "num?"}
META = {"!schema": "str", "created_utc": "str?", "host": "str?", "mode": "str?", "version": "str?",
        "argv": ("opt", STRS), "command": "str?", "note": "str?", "duration_s": "num?",
        "stages": ("opt", {"*": STAGE}), "state": "str?", "stages_wanted": ("opt", STRS),
        "pid": "int?", "signal": "str?", "finished_utc": "str?", "error": "str?",
        "report_s": "num?", "total_s": "num?", "budget_s": "num?",
        "setting": ("opt", {"speculation": "str?", "status": ("opt", {"*": "any"})}),
        "walls_full": "bool?", "target": "num?", "target_budget_s": "num?"}

FINGERPRINT = {
    "host": "str?", "os": "str?", "virtualization": "str?", "clocksource": "str?",
    "kernel": ("opt", {"release": "str?", "version": "str?", "cmdline": "str?",
                       "proc_version": "str?", "compiler": "str?"}),
    "cpu": ("opt", {"vendor": "str?", "model_name": "str?", "family": ("or", "int?", "str"),
                    "model": ("or", "int?", "str"), "flags": ("opt", STRS),
                    "bugs": ("opt", STRS)}),
    # The facts that decide the mitigations (machine/doctor.py; absent from fingerprints
    # written before them, which stay valid).
    "kernel_config": ("opt", {"source": "str?", "why": "str?", "options": ("opt", {"*": "str?"})}),
    "cpuid": ("opt", {"source": "str?", "how": "str?", "why": "str?", "flags": ("opt", STRS),
                      "leaves": ("opt", {"*": ("opt", {"*": "str?"})})}),
    "kernel_log": ("opt", {"source": "str?", "why": "str?", "lines": ("opt", STRS)}),
    "mitigations": ("opt", {"*": "str?"}),
    # entry and instruction are words the verdict's sentence is built from
    # (machine.vdso32's ENTRY_PATTERNS and FORM_INSTRUCTION): any other is not one.
    "libc": ("opt", {"*": ("opt", {"entry": ("opt", ("enum", "int80", "vdso", "sysenter",
                                                     "syscall", "unknown")),
                                   "path": "str?", "evidence": ("opt", STRS)})}),
    "vdso32": ("opt", {"instruction": ("opt", ("enum", "sysenter", "syscall", "int80")),
                       "why": "str?", "available": "bool?", "disasm": ("opt", STRS)}),
    "output_fs": ("opt", {"path": "str?", "fstype": "str?"}),
    # The facts the cost model (analyse/causes.py) reads, and doctor's raw cpuid batches.
    "fred": "bool?",
    "virtualization_detail": ("opt", {"hypervisor_flag": "bool?", "xen_guest_type": "str?",
                                      "hypervisor_type": "str?"}),
    "exit_price": ("opt", {"samples_ns": ("opt", ["num"]), "why": "str?", "how": "str?"}),
    "kernel_state": ("opt", {"*": "any"}),
    "instruments": ("opt", [{"name": "str?", "works": "bool?", "why": "str?",
                             "skipped": ("opt", STRS)}]),
}

VARIANTS = [{"!name": "variant", "bits": "int?", "abi": "str?", "mechanism": "str?",
             "supported": "bool?", "reason": "str?", "status": "str?"}]

ROUND = {"round": "int?", "t_s": "num?", "calls_per_batch": "int?", "cpu": "int?",
         "sched": "str?", "samples_ns": ["num"], "loop_ns": ["num"], "raw_ns": ["num"],
         "offcpu_ns": ["num"], "nivcsw": ["num?"], "steal_ticks": ["num?"], "irqs": ["num?"],
         "disturbed": ["any"], "chain_ns": ["posnum"]}
PERCALL_CELL = {"!variant": "variant", "!op": "str", "size": "int?", "shape": "str?",
                "supported": "bool?", "status": "str?", "reason": "str?", "errors": STRS,
                "calls_per_batch": "int?", "bits": "int?", "abi": "str?", "mechanism": "str?",
                "rounds": [ROUND], "samples": ["num?"], "loop_samples": ["num"],
                "loop_ns": ("or", ("opt", SUMMARY), ["num"]),
                "offcpu_ns": ("or", ("opt", SUMMARY), ["num"])}
PERCALL = {"cells": [PERCALL_CELL], "mode": "str?", "clock": "str?", "tsc_hz": "num?",
           "cpu": "int?", "host": "str?", "wall_s": "num?", "full_matrix": "bool?",
           "params": ("opt", {"batches": "posint?", "sync_batches": "posint?",
                              "rounds": "int?", "sizes": ["int"]}),
           "reference": ("opt", {"variant": "variant?", "op": "str?", "shape": "str?"}),
           "perf_bench": ("opt", {"samples": ["num"], "rounds": ["int?"], "why": "str?",
                                  "loops": "int?"})}

def _sweep_row_rule(r):
    """A row's figures come from its samples (all three lists, one length, with the calls
    to divide by), or, in a legacy file, from a stored ns_per_call summary."""
    if r.get("samples") is None:
        s = r.get("ns_per_call")
        return None if isinstance(s, dict) and s.get("median") is not None else \
            "a row with neither samples nor a stored ns_per_call"
    if r.get("calls") is None:
        return "samples without calls"
    return _same_lengths("user_s", "sys_s", "real_s", nonempty=True)(r)


SWEEP_ROW = {"!buffsize": "posint", "calls": "posint?", "calls_expected": "int?",
             "samples": ("opt", {"!user_s": ["num"], "!sys_s": ["num"], "!real_s": ["num"],
                                 # each pass's run's start, on the host probes' clock
                                 "round": ["int"], "t_s": ["num"]}),
             "real_s": ("opt", SUMMARY), "user_s": ("opt", SUMMARY), "sys_s": ("opt", SUMMARY),
             "ns_per_call": ("opt", SUMMARY), "__check__": _sweep_row_rule}
SWEEP_RUN = {"!variant": "variant", "mode": "str?", "bits": "int?", "mechanism": "str?",
             "supported": "bool?", "reason": "str?", "rows": [SWEEP_ROW]}
SWEEP = {"runs": [SWEEP_RUN], "input_bytes": "int?", "mode": "str?", "sizes": ["int"],
         "reps": "int?", "fstype": "str?", "sessions_planned": "int?",
         # a default run's rounds that measured only the async sizes still wider than ±2%
         # (measure.sweep.Focus)
         "focus": ("opt", [{"round": "count?", "sizes": ["int"]}]),
         # the matrix's probe of the host between the runs (measure.sweep.HostProbes)
         "host_state": ("opt", {"probes": [{"!t_s": "num", "!floor_ns": "posnum",
                                            "!fast": "bool", "chain_ns": "posnum?"}],
                                "every": "posint?", "why": "str?"}),
         # measure.sweep.Together's sessions: the rounds [first, end) each measured
         "sessions": ("opt", [{"!rounds": ["count"], "start_s": "num?", "seconds": "num?",
                               "__check__": lambda r: None if len(r["rounds"]) == 2 and
                               r["rounds"][0] <= r["rounds"][1] else
                               "rounds is not [first, end)"}])}

WRITEV_ROW = {"!bits": "int", "supported": "bool?", "reason": "str?", "n_buffers": "posint?",
              "size": "posint?", "bytes": "int?", "iov_max": "int?", "write_calls": "posnum?",
              "writev_calls": "num?",
              "samples": ("opt", {"!write_ns": ["posnum"], "!writev_ns": ["posnum"],
                                  "round": ["int"]}),
              "__check__": _supported_needs("samples", "write_calls", "n_buffers", "size",
                                            then=_same_lengths("write_ns", "writev_ns",
                                                               nonempty=True))}
WRITEV = {"rows": [WRITEV_ROW], "mode": "str?", "reps": "int?", "iov_max": "int?"}

STDIO_ROW = {"!bits": "int", "supported": "bool?", "reason": "str?", "method": "str?",
             "calls": ("or", "int?", BLIND), "calls_expected": "int?", "st_blksize": "int?",
             "samples": ("opt", {"!real_s": ["num"], "!user_s": ["num"], "!sys_s": ["num"]}),
             "__check__": _supported_needs("samples", "method",
                                           then=_same_lengths("real_s", "user_s", "sys_s",
                                                              nonempty=True))}
STDIO = {"!bytes": "posint", "rows": [STDIO_ROW], "mode": "str?", "reps": "int?"}

BUCKET = {"!lo_ns": "num", "!hi_ns": "num?", "!count": "int"}
LATENCY = {"runs": [{"!variant": "variant", "!mode": "str", "buffsize": "int?", "count": "int?",
                     "log2": [BUCKET], "lin_ns": [BUCKET],
                     "lin_us": [BUCKET], "linear": [BUCKET], "why": "str?",
                     "abi": "str?", "fd": "int?", "pid": "int?", "sum_ns": "num?",
                     "min_ns": "num?", "max_ns": "num?"}]}

TRACERS = {
    "counts": [{"!variant": "variant", "supported": "bool?", "reason": "str?", "expected": "int?",
                "timewrite": "int?", "by_tracer": ("opt", {"*": "int?"}), "strace": "int?",
                "bpftrace": "int?", "perf": "int?"}],
    "variants": [{"name": "variant?", "supported": "bool?", "reason": "str?"}],
    "notes": STRS, "tracers": ("opt", {"*": ("opt", {"why": "str?"})}),
    "workload": ("opt", {"expected_file_writes": "int?", "input_bytes": "int?", "buffsize": "int?"}),
    "perf_stat": ("opt", [{"!variant": "variant", "events": ("opt", {"*": "num?"}),
                           "why": ("opt", {"*": "str?"}), "file_writes": "int?"}]),
    "strace_c": ("opt", [{"!variant": "variant", "tables": ("opt", {"*": "any"}), "why": "str?",
                          "rc": "int?", "disagree": ("opt", ["str"])}]),
    "strace_T": ("opt", [{"!variant": "variant", "calls": "int?", "write_us_samples": ["num"],
                          "write_us": ("opt", SUMMARY), "why": "str?", "rc": "int?"}]),
    "perf_trace": ("opt", [{"!variant": "variant", "supported": "bool?", "reason": "str?",
                            "own_writes": "int?", "missed_writes": "int?", "note": "str?",
                            "rows": ("opt", [{"!syscall": "str", "calls": "int?",
                                              "avg_ms": "num?", "max_ms": "num?"}]),
                            "__check__": _supported_needs("rows")}]),
    "bpftrace_abi": ("opt", [{"!variant": "variant", "counts": ("opt", {"*": "int?"}),
                              "origin": ("opt", {"*": "int?"}), "pid": "int?",
                              "classes": [{"*": "any"}],
                              "writes": [{"*": "any"}]}]),
}

ATTR_PART = ("or", ("opt", SUMMARY), BLIND)
ATTRIBUTION = {
    "bodies": [{"!variant": "variant", "!op": "str", "!samples_ns": ["num"]}],
    "variants": [{"!name": "variant", "supported": "bool?", "reason": "str?"}],
    "ops": [{"!op": "str", "!size": "int?"}],
    "why": "str?", "mode": "str?", "method": "str?", "notes": STRS,
    # stored rows, in files written before bodies were kept raw
    "rows": [{"!variant": "variant", "!op": "str", "size": "int?", "supported": "bool?",
              "reason": "str?", "consistent": "bool?", "note": "str?",
              "total_ns": ATTR_PART, "entry_exit_ns": ATTR_PART, "penalty_ns": ATTR_PART,
              "body_ns": ATTR_PART, "waiting_ns": ATTR_PART, "residual_ns": ATTR_PART,
              "loop_ns": ATTR_PART, "body_cpu_ns": ATTR_PART}],
}

OBSERVER = {"rows": [{"!variant": "variant", "op": "str?", "!tracer": "str", "supported": "bool?",
                      "available": "bool?", "why": "str?", "samples": ["num"],
                      "ns_per_call": ("opt", SUMMARY), "calls_per_batch": "int?"}],
            "mode": "str?", "op": "str?", "method": "str?"}

# The two system call tables a traced call is looked up in (analyse.diagnose.names).
ABI = ("enum", "compat", "native")
MAP = {"!lo": "int", "!hi": "int", "perms": "str?", "offset": "int?", "path": "str?"}
DIAG_BUCKET = {"!lo_ns": "num", "hi_ns": "num?", "!count": "int"}
DIAGNOSE = {
    "program": "str?", "why": "str?",
    "raw": ("opt", {
        "!tracer": "str", "not_used": ("opt", {"*": "any"}), "cmd": STRS, "pid": "int?",
        "status": "int?", "wall_s": "num?", "mode": "str?", "raw": "str?",
        "process": ("opt", {"pid": "int?", "exe": "str?", "bits": "int?", "maps": [MAP],
                            "auxv": ("opt", {"*": "int"}), "why": "str?",
                            "vdso": ("opt", {"base": "int?", "end": "int?", "image": "str?",
                                             "form": "str?", "instruction": "str?",
                                             "why": "str?"})}),
        "maps_at_exit": [MAP],
        "rows": ("opt", {
            "sites": [{"!pid": "int", "comm": "str?", "!abi": ABI,
                       "origin": ("opt", ("enum", "text", "vdso", "other")),
                       "insn": ("opt", ("enum", "int80", "syscall", "sysenter", "unknown")),
                       "!id": "int", "cs": "int?", "ip": "int?",
                       "ret12": "int?", "ret0": "int?", "!calls": "int"}],
            "latency": [{"pid": "int?", "!abi": ABI, "!id": "int", "!log2": [DIAG_BUCKET],
                         "!exits": "int", "sum_ns": "num?"}],
            "write_linear": [{"pid": "int?", "abi": ("opt", ABI), "linear": [DIAG_BUCKET]}],
            "regs_ok": ("opt", {"*": "int?"})})}),
    "overhead": ("opt", {"variant": "variant?", "op": "str?", "tracer": "str?", "why": "str?",
                         "bare": ["num"], "traced": ["num"],
                         "__check__": lambda o: None if o.get("why") or (
                             o.get("bare") and o.get("traced") and o.get("variant")) else
                         "an overhead without bare and traced samples, or without a why"}),
}

# The host's own walls (machine/hostwalls.py): audit's state, the programs on raw_syscalls.
AUDIT_STATE = {"enabled": "count?", "rules": ("opt", ["str"]), "why": "str?"}
TRACERS_ON = {"rows": ("opt", [{"pid": "int?", "comm": "str?", "tracepoint": "str?",
                                "prog_id": "int?", "kind": "str?"}]), "why": "str?"}
PROC_ROW = {"!pid": "int", "start": "int?", "comm": "str?", "exe": "str?", "bits": "int?",
            "needs_ia32": "bool?", "why": "str?", "seccomp": "count?", "seccomp_filters": "count?"}
# A row of census.bt's counts names its process's image: pid, start (clock ticks since boot, as
# /proc shows it) and gen (execve calls in the window); timewrite-census/1 rows have neither,
# and are matched by pid.
IMAGE = {"start": "int?", "gen": "int?"}
# What a reader of bpftrace's maps found (machine/tracers/bpftrace.py Maps.witness) and the totals
# that witness each other: the entries it printed per map, those that printed alike and were
# summed, assigned values that clashed, events lost, lines that were not JSON, its warnings.
TRACER_WITNESS = {"entries": {"*": "count"}, "collapsed": {"*": "count"},
                  "conflicts": {"*": "count"}, "lost_events": "count?", "unread_lines": "count?",
                  "warnings": ["str"], "calls_total": "count?", "nr_total": "count?",
                  "regs_total": "count?", "map_keys": "posint?"}
CENSUS_CALL = {"!pid": "int", **IMAGE, "comm": "str?", "!abi": "str", "!cs": "int", "!origin": "str",
               "!insn": "str", "own": "bool?", "!calls": "count",
               "__check__": lambda r: None if r.get("abi") in ("compat", "native") and
               r.get("origin") in ("vdso", "text", "other") and
               r.get("insn") in ("vdso", "int80", "syscall", "sysenter", "unknown") else
               "a call row whose abi, origin or insn is not one census.bt writes"}
CENSUS = {
    "!seconds": "window", "host": "str?", "kernel": "str?", "utc": "str?", "root": "bool?",
    "own_pid": "int?", "cpus": "posint?", "clk_tck": "posint?", "tracer": "str?", "why_not": "str?", "script": "str?",
    "vsyscall_why": "str?", "wall_s": "window?", "failed": "bool?",
    "window_utc": ("opt", ["num?"]), "window_from": "str?",
    "!snapshot": [PROC_ROW], "snapshot_end": ("opt", [PROC_ROW]),
    "vdso32": ("opt", {"available": "bool?", "why": "str?",
                       "instruction": ("opt", ("enum", "sysenter", "syscall", "int80")), "form": "str?",
                       "source": "str?"}),
    "ia32": ("opt", {"enabled": "bool?", "why": "str?", "cmdline": "str?"}),
    "trace": ("opt", {"!calls": [CENSUS_CALL],
                      "!nr": [{"!pid": "int", **IMAGE, "!abi": "str", "!id": "int",
                               "!calls": "count"}],
                      "exec": [{"!pid": "int", **IMAGE, "filename": "str?"}],
                      "exit": [("or", "int", {"!pid": "int", "start": "int?"})],
                      "fork": [{"!pid": "int", "!parent": "int", **IMAGE}],
                      "vsyscall": [{"!pid": "int", **IMAGE, "comm": "str?", "!faults": "count"}],
                      "regs_ok": ("opt", {"*": "int?"}), "maps_full": ["str"],
                      "work": [{"!pid": "int", **IMAGE, "!work": "count"}],
                      # what reading bpftrace's maps found (measure/census.py rows, issue 70)
                      "witness": ("opt", TRACER_WITNESS)}),
    # timewrite-census/3: the host's own walls (measure/census.py), audit's state and tracers
    "host_walls": ("opt", {"audit": ("opt", AUDIT_STATE), "tracers": ("opt", TRACERS_ON)}),
    "overhead": {"*": {"variant": "variant?", "op": "str?", "why": "str?", "bare": ["num"],
                       "traced": ["num"], "order": "str?", "bare_after": "int?"}},
}

# legs.json (measure/legs.py): per variant, one record per process, its stamps in ns after its
# first user stamp; the kernel's are null where the tracer kept none (analyse.legs refuses them).
LEGS_REC = {"!pid": "int", "cpu": "int?", "shape": ("opt", ("enum", "ret", "jmp")),
            "start_s": "num?", "!calls": "posint", "!batches": "posint", "!warmup": "count",
            "clock": "str?", "!empty_ns": ["num"], "!before": ["int"], "!after": ["int"],
            "enter": ["int?"], "exit": ["int?"], "kernel_calls": "count?", "kernel_exits": "count?",
            "block": "count?", "chain_ns": ["num"], "chain_cycles_per_step": "posint?",
            "__check__": lambda r: None if len(r["before"]) == len(r["after"]) ==
            r["calls"] * r["batches"] and all(len(r.get(k) or []) in (0, len(r["before"]))
                                              for k in ("enter", "exit")) else
            "stamp lists whose lengths are not calls x batches"}
LEGS = {"clock": "str?", "script": "str?", "rounds": "posint?", "batches": "posint?",
        "calls": "posint?", "warmup": "count?", "why": "str?", "attached_s": "num?",
        "shape": ("opt", ("enum", "ret", "jmp")), "blocks": "count?", "mode": "str?",
        "target": "num?", "budget_s": "num?", "stopped": "str?", "seconds": "num?",
        "attach_s": ["num"],
        # blocks measured past tw run's deadline or the mode's blocks while the reference's
        # legs were unknown
        "added_blocks": "count?",
        # issue 71: the host probed before each block (quiet first), and a mitigation's own
        # instruction timed from user space in each block (syscost --op verw / lfence)
        "host": ("opt", {"probes": [{"t_s": "num?", "floor_ns": "num?", "fast": "bool?"}],
                         "waited_s": "num?", "wait_max_s": "num?"}),
        "instructions": ("opt", {"*": [{"block": "count?", "!samples_ns": ["num"],
                                        "disturbed": "any", "chain_ns": ["num"]}]}),
        "instructions_why": ("opt", {"*": "str?"}),
        "!variants": {"*": {"!status": ("enum", "measured", "unsupported"), "why": "str?",
                            "!traced": [LEGS_REC], "!untraced": [LEGS_REC]},
                      "__check__": lambda o: next((f"{k!r} is not a variant name" for k in o
                                                   if not VARIANT_RE.match(k)), None)}}

# walls.json (measure/walls.py's stage): each wall's tw ab document, or why it was not measured.
AB_SIDE = {"!rounds": [{"!round": "count", "copy": "count?", "t_s": "num?",
                        "!samples_ns": ["num"], "disturbed": "any", "speculation": "any",
                        "wall": "any"}], "reason": "str?"}
WALL_FACTS = {"up": ("opt", {"kind": "str?", "spec": "str?", "source": "str?",
                             "instructions": "count?", "times": "count?", "notes": ("opt", ["str"]),
                             "program_hex": "str?", "rules": ("opt", ["str"]),
                             "enabled_before": "count?", "turned_on": "bool?",
                             "separation": "str?", "program": "str?", "attach": "str?",
                             "*": "any"}),
              "down": ("opt", {"restored": "bool?", "errors": ("opt", ["str"]),
                               "left_behind": "str?", "calls_seen": "count?",
                               "attaches": "count?", "*": "any"}),
              "evidence": ("opt", {"a": ("opt", ["str"]), "b": ("opt", ["str"]), "why": "str?",
                                   "b_status": ("opt", {"*": "str"}), "*": "any"})}
WALLS = {"mode": "str?", "full": "bool?", "audit_why": "str?",
         "host": ("opt", {"audit": ("opt", AUDIT_STATE), "tracers": ("opt", TRACERS_ON)}),
         "!walls": [{"!spec": "str", "why": "str?",
                     "ab": ("opt", {"!cells": [{"!variant": "variant", "!op": "str",
                                               "!shape": "str", "!a": AB_SIDE, "!b": AB_SIDE}],
                                    "kernel": "str?", "wall": ("opt", WALL_FACTS),
                                    "*": "any"})}]}

# stem -> (schema family, newest version this checkout reads, spec).  A file without a schema
# field is the legacy form of its stage (written before schemas were recorded); it is read,
# and the analysis says so.  variants.json is a bare list and has no schema field.
STAGES = {
    "meta": ("timewrite-results", 1, META),
    "fingerprint": ("timewrite-fingerprint", 2, FINGERPRINT),
    "variants": (None, None, VARIANTS),
    "percall": ("timewrite-percall", 2, PERCALL),
    "sweep_seed": ("timewrite-sweep", 2, SWEEP),
    "sweep_tlpi": ("timewrite-sweep", 2, SWEEP),
    "writev": ("timewrite-writev", 2, WRITEV),
    "stdio": ("timewrite-stdio", 2, STDIO),
    "tracers": ("timewrite-tracers", 2, TRACERS),
    "attribution": ("timewrite-attribution", 2, ATTRIBUTION),
    "observer": ("timewrite-observer", 2, OBSERVER),
    "latency": ("timewrite-latency", 1, LATENCY),
    "diagnose": ("timewrite-diagnose", 1, DIAGNOSE),
    "census": ("timewrite-census", 3, CENSUS),
    "legs": ("timewrite-legs", 2, LEGS),
    # the exit-price stage (measure/exitprice.py): the matrix cut to its reference and cpuid
    "exitprice": ("timewrite-percall", 2, PERCALL),
    "walls": ("timewrite-walls", 1, WALLS),
}
SCHEMA_RE = re.compile(r"^(timewrite-[a-z0-9_]+)/([0-9]{1,6})$")


def schema_of(stem, obj):
    """'legacy' for a file without a schema field; else its family/version, after checking
    it is this stage's family and a version this checkout reads (Invalid otherwise)."""
    family, newest, _ = STAGES[stem]
    if family is None or not isinstance(obj, dict) or "schema" not in obj:
        if stem == "meta":
            raise Invalid("schema", "is missing: meta.json must say `\"schema\": "
                                    f"\"{family}/{newest}\"`")
        return "legacy" if family is not None else "unversioned"
    s = obj["schema"]
    m = SCHEMA_RE.match(s) if isinstance(s, str) else None
    if not m:
        raise Invalid("schema", f"expected \"{family}/<version>\", found {_show(s)}")
    if m.group(1) != family:
        raise Invalid("schema", f"{s!r} is not a {family} file: a file of another stage, "
                                "under this stage's name")
    if int(m.group(2)) > newest:
        raise Invalid("schema", f"{s!r} is newer than this checkout reads ({family}/{newest})",
                      "update the checkout (git pull) to read it")
    return s
