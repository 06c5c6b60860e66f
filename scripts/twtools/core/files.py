"""Files written whole or not at all, never through a symbolic link; JSON read with the file's
name in every error.

Every file the tools write goes through write_bytes() (write_text, write_json): a temporary
file beside the target (created with O_EXCL | O_NOFOLLOW), written, fsync'ed, then renamed over
the target and the directory fsync'ed.  A crash, a kill or a full disk leaves the old file or
the new one, never a truncated one; a failure (or an interrupt) removes the temporary file, and
an OSError names the target.  The target must be a regular file or absent: a symbolic link, a
directory or a FIFO in its place is refused, never written through or replaced.

Inside `with confined(root):` (the report and the comparison write this way) every target must
lie inside root, and the directories between root and the target are opened one by one from
root with O_NOFOLLOW: a `plots` that is a symbolic link to somewhere else is refused, not
followed.  So a results directory copied from another machine cannot make tw write outside it.
"""
import contextlib
import contextvars
import errno
import json
import math
import os
import stat
from pathlib import Path

from .ui import DataError

_ROOT = contextvars.ContextVar("twtools_confined_root", default=None)
# A stage file is a few MB at most; anything far larger is not one (and is not read whole).
MAX_READ = 256 << 20


@contextlib.contextmanager
def confined(root):
    """Confine every write in the block to regular files inside `root` (see the module
    docstring).  `root` itself may be a symbolic link (results/latest): the user named it."""
    root = Path(os.path.abspath(root))
    token = _ROOT.set(root)
    try:
        yield root
    finally:
        _ROOT.reset(token)


def _kind(st):
    m = st.st_mode
    return ("a symbolic link" if stat.S_ISLNK(m) else "a directory" if stat.S_ISDIR(m) else
            "a FIFO" if stat.S_ISFIFO(m) else "a socket" if stat.S_ISSOCK(m) else
            "a device" if stat.S_ISCHR(m) or stat.S_ISBLK(m) else "not a regular file")


kind = _kind      # what a file is, in words ("a FIFO"), for other modules' messages


def _lstat_at(name, dfd):
    try:
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _open_dir_in(root, parts, create):
    """An fd of root/parts..., each component opened from the previous with O_NOFOLLOW (and
    created when `create`); DataError when one is a symbolic link or not a directory."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    here = root
    try:
        for name in parts:
            here = here / name
            if name in ("", ".", ".."):
                raise DataError(f"{here}: a path with '{name}' in it cannot be confined")
            try:
                try:
                    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(name, 0o755, dir_fd=fd)
                    nfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise OSError(e.errno, e.strerror, str(here)) from None
                st = _lstat_at(name, fd)
                target = f" (to {os.readlink(name, dir_fd=fd)})" if st and stat.S_ISLNK(st.st_mode) else ""
                raise DataError(f"{here}: is {_kind(st) if st else 'not a directory'}{target}, "
                                f"inside {root}; refusing to write through it",
                                "remove it (tw writes only real files and directories it makes "
                                "inside the directory it was given)") from None
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_parent(path, create=True):
    """(fd of path's directory, path's final name), confined when a root is set."""
    root = _ROOT.get()
    if root is None:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY), path.name
    try:
        rel = path.relative_to(root)
    except ValueError:
        raise DataError(f"{path}: outside {root}, the only directory this command may write "
                        "in") from None
    if not rel.parts:
        raise DataError(f"{path}: is the directory itself, not a file in it")
    return _open_dir_in(root, rel.parts[:-1], create), rel.parts[-1]


def new_directory(parent, stem):
    """Make and return a new directory parent/<stem>-<UTC time to the microsecond>Z-<pid>:
    made with mkdir(2), which fails if the name exists, so that two runs started in the same
    second never share one (a collision takes the next suffix)."""
    import datetime as dt
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    base = f"{stem}-{now.strftime('%Y%m%dT%H%M%S')}.{now.microsecond:06d}Z-{os.getpid()}"
    for n in range(1000):
        d = parent / (base if n == 0 else f"{base}-{n}")
        try:
            os.mkdir(d, 0o755)
            return d
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"1000 directories named {base}-* exist already",
                          str(parent))


def refuse_links(root, names, dirs=None):
    """Before writing anything: DataError when one of root/name, or anything directly inside
    a root/name directory, is a symbolic link or not a regular file/directory.  A writer that
    is about to write these names calls it first, so that a hostile directory is refused
    before a single file is written, not half-way (the writes refuse such a link anyway).

    With `dirs` (the names among `names` that are directories of files), each other name
    must be a regular file and each of those a directory holding only regular files: a
    report.md that is a directory is refused here, before the first plot is written, not
    when the report itself is."""
    root = Path(root)
    for name in names:
        p = root / name
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        want_dir = None if dirs is None else name in dirs
        if want_dir is not None and not stat.S_ISLNK(st.st_mode) \
                and stat.S_ISDIR(st.st_mode) != want_dir:
            raise DataError(f"{p}: is {_kind(st) if not want_dir else 'a file'}, where tw "
                            f"writes {'a directory' if want_dir else 'a file'}; refusing to "
                            "write anything", "move it away")
        if stat.S_ISDIR(st.st_mode):
            inside = [p / x for x in os.listdir(p)]
        elif stat.S_ISREG(st.st_mode):
            inside = []
        else:
            inside = [p]
        for q in inside:
            qs = os.lstat(q)
            ok = stat.S_ISREG(qs.st_mode) or (stat.S_ISDIR(qs.st_mode) and dirs is None)
            if not ok:
                target = f" to {os.readlink(q)}" if stat.S_ISLNK(qs.st_mode) else ""
                raise DataError(f"{q}: is {_kind(qs)}{target}; refusing to write through it",
                                "remove it (tw replaces only regular files)")


def write_bytes(path, data):
    """Write data to path atomically (see the module docstring); OSError names path."""
    write_chunks(path, (data,))


def write_chunks(path, chunks):
    """write_bytes of the concatenated chunks (an iterable of bytes), written as they come:
    a fleet's fleet.json need not exist whole in memory beside the view it is made from."""
    _write(path, lambda fd: _write_all(fd, chunks))


def adopt(path, src):
    """Put the file src, which another program wrote (DuckDB writes fleet.csv into a private
    temporary folder), at path as write_bytes would: renamed into place when both are on
    one file system, else copied into a temporary file beside the target first.  The target
    is checked as write_bytes checks it; src is gone afterwards."""
    def fill(fd):
        with open(src, "rb") as f:
            _write_all(fd, iter(lambda: f.read(1 << 20), b""))
    _write(path, fill, src)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(src)


def _write_all(fd, chunks):
    """Every byte of every chunk to fd (os.write may take fewer than it is given)."""
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]


def _write(path, fill, rename_from=None):
    """The one way a file is written: the target checked, a temporary file beside it filled
    by fill(fd) and fsync'ed (or rename_from renamed there, when on the same file system),
    then renamed over the target."""
    path = Path(os.path.abspath(path))
    try:
        dfd, name = _open_parent(path)
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(e.filename or path)) from None
    tmp = f".{name}.{os.getpid()}.tmp"
    created = False
    try:
        st = _lstat_at(name, dfd)
        if st is not None and not stat.S_ISREG(st.st_mode):
            target = f" to {os.readlink(name, dir_fd=dfd)}" if stat.S_ISLNK(st.st_mode) else ""
            raise DataError(f"{path}: is {_kind(st)}{target}; refusing to write through it",
                            "remove it (tw replaces only regular files)")
        moved = False
        if rename_from is not None:
            try:
                os.rename(rename_from, tmp, dst_dir_fd=dfd)
                created, moved = True, True
                fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except OSError as e:
                if e.errno != errno.EXDEV:
                    raise
        if not moved:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                         dir_fd=dfd)
            created = True
            try:
                fill(fd)
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        created = False
        with contextlib.suppress(OSError):
            os.fsync(dfd)   # a directory that cannot be fsync'ed still has the renamed file
    except OSError as e:
        raise OSError(e.errno, e.strerror, str(path)) from None
    finally:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
        os.close(dfd)


def write_text(path, text):
    write_bytes(path, text.encode())


def write_json(path, obj):
    """obj as indented JSON, atomically.  NaN and infinity are refused (ValueError naming
    the file): no stage file may carry a number that is not one."""
    try:
        text = json.dumps(_clean(obj), indent=1, sort_keys=False, default=_jsonable,
                          allow_nan=False) + "\n"
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    write_text(path, text)


def read_fd(fd, limit):
    """Up to `limit` bytes from an open file descriptor's position to its end, in reads of at
    most 64 KiB: for a file whose size says nothing (/proc's report 0) or that may be short."""
    chunks, total = [], 0
    while total < limit:
        b = os.read(fd, min(1 << 16, limit - total))
        if not b:
            break
        chunks.append(b)
        total += len(b)
    return b"".join(chunks)


def read_json(path, default=None):
    """A JSON file's content, or default when it does not exist.  No checks: a results
    directory is read through twtools.analyse.results, which validates."""
    path = Path(path)
    if not path.exists():
        return default
    return json.loads(path.read_text())


def read_regular(path, inside=None, limit=MAX_READ, what="stage file", magic=None):
    """The bytes of a regular file, or None when it does not exist.  DataError, naming it, when
    it is not a regular file (a FIFO would block the reader forever), is larger than `limit`
    (`what` names the kind of file in that message), or is a symbolic link that leads outside
    the directory `inside`.  With `magic` (bytes), a file whose first bytes are not `magic`
    is not read further: only those first bytes are returned (tw scan reads the four bytes of
    every file under /usr, and the whole of the ELF ones)."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        real = Path(os.path.realpath(path))
        base = Path(os.path.realpath(inside)) if inside is not None else None
        if base is not None and base != real and base not in real.parents:
            raise DataError(f"{path}: is a symbolic link to {os.readlink(path)}, outside "
                            f"{inside}; refusing to read it",
                            "a results directory holds its own files")
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise DataError(f"{path}: is a dangling symbolic link (to {os.readlink(path)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise DataError(f"{path}: is {_kind(st)}, not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataError(f"{path}: is not a regular file")
        chunks, total = [], 0
        if magic:
            head = os.pread(fd, len(magic), 0)
            if head != magic:
                return head
        if st.st_size > limit:
            raise DataError(f"{path}: {st.st_size} bytes, larger than any {what} "
                            f"({_size(limit)} at most)")
        # One read of the whole file as fstat sized it (one copy, not a join of chunks);
        # the loop goes on only for a file that grew meanwhile.
        want = st.st_size + 1
        while True:
            b = os.read(fd, min(want, limit + 1) if want else 1 << 20)
            want = 0
            if not b:
                break
            total += len(b)
            if total > limit:
                raise DataError(f"{path}: larger than any {what} ({_size(limit)} at most)")
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def gunzip(path, data, limit):
    """The decompressed bytes of gzip data read from path, at most `limit` of them: DataError,
    naming path, when it would decompress to more (a 2 MB gzip bomb expands to gigabytes, and
    gzip.decompress() would hold them all) or is not gzip data."""
    import zlib
    d = zlib.decompressobj(wbits=31)       # 31: a gzip header and trailer, one member
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise DataError(f"{path}: not gzip data ({e})") from None
    if len(out) > limit or d.unconsumed_tail:
        raise DataError(f"{path}: decompresses to more than {_size(limit)}, more than any "
                        "such file holds; refusing to expand it")
    if not d.eof:
        raise DataError(f"{path}: gzip data that ends early (truncated)")
    return out


def unxz(path, data, limit=MAX_READ):
    """The decompressed bytes of xz data read from path (the atlas's and a fleet's
    percall.json.xz), at most `limit` of them: DataError, naming path, when it is not xz, is
    damaged, ends early (a truncated copy: an xz stream carries its own end, so a cut file is
    told from a whole one), or would decompress to more."""
    import lzma
    dec = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
    try:
        out = dec.decompress(data, max_length=limit + 1)
    except lzma.LZMAError as e:
        raise DataError(f"{path}: not xz data, or damaged ({e})",
                        "copy the file again from where it was made") from None
    if len(out) > limit or (not dec.eof and not dec.needs_input):
        raise DataError(f"{path}: decompresses to more than {_size(limit)}, more than any "
                        "such file holds; refusing to expand it")
    if not dec.eof:
        raise DataError(f"{path}: its xz stream ends early (a truncated copy)",
                        "copy the file again from where it was made")
    return out


def _size(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB" if n >= 1 << 10 else f"{n} bytes"


_SCALARS = frozenset({str, int, float, bool, type(None)})


def copy_doc(o):
    """A deep copy of a document as JSON gives it (dicts, lists, strings, numbers, booleans,
    None), for an analysis that writes its figures into a copy of its stage file: the same
    as copy.deepcopy, three times faster (a list of numbers is copied in one step, with no
    memo).  Anything else inside (a tuple, an array) goes through copy.deepcopy."""
    t = type(o)
    if t is dict:
        return {k: copy_doc(v) for k, v in o.items()}
    if t is list:
        return list(o) if set(map(type, o)) <= _SCALARS else [copy_doc(v) for v in o]
    if t in _SCALARS:
        return o
    import copy
    return copy.deepcopy(o)


def _clean(o):
    """numpy scalars and arrays become Python numbers and lists before dumping."""
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "tolist") and not isinstance(o, (str, bytes)):
        return _clean(o.tolist())
    if isinstance(o, float) and not math.isfinite(o):
        raise ValueError(f"a non-finite number ({o}) would be written")
    return o


def _jsonable(o):
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
