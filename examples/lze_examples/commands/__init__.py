"""The `lze-trl` commands that come with the examples (`demo`, `eval`): entry points of the `lze_trl.commands`
group, each module with `SUMMARY` (its line in `lze-trl --help`) and `main(argv) -> int`."""
