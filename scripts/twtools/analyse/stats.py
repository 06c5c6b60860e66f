"""Summaries with uncertainty: every figure a user sees goes through summarize()."""
import numpy as np
from scipy import stats as sstats

CV_UNSTABLE = 0.10     # coefficient of variation at or above this: unstable
SPREAD_UNSTABLE = 0.50  # min or max further than this from the median: unstable
CONFIDENCE = 0.95


def bootstrap_ci(samples, statistic=np.median, confidence=CONFIDENCE, n_resamples=2000, seed=1):
    """Percentile bootstrap CI of `statistic`; (x, x) for a single sample.

    The seed is fixed so that rebuilding a report from the same samples gives
    the same interval."""
    a = np.asarray(samples, dtype=float)
    if a.size < 2 or np.all(a == a[0]):
        v = float(statistic(a)) if a.size else float("nan")
        return v, v
    # numpy's median/mean take axis=: resampling vectorised gives the same
    # interval (same draws) about 40x faster, which sweeps of hundreds of cells need.
    vec = statistic in (np.median, np.mean)
    res = sstats.bootstrap((a,), statistic, confidence_level=confidence, n_resamples=n_resamples,
                           method="percentile", vectorized=vec, random_state=seed,
                           **({"axis": -1} if vec else {}))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(samples):
    """{median, ci_low, ci_high, min, max, cv, n, unstable} of a list of numbers.

    unstable is true when CV >= 10% or min/max lie more than 50% from the
    median: such a cell is reported, flagged, never hidden."""
    a = np.asarray([s for s in samples if s is not None], dtype=float)
    if a.size == 0:
        return {"median": None, "ci_low": None, "ci_high": None, "min": None, "max": None,
                "cv": None, "n": 0, "unstable": True}
    med = float(np.median(a))
    lo, hi = bootstrap_ci(a)
    mean = float(np.mean(a))
    cv = float(np.std(a, ddof=1) / abs(mean)) if a.size > 1 and mean else 0.0
    spread = (max(abs(a.max() - med), abs(med - a.min())) / abs(med)) if med else 0.0
    return {"median": med, "ci_low": lo, "ci_high": hi, "min": float(a.min()),
            "max": float(a.max()), "cv": cv, "n": int(a.size),
            "unstable": bool(cv >= CV_UNSTABLE or spread > SPREAD_UNSTABLE)}


def half_width_rel(s):
    """95% CI half-width relative to the median, or None."""
    if not s or s.get("median") in (None, 0):
        return None
    return (s["ci_high"] - s["ci_low"]) / 2 / abs(s["median"])


def diff_summary(a, b):
    """Summary-like estimate of a - b for two independent summaries (CI by quadrature)."""
    if a.get("median") is None or b.get("median") is None:
        return None
    d = a["median"] - b["median"]
    ea = (a["ci_high"] - a["ci_low"]) / 2
    eb = (b["ci_high"] - b["ci_low"]) / 2
    e = float(np.hypot(ea, eb))
    return {"median": d, "ci_low": d - e, "ci_high": d + e, "min": None, "max": None,
            "cv": None, "n": min(a["n"], b["n"]), "unstable": bool(a["unstable"] or b["unstable"])}


def fmt(s, unit="ns", digits=None):
    """'123.4 ns [122.9, 124.0]' with a trailing '!' for unstable, or 'unknown (why)'."""
    if s is None:
        return "unknown"
    if "value" in s and s.get("value") is None:
        return f"unknown ({s.get('why', 'not measured')})"
    m = s["median"]
    if m is None:
        return "unknown"
    if digits is None:
        digits = 1 if abs(m) >= 10 else 2 if abs(m) >= 1 else 3
    out = f"{m:.{digits}f} {unit} [{s['ci_low']:.{digits}f}, {s['ci_high']:.{digits}f}]"
    return out + (" (unstable)" if s.get("unstable") else "")
