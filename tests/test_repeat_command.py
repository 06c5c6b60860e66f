"""meta.json's `command` is what measures this run again, and no more than it.

Why it can break: a fleet's `tw run --quick --only doctor,variants,bench --no-report` was
recorded as `make report`, so its report told readers to paste a command that measures every
stage in the default mode; a `tw run --target 2%` recorded without its target would send a
reader to a run of the mode's precision.  Pure: cli.run.repeat_command, no measurement.
"""
from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from twtools.cli import run


def test_the_whole_default_run_is_make_report():
    assert run.repeat_command("default", None, True, None) == "make report"


def test_any_other_run_is_the_tw_run_that_ran():
    assert run.repeat_command("quick", ["bench", "doctor", "variants"], False, None) == \
        "scripts/tw run --quick --only doctor,variants,bench --no-report"
    assert run.repeat_command("default", None, True, {"speculation": "ssbd"}) == \
        "scripts/tw run --speculation ssbd"
    assert run.repeat_command("long", ["census"], True, None) == "scripts/tw run --long --only census"


def test_a_target_run_says_its_target_and_a_budget_not_the_default():
    assert run.repeat_command("default", None, True, None, target=0.02) == \
        "scripts/tw run --target 2%"
    assert run.repeat_command("default", ["seed-sweep", "tlpi-sweep"], True, None,
                              target=0.015, budget_s=90) == \
        "scripts/tw run --target 1.5% --budget 90s --only seed-sweep,tlpi-sweep"
