"""A program nobody in this project wrote, built here: Go, static (CGO_ENABLED=0), for
GOARCH=386 or amd64, writing one byte to /dev/null N times (N its first argument).

Go's runtime decides how it enters the kernel (on linux/386 inline `int $0x80`, its
INVOKE_SYSCALL since Go 1.7), so this program is the field example `tw diagnose` and
`tw classify` are tested on, and that a report can diagnose beside the seed's hypothesis.
`go` is looked for on PATH, then at /usr/lib/go/bin/go (Debian's golang-go) and
/usr/local/go/bin/go.  The toolchain is kept local (GOTOOLCHAIN=local, GOPROXY=off): a
build never downloads anything.
"""
import os
import shutil
import subprocess
from pathlib import Path

from ..core import paths, proc

GO_CANDIDATES = ("/usr/lib/go/bin/go", "/usr/local/go/bin/go")
WORKDIR = paths.BUILD / "go-test"

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


class GoBuildError(RuntimeError):
    """Go is installed but could not build the program: the message has its error."""


def find_go():
    """The go command, or None."""
    for c in (shutil.which("go"),) + GO_CANDIDATES:
        if c and os.access(c, os.X_OK):
            return c
    return None


def build(goarch="386", workdir=WORKDIR):
    """(path, None) of build/go-test/gowrite-<goarch>, built (or rebuilt: the cache makes
    that about a second), or (None, why) when Go is not installed.  GoBuildError when Go is
    there and fails."""
    go = find_go()
    if go is None:
        return None, ("Go is not installed (no go on PATH, nor " + ", ".join(GO_CANDIDATES) +
                      "); set-up installs Debian's golang-go")
    work = Path(workdir)
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "main.go").write_text(SOURCE)
    (src / "go.mod").write_text("module gowrite\n\ngo 1.19\n")
    out = work / f"gowrite-{goarch}"
    env = dict(os.environ, GOARCH=goarch, GOOS="linux", CGO_ENABLED="0", GOTOOLCHAIN="local",
               GOFLAGS="-mod=mod", GOPROXY="off", GOCACHE=str(work / "cache"),
               GOPATH=str(work / "gopath"), HOME=str(work))
    try:
        # core.proc: go build's compilers are in its process group, killed with it on an
        # interrupt or a timeout.
        p = proc.run([go, "build", "-o", str(out), "."], cwd=src, env=env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise GoBuildError(f"{go} build GOARCH={goarch}: {e}")
    if p.returncode:
        raise GoBuildError(f"{go} build GOARCH={goarch} failed: {p.stderr.strip()[-500:]}")
    return out, None
