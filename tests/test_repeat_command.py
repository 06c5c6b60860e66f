"""meta.json's `command` is what measures this run again, and no more than it.

Why it can break: a fleet's `tw run --quick --only doctor,variants,bench --no-report` was
recorded as `make report`, so its report told readers to paste a command that measures every
stage in the default mode.  Pure: cli.run.repeat_command, no measurement.
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
