"""[`PeerConfig`]: [`LZEGRPOConfig`] plus `selector_kwargs`, the settings of the peers registered from outside the
package."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lze_trl.grpo.config import LZEGRPOConfig
from lze_trl.method.checks import check_setting


@dataclass
class PeerConfig(LZEGRPOConfig):
    """
    [`LZEGRPOConfig`] for a peer selector (`benchmarks.peers`).

    Parameters:
        selector_kwargs (`dict[str, Any]` or `str`, *optional*):
            Settings of the peer selector that runs, as a dict or a JSON string (the command line's
            `--selector_kwargs '{"temperature": 0.3}'`); the peer reads and validates them in its `check_args`.
    """

    selector_kwargs: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "Settings of the peer selector, as a dict (JSON on the command line)."},
    )

    _VALID_DICT_FIELDS = LZEGRPOConfig._VALID_DICT_FIELDS + ["selector_kwargs"]

    def __post_init__(self):
        super().__post_init__()  # parses the JSON string of `selector_kwargs` (TRL's dict fields) and validates
        check_setting(
            self.selector_kwargs is None or isinstance(self.selector_kwargs, dict),
            "selector_kwargs",
            self.selector_kwargs,
            'use a dict (a JSON object on the command line), e.g. {"temperature": 0.3}.',
        )
