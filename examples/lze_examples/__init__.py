"""lze-trl's examples, a package beside the library (`pip install -e examples` from a clone): the embedded CPU tasks
(`lze_examples.tasks`), their shipped warm start and the GRPO-against-LZE demo (`lze_examples.demo`, `lze-trl demo`),
the evaluation (`lze_examples.evaluation`, `lze-trl eval`), the tiny test models (`lze_examples.tiny`) and
SmolLM2-135M-Instruct from the package index (`lze_examples.smollm2`). The library (`lze_trl`) imports none of it."""
