"""BM25 retrieval sanity: the matching skill ranks first; ties and input order are deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillgate_core.skills import build_retriever, load_library, read_index, tokenize, write_index

DESCRIPTIONS = {
    "pdf-merge": "Merge several PDF documents into one file, keeping bookmarks.",
    "csv-clean": "Clean CSV tables: strip whitespace, drop duplicate rows, normalise dates.",
    "git-bisect": "Find the commit that introduced a regression with git bisect.",
    "image-resize": "Resize and crop PNG or JPEG images to a target resolution.",
    "log-parse": "Parse web server access logs and count requests per status code.",
}


@pytest.fixture
def library(make_skill, tmp_path: Path):
    for name, text in DESCRIPTIONS.items():
        make_skill(name, text, body=f"# {name}\nzebra giraffe\n" if name == "image-resize" else "# steps\n")
    return load_library(tmp_path / "lib")


def test_tokenize() -> None:
    assert tokenize("PDF-merge, v2: Hello_World!") == ["pdf", "merge", "v2", "hello", "world"]


def test_matching_skill_ranks_first(library) -> None:
    retriever = build_retriever(library)
    task = "The workspace has a sales.csv with duplicate rows and messy dates; clean it."
    assert retriever.top_k(task, 1)[0].name == "csv-clean"
    assert retriever.top_k("find which git commit introduced the regression", 1)[0].name == "git-bisect"
    ranked = retriever.rank(task)
    assert [r.score for r in ranked] == sorted((r.score for r in ranked), reverse=True)
    assert ranked[0].score > ranked[1].score


def test_name_words_count(library) -> None:
    assert build_retriever(library).top_k("bisect", 1)[0].name == "git-bisect"


def test_ties_break_by_name_and_exclusion(library) -> None:
    retriever = build_retriever(library)
    assert [r.name for r in retriever.rank("no shared words here qqq")] == sorted(DESCRIPTIONS)
    assert all(r.score == 0.0 for r in retriever.rank("qqq"))
    top = retriever.top_k("merge PDF documents", 2, exclude={"pdf-merge"})
    assert "pdf-merge" not in [r.name for r in top] and len(top) == 2
    assert retriever.top_k("x", 0) == []
    with pytest.raises(ValueError):
        retriever.top_k("x", -1)


def test_same_ranking_for_any_input_order(library) -> None:
    query = "clean duplicate rows in a table and parse logs"
    forward = build_retriever(library).rank(query)
    backward = build_retriever(tuple(reversed(library))).rank(query)
    assert forward == backward


def test_body_is_optional(library) -> None:
    assert build_retriever(library).rank("zebra giraffe")[0].score == 0.0
    with_body = build_retriever(library, include_body=True)
    assert with_body.include_body and with_body.top_k("zebra giraffe", 1)[0].name == "image-resize"


def test_index_frame_library(library, tmp_path: Path) -> None:
    frame = read_index(write_index(tmp_path / "lib", tmp_path / "index.parquet"))
    from_index = build_retriever(frame)
    query = "resize a JPEG image"
    assert from_index.rank(query) == build_retriever(library).rank(query)
    assert from_index.descriptions["pdf-merge"] == DESCRIPTIONS["pdf-merge"]
    with pytest.raises(ValueError, match="include_body"):
        build_retriever(frame, include_body=True)


def test_empty_or_duplicate_library_is_refused(library) -> None:
    with pytest.raises(ValueError, match="empty"):
        build_retriever([])
    with pytest.raises(ValueError, match="duplicate"):
        build_retriever([library[0], library[0]])
