"""The legs' arithmetic (analyse/legs.py) and their place in the cost model (analyse/causes.py),
on recorded stamps whose answers are known.

Why it can break: a leg subtracts the wrong pair of stamps, or the wrong call's (a join by
order that is off by one); a clock that steps backwards between user space and the kernel is
averaged into a figure instead of refused; a process whose kernel stamps are fewer or more
than its calls (lost events, a full map, another program's calls) is joined anyway; batch
means cut the calls at the wrong places; the difference to the baseline subtracts the wrong
mechanism, or loses its interval; the placement calls an exit "in the way in" when it sits
in the way out; the vsyscall page's premium is priced into int 0x80 when the page is off,
or the residual does not shrink by it.
"""
import copy
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import causes, legs, schema  # noqa: E402
from twtools.present import causes as present_causes  # noqa: E402
from twtools.present import chains  # noqa: E402
from twtools.present.document import Doc  # noqa: E402


def rec(pid, before, enter, exit_, after, calls=None, warmup=0, empty=None):
    """One traced process's record, as measure.legs writes it."""
    calls = calls or len(before)
    return {"pid": pid, "cpu": 1, "shape": "ret", "start_s": 0.0, "calls": calls,
            "batches": len(before) // calls, "warmup": warmup, "clock": "CLOCK_MONOTONIC (vDSO)",
            "empty_ns": empty or [20.0] * (len(before) // calls), "before": list(before),
            "after": list(after), "enter": list(enter), "exit": list(exit_),
            "kernel_calls": warmup + len(before), "kernel_exits": warmup + len(before)}


# Two calls whose legs are known: (300, 150, 250) and (350, 150, 300).
BEFORE, ENTER, EXIT, AFTER = [0, 1000], [300, 1350], [450, 1500], [700, 1800]


def test_join_subtracts_each_calls_own_stamps():
    got, why = legs.join(rec(7, BEFORE, ENTER, EXIT, AFTER))
    assert why is None
    assert got == {"in": [300, 350], "body": [150, 150], "out": [250, 300]}


@pytest.mark.parametrize("field,i,value,words", [
    ("enter", 1, 990, "sys_enter is 10 ns before the user stamp taken before the call"),
    ("exit", 0, 290, "sys_exit is 10 ns before sys_enter"),
    ("after", 1, 1490, "the user stamp taken after the return is 10 ns before sys_exit"),
])
def test_a_clock_stepping_backwards_is_refused_with_the_call_and_the_amount(field, i, value, words):
    r = rec(42, BEFORE, ENTER, EXIT, AFTER)
    r[field][i] = value
    got, why = legs.join(r)
    assert got is None
    assert why.startswith("the clock steps backwards between user space and the kernel")
    assert f"in call {i} of process 42" in why and words in why
    assert "not on one clock" in why


def test_a_refused_process_refuses_its_mechanism_and_reaches_causes_as_a_why():
    bad = rec(42, BEFORE, [300, 990], EXIT, AFTER)
    raw = {"schema": "timewrite-legs/1", "why": None,
           "variants": {"64-syscall": {"status": "measured", "why": None,
                                       "traced": [rec(41, BEFORE, ENTER, EXIT, AFTER), bad],
                                       "untraced": []}}}
    doc = legs.analyse(raw)
    v = doc["variants"]["64-syscall"]
    assert "legs" not in v and "steps backwards" in v["why"]
    out = {"parts": []}
    legs.place(out, "64-syscall", doc, {"value": None}, {"value": 0})
    assert out["legs"]["value"] is None and "steps backwards" in out["legs"]["why"]


def test_lost_or_extra_kernel_stamps_are_not_joined():
    r = rec(9, BEFORE, [300, None], EXIT, AFTER)
    assert legs.join(r)[0] is None and "kept 1 sys_enter stamps for 2 calls" in legs.join(r)[1]
    r = rec(9, BEFORE, ENTER, EXIT, AFTER, warmup=5)
    r["kernel_calls"] = 8           # one call more than the program made: someone else's
    got, why = legs.join(r)
    assert got is None and "counted 8 sys_enter events for 7 calls" in why


def test_batch_means_cut_at_each_batch():
    assert legs.batch_means([1, 3, 10, 20, 7], 2) == [2.0, 15.0]
    assert legs.batch_means([4, 6, 8], 3) == [6.0]


def process(pid, n_batches, calls, leg_ns, start=0):
    """A traced process whose every call has legs leg_ns = (in, body, out), 1000 ns apart."""
    b, e, x, a = [], [], [], []
    for k in range(n_batches * calls):
        t = start + 10_000 * k
        b.append(t)
        e.append(t + leg_ns[0])
        x.append(t + leg_ns[0] + leg_ns[1])
        a.append(t + sum(leg_ns))
    return rec(pid, b, e, x, a, calls=calls, warmup=3)


def untraced(pid, n_batches, calls, total):
    r = process(pid, n_batches, calls, (0, 0, total))
    for k in ("enter", "exit", "kernel_calls", "kernel_exits"):
        r.pop(k)
    return r


KNOWN = {"64-syscall": ((200, 500, 450), 110), "64-int80": ((4200, 640, 550), 4000),
         "32-vdso": ((180, 480, 460), 170), "32-int80": ((4120, 620, 540), 4050)}


def raw_doc(known=KNOWN, rounds=8):
    variants = {}
    for v, (lg, total) in known.items():
        variants[v] = {"status": "measured", "why": None,
                       "traced": [process(100 + r, 4, 5, lg) for r in range(rounds)],
                       "untraced": [untraced(200 + r, 4, 5, total) for r in range(rounds)]}
    variants["32-sysenter"] = {"status": "unsupported", "why": "sysenter: unsupported: #UD",
                               "traced": [], "untraced": []}
    return {"schema": "timewrite-legs/1", "why": None, "clock": "CLOCK_MONOTONIC",
            "variants": variants}


def test_known_legs_their_differences_and_the_tracer_cost():
    raw = raw_doc()
    schema.check(schema.LEGS, raw)
    doc = legs.analyse(raw)
    s = doc["variants"]["64-syscall"]
    assert [s["legs"][k]["value"] for k in legs.LEGS] == pytest.approx([200, 500, 450])
    assert s["total"]["value"] == pytest.approx(1150)
    assert s["tracer_ns"]["value"] == pytest.approx(1150 - 110)
    assert s["bracket_ns"]["value"] == pytest.approx(20)
    assert doc["variants"]["32-sysenter"] == {"why": "sysenter: unsupported: #UD"}
    d = doc["differences"]["64-int80"]
    assert d["baseline"] == "64-syscall"
    assert [d[k]["value"] for k in legs.LEGS] == pytest.approx([4000, 140, 100])
    # 5390 - 4000 traced less untraced, against 1040: the tracer costs int 0x80 350 ns more
    assert d["tracer"]["value"] == pytest.approx((5390 - 4000) - (1150 - 110))
    assert doc["differences"]["32-int80"]["baseline"] == "32-vdso"
    assert doc["differences"]["32-int80"]["in"]["value"] == pytest.approx(4120 - 180)
    assert set(doc["differences"]) == {"64-int80", "32-int80"}


def test_the_difference_carries_both_intervals():
    a = {"value": 10.0, "ci_low": 7.0, "ci_high": 13.0}
    b = {"value": 4.0, "ci_low": 0.0, "ci_high": 6.0}
    d = legs.diff(a, b)
    assert d["value"] == 6.0 and d["ci_high"] - d["value"] == pytest.approx(5.0)
    assert legs.diff(a, {"value": None, "ci_low": None, "ci_high": None}) is None


PRICE = {"value": 3500.0, "ci_low": 3490.0, "ci_high": 3510.0}


def test_the_exit_is_placed_in_the_way_in_when_the_way_in_carries_it():
    doc = legs.analyse(raw_doc())
    p = legs.placement(doc["differences"]["64-int80"], PRICE, 1)
    assert p["in_way_in"] is True
    assert p["in_exits"]["value"] == pytest.approx(4000 / 3500)
    assert p["out_exits"]["value"] == pytest.approx(100 / 3500)
    assert p["in_beyond_exits_ns"]["value"] == pytest.approx(500)
    assert p["text"].startswith("the exit sits in the way in, as predicted")


def test_an_exit_in_the_way_out_is_not_called_the_way_in():
    known = dict(KNOWN, **{"64-int80": ((300, 640, 4050), 4000)})
    doc = legs.analyse(raw_doc(known))
    p = legs.placement(doc["differences"]["64-int80"], PRICE, 1)
    assert p["in_way_in"] is False and p["text"].startswith("not placed as predicted")
    assert p["out_exits"]["value"] == pytest.approx(3600 / 3500)
    assert legs.placement(doc["differences"]["64-int80"], {"value": None}, 1) is None


def cell(variant, op, v, h=2.0, supported=True, reason=None):
    c = {"variant": variant, "op": op, "shape": "ret", "supported": supported}
    if supported:
        c.update(undisturbed_ns=v, undisturbed_ci_low=v - h, undisturbed_ci_high=v + h)
    else:
        c["reason"] = reason
    return c


def cells(vsyscall=True):
    out = [cell("64-syscall", "null", 110.0), cell("64-syscall", "cpuid", 3500.0, 10.0),
           cell("64-int80", "null", 110.0 + 3500.0 + 400.0, 20.0),
           cell("32-vdso", "null", 170.0), cell("32-int80", "null", 170.0 + 3500.0 + 300.0, 20.0),
           cell("64-syscall", "gettimeofday", 210.0)]
    out.append(cell("64-vsyscall", "gettimeofday", 210.0 + 250.0) if vsyscall else
               cell("64-vsyscall", "gettimeofday", None, supported=False,
                    reason="the vsyscall page is not mapped (vsyscall=none)"))
    return out


KVM = {"virtualization": "kvm", "virtualization_detail": {"hypervisor_flag": True},
       "kernel": {"release": "6.18.0"}, "fred": False}


def test_the_premium_joins_int80s_prediction_and_the_residual_shrinks_by_it():
    doc = causes.compute_from(cells(), KVM, legs.analyse(raw_doc()))
    p = doc["exception_path_premium_ns"]
    assert p["value"] == pytest.approx(250.0)
    assert p["ci_high"] - p["value"] == pytest.approx(math.hypot(2.0, 2.0))
    m = doc["mechanisms"]["64-int80"]
    assert m["residual_before_premium_ns"]["value"] == pytest.approx(400.0)
    assert m["residual_ns"]["value"] == pytest.approx(150.0)
    assert m["residual_after_premium_ns"] == m["residual_ns"]
    assert doc["mechanisms"]["32-int80"]["residual_ns"]["value"] == pytest.approx(50.0)
    assert any(x["part"].startswith("exception-path premium") for x in m["parts"])
    # the legs, as the issue names them: mechanisms.{VARIANT}.legs.{in,body,out}
    assert {k: m["legs"][k]["value"] for k in legs.LEGS} == pytest.approx(
        {"in": 4200, "body": 640, "out": 550})
    assert m["legs_vs_baseline"]["in"]["value"] == pytest.approx(4000)
    assert m["exit_placement"]["in_way_in"] is True
    assert doc["mechanisms"]["64-syscall"]["legs"]["in"]["value"] == pytest.approx(200)
    assert "legs_vs_baseline" not in doc["mechanisms"]["64-syscall"]
    assert "after the exception path's premium" in m["verdict"]["text"]


def test_where_the_vsyscall_page_is_off_the_premium_says_so_and_prices_nothing():
    doc = causes.compute_from(cells(vsyscall=False), KVM, None)
    p = doc["exception_path_premium_ns"]
    assert p["value"] is None and p["why"].startswith("the vsyscall page is off here")
    assert "vsyscall=none" in p["why"]
    m = doc["mechanisms"]["64-int80"]
    assert m["residual_ns"]["value"] == pytest.approx(400.0)
    assert m["residual_after_premium_ns"] is None
    assert not any(x["part"].startswith("exception-path premium") for x in m["parts"])
    assert m["legs"]["value"] is None and "no legs stage" in m["legs"]["why"]


def test_the_report_and_explain_place_each_figure():
    c = causes.compute_from(cells(), KVM, legs.analyse(raw_doc()))
    d = Doc()
    present_causes.section(d, {"causes": c})
    text = "\n".join(str(b) for b in d.blocks)
    assert "way in, body and way out, on one clock" in text
    assert "4000" in text and "exception path's premium here" in text
    ch = chains.chain("64-int80", KVM, c)
    iret = next(s for s in ch["steps"] if s["step"].startswith("iret back to user"))
    assert iret["ns"]["value"] == pytest.approx(100)
    idt = next(s for s in ch["steps"] if s["step"].startswith("IDT vector 0x80"))
    assert idt["ns"]["value"] == pytest.approx(250)
    ex = next(s for s in ch["steps"] if s["step"].startswith("a VM exit"))
    assert "the exit sits in the way in" in ex["note"]


def test_schema_refuses_a_stage_file_that_is_not_legs():
    raw = raw_doc()
    bad = copy.deepcopy(raw)
    bad["variants"]["not a variant"] = bad["variants"].pop("64-syscall")
    with pytest.raises(schema.Invalid, match="not a variant name"):
        schema.check(schema.LEGS, bad)
    bad = copy.deepcopy(raw)
    bad["variants"]["64-syscall"]["traced"][0]["before"].pop()
    with pytest.raises(schema.Invalid, match="calls x batches"):
        schema.check(schema.LEGS, bad)


def test_a_run_without_legs_says_why_once():
    c = causes.compute_from(cells(), KVM, None)
    d = Doc()
    present_causes.legs_section(d, c)
    text = "\n".join(str(b) for b in d.blocks)
    assert text.count("no legs stage") == 1
    c = causes.compute_from(cells(), KVM, legs.analyse({"why": "tracing needs root (bpftrace "
                                                               "on raw_syscalls)", "variants": {}}))
    d = Doc()
    present_causes.legs_section(d, c)
    text = "\n".join(str(b) for b in d.blocks)
    assert text.count("tracing needs root") == 1


FIX = ROOT / "tests" / "fixtures" / "results-fixture"
# The recorded results' stage files that a legs.json meets: the cost model reads the legs
# with the matrix and the facts (analyse/causes.py), and meta.json and variants.json make it a
# results directory.  The sweeps, writev, stdio, tracers, attribution, observer and latency
# stages are analysed and tabled apart from the legs (with no exitprice.json in the fixture,
# nothing joins a sweep to the cost model): 300 mutations of legs.json beside these four files
# and beside the whole fixture gave the same outcome each (the same refusal, or the same legs,
# cost model and causes section), in a tenth of the reading and analysing.
LEGS_MEET = ("meta", "variants", "fingerprint", "percall")


def beside_the_matrix(d):
    """d, a new results directory of the recorded results' LEGS_MEET files."""
    import shutil
    d.mkdir()
    for stem in LEGS_MEET:
        shutil.copy(FIX / f"{stem}.json", d)
    return d


def test_a_damaged_legs_file_is_read_or_refused_never_a_crash(tmp_path):
    """One-value mutations of a legs.json beside the recorded matrix: load, the cost model
    and every table work, or stop at a DataError naming legs.json (the recorded fixture has
    no legs.json, so test_faults_hostile's mutations never reach it)."""
    import json
    import random
    import warnings
    from twtools.analyse import results
    from twtools.core.ui import DataError
    from twtools.present import tables
    d = beside_the_matrix(tmp_path / "res")
    base = raw_doc(rounds=2)
    text = json.dumps(base)
    paths = []

    def walk(o, here=()):
        if here:
            paths.append(here)
        for k, v in (o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()):
            walk(v, here + (k,))
    walk(base)
    rng = random.Random(36)
    crashes = []
    refused = read = 0
    for _ in range(25):        # 300 ran clean offline
        path = rng.choice(paths)
        doc = json.loads(text)          # a fresh copy of base (deepcopy took 3 times as long)
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = copy.deepcopy(rng.choice([None, "x", -1, 0, 1e300, True, [], {}, [None]]))
        (d / "legs.json").write_text(json.dumps(doc))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                data = results.load(d)
                tables.all_tables(data)
                present_causes.section(Doc(), data)
            read += 1
        except DataError as e:
            assert "legs.json" in str(e)
            refused += 1
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            crashes.append(f"{'.'.join(map(str, path))}: {type(e).__name__}: {e}")
    assert not crashes, "\n".join(crashes[:10])
    assert refused and read, (refused, read)       # the file is read, and checked


def test_a_negative_bracket_or_total_is_unknown_never_a_figure():
    """Stamps that make the empty bracket (or a total) negative: a duration cannot be, so
    the figure is unknown with why, never published as "-1000000.0 µs"."""
    from twtools.present import export, tables
    raw = raw_doc(rounds=3)
    for r in raw["variants"]["64-syscall"]["traced"] + raw["variants"]["64-syscall"]["untraced"]:
        r["empty_ns"] = [-1e9] * len(r["empty_ns"])
    doc = legs.analyse(raw)
    b = doc["variants"]["64-syscall"]["bracket_ns"]
    assert b["value"] is None and "negative" in b["why"], b
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(export.CsvExporter().render(tables.legs(doc)))))
    row = next(r for r in rows if r["variant"] == "64-syscall" and r["figure"] == "bracket_ns")
    assert row["value_ns"] == "" and "negative" in row["why"], row
    assert not any(r["value_ns"].startswith("-") for r in rows
                   if r["figure"] in ("bracket_ns", "total", "untraced_total")), rows


def test_an_escape_sequence_in_a_why_is_shown_escaped_in_the_csv():
    from twtools.present import export, tables
    raw = raw_doc(rounds=2)
    raw["variants"]["32-sysenter"]["why"] = "unsupported\x1b]0;owned\x07\x1b[2J"
    csv = export.CsvExporter().render(tables.legs(legs.analyse(raw)))
    assert "\x1b" not in csv and "\x07" not in csv
    assert "unsupported\\x1b]0;owned\\x07\\x1b[2J" in csv


def test_a_98_mb_legs_file_is_refused_unread_in_one_line(tmp_path):
    """Refused by its size, not read: tw report's own reads (/proc/self/io's rchar, written
    at its exit) stay below the file's 98 MB."""
    import shutil
    import subprocess
    d = tmp_path / "res"
    shutil.copytree(FIX, d)
    with open(d / "legs.json", "wb") as f:
        f.write(b'{"schema": "timewrite-legs/1", "variants": {}, "x": "')
        f.truncate(98 * 10 ** 6)
    io = tmp_path / "io"
    # tw itself, in this process, with its /proc/self/io written as it exits
    code = ("import atexit, runpy, sys; io = sys.argv.pop(1); "
            "atexit.register(lambda: open(io, 'w').write(open('/proc/self/io').read())); "
            "sys.argv.pop(0); runpy.run_path(sys.argv[0], run_name='__main__')")
    p = subprocess.run([sys.executable, "-c", code, io, ROOT / "scripts" / "tw", "report", d],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr
    assert p.stderr.count("\n") == 1 and "legs.json" in p.stderr and "larger" in p.stderr, p.stderr
    rchar = int(next(ln.split()[1] for ln in io.read_text().splitlines() if ln.startswith("rchar:")))
    assert rchar < 98 * 10 ** 6, f"tw report read {rchar} bytes: the 98 MB legs.json whole"
