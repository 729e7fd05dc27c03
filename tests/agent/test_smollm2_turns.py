"""SmolLM2-135M-Instruct's own tokenizer and ChatML template (read from the pinned package's GGUF) through
the real harness: prompts of every family with 16 skills fit its 8,192 positions, the chat template
renders an episode exactly as its token stream records it, and the selection spans line up."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from skillgate_core.agent.episode import EpisodeConfig, EpisodeSpec, run_episodes
from skillgate_core.agent.policies import TeacherConfig, TeacherPolicy
from skillgate_core.agent.prompts import DEFAULT_PROFILE, build_messages, render_prompt_ids
from skillgate_core.agent.trajectory import span_report
from skillgate_core.envs.bench_index import load_bench_rows
from skillgate_core.envs.task_package import load_task_package
from skillgate_core.policy.smollm2 import CONTEXT_TOKENS, locate_smollm2_gguf, smollm2_tokenizer
from skillgate_core.skills import read_slate, slate_skills_dir


@pytest.fixture(scope="module")
def tok():
    return smollm2_tokenizer(locate_smollm2_gguf())


def _specs(bench: Path, split: str, root: Path) -> list[EpisodeSpec]:
    out = []
    for row in load_bench_rows(bench, split):
        slate = read_slate(bench / row["path"] / "skills.json")
        out.append(EpisodeSpec(load_task_package(bench / row["path"]), slate,
                               slate_skills_dir(bench / "skills", slate.names, root / row["task_id"]),
                               bench=row["family"]))
    return out


def test_prompts_with_16_skills_fit_the_context_in_every_family(tok, bench, tmp_path):
    lengths: dict[str, list[int]] = {}
    for split in ("train", "eval70_v1"):
        for spec in _specs(bench, split, tmp_path):
            ids = render_prompt_ids(tok, build_messages(DEFAULT_PROFILE, spec.task.instruction, spec.slate))
            assert ids[:3] == tok("<|im_start|>system\n", add_special_tokens=False)["input_ids"]
            lengths.setdefault(spec.bench, []).append(len(ids))
    assert set(lengths) == {"procedural", "diagnosis", "constraints", "planning"}
    assert all(1000 < n < CONTEXT_TOKENS // 2 for ns in lengths.values() for n in ns), lengths


@pytest.mark.usefixtures("bwrap_ready")
def test_teacher_episodes_render_exactly_and_their_spans_line_up(tok, bench, tmp_path):
    specs = _specs(bench, "train", tmp_path)[::4][:4]  # one task per family
    for misleading in (0.0, 1.0):
        trajs = run_episodes(specs, TeacherPolicy(tok, TeacherConfig(misleading_rate=misleading)), tok,
                             EpisodeConfig(max_turns=6, backend="bwrap"))
        for t in trajs:
            assert t.status == "completed" and t.score == (1.0 if misleading == 0 else 0.0), t.verifier_detail
            rendered = tok.apply_chat_template(list(t.messages), tokenize=False)
            assert tok.decode(list(t.prompt_ids) + list(t.response_ids)) + "\n" == rendered
            sampled = [i for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m]
            assert tok.decode(sampled) == "<|im_end|>".join(turn.text for turn in t.turns) + "<|im_end|>"
            spans = span_report(t, tok)
            assert spans["reads"] == ["misleading" if misleading else "oracle"]
            assert spans["span_mismatch"] == spans["alignment_mismatch"] == spans["parse_dispatch_mismatch"] == 0
            (action,) = spans["actions"]
            ident = tok.decode([t.response_ids[i] for i in action["identity_token_indices"]])
            assert ident.strip().strip("/") and ident.strip().strip("/") in action["skill_name"]


def test_a_reader_that_names_another_eos_is_made_chatml_and_its_turns_still_align(tok):
    """transformers 5.17 reads the GGUF with eos <|im_start|> and space clean-up on (seen on the GPU machine,
    2026-12-01: every GRPO group was rejected for alignment). Both the tokenizer fix and the span rule hold."""
    from skillgate_core.agent.policies import first_read_turn, turn_token_ids
    from skillgate_core.credit.spans import AssistantTurn, detect_selection_spans
    from skillgate_core.policy.smollm2 import chatml_tokenizer

    as_517 = copy.deepcopy(tok)
    as_517.eos_token = "<|im_start|>"
    assert "<|im_end|>" not in as_517.all_special_tokens
    ids = turn_token_ids(as_517, first_read_turn("csv-merge"))
    turn = AssistantTurn(response_text=as_517.decode(ids, skip_special_tokens=True), token_ids=ids, token_offset=0,
                         dispatched=[("read", {"path": "/skills/csv-merge/SKILL.md"})], finish="stop")
    report = detect_selection_spans([turn], as_517, gold_name="csv-merge", slate={"csv-merge": "oracle"})
    assert report.alignment_mismatch == 0 and len(report.actions) == 1
    fixed = chatml_tokenizer(as_517, "test")
    assert fixed.eos_token == "<|im_end|>" and fixed.eos_token_id == ids[-1]


def test_a_tokenizer_that_does_not_round_trip_is_refused(tok):
    from tokenizers import decoders

    from skillgate_core.policy.smollm2 import chatml_tokenizer

    broken = copy.deepcopy(tok)
    broken.backend_tokenizer.decoder = decoders.WordPiece()
    with pytest.raises(ValueError, match="broken.gguf: .*does not give the encoded text back"):
        chatml_tokenizer(broken, "broken.gguf")
