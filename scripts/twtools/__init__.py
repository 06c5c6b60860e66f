"""twtools: measuring, tracing and reporting for timewrite.  See docs/architecture.md."""
