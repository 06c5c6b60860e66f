"""`make bench-census`: tw census's int 0x80 counts against the programs' own counts.

Four 32-bit programs (assembled here: `int 0x80` getppid forever from their own text, each
call followed by `inc dword [count]`) run throughout; `tw census --seconds S --json` watches
the machine, and meanwhile this driver reads every program's own `count` from its memory
(/proc/PID/mem at the symbol's address, root) every few ms, with the wall-clock time of each
reading.  The census gives each program's int 0x80 calls in its window and the window's ends
on the wall clock (`window_utc`); the programs' own counts at those two moments, each
interpolated between the readings around it, give the independent count of the same window.
It prints, per program and run, both counts, their ratio, and the calls per second both give,
and the largest departure from 1 over all.  `--beside-bench` runs a default `tw bench` through
the census windows, as a busy host does.

A benchmark, not a test: what it prints depends on the host's moment, and nothing asserts on
it.  tests/test_tracer_counts_live.py holds the census to exact counts of programs that make a
known number of calls inside its window.
"""
import bisect
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..core import paths
from ..machine import elf

LOOP = """; int 0x80 getppid forever from the program's own text, counting its calls in memory.
section .bss
count: resd 1
section .text
global _start
_start:
.loop:
    mov eax, 64             ; getppid (i386)
    int 0x80
    inc dword [count]       ; one more call made: read from /proc/PID/mem by the driver
    jmp .loop
"""
PERIOD_S = 0.004


def _build(where):
    """The loop program, assembled into `where`: (path, the address of its count)."""
    src, obj, exe = where / "censusloop.asm", where / "censusloop.o", where / "censusloop"
    src.write_text(LOOP)
    for cmd in (["nasm", "-f", "elf32", "-o", str(obj), str(src)],
                ["ld", "-m", "elf_i386", "-o", str(exe), str(obj)]):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"bench-census: {cmd[0]} failed: {p.stderr.strip()}")
    addr = next((s.value for s in elf.load(exe).symbols if s.name == "count"), None)
    if addr is None:
        raise SystemExit("bench-census: the loop has no `count` symbol")
    return exe, addr


class Sampler(threading.Thread):
    """Reads each program's count every PERIOD_S: {pid: ([t], [count])}, counts unwrapped."""

    def __init__(self, pids, addr):
        super().__init__(daemon=True)
        self.addr, self.stop = addr, threading.Event()
        self.fds = {pid: os.open(f"/proc/{pid}/mem", os.O_RDONLY) for pid in pids}
        self.log = {pid: ([], []) for pid in pids}
        self.base = {pid: 0 for pid in pids}

    def read(self):
        for pid, fd in self.fds.items():
            v = int.from_bytes(os.pread(fd, 4, self.addr), "little")
            ts, cs = self.log[pid]
            if cs and v + self.base[pid] < cs[-1]:
                self.base[pid] += 1 << 32
            ts.append(time.time())
            cs.append(v + self.base[pid])

    def run(self):
        while not self.stop.is_set():
            self.read()
            time.sleep(PERIOD_S)

    def at(self, pid, t):
        """The count at wall time t, interpolated between the readings around it."""
        ts, cs = self.log[pid]
        i = bisect.bisect_left(ts, t)
        if i == 0 or i >= len(ts):
            return None
        f = (t - ts[i - 1]) / (ts[i] - ts[i - 1]) if ts[i] > ts[i - 1] else 0.0
        return cs[i - 1] + f * (cs[i] - cs[i - 1])

    def close(self):
        for fd in self.fds.values():
            os.close(fd)


def run(out, loops=4, seconds=2.0, runs=3, beside_bench=False, results=None):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        raise SystemExit("bench-census: needs root (bpftrace, and /proc/PID/mem of the loops)")
    exe, addr = _build(out.resolve())
    tw = [sys.executable, str(paths.ROOT / "scripts" / "tw")]
    procs = [subprocess.Popen([str(exe)]) for _ in range(loops)]
    bench = None
    rows, worst = [], 0.0
    try:
        time.sleep(0.2)
        sampler = Sampler([p.pid for p in procs], addr)
        sampler.start()
        if beside_bench:
            print("bench-census: a default tw bench runs beside the census", file=sys.stderr, flush=True)
            bench = subprocess.Popen(tw + ["bench", "--json"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            time.sleep(3)
        for r in range(1, runs + 1):
            print(f"bench-census: run {r}/{runs}: tw census --seconds {seconds:g}", file=sys.stderr,
                  flush=True)
            cmd = tw + ["census", "--seconds", f"{seconds:g}", "--json"] + \
                (["--results", str(results)] if results else [])
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            if p.returncode != 0:
                raise SystemExit(f"bench-census: tw census failed: "
                                 f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
            (out / f"census-{r}.json").write_text(p.stdout)
            d = json.loads(p.stdout)
            t0, t1 = d.get("window_utc") or (None, None)
            if bench is not None and bench.poll() is not None:
                print("bench-census: tw bench ended before this run: later runs are beside nothing",
                      file=sys.stderr, flush=True)
            for lp in procs:
                img = [x for x in d["processes"] if x["pid"] == lp.pid and x.get("exe") == str(exe)]
                got = img[0]["int80_calls"] if img else 0
                a, b = sampler.at(lp.pid, t0), sampler.at(lp.pid, t1)
                own = None if a is None or b is None else b - a
                ratio = got / own if own else None
                if ratio is not None:
                    worst = max(worst, abs(ratio - 1))
                rows.append({"run": r, "pid": lp.pid, "census": got, "own": own, "ratio": ratio,
                             "window_s": t1 - t0, "agree": d["witness"].get("agree"),
                             "beside_bench": bench is not None and bench.poll() is None})
        sampler.stop.set()
        sampler.join()
        sampler.close()
    finally:
        for lp in procs:
            lp.kill()
            lp.wait()
        if bench is not None and bench.poll() is None:
            bench.terminate()
            bench.wait()
    (out / "bench-census.json").write_text(json.dumps(rows, indent=1))
    print(f"{'run':>3} {'pid':>7} {'census':>10} {'own count':>12} {'ratio':>7} "
          f"{'census /s':>10} {'own /s':>10}  counts agree")
    for x in rows:
        own = f"{x['own']:.0f}" if x["own"] is not None else "unknown"
        ratio = f"{x['ratio']:.4f}" if x["ratio"] is not None else "unknown"
        own_s = f"{x['own'] / x['window_s']:.0f}" if x["own"] is not None else "unknown"
        print(f"{x['run']:>3} {x['pid']:>7} {x['census']:>10} {own:>12} {ratio:>7} "
              f"{x['census'] / x['window_s']:>10.0f} {own_s:>10}  {x['agree']}")
    print(f"largest departure from the programs' own counts: {100 * worst:.2f}% "
          f"({len(rows)} counts, {'beside a tw bench' if beside_bench else 'nothing else run'})")
    return rows
