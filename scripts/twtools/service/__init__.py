"""The toolkit's long-lived and shared services, above the presentation and below the
commands: `matrix` (the per-call matrix a command prices with) and `watch` (tw watch's run
loop).  docs/architecture.md says why the layer exists."""
