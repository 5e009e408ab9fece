"""Subcommands of the `lze-trl` console script; each module exposes `main(argv) -> int`."""
