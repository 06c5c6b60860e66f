"""A figure as text: the one way a summary (median with its interval) or a blind value is
written for a person."""
import math


def fmt(s, unit="ns", digits=None, mark=None):
    """'123.4 ns [122.9, 124.0]' with ' (unstable)', or 'unknown (why)'.  A why may have come
    from a file: mark, where given (a page's present.document.outside), marks it as outside
    text; a terminal line escapes the whole text instead."""
    if s is None:
        return "unknown"
    mark = mark or str
    if "value" in s and s.get("value") is None:
        return f"unknown ({mark(s.get('why', 'not measured'))})"
    m = s.get("median")
    if m is None or not math.isfinite(m):
        return f"unknown ({mark(s.get('why') or 'no value recorded')})"
    if unit == "ns" and abs(m) >= 10000:
        # Microseconds read better for O_SYNC writes and other long calls.
        s = {k: (v / 1000 if isinstance(v, (int, float)) and k in ("median", "ci_low", "ci_high")
                 else v) for k, v in s.items()}
        m, unit = s["median"], "µs"
    lo, hi = s.get("ci_low"), s.get("ci_high")
    if digits is None:
        digits = 1 if abs(m) >= 10 else 2 if abs(m) >= 1 else 3
        # A narrow interval gets the digits it needs to show its width: '20.5701 [20.5695,
        # 20.5707]', never '20.6 [20.6, 20.6]', which reads as no uncertainty at all.
        while lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi) \
                and hi > lo and digits < 6 and f"{lo:.{digits}f}" == f"{hi:.{digits}f}":
            digits += 1
    ci = (f" [{lo:.{digits}f}, {hi:.{digits}f}]" if lo is not None and hi is not None
          and math.isfinite(lo) and math.isfinite(hi) else "")
    return f"{m:.{digits}f} {unit}{ci}" + (" (unstable)" if s.get("unstable") else "")
