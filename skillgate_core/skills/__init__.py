"""Skills: SKILL.md parsing (agentskills spec), library index, retrieval, slates, frozen snapshots.

- `skill_md`: `load_skill` / `validate_skill` for one skill folder; `SkillError` names file + field.
- `library`: `load_library` over a directory tree, its parquet index (`write_index`, `read_index`).
- `retrieval`: `build_retriever` (rank_bm25 BM25Okapi) and top-k skills for a task text.
- `slates`: the 16-skill slate of a task (`build_slate`), its seed, shape check and skills.json.
- `prompt`: the `<available_skills>` block of the system prompt.
- `snapshots`: content-addressed, verified copies of skill folders (`snapshot_skills`).
- `aliases`: one episode's slate under fresh skill names (a data augmentation of collect).
- `slate_shape`: a well-formed slate (16 unique names, 1 oracle, 5/5/5); `procedure`: the first bash
  block of a SKILL.md body.

    from skillgate_core.skills import build_retriever, build_slate, load_library
    retriever = build_retriever(load_library("skills/"))
    slate = build_slate(task_id="t1", bench="b", split="train", instruction=text,
                        oracle="gold", misleading=five_names, retriever=retriever)
"""

# Names, not logic, below: the public surface, one name a line.
from skillgate_core.skills.library import (
    find_skill_dirs,
    index_frame,
    index_schema,
    load_library,
    read_index,
    write_index,
)
from skillgate_core.skills.procedure import extract_procedure
from skillgate_core.skills.prompt import DESCRIPTION_CHARS, render_available_skills
from skillgate_core.skills.retrieval import RankedSkill, SkillRetriever, build_retriever, tokenize
from skillgate_core.skills.skill_md import (
    BODY_LINES_WARN,
    DESCRIPTION_MAX,
    NAME_MAX,
    SKILL_FILE,
    DuplicateSkillError,
    Skill,
    SkillError,
    SkillProblem,
    load_skill,
    validate_skill,
)
from skillgate_core.skills.slate_shape import SLATE_SHAPE, slate_shape_problem
from skillgate_core.skills.slates import (
    IRRELEVANT_OUTSIDE_TOP,
    SHUFFLE_TAGS,
    Slate,
    SlateCategory,
    SlateEntry,
    SlateError,
    Split,
    build_slate,
    read_slate,
    skill_location,
    slate_problem,
    slate_seed,
    slate_skills_dir,
    write_slate,
)
from skillgate_core.skills.snapshots import (
    MANIFEST_FILE,
    SNAPSHOT_FORMAT,
    Snapshot,
    SnapshotError,
    snapshot_digest,
    snapshot_skills,
    verify_snapshot,
)

__all__ = [
    "BODY_LINES_WARN",
    "DESCRIPTION_CHARS",
    "DESCRIPTION_MAX",
    "index_schema",
    "IRRELEVANT_OUTSIDE_TOP",
    "MANIFEST_FILE",
    "NAME_MAX",
    "SHUFFLE_TAGS",
    "SKILL_FILE",
    "SNAPSHOT_FORMAT",
    "DuplicateSkillError",
    "RankedSkill",
    "Skill",
    "SkillError",
    "SkillProblem",
    "SkillRetriever",
    "Slate",
    "SlateCategory",
    "SlateEntry",
    "SlateError",
    "Snapshot",
    "SnapshotError",
    "Split",
    "build_retriever",
    "build_slate",
    "find_skill_dirs",
    "index_frame",
    "load_library",
    "load_skill",
    "read_index",
    "read_slate",
    "render_available_skills",
    "skill_location",
    "slate_skills_dir",
    "slate_problem",
    "slate_seed",
    "snapshot_digest",
    "snapshot_skills",
    "tokenize",
    "validate_skill",
    "verify_snapshot",
    "write_index",
    "write_slate",
    "SLATE_SHAPE",
    "extract_procedure",
    "slate_shape_problem",
]
