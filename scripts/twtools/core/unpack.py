"""A results archive fetched from another host, unpacked without trusting it.

The fleet playbook archives a results directory on each host and fetches it; the archive is
whatever that host chose to send.  unpack() extracts it into a new folder of the collection
and refuses, before a byte is written, an archive that holds:

  - anything but regular files and directories (symbolic links, hard links, devices, FIFOs):
    a results directory holds none, and a link is how an archive writes outside its folder;
  - an absolute name, a name with '..', or a name outside the archive's one top folder;
  - a member larger than files.MAX_READ (no stage file is), or more than MAX_TOTAL bytes in
    all: a 2 GiB "stage file" is refused here, not written to the user's disk;
  - more than MAX_MEMBERS members.

What passes is extracted with tarfile's own 'data' filter as a second guard (Python's
defence against the same tricks, PEP 706), into a temporary folder beside the target that is
renamed into place only when complete.  The archive itself is read through tarfile, which
never runs anything.
"""
import os
import shutil
import stat
import tarfile
from pathlib import Path, PurePosixPath

from . import files
from .ui import DataError

MAX_TOTAL = 1 << 30
MAX_MEMBERS = 10000


def check_members(members, limit=files.MAX_READ):
    """The archive's one top folder; DataError naming the first member that is not allowed."""
    top, total = None, 0
    if len(members) > MAX_MEMBERS:
        raise DataError(f"{len(members)} members: more than a results directory holds "
                        f"({MAX_MEMBERS} at most)")
    for m in members:
        name = m.name
        p = PurePosixPath(name)
        if p.is_absolute() or name.startswith("/"):
            raise DataError(f"{name!r}: an absolute name in the archive; refusing it")
        if ".." in p.parts:
            raise DataError(f"{name!r}: a name with '..' in the archive; refusing it")
        if not (m.isfile() or m.isdir()):
            kind = ("a symbolic link" if m.issym() else "a hard link" if m.islnk() else
                    "a device" if m.ischr() or m.isblk() else "a FIFO" if m.isfifo() else
                    "not a regular file")
            target = f" (to {m.linkname!r})" if m.issym() or m.islnk() else ""
            raise DataError(f"{name!r}: is {kind}{target} in the archive; a results directory "
                            "holds only regular files")
        parts = [x for x in p.parts if x not in ("", ".")]
        if not parts:
            continue
        if top is None:
            top = parts[0]
        elif parts[0] != top:
            raise DataError(f"{name!r}: outside the archive's one folder {top!r}")
        if m.isfile() and len(parts) == 1:
            raise DataError(f"{name!r}: a file outside the archive's one folder")
        if m.size > limit:
            raise DataError(f"{name!r}: {m.size} bytes, larger than any stage file "
                            f"({limit >> 20} MiB at most)")
        total += m.size
        if total > MAX_TOTAL:
            raise DataError(f"more than {MAX_TOTAL >> 20} MiB in the archive: not a results "
                            "directory")
    if top is None:
        raise DataError("the archive is empty")
    return top


def unpack(archive, dest):
    """Extract a results archive (tar, optionally gzip/xz/bz2) into dest/<its top folder>;
    returns that path.  dest/<top> must not exist yet (a collection never merges two runs).
    DataError for a hostile or damaged archive, nothing written."""
    archive, dest = Path(archive), Path(dest)
    st = os.lstat(archive)
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{archive}: not a regular file")
    try:
        tf = tarfile.open(archive, "r:*")
    except (tarfile.TarError, EOFError, OSError) as e:
        raise DataError(f"{archive}: not a tar archive ({e})") from None
    with tf:
        try:
            members = tf.getmembers()
        except (tarfile.TarError, EOFError, OSError) as e:
            raise DataError(f"{archive}: damaged archive ({e})") from None
        top = check_members(members)
        dest.mkdir(parents=True, exist_ok=True)
        final = dest / top
        if os.path.lexists(final):
            raise DataError(f"{final}: exists already; a collection never merges two runs",
                            "remove it, or collect into another folder")
        tmp = dest / f".{top}.unpack.{os.getpid()}"
        os.mkdir(tmp, 0o755)
        try:
            try:
                tf.extractall(tmp, members=members, filter="data")
            except (tarfile.TarError, EOFError) as e:
                raise DataError(f"{archive}: damaged archive ({e})") from None
            os.rename(tmp / top, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final
