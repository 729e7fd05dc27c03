"""Slates: composition, seeded order, the shape rule, and the skills.json manifest."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from skillgate_core.skills import (
    Slate,
    SlateEntry,
    SlateError,
    build_retriever,
    build_slate,
    read_slate,
    skill_location,
    slate_problem,
    slate_seed,
    write_slate,
)

TOPICS = ["pdf", "csv", "git", "image", "log", "sql", "docker", "regex", "json", "yaml", "http", "cron"]
INSTRUCTION = "Convert the csv export to json and validate every csv row against the json schema."
ORACLE = "csv-to-json"
MISLEADING = ["csv-to-json-legacy", "csv-to-json-fast", "json-to-csv", "csv-split", "json-schema-gen"]


@pytest.fixture(scope="module")
def retriever():
    """A 90-skill library without files: retrieval only needs names and descriptions."""
    names, texts = [], []
    for i in range(78):
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 5 + 1) % len(TOPICS)]
        names.append(f"{a}-{b}-tool-{i}")
        texts.append(f"Work with {a} and {b} files, variant {i}.")
    for name in [ORACLE, *MISLEADING, "csv-validate", "json-validate", "csv-json-bridge", "schema-check",
                 "csv-lint", "json-pretty"]:
        names.append(name)
        texts.append(f"{name.replace('-', ' ')}: handles csv and json data and schemas.")
    return build_retriever(pl.DataFrame({"name": names, "description": texts}))


def make(retriever, split: str = "train", **overrides) -> Slate:
    kwargs = dict(task_id="task-0007", bench="procedural", split=split, instruction=INSTRUCTION,
                  oracle=ORACLE, misleading=MISLEADING, retriever=retriever)
    return build_slate(**{**kwargs, **overrides})


def test_seed_matches_an_independent_computation() -> None:
    expected = int(hashlib.sha256(b"slate-train-shuffle::procedural::task-0007").hexdigest()[:12], 16)
    assert slate_seed("procedural", "task-0007", "train") == expected == 40331637655429
    expected_eval = int(hashlib.sha256(b"slate-shuffle::procedural::task-0007").hexdigest()[:12], 16)
    assert slate_seed("procedural", "task-0007", "eval") == expected_eval == 9224099718001
    with pytest.raises(SlateError, match="split"):
        slate_seed("b", "t", "test")  # type: ignore[arg-type]


def test_composition(retriever) -> None:
    slate = make(retriever)
    assert slate_problem(slate) is None
    assert len(slate.entries) == 16 and len(set(slate.names)) == 16
    by_category: dict[str, list[str]] = {}
    for e in slate.entries:
        by_category.setdefault(e.category, []).append(e.name)
        assert e.location == f"/skills/{e.name}/SKILL.md"
        assert e.description == retriever.descriptions[e.name]
    assert by_category["oracle"] == [ORACLE] and slate.oracle == ORACLE
    assert sorted(by_category["misleading"]) == sorted(MISLEADING)
    ranking = [r.name for r in retriever.rank(INSTRUCTION, exclude={ORACLE, *MISLEADING})]
    assert sorted(by_category["relevant"]) == sorted(ranking[:5])
    assert not set(by_category["irrelevant"]) & set(ranking[:50])
    assert (slate.task_id, slate.bench, slate.split) == ("task-0007", "procedural", "train")
    assert slate.seed == slate_seed("procedural", "task-0007", "train")
    assert slate.category_of(ORACLE) == "oracle" and slate.category_of("nope") == "unadvertised"


def test_order_is_the_seeded_shuffle_of_the_canonical_list(retriever) -> None:
    """Rebuild the slate independently: ranking, seeded irrelevant draw, seeded shuffle."""
    ranking = [r.name for r in retriever.rank(INSTRUCTION, exclude={ORACLE, *MISLEADING})]
    draw_seed = int(hashlib.sha256(b"slate-irrelevant::procedural::task-0007").hexdigest()[:12], 16)
    irrelevant = random.Random(draw_seed).sample(sorted(ranking[50:]), 5)
    canonical = [ORACLE, *MISLEADING, *ranking[:5], *irrelevant]
    random.Random(40331637655429).shuffle(canonical)
    slate = make(retriever)
    assert list(slate.names) == canonical


def test_same_inputs_same_slate_and_train_eval_differ(retriever) -> None:
    assert make(retriever) == make(retriever)
    train, evaluation = make(retriever, "train"), make(retriever, "eval")
    assert train.names != evaluation.names
    assert sorted(train.names) == sorted(evaluation.names)
    assert make(retriever, task_id="task-0008").names != train.names


def test_build_errors(retriever) -> None:
    with pytest.raises(SlateError, match="not in the library"):
        make(retriever, oracle="missing-skill")
    with pytest.raises(SlateError, match="5 distinct misleading"):
        make(retriever, misleading=MISLEADING[:4])
    with pytest.raises(SlateError, match="5 distinct misleading"):
        make(retriever, misleading=[ORACLE, *MISLEADING[:4]])
    with pytest.raises(SlateError, match="too small"):
        make(retriever, irrelevant_outside_top=80)


def entries(*spec: tuple[str, int]) -> list[SlateEntry]:
    out = []
    for category, n in spec:
        out += [SlateEntry(f"{category}-{i}", category, "d") for i in range(n)]  # type: ignore[arg-type]
    return out


def test_slate_problem_reasons() -> None:
    good = entries(("oracle", 1), ("misleading", 5), ("relevant", 5), ("irrelevant", 5))
    assert slate_problem(good) is None
    assert "15 skills, expected 16" in slate_problem(good[:15])
    assert "repeats skill names ['oracle-0']" in slate_problem([*good[:15], good[0]])
    two_oracles = entries(("oracle", 2), ("misleading", 4), ("relevant", 5), ("irrelevant", 5))
    assert "categories" in slate_problem(two_oracles)
    lopsided = entries(("oracle", 1), ("misleading", 6), ("relevant", 4), ("irrelevant", 5))
    assert "categories" in slate_problem(lopsided)


def test_entry_checks() -> None:
    assert SlateEntry("a", "relevant", "d").location == skill_location("a") == "/skills/a/SKILL.md"
    with pytest.raises(SlateError, match="location"):
        SlateEntry("a", "relevant", "d", "/other/a/SKILL.md")
    with pytest.raises(SlateError, match="category"):
        SlateEntry("a", "unadvertised", "d")  # type: ignore[arg-type]


def test_manifest_round_trip(retriever, tmp_path: Path) -> None:
    slate = make(retriever, "eval")
    path = write_slate(slate, tmp_path / "task" / "skills.json")
    data = json.loads(path.read_text())
    assert set(data) == {"task_id", "bench", "split", "seed", "entries"}
    assert [e["name"] for e in data["entries"]] == list(slate.names)
    assert data["entries"][0] == {"name": slate.names[0], "category": slate.entries[0].category,
                                  "description": slate.entries[0].description,
                                  "location": f"/skills/{slate.names[0]}/SKILL.md"}
    assert read_slate(path) == slate
    assert Slate.from_manifest(slate.to_manifest()) == slate


def test_manifest_errors(retriever, tmp_path: Path) -> None:
    data = make(retriever).to_manifest()
    with pytest.raises(SlateError, match="missing key 'seed'"):
        Slate.from_manifest({k: v for k, v in data.items() if k != "seed"})
    with pytest.raises(SlateError, match="unknown key 'extra'"):
        Slate.from_manifest({**data, "extra": 1})
    with pytest.raises(SlateError, match="seed: expected an integer"):
        Slate.from_manifest({**data, "seed": "12"})
    with pytest.raises(SlateError, match="split"):
        Slate.from_manifest({**data, "split": "test"})
    bad_entry = {**data["entries"][0], "location": "/elsewhere/SKILL.md"}
    with pytest.raises(SlateError, match=r"entries\[0\]: .*location"):
        Slate.from_manifest({**data, "entries": [bad_entry, *data["entries"][1:]]})
    short = tmp_path / "short.json"
    short.write_text(json.dumps({**data, "entries": data["entries"][:15]}))
    with pytest.raises(SlateError, match=r"short\.json: slate has 15 skills"):
        read_slate(short)
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    with pytest.raises(SlateError, match="broken.json: invalid JSON"):
        read_slate(broken)
    malformed = replace(make(retriever), entries=make(retriever).entries[:15])
    with pytest.raises(SlateError, match="refusing"):
        write_slate(malformed, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_one_format_roles_come_from_categories(retriever, tmp_path: Path) -> None:
    """skills.json is the ordered slate; the role lists are derived from the entries' categories."""
    from skillgate_core.formats.slate_manifest import load_slate_manifest

    slate = make(retriever)
    path = write_slate(slate, tmp_path / "skills.json")
    loaded = load_slate_manifest(path)
    assert loaded == slate and loaded.oracle == ORACLE
    assert set(loaded.members("misleading")) == set(MISLEADING)
    assert loaded.members("relevant") == tuple(e.name for e in slate.entries if e.category == "relevant")
    data = slate.to_manifest()
    two = [{**e, "category": "oracle"} if e["category"] == "misleading" else e for e in data["entries"]][:16]
    with pytest.raises(SlateError, match="exactly one entry with category 'oracle'.*found 6"):
        Slate.from_manifest({**data, "entries": two})
    dup = [*data["entries"][:15], data["entries"][0]]
    with pytest.raises(SlateError, match=r"entries\[15\]: skill .* already listed at entries\[0\]"):
        Slate.from_manifest({**data, "entries": dup})
    with pytest.raises(SlateError, match="missing key 'task_id'"):
        Slate.from_manifest({"oracle": ORACLE, "misleading": MISLEADING})  # the retired role-list form
    with pytest.raises(SlateError, match="missing"):
        load_slate_manifest(tmp_path / "nowhere.json")
