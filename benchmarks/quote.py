"""Re-quotes BENCHMARKS.md's tables from a report they name, after the report was rebuilt from new runs:

    python benchmarks/quote.py benchmarks/results/smollm2_revisits/report.md           # rewrites its quotes
    python benchmarks/quote.py benchmarks/results/smollm2_revisits/report.md --check   # exit 1 if one differs

A table of the page names its source on the line before it, `<!-- from PATH[, "HEADING"], table N -->`, and quotes
some of that table's columns (by name, a repeated name in order) and rows; `tests/benchmarks/test_benchmarks_page.py`
checks that every quoted row is a row of the source. Re-quoting the tables of one source keeps the page's columns and
rows, each row matched by its first cell (the arm, the regime), or its first cells where one is not unique in the
source (an arm and its side; it refuses when the page lacks them), and takes every cell from the source; it adds no
row. The prose around the tables is not touched: its numbers are checked by the same
test, and the writer updates them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "BENCHMARKS.md"
SOURCE = re.compile(r'<!-- from (?P<path>\S+?)(?:, "(?P<heading>[^"]+)")?, table (?P<index>\d+) -->\n+')


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def table_lines(text: str, start: int = 0) -> tuple[int, int] | None:
    """The span of the first Markdown table of `text` from `start` (its header, separator and rows)."""
    lines = re.finditer(r"^\|.*$", text[start:], flags=re.M)
    first = next(lines, None)
    if first is None:
        return None
    begin = end = start + first.start()
    for line in re.finditer(r"^.*$", text[begin:], flags=re.M):
        if not line.group(0).startswith("|"):
            break
        end = begin + line.end()
    return begin, end


def source_table(match: re.Match) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the table a `<!-- from ... -->` line names."""
    text = (ROOT / match["path"]).read_text()
    if match["heading"]:
        text = text[re.search(rf"^{re.escape(match['heading'])}", text, flags=re.M).start() :]
    start = 0
    for _ in range(int(match["index"])):
        begin, end = table_lines(text, start)
        start = end
    lines = text[begin:end].splitlines()
    return cells(lines[0]), [cells(line) for line in lines[2:]]


def requote(page_table: str, source: tuple[list[str], list[list[str]]]) -> str:
    """`page_table` (Markdown) with its columns and rows taken from `source`, matched by name and by the source's
    leading cells: the first, or as many as make a row unique (an arm and its side)."""
    lines = page_table.splitlines()
    header = cells(lines[0])
    source_header, source_rows = source
    named = [(name, header[:i].count(name)) for i, name in enumerate(header)]
    where = {(name, source_header[:i].count(name)): i for i, name in enumerate(source_header)}
    width = next(
        (k for k in range(1, len(source_header) + 1) if len({tuple(r[:k]) for r in source_rows}) == len(source_rows)),
        None,
    )
    if width is None or any(name not in header for name in source_header[:width]):
        raise ValueError(f"the page's columns do not tell the source's rows apart: {[row[:2] for row in source_rows]}")
    by_key = {tuple(row[:width]): row for row in source_rows}
    key_columns = [header.index(name) for name in source_header[:width]]
    keys = [tuple(cells(line)[i] for i in key_columns) for line in lines[2:]]
    rows = ["| " + " | ".join(by_key[k][where[c]] for c in named) + " |" for k in keys]
    return "\n".join([lines[0], lines[1], *rows])


def requoted(text: str, path: str) -> str:
    """The page `text` with every table quoted from the report `path` re-quoted from it."""
    out, position = [], 0
    for match in SOURCE.finditer(text):
        if match["path"] != path:
            continue
        begin, end = table_lines(text, match.end())
        out += [text[position:begin], requote(text[begin:end], source_table(match))]
        position = end
    return "".join(out) + text[position:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the report, as the page names it (benchmarks/results/.../report.md)")
    parser.add_argument("--check", action="store_true", help="fail if a quoted table differs from its report")
    args = parser.parse_args(argv)
    text = PAGE.read_text()
    new = requoted(text, args.path)
    if args.check:
        print("every quoted table is its report's" if new == text else "a quoted table differs from its report")
        return 0 if new == text else 1
    PAGE.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
