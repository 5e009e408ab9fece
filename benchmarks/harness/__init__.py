"""The benchmark harness behind `python benchmarks/bench.py`: the demo's comparison ([`lze_examples.demo`]) over
seeds and any selectors, the selector-sweep report, and the selection micro-benchmark.

The modules:

- `specs`: command-line run specs (`lze:selection_ratio=0.2`, `softmax:temperature=0.3`) and `key=value` overrides;
  importing it registers the peers ([`benchmarks.peers`]).
- `stats`: mean and spread over seeds (pandas; t intervals from scipy).
- `markdown`: the benchmarks' Markdown tables (tabulate).
- `train`: the comparison over seeds (`bench_train.json`, `bench_train.md`).
- `selection`: the selection micro-benchmark (`bench_selection.json`, `bench_selection.md`).
- `sweep`, `sweep_plot`: the selector-sweep report over `train` folders (`sweep.md`, `sweep.json`, `sweep.png`).
- `cli`: the command line of `benchmarks/bench.py`.

It imports `lze_trl` and `lze_examples.demo`; the package never imports it.
"""
