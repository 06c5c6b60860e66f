"""The Go program of twtools.measure.goprog, built once per test session: code nobody in this
project wrote, for GOARCH=386 (inline int 0x80) and amd64 (inline syscall).  Without Go the
tests that need it skip, saying so; a Go that is there but cannot build fails them."""
import functools

import pytest

from twtools.measure import goprog

WRITES = 997         # a prime: no other count in a run is a multiple of it by accident


@functools.lru_cache(maxsize=None)
def _build(goarch):
    try:
        return goprog.build(goarch)
    except goprog.GoBuildError as e:
        return None, AssertionError(str(e))


def go_program(goarch):
    """The built program's path; skips with the reason when Go is not installed."""
    path, why = _build(goarch)
    if isinstance(why, AssertionError):
        raise why
    if path is None:
        pytest.skip(why)
    return path
