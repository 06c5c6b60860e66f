"""The one version string: `tw --version`, every results directory's meta.json, the package.

In a checkout it comes from git: `git describe --tags --always` of HEAD, made a valid Debian
version (it is also the .deb's).  A tag vX.Y gives X.Y, and N commits after it
X.Y+git<date>.N.<hash>; with no tag, 0.0~git<date>.<hash> (the ~ sorts it below any tagged
release).  <date> is the commit's own date, UTC, so two builds of one commit agree; a checkout
with uncommitted changes to tracked files adds .dirty.  An installed copy has no git: `make deb`
writes the string into the file VERSION beside scripts/, and that file wins.  With neither,
"unknown".
"""
import re
import subprocess
import time

from . import paths

FILE = paths.ROOT / "VERSION"
_cached = None


def _git(*args):
    p = subprocess.run(["git", "-C", str(paths.ROOT), *args], capture_output=True, text=True,
                       timeout=30, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise OSError(p.stderr.strip() or f"git {args[0]} failed")
    return p.stdout.strip()


def debian(described, commit_time, dirty=False):
    """`git describe --tags --always --long`'s output as a Debian upstream version."""
    day = time.strftime("%Y%m%d", time.gmtime(commit_time))
    m = re.fullmatch(r"v?(\d[0-9A-Za-z.+~]*)-(\d+)-g([0-9a-f]+)", described)
    if m:
        tag, n, h = m.groups()
        v = tag if n == "0" else f"{tag}+git{day}.{n}.{h}"
    elif re.fullmatch(r"[0-9a-f]{4,40}", described):
        v = f"0.0~git{day}.{described}"
    else:
        # A tag that is not a version (no leading digit): keep it as words after 0.0~.
        v = "0.0~" + re.sub(r"[^0-9A-Za-z.+~]", ".", described)
    return v + (".dirty" if dirty else "")


def from_git():
    """The version of the checkout's HEAD, or None when there is no git or no repository."""
    try:
        described = _git("describe", "--tags", "--always", "--long", "--abbrev=12")
        when = int(_git("log", "-1", "--format=%ct"))
        dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return debian(described, when, dirty)


def get():
    global _cached
    if _cached is None:
        v = FILE.read_text().strip() or None if FILE.is_file() else None
        _cached = v or from_git() or "unknown"
    return _cached


if __name__ == "__main__":
    print(get())
