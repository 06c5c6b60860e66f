"""Programs nobody in this project wrote, built at test time: a Go program for GOARCH=386 and
for amd64, static (CGO_ENABLED=0), that writes one byte to /dev/null N times.

Go's own runtime decides how it enters the kernel (on linux/386: inline `int $0x80`, its
INVOKE_SYSCALL, since Go 1.7), so these binaries test the classifier and the diagnosis on
code this project did not shape.  `go` is looked for on PATH, then at /usr/lib/go/bin/go
(Debian's golang-go, which set-up installs) and /usr/local/go/bin/go; without it the tests
that need it skip, saying so.  The build cache lives in build/go-test, so a second session
builds in about a second."""
import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from twtools.core import paths

WRITES = 997         # a prime: no other count in a run is a multiple of it by accident
GO_CANDIDATES = ("/usr/lib/go/bin/go", "/usr/local/go/bin/go")

SOURCE = """package main

// One-byte writes to /dev/null, as many as the first argument says: the workload whose
// count every tracer must see exactly.
import (
	"os"
	"strconv"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		os.Exit(2)
	}
	f, err := os.OpenFile("/dev/null", os.O_WRONLY, 0)
	if err != nil {
		os.Exit(1)
	}
	b := []byte{'x'}
	for i := 0; i < n; i++ {
		if _, err := f.Write(b); err != nil {
			os.Exit(1)
		}
	}
}
"""


def find_go():
    for c in (shutil.which("go"),) + GO_CANDIDATES:
        if c and os.access(c, os.X_OK):
            return c
    return None


@functools.lru_cache(maxsize=None)
def _build(goarch):
    go = find_go()
    if go is None:
        return None, ("Go is not installed (no go on PATH, nor " + ", ".join(GO_CANDIDATES) +
                      "); set-up installs Debian's golang-go")
    work = paths.BUILD / "go-test"
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.go").write_text(SOURCE)
    (src / "go.mod").write_text("module gowrite\n\ngo 1.19\n")
    out = work / f"gowrite-{goarch}"
    env = dict(os.environ, GOARCH=goarch, GOOS="linux", CGO_ENABLED="0", GOTOOLCHAIN="local",
               GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=str(work / "cache"),
               GOPATH=str(work / "gopath"), HOME=str(work))
    p = subprocess.run([go, "build", "-o", str(out), "."], cwd=src, env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        # Go is there but cannot build for this target: that is a failure, not a skip
        raise AssertionError(f"{go} build GOARCH={goarch} failed: {p.stderr.strip()[-500:]}")
    return out, None


def go_program(goarch):
    """The built program's path; skips with the reason when Go is not installed."""
    path, why = _build(goarch)
    if path is None:
        pytest.skip(why)
    return Path(path)
