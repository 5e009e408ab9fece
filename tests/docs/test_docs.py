"""Docs that cannot rot: every Python block of the README and of `docs/` runs, the generated pages are up to date, the
metrics page lists what runs log, and every `lze-trl` / `python benchmarks/...` command shown accepts its flags.

A block that needs a GPU or the Hub is marked with an HTML comment on the line before it:
`<!-- docs-test: substitute ... -->` runs it with the tiny model and local data substituted (see `SUBSTITUTIONS`),
`<!-- docs-test: skip: <reason> -->` skips it with the reason.
"""

from __future__ import annotations

import inspect
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_cli_grpo import CHAT_TEMPLATE
from testing_utils import logged, make_trainer, prompt_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer


ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "source").glob("*.md"))]
COMMAND_PAGES = [*PAGES, ROOT / "BENCHMARKS.md", ROOT / "recipes" / "README.md"]
BLOCK = re.compile(r"(?:<!-- docs-test: (?P<mark>[^\n]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```", re.S)
# What a "substitute" block runs with on a CPU, offline: the tiny model, the local GSM8K fixture, one short step
SUBSTITUTIONS = {
    '"Qwen/Qwen2.5-Math-1.5B"': "TINY_MODEL",
    '"Qwen/Qwen2.5-0.5B-Instruct"': "TINY_MODEL",
    'output_dir="my-run",': 'output_dir="my-run", bf16=False, use_cpu=True, max_completion_length=8,',
    'load_math_dataset("gsm8k")': 'load_math_dataset("gsm8k", GSM8K_FIXTURE)',
    "max_steps=200": "max_steps=1",
    "bf16=True": "bf16=False, use_cpu=True",
    "use_vllm=True": "use_vllm=False",
    "max_completion_length=1024": "max_completion_length=8",
    "gradient_accumulation_steps=8": "gradient_accumulation_steps=1",
    'output_dir="out",': 'output_dir="out", bf16=False, use_cpu=True,',
    '"outputs/cpu-carries"': "SHIPPED_MODEL",  # what the CPU recipe trains from, with its tokenizer
    "load_smollm2()": "TINY_CHAT_MODEL()",  # the tiny model with a chat template, for SmolLM2-135M
}


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """`(mark, language, code)` of every fenced block of a page."""
    return [(m["mark"] or "", m["lang"], m["code"]) for m in BLOCK.finditer(page.read_text())]


PYTHON = [
    pytest.param(page, i, mark, code, id=f"{page.relative_to(ROOT)}#{i}")
    for page in PAGES
    for i, (mark, lang, code) in enumerate(blocks(page))
    if lang in ("python", "py")
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    from vllm_cpu import save_tiny_model

    path = tmp_path_factory.mktemp("docs-model")
    save_tiny_model(path, chat_template=CHAT_TEMPLATE, max_position_embeddings=1024)
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("page, index, mark, code", PYTHON)
def test_every_python_block_runs(page, index, mark, code, tmp_path, tiny_model, monkeypatch):
    if mark.startswith("skip:"):
        pytest.skip(mark[len("skip:") :].strip())
    if mark.startswith("substitute"):
        for old, new in SUBSTITUTIONS.items():
            code = code.replace(old, new)
        assert "Qwen/" not in code, "a Hub model is left in a substituted block: extend SUBSTITUTIONS"
    elif mark:
        raise AssertionError(f"unknown docs-test mark {mark!r}")
    monkeypatch.chdir(tmp_path)  # blocks write their output_dir into the working directory
    monkeypatch.syspath_prepend(str(ROOT))  # blocks may import benchmarks.*
    namespace = {
        "__name__": "__docs__",
        "TINY_MODEL": tiny_model,
        "SHIPPED_MODEL": str(
            next((ROOT / "examples" / "lze_examples" / "demo" / "weights").glob("*/tokenizer.json")).parent
        ),
        "TINY_CHAT_MODEL": lambda: (
            AutoModelForCausalLM.from_pretrained(tiny_model),
            AutoTokenizer.from_pretrained(tiny_model),
        ),
        "GSM8K_FIXTURE": str(ROOT / "tests" / "fixtures" / "math" / "gsm8k.jsonl"),
    }
    exec(compile(code, f"{page.name}#{index}", "exec"), namespace)


def test_the_generated_pages_are_up_to_date():
    result = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


# The build of `make docs` (Makefile): Hugging Face's doc-builder, as TRL's docs are built, without `--html` (that
# needs doc-builder's SvelteKit kit, which its package does not ship, and npm packages): the MDX pages, with every
# [[autodoc]] directive and [`Name`] link resolved against the installed `lze_trl`.
DOC_BUILDER = [str(Path(sys.executable).with_name("doc-builder")), "build", "lze_trl", "docs/source"]
DOC_BUILDER_FLAGS = ["--version", "main", "--version_tag_suffix", ""]
AUTODOC = re.compile(r"^\[\[autodoc\]\] (\S+)$", re.M)


def plain(text: str) -> str:
    """Text without Markdown links and code marks, to compare a docstring with its rendering."""
    return re.sub(r"[\[\]`~]", "", re.sub(r"\]\([^)]*\)", "", text))


@pytest.mark.slow
def test_the_docs_build_with_doc_builder(tmp_path):
    result = subprocess.run(
        [*DOC_BUILDER, "--build_dir", str(tmp_path), *DOC_BUILDER_FLAGS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    built = tmp_path / "lze_trl" / "main" / "en"
    toc = yaml.safe_load((ROOT / "docs" / "source" / "_toctree.yml").read_text())
    local = {page["local"] for section in toc for page in section["sections"]}
    assert {p.stem for p in built.glob("*.mdx")} == local
    import lze_trl

    documented = set()
    for page in sorted((ROOT / "docs" / "source").glob("*.md")):
        rendered = (built / f"{page.stem}.mdx").read_text()
        assert "[[autodoc]]" not in rendered, f"{page.name}: an [[autodoc]] directive was left unresolved"
        for name in AUTODOC.findall(page.read_text()):
            documented.add(name)
            assert f"<anchor>lze_trl.{name}</anchor>" in rendered, f"{page.name}: [[autodoc]] {name} not rendered"
            summary = plain(inspect.getdoc(getattr(lze_trl, name)).split("\n\n")[0]).split("\n")[0]
            assert summary in plain(rendered), f"{page.name}: the docstring of {name} is not on the page"
    assert {"LZEGRPOTrainer", "LZEGRPOConfig"} <= documented, "docs/source/api.md lost the trainer or the config"


def test_every_page_of_the_docs_is_in_the_table_of_contents():
    toc = (ROOT / "docs" / "source" / "_toctree.yml").read_text()
    local = set(re.findall(r"local: (\S+)", toc))
    assert local == {p.stem for p in (ROOT / "docs" / "source").glob("*.md")}


@pytest.mark.slow
def test_the_metrics_page_lists_every_metric_runs_log(tmp_path):
    page = (ROOT / "docs" / "source" / "metrics.md").read_text()
    documented = set(re.findall(r"^\| `(lze/[a-z_/]+)` \|", page, re.M))
    logged_keys = set()
    for i, overrides in enumerate(
        [
            dict(
                prune_solved=True,
                prune_solved_after=1,
                prune_unsolved=True,
                prune_exploration="adaptive",
                per_device_train_batch_size=16,
                max_steps=12,
            ),  # fmt: skip
            dict(shadow=True, per_device_train_batch_size=16, max_steps=8),
            dict(prune_solved=True, prune_solved_after=1, prune_unsolved=True, prune_refill=False, max_steps=12),
        ]
    ):
        trainer = make_trainer(tmp_path / str(i), dataset=prompt_dataset(16), **{"max_steps": 4, **overrides})
        trainer.train()
        logged_keys |= {k for e in trainer.state.log_history for k in e if k.startswith("lze/")}
    assert logged(trainer, "lze/groups_generated")  # the last run is skip mode's
    assert logged_keys - documented == set(), "metrics logged but not documented in docs/source/metrics.md"
    assert documented - logged_keys == set(), "metrics documented but logged by neither run"


# ----------------------------------------------------------------------------------------------- commands
STARTS = ("lze-trl ", "python benchmarks/", ".venv-vllm/bin/python benchmarks/")


def shown_commands() -> list[str]:
    """
    Every `lze-trl ...` and `python benchmarks/...` command of the pages' shell blocks and inline code, one line each
    (continuations joined, cut at `&`, `;` and `|`). A shell block marked `<!-- docs-test: skip: <reason> -->` (a
    command of the past, kept as it was run) is left out.
    """
    found = []
    for page in COMMAND_PAGES:
        text = page.read_text()
        for mark, lang, code in blocks(page):
            if lang in ("bash", "sh", "shell", "") and not mark.startswith("skip:"):
                for line in code.replace("\\\n", " ").splitlines():
                    line = line.split(" #")[0]
                    for start in STARTS:
                        if start in line:
                            found.append(line[line.index(start) :])
        found += [m for m in re.findall(r"`([^`]+)`", text) if m.startswith(STARTS) and " " in m]
    commands = {re.split(r" & | && |;| \| ", " ".join(c.split()))[0] for c in found}
    return sorted(c for c in commands if len(c.split()) > 1)


def command_and_flags(command: str) -> tuple[list[str], list[str]]:
    """The command to ask `--help` of (program, script, subcommand) and the `--flags` the shown command passes."""
    words = shlex.split(command.replace("$", "X").replace("{", "").replace("}", ""))
    if words[0] == "lze-trl":
        program = [sys.executable, "-m", "lze_trl.cli", words[1]]
    else:
        script = words[1]
        program = [sys.executable, str(ROOT / script)]
        subcommand = words[2] if len(words) > 2 else ""
        if script.endswith("bench.py") and subcommand and not subcommand.startswith("-") and "," not in subcommand:
            program.append(subcommand)
    flags = sorted({w.split("=")[0] for w in words if w.startswith("--")})
    return program, flags


@pytest.mark.slow
def test_every_shown_command_accepts_its_flags():
    commands = shown_commands()
    assert any(c.startswith("lze-trl grpo") for c in commands) and any("bench.py train" in c for c in commands)
    helps: dict[tuple, str] = {}
    problems = []
    for command in commands:
        program, flags = command_and_flags(command)
        key = tuple(program)
        if key not in helps:
            result = subprocess.run([*program, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=300)
            helps[key] = result.stdout if result.returncode == 0 else f"FAILED {result.stderr[-500:]}"
        if helps[key].startswith("FAILED"):
            problems.append(f"{command}: --help failed: {helps[key]}")
            continue
        accepted = set(re.findall(r"--[A-Za-z][\w-]*", helps[key]))
        if program[:3] == [sys.executable, "-m", "lze_trl.cli"]:
            accepted.add("--config")  # TRL's TrlParser reads it before argparse; --help does not list it
            words = shlex.split(command)
            if "--config" in words and not (ROOT / words[words.index("--config") + 1]).is_file():
                problems.append(f"{command}: no such config file")
        unknown = [f for f in flags if f not in accepted and f.replace("-", "_") not in accepted]
        if unknown:
            problems.append(f"{command}: unknown flags {unknown}")
    assert not problems, "\n".join(problems)
