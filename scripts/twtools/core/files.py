"""Files written whole or not at all, and JSON read with the file's name in every error.

Every file the tools write goes through write_text(): a temporary file beside the target,
written, flushed and fsync'ed, then renamed over the target (and the directory fsync'ed), so
a crash, a kill or a full disk leaves either the old file or the new one, never a truncated
one; a failure removes the temporary file and raises OSError naming the target.
"""
import json
import math
import os
from pathlib import Path


def write_text(path, text):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            data = text.encode()
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise OSError(e.errno, f"cannot write {path}: {e.strerror}") from None
    try:
        dfd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass            # a directory that cannot be fsync'ed still has the renamed file


def write_json(path, obj):
    """obj as indented JSON, atomically.  NaN and infinity are refused (ValueError naming
    the file): no stage file may carry a number that is not one."""
    try:
        text = json.dumps(_clean(obj), indent=1, sort_keys=False, default=_jsonable,
                          allow_nan=False) + "\n"
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    write_text(path, text)


def read_json(path, default=None):
    path = Path(path)
    if not path.exists():
        return default
    return json.loads(path.read_text())


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
