"""The warning class of lze-trl's run-time checks (a module of its own, so that any module may import it)."""


class LZEWarning(UserWarning):
    """What lze-trl's run-time checks say: a run that degenerates, or a setting that cannot act as asked."""
