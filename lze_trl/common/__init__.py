"""What both trainers stand on, below them: the LZE state's owner in checkpoints and logs
([`~lze_trl.common.state_owner.LZEStateOwner`]), the engines' and threads' policy (`engines`), and TRL's names and
versions lze-trl is coupled to and tested with (`coupling`). `lze_trl.grpo` and `lze_trl.async_grpo` import from here
and from the layers below, never from each other."""
