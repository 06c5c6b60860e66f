"""tw observer on real runs (quick mode): what each tracer adds to a getppid call.

Why it can break: a tracer plug-in's wrapper no longer running the command (bpftrace -c takes
one quoted word), a blind tracer reported as costing 0, or the added cost computed against
another variant's bare run."""
import pytest

from conftest import judged
from twtools.analyse import observer as analyse
from twtools.machine import tracers
from twtools.measure import observer


@pytest.fixture(scope="module")
def doc(build, tmp_path_factory):
    vs = ["64-syscall", "32-int80"] + [v for v, r in judged("syscost").items()
                                       if r["status"] == "unsupported"][:1]
    raw = observer.observe(tmp_path_factory.mktemp("obs"), mode="quick", variants=vs)
    return raw, analyse.analyse(raw)


def test_every_cell_present_and_blind_is_null(doc):
    raw, a = doc
    names = {"none"} | {t.name for t in tracers.plugins()}
    for r in a["rows"]:
        if not r["available"]:
            assert r["ns_per_call"]["value"] is None and r["why"]
            assert r["tracer"] == "none" or r["added_ns"]["value"] is None
    seen = {(r["variant"], r["tracer"]) for r in a["rows"]}
    for v in ("64-syscall", "32-int80"):
        if judged("syscost")[v]["supported"]:
            assert {(v, t) for t in names} <= seen
    for r in raw["rows"]:
        assert "ns_per_call" not in r and "added_ns" not in r       # raw only


def test_perf_trace_blind_for_the_i386_abi(doc):
    _, a = doc
    r = next((r for r in a["rows"] if r["variant"] == "32-int80" and r["tracer"] == "perf-trace"), None)
    if r is None:
        pytest.skip("32-int80 unsupported here")
    assert not r["available"] and "x86-64 table" in r["why"]


def test_added_is_traced_minus_bare(doc):
    _, a = doc
    bare = {r["variant"]: r["ns_per_call"] for r in a["rows"]
            if r["tracer"] == "none" and r["available"]}
    for r in a["rows"]:
        if r["available"] and r["tracer"] != "none":
            assert r["added_ns"]["median"] == pytest.approx(
                r["ns_per_call"]["median"] - bare[r["variant"]]["median"])
            lo, hi = r["added_ns"]["ci_low"], r["added_ns"]["ci_high"]
            assert lo <= r["added_ns"]["median"] <= hi


def test_unsupported_variant_has_reason(doc):
    _, a = doc
    bad = [v for v, r in judged("syscost").items() if r["status"] == "unsupported"][:1]
    if not bad:
        pytest.skip("the oracle rules out no mechanism on this machine")
    r = [r for r in a["rows"] if r["variant"] == bad[0]]
    assert r and r[0]["supported"] is False and r[0]["why"]
