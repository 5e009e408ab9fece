"""What lze-trl says when something goes wrong: the warning of its run-time checks and the error of a checkpoint's LZE
state (a module of their own, which imports nothing, so that any module may import them)."""


class LZEWarning(UserWarning):
    """What lze-trl's run-time checks say: a run that degenerates, or a setting that cannot act as asked."""


class LZEStateError(ValueError):
    """The LZE state of a checkpoint is missing, corrupt, or does not fit the run that resumes from it."""
