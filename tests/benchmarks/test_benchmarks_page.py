"""BENCHMARKS.md quotes only what the committed reports say (no training, no vLLM).

Every table of the page names its source in the HTML comment on the line before it,
`<!-- from PATH[, "HEADING"], table N -->`: the N-th table (from 1) of the report `PATH` after the line that starts
with `HEADING` (or from the report's start). Each column of the page's table is a column of that table (a name that
appears twice there is read in order), and each row of the page's table is one of its rows, cell for cell. Every
decimal number of a section's prose is one of the section's own tables (so a number the prose quotes is one the
section shows, and one the report does not print fails). The reports are in turn rebuilt from
the raw results in git by their own tests: `tests/benchmarks/test_adaptive_report.py`,
`tests/benchmarks/test_agentic_report.py`, `tests/benchmarks/test_same_numbers_report.py`,
`tests/benchmarks/test_bench_tables.py`, `tests/benchmarks/test_first_contact.py`, and the step-time table by
`tests/benchmarks/test_vllm_step_table.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "BENCHMARKS.md"
SOURCE = re.compile(r'<!-- from (?P<path>\S+?)(?:, "(?P<heading>[^"]+)")?, table (?P<index>\d+) -->')
NUMBER = re.compile(r"-?\d+\.\d+")  # `+0.016` reads `0.016` and `0.905x` reads `0.905`, as the reports write them
VLLM_STEP_TABLE = ROOT / "benchmarks" / "results" / "vllm_cpu" / "2026-11-24_probe.json"
VLLM_HEADER = "| run | rollouts | s/step | generation | scoring | update | measured / GRPO |"


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """The Markdown tables of `text` in order, each as (header cells, rows of cells)."""
    found = []
    for block in re.split(r"\n(?!\|)", text):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if len(lines) >= 2 and set(lines[1].replace("|", "").strip()) <= set("-: "):
            found.append((cells(lines[0]), [cells(line) for line in lines[2:]]))
    return found


def source_table(path: str, heading: str | None, index: int) -> tuple[list[str], list[list[str]]]:
    text = (ROOT / path).read_text()
    if heading is not None:
        starts = [m.start() for m in re.finditer(rf"^{re.escape(heading)}", text, re.M)]
        assert len(starts) == 1, f"{path}: {len(starts)} lines start with {heading!r}"
        text = text[starts[0] :]
    return tables(text)[index - 1]


def columns(header: list[str]) -> list[tuple[str, int]]:
    """Each column as (name, how many earlier columns share its name)."""
    return [(name, header[:i].count(name)) for i, name in enumerate(header)]


def quoted_rows(page_table, source) -> list[list[str]]:
    """The page table's rows that are not rows of `source` on the page's columns (empty when it quotes it exactly)."""
    header, rows = page_table
    source_header, source_rows = source
    where = {column: i for i, column in enumerate(columns(source_header))}
    missing = [name for name in columns(header) if name not in where]
    assert not missing, f"columns not in the source table: {missing}"
    picked = [[row[where[c]] for c in columns(header)] for row in source_rows]
    return [row for row in rows if row not in picked]


def page_sections() -> dict[str, str]:
    """The page's `## ` sections by heading."""
    parts = re.split(r"^(## .*)$", PAGE.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def quoted_tables(section: str) -> list[tuple[re.Match, tuple[list[str], list[list[str]]]]]:
    """Each table of `section` after a `<!-- from ... -->` line, with that line's match."""
    found = []
    for match in SOURCE.finditer(section):
        following = section[match.end() :].lstrip("\n")
        assert following.startswith("|"), f"no table right after {match.group(0)}"
        found.append((match, tables(following)[0]))
    return found


def test_every_table_is_quoted_from_a_report():
    sections = page_sections()
    assert len(sections) >= 6
    for heading, section in sections.items():
        for match, table in quoted_tables(section):
            source = source_table(match["path"], match["heading"], int(match["index"]))
            assert quoted_rows(table, source) == [], (heading, match.group(0))
        # every table names its source, but the step-time table (checked by tests/benchmarks/test_vllm_step_table.py)
        assert len(tables(section)) == len(quoted_tables(section)) + section.count(VLLM_HEADER), heading


def source_numbers(section: str) -> set[str]:
    """The decimal numbers of the section's tables, each of which is checked against its report."""
    texts = [str(rows) for _, (_, rows) in quoted_tables(section)]
    if VLLM_HEADER in section:
        import json

        from benchmarks.bench_vllm_cpu import step_table

        texts.append(str(step_table(json.loads(VLLM_STEP_TABLE.read_text()))))
    return set(NUMBER.findall("\n".join(texts)))


def prose(section: str) -> str:
    """`section` without its tables, code blocks, inline code and source comments (whose numbers are checked otherwise,
    or are commands, settings and labels such as `selection_ratio=0.33`)."""
    section = re.sub(r"```.*?```", "", section, flags=re.S)
    section = re.sub(r"`[^`\n]*`", "", section)
    section = SOURCE.sub("", section)
    return "\n".join(line for line in section.splitlines() if not line.startswith("|"))


@pytest.mark.parametrize("heading", list(page_sections()))
def test_every_number_of_the_prose_is_a_number_of_the_section_s_reports(heading):
    section = page_sections()[heading]
    numbers = set(NUMBER.findall(prose(section)))
    assert numbers - source_numbers(section) == set()


def test_a_number_that_differs_is_caught():
    sections = page_sections()
    heading = next(h for h, s in sections.items() if quoted_tables(s))
    match, (header, rows) = quoted_tables(sections[heading])[0]
    source = source_table(match["path"], match["heading"], int(match["index"]))
    changed = [[*row[:-1], row[-1] + "1"] for row in rows]
    assert quoted_rows((header, changed), source) != []
    assert "0.1234" not in source_numbers(sections[heading])


def test_requoting_a_report_restores_its_quoted_tables():
    from benchmarks.quote import requoted

    path, text = "benchmarks/results/smollm2_revisits/report.md", PAGE.read_text()
    assert requoted(text, path) == text  # the committed page quotes the committed report
    row = next(line for line in text.splitlines() if line.startswith("| lze | 8 | "))  # the manipulation check's
    broken = text.replace(row, row.rsplit("|", 2)[0] + "| 0.999 |", 1)
    assert broken != text and requoted(broken, path) == text


def test_requoting_matches_a_row_by_its_leading_cells_where_the_first_repeats():
    from benchmarks.quote import requote

    source = (["arm", "side", "share"], [["a", "unsolved", "0.1"], ["a", "solved", "0.2"], ["b", "unsolved", "0.3"]])
    page = "| arm | side | share |\n|---|---|---|\n| a | solved | 0.9 |\n| b | unsolved | 0.3 |"
    assert requote(page, source).splitlines()[2:] == ["| a | solved | 0.2 |", "| b | unsolved | 0.3 |"]
    with pytest.raises(ValueError, match="do not tell the source's rows apart"):
        requote("| arm | share |\n|---|---|\n| a | 0.9 |", source)


def test_the_benchmarks_index_names_every_study_script_and_results_folder():
    # a reader finds each section's study from BENCHMARKS.md through benchmarks/README.md
    index = (ROOT / "benchmarks" / "README.md").read_text()
    skip = ("README.md", "results", "__init__.py", "__pycache__")
    here = [p.name for p in (ROOT / "benchmarks").iterdir() if p.name not in skip]
    results = [p.name for p in (ROOT / "benchmarks" / "results").iterdir() if p.is_dir()]
    assert [n for n in here if f"`{n}" not in index] == []
    folders = index[index.index("## benchmarks/results/") :]
    assert [n for n in results if f"`{n}/`" not in folders] == []
