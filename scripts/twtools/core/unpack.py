"""A results archive fetched from another host, unpacked without trusting it.

The fleet playbook archives a results directory on each host and fetches it; the archive is
whatever that host chose to send.  unpack() extracts it into a new folder of the collection
and refuses, before a byte is written, an archive that holds:

  - anything but regular files and directories (symbolic links, hard links, devices, FIFOs):
    a results directory holds none, and a link is how an archive writes outside its folder;
  - an absolute name, a name with '..', or a name outside the archive's one top folder;
  - a member larger than files.MAX_READ (no stage file is), or more than MAX_TOTAL bytes in
    all: a 2 GiB "stage file" is refused here, not written to the user's disk;
  - more than MAX_MEMBERS members, a name deeper than MAX_DEPTH folders or longer than the
    kernel takes (PATH_MAX, NAME_MAX), or the same name twice;
  - an extended header (GNU long name or link, PAX) larger than MAX_EXT_HEADER.

The last two are checked first, by prescan(), which reads the archive's 512-byte headers as a
stream and skips each payload unread: tarfile itself reads a long-name or PAX header whole
before anything can look at it (a 2 MB archive made a 2 GiB header), and lists every member
before the count can be checked.  So no header is ever larger than MAX_EXT_HEADER in memory,
and the member count stops the walk at MAX_MEMBERS + 1.

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
MAX_DEPTH = 32           # a results directory is three folders deep
MAX_EXT_HEADER = 1 << 16  # a long name or a PAX record set: PATH_MAX is 4096
PATH_MAX, NAME_MAX = 4096, 255
BLOCK = 512
EXTENDED = {b"L": "a GNU long-name header", b"K": "a GNU long-link header",
            b"x": "a PAX header", b"g": "a global PAX header"}


def _opener(path):
    """A reader of the archive's tar stream: gzip, xz or bzip2 by its magic, else plain."""
    import bz2
    import gzip
    import lzma
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if magic == b"\xfd7zXZ\x00":
        return lzma.open(path, "rb")
    if magic[:3] == b"BZh":
        return bz2.open(path, "rb")
    return open(path, "rb")


def _size(field):
    """A tar header's size field: octal, or base-256 when its first byte has the high bit."""
    if field[0] & 0x80:
        n = 0
        for b in field[1:]:
            n = (n << 8) | b
        return n
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text or b"0", 8)
    except ValueError:
        raise DataError(f"a header with a size that is not a number ({text[:20]!r})") from None


def prescan(path, max_members=MAX_MEMBERS, max_ext=MAX_EXT_HEADER, max_total=MAX_TOTAL):
    """Walk the archive's headers as a stream, each payload skipped unread; DataError at the
    first extended header over max_ext bytes, member max_members + 1, or max_total bytes of
    payload, before tarfile reads any of it whole."""
    members = total = 0
    skip = bytearray(1 << 16)
    try:
        with _opener(path) as f:
            while True:
                h = f.read(BLOCK)
                if len(h) < BLOCK or h == bytes(BLOCK):
                    return members
                kind, size = h[156:157], _size(h[124:136])
                if kind in EXTENDED:
                    if size > max_ext:
                        raise DataError(f"{EXTENDED[kind]} of {size} bytes: longer than any name "
                                        f"({max_ext} bytes at most); refusing the archive unread")
                else:
                    members += 1
                    if members > max_members:
                        raise DataError(f"more than {max_members} members: more than a results "
                                        "directory holds; refusing the archive unread")
                    if size > files.MAX_READ:
                        name = h[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
                        raise DataError(f"{name!r}: {size} bytes, larger than any stage file "
                                        f"({files.MAX_READ >> 20} MiB at most)")
                    total += size
                    if total > max_total:
                        raise DataError(f"more than {max_total >> 20} MiB in the archive: not a "
                                        "results directory")
                left = -(-size // BLOCK) * BLOCK
                while left:
                    n = f.readinto(memoryview(skip)[:min(left, len(skip))])
                    if not n:
                        return members
                    left -= n
    except (OSError, EOFError, ValueError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(f"damaged archive ({e})") from None


def check_members(members, limit=files.MAX_READ):
    """The archive's one top folder; DataError naming the first member that is not allowed."""
    top, total, seen = None, 0, set()
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
        if len(p.parts) > MAX_DEPTH:
            raise DataError(f"{name[:80]!r}...: {len(p.parts)} folders deep, deeper than a "
                            f"results directory ({MAX_DEPTH} at most)")
        if len(name.encode()) > PATH_MAX or any(len(x.encode()) > NAME_MAX for x in p.parts):
            raise DataError(f"{name[:80]!r}...: a name longer than the kernel takes")
        key = PurePosixPath(*[x for x in p.parts if x not in ("", ".")]) if p.parts else p
        if key in seen:
            raise DataError(f"{name!r}: twice in the archive; a results directory has one of each")
        seen.add(key)
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
        prescan(archive)
    except DataError as e:
        raise DataError(f"{archive}: {e.message}") from None
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
