"""The core layer: paths, files, processes and terminal messages. No domain knowledge,
standard library only, so every other layer may import it."""
