"""The drivers layer: the toolkit's benchmarks of itself (the fleet view's scale, what a run
holds fixed), each a loop that both measures and analyses, so above measure and analyse and
below cli.  Imports core, machine, measure, analyse and present; never cli.  Its commands'
arguments are parsed in cli/ (tw fleet --bench) or by a thin entry (scripts/bench_factors.py)."""
