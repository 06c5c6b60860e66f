"""The present layer: tables, plots, reports, explanations. Imports core, machine and
analyse; never measure."""
