"""The docs hold together: every relative link and every repository path a doc names resolves,
nothing cites a file outside the repository, and README.md links every doc in docs/ and the lab
notes' index (notes/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
NOTES = sorted((ROOT / "notes").glob("*.md"))
CHECKED = [ROOT / "README.md", ROOT / "bench" / "README.md", *DOCS, *NOTES]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# a repository path named in the text (`bench/x.py`, docs/y.md): top folder, then a file name
# with one of these endings; a trailing `:` or `.` of the sentence is not part of it
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:bench|tools|tests|py|web|workers|bundles|docs|notes|examples)/[\w./-]*?"
    r"\.(?:py|mjs|js|ts|json|html|md|css))(?![\w-])")
OUTSIDE = re.compile(r"(?<![\w.])(/tmp/|/work/|\.\./shared/)")


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("doc", CHECKED, ids=_name)
def test_relative_links_resolve(doc):
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http:, mailto:, an anchor on the same page
        file = target.split("#", 1)[0]
        if not (doc.parent / file).exists():
            broken.append(target)
    assert not broken, f"{_name(doc)}: links to files that do not exist: {broken}"


@pytest.mark.parametrize("doc", CHECKED, ids=_name)
def test_named_repository_paths_exist(doc):
    text = doc.read_text(encoding="utf-8")
    missing = sorted({p for p in REPO_PATH.findall(text) if not (ROOT / p).exists()})
    assert not missing, f"{_name(doc)}: names files that are not in the repository: {missing}"
    outside = sorted({m.group(0) + text[m.end():m.end() + 30].split()[0] for m in OUTSIDE.finditer(text)})
    assert not outside, f"{_name(doc)}: cites paths outside the repository: {outside}"


def test_readme_links_every_doc_and_the_notes():
    linked = {Path(t.split("#", 1)[0]).as_posix() for t in LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))}
    wanted = [_name(d) for d in DOCS] + ["notes/README.md"]
    unlinked = [w for w in wanted if w not in linked]
    assert not unlinked, f"README.md links none of: {unlinked} (add each to its Documentation list)"


def test_notes_index_lists_every_note():
    index = (ROOT / "notes" / "README.md").read_text(encoding="utf-8")
    unlisted = [n.name for n in NOTES if n.name != "README.md" and f"]({n.name})" not in index]
    assert not unlisted, f"notes/README.md does not list: {unlisted}"
