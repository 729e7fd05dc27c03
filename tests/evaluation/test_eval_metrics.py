"""Evaluation metrics and protocol fingerprints (docs/method.md 8, vector 9)."""

from __future__ import annotations

import dataclasses

import pytest

from skillgate_core.evaluation.metrics import Trial, summarize_trials
from skillgate_core.evaluation.protocol import (
    EvalProtocol,
    ProtocolConflictError,
    ProtocolMismatchError,
    assert_same_protocol,
    register_protocol,
)


def test_vector_9_errors_are_unresolved_and_in_the_denominator():
    trials = [Trial("t", "b", i, o) for i, o in enumerate(["resolved", "fail", "error", "fail"])]
    m = summarize_trials(trials)
    assert m["trial_success"] == 0.25 and m["pass@4"] == 1.0 and m["pass@1"] == 0.25
    assert m["errors"] == 1 and m["tasks_with_at_least"] == {">=1/4": 1, ">=2/4": 0, ">=3/4": 0, ">=4/4": 0}


def test_selection_metrics():
    trials = [
        Trial("a", "x", 0, "resolved", ("oracle",), ("o",), True),
        Trial("a", "x", 1, "fail", ("misleading", "oracle"), ("m", "o")),
        Trial("b", "y", 0, "fail"),
        Trial("b", "y", 1, "resolved", ("oracle", "oracle"), ("o", "o")),
    ]
    m = summarize_trials(trials, ks=(1, 2))
    assert m["read_rate"] == 0.75
    assert m["p_resolved_given_read"] == pytest.approx(2 / 3) and m["p_resolved_given_no_read"] == 0.0
    assert m["oracle_exposure"] == 0.75 and m["misleading_exposure"] == 0.25
    # clean-oracle by the set of names read: [O] and [O, O] count, [M, O] does not
    assert m["clean_oracle_rate"] == 0.5 and m["p_oracle_given_any_read"] == 1.0
    assert m["read_share_by_category"]["oracle"] == 0.8
    assert m["unique_reads_per_trial"] == (1 + 2 + 0 + 1) / 4
    assert m["first_read_category"]["misleading"] == pytest.approx(1 / 3)
    assert m["trial_success_by_benchmark"] == {"x": 0.5, "y": 0.5}
    assert m["skill_reasoning_rate"] == 0.25 and m["pass@2"] == 1.0


def test_unique_reads_count_names_not_categories():
    two_misleading = Trial("a", "x", 0, "fail", ("misleading", "misleading"), ("m1", "m2"))
    same_twice = Trial("a", "x", 1, "fail", ("misleading", "misleading"), ("m1", "m1"))
    assert (two_misleading.unique_reads, same_twice.unique_reads) == (2, 1)
    assert summarize_trials([two_misleading, same_twice], ks=(1,))["unique_reads_per_trial"] == 1.5
    assert not two_misleading.clean_oracle and Trial("a", "x", 2, "fail", ("oracle",) * 3, ("o",) * 3).clean_oracle
    with pytest.raises(ValueError, match="aligned"):
        Trial("a", "x", 3, "fail", ("oracle",), ())


def protocol(**changes) -> EvalProtocol:
    base = EvalProtocol("eval70_v1", "mixed", 4, "a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64, 7, 1.0, 1.0, 512, 8192)
    return dataclasses.replace(base, **changes)


def test_protocol_identity_and_conflicts(tmp_path):
    p = protocol()
    assert p.protocol_id().startswith("eval70_v1__mixed__r4__") and len(p.protocol_id().split("__")[-1]) == 10
    assert protocol(seed=8).fingerprint() != p.fingerprint()
    assert protocol(temperature=0.7).protocol_id() != p.protocol_id()
    register_protocol(p, tmp_path)
    register_protocol(p, tmp_path)  # same body: fine
    assert EvalProtocol.from_body(__import__("json").loads((tmp_path / f"{p.protocol_id()}.json").read_text()),
                                  "x") == p
    forged = tmp_path / f"{p.protocol_id()}.json"
    forged.write_text(forged.read_text().replace('"seed": 7', '"seed": 9'))
    with pytest.raises(ProtocolConflictError, match="different body"):
        register_protocol(p, tmp_path)


def test_comparisons_refuse_mixed_fingerprints():
    fp = protocol().fingerprint()
    assert assert_same_protocol([("skillgate", fp), ("baseline", fp)]) == fp
    with pytest.raises(ProtocolMismatchError, match="2 protocol fingerprints"):
        assert_same_protocol([("skillgate", fp), ("baseline", protocol(seed=1).fingerprint())])
