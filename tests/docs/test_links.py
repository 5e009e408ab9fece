"""Every relative link and image of the repository's Markdown resolves on GitHub, where the docs are read.

A link or image whose target has no scheme (`probe.md`, `../BENCHMARKS.md#5-probe`, `#the-energy`, an `<img src>`)
must name a file or folder of the repository that git does not ignore, and its `#anchor` a heading of the target as
GitHub slugs headings (or an `id`/`name` of its HTML; `#L12` or `#L12-L20` for a line of a file that is not
Markdown). The Markdown is parsed with markdown-it-py (CommonMark, with GitHub's tables and strikethrough), so code
spans and fenced blocks are not links; the HTML it holds with Python's `html.parser`. External links (`https:`,
`mailto:`) are not checked: the tests run offline.

The pages of `docs/source` link each other as `probe.md`, not `probe`: GitHub resolves only the former, and
doc-builder's MDX build (`make docs`) copies links as they are written.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import unicodedata
from dataclasses import dataclass
from functools import cache
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt


ROOT = Path(__file__).resolve().parents[2]
SKIPPED = ("tests/fixtures/",)  # test inputs, not pages anyone reads
SKIPPED_DIRS = {".git", "build", "dist", "node_modules", "__pycache__", "wandb", "outputs"}  # without git only
MARKDOWN_SUFFIXES = (".md", ".markdown")
LINE_ANCHOR = re.compile(r"L(\d+)(?:C\d+)?(?:-L(\d+)(?:C\d+)?)?")


@dataclass(frozen=True)
class Link:
    """A link or image of a Markdown page: its target as written and the page's line it is on (from 1)."""

    target: str
    line: int


class _HTMLTargets(HTMLParser):
    """The `href`/`src` targets and the `id`/`name` anchors of a piece of HTML."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.targets: list[str] = []
        self.anchors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if (tag, name) in {("a", "href"), ("img", "src"), ("source", "srcset")}:
                self.targets.append(value.split()[0] if name == "srcset" else value)
            elif name == "id" or (tag == "a" and name == "name"):
                self.anchors.append(value)

    handle_startendtag = handle_starttag


def _html(content: str) -> _HTMLTargets:
    parser = _HTMLTargets()
    parser.feed(content)
    parser.close()
    return parser


def _parser() -> MarkdownIt:
    """CommonMark with the GitHub extensions that can hold links (tables; strikethrough)."""
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def links(text: str) -> list[Link]:
    """
    The links and images of a Markdown text, inline, reference-style and in raw HTML; not those in code.

    Args:
        text (`str`):
            The Markdown text.

    Returns:
        `list[Link]`: Every `href` of a link and `src` of an image, in the order they appear.
    """
    found = []
    for block in _parser().parse(text):
        line = block.map[0] + 1 if block.map else 0
        if block.type == "html_block":
            found += [Link(target, line) for target in _html(block.content).targets]
        for token in block.children or []:
            if token.type in ("softbreak", "hardbreak"):
                line += 1
            elif token.type == "link_open":
                found.append(Link(str(token.attrGet("href")), line))
            elif token.type == "image":
                found.append(Link(str(token.attrGet("src")), line))
            elif token.type == "html_inline":
                found += [Link(target, line) for target in _html(token.content).targets]
    return found


def github_slug(heading: str) -> str:
    """
    The anchor GitHub gives a heading of this text, without the duplicate suffix (as github-slugger makes it).

    Lowercase; every character that is not a letter, a mark, a digit, a connector (`_`), a hyphen or a space dropped;
    each space a hyphen.

    Example:

    ```python
    >>> github_slug("5. Probe-then-complete (the `probe` arm)")
    '5-probe-then-complete-the-probe-arm'
    ```
    """
    return "".join(c for c in heading.lower() if _in_slug(c)).replace(" ", "-")


def _in_slug(char: str) -> bool:
    """Whether GitHub keeps a character of a heading in its anchor: a letter, mark, digit, `_`, `-` or space."""
    category = unicodedata.category(char)
    return char in " -" or category[0] in "LMN" or category == "Pc"


def anchors(text: str) -> set[str]:
    """
    The `#anchors` GitHub gives a Markdown text: one per heading (the second of a slug gets `-1`, the third `-2`),
    plus the `id` and `name` attributes of its HTML.

    Args:
        text (`str`):
            The Markdown text.

    Returns:
        `set[str]`: The anchors, without their `#`.
    """
    found: set[str] = set()
    occurrences: dict[str, int] = {}
    tokens = _parser().parse(text)
    for i, token in enumerate(tokens):
        if token.type == "html_block":
            found.update(_html(token.content).anchors)
        for child in token.children or []:
            if child.type == "html_inline":
                found.update(_html(child.content).anchors)
        if token.type != "heading_open":
            continue
        # The heading's text as rendered: text and code spans, without markup or HTML tags
        words = [c.content for c in tokens[i + 1].children or [] if c.type in ("text", "code_inline")]
        slug = github_slug("".join(words).strip())
        unique = slug
        while unique in occurrences:  # github-slugger's rule: foo, foo-1, foo-2 (and a later literal foo-1 is foo-1-1)
            occurrences[slug] += 1
            unique = f"{slug}-{occurrences[slug]}"
        occurrences[unique] = 0
        found.add(unique)
    return found


def repository_files(root: Path) -> set[str]:
    """
    The files of the repository at `root` that GitHub would show, as `/`-separated paths relative to `root`: those
    git tracks or would track (not ignored). Without git (an unpacked archive), every file outside the folders of
    `SKIPPED_DIRS` and of virtual environments.
    """
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        return {path for path in listed.split("\0") if path and (root / path).exists()}
    except (OSError, subprocess.CalledProcessError):
        files = set()
        for folder, dirs, names in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".venv")]
            files.update((Path(folder) / name).relative_to(root).as_posix() for name in names)
        return files


def broken_links(page: str, root: Path, files: set[str]) -> list[str]:
    """
    The relative links and images of a Markdown page that do not resolve on GitHub.

    Args:
        page (`str`):
            The page, relative to `root` (`docs/source/index.md`).
        root (`Path`):
            The repository's root.
        files (`set[str]`):
            The repository's files relative to `root` ([`repository_files`]).

    Returns:
        `list[str]`: One `page:line: target: why` per broken link, empty when every link resolves.
    """
    folders = {str(parent) for path in files for parent in PurePosixPath(path).parents}
    problems = []
    for link in links((root / page).read_text(encoding="utf-8")):
        parts = urlsplit(link.target)
        if parts.scheme or parts.netloc:
            continue  # https:, mailto:, //host: not checked offline
        path, anchor = unquote(parts.path), unquote(parts.fragment)
        where = f"{page}:{link.line}: {link.target}"
        if not path:
            target = page
        elif path.startswith("/"):  # GitHub reads `/path` from the repository's root
            target = posixpath.normpath(path[1:])
        else:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(page), path))
        if target == ".." or target.startswith("../"):
            problems.append(f"{where}: points outside the repository")
        elif target in folders:
            if anchor:
                problems.append(f"{where}: {target} is a folder: it has no anchors")
        elif target not in files:
            problems.append(f"{where}: no such file or folder")
        elif not anchor:
            continue
        elif target.endswith(MARKDOWN_SUFFIXES):
            if anchor not in _anchors_of(root / target):
                problems.append(f"{where}: no heading of {target} has the anchor #{anchor}")
        elif not (line := LINE_ANCHOR.fullmatch(anchor)):
            problems.append(f"{where}: {target} is not Markdown: only #L<line> anchors resolve")
        else:
            count = len((root / target).read_text(encoding="utf-8", errors="replace").splitlines())
            if max(int(n) for n in line.groups() if n) > count:
                problems.append(f"{where}: {target} has {count} lines")
    return problems


@cache
def _anchors_of(path: Path) -> frozenset[str]:
    return frozenset(anchors(path.read_text(encoding="utf-8")))


FILES = repository_files(ROOT)
PAGES = sorted(p for p in FILES if p.endswith(MARKDOWN_SUFFIXES) and not p.startswith(SKIPPED))


def test_the_pages_people_read_are_checked():
    for page in ["README.md", "BENCHMARKS.md", "benchmarks/README.md", "recipes/README.md", "docs/source/index.md"]:
        assert page in PAGES
    assert not [p for p in PAGES if p.startswith((".venv", "build/", "tests/fixtures/"))]


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    problems = broken_links(page, ROOT, FILES)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_docs_pages_link_each_other_with_their_md_suffix():
    """`[Generation in rounds](probe)` works on doc-builder's site only; GitHub needs `probe.md`."""
    pages = {p.stem for p in (ROOT / "docs" / "source").glob("*.md")}
    bare = [
        f"docs/source/{page.name}:{link.line}: {link.target}"
        for page in sorted((ROOT / "docs" / "source").glob("*.md"))
        for link in links(page.read_text(encoding="utf-8"))
        if link.target.split("#")[0] in pages
    ]
    assert not bare, "links without .md:\n" + "\n".join(bare)


def test_the_checker_finds_broken_links(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "plot.png").write_bytes(b"")
    (tmp_path / "script.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## 5. Probe-then-complete (the `probe` arm)\n\n## Setup\n\n## Setup\n\n"
        '<a id="custom"></a>\n\n### Ünïcode & *emphasis*_x\n'
    )
    (tmp_path / "index.md").write_text(
        "# Index\n\n"
        "- [good](docs/guide.md) [good](docs/guide.md#5-probe-then-complete-the-probe-arm)\n"
        "  [good](docs/guide.md#setup-1)\n"
        "- [good](docs/guide.md#custom) [good](docs/guide.md#ünïcode--emphasis_x) [good](#index) [good](docs/)\n"
        "- ![good](plot.png) [good](script.py#L2) [good](https://example.com/missing.md) [good](mailto:a@b.c)\n"
        "- [bare](docs/guide) [anchor](docs/guide.md#setup-2) [self](#nowhere) ![image](missing.png)\n"
        '- [line](script.py#L3) [up](../outside.md) [named][ref] <img src="gone.svg"> [not a line](script.py#top)\n'
        "\n"
        "Not links: `[code](missing.md)` and\n\n"
        "```md\n[fenced](missing.md)\n```\n\n"
        "    [indented](missing.md)\n\n"
        "[ref]: docs/guide.md#no-such-heading\n"
    )
    files = {"index.md", "docs/guide.md", "plot.png", "script.py"}
    problems = broken_links("index.md", tmp_path, files)
    assert [p.split(": ")[1] for p in problems] == [
        "docs/guide",
        "docs/guide.md#setup-2",
        "#nowhere",
        "missing.png",
        "script.py#L3",
        "../outside.md",
        "docs/guide.md#no-such-heading",
        "gone.svg",
        "script.py#top",
    ], problems
    assert problems[0] == "index.md:7: docs/guide: no such file or folder"
    # A file git ignores is not on GitHub: a link to it is broken although it exists here
    assert broken_links("index.md", tmp_path, files - {"plot.png"})[0].startswith("index.md:6: plot.png: no such")
