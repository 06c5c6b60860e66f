"""The attribution stage: the in-kernel body of each operation, traced, raw.

For each mechanism and operation, syscost runs under traces/body.bt (one bpftrace session
over every cell, interleaved, so drift hits every cell alike); each run gives one sample: its
mean raw_syscalls:sys_enter -> sys_exit interval per call (calls over 20 us left out when most
calls are shorter, so that a rare stall does not decide a sample).  The same interval for the
null operation (an invalid number, answered -ENOSYS after dispatch) is the reference the
analysis subtracts.  attribution.json keeps every run's sample; twtools.analyse.attribution
composes each call at report time from these bodies and the per-call matrix:

  loop        the empty loop's cost per call (already removed from the totals)
  entry/exit  the null call, in the jmp shape where the mechanism has one: entering,
              dispatching and leaving, without the post-return penalty
  post-return penalty   the null call's ret shape minus its jmp shape: what the return
              after the kernel returns costs (0 where there is no jmp shape to tell)
  body        traced op minus traced null: the operation's own kernel work
  waiting     off-CPU time in the very batches that give the total (O_SYNC: the device)
  residual    total - entry/exit - penalty - body: consistent when its interval holds 0
"""

import tempfile
from pathlib import Path

from ..core import files, proc, ui
from ..machine import probe, registry, sysnr
from ..machine.tracers import bpftrace
from .trace import tmp_dir

OPS = [("null", None), ("getppid", None), ("write-devnull", 1), ("write-file", 256),
       ("write-sync", 256)]
# syscall numbers of each op, per ABI (null: a number no kernel assigns)
OP_SYSCALL = {"null": "invalid", "getppid": "getppid", "write-devnull": "write",
              "write-file": "write", "write-sync": "write"}
NR = {abi: {op: sysnr.syscall_nr(abi, sc) for op, sc in OP_SYSCALL.items()}
      for abi in ("i386", "x86_64")}
PLAN = {
    # body runs per cell; calls per body run (O_SYNC writes: fewer, they wait for the device)
    # --quick: 2 runs, the least an interval needs: the quick run's minute goes to the
    # headline (issue 62)
    "quick": {"body_runs": 2, "body_calls": 10000, "sync_calls": 20},
    # 4 runs, not 6: the stage took 30 s of the report's 180 beside the neighbour on an AMD
    # EPYC guest (240 traced processes), where its bodies are a section's detail, not the
    # headline's (issue 62); their intervals widen by about a fifth
    "default": {"body_runs": 4, "body_calls": 20000, "sync_calls": 100},
    "long": {"body_runs": 10, "body_calls": 50000, "sync_calls": 200},
}


def measure_bodies(variants, mode, tmp, tsc_hz=None):
    """One body.bt session; {(variant, op): [per-process mean enter->exit ns]}."""
    plan = PLAN[mode]
    lines, timed = [], {}
    for rnd in range(plan["body_runs"]):
        for v in variants:
            for op, size in OPS:
                sync = op == "write-sync"
                if sync and rnd >= 2:
                    continue       # device-bound: two runs are plenty, and slow
                # many short batches: the one untimed warm-up pass (which, for
                # write-file, allocates the file's blocks) is then a small share
                # of the traced calls
                nb = 20
                calls = max(1, (plan["sync_calls"] if sync else plan["body_calls"]) // nb)
                timed[f"{v}/{op}"] = nb * calls
                cmd = [probe.binary("syscost", v), "--op", op, "--batches", str(nb),
                       "--calls", str(calls), "--warmup-ms", "0"]
                if size is not None:
                    cmd += ["--size", str(size)]
                if tsc_hz:
                    cmd += ["--tsc-hz", f"{tsc_hz:.0f}"]
                lines.append((f"{v}/{op}", cmd, "/dev/null"))
    maps, labels, p, text = _session(lines, tmp)
    abi_of = {x["name"]: x["abi"] for x in registry.variants()}
    out, err = {}, None
    for pid, (label, rc) in labels.items():
        v, op = label.split("/")
        key_abi = "i386" if (abi_of.get(v) == "i386") else "x86-64"
        nr = NR[abi_of.get(v, "x86_64")][op]
        k = (pid, key_abi, str(nr))
        n = maps.get("@pcount", {}).get(k)
        s = maps.get("@psum_ns", {}).get(k)
        if rc != 0 or not n:
            err = f"{label}: syscost exit {rc}, {n} traced calls"
            continue
        if n < timed[label]:
            # the second witness: every timed call enters the kernel once (the untimed warm-up
            # pass and syscost's own probe add a few more)
            err = (f"{label}: bpftrace counted {n} calls of a process that made at least "
                   f"{timed[label]}: events lost")
            continue
        out.setdefault((v, op), []).append(_trimmed_mean(maps.get("@plin", {}).get(k), s / n))
    if not out:
        err = err or f"bpftrace exit {p.returncode}: {p.stderr.strip()[-200:]}"
    return out, err, text


def _trimmed_mean(buckets, mean):
    """Mean per call of the calls under 20 us (bucket midpoints), so that a rare
    stall (writeback, an interrupt storm) does not decide a sample: the
    analogue of syscost's median over batches.  When most calls exceed 20 us
    (O_SYNC writes) the plain mean is returned."""
    if not buckets:
        return mean
    hb = bpftrace.hist_buckets(buckets)
    inside = [b for b in hb if b["hi_ns"] is not None]
    n_in = sum(b["count"] for b in inside)
    n_all = sum(b["count"] for b in hb)
    if n_in < 0.5 * n_all or n_in == 0:
        return mean
    return sum((b["lo_ns"] + b["hi_ns"]) / 2 * b["count"] for b in inside) / n_in


def _session(lines, tmp):
    return bpftrace.session("body.bt", lines, tmp, "body")


def attribute(out_dir, mode="default", variants=None):
    """Trace every supported cell's body; write attribution.json (raw) and return it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    vs = [v for v in probe.check_all("syscost") if not variants or v["name"] in variants]
    ok = [v["name"] for v in vs if v["supported"] and
          all(op in registry.get(v["name"]).ops for op, _ in OPS)]
    bodies, why = {}, None
    tsc = (files.read_json(out_dir / "percall.json") or {}).get("tsc_hz")
    if not proc.is_root():
        why = "bpftrace needs root"
    elif not proc.which("bpftrace"):
        why = "bpftrace is not installed"
    elif ok:
        ui.progress(f"attribute: body.bt session over {len(ok)} variants x {len(OPS)} ops")
        with tempfile.TemporaryDirectory(prefix="tw-attr-", dir=tmp_dir()) as tmp:
            bodies, why, _ = measure_bodies(ok, mode, tmp, tsc)
    if why and not bodies:
        ui.warn(why, "run as root with bpftrace for the in-kernel body")
    doc = {"schema": "timewrite-attribution/2", "mode": mode,
           "method": __doc__.strip().split("\n\n", 1)[1],
           "ops": [{"op": op, "size": size} for op, size in OPS],
           "variants": [{"name": v["name"], "supported": v["supported"], "reason": v["reason"]}
                        for v in vs],
           "bodies": [{"variant": v, "op": op, "samples_ns": s} for (v, op), s in sorted(bodies.items())],
           "why": why}
    files.write_json(out_dir / "attribution.json", doc)
    return doc
