"""The analyse layer: pure functions from raw samples to summaries, attributions, fits and
the verdict. Imports core and machine; never measure or present."""
