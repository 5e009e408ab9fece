r"""Selection before generation: which of a generation batch's candidate prompts are rolled out.

With `fresh_fraction < 1` only `n` of the `B` candidate prompts a generation batch brings are generated. With
`generation_selection="random"` they are the first `n` (the sampler's order is a random permutation). With
`"thompson"` (as MoPPS does) each candidate's pass rate is drawn from a Beta posterior and the `n` draws closest to
`generation_target` are generated:

    seen prompt:    Beta(1 + m q, 1 + m (1 - q)),  q = its last pass rate, m = G * min(observations, 2)
    unseen prompt:  Beta(1 + m0 p, 1 + m0 (1 - p)), m0 = 2, p = the similarity-weighted pass-rate EMA of the most
                    similar prompts already rolled out (DOTS's idea, with a cheap text featurisation instead of an
                    attention model), or Beta(1, 1) with no similar prompt

The featurisation (`generation_similarity="ngram"`) hashes a prompt's character 1-3-grams and its characters tagged
with their position from the end into `DIMS` buckets (CRC-32, the same on every process and run), L2-normalised;
similarity is the cosine, over at most `store_size` prompts rolled out most recently. Draws are seeded by `(seed,
generation, process)`: each process chooses among its own candidates, deterministically. Plain numpy.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import numpy as np

from ..prompt_state import PromptState


GENERATION_SELECTIONS = ("random", "thompson")
GENERATION_SIMILARITIES = ("none", "ngram")
DIMS = 512
NEIGHBOURS = 16
UNSEEN_EVIDENCE = 2.0
SEEN_OBSERVATIONS = 2


def prompt_text(prompt: Any) -> str:
    """A prompt as text: itself, or the contents of a conversation's messages."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in prompt)
    return json.dumps(prompt, sort_keys=True, default=str)


def featurize(texts: list[str]) -> np.ndarray:
    """Hashed character 1-3-grams and position-tagged characters of each text, L2-normalised, shape `(n, DIMS)`."""
    out = np.zeros((len(texts), DIMS), dtype=np.float32)
    for row, text in enumerate(texts):
        grams = [text[i : i + n] for n in (1, 2, 3) for i in range(len(text) - n + 1)]
        grams += [f"{len(text) - i}:{c}" for i, c in enumerate(text[-64:], start=max(len(text) - 64, 0))]
        for gram in grams:
            out[row, zlib.crc32(gram.encode("utf-8")) % DIMS] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12)


class GenerationPlanner:
    """
    Chooses which candidate prompts are generated (see the module docstring).

    Args:
        mode (`str`, *optional*, defaults to `"thompson"`):
            `"random"` or `"thompson"`.
        target (`float`, *optional*, defaults to `0.5`):
            Pass rate the Thompson draws are chosen near.
        similarity (`str`, *optional*, defaults to `"ngram"`):
            How unseen prompts are predicted: `"ngram"` (from similar prompts rolled out) or `"none"` (Beta(1, 1)).
        num_generations (`int`, *optional*, defaults to `8`):
            Rollouts per group `G`.
        store_size (`int`, *optional*, defaults to `4096`):
            Prompts rolled out whose features are kept for the similarity.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the draws.
    """

    def __init__(
        self,
        mode: str = "thompson",
        target: float = 0.5,
        similarity: str = "ngram",
        num_generations: int = 8,
        store_size: int = 4096,
        seed: int = 0,
    ) -> None:
        if mode not in GENERATION_SELECTIONS or similarity not in GENERATION_SIMILARITIES:
            raise ValueError(f"Unknown generation selection {mode!r} or similarity {similarity!r}.")
        self.mode, self.target, self.similarity = mode, target, similarity
        self.num_generations, self.store_size, self.seed = num_generations, store_size, seed
        self.store_ids = np.zeros(0, dtype=np.int64)
        self.store_features = np.zeros((0, DIMS), dtype=np.float32)
        self.last: dict[str, float] = {}

    def predict(self, ids: np.ndarray, texts: list[str], state: PromptState) -> tuple[np.ndarray, np.ndarray]:
        """The Beta posterior `(alpha, beta)` of each candidate's pass rate."""
        row = state.get(ids)
        seen = row["num_observations"] > 0
        evidence = self.num_generations * np.minimum(row["num_observations"], SEEN_OBSERVATIONS)
        q = np.where(seen, row["last_pass_rate"], 0.5)
        if self.similarity == "ngram" and (~seen).any() and len(self.store_ids) > 0:
            p, found = self.neighbour_pass_rates(np.asarray(texts, dtype=object)[~seen].tolist(), state)
            q[~seen] = np.where(found, p, 0.5)
            evidence[~seen] = np.where(found, UNSEEN_EVIDENCE, 0.0)
        return 1.0 + evidence * q, 1.0 + evidence * (1.0 - q)

    def neighbour_pass_rates(self, texts: list[str], state: PromptState) -> tuple[np.ndarray, np.ndarray]:
        """Similarity-weighted pass-rate EMA of each text's nearest stored prompts, and whether it has any."""
        sims = featurize(texts) @ self.store_features.T
        k = min(NEIGHBOURS, sims.shape[1])
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        weights = np.maximum(np.take_along_axis(sims, top, axis=1), 0.0)
        ema = state.get(self.store_ids)["ema_pass_rate"][top]
        total = weights.sum(axis=1)
        return (weights * ema).sum(axis=1) / np.maximum(total, 1e-12), total > 0

    def choose(
        self, ids: np.ndarray, texts: list[str], count: int, state: PromptState, generation: int, process: int
    ) -> np.ndarray:
        """Positions (into the candidates, increasing) of the `count` candidates to generate."""
        ids = np.asarray(ids, dtype=np.int64)
        seen = state.get(ids)["num_observations"] > 0
        if self.mode == "random" or count >= len(ids):
            chosen = np.arange(min(count, len(ids)))
        else:
            alpha, beta = self.predict(ids, texts, state)
            draws = np.random.default_rng([self.seed, generation, process, 0x7A5]).beta(alpha, beta)
            chosen = np.sort(np.argsort(np.abs(draws - self.target), kind="stable")[:count])
        self.last = {"unseen_share": float(np.mean(~seen[chosen])) if len(chosen) else 0.0}
        return chosen

    def observe(self, ids: np.ndarray, texts: list[str]) -> None:
        """Adds prompts rolled out (all processes' groups, in order) to the similarity store."""
        if self.similarity == "none" or len(ids) == 0:
            return
        ids = np.asarray(ids, dtype=np.int64)
        new = ~np.isin(ids, self.store_ids)
        ids, first = np.unique(ids[new], return_index=True)
        texts = [t for t, keep in zip(texts, new) if keep]
        self.store_ids = np.concatenate([self.store_ids, ids])[-self.store_size :]
        features = featurize([texts[i] for i in first])
        self.store_features = np.concatenate([self.store_features, features])[-self.store_size :]

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"store_ids": self.store_ids.copy(), "store_features": self.store_features.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.store_ids = np.asarray(state["store_ids"], dtype=np.int64).copy()
        self.store_features = np.asarray(state["store_features"], dtype=np.float32).copy()
