"""The verdict: decided from the data by explicit rules, inconclusive when cells are unusable."""
import copy
import functools
import pickle
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from twtools.analyse import results, seedref, stats, verdict  # noqa: E402

FIX = ROOT / "tests" / "fixtures"


def data(name="results-fixture"):
    """The fixture as results.load reads it: a fresh copy each call, which a test may change.
    It is loaded once per process (about 0.3 s, and this file asks 15 times); the copy is a
    pickle's round trip, which keeps nothing shared with the next caller's."""
    return pickle.loads(_loaded(name))


@functools.lru_cache(maxsize=None)
def _loaded(name):
    return pickle.dumps(results.load(FIX / name), pickle.HIGHEST_PROTOCOL)


def ref_row(platform="server-linux-2.6-ext4", real=20.58, sys_s=0.02, loops=512):
    return [{"platform": platform, "mode": "sync", "bufsize": 256, "user_s": 0.0, "sys_s": sys_s,
             "real_s": real, "loops": loops},
            {"platform": platform, "mode": "async", "bufsize": 256, "user_s": 0.0, "sys_s": 0.0,
             "real_s": 0.0, "loops": loops}]


def test_fixture_verdict_is_decided_and_numbers_carried():
    d = data()
    v = verdict.decide(d, seedref.read())
    assert v["verdict"] in ("supported", "refuted", "inconclusive")
    assert v["libc32_entry"] == d["fingerprint"]["libc"]["32"]["entry"]
    c80 = verdict.percall_cell(d, "32-int80")
    clibc = verdict.percall_cell(d, "32-libc")
    if v["verdict"] != "inconclusive":
        exp = stats.diff_summary(verdict.core(c80), verdict.core(clibc))
        assert abs(v["int80_delta_ns"]["median"] - exp["median"]) < 1e-9
        assert v["sentence"] and str(round(v["int80_delta_ns"]["median"])) in v["sentence"]


def test_inconclusive_fixture_gives_reasons():
    v = verdict.decide(data("results-inconclusive"), seedref.read())
    assert v["verdict"] == "inconclusive"
    text = " ".join(v["reasons"])
    assert "unstable" in text and "unknown" in text
    assert v["sentence"].startswith("Inconclusive")


def forge(c, summary, samples=None):
    """Give an analysed cell this summary as both of its figures (typical and undisturbed),
    as a cell measured on a quiet host would have them."""
    c.update(summary)
    c.update(undisturbed_ns=summary["median"], undisturbed_ci_low=summary["ci_low"],
             undisturbed_ci_high=summary["ci_high"], primary="undisturbed",
             typical_unstable=summary.get("unstable"))
    if samples is not None:
        c["samples"] = samples


def _force(d, entry, int80, libc):
    """d (a fresh copy from data(), changed in place) with libc's 32-bit entry and the two
    cells' null figures forced."""
    d["fingerprint"]["libc"]["32"]["entry"] = entry
    for c in d["percall"]["cells"]:
        if c["op"] == "null" and c["variant"] in ("32-int80", "32-libc"):
            m = int80 if c["variant"] == "32-int80" else libc
            forge(c, stats.summarize([m * (1 + 0.001 * (i % 3)) for i in range(9)]))
    return d


def test_refuted_when_libc_avoids_int80_and_row_is_io_wait():
    d = _force(data(), "vdso", 800.0, 200.0)
    v = verdict.decide(d, ref_row())
    assert v["verdict"] == "refuted"
    row = next(r for r in v["seed_rows"] if r["mode"] == "sync")
    assert abs(row["explained_s"]["median"] - 512 * 600e-9) < 1e-6
    assert row["fraction"] < verdict.REFUTE_FRACTION


def test_not_refuted_when_cpu_time_could_hold_entry_cost():
    """A seed row whose own system time is most of its real time cannot be ruled out."""
    d = _force(data(), "vdso", 800.0, 200.0)
    v = verdict.decide(d, ref_row(real=1.0, sys_s=0.9))
    assert v["verdict"] == "inconclusive"


def test_missing_reference_is_inconclusive():
    v = verdict.decide(data(), None)
    assert v["verdict"] == "inconclusive"
    assert any("reference" in r for r in v["reasons"])


def test_unsupported_int80_is_inconclusive():
    d = data()
    for c in d["percall"]["cells"]:
        if c["variant"] == "32-int80":
            c.clear()
            c.update(variant="32-int80", op="null", supported=False, reason="no IA32 emulation")
    v = verdict.decide(d, ref_row())
    assert v["verdict"] == "inconclusive"
    assert any("no IA32 emulation" in r for r in v["reasons"])


def test_supported_when_libc_uses_int80_and_it_dominates_own_row():
    d = _force(data(), "int80", 800.0, 800.0)
    # this machine's own 32-libc sync 256 B row: make it entry-dominated
    for run in d["sweep_seed"]["runs"]:
        if run["variant"] == "32-libc" and run["mode"] == "sync":
            for row in run["rows"]:
                if row["buffsize"] == 256:
                    calls = row["calls"]
                    row["real_s"] = stats.summarize([calls * 700e-9 * (1 + 0.001 * i) for i in range(5)])
    for c in d["percall"]["cells"]:
        if c["variant"] == "32-vdso" and c["op"] == "null":
            forge(c, stats.summarize([100.0 * (1 + 0.001 * (i % 3)) for i in range(9)]))
    v = verdict.decide(d, ref_row())
    assert v["verdict"] == "supported", v["reasons"]


def test_build_verdict_writes_json(tmp_path):
    import shutil
    dst = tmp_path / "r"
    shutil.copytree(FIX / "results-fixture", dst)
    v = verdict.build_verdict(dst)
    assert (dst / "verdict.json").exists()
    for k in ("verdict", "sentence", "reasons", "libc32_entry", "int80_delta_ns", "seed_rows", "bitness"):
        assert k in v


def _force_samples(d, variant, samples):
    for c in d["percall"]["cells"]:
        if c["op"] == "null" and c["variant"] == variant:
            forge(c, stats.summarize(samples), samples)
    return d


def test_unstable_cells_refute_only_if_the_worst_case_does():
    """Noise that cannot change the answer must not make it inconclusive, and noise that can must."""
    d = _force(data(), "vdso", 800.0, 200.0)
    noisy80 = [800.0 * (1 + 0.3 * ((i % 5) - 2) / 2) for i in range(40)]   # CV ~ 20%
    _force_samples(d, "32-int80", noisy80)
    v = verdict.decide(d, ref_row())
    assert v["int80_null_ns"]["unstable"]
    assert v["verdict"] == "refuted", v["reasons"]
    assert v["unstable_cells"] and "worst case" in v["sentence"]
    assert abs(v["int80_worst_delta_ns"]["median"] - (max(noisy80) - 200.0 * 1.0)) < 1.0
    # A slow row short enough that the worst case could explain it: not refuted.
    v = verdict.decide(d, ref_row(real=512 * 1.2e-6 * 10, sys_s=0.0))
    assert v["verdict"] == "inconclusive"
    assert any("unstable" in r for r in v["reasons"])


def test_unstable_cells_never_support():
    d = _force(data(), "int80", 800.0, 800.0)
    _force_samples(d, "32-libc", [800.0 * (1 + 0.3 * ((i % 5) - 2) / 2) for i in range(40)])
    v = verdict.decide(d, ref_row())
    assert v["verdict"] == "inconclusive"


def _today_data(price, int80, fast, release=None):
    """The fixture with a cpuid cell priced at `price` and 32-int80 and the 32-bit fast path
    forged to these undisturbed figures (each with a 2% half-width)."""
    d = data()
    cells = d["percall"]["cells"]
    base = next(c for c in cells if c["variant"] == "64-syscall" and c["op"] == "null" and c["shape"] == "ret")
    cells.append(dict(copy.deepcopy(base), op="cpuid"))
    for c, v in ((cells[-1], price), (verdict.percall_cell(d, "32-int80"), int80),
                 (verdict.percall_cell(d, "32-vdso"), fast)):
        c.update(supported=True, undisturbed_ns=v, undisturbed_ci_low=0.98 * v, undisturbed_ci_high=1.02 * v)
    if release:
        d["fingerprint"]["kernel"]["release"] = release
    return d


def test_today_prices_int80_in_exits_and_keeps_the_seed_answer():
    """Issue 24 item 5: the reasoning adds what holds now, in exits, with the fitted count."""
    d = _today_data(4500.0, 4700.0, 200.0)
    v = verdict.decide(d, seedref.read())
    t = v["today"]
    assert t["predicted_exits"] == 1 and t["holds"] is True
    assert 0.9 < t["exits_per_call"]["ci_low"] < 1 < t["exits_per_call"]["ci_high"] < 1.1
    assert "Go's 386 runtime" in v["sentence"] and "One exit costs 4500 ns [4410, 4590] here" in v["sentence"]
    assert "exits per call" in v["sentence"] and "model fails" not in v["sentence"]
    assert "excludes exactly" not in v["sentence"]
    # 1.24 exits, its interval clear of 1: near one, and said to be not exactly one.
    t = verdict.decide(_today_data(4500.0, 5780.0, 200.0), seedref.read())["today"]
    assert t["holds"] is True and "Its interval excludes exactly 1: int 0x80 costs more" in t["text"]
    # The seed's answer is the one decided without the cpuid cell.
    assert v["verdict"] == verdict.decide(data(), seedref.read())["verdict"]


def test_today_says_plainly_when_the_fit_is_not_one_exit():
    v = verdict.decide(_today_data(4500.0, 9200.0, 200.0), seedref.read())
    assert v["today"]["holds"] is False and "the model fails on this machine" in v["sentence"]


def test_today_without_exit_price_or_on_an_old_kernel():
    v = verdict.decide(data(), seedref.read())
    assert "The exit's price here is unknown: these results have no cpuid cell" in v["today"]["text"]
    v = verdict.decide(_today_data(4500.0, 4700.0, 200.0, release="6.6.30"), seedref.read())
    assert v["today"]["predicted_exits"] == 0 and "pays no VM exit per call" in v["today"]["text"]
    assert "older than 6.7" in v["today"]["text"]
    # Yet the forged matrix holds one exit's worth: the text says the model fails here.
    assert v["today"]["holds"] is False and "the model fails on this machine" in v["today"]["text"]
