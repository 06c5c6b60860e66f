"""A bad value in a stage file is refused with the place it sits (analyse.schema).

Why it can break: schema.check takes a list of scalars in one pass and schema.finite first
walks a file without building any path (the raw rounds hold hundreds of thousands of numbers);
a shortcut that passes a bad value, refuses a good one (an address above the magnitude bound,
a null where one is allowed), or forgets where the bad value was, breaks the one-line refusal
every reader relies on ("percall.json: cells[3].rounds[0].samples_ns[2]: expected a number")."""
import math

import pytest

from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from twtools.analyse import schema

ROUNDS = {"cells": [{"rounds": [{"samples_ns": ["num"]}]}]}


SOUND = object()


def doc(bad=SOUND, at=(3, 0, 2)):
    d = {"cells": [{"rounds": [{"samples_ns": [float(100 + i) for i in range(500)]}
                               for _ in range(4)]} for _ in range(5)]}
    if bad is not SOUND:
        c, r, s = at
        d["cells"][c]["rounds"][r]["samples_ns"][s] = bad
    return d


def where(fn, *a):
    with pytest.raises(schema.Invalid) as e:
        fn(*a)
    return e.value.path, str(e.value)


def test_a_sound_file_passes_both_checks():
    schema.finite(doc())
    schema.check(ROUNDS, doc())
    schema.check(["num?"], [1.0, None, 2])
    schema.check(["posint"], [1, 2, 3])


@pytest.mark.parametrize("bad,what", [("abc", "expected a number"), (True, "expected a number"),
                                      (None, "expected a number"), ([], "expected a number")])
def test_check_names_the_bad_scalar_in_a_long_list(bad, what):
    path, msg = where(schema.check, ROUNDS, doc(bad))
    assert path == "cells[3].rounds[0].samples_ns[2]" and what in msg, (path, msg)


@pytest.mark.parametrize("bad,what", [(math.nan, "not a finite number"),
                                      (math.inf, "not a finite number"),
                                      (1e300, "larger than any time"),
                                      (10 ** 16, "larger than any time"),
                                      (2 ** 64, "too large")])
def test_finite_names_the_bad_number_in_a_long_list(bad, what):
    path, msg = where(schema.finite, doc(bad, at=(4, 3, 499)))
    assert path == "cells[4].rounds[3].samples_ns[499]" and what in msg, (path, msg)


def test_huge_finite_values_whose_sum_overflows_are_still_refused_where_they_are():
    d = doc()
    d["cells"][1]["rounds"][2]["samples_ns"][7:9] = [1.7e308, 1.7e308]
    assert where(schema.finite, d)[0] == "cells[1].rounds[2].samples_ns[7]"


def test_an_address_may_exceed_the_bound_and_only_an_address():
    vsyscall = 0xffffffffff601000
    schema.finite({"maps": [{"lo": vsyscall, "hi": vsyscall + 4096}], "auxv": {"33": vsyscall}})
    assert where(schema.finite, {"maps": [{"size": vsyscall}]})[0] == "maps[0].size"


def test_the_quick_pass_and_the_walk_agree_on_every_mutated_stage_file():
    """schema.check decides by fits() and names the place by _check_at(): the two must agree
    on every document, or a bad value passes (fits too lenient) or a sound file is refused
    with no place named (fits too strict).  Each stage file of the recorded fixture, with one
    value replaced at random (a fixed seed), many times."""
    import json
    import random

    from faults_util import random_replacements
    from twtools.analyse import results
    fix = ROOT / "tests" / "fixtures" / "results-fixture"
    values = [None, "x", -1, 0, 1e300, True, [], {}, [None], ["x"], {"median": 1}, "32-x",
              "bad name"]
    seen = {True: 0, False: 0}
    for stem in results.STEMS:
        if not (fix / f"{stem}.json").exists():
            continue
        spec = schema.STAGES[stem][2]
        doc = json.loads((fix / f"{stem}.json").read_text())
        # fits() and the walk change nothing: the mutants may share doc's unchanged parts
        mutants = random_replacements(doc, random.Random(stem), values, 60, shared=True)
        for _path, bad in [((), doc), *mutants]:
            try:
                schema._check_at(spec, bad)
                walk = True
            except schema.Invalid:
                walk = False
            assert schema.fits(spec, bad) == walk, (stem, _path)
            seen[walk] += 1
    assert seen[True] and seen[False], seen     # both answers were met
