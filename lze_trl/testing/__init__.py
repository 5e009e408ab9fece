"""Test helpers shipped for the tests and the benchmarks, and for a user's own tests: nothing that trains imports
them (`tests/trainer/test_base_install.py`). `async_stand_ins`: the async trainer on a CPU without vLLM;
`vllm_reload`: weights to a `vllm serve` that NCCL cannot reach (vLLM's CPU build)."""
