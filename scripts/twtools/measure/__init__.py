"""The measure layer: runs the programs and tracers, and writes raw samples with how they
were taken. Imports core and machine; never analyse or present."""
