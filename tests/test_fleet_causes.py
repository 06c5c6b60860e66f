"""The fleet ranks measured causes first (issue 36, item 4): where the measured exit price
accounts for an int 0x80 ratio's spread, a fingerprint fact that travels with it (the kernel's
build string, the CPU model) is shown as confounded with it, never as an explanation of its
own, with the machines that tell the two apart, or the machine that would.

Why it can break: the ranking sorts by variance share alone, and a kernel string that splits
the machines exactly as their hosts' exit prices do explains "100% of the variance" and comes
first (as `tw fleet --atlas` said of int 0x80 before); a fleet in which the kernel does not
differ at all loses the exit price from its ranking; the buckets split one price in two on
noise, or join prices that differ fourfold.

The machines are made from a known host (test_causes.matrix_priced: every cell's batches are
its true cost times a two-state host) with the recorded KVM guest facts of
tests/fixtures/causes/kvm-6.18.json, only the kernel's build string changed, and digested as
`tw fleet` digests a results directory (analyse.fleet.digest_doc).
"""
import copy

from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from test_causes import facts, matrix_priced
from twtools.analyse import fleet
from twtools.cli import fleet as cli_fleet

COL = "32-int80 null"
CHEAP, DEAR = 1000.0, 4000.0


def machine(host, kernel, price, seed):
    fp = copy.deepcopy(facts("kvm-6.18"))
    fp["kernel"]["release"] = kernel
    return fleet.digest_doc(matrix_priced(price, seed=seed), fp, {}, host)


def fleet_of(spec):
    return fleet.view([machine(h, k, p, i) for i, (h, k, p) in enumerate(spec)], [])


def entries(view, col=COL):
    return [e for e in view["explain"] if e["column"] == col]


def test_exit_prices_are_bucketed_with_their_intervals():
    ds = [machine(f"m{i}", "6.18.44-a", p, i) for i, p in enumerate((CHEAP, CHEAP, DEAR, DEAR))]
    b = fleet.exit_buckets(ds)
    assert [sorted(x["hosts"]) for x in b] == [["m0", "m1"], ["m2", "m3"]], b
    assert b[0]["hi"] < b[1]["lo"] and b[0]["ci_low"] <= b[0]["lo"] <= b[0]["hi"] <= b[0]["ci_high"]
    assert " to " in fleet.bucket_label(b[0]) or "[" in fleet.bucket_label(b[0])


def test_same_kernel_different_exit_price_the_exit_price_is_named():
    """Four machines on one kernel build whose hosts charge 1000 or 4000 ns an exit, and two
    on another build at 4000 ns: the int 0x80 spread follows the price, within one kernel
    string too, so the ranking opens with the exit price and the kernel string explains
    nothing of its own."""
    v = fleet_of([("k1-cheap-a", "6.18.44-k1", CHEAP), ("k1-cheap-b", "6.18.44-k1", CHEAP),
                  ("k1-dear-a", "6.18.44-k1", DEAR), ("k1-dear-b", "6.18.44-k1", DEAR),
                  ("k2-dear-a", "6.18.44-k2", DEAR), ("k2-dear-b", "6.18.44-k2", DEAR)])
    es = entries(v)
    top = es[0]
    assert top["kind"] == "measured" and top["fact"] == "exit", top
    assert top["eta2"] > 0.9 and top["buckets"] == 2, top
    s = fleet.sentence(top)
    assert "the exit price (measured" in s and "where one exit costs" in s, s
    kernel = [e for e in es if e["fact"] == "kernel"]
    for e in kernel:
        assert e["confounded_with"] == "exit price", e
        assert e["own_share"] < fleet.OWN_SHARE, e
        t = fleet.sentence(e)
        assert "not an explanation of its own" in t and "explains" in t, t
        # The machines that tell them apart: one kernel string, two exit prices.
        assert "on one kernel (6.18.44-k1), the exit price differs" in t, t
    # Nothing in the ranking presents the kernel as the int 0x80 spread's explanation.
    assert not [e for e in es if e["kind"] == "fact" and not e.get("confounded_with")], es


def test_different_kernels_same_exit_price_the_exit_price_is_named():
    """Two kernel builds on hosts that charge the same 1000 ns an exit, and a third build on
    4000 ns hosts: the third build 'explains' the spread only as its hosts' price does; the
    first two, which share a price, are named as the machines that tell them apart."""
    v = fleet_of([("ka-1", "6.18.44-ka", CHEAP), ("ka-2", "6.18.44-ka", CHEAP),
                  ("kb-1", "6.18.44-kb", CHEAP), ("kb-2", "6.18.44-kb", CHEAP),
                  ("kc-1", "6.18.44-kc", DEAR), ("kc-2", "6.18.44-kc", DEAR)])
    es = entries(v)
    assert es[0]["kind"] == "measured" and "exit price" in fleet.sentence(es[0]), es[0]
    kernel = [e for e in es if e["fact"] == "kernel"]
    assert kernel, es
    for e in kernel:
        assert e["confounded_with"] == "exit price" and e["travels"] is True, e
        assert e["high"]["value"] == "6.18.44-kc", e
        t = fleet.sentence(e)
        assert "travels with the exit price" in t, t
        assert "at one exit price (" in t and "kernel differs" in t, t
        told = e["same_exit"][0]["groups"]
        assert {g["value"] for g in told} == {"6.18.44-ka", "6.18.44-kb"}, told
        assert sorted(h for g in told for h in g["hosts"]) == ["ka-1", "ka-2", "kb-1", "kb-2"]
        # Those machines' ratios agree: at one exit price the kernel string moves nothing.
        rs = [g["ratio"] for g in told]
        assert max(rs) / min(rs) < 1 + fleet.OUTLIER_REL, rs
    assert [e for e in es if e["kind"] == "fact" and not e.get("confounded_with")] == [], es


def test_no_machine_to_tell_them_apart_says_which_would():
    v = fleet_of([("a", "6.18.44-ka", CHEAP), ("b", "6.18.44-kc", DEAR)])
    e = next(e for e in entries(v) if e["fact"] == "kernel")
    t = fleet.sentence(e)
    assert "no machine here tells them apart" in t and "6.18.44-ka whose exit costs about" in t, t


def test_a_fact_with_an_effect_of_its_own_stays_an_explanation():
    """Where the exit price does not account for the spread (one price, two kernels whose
    int 0x80 differs by 2 us the model does not know), the kernel is not called confounded."""
    ds = [machine("p", "6.18.44-kp", CHEAP, 1), machine("q", "6.18.44-kp", CHEAP, 2)]
    fp = copy.deepcopy(facts("kvm-6.18"))
    fp["kernel"]["release"] = "6.18.44-kq"
    ds += [fleet.digest_doc(matrix_priced(CHEAP, extra=2000.0, seed=s), fp, {}, f"r{s}")
           for s in (3, 4)]
    es = entries(fleet.view(ds, []))
    k = [e for e in es if e["fact"] == "kernel"]
    assert k and all(not e.get("confounded_with") for e in k), k
    assert not [e for e in es if e["kind"] == "measured"], es


def test_the_atlas_no_longer_says_a_kernel_string_explains_int80():
    """`tw fleet --atlas`: the two runs that priced an exit (994 ns and about 3.5 us) differ
    in kernel build string too; the int 0x80 lines name the exit price first and the kernel
    only as travelling with it."""
    digests, refused = cli_fleet.compare(cli_fleet.atlas_jobs(), workers=1, progress=False,
                                         op="null")
    assert refused == []
    v = fleet.view(digests, refused, "null")
    for col in ("32-int80 null", "64-int80 null"):
        es = entries(v, col)
        assert es and es[0]["kind"] == "measured", [fleet.sentence(e) for e in es]
        for e in es:
            if e["kind"] == "fact" and e["fact"] in ("kernel", "cpu"):
                assert e["confounded_with"] == "exit price", fleet.sentence(e)
                assert "explains" not in fleet.sentence(e).split("travels")[0]
    from twtools.present import fleet as pfleet
    text = pfleet.text(v)
    ranked = text.split("what explains the differences")[1].split("facts that only travel")[0]
    assert "int80 null × reference: " in ranked
    for line in ranked.splitlines():
        if "int80" in line:
            assert "where kernel is" not in line and "the exit price" in line, line


def test_old_digests_without_int80_all_still_rank():
    """A digest stored before int80_all existed (fleet.duckdb's digest_json) has the first
    int 0x80 variant's brief only: its column still gets the exit price, the other none."""
    ds = [machine(f"o{i}", "6.18.44-k", p, i) for i, p in enumerate((CHEAP, DEAR, CHEAP, DEAR))]
    for d in ds:
        d["causes"].pop("int80_all")
    v = fleet.view(ds, [])
    assert entries(v)[0]["kind"] == "measured"
    assert not [e for e in entries(v, "64-int80 null") if e["kind"] == "measured"]
