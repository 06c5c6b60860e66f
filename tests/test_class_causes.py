"""The class page groups the students' machines by the measured cause first: the price of one
VM exit, bucketed with its intervals (analyse.fleet.exit_buckets), before the fingerprint
facts, and says when a fact (the kernel's build string) only travels with it.

Why it can break: the page groups by vendor, kernel and vDSO instruction only, none of which
is the cause of the int 0x80 spread it shows; machines without a cpuid cell are dropped, or
given a price; a kernel string that splits the class exactly as the exit price does reads as
the reason.

The class is the atlas's runs (data/machines, as `tw lesson --class` reads them) and six
synthetic students from a known host (test_causes.matrix_priced) with the recorded KVM guest
facts of tests/fixtures/causes/kvm-6.18.json: three on one kernel build whose host charges
1000 ns an exit, three on another whose host charges 4000 ns.
"""
import copy
import functools
import pickle

from conftest import ROOT  # noqa: F401  (puts scripts/ on the path)
from test_causes import facts, matrix_priced
from twtools.analyse import atlas, fleet
from twtools.present import lesson
from twtools.present.document import plain

LAB = [(f"lab-a{i}", "6.18.44-lab-a", 1000.0) for i in range(3)] + \
      [(f"lab-b{i}", "6.18.44-lab-b", 4000.0) for i in range(3)]


def students():
    """The atlas's machines and the six lab ones, as the class page is given them: a fresh
    copy each call, of a list made once per process (the atlas's digests take about a
    second)."""
    return pickle.loads(_students())


@functools.lru_cache(maxsize=None)
def _students():
    got, skipped = atlas.load()
    assert skipped == []
    ds = list(got)
    for i, (host, kernel, price) in enumerate(LAB):
        fp = copy.deepcopy(facts("kvm-6.18"))
        fp["kernel"]["release"] = kernel
        ds.append(fleet.digest_doc(matrix_priced(price, seed=10 + i), fp, {}, host))
    return pickle.dumps([{"label": d["host"], "digest": d, "page": f"p{i}.html"}
                         for i, d in enumerate(ds)], pickle.HIGHEST_PROTOCOL)


def blocks_after(doc, heading):
    i = next(k for k, b in enumerate(doc.blocks) if b[0] == "h" and plain(b[2]) == heading)
    return doc.blocks[i + 1:]


def test_the_class_page_groups_by_the_exit_price_first():
    ss = students()
    doc, _ = lesson.class_page(ss, [])
    # The page opens with the cause: the second paragraph, before the strip plot.
    ps = [plain(b[1]) for b in doc.blocks if b[0] == "p"]
    assert ps[1].startswith("**Why int 0x80's cost differs between these machines: the price "
                            "of one VM exit.**"), ps[1]
    assert "where one exit costs" in ps[1] and "only travel" in ps[1], ps[1]
    assert [b[0] for b in doc.blocks][:3] == ["h", "p", "p"], doc.blocks[:3]
    after = blocks_after(doc, "Machines grouped by the measured cause, then by what differs")
    intro = plain(after[0][1])
    assert intro.startswith("By **the price of one VM exit**"), intro
    table = after[1]
    assert table[0] == "table" and plain(table[1][0]) == "exit price", table[:2]
    rows = [[plain(c) for c in r] for r in table[2]]
    buckets = fleet.exit_buckets([s["digest"] for s in ss])
    # One row per price bucket, cheapest first, then the machines that priced none.
    assert [r[0] for r in rows] == [fleet.bucket_label(b) for b in buckets] + [fleet.NOT_PRICED]
    assert len(buckets) >= 2
    cheap = next(r for r in rows if "lab-a0" in r[3])
    dear = next(r for r in rows if "lab-b0" in r[3])
    assert rows.index(cheap) < rows.index(dear)
    assert float(cheap[2].rstrip("x")) < float(dear[2].rstrip("x")), (cheap, dear)
    unpriced = rows[-1]
    assert "intel-icelake-kvm" in unpriced[3] and int(unpriced[1]) == 4, unpriced
    # The exit price's share of the spread, said under its table.
    assert "The exit price accounts for" in plain(after[2][1]), after[2]
    # The kernel build string comes after it, and is said to travel with the price.
    text = [plain(b[1]) for b in after if b[0] == "p"]
    k = next(t for t in text if t.startswith("By **kernel**"))
    assert "not a cause of the int 0x80 spread of its own" in k and "only travels" in k, k
    # Every student's row carries their exit price, or says it is unknown.
    every = blocks_after(doc, "Every student")[0]
    assert plain(every[1][1]) == "exit price"
    by = {plain(r[0]): plain(r[1]) for r in every[2]}
    assert by["lab-b1"].startswith("exit ") and "exits/call" in by["lab-b1"], by["lab-b1"]
    assert "unknown" in next(v for k, v in by.items() if "icelake" in k)


def test_a_class_without_prices_says_it_cannot_group_by_the_cause():
    ss = [s for s in students() if (s["digest"].get("causes") or {}).get("exit_price", {}).get(
        "value") is None]
    doc, _ = lesson.class_page(ss, [])
    assert not any("Why int 0x80's cost differs" in plain(b[1]) for b in doc.blocks if b[0] == "p")
    after = blocks_after(doc, "Machines grouped by the measured cause, then by what differs")
    assert "No machine here priced a VM exit" in plain(after[0][1])
    assert not any(b[0] == "table" and plain(b[1][0]) == "exit price" for b in after)
