"""tw observer on real runs (quick mode, two variants)."""
import pytest

from twtools.machine import probe
from twtools.measure import observer


@pytest.fixture(scope="module")
def doc(build, tmp_path_factory):
    vs = [v for v in ("64-syscall", "32-int80", "32-syscall")]
    return observer.observe(tmp_path_factory.mktemp("obs"), mode="quick", variants=vs)


def test_every_cell_present_and_blind_is_null(doc):
    for r in doc["rows"]:
        if not r["available"]:
            assert r["ns_per_call"]["value"] is None and r["why"]
            assert r["added_ns"]["value"] is None
    tracers = {(r["variant"], r["tracer"]) for r in doc["rows"]}
    for v in ("64-syscall", "32-int80"):
        if probe.check("syscost", v)[0]:
            assert {(v, t) for t in ("none", "strace", "perf-trace", "perf-stat", "bpftrace")} <= tracers


def test_perf_trace_blind_for_32bit(doc):
    r = next((r for r in doc["rows"] if r["variant"] == "32-int80" and r["tracer"] == "perf-trace"), None)
    if r is None:
        pytest.skip("32-int80 unsupported here")
    assert not r["available"] and "x86-64 table" in r["why"]


def test_added_is_traced_minus_bare(doc):
    bare = {r["variant"]: r["ns_per_call"] for r in doc["rows"]
            if r["tracer"] == "none" and r["available"]}
    for r in doc["rows"]:
        if r["available"] and r["tracer"] != "none":
            assert r["added_ns"]["median"] == pytest.approx(
                r["ns_per_call"]["median"] - bare[r["variant"]]["median"])
            lo, hi = r["added_ns"]["ci_low"], r["added_ns"]["ci_high"]
            assert lo <= r["added_ns"]["median"] <= hi


def test_unsupported_variant_has_reason(doc):
    r = [r for r in doc["rows"] if r["variant"] == "32-syscall"]
    ok, why = probe.check("syscost", "32-syscall")
    if ok:
        pytest.skip("32-syscall works on this CPU")
    assert r and r[0]["supported"] is False and r[0]["reason"] == why
