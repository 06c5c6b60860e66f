"""Every stage's figures as Tables (twtools.present.export): what the commands print and
the CSVs a report writes beside itself.  Built from analysed data only."""
from .export import Table


def _n(x, digits=3):
    if x is None:
        return None
    if isinstance(x, float):
        return round(x, digits)
    return x


def _s(s, key="median"):
    """A summary's field, or None for a blind or missing one."""
    if not isinstance(s, dict):
        return None
    return _n(s.get(key))


def _why(s):
    return s.get("why") if isinstance(s, dict) and s.get("median") is None else None


def percall(pc):
    t = Table("percall", ["variant", "bits", "abi", "op", "size", "shape", "status",
                          "undisturbed_ns", "undisturbed_ci_low", "undisturbed_ci_high",
                          "undisturbed_ratio_to_ref", "undisturbed_ratio_ci_low",
                          "undisturbed_ratio_ci_high", "ns_median",
                          "ns_ci_low", "ns_ci_high", "ratio_to_ref", "ratio_ci_low", "ratio_ci_high",
                          "interference_share", "primary", "floor_ns", "drift_ns", "rounds",
                          "batches_disturbed", "unstable", "why"],
              caption="ns per call: the undisturbed cost (each round's fastest batch, the mean of the "
                      "fastest 20% of those) and "
                      "the typical one (median over rounds), each with its ratio to the reference "
                      "cell of the same rounds; primary names the figure that leads")
    for c in (pc or {}).get("cells", []):
        r = c.get("ratio") or {}
        ur = c.get("undisturbed_ratio") or {}
        d = c.get("disturbed") or {}
        i = c.get("interference") or {}
        t.rows.append([c["variant"], c.get("bits"), c.get("abi"), c["op"], c.get("size"),
                       c.get("shape"), c.get("status"), _n(c.get("undisturbed_ns")),
                       _n(c.get("undisturbed_ci_low")), _n(c.get("undisturbed_ci_high")),
                       _s(ur, "median"), _s(ur, "ci_low"), _s(ur, "ci_high"),
                       _s(c), _s(c, "ci_low"), _s(c, "ci_high"),
                       _s(r), _s(r, "ci_low"), _s(r, "ci_high"), _n(i.get("share")),
                       c.get("primary"), _n(c.get("floor_ns")),
                       _n(c.get("drift")), c.get("n_rounds"),
                       d.get("batches") if d.get("counted") else None, c.get("unstable"),
                       c.get("unstable_why") or (c.get("reason") if not c.get("supported") else None)])
    return t


def penalties(pc):
    t = Table("penalties", ["variant", "op", "size", "penalty_ns", "ci_low", "ci_high",
                            "ret_ns", "jmp_ns"],
              caption="post-return penalty: ret shape minus jmp shape, paired by round")
    for p in (pc or {}).get("penalties", []):
        s = p.get("penalty_ns") or {}
        t.rows.append([p["variant"], p["op"], p.get("size"), _s(s), _s(s, "ci_low"),
                       _s(s, "ci_high"), _n(p.get("ret_ns")), _n(p.get("jmp_ns"))])
    return t


def sweep(sw, name):
    """One row per cell: the typical figure (ns_per_call, its median with ci_low/ci_high),
    the undisturbed one beside it, and `figure`, the one the report leads with (an O_SYNC row
    leads with the typical one: it measures waiting)."""
    t = Table(name, ["variant", "mode", "buffsize", "calls", "ns_per_call", "ci_low", "ci_high",
                     "figure", "undisturbed_ns", "undisturbed_ci_low", "undisturbed_ci_high",
                     "real_s", "user_s", "sys_s", "wait_s", "unstable", "why",
                     "vs_ref", "vs_ref_ci_low", "vs_ref_ci_high", "vs_ref_of"])
    for run in (sw or {}).get("runs", []):
        if not run.get("supported", True):
            t.rows.append([run["variant"], run.get("mode")] + [None] * 14 + [run.get("reason")]
                          + [None] * 4)
            continue
        for row in run.get("rows") or []:
            s = row.get("ns_per_call") or {}
            lead = row.get("lead") or s
            vr = row.get("vs_ref") or {}
            t.rows.append([run["variant"], run.get("mode"), row["buffsize"], row.get("calls"),
                           _s(s), _s(s, "ci_low"), _s(s, "ci_high"), row.get("figure"),
                           _n(row.get("undisturbed_ns")), _n(row.get("undisturbed_ci_low")),
                           _n(row.get("undisturbed_ci_high")), _n(_s(row.get("real_s")), 9),
                           _n(_s(row.get("user_s")), 9), _n(_s(row.get("sys_s")), 9),
                           _n(_s(row.get("wait_s")), 9), lead.get("unstable"),
                           row.get("lead_why"), _n(vr.get("value"), 6), _n(vr.get("ci_low"), 6),
                           _n(vr.get("ci_high"), 6), row.get("vs_ref_of")])
    return t


def fits(sw, name):
    """One row per line fitted: a run's line (regime: the sizes it covers) and, where the
    sweep has one, its copy-regime line; `figure` says which figure the points were."""
    t = Table(name + "_fits", ["variant", "mode", "figure", "regime", "a_ns", "a_ci_low",
                               "a_ci_high", "b_ns_per_byte", "b_ci_low", "b_ci_high", "r2",
                               "points", "why"])
    fitted = [(f, None) for f in (sw or {}).get("fits") or []] + \
        [(f, "vs_ref") for f in (sw or {}).get("fits_vs_ref") or []]
    for f0, fig in fitted:
        for f in (f0, f0.get("copy")):
            if not f:
                continue
            # vs_ref's lines are through 1/excess over the fastest at the same size (no
            # unit: analyse.fits.excess_line), the others' through ns per call.
            a, b = f.get("a_ns") or f.get("a") or {}, f.get("b_ns_per_byte") or f.get("b") or {}
            t.rows.append([f0["variant"], f0.get("mode"), fig or f.get("figure"), f.get("regime"),
                           _n(a.get("value")), _n(a.get("ci_low")), _n(a.get("ci_high")),
                           _n(b.get("value"), 6), _n(b.get("ci_low"), 6), _n(b.get("ci_high"), 6),
                           _n(f.get("r2")), f.get("n_points"), f.get("why")])
    return t


def writev(wv):
    """The writev table: the typical figures (medians) as before, then the figure each row
    leads with (undisturbed where its repetitions came in runs) and why not, where not."""
    t = Table("writev", ["bits", "n_buffers", "size", "write_ns", "writev_ns", "ratio",
                         "ratio_ci_low", "ratio_ci_high", "iov_max",
                         "undisturbed_write_ns", "undisturbed_writev_ns", "undisturbed_ratio",
                         "undisturbed_ratio_ci_low", "undisturbed_ratio_ci_high", "figure", "why"])
    for r in (wv or {}).get("rows", []):
        if not r.get("supported"):
            t.rows.append([r["bits"]] + [None] * 14 + [r.get("reason")])
            continue
        lead = r.get("lead") or {}
        und = lead.get("figure") == "undisturbed"
        t.rows.append([r["bits"], r["n_buffers"], r["size"], _s(r.get("write_ns")),
                       _s(r.get("writev_ns")), _s(r.get("ratio")), _s(r.get("ratio"), "ci_low"),
                       _s(r.get("ratio"), "ci_high"), r.get("iov_max"),
                       _s(r.get("write_ns_undisturbed"), "value") if und else None,
                       _s(r.get("writev_ns_undisturbed"), "value") if und else None,
                       _s(lead) if und else None, _s(lead, "ci_low") if und else None,
                       _s(lead, "ci_high") if und else None, lead.get("figure"),
                       r.get("lead_why")])
    return t


def stdio(st):
    t = Table("stdio", ["bits", "method", "real_s", "user_s", "sys_s", "ns_per_byte", "calls",
                        "calls_expected", "why"])
    for r in (st or {}).get("rows", []):
        if not r.get("supported"):
            t.rows.append([r["bits"], r.get("method")] + [None] * 6 + [r.get("reason")])
            continue
        calls = r.get("calls")
        t.rows.append([r["bits"], r["method"], _n(_s(r.get("real_s")), 6), _n(_s(r.get("user_s")), 6),
                       _n(_s(r.get("sys_s")), 6), _s(r.get("ns_per_byte")),
                       calls if not isinstance(calls, dict) else None, r.get("calls_expected"),
                       calls.get("why") if isinstance(calls, dict) else None])
    return t


ATTRIBUTION_PARTS = ("total_ns", "entry_exit_ns", "penalty_ns", "body_ns", "waiting_ns", "residual_ns")


def attribution(att):
    head = ["variant", "op", "size"]
    for k in ATTRIBUTION_PARTS:
        head += [k, k + "_ci_low", k + "_ci_high"]
    t = Table("attribution", head + ["consistent", "why"])
    for r in (att or {}).get("rows", []):
        line = [r["variant"], r["op"], r.get("size")]
        why = r.get("reason") or ""
        for k in ATTRIBUTION_PARTS:
            s = r.get(k)
            line += [_s(s), _s(s, "ci_low"), _s(s, "ci_high")]
            why = why or _why(s) or ""
        t.rows.append(line + [r.get("consistent"), why or None])
    return t


def observer(ob):
    t = Table("observer", ["variant", "op", "tracer", "ns_per_call", "ci_low", "ci_high",
                           "added_ns", "added_ci_low", "added_ci_high", "why"])
    for r in (ob or {}).get("rows", []):
        s, a = r.get("ns_per_call") or {}, r.get("added_ns") or {}
        t.rows.append([r["variant"], r.get("op"), r["tracer"], _s(s), _s(s, "ci_low"), _s(s, "ci_high"),
                       _s(a), _s(a, "ci_low"), _s(a, "ci_high"), r.get("why") or _why(a)])
    return t


def latency(lat):
    t = Table("latency", ["variant", "mode", "buffsize", "calls", "p50_ns", "p90_ns", "p99_ns", "why"])
    for r in (lat or {}).get("runs", []):
        p = r.get("percentiles") or {}
        t.rows.append([r["variant"], r["mode"], r.get("buffsize"), r.get("count"), _n(p.get("p50"), 0),
                       _n(p.get("p90"), 0), _n(p.get("p99"), 0), r.get("why")])
    return t


def crosscheck(tr):
    rows = (tr or {}).get("crosscheck") or []
    names = []
    for r in rows:
        names += [k for k in r["by_tracer"] if k not in names]
    t = Table("tracers_counts", ["variant", "expected", "timewrite"] + names + ["agree", "why"])
    for r in rows:
        t.rows.append([r["variant"], r.get("expected"), r.get("timewrite")]
                      + [r["by_tracer"].get(n) for n in names] + [r.get("agree"), r.get("why")])
    return t


def legs(lg):
    """Each mechanism's legs (analyse.legs), one figure a row: way in, body, way out, the
    totals, the tracer's and the stamps' cost, and int 0x80's legs less its baseline's; with
    each figure in cycles of the run's top core clock where the run timed it (the unit in
    which two runs compare: the host moves the clock between them)."""
    ghz = ((lg or {}).get("core_clock") or {}).get("ghz")
    t = Table("legs", ["variant", "figure", "value_ns", "ci_low", "ci_high", "cycles", "why"],
              caption="ns per null call, undisturbed [95%]: in = sys_enter - user stamp before, "
                      "body = sys_exit - sys_enter, out = user stamp after - sys_exit; every leg "
                      "holds part of the tracer's cost (tracer = traced - untraced total)"
                      + (f"; at the run's top core clock, {ghz:.2f} GHz, and in its cycles "
                         "(value_ns x GHz; the interval scales alike): between runs, compare "
                         "cycles" if ghz else "; this run did not time the core's clock"))
    names = {"legs": ("in", "body", "out"), "": ("total", "untraced_total", "tracer_ns",
                                                 "bracket_ns")}

    def row(v, fig, x):
        x = x or {}
        val = x.get("value")
        t.rows.append([v, fig, _n(val), _n(x.get("ci_low")), _n(x.get("ci_high")),
                       _n(val * ghz) if ghz and val is not None else None,
                       x.get("why") if val is None else None])
    for v, m in ((lg or {}).get("variants") or {}).items():
        if not m.get("legs"):
            t.rows.append([v, None, None, None, None, None, m.get("why")])
            continue
        for k in names["legs"]:
            row(v, k, m["legs"][k])
        for k in names[""]:
            row(v, k, m.get(k))
        d = ((lg or {}).get("differences") or {}).get(v)
        for k in ("in", "body", "out", "tracer") if d else ():
            row(v, f"{k} - {d['baseline']}", d.get(k))
    # a mitigation's own instruction, timed from user space in the same blocks: the lower bound
    # of its price on the leg where the kernel runs it (docs/legs.md)
    for op, x in sorted(((lg or {}).get("instructions") or {}).items()):
        row("user space", f"{op} (one instruction)", x)
    return t


def all_tables(data):
    """Every table of an analysed results directory, for the CSVs beside a report."""
    out = []
    if data.get("percall"):
        out += [percall(data["percall"]), penalties(data["percall"])]
    for stem in ("sweep_seed", "sweep_tlpi"):
        if data.get(stem):
            out += [sweep(data[stem], stem), fits(data[stem], stem)]
    for stem, fn in (("writev", writev), ("stdio", stdio), ("attribution", attribution),
                     ("observer", observer), ("latency", latency), ("tracers", crosscheck),
                     ("legs", legs)):
        if data.get(stem):
            out.append(fn(data[stem]))
    return out
