"""Fuzzing the stage files: thousands of mutated copies of real ones, each read as `tw report`
reads it, with a fixed seed so that a failure is a case one can replay.

Why it can break: validation that checks the fields someone thought of lets the others
through, and the analysis then meets a value it cannot carry: a truncated file a reader
half-parses, a 1e300 sample whose square is infinity and whose interval is NaN, a string
where a loop expects a list, a number where a dict is looked up.  Each of these was a
traceback (exit 70) or a "nan" printed as a figure before.

Two kinds of mutation, on every stage file of the recorded results directories
(tests/fixtures/results-fixture, and tests/fixtures/icelake/* when present):

  bytes   a byte flipped, a cut, a run inserted or repeated, a number made huge, a string
          given control characters: the reader (analyse.results) must refuse the file
          with a DataError naming it, or read it, and never raise anything else;
  values  one value replaced by a hostile one (1e300, 1.7e308, -1, a string, a list, an
          object, a huge integer, null): read, and when read, analysed, decided (the
          verdict) and put in every table, none of which may raise, hang, or show a number
          that is not one (nan, inf) in the tables' text.

A case that takes longer than HANG_S is a hang (an alarm, not a timing assertion: no case
comes near it).
"""
import json
import random
import re
import signal
import warnings
import zlib

import pytest

from conftest import ROOT
from faults_util import random_replacements
from twtools.analyse import results, verdict
from twtools.core.ui import DataError
from twtools.present import export, tables

FIXTURES = ROOT / "tests" / "fixtures"
DIRS = [FIXTURES / "results-fixture"] + sorted(
    p for p in [FIXTURES / "icelake", *(FIXTURES / "icelake").glob("*")]
    if (p / "meta.json").is_file())
# (directory, stem) for every stage file present; meta.json is the directory's own check
CASES = [(d, s) for d in DIRS for s in results.STEMS if (d / f"{s}.json").exists()]
BYTE_MUTANTS = 240          # per stage file (12 files: 2880 cases in the recorded fixture)
VALUE_MUTANTS = 30          # per stage file, each analysed
HANG_S = 20
HOSTILE = [1e300, 1.7e308, -1.7e308, 1e16, -1, 0, 2 ** 70, -2 ** 63, "x", "\x1b]0;t\x07",
           "", True, None, [], {}, [None], ["x"], {"median": 1}, [1e300] * 3]
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
NOT_A_NUMBER = re.compile(r"(?<![\w.])-?(nan|inf)(?![\w])", re.I)


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a case ran longer than {HANG_S} s")


@pytest.fixture(autouse=True)
def hang_alarm():
    old = signal.signal(signal.SIGALRM, _alarm)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def byte_mutants(raw, rng, count):
    """count mutated copies of raw (bytes), each one mutation of a kind chosen by rng."""
    numbers = [m.span() for m in NUMBER.finditer(raw)]
    for _ in range(count):
        b = bytearray(raw)
        kind = rng.randrange(6)
        at = rng.randrange(len(b))
        if kind == 0:                               # one byte flipped
            b[at] ^= 1 << rng.randrange(8)
        elif kind == 1:                             # cut short
            del b[at:]
        elif kind == 2:                             # random bytes inserted
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif kind == 3:                             # a run repeated
            n = rng.randrange(1, 64)
            b[at:at] = b[at:at + n]
        elif kind == 4 and numbers:                 # a number made huge, tiny or negative
            lo, hi = rng.choice(numbers)
            b[lo:hi] = rng.choice([b"1e300", b"1.7e308", b"-1e999", b"1e-400",
                                   b"99999999999999999999999", b"-0", b"1e16"])
        else:                                       # control characters inside a string
            q = b.find(b'"', at)
            if q >= 0:
                b[q + 1:q + 1] = rng.choice([b"\\u001b]0;x\\u0007", b"\\n\\n> **x**",
                                             b"\\u0000", b"\\ud800"])
        yield bytes(b)


def value_mutants(doc, rng, count):
    return random_replacements(doc, rng, HOSTILE, count)


def read_bytes_as_report_does(d, stem, raw):
    """analyse.results' reading of one stage file, from its bytes: parse, then validate."""
    path = d / f"{stem}.json"
    obj = results._parse(path, raw)
    results._check(path, stem, obj)
    return obj


def analyse_one(raw_stages, stem, obj):
    """The analysis, the verdict and every table of a directory whose `stem` file is obj:
    the other stages as recorded (attribution reads the per-call matrix too)."""
    r = {s: None for s in results.STEMS}
    r["meta"], r["fingerprint"], r["variants"] = (raw_stages["meta"], raw_stages["fingerprint"],
                                                 raw_stages["variants"])
    if stem in ("attribution", "diagnose"):
        r["percall"] = raw_stages["percall"]
    r[stem] = obj
    data = results.analyse(r)
    verdict.decide(data, None)
    return "\n".join(export.render(t, "text") for t in tables.all_tables(data))


@pytest.mark.parametrize("d,stem", CASES, ids=lambda x: x if isinstance(x, str) else x.name)
def test_byte_mutations_are_refused_in_one_line_or_read(d, stem):
    raw = (d / f"{stem}.json").read_bytes()
    rng = random.Random(zlib.crc32(f"bytes {d.name} {stem}".encode()))
    crashes = []
    for n, m in enumerate(byte_mutants(raw, rng, BYTE_MUTANTS)):
        signal.alarm(HANG_S)
        try:
            read_bytes_as_report_does(d, stem, m)
        except DataError as e:
            line = e.line()
            assert f"{stem}.json" in line and "\n" not in line, line
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            crashes.append(f"case {n}: {type(e).__name__}: {e}")
        finally:
            signal.alarm(0)
    assert not crashes, "\n".join(crashes[:10])


@pytest.mark.parametrize("d,stem", CASES, ids=lambda x: x if isinstance(x, str) else x.name)
def test_value_mutations_are_refused_or_analysed_without_nan(d, stem):
    stages = results.read(d)
    doc = json.loads((d / f"{stem}.json").read_text())
    rng = random.Random(zlib.crc32(f"values {d.name} {stem}".encode()))
    bad = []
    for path, new in value_mutants(doc, rng, VALUE_MUTANTS):
        where = ".".join(map(str, path))
        signal.alarm(HANG_S)
        try:
            obj = read_bytes_as_report_does(d, stem, json.dumps(new).encode())
            if stem == "meta":
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                text = analyse_one(stages, stem, obj)
            m = NOT_A_NUMBER.search(text)
            if m:
                bad.append(f"{where}: a table shows {m.group(0)!r}")
        except DataError as e:
            assert f"{stem}.json" in e.line(), e.line()
        except Exception as e:  # noqa: BLE001 - what the test is looking for
            bad.append(f"{where}: {type(e).__name__}: {e}")
        finally:
            signal.alarm(0)
    assert not bad, "\n".join(bad[:10])


def test_the_mutations_reach_the_analysis():
    """The fuzzer is not vacuous: of the value mutations of the per-call matrix, some are
    read (and so analysed) and some refused."""
    d = DIRS[0]
    doc = json.loads((d / "percall.json").read_text())
    read = refused = 0
    for _, new in value_mutants(doc, random.Random(1), 60):
        try:
            read_bytes_as_report_does(d, "percall", json.dumps(new).encode())
            read += 1
        except DataError:
            refused += 1
    assert read and refused, (read, refused)
