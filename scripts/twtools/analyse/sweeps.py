"""The sweeps' figures (seed, TLPI, writev, stdio), computed from their raw samples.

The sweep stage files keep every repetition's user, system and real seconds (and, for
writev, both timings of each paired repetition); here they become summaries, the seed
sweep's fits and its knee.  A stage file from before this split carries summaries as well;
they are ignored and recomputed from the samples beside them.
"""
import bisect
import math

import numpy as np

from ..core import files
from . import fits, percall, sequential, stats

ANALYSIS = "sweeps/7"   # 7: the runs labelled by the host's state, their fast figures beside


def _arr(row, key):
    s = (row.get("samples") or {}).get(key)
    return np.asarray([x for x in s if x is not None], float) if s else None


# Why a row leads with its typical figure rather than the undisturbed one.
WAITS = ("an O_SYNC write waits for the disk: its time is mostly waiting, which is what the "
         "row measures, so the typical figure (the median) leads (†)")
NO_ROUNDS = ("recorded without the run of each pass (a sweep from before batches): only the "
             "typical figure can be computed")


def _by_round(rnd, *series):
    """Each series (arrays as long as rnd) cut into one list per run, in run order: the
    units the undisturbed figure's jackknife leaves out."""
    keys = sorted(set(rnd))
    out = []
    for x in series:
        groups = {k: [] for k in keys}
        for r, v in zip(rnd, x.tolist()):
            groups[r].append(v)
        out.append([groups[k] for k in keys])
    return out


# A session's figure counts toward the sessions' term with at least this many rounds.
SESSION_MIN_ROUNDS = 2


def _across_sessions(u, keys, runs, sessions):
    """u (stats.undisturbed of all the runs) with its interval widened by the figure's move
    between the sweep's sessions (measure.sweep.Together: tw run measures half the rounds
    after the matrix and the rest a minute or more later): each session's own figure, the
    largest difference between two of them less what their jackknife errors explain (term
    'sessions'; `sessions` keeps each figure, its rounds and the term).

    Why: a copy-bound row moves with the host's memory in states that last tens of seconds.
    The rounds of one moment all share its state, so neither their spread nor the drift
    between the run's halves sees it, and a rerun in another state misses (29 of 70 async rows
    of one pair on the AMD EPYC guest, by 3-19%, on intervals of +-1-3%).  Two sessions a
    minute apart are two draws of that state; their difference is what a rerun may move.

    The halves' drift (stats) measures the same move, from the halves of the rounds (about the
    sessions), doubled as a trend over the run: the interval takes the larger of the two, in
    quadrature with the sampling and blocks terms, never both."""
    if u.get("value") is None or u.get("ci_low") is None or not sessions or len(sessions) < 2:
        return u
    figs = []
    for r0, r1 in sessions:
        part = [runs[i] for i, k in enumerate(keys) if r0 <= k < r1]
        if len(part) >= SESSION_MIN_ROUNDS:
            f = stats.undisturbed(part)
            if f.get("value") is not None and f.get("se") is not None:
                figs.append((f["value"], f["se"], len(part)))
    if len(figs) < 2:
        return u
    pairs = [(a, b) for i, a in enumerate(figs) for b in figs[i + 1:]]
    term = max(math.sqrt(max(0.0, (a[0] - b[0]) ** 2 - a[1] ** 2 - b[1] ** 2)) for a, b in pairs)
    # whether the largest move is one the sampling errors do not explain at the 95% level:
    # what a count over many rows sets beside chance (5% of them), where `term` > 0 alone
    # happens by chance in about a third of rows that did not move
    a, b = max(pairs, key=lambda p: abs(p[0][0] - p[1][0]))
    out = dict(u, sessions={"figures": [x[0] for x in figs], "se": [x[1] for x in figs],
                            "n_rounds": [x[2] for x in figs], "term": term,
                            "resolved": abs(a[0] - b[0]) > stats.Z * math.hypot(a[1], b[1])})
    if term <= (u.get("drift") or 0.0):
        return out
    e, blocks = u["value"], u.get("blocks") or 0.0
    h = math.hypot(e - u["ci_stat_low"], stats.Z * blocks, term)
    h = max(h, u.get("level_spacing") or 0.0, u.get("resolution") or 0.0)
    out.update(ci_low=e - h, ci_high=e + h,
               terms=["sampling"] + (["blocks"] if blocks else []) + ["sessions"])
    return out


# The host's state (issue 62): the sweeps run the matrix's probe between their timewrite runs
# (measure/sweep.py, HostProbes; host_state in the file).  A run met the fast state when the
# probes just before and just after it were both fast (percall.host_label, the matrix's rule,
# relabelled here from the whole sweep's probes).  Beside each async row's figure, `host` gives
# the figure of its fast runs alone when at least HOST_FAST_MIN of them are (the drift term's
# least rounds), and beside its vs_ref the ratio over the rounds whose cells at that size were
# all measured within one quiet burst, when at least as many are.
#
# The figures lead over every run, as before: where they rested on the fast runs, two
# back-to-back sweep runs beside the noisy neighbour on the AMD EPYC Zen 4 guest reproduced
# worse (vs_ref within +-2% in 61.9% and 94.2% of 155 async rows against 81.3% and 96.1% over
# every run of the same samples; moved at most 2% between the runs in 87.1-92.9% against
# 96.5-98.6%): the probe (a null call) found the host fast in 91-98% of its probes, while
# what moves a sweep's row is a copy through memory, which it does not see, and every run
# left out cost precision (docs/sweeps.md, "The host's state").
HOST_FAST_MIN = stats.UNDISTURBED_MIN_ROUNDS


def _brief(u):
    """An undisturbed figure's {value, ci_low, ci_high, n_rounds}."""
    return {"value": u.get("value"), "ci_low": u.get("ci_low"), "ci_high": u.get("ci_high"),
            "n_rounds": u.get("n_rounds")}


def _agrees(a, b):
    """Whether two figures' intervals overlap (None when either has none)."""
    if None in (a.get("ci_low"), a.get("ci_high"), b.get("ci_low"), b.get("ci_high")):
        return None
    return bool(a["ci_low"] <= b["ci_high"] and b["ci_low"] <= a["ci_high"])


def host_labels(obj):
    """(probes [(t_s, floor, fast)], burst id per probe) of a sweep file's host_state, the
    probes relabelled by percall.host_probes from the whole sweep; ([], []) without probes (a
    sweep from before them, or one whose probe failed: host_state.why)."""
    if not ((obj or {}).get("host_state") or {}).get("probes"):
        return [], []
    probes = percall.host_probes(obj)[0]
    ids, cur, prev = [], 0, False
    for _, _, fast in probes:
        if fast and not prev:
            cur += 1
        ids.append(cur if fast else None)
        prev = fast
    return probes, ids


def run_labels(row, probes, ids):
    """{round: burst id, or None when that run did not meet the host's fast state} of a row's
    runs (samples.round and samples.t_s, the run's start on the probes' clock): a run is fast
    when the probes on each side of it were (the one there is, at either end), and its burst
    is theirs (two fast probes in a row are one burst).  None without probes or run times."""
    smp = row.get("samples") or {}
    rnd, ts = smp.get("round"), smp.get("t_s")
    if not probes or not rnd or not ts or len(rnd) != len(ts):
        return None
    out = {}
    for r, t in zip(rnd, ts):
        if r in out or not isinstance(t, (int, float)):
            continue
        i = bisect.bisect_right(probes, t, key=lambda p: p[0])
        near = [j for j in (i - 1, i) if 0 <= j < len(probes)]
        out[r] = ids[near[0]] if all(probes[j][2] for j in near) else None
    return out


def _undisturbed(row, nspc, target=None, sessions=None, labels=None):
    """The undisturbed ns per call of one row: its passes grouped by the run they came from
    (samples.round), the mean of the fastest passes with the jackknife over runs
    (stats.undisturbed, as every per-call cell).  labels (run_labels): `host` says how many
    of its runs met the host's fast state and gives, when HOST_FAST_MIN or more did, their
    figure alone (`fast`, with the sessions' term as the lead's) and whether it agrees with
    the lead's interval; else why there is none.  target (tw sweep --target): the same figure
    and interval, with `sequential: {met, need_n, n, screened, target, stein}`: Stein's
    two-stage rule over the runs' floors in run order (analyse/sequential.py) says when enough
    runs are in, and the row is met once it says so and the interval above is within the
    target too; until the rule's first stage is complete, not met, with why.

    Why not Stein's own figure and interval, as the matrix's --target gives: a sweep row's
    floors are no fast state under a ceiling but one wide spread (a 128 KiB write's copy moved
    with the host's memory, 24.4 to 30 us on the AMD EPYC guest), so "within 5% of the lowest"
    kept 11 of 482 runs in one run and 51 of 103 in its rerun: figures 10% apart on intervals
    of +-0.3-0.6%, and two back-to-back `--target 2%` seed sweeps overlapped in 42 of 70 async
    rows.  The same rounds analysed by this figure, whose interval holds the host's drift over
    the run, overlapped in 70 of 70 (docs/syscost.md, "Stopping when precise enough")."""
    rnd = (row.get("samples") or {}).get("round")
    if not rnd or len(rnd) != nspc.size:
        return None
    runs = _by_round(rnd, nspc)[0]
    keys = sorted(set(rnd))
    u = _across_sessions(stats.undisturbed(runs), keys, runs, sessions)
    if labels is not None:
        fast = [i for i, k in enumerate(keys) if labels.get(k) is not None]
        host = {"fast_runs": len(fast), "runs": len(keys), "min": HOST_FAST_MIN, "fast": None}
        if len(fast) >= HOST_FAST_MIN:
            fk, fr = [keys[i] for i in fast], [runs[i] for i in fast]
            host["fast"] = _brief(_across_sessions(stats.undisturbed(fr), fk, fr, sessions))
            host["agrees"] = _agrees(host["fast"], u)
        else:
            host["why"] = (f"{len(fast)} of its {len(keys)} runs met the host's fast state, "
                           f"fewer than {HOST_FAST_MIN}: no figure of its fast runs alone")
        u = dict(u, host=host)
    if not target:
        return u
    seq = sequential.progress([min(r) for r in runs if r], target)
    iv = seq["interval"]
    if iv["value"] is None:
        return dict(u, sequential={
            "met": False, "need_n": iv["need_n"], "target": target, "why": iv.get("why")})
    h = stats.half_width_rel(u, "value")
    met = bool(iv["met"]) and h is not None and h <= target
    return dict(u, method=u.get("method", stats.METHOD) + "; the runs' number decided by "
                "Stein's two-stage rule (tw sweep --target)",
                sequential={"met": met, "need_n": iv["need_n"], "n": iv["n"],
                            "screened": iv["screened"], "target": target,
                            "stein": {"value": iv["value"], "ci_low": iv["ci_low"],
                                      "ci_high": iv["ci_high"], "met": iv["met"]}})


def target_status(analysed, target):
    """{met, judged, missing, more_runs, first_stage_incomplete, wide} of an analysed sweep's async
    rows against a --target: how many are within it by the rule's own judgement (Stein's
    `met`), which are not yet, the most runs any row still needs (a planned row: its plan's;
    one whose first stage is not complete: the runs that, at the share of its runs within the
    screen so far, would complete it, a lower bound), how many rows' first stage is not
    complete, and how many rows the rule has runs enough for but whose interval over the runs
    (the host's drift in it) is still wider than the target (wide)."""
    met, judged, missing, more, first, wide = 0, 0, [], 0, 0, 0
    for run in (analysed or {}).get("runs") or []:
        if run.get("mode") != "async" or not run.get("supported"):
            continue
        for row in run.get("rows") or []:
            sq = (row.get("undisturbed") or {}).get("sequential") or {}
            judged += 1
            if sq.get("met"):
                met += 1
                continue
            missing.append(f"{run.get('variant')} {row.get('buffsize')} B")
            if (sq.get("stein") or {}).get("met"):
                wide += 1
            if sq.get("why"):
                first += 1
                fl = [min(v) for v in (_round_groups(row) or {}).values()]
                if fl:
                    lo = min(fl)
                    near = sum(1 for x in fl if x <= lo * (1 + sequential.SCREEN))
                    # runs at the fast share this row showed until its first stage is whole
                    more = max(more, math.ceil((sequential.N0_MIN - near) * len(fl) / near))
            elif sq.get("need_n"):
                more = max(more, sq["need_n"] - sq.get("n", 0))
    return {"met": met, "judged": judged, "missing": missing, "more_runs": more,
            "first_stage_incomplete": first, "wide": wide}


def vs_ref_status(analysed, target):
    """{met, judged, missing, held, held_by, wide_sizes, held_sizes, median_half_width} of an analysed
    sweep's async vs_ref rows against a --target (a relative half-width): how many are within
    it (half-width over the value), which are not, and of those which no more rounds can bring
    within it: `held` by their mechanism's move within the run (the 'mechanism' term, vs_ref's
    docstring), a spread of the host's and no sampling error, when that term alone is as wide
    as the target (held_by: {variant: its half-width}).  wide_sizes: the sizes of the rest,
    where more rounds narrow the interval (measure.sweep runs only those past the plan);
    held_sizes, the held rows' sizes.
    judged 0 when the sweep has no vs_ref (fewer than two async mechanisms).

    Why vs_ref and not the absolute figure: between runs the sweeps lead with vs_ref, which
    cancels the host's move at each size; the absolute figure of a copy-bound row holds the
    host's memory state, which more rounds of one run do not narrow (target_status judges it,
    docs/sweeps.md, "--target")."""
    met, judged, missing, held, held_by, wide, hws = 0, 0, [], [], {}, set(), []
    held_sizes = set()
    for run in (analysed or {}).get("runs") or []:
        if run.get("mode") != "async" or not run.get("supported", True):
            continue
        for row in run.get("rows") or []:
            vr = row.get("vs_ref") or {}
            e, lo, hi = vr.get("value"), vr.get("ci_low"), vr.get("ci_high")
            if e is None or lo is None or hi is None or e <= 0:
                continue
            judged += 1
            h = (hi - lo) / 2 / e
            hws.append(h)
            if h <= target:
                met += 1
                continue
            name = f"{run.get('variant')} {row.get('buffsize')} B"
            missing.append(name)
            m = stats.Z * (vr.get("mechanism") or 0.0)
            if m >= target:
                held.append(name)
                held_by[run.get("variant")] = m
                held_sizes.add(row["buffsize"])
            else:
                wide.add(row["buffsize"])
    return {"met": met, "judged": judged, "missing": missing, "held": held, "held_by": held_by,
            "wide_sizes": sorted(wide), "held_sizes": sorted(held_sizes),
            "median_half_width": float(np.median(hws)) if hws else None}


# What a default report holds its sweeps' async vs_ref rows to, and says how to meet.
REPORT_TARGET = 0.02


def to_target(analysed, target=REPORT_TARGET):
    """How far an analysed sweep's async vs_ref rows are from a target, and what `--target`
    would take to meet them: {target, judged, met, missing: [{row, half_width}], held:
    [{row, half_width}], rounds, more_rounds, per_round_s, more_s}.  A row's half-width narrows
    as 1/sqrt(rounds) (the variance lives between runs), so the rounds one needs are the rounds
    done times (its half-width / target) squared; more_rounds is the most any missing row
    needs beyond those done, more_s that many rounds at this sweep's own pace (an upper bound:
    rounds past the plan measure the wide sizes alone).  A row held by its mechanism's move
    within the run (vs_ref_status) is not met by more rounds, and is listed apart.  None when
    the sweep has no vs_ref rows."""
    st = vs_ref_status(analysed, target)
    if not st["judged"]:
        return None
    rows = {}
    for run in (analysed or {}).get("runs") or []:
        if run.get("mode") != "async":
            continue
        for row in run.get("rows") or []:
            vr = row.get("vs_ref") or {}
            if vr.get("value") and vr.get("ci_low") is not None:
                rows[f"{run.get('variant')} {row.get('buffsize')} B"] = \
                    (vr["ci_high"] - vr["ci_low"]) / 2 / vr["value"]
    done = analysed.get("rounds_done") or analysed.get("rounds") or 0
    secs = sum(x.get("seconds") or 0 for x in analysed.get("sessions") or []) or None
    missing = [{"row": r, "half_width": rows[r]} for r in st["missing"] if r not in st["held"]]
    need = max((math.ceil(done * (m["half_width"] / target) ** 2 - 1e-9) for m in missing),
               default=done) if done else None
    more = max(0, need - done) if need is not None else None
    per = secs / done if secs and done else None
    return {"target": target, "judged": st["judged"], "met": st["met"],
            "missing": sorted(missing, key=lambda m: -m["half_width"]),
            "held": [{"row": r, "half_width": rows[r]} for r in st["held"]],
            "rounds": done, "more_rounds": more, "per_round_s": per,
            "more_s": more * per if more is not None and per else None}


def host_summary(out, probes):
    """The host's state over an analysed sweep: the probes, the share fast, how many async
    rows have a figure of their fast runs beside their undisturbed figure and vs_ref, and in
    how many of those the two intervals overlap (agree); {why} without probes."""
    hs = out.get("host_state") or {}
    if not probes:
        return {"why": hs.get("why") or "no host probes in this sweep (recorded before them)"}
    rows = [row for run in out.get("runs") or [] if run.get("mode") == "async"
            for row in run.get("rows") or []]
    und = [(row.get("undisturbed") or {}).get("host") for row in rows]
    vr = [(row.get("vs_ref") or {}).get("host") for row in rows]
    und, vr = [h for h in und if h], [h for h in vr if h]
    n_fast = sum(1 for p in probes if p[2])
    return {"probes": len(probes), "fast_probes": n_fast, "fast_share": n_fast / len(probes),
            "min_runs": HOST_FAST_MIN, "undisturbed_rows": len(und),
            "undisturbed_fast": sum(h["fast"] is not None for h in und),
            "undisturbed_agree": sum(bool(h.get("agrees")) for h in und),
            "vs_ref_rows": len(vr), "vs_ref_paired": sum(h["paired"] is not None for h in vr),
            "vs_ref_agree": sum(bool(h.get("agrees")) for h in vr)}

def lead(row, mode):
    """(summary {median, ci_low, ci_high, unstable, n, figure}, why typical or None): the
    figure a row leads with.  Async rows lead with the undisturbed figure where their passes
    were taken in batches over several runs; O_SYNC rows with the typical one (WAITS)."""
    typ = dict(row.get("ns_per_call") or {}, figure="typical")
    if mode == "sync":
        return typ, WAITS
    u = row.get("undisturbed")
    if not u:
        return typ, NO_ROUNDS
    if u.get("value") is None or u.get("ci_low") is None:
        return typ, u.get("why") or "no undisturbed interval"
    return dict(as_summary(u), unstable=stats.unstable(u["value"], u["ci_low"], u["ci_high"]),
                n=u.get("n"), n_rounds=u.get("n_rounds"), figure="undisturbed"), None


def as_summary(u):
    """An undisturbed figure ({value, ci_low, ci_high, ...}, stats.undisturbed) in the keys a
    summary has ({median, ci_low, ci_high}), for what formats summaries."""
    u = u or {}
    return {"median": u.get("value"), "ci_low": u.get("ci_low"), "ci_high": u.get("ci_high")}


def sweep(obj):
    """An analysed copy of sweep_seed.json or sweep_tlpi.json."""
    if not obj:
        return None
    out = files.copy_doc(obj)
    sessions = [tuple(x["rounds"]) for x in out.get("sessions") or [] if x.get("rounds")]
    probes, ids = host_labels(out)
    for run in out.get("runs", []):
        for row in run.get("rows") or []:
            u, s, r = (_arr(row, k) for k in ("user_s", "sys_s", "real_s"))
            if r is None:
                continue
            labels = run_labels(row, probes, ids)
            wait = r - u - s
            nspc = r / row["calls"] * 1e9
            rnd = (row.get("samples") or {}).get("round")
            ts = (row.get("samples") or {}).get("t_s")
            row["samples"] = {"user_s": u.tolist(), "sys_s": s.tolist(), "real_s": r.tolist(),
                              "wait_s": wait.tolist(), "ns_per_call": nspc.tolist()}
            for k, v in row["samples"].items():
                row[k] = stats.summarize(v)
            if rnd is not None:
                row["samples"]["round"] = rnd
            if ts is not None:
                row["samples"]["t_s"] = ts
            und = _undisturbed({"samples": {"round": rnd}}, nspc,
                               out.get("target") if run.get("mode") == "async" else None,
                               sessions, labels if run.get("mode") == "async" else None)
            if und is not None:
                row["undisturbed"] = und
                row["undisturbed_ns"], row["undisturbed_ci_low"], row["undisturbed_ci_high"] = \
                    und.get("value"), und.get("ci_low"), und.get("ci_high")
            row["lead"], row["lead_why"] = lead(row, run.get("mode"))
            row["figure"] = row["lead"]["figure"]
    fitted = fits.fit_linear(out.get("runs", []), out.get("page_size") or fits.PAGE)
    out["fits"] = fitted
    out["vs_ref_of"] = vs_ref(out.get("runs", []), probes, ids)
    out["host"] = host_summary(out, probes)
    if out["vs_ref_of"]:
        out["fits_vs_ref"], out["knee_vs_ref"] = excess_vs_ref(
            out.get("runs", []), out.get("page_size") or fits.PAGE)
    modes = sorted({run.get("mode") for run in out.get("runs", [])})
    out["knee"] = {m: (fits.knee([f for f in fitted if f["mode"] == m]) if m == "async" else
                       {"value": None, "why": "O_SYNC per-call time is mostly I/O wait; differences "
                                              "in its intercepts are disk noise, not entry cost"})
                   for m in modes}
    if "host_clock" in out:
        out["host_clock"] = host_clock(out["host_clock"])
    out["analysis"] = ANALYSIS
    return out


# The reference every async cell of a sweep is divided by, measured in the same rounds: the
# geometric mean of every async mechanism swept at the same size.  Between two runs a minute
# apart the host moves, and not alike at every size: the copy-bound large writes and the
# entry-bound small ones move apart (docs/sweeps.md, "vs_ref between runs").  A reference of
# the same size moves with its cell; a mean over the mechanisms moves on its own by little (one
# cell alone moves it by a seventh of its own move), where a single reference cell took every
# ratio with it.  The mechanisms' differences at a size stay: the ratio of two cells' vs_ref
# is the ratio of their figures.  What vs_ref does not keep is the growth with size, so the
# lines and the knee on it are those of each mechanism's excess over the fastest one at the
# same size (fits.excess_line).
def _round_groups(row, key="ns_per_call"):
    """{round: [values]} of a row's passes, or None when they were not recorded by round."""
    smp = row.get("samples") or {}
    rnd, vals = smp.get("round"), smp.get(key)
    if not rnd or not vals or len(rnd) != len(vals):
        return None
    g = {}
    for r, v in zip(rnd, vals):
        g.setdefault(r, []).append(v)
    return g


# vs_ref's reproducibility term: the run's rounds cut into this many stretches in time order;
# each mechanism's move between them, pooled over its sizes, widens its cells' intervals.
VS_REF_BLOCKS = 4
VS_REF_BLOCK_MIN = 3          # rounds a stretch needs (the TLPI sweep's 12 rounds give 3)


def vs_ref(runs, probes=(), ids=()):
    """Each async row's undisturbed figure over the geometric mean of every async mechanism's
    at the same size, of the same rounds (stats.undisturbed_over_gmean), as row['vs_ref']
    {value, ci_low, ci_high, n_rounds, terms, host}, with row['vs_ref_of'] naming it; returns
    the sweep's name for it, or None when it has fewer than two async mechanisms measured by
    round.

    With the host's probes (host_labels), `host` beside it: the ratio over the rounds in which
    every cell at that size met the host's fast state within one quiet burst (the row and its
    reference measured in one quiet moment, paired there), as `paired`, when HOST_FAST_MIN
    or more such rounds exist, and whether it agrees with the lead's interval; else why not.

    The interval: the jackknife's, and in quadrature the mechanism's own move within the run
    (the 'mechanism' term): what moves one way into the kernel and not the others (the host's
    price of a VM exit, its compat path) does not cancel in the ratio, and the jackknife over
    rounds cannot see it when it moves slowly.  The run is cut into VS_REF_BLOCKS stretches;
    in each, every cell's ratio is computed again; a mechanism's log move in a stretch is the
    median over its sizes, and its spread over the stretches (the MAD's, as a standard
    deviation), less what the stretches' own sampling errors explain, is the term.  Pooled
    over the sizes, it is measured from every cell of the mechanism, not from a stretch of one."""
    asy = [r for r in runs if r.get("mode") == "async" and r.get("supported", True)
           and r.get("rows")]
    by_size = {}
    for run in asy:
        for row in run["rows"]:
            by_size.setdefault(row["buffsize"], []).append((run["variant"], row,
                                                            _round_groups(row)))
    used, found = set(), []
    for size, cells in sorted(by_size.items()):
        good = [c for c in cells if c[2]]
        keys = sorted(set.intersection(*[set(c[2]) for c in good])) if len(good) >= 2 else []
        res = stats.undisturbed_over_gmean([[c[2][k] for k in keys] for c in good]) \
            if len(keys) >= 2 else None
        host, q_res = None, None
        labels = [run_labels(c[1], probes, ids) for c in good] if probes else []
        if labels and all(lb is not None for lb in labels):
            quiet = [k for k in keys if labels[0].get(k) is not None
                     and all(lb.get(k) == labels[0][k] for lb in labels)]
            host = {"paired_in_burst": len(quiet), "rounds": len(keys), "min": HOST_FAST_MIN,
                    "paired": None}
            q_res = stats.undisturbed_over_gmean([[c[2][k] for k in quiet] for c in good]) \
                if len(quiet) >= HOST_FAST_MIN else None
            if not q_res:
                host["why"] = (f"in {len(quiet)} of its {len(keys)} rounds every cell at "
                               f"{size} B met the host's fast state within one burst, fewer "
                               f"than {HOST_FAST_MIN}: no ratio paired within a burst")
        name = f"geomean of {len(good)} async mechanisms at {size} B"
        at = {id(c[1]): i for i, c in enumerate(good)}
        for v, row, _ in cells:
            r = res[at[id(row)]] if res and id(row) in at else None
            if r is None:
                row["vs_ref"] = {"value": None, "ci_low": None, "ci_high": None,
                                 "why": "fewer than two mechanisms or rounds at this size "
                                        "measured by round"}
                continue
            row["vs_ref"] = {"value": r["median"], "ci_low": r["ci_low"],
                             "ci_high": r["ci_high"], "n_rounds": r["n_rounds"],
                             "terms": ["sampling"]}
            if host is not None:
                h = row["vs_ref"]["host"] = dict(host)
                if q_res:
                    q = q_res[at[id(row)]]
                    h["paired"] = {"value": q["median"], "ci_low": q["ci_low"],
                                   "ci_high": q["ci_high"], "n_rounds": q["n_rounds"]}
            row["vs_ref_of"] = name
            used.add(v)
        if res and len(keys) >= VS_REF_BLOCKS * VS_REF_BLOCK_MIN:
            found.append((keys, good, res))
    if not used:
        return None
    _mechanism_term(found)
    for _, row, _ in (c for cells in by_size.values() for c in cells):
        vr = row.get("vs_ref") or {}
        if (vr.get("host") or {}).get("paired"):
            vr["host"]["agrees"] = _agrees(vr["host"]["paired"], vr)
    return ("the geometric mean of the async mechanisms at the same size, same rounds ("
            + ", ".join(sorted(used)) + ")")


def _mechanism_term(found):
    """Widen each vs_ref interval by its mechanism's move between stretches of the run
    (vs_ref's docstring), and the ratio paired within a burst beside it (`host.paired`) by the
    same term: the mechanism's move is the run's.  found: (round keys, cells, full results)
    per size."""
    moves = {}                       # variant -> [per stretch: [(log move, rel. se) per size]]
    for keys, good, res in found:
        for b, ix in enumerate(np.array_split(np.arange(len(keys)), VS_REF_BLOCKS)):
            part = stats.undisturbed_over_gmean([[c[2][keys[i]] for i in ix] for c in good])
            for c, full, r in zip(good, res, part or [None] * len(good)):
                if full and r and r["median"] > 0 and full["median"] > 0:
                    moves.setdefault(c[0], [[] for _ in range(VS_REF_BLOCKS)])[b].append(
                        (math.log(r["median"] / full["median"]), r["se"] / r["median"]))
    term = {}
    for v, stretches in moves.items():
        if any(not s for s in stretches):
            continue
        d = np.array([np.median([m for m, _ in s]) for s in stretches])
        se2 = float(np.median([np.median([e for _, e in s]) ** 2 / len(s) for s in stretches]))
        sd = 1.4826 * float(np.median(np.abs(d - np.median(d))))
        term[v] = math.sqrt(max(0.0, sd ** 2 - se2))
    for keys, good, res in found:
        for c in good:
            vr = c[1].get("vs_ref") or {}
            t = term.get(c[0])
            if vr.get("value") is None or not t:
                continue
            e = vr["value"]
            h = math.hypot(vr["ci_high"] - e, stats.Z * t * e)
            vr.update(ci_low=e - h, ci_high=e + h, mechanism=t, terms=["sampling", "mechanism"])
            q = (vr.get("host") or {}).get("paired")
            if q and q.get("value") is not None:
                hq = math.hypot(q["ci_high"] - q["value"], stats.Z * t * q["value"])
                q.update(ci_low=q["value"] - hq, ci_high=q["value"] + hq)


def excess_vs_ref(runs, page):
    """(fits, knee) on vs_ref: each mechanism's excess over the fastest at the same size
    (the ratio of their vs_ref, the same rounds left out of both), its line through 1/excess
    and the size at which the slowest's falls to fits.KNEE_THRESHOLD (fits.excess_line).  The
    fastest and the slowest are those of the smallest size, where the way in shows most."""
    asy = [r for r in runs if r.get("mode") == "async" and r.get("supported", True)
           and r.get("rows")]
    groups = {r["variant"]: {row["buffsize"]: row for row in r["rows"]} for r in asy}
    rounds = {v: {s: _round_groups(row) for s, row in g.items()} for v, g in groups.items()}
    small = min((s for g in groups.values() for s in g), default=None)
    lead = {v: g[small]["vs_ref"]["value"] for v, g in groups.items()
            if small in g and (g[small].get("vs_ref") or {}).get("value") is not None}
    if len(lead) < 2:
        return [], {"value": None, "why": "fewer than two mechanisms with vs_ref"}
    fast, slow = min(lead, key=lead.get), max(lead, key=lead.get)
    out = []
    for v in sorted(lead):
        if v == fast:
            continue
        pts = []
        for size in sorted(groups[v]):
            a, b = rounds[v][size], rounds[fast].get(size)
            keys = sorted(set(a or {}) & set(b or {}))
            r = stats.undisturbed_ratio([a[k] for k in keys], [b[k] for k in keys]) \
                if len(keys) >= 2 else None
            if r:
                pts.append((size, r["median"] - 1, r["ci_low"] - 1, r["ci_high"] - 1))
        f = fits.excess_line(pts, v, fast, page)
        f["excess"] = [{"size": s, "value": e, "ci_low": lo, "ci_high": hi}
                       for s, e, lo, hi in pts]
        out.append(f)
    line = next(f for f in out if f["variant"] == slow)
    knee = dict(line.get("knee") or {"value": None, "why": line.get("why")},
                fastest=fast, slowest=slow)
    below = [p for p in line["excess"] if p["ci_high"] < fits.KNEE_THRESHOLD]
    if below:
        knee.update(value=float(below[0]["size"]), size_bytes=below[0]["size"], measured=True,
                    extrapolated=False, ci_low=None, ci_high=None)
    if line["excess"]:
        knee["excess_at_largest"] = line["excess"][-1]
    return out, knee


CLOCK_NOT_RECORDED = "this sweep was recorded without hostclock (before it existed)"


def host_clock(raw):
    """The host's speed for user code during a sweep, from hostclock's batches (one run per
    round): the undisturbed ns per multiply-add with its interval (stats.undisturbed, the
    jackknife over rounds and the drift term), and how far the per-round figure (the fastest
    batch of each round) wandered, as the 5th to 95th percentile over the median.  A cell in
    ns moves with this; analyse.sweepcheck sets the cells' move between runs beside its."""
    if not raw:
        return {"supported": False, "why": CLOCK_NOT_RECORDED}
    out = {k: v for k, v in raw.items() if k not in ("batch_ns", "round")}
    if raw.get("supported") is False:
        out["why"] = raw.get("reason") or "hostclock did not run"
        return out
    ns, rnd, it = raw.get("batch_ns"), raw.get("round"), raw.get("iterations")
    if not ns or not rnd or len(ns) != len(rnd) or not it:
        return dict(out, supported=False, why="no hostclock batches were recorded")
    per_it = np.asarray(ns, float) / it
    rounds = _by_round(rnd, per_it)[0]
    u = stats.undisturbed(rounds)
    best = np.asarray([min(r) for r in rounds])
    mid = float(np.median(best))
    out.update(supported=True, undisturbed=u, unit="ns per multiply-add",
               rounds=len(rounds),
               wander_low=float(np.percentile(best, 5) / mid - 1),
               wander_high=float(np.percentile(best, 95) / mid - 1),
               drift_rel=(u["drift"] / u["value"]) if u.get("drift") is not None
               and u.get("value") else None)
    return out


def _supported_rows(out):
    """The rows of a stage document whose mechanism was supported (the others hold no
    samples)."""
    return [row for row in out.get("rows", []) if row.get("supported")]


def writev(obj):
    """An analysed copy of writev.json: write and writev times, their paired ratio per rep."""
    if not obj:
        return None
    out = files.copy_doc(obj)
    for row in _supported_rows(out):
        w, v = _arr(row, "write_ns"), _arr(row, "writev_ns")
        ratio = v / w
        row["samples"]["ratio"] = ratio.tolist()
        row.update(write_ns=stats.summarize(w), writev_ns=stats.summarize(v),
                   ratio=stats.summarize(ratio),
                   write_ns_per_call=stats.summarize(w / row["write_calls"]))
        row["lead"], row["lead_why"] = _writev_lead(row, w, v)
        row["figure"] = row["lead"]["figure"]
    ok = _supported_rows(out)
    wins = [r for r in ok if r["lead"]["ci_high"] < 1]
    loses = [r for r in ok if r["lead"]["ci_low"] > 1]

    def extreme(fn):
        if not ok:
            return None
        r = fn(ok, key=lambda r: r["lead"]["median"])
        return {"bits": r["bits"], "n_buffers": r["n_buffers"], "size": r["size"],
                "ratio": r["lead"]}
    out["summary"] = {"cells": len(ok), "writev_faster": len(wins), "writev_slower": len(loses),
                      "best": extreme(min), "worst": extreme(max)}
    out["analysis"] = ANALYSIS
    return out


def _writev_lead(row, w, v):
    """(the ratio writev/write a row leads with, why typical or None).  With its repetitions
    in runs (samples.round, two runs or more): the undisturbed figures of write and writev
    (stats.undisturbed: each run's fastest repetition, the mean of the fastest 20% of those, the jackknife over
    runs), and their ratio with both sides' same runs left out together
    (stats.undisturbed_ratio).  Else the typical ratio, the median of the paired ones."""
    typ = dict(row["ratio"], figure="typical")
    rnd = (row.get("samples") or {}).get("round")
    if not rnd or len(rnd) != w.size or len(set(rnd)) < 2:
        return typ, ("its repetitions were taken in one run (a writev.json from before "
                     "runs): only the typical figure can be computed")
    wr, vr = _by_round(rnd, w, v)
    row["write_ns_undisturbed"] = stats.undisturbed(wr)
    row["writev_ns_undisturbed"] = stats.undisturbed(vr)
    r = stats.undisturbed_ratio(vr, wr)
    if not r:
        return typ, "no undisturbed interval could be computed from its runs"
    return dict(r, figure="undisturbed"), None


def stdio(obj):
    """An analysed copy of stdio.json."""
    if not obj:
        return None
    out = files.copy_doc(obj)
    for row in _supported_rows(out):
        sm = {k: _arr(row, k) for k in ("real_s", "user_s", "sys_s")}
        row.update(real_s=stats.summarize(sm["real_s"]), user_s=stats.summarize(sm["user_s"]),
                   sys_s=stats.summarize(sm["sys_s"]),
                   ns_per_byte=stats.summarize(sm["real_s"] / out["bytes"] * 1e9))
    out["analysis"] = ANALYSIS
    return out
