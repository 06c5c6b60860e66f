"""How many 32-bit execs a live `tw watch` names and counts when other programs crowd it (issue
61, findings 2 and 3): the figures docs/watch.md gives, repeatable with one command, as root.

  python tests/watch_farm.py symlinks [--links 4300] [--checkout DIR]
  python tests/watch_farm.py cap [--programs 5000] [--new32 20] [--max-programs N]
                                [--checkout DIR]

symlinks  one 64-bit program behind --links symbolic links, each link exec'd once, all in one
          interval of the exec tracer (--interval 3600, the counts read at the stop); then a
          32-bit program three times.  A map keyed by the name as started fills with one file.
cap       --programs distinct 64-bit programs (a copy each), a thousand an interval, under the
          default --max-programs (500); then --new32 new 32-bit programs, each exec'd once;
          the watch is stopped and started again on the same state and --new32 more new
          32-bit programs run.  A cap shared by every program is full of 64-bit ones by then.

Prints JSON.  Each scenario starts `scripts/tw watch` of the checkout given (default: this one; a scratch
worktree of an older commit measures the code before a fix), with --window 0, on a fresh
state in a temporary folder, and prints, for the 32-bit execs the scenario made: how many the
exposition names (a series of their own, under their file's path), how many it counts as
32-bit at all (named, or under program="other" with bits="32"), and what else it says
(folded counts, the report's verdict).  The programs are tiny static ones assembled with
nasm (a 64-bit exit and a 32-bit exit by int 0x80).  Other programs on the machine run too
and are counted by the same watch; the figures count only this scenario's programs, except
"other", which is everyone's (said).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

EXIT64 = "section .text\nglobal _start\n_start:\n    mov eax, 60\n    xor edi, edi\n    syscall\n"
EXIT32 = "section .text\nglobal _start\n_start:\n    mov eax, 1\n    xor ebx, ebx\n    int 0x80\n"


def assemble(source, out, bits):
    """A static program from nasm source at out."""
    src, obj = out + ".asm", out + ".o"
    with open(src, "w") as f:
        f.write(source)
    fmt, emu = ("elf64", "elf_x86_64") if bits == 64 else ("elf32", "elf_i386")
    for cmd in (["nasm", "-f", fmt, "-o", obj, src], ["ld", "-m", emu, "-o", out, obj]):
        subprocess.run(cmd, check=True, capture_output=True)
    os.unlink(src)
    os.unlink(obj)
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


class Watch:
    """scripts/tw watch of a checkout, started and waited for, stopped with SIGTERM."""

    def __init__(self, checkout, state, *extra):
        self.port = free_port()
        self.log = os.path.join(state, f"watch-{time.time():.0f}.err")
        with open(self.log, "w") as log:
            self.p = subprocess.Popen(
                [sys.executable, os.path.join(checkout, "scripts", "tw"), "watch", "--state",
                 state, "--listen", f"127.0.0.1:{self.port}", "--window", "0", *extra],
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.p.poll() is not None:
                raise SystemExit(f"tw watch exited ({self.p.returncode}): "
                                 + open(self.log, errors="replace").read()[-2000:])
            try:
                # answering, and its first save done (the line comes after it): a count of
                # saves from now on counts the intervals' saves only
                if "timewrite_watch_intervals_total" in scrape(self.port) and \
                        "counting every exec" in open(self.log, errors="replace").read():
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit("tw watch's metrics never answered")

    def saves(self):
        """The watch's count of saves so far (timewrite_watch_intervals_total, in a scrape)."""
        return next(float(ln.split()[-1]) for ln in scrape(self.port).splitlines()
                    if ln.startswith("timewrite_watch_intervals_total "))

    def saved(self, n, what, timeout=300):
        """Waits until the watch has saved n more times than it had when called: the event a
        sleep of n intervals stood for.  With n=2 the second save's batch was printed by the
        loader after the first's, so after whatever ran before the call."""
        k = self.saves()
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.saves() >= k + n:
                    return
            except OSError:
                pass
            if self.p.poll() is not None:
                raise SystemExit(f"tw watch exited ({self.p.returncode}) waiting for {what}: "
                                 + open(self.log, errors="replace").read()[-2000:])
            if time.monotonic() > deadline:
                raise SystemExit(f"tw watch saved fewer than {n} times in {timeout} s after "
                                 f"{what}: " + open(self.log, errors="replace").read()[-2000:])
            time.sleep(0.1)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=300)
        if rc != 0:
            raise SystemExit(f"tw watch stopped with {rc}: "
                             + open(self.log, errors="replace").read()[-2000:])


def run_all(paths, parallel=8):
    """Each program once, from `parallel` shells at once, each running its share in turn."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        for k in range(parallel):
            f.write("(" + "".join(f"'{p}'\n" for p in paths[k::parallel]) + ") &\n")
        f.write("wait\n")
    try:
        subprocess.run(["sh", f.name], check=True, timeout=1800)
    finally:
        os.unlink(f.name)


def other32(state):
    """The execs under 32-bit "other" the state holds now (saved at every interval)."""
    con = sqlite3.connect(f"file:{os.path.join(state, 'watch.sqlite')}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT execs FROM programs WHERE program = 'other' AND is32").fetchone()
    finally:
        con.close()
    return row[0] if row else 0


def figures(checkout, state, mine32, farm, other32_before=0):
    """What the state holds for the 32-bit programs `mine32` (paths) after the watch stopped:
    named (execs under their own path), other32 and other64 (everyone's), how much 32-bit
    "other" grew while they ran (theirs, and any other 32-bit exec the cap or a full map
    folded meanwhile), folded, and the report's verdict."""
    con = sqlite3.connect(f"file:{os.path.join(state, 'watch.sqlite')}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT program, is32, execs FROM programs").fetchall()
        # the compat budget's named programs, whoever's (store/watchdb.py's load: 32-bit, or
        # seen entering by a compat path): the machine's other 32-bit programs (a test run's
        # other workers start hundreds) take it as fairly as ours
        compat_named = con.execute(
            "SELECT count(*) FROM programs p WHERE program != 'other' AND (is32 OR EXISTS "
            "(SELECT 1 FROM calls c WHERE c.program = p.program AND c.is32 = p.is32 AND "
            "c.path LIKE 'compat%'))").fetchone()[0]
        cols = [r[1] for r in con.execute("PRAGMA table_info(folded)")]
        folded = {(r[0] if len(r) == 2 else f"{r[0]}/{'32' if r[1] else '64'}"): r[-1]
                  for r in con.execute(f"SELECT {', '.join(cols)} FROM folded").fetchall()}
    finally:
        con.close()
    named = sum(e for p, b, e in rows if b and p in mine32)
    farm64 = sum(e for p, b, e in rows if not b and p.startswith(farm))
    other = {("32" if b else "64"): e for p, b, e in rows if p == "other"}
    rep = subprocess.run([sys.executable, os.path.join(checkout, "scripts", "tw"), "watch",
                          "--report", "--json", "--since", "1d", "--state", state],
                         capture_output=True, text=True, timeout=300)
    stop = json.loads(rep.stdout)["stop"] if rep.returncode == 0 else None
    return {"named32": named, "other32_grew": other.get("32", 0) - other32_before,
            "compat_named": compat_named,
            "other32_everyone": other.get("32", 0),
            "other64_everyone": other.get("64", 0), "farm64_named": farm64, "folded": folded,
            "report_programs": None if stop is None else [s["program"] for s in stop],
            "report_error": None if rep.returncode == 0 else rep.stderr.strip()[-300:]}


def symlinks(args, tmp):
    farm = os.path.join(tmp, "farm")
    os.makedirs(farm)
    bin64 = assemble(EXIT64, os.path.join(farm, "tw-farm64"), 64)
    links = [os.path.join(farm, f"l{i:05d}") for i in range(args.links)]
    for p in links:
        os.symlink(bin64, p)
    b32 = assemble(EXIT32, os.path.join(farm, "tw-farm32"), 32)
    state = os.path.join(tmp, "state")
    os.makedirs(state)
    w = Watch(args.checkout, state, "--interval", "3600")
    try:
        run_all(links)
        for _ in range(3):
            subprocess.run([b32], check=True)
    finally:
        w.stop()
    out = {"scenario": f"{args.links} symbolic links to one 64-bit program, each exec'd once "
                       "in one interval, then a 32-bit program 3 times",
           "execs32": 3, "execs64": args.links}
    out.update(figures(args.checkout, state, {b32}, farm))
    return out


def cap(args, tmp):
    farm = os.path.join(tmp, "farm")
    os.makedirs(farm)
    src64 = assemble(EXIT64, os.path.join(tmp, "src64"), 64)
    src32 = assemble(EXIT32, os.path.join(tmp, "src32"), 32)
    progs = []
    for i in range(args.programs):
        p = os.path.join(farm, f"p{i:05d}")
        shutil.copy(src64, p)
        progs.append(p)
    new32 = []
    for i in range(2 * args.new32):
        p = os.path.join(farm, f"n32-{i:03d}")
        shutil.copy(src32, p)
        new32.append(p)
    state = os.path.join(tmp, "state")
    os.makedirs(state)
    cap = ["--max-programs", str(args.max_programs)] if args.max_programs else []
    w = Watch(args.checkout, state, "--interval", "1", *cap)
    try:
        # a thousand a chunk, each in the state (two saves after it ran) before the next:
        # the kernel's map (4096 a phase) never fills, so that what is measured is the
        # program cap, and the 64-bit programs hold it before the 32-bit ones come
        for k in range(0, len(progs), 1000):
            run_all(progs[k:k + 1000])
            w.saved(2, f"64-bit programs {k} to {k + 999}")
        base = other32(state)
        # no wait after the last ones: the stop (SIGTERM) reads the kernel's maps, as the
        # symlink farm's one interval is read
        run_all(new32[:args.new32], parallel=1)
    finally:
        w.stop()
    first = figures(args.checkout, state, set(new32[:args.new32]), farm, base)
    w = Watch(args.checkout, state, "--interval", "1", *cap)
    try:
        base = other32(state)          # (the watch's first save on the reloaded state is done)
        run_all(new32[args.new32:], parallel=1)
    finally:
        w.stop()
    after = figures(args.checkout, state, set(new32[args.new32:]), farm, base)
    return {"scenario": f"{args.programs} distinct 64-bit programs (1000 an interval), then "
                        f"{args.new32} new 32-bit programs; a restart, then {args.new32} more",
            "execs32": args.new32, "before_restart": first, "after_restart": after}


def scenario(name, tmp, **kw):
    """One scenario run from a test (tests/test_watch_crowds.py), with this checkout."""
    args = argparse.Namespace(checkout=os.path.dirname(HERE), links=4300, programs=5000,
                              new32=20, max_programs=None)
    for k, v in kw.items():
        setattr(args, k, v)
    return (symlinks if name == "symlinks" else cap)(args, tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", choices=("symlinks", "cap"))
    ap.add_argument("--checkout", default=os.path.dirname(HERE),
                    help="the timewrite checkout whose tw watch runs (default: this one)")
    ap.add_argument("--links", type=int, default=4300)
    ap.add_argument("--programs", type=int, default=5000)
    ap.add_argument("--new32", type=int, default=20)
    ap.add_argument("--max-programs", type=int, help="tw watch --max-programs (default: its own)")
    args = ap.parse_args()
    args.checkout = os.path.abspath(args.checkout)
    commit = subprocess.run(["git", "-C", args.checkout, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tw-farm-", dir="/var/tmp") as tmp:
        out = (symlinks if args.scenario == "symlinks" else cap)(args, tmp)
    out["checkout"], out["commit"] = args.checkout, commit
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
