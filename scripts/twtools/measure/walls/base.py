"""The Wall interface: what tw ab's rounds (measure.ab) ask of every wall, and nothing else.

A wall goes up for B's runs only and the host is left as it was found:

  up(out_dir, cells)  put it up before the first round; what went up (ab.json's wall.up),
                      with each measured call's number and architecture where the wall
                      decides by them (the analysis reads those, never a native library)
  notices(cells)      what to say before anything runs: a measured call the wall answers
                      by logging, trapping or killing, an action that writes to the
                      kernel's log; each a (what, what follows) pair
  before(v, op, abi)  one of B's runs: a Run (syscost's extra arguments, a command wrapper,
                      or why the run cannot be made behind it)
  bare_wrapper(cmd)   one of A's runs: A's program started the way B's is, but for the wall
  grouped             True when going up costs more than a run (the tracer's attach): the
                      rounds then group B's runs and A's
  release()           before A's runs of a grouped wall and at each round's end: take down
                      what before() put up for B alone
  own_pids()          processes of the wall's own, which the host's tracers list leaves out
  down()              take everything down and say whether the host is as it was
"""
from typing import Callable, NamedTuple, Optional


class Run(NamedTuple):
    """What a wall adds to one of B's runs: syscost arguments and a wrapper, or why not."""
    args: list
    wrapper: Optional[Callable] = None
    why: Optional[str] = None


def refused(why):
    return Run([], None, why)


class Wall:
    """A wall that adds nothing: every method a wall has, with what doing nothing means."""
    kind = None
    grouped = False

    def __init__(self, spec):
        self.spec = spec["spec"]

    def up(self, out_dir, cells):
        return self.describe()

    def describe(self):
        return {"kind": self.kind, "spec": self.spec}

    def notices(self, cells):
        return []

    def before(self, variant, op, abi):
        return Run([])

    def bare_wrapper(self, cmd):
        return cmd

    def release(self):
        pass

    def own_pids(self):
        return set()

    def down(self):
        return {}
