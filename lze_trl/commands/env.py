"""`lze-trl env`: the environment, for bug reports, as `trl env` prints it plus lze-trl's own lines.

```bash
lze-trl env
```

TRL's block (platform, Python, TRL, PyTorch, accelerators, Transformers, Accelerate and its config, Datasets, HF Hub,
bitsandbytes, DeepSpeed, Liger-Kernel, PEFT, vLLM) comes from `trl env`'s own function; lze-trl adds its version (with
the git commit of a clone), the TRL and transformers versions it is tested with (and whether the installed ones are),
the versions of its optional dependencies that TRL does not list (math-verify, wandb), and
the CPU threads PyTorch uses against the CPUs the machine has.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from importlib.metadata import PackageNotFoundError, version


def installed_version(distribution: str) -> str:
    """The installed version of `distribution` (e.g. `"math-verify"`), or `"not installed"`."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "not installed"


def lze_env() -> dict[str, str]:
    """lze-trl's lines of `lze-trl env`, by label: its version, math-verify, wandb, and the CPU threads."""
    from trl.scripts.utils import get_git_commit_hash

    from lze_trl import __version__
    from lze_trl.common.coupling import SUPPORTED, installed, unsupported
    from lze_trl.common.engines import thread_policy

    commit = get_git_commit_hash("lze_trl")
    tested = {p: "tested" if unsupported(p, r, installed(p)) is None else "NOT tested" for p, r in SUPPORTED.items()}
    return {
        "lze-trl version": f"{__version__}+{commit[:7]}" if commit and not commit.startswith("Error") else __version__,
        **{f"{p} versions lze-trl is tested with": f"{r} (installed: {tested[p]})" for p, r in SUPPORTED.items()},
        "math-verify version": installed_version("math-verify"),
        "wandb version": installed_version("wandb"),
        "torch threads lze-trl runs on": "{} ({})".format(*thread_policy()),
        "CPUs (os.cpu_count())": str(os.cpu_count()),
    }


def main(argv: list[str]) -> int:
    from trl.scripts.env import print_env

    argparse.ArgumentParser(prog="lze-trl env", description=__doc__.split("\n\n")[0]).parse_args(argv)  # --help

    trl_block = io.StringIO()
    with contextlib.redirect_stdout(trl_block):  # one block to copy: TRL's lines, then ours
        print_env()
    ours = "\n".join(f"- {label}: {value}" for label, value in lze_env().items())
    print(f"{trl_block.getvalue().rstrip()}\n{ours}\n")
    return 0
