"""What the peers share as selectors registered from outside the package: their settings come from
`args.selector_kwargs` (a dict, a field of [`~benchmarks.peers.config.PeerConfig`]), merged over each peer's defaults
and validated by its `check_args`."""

from __future__ import annotations

from typing import Any, ClassVar

from lze_trl.method.checks import check_setting
from lze_trl.method.selectors import Selector


class PeerSelector(Selector):
    """
    Base of the peers: a [`~lze_trl.method.selectors.Selector`] whose settings are `args.selector_kwargs`.

    Subclasses set `name`, `defaults` (every setting with its default: the keys `selector_kwargs` may hold) and
    validate the merged settings in [`~PeerSelector.check_settings`].

    Attributes:
        settings (`dict[str, Any]`):
            `defaults` updated with `args.selector_kwargs`.
    """

    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.settings = self.resolve(args)

    @classmethod
    def resolve(cls, args: Any) -> dict[str, Any]:
        """`defaults` updated with `args.selector_kwargs`; a `ValueError` names an unknown key and the valid ones."""
        given = getattr(args, "selector_kwargs", None) or {}
        check_setting(isinstance(given, dict), "selector_kwargs", given, 'use a dict, e.g. {"temperature": 0.3}.')
        unknown = sorted(set(given) - set(cls.defaults))
        check_setting(
            not unknown,
            "selector_kwargs",
            given,
            f"selector={cls.name!r} takes the keys {sorted(cls.defaults)}, not {unknown}.",
        )
        return {**cls.defaults, **given}

    @classmethod
    def check_args(cls, args: Any) -> None:
        # Called for every registered selector: `selector_kwargs` belongs to the selector that runs.
        if getattr(args, "selector", None) == cls.name:
            cls.check_settings(cls.resolve(args))

    @classmethod
    def check_settings(cls, settings: dict[str, Any]) -> None:
        """Raises a `ValueError` naming the setting (`selector_kwargs['key']`) and the fix for an invalid value."""
