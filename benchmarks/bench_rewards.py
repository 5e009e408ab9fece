"""Times `math_accuracy` on one GRPO-sized batch of completions (CPU only, no network).

Usage:
    python benchmarks/bench_rewards.py [--completions 256] [--repeats 5]

The batch mimics a GRPO step: 16 prompts x 16 generations, each completion ~2 kB of reasoning text ending in a
boxed (MATH-style) or plain-number (GSM8K-style) answer, about half of them correct. The first timed call runs in a
fresh process (cold math-verify / sympy caches); later calls reuse the warm process but each call still parses every
completion, since `math_accuracy` only caches within one call.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from lze_trl.rewards import math_accuracy


# (gold, correct answer as a model might write it, wrong answer)
CASES = [
    (r"\frac{1}{2}", r"\boxed{0.5}", r"\boxed{\frac{1}{3}}"),
    (r"\dfrac{\sqrt{3}}{2}", r"\boxed{\frac{\sqrt3}{2}}", r"\boxed{\frac{\sqrt2}{2}}"),
    ("(1, 2]", r"\boxed{(1,2]}", r"\boxed{[1,2]}"),
    (r"30^\circ", r"\boxed{30}", r"\boxed{60^\circ}"),
    (r"\text{(B)}", r"\boxed{B}", r"\boxed{\text{(D)}}"),
    ("1000", r"\boxed{1,000}", r"\boxed{100}"),
    (r"x^2+2x+1", r"\boxed{(x+1)^2}", r"\boxed{(x-1)^2}"),
    (
        r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}",
        r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}",
        r"\boxed{\begin{pmatrix}2\\1\end{pmatrix}}",
    ),
    ("72", "So she sold 72 clips in total.\n#### 72", "So she sold 70 clips in total.\n#### 70"),
    ("1600", "Total: $1,600.", "Total: $1,500."),
    ("3", r"\boxed{x = 3}", r"\boxed{x = -3}"),
    (r"2\sqrt{5}", r"\boxed{\sqrt{20}}", r"\boxed{\sqrt{10}}"),
    ("18.90", r"\boxed{\$18.90}", r"\boxed{\$19.80}"),
    ("-7", r"\boxed{-7}", r"\boxed{7}"),
    (r"\{1, 2\}", r"\boxed{\{2, 1\}}", r"\boxed{\{1, 3\}}"),
    ("10\\%", r"\boxed{10\%}", r"\boxed{1\%}"),
]

REASONING = (
    "Let us set up the problem carefully. We write the unknown as $x$ and collect the given quantities. "
    "Substituting $a = 3$ and $b = 4$ gives $a^2 + b^2 = 25$, so $c = 5$. Checking the edge cases, "
    "$\\frac{12}{4} = 3$ and $2 \\cdot 7 = 14$, which is consistent with the constraints. "
)


def make_batch(n: int, seed: int = 0) -> tuple[list[str], list[str], list[float]]:
    """Returns unique completions (so no within-call caching kicks in), their gold answers and expected rewards."""
    rng = random.Random(seed)
    completions, solutions, expected = [], [], []
    for i in range(n):
        gold, right, wrong = CASES[(i // 16) % len(CASES)]  # 16 generations per prompt share a gold answer
        correct = rng.random() < 0.5
        reasoning = f"Attempt {i}. " + REASONING * rng.randint(4, 8)
        completions.append(reasoning + "\nTherefore the final answer is " + (right if correct else wrong))
        solutions.append(gold)
        expected.append(float(correct))
    return completions, solutions, expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    completions, solutions, expected = make_batch(args.completions)
    timings = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        rewards = math_accuracy(completions, solutions)
        timings.append(time.perf_counter() - start)
    if rewards != expected:
        raise SystemExit(f"unexpected rewards: {sum(r != e for r, e in zip(rewards, expected))} mismatches")
    accuracy = sum(rewards) / len(rewards)
    chars = sum(map(len, completions)) / len(completions)
    print(f"{args.completions} completions (~{chars:.0f} chars each), mean reward {accuracy:.3f} (all as expected)")
    print(f"first call (cold): {timings[0]:.3f} s")
    if len(timings) > 1:
        print(f"warm calls: median {statistics.median(timings[1:]):.3f} s, max {max(timings[1:]):.3f} s")


if __name__ == "__main__":
    main()
