"""The repository's benchmarks: the multi-seed benchmark harness (`benchmarks.harness`, run with
`python benchmarks/bench.py`), the peers measured against LZE (`benchmarks.peers`) and one-off experiment scripts.
Not part of the `lze-trl` wheel: the harness imports `lze_trl` and `lze_examples.demo`, never the reverse."""
