"""The seed sweep's model: T(size) = a_mech + b*size per mechanism, and the knee.

Moved here from the sweep's measuring code: fits are analysis, computed from the raw
per-rep samples every time a report is built.
"""
import math

import numpy as np

from . import stats

# Below this many runs a point's jackknife interval is no weight.
MIN_ROUNDS = stats.UNDISTURBED_MIN_ROUNDS

HUBER_K = 1.345  # 95% efficiency under Gaussian noise


def _t_ppf(q, dof):
    """Student's t quantile at q for dof degrees of freedom (NaN below one, as scipy's):
    stats.t_quantile, written out, so that a report with a sweep to fit does not import
    scipy.stats for it (a second and a half of every such report)."""
    return stats.t_quantile(int(dof), q) if dof >= 1 else math.nan


def _wls(X, y, w):
    XtW = X.T * w
    cov0 = np.linalg.inv(XtW @ X)
    return cov0, cov0 @ (XtW @ y)


# A page: below it a write's time grows by the bytes copied into one page-cache page; from two
# pages up the copy runs over whole pages, at about a third of the cost per byte on the AMD
# guest (0.6 against 0.2 ns per byte).  One line through both regimes fits neither (r2 0.88
# there).  Where a sweep's cells have undisturbed figures, the line T = a + b*size is fitted
# over the sizes up to a page, where the call's constant cost shows, and a second line over
# the sizes of two pages and more gives the knee its slope.
PAGE = 4096


def fit_linear(runs, page=PAGE):
    """Per run (variant, mode): T(size) = a + b*size ns per call, robust weighted least squares.

    runs: a sweep's "runs" list (or the sweep dict).  Every rep's ns_per_call
    is a point, weighted by 1/median(row)^2, i.e. the fit minimises relative
    residuals: timing noise is roughly proportional to the time, and without
    the weights the big buffers (microseconds per call) would decide the
    intercept that the small ones measure best.  On top of that the points get
    Huber weights (iteratively reweighted, k = 1.345 robust standard
    deviations, scale from the MAD): one pass preempted by another process can
    be 20x the others, and with squared relative residuals that single sample
    would otherwise decide the line (seen here: r2 0.03 on clean data).
    Standard errors come from (X'WX)^-1 scaled by the reduced chi-square; the
    CI is +-t(0.975, dof)*se.  Returns [{variant, mode, a_ns, b_ns_per_byte:
    {value, se, ci_low, ci_high}, r2, n_points, n_downweighted, sizes: [min,
    max]}]; a run that cannot be fitted (unsupported, fewer than 3 points)
    gets a 'why' instead of numbers."""
    if isinstance(runs, dict):
        runs = runs["runs"]
    fits = []
    for run in runs:
        rows = run.get("rows") or []
        if run.get("supported", True) and len(rows) >= 3 and \
                all(r.get("figure") == "undisturbed" for r in rows):
            small = [r for r in rows if r["buffsize"] <= page]
            big = [r for r in rows if r["buffsize"] >= 2 * page]
            if len(small) >= 3:
                f = fit_undisturbed(run, small)
                f["regime"] = f"per call: sizes up to a page ({page} B)"
                if len(big) >= 3:
                    f["copy"] = fit_undisturbed(run, big)
                    f["copy"]["regime"] = f"copy: sizes from two pages ({2 * page} B)"
            else:
                f = fit_undisturbed(run, rows)
                f["regime"] = "every size"
            fits.append(f)
            continue
        f = {"variant": run["variant"], "mode": run.get("mode", "async"), "figure": "typical"}
        x, y, w = [], [], []
        for row in run.get("rows") or []:
            med = row["ns_per_call"]["median"]
            pts = (row.get("samples") or {}).get("ns_per_call") or [med]
            for v in pts:
                x.append(row["buffsize"])
                y.append(v)
                w.append(1.0 / med ** 2)
        if not run.get("supported", True) or len(set(x)) < 3:
            f["why"] = run.get("reason") or "fewer than 3 buffer sizes measured"
            fits.append(f)
            continue
        x, y, w0 = (np.asarray(a, float) for a in (x, y, w))
        X = np.column_stack([np.ones_like(x), x])
        w = w0.copy()
        for _ in range(50):
            cov0, beta = _wls(X, y, w)
            r = np.sqrt(w0) * (y - X @ beta)
            scale = 1.4826 * stats._median(np.abs(r - stats._median(r)))
            if scale <= 0:
                break
            h = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(r), 1e-300))
            w_new = w0 * h
            if np.allclose(w_new, w, rtol=1e-9, atol=0):
                break
            w = w_new
        cov0, beta = _wls(X, y, w)
        resid = y - X @ beta
        dof = len(y) - 2
        # The M-estimator's covariance (Huber 1981, the usual sandwich
        # approximation): scale^2 E[psi^2] / E[psi']^2 (X'W0X)^-1, where psi
        # clips the scaled relative residual at k.  The plain reduced chi-square
        # of the down-weighted fit understates the error (CI coverage ~90%).
        u = np.sqrt(w0) * resid
        scale = 1.4826 * stats._median(np.abs(u - stats._median(u)))
        if scale > 0:
            z = u / scale
            psi = np.clip(z, -HUBER_K, HUBER_K)
            dpsi = np.mean(np.abs(z) <= HUBER_K)
            cov = np.linalg.inv((X.T * w0) @ X) * (scale ** 2 * np.mean(psi ** 2) / dpsi ** 2
                                                     * len(y) / dof)
        else:  # an exact fit: nothing to be robust against
            cov = cov0 * float(np.sum(w * resid ** 2) / dof)
        t = float(_t_ppf(0.975, dof))
        ybar = np.sum(w * y) / np.sum(w)
        r2 = 1 - np.sum(w * resid ** 2) / np.sum(w * (y - ybar) ** 2)
        for i, name in enumerate(("a_ns", "b_ns_per_byte")):
            se = float(math.sqrt(cov[i, i]))
            f[name] = {"value": float(beta[i]), "se": se,
                       "ci_low": float(beta[i] - t * se), "ci_high": float(beta[i] + t * se)}
        f.update(r2=float(r2), n_points=int(len(y)),
                 n_downweighted=int(np.sum(w < w0 * 0.999)),
                 sizes=[int(x.min()), int(x.max())])
        fits.append(f)
    return fits


def fit_undisturbed(run, rows):
    """T(size) = a + b*size through a run's undisturbed figures, one point per size, each
    weighted by its interval (1/se^2, se = half-width / t): weighted least squares.  The
    undisturbed figure is already the undisturbed passes' mean, so no point is an outlier to
    down-weight.  The parameters' covariance is (X'WX)^-1, scaled up by the reduced
    chi-square when the points scatter about the line more than their intervals say (the
    line is then a worse model than the figures are measurements, and the intervals say
    so).  r2 is the weighted one.

    The intervals are trusted as weights only where they can be: a point from fewer than
    MIN_ROUNDS runs (--quick's three) has a jackknife of too few units to know its own
    spread, and one such interval of zero width once took every weight of a line (r2
    -1.9e7); those lines are fitted unweighted, and say so.  Every standard error is also
    held to at least a tenth of the line's median one, so that no single point's interval,
    however narrow, decides the line alone."""
    f = {"variant": run["variant"], "mode": run.get("mode", "async"), "figure": "undisturbed"}
    x = np.array([r["buffsize"] for r in rows], float)
    y = np.array([r["lead"]["median"] for r in rows], float)
    hw = np.array([(r["lead"]["ci_high"] - r["lead"]["ci_low"]) / 2 for r in rows], float)
    t95 = 1.959963984540054
    se = np.maximum(hw / t95, 1e-9 * np.abs(y) + 1e-12)
    few = min((r["lead"].get("n_rounds") or 0) for r in rows) < MIN_ROUNDS
    if few:
        se = np.ones_like(y)
        f["weights"] = (f"none: a point rests on fewer than {MIN_ROUNDS} runs, too few for its "
                        "interval to weigh it")
    else:
        floor = 0.1 * float(np.median(se))
        f["weights"] = ("1/se^2 of each point's interval, se held to at least a tenth of the "
                        "median" + (f" ({int(np.sum(se < floor))} held)" if np.any(se < floor)
                                    else ""))
        se = np.maximum(se, floor)
    beta, cov, chi2, dof, r2 = _line(x, y, se, f, ("a_ns", "b_ns_per_byte"))
    f.update(r2=r2, chi2_per_dof=chi2 / dof if dof else None, n_points=int(len(y)),
             n_downweighted=0, sizes=[int(x.min()), int(x.max())])
    return f


def _line(x, y, se, f, names):
    """y = a + b*x by weighted least squares (weights 1/se^2), its covariance (X'WX)^-1 scaled
    up by the reduced chi-square when the points scatter about the line more than their
    intervals say; f[names[0]] and f[names[1]] get {value, se, ci_low, ci_high} (Student's t
    on the residual degrees of freedom).  Returns (beta, cov, chi2, dof, weighted r2)."""
    w = 1 / se ** 2
    X = np.column_stack([np.ones_like(x), x])
    cov0, beta = _wls(X, y, w)
    resid = y - X @ beta
    dof = len(y) - 2
    chi2 = float(np.sum(w * resid ** 2))
    cov = cov0 * max(1.0, chi2 / dof) if dof > 0 else cov0
    t = float(_t_ppf(0.975, max(dof, 1)))
    ybar = np.sum(w * y) / np.sum(w)
    ss = float(np.sum(w * (y - ybar) ** 2))
    for i, name in enumerate(names):
        e = float(math.sqrt(cov[i, i]))
        f[name] = {"value": float(beta[i]), "se": e,
                   "ci_low": float(beta[i] - t * e), "ci_high": float(beta[i] + t * e)}
    return beta, cov, chi2, dof, (1 - chi2 / ss if ss > 0 else None)


KNEE_THRESHOLD = 0.01


def _knee_of(a, b, threshold=KNEE_THRESHOLD, base=None):
    """Closed-form knee for arrays a, b of shape (variants,) or (draws, variants); base: the
    fastest variant's intercept on the line the knee lies on (its own a when None)."""
    a, b = np.atleast_2d(a), np.atleast_1d(b)
    da = a.max(axis=1) - a.min(axis=1)
    lo = a.min(axis=1) if base is None else np.atleast_1d(base)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (da / threshold - lo) / b
    s = np.where(b > 0, np.maximum(s, 1.0), np.nan)   # at 1 B already within: knee 1 B
    return s


def knee(fits, threshold=KNEE_THRESHOLD, draws=2000, seed=1):
    """The buffer size above which the entry mechanisms differ by < threshold of a call.

    fits: fit_linear() results of ONE mode (several variants).  Model: the
    mechanism adds a constant per call (the intercept a_v); the per-byte cost
    b is the kernel's copy and page-cache work, the same code whichever way
    the kernel was entered, so the variants' slopes are pooled into one
    (inverse-variance weighted mean; their spread is reported as
    slope_spread).  The mechanism difference is da = max a_v - min a_v; the
    knee is the size s where da = threshold * (min a_v + b*s), i.e.
    s = (da/threshold - min a_v) / b.  Below it the way into the kernel shows
    in the per-call time; above it the copy swamps it.  Uncertainty: the knee
    of 2000 parametric draws of every a_v and of b from their fitted normal
    estimates; ci is the 2.5/97.5 percentiles.  `extrapolated` is true when
    the knee lies beyond the largest size measured."""
    good = [f for f in fits if "a_ns" in f]
    if len(good) < 2:
        return _blind("fewer than two fitted variants to compare")
    # The mechanisms differ by their constant per-call cost, which the per-call regime's
    # intercepts measure; the size at which that drowns is on the copy regime's line, where
    # every fit has one.
    copy = [f.get("copy") for f in good]
    regime = copy if all(c and "a_ns" in c for c in copy) else good
    a = np.array([f["a_ns"]["value"] for f in good])
    ase = np.array([f["a_ns"]["se"] for f in good])
    base = np.array([f["a_ns"]["value"] for f in regime]) - a
    bv = np.array([f["b_ns_per_byte"]["value"] for f in regime])
    bse = np.array([max(f["b_ns_per_byte"]["se"], 1e-12) for f in regime])
    wts = 1 / bse ** 2
    b = float(np.sum(wts * bv) / np.sum(wts))
    b_se = float(1 / math.sqrt(np.sum(wts)))
    max_measured = max(f["sizes"][1] for f in regime)
    out = {"threshold": threshold, "variants": [f["variant"] for f in good],
           "delta_a_ns": float(a.max() - a.min()),
           "fastest": good[int(a.argmin())]["variant"], "slowest": good[int(a.argmax())]["variant"],
           "b_pooled_ns_per_byte": b, "b_pooled_se": b_se,
           "slope_spread": float((bv.max() - bv.min()) / b) if b > 0 else None,
           "measured_up_to": max_measured, "draws": draws,
           "slope_from": "the copy regime's lines" if regime is copy else "the fitted lines"}
    if b <= 0:
        out.update(value=None, why="the pooled per-byte slope is not positive: "
                                   "per-call time does not grow with size in these data")
        return out
    fast = int(a.argmin())
    k = float(_knee_of(a, np.array([b]), threshold, a[fast] + base[fast])[0])
    rng = np.random.default_rng(seed)
    ad = rng.normal(a, ase, size=(draws, len(good)))
    bd = rng.normal(b, b_se, size=draws)
    ks = _knee_of(ad, bd, threshold, ad[np.arange(draws), ad.argmin(axis=1)] +
                  base[ad.argmin(axis=1)])
    fin = ks[np.isfinite(ks)]
    out.update(value=k, size_bytes=int(round(k)), extrapolated=bool(k > max_measured),
               ci_low=float(np.percentile(fin, 2.5)) if fin.size else None,
               ci_high=float(np.percentile(fin, 97.5)) if fin.size else None,
               undefined_draws=int(np.sum(~np.isfinite(ks))))
    return out




def _blind(why):
    return {"value": None, "why": why}


def excess_line(points, variant, over, page=PAGE, threshold=KNEE_THRESHOLD, draws=2000, seed=1):
    """A mechanism's excess over the fastest one at the same size, E(s) = T_v(s)/T_f(s) - 1,
    as a line: with T = a + b*size and one slope for both (as knee() pools), 1/E(s) =
    a_f/da + (b/da)*size, so 1/E is a line in size whatever the host's speed, which cancels in
    the ratio.  points: [(size, E, E_low, E_high)] measured in the same rounds.  The line is
    fitted, by weighted least squares on 1/E (each point's se from its interval), over the
    copy regime's sizes (two pages and more), where the knee lies; with it, the size at which
    E falls to `threshold`, (1/threshold - a)/b, with the 2.5/97.5 percentiles of `draws`
    draws of (a, b) from their covariance.  A mechanism within its interval of the fastest
    at a size has no such line (1/E is unbounded there): then 'why' says so."""
    f = {"variant": variant, "mode": "async", "figure": "vs_ref", "over": over,
         "regime": f"copy: 1/(excess over {over} at the same size) = a + b*size, sizes from "
                   f"two pages ({2 * page} B)", "threshold": threshold}
    pts = sorted(p for p in points if p[0] >= 2 * page)
    if len(pts) < 3:
        f["why"] = "fewer than 3 sizes of two pages or more"
        return f
    if any(lo is None or lo <= 0 for _, _, lo, _ in pts):
        f["why"] = (f"within its interval of {over} at some size of the copy regime: "
                    "1/excess has no bound there")
        return f
    x = np.array([p[0] for p in pts], float)
    y = np.array([1 / p[1] for p in pts])
    se = np.array([(1 / lo - 1 / hi) / 2 / 1.959963984540054 for _, _, lo, hi in pts])
    se = np.maximum(se, 0.1 * float(np.median(se)) + 1e-12)
    beta, cov, chi2, dof, r2 = _line(x, y, se, f, ("a", "b"))
    f.update(r2=r2, chi2_per_dof=chi2 / dof if dof else None, n_points=int(len(y)),
             sizes=[int(x.min()), int(x.max())])
    a, b = beta
    if b <= 0:
        f["knee"] = _blind("1/excess does not grow with size: the excess does not fall")
        return f
    k = float((1 / threshold - a) / b)
    d = np.random.default_rng(seed).multivariate_normal(beta, cov, size=draws)
    with np.errstate(divide="ignore", invalid="ignore"):
        ks = np.where(d[:, 1] > 0, (1 / threshold - d[:, 0]) / d[:, 1], np.nan)
    fin = ks[np.isfinite(ks)]
    f["knee"] = {"value": max(k, 1.0), "size_bytes": int(round(max(k, 1.0))),
                 "threshold": threshold, "extrapolated": bool(k > x.max()),
                 "measured_up_to": int(x.max()),
                 "ci_low": float(np.percentile(fin, 2.5)) if fin.size else None,
                 "ci_high": float(np.percentile(fin, 97.5)) if fin.size else None,
                 "undefined_draws": int(np.sum(~np.isfinite(ks)))}
    return f
