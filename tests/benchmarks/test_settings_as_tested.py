"""Every pruning setting string a user is told to try is the configuration the committed studies ran (issue #82)."""

import re
from pathlib import Path

from benchmarks.smollm2_pruning.run import PRUNING
from lze_trl import LZEGRPOConfig
from lze_trl.commands import advise


ROOT = Path(__file__).resolve().parents[2]


def differing() -> dict:
    """The studies' pruning settings (`PRUNING`, which the addition, unsolved-side, epoch-exploration, smaller-batch
    and dead-filter studies run) that differ from the config's defaults."""
    defaults = LZEGRPOConfig(output_dir="unused", report_to="none", use_cpu=True)
    return {k: v for k, v in PRUNING.items() if getattr(defaults, k) != v}


def test_advise_names_the_studies_pruning_configuration():
    assert advise.PRUNE_SETTINGS == ", ".join(f"{k}={v!r}".replace("'", '"') for k, v in differing().items())


def test_the_readme_turn_on_row_names_every_setting_the_studies_changed():
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| forward pruning on both sides (`"))
    for key, value in differing().items():
        shown = repr(value).replace("'", '"')
        assert re.search(rf"{key}={re.escape(shown)}(?![\w.])", row), key
