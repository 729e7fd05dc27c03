"""The GPU benchmark scripts run end to end in their CPU smoke mode and write the JSON the docs read
(benchmarks/gpu/; the real runs are on the H200: docs/gpu.md)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from support.ctrl_c import own_group, signal_when_ready
from support.sandbox_fixtures import skip_without_bwrap

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "benchmarks" / "gpu"


def _run(script: str, out: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, str(GPU / script), "--smoke", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "SUMMARY" in done.stdout
    return json.loads((out / script.replace(".py", ".json")).read_text())


@pytest.mark.e2e
# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_grpo_step_vs_trl_smoke(tmp_path):
    r = _run("grpo_step_vs_trl.py", tmp_path)
    trl, ours = r["trl"], r["ours"]
    assert "error" not in trl and trl["completion_tok_per_s"] > 0 and trl["steps"] == 2
    assert "error" not in ours and ours["steps"] == 2 and ours["completion_tokens"] == 2 * 4 * 16
    assert set(ours["split_s_per_step"]) == {"generate", "reward", "logprob", "train", "sync"}
    steps = [s for s in ours["records"] if s["kind"] == "timed"]
    assert all(s["sampler"]["decode_steps"] == 15 and s["micro_batches"] > 0 for s in steps)
    assert ours["profile_top"]["ops"] and (tmp_path / "grpo_profile.txt").read_text()
    assert r["ratio"]["completion_tok_per_s"] > 0 and r["machine"]["torch"] and r["machine"]["cpu_model"]
    assert ours["preset"] == "default"  # the trainer a user gets, unless --presets says otherwise
    assert not (tmp_path / "grpo_ours.json").exists()  # merged into the one JSON


def _assert_phases(row: dict) -> None:
    """A row's phase breakdown: each phase a positive time, together within the phase-timed step."""
    phases = row["phases_s"]
    assert set(phases) == {"forward", "backward", "optimizer_step"} and row["phase_steps"] == 2, row
    assert all(isinstance(v, float) and v > 0 for v in phases.values()), row
    assert sum(phases.values()) <= row["phased_step_s"] * 1.02 + 1e-4, row


@pytest.mark.e2e
# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_trainer_throughput_smoke_process(tmp_path):
    names = ("default", "default_fused", "z3", "z3_persist", "z0")
    r = _run("trainer_throughput.py", tmp_path, "--launchers", "process", "--variants", ",".join(names),
             "--attn", "torch_varlen", "--profile")
    assert r["anchor_ds"]["torch"]["tok_per_s"] > 0
    assert r["model"]["params"] == r["anchor_ds"]["nparams"]  # the anchor's exact model
    for name in names:
        row = r["process"][name]
        assert row["tok_per_s"] > 0 and row["packs_varlen"] and row["micro_batches_per_step"] == 1, row
        _assert_phases(row)
        assert row["profile_top"]["ops"] and (tmp_path / f"trainer_profile_{name}.txt").read_text()
    assert set(r["summary"]["rows"]) == {f"process/{n}" for n in names}
    assert r["process"]["default_fused"]["config"] == r["process"]["default"]["config"] | {"optimizer": "torch_fused"}
    # plain torch's step phase by phase, in a copy of the anchor that runs the anchor's model
    plain = r["anchor_phases"]
    assert plain["tok_per_s"] > 0 and plain["nparams"] == r["model"]["params"]
    _assert_phases(plain)
    assert plain["profile_top"]["ops"] and (tmp_path / "anchor_profile.txt").read_text()
    gaps = r["summary"]["phase_gap_vs_plain_torch_s"]
    assert set(gaps) == {f"process/{n}" for n in names}
    ours = r["process"]["default"]
    assert gaps["process/default"]["forward"] == round(ours["phases_s"]["forward"] - plain["phases_s"]["forward"], 4)
    assert gaps["process/default"]["s_per_step"] == round(ours["s_per_step"] - plain["s_per_step"], 4)
    assert r["summary"]["default"]["gap_vs_plain_torch_s"] == gaps["process/default"]
    # the default preset is the user's config: "auto", resolved on the rank (CPU: 3) and said why, in one run
    # beside plain torch and the named presets
    assert r["process"]["default"]["config"]["zero_stage"] == "auto"
    assert r["process"]["z0"]["zero_stage_resolved"] == 0 and not r["process"]["z0"]["zero_stage_auto"]
    default = r["summary"]["default"]
    assert default["process"]["zero_stage_resolved"] == 3 and "CPU" in default["process"]["zero_stage_reason"]
    assert default["process"]["mfu"] == r["process"]["default"]["mfu_vs_790T"]
    assert default["target_mfu_one_gpu"] == 0.35
    assert default["meets_target_one_gpu"] == (default["process"]["mfu"] >= 0.35)


@pytest.mark.e2e
@pytest.mark.slow
def test_trainer_throughput_smoke_with_ray(tmp_path):
    r = _run("trainer_throughput.py", tmp_path)
    assert r["ray_1"]["default"]["tok_per_s"] > 0 and r["summary"]["scaling_ray1_vs_process1"]["default"] > 0
    assert r["summary"]["default"]["ray_1"]["zero_stage_resolved"] == 3  # CPU
    # the phase breakdown is the process rows' (the smoke's default), not Ray's
    assert r["process"]["default_fused"]["phases_s"] and "phases_s" not in r["ray_1"]["default"]


ANCHOR_SHA256 = {
    "anchor_decode.py": "f170e90f00df669a8f6e66cc4f3ed1896463cee3c7e8f5afc9a76a193c3595e6",
    "anchor_ds.py": "3bd77cd91aabb816a7523d2fa475cce5bc01d0f7d1950f93c274fa0dffa79acf",
    "anchor_gen.py": "f733269ea5a77bbb00247244adb4b9c43199b11f8af6339afceaef89e1382058",
    "anchor_raytrain.py": "1711a106acebb6df98309838eac9c71b64582f29a4297e3dd24b80a35db2a219",
    "anchor_trl.py": "cbb3dc0dca63461387f428f8dd895a1887387e2674571bae6055fe9fae32bc3c",
    # anchor_trl.py plus --generation (TRL's offline generation modes) and a clock around every step (2026-12-07,
    # issue [speed]: symmetric ratios); grpo_step_vs_trl.py runs it
    "anchor_trl_clocked.py": "768b61e275330297dc1cfc7ffe39063be8bf470d36c959f3433f09e86caadbd0",
}
"""The anchor scripts as they were run for docs/gpu.md's anchor table: a ratio against an edited
anchor would compare against a number nobody measured."""


def test_anchor_scripts_are_the_recorded_ones_and_the_scripts_parse():
    copies = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (GPU / "anchors").glob("*.py")}
    assert copies == ANCHOR_SHA256
    for script in ("run_all.sh", "run_grpo_and_rollouts.sh", "learning_result.sh", "smollm2.sh",
                   "bundle/make_bundle.sh", "bundle/install_bundle.sh"):
        assert subprocess.run(["bash", "-n", str(GPU / script)]).returncode == 0


# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_grpo_step_vs_trl_presets_share_one_trl_run(tmp_path):
    r = _run("grpo_step_vs_trl.py", tmp_path, "--presets", "z3,z2", "--no-profile")
    assert set(r["ours_presets"]) == set(r["ratio_presets"]) == {"z3", "z2"}
    assert r["ours"]["preset"] == "z3" and r["ours_presets"]["z2"]["engine"]["zero_stage"] == 2
    assert r["ours_presets"]["z2"]["zero_stage_resolved"] == 2 and r["ours"]["zero_stage_reason"].startswith("stage 3")
    assert all("error" not in o and o["steps"] == 2 for o in r["ours_presets"].values())
    assert not list(tmp_path.glob("grpo_ours*.json"))


@pytest.fixture(scope="module")
def agent_rollouts(tmp_path_factory) -> dict:
    """One smoke run of agent_rollouts.py for both tests below: the default passes (lanes, then one lane) come
    first, as a plain `--smoke` runs them, then one timed pass each of the other samplers on the same episodes
    (one process, one build of the bench and model instead of two: ~20 s less on 2 cores)."""
    skip_without_bwrap()
    return _run("agent_rollouts.py", tmp_path_factory.mktemp("agent_rollouts"), "--samplers",
                "reprefill,reprefill_shared,cached,cached_full,hf")


@pytest.mark.e2e
# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_agent_rollouts_smoke(agent_rollouts):
    r = agent_rollouts
    lanes, one = (next(p for p in r["passes"] if p["pass"] == name) for name in ("lanes", "one_lane"))
    for p in (lanes, one):
        assert p["sampler"] == "reprefill"  # the default sampler's passes, as a plain --smoke plays them
        assert p["episodes"] == 4 and p["backends"] == {"bwrap": 4} and p["statuses"] == {"completed": 4}
        assert p["gpu_sampled_tokens"] == p["turns"] * 8  # every turn of every episode samples gen_tokens
        assert p["calls"]["verify"] == 4 and p["calls"]["tools"] == 8
    assert [p["pass"] for p in r["passes"]][:2] == ["lanes", "one_lane"]  # before any other sampler's pass
    # the anchor is the lockstep loop: one lane, sandbox starts and grading not overlapped (overlap_sandbox off)
    assert (one["overlap_sandbox"], lanes["overlap_sandbox"]) == (False, True)
    assert one["overlap"]["share_of_sandbox_work_overlapping_generation"] == 0  # lockstep: nothing overlaps
    assert lanes["overlap"]["sandbox_work_while_generating_s"] > 0
    assert r["ratio"]["episodes_per_min_lanes_over_one_lane"] > 0


# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_agent_rollouts_compares_the_samplers_on_the_same_episodes(agent_rollouts):
    """--samplers: one timed pass each of the full re-prefill, the turn cache and transformers generate, on
    the same episodes (the same contexts, the same tokens sampled); the turn cache prefills less than a
    full prefill per turn would and says what it reused and shared. CPU: no speed is asserted."""
    r = agent_rollouts
    samplers = r["samplers"]
    assert set(samplers) == {"reprefill", "reprefill_shared", "cached", "cached_full", "hf"}
    assert samplers["reprefill"]["pass"] == "lanes" and samplers["cached"]["pass"] == "sampler_cached"
    assert len({(s["context_tokens"], s["gpu_sampled_tokens"]) for s in samplers.values()}) == 1
    cache = samplers["cached"]["turn_cache"]
    assert 0 < cache["prefilled_tokens"] < samplers["cached"]["context_tokens"]
    assert cache["reused_tokens"] > 0 and cache["shared_tokens"] > 0  # later turns; the group's shared prompt
    assert cache["prefilled_tokens"] + cache["reused_tokens"] + cache["shared_tokens"] == samplers["cached"]["context_tokens"]
    passes = {p["pass"]: p for p in r["passes"]}  # each pass names the decode step that sampled it
    assert passes["sampler_hf"]["decode_step"] == "transformers generate"
    step = passes["sampler_cached"]["decode_step"]
    assert not step["fused_decode"] and "not compiled on CUDA" in step["fused_decode_why_not"]  # the CPU's default
    assert samplers["reprefill"]["turn_cache"]["calls"] == samplers["hf"]["turn_cache"]["calls"] == 0
    # the samplers' ratios, beside the lanes-over-one-lane ratio of the default passes (the smoke test's)
    assert set(r["ratio"]) == {"episodes_per_min_lanes_over_one_lane", "cached_over_reprefill", "hf_over_reprefill",
                               "reprefill_over_hf", "cached_over_hf",  # hf: the anchor of issue [rollouts] item 1
                               "cached_full_over_reprefill", "cached_full_over_hf", "cached_over_cached_full",
                               "reprefill_shared_over_reprefill", "reprefill_shared_over_hf"}
    hf, cached = samplers["hf"], samplers["cached"]
    assert r["ratio"]["cached_over_hf"]["episodes_per_min"] == round(cached["episodes_per_min"] / hf["episodes_per_min"], 2)
    assert r["model"]["dir"].startswith("random init")
    assert {p["statuses"]["completed"] for p in r["passes"] if p["pass"] != "lanes"} == {4}


def _learning_result():
    sys.path.insert(0, str(GPU))
    try:
        import learning_result
    finally:
        sys.path.remove(str(GPU))
    return learning_result


def test_learning_result_gpu_configs_are_valid_and_the_arms_share_everything_but_the_profile():
    lr = _learning_result()
    cfg = lr.scale_configs("h200")
    grpo = cfg["grpo"]
    assert grpo.launcher == "process" and grpo.rollout_source == "policy" and grpo.checkpoint_every == grpo.steps
    assert cfg["data"].max_tasks == 0  # every family (the first N train tasks by id are one family)
    assert cfg["eval"].protocol == "eval70_v1" and cfg["eval"].demo_repeats == 0
    assert set(lr.DEFAULT_ARMS) == {"mixed_task_reward", "selector_clean_oracle_action_credit",
                                    "selector_clean_oracle_masked_task_only"}
    a = lr.parse(["arm", "--profile", "mixed_task_reward", "--out", "x", "--grpo-steps", "5"])  # the old flag
    assert a.trained == (lr.Arm("mixed_task_reward"),) and a.grpo_steps == 5
    assert lr.parse(["arm", "--out", "x"]).trained == tuple(lr.Arm(k) for k in lr.DEFAULT_ARMS)
    assert lr.parse(["eval", "--out", "x"]).arm_list == ["sft", *(lr.Arm(k) for k in lr.DEFAULT_ARMS)]


def test_learning_result_arms_force_as_the_method_says_under_one_safety_cap():
    """Forced acceptance after 64 rejected groups or 300 rejected samples (docs/method.md 5 seed), not 4; one
    safety cap for every arm, above the forcing point, so the outcome arm never gives up where it forces
    and no arm gets a smaller budget than another (2026-12-01: cap 8, forcing after 4: the outcome arm
    took 16 optimizer steps, each selector arm 4)."""
    from skillgate_core.credit.groups import FORCE_AFTER_GROUPS, FORCE_AFTER_SAMPLES

    lr = _learning_result()
    assert (FORCE_AFTER_GROUPS, FORCE_AFTER_SAMPLES) == (64, 300)
    for scale in ("h200", "smollm2"):
        grpo = lr.scale_configs(scale)["grpo"]
        assert (grpo.force_after_groups, grpo.force_after_samples) == (64, 300), scale
        forcing_point = min(grpo.force_after_groups, -(-grpo.force_after_samples // grpo.group_size))
        assert grpo.max_rejected_groups > forcing_point, scale
        for arm in lr.DEFAULT_ARMS:  # what the driver trains: the shared config with the arm's profile
            armed = lr.arm_config(lr.scale_configs(scale), lr.parse_arm(arm))
            assert (armed.max_rejected_groups, armed.force_after_groups, armed.force_after_samples) == (
                grpo.max_rejected_groups, 64, 300) and armed.variant == ""


@pytest.mark.e2e
@pytest.mark.slow
def test_learning_result_parts_a_to_d_at_tiny_scale(tmp_path):
    # The device parts a, b, c (this machine's Python and bwrap: LR_LOCAL) and the CPU paper build d, at tiny
    # scale, in one state home: what the next GPU session runs, minus the GPUs (~3 min on 2 cores).
    skip_without_bwrap()
    bench = tmp_path / "bench.tar.xz"
    done = subprocess.run([sys.executable, str(GPU / "learning_result.py"), "write-bench", str(bench), "--scale", "tiny",
                           "--home", str(tmp_path / "wb")], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {**__import__("os").environ, "LR_LOCAL": "1", "PYTHON": sys.executable, "LR_BENCH": str(bench),
           "LR_HOME": str(tmp_path / "home"), "OUT": str(tmp_path / "out"), "BUDGET_S": "500",
           "LR_ARGS": "--scale tiny --probe-grpo-min-s 0 --probe-eval-min-s 0"}
    for part in "abc":
        # part c: the SFT policy's eval and three arms' on one device, at most 2 at once (JOBS_PER_GPU)
        done = subprocess.run(["bash", str(GPU / "learning_result.sh")], capture_output=True, text=True, timeout=900,
                              cwd=REPO, env={**env, "PART": part, **({"JOBS_PER_GPU": "2"} if part == "c" else {})})
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert (tmp_path / "out" / f"lr_{part}.tar.gz").is_file(), done.stdout[-3000:]
        if part == "a":  # the SFT policy's digest on its line: what pairs arms across commands (docs/gpu.md 5)
            assert re.search(r"\] sft: [0-9.]+ s \(sft_model [0-9a-f]{12}\)", done.stdout), done.stdout[-3000:]
            continue
        events = [(m[1], m[2]) for m in re.finditer(r"GPU 0: (start|end) .*? (\S+) (?:\(\d+ s left\)|exit \S+)$",
                                                     done.stdout, re.M)]
        running, most = set(), 0
        for event, label in events:
            (running.add if event == "start" else running.discard)(label)
            most = max(most, len(running))
        arms = list(_learning_result().DEFAULT_ARMS)
        assert sorted(label for event, label in events if event == "start") == sorted(
            ["sft", *arms] if part == "c" else arms), events
        assert not running and most == (2 if part == "c" else 3), (part, events)
        finished = [line for line in done.stdout.splitlines() if re.match(r"(eval|arm) .* exit \S+$", line)]
        assert len(finished) == len(arms) + (part == "c") and all(x.endswith(" exit 0") for x in finished), finished
    # a later session of the cohort: EVAL_SFT=0 evaluates the arms only (here all reused), never the SFT policy
    again = subprocess.run(["bash", str(GPU / "learning_result.sh")], capture_output=True, text=True, timeout=600,
                           cwd=REPO, env={**env, "PART": "c", "EVAL_SFT": "0", "OUT": str(tmp_path / "out-again")})
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    started = re.findall(r"GPU 0: start (\S+) (\S+) \(\d+ s left\)$", again.stdout, re.M)
    assert sorted(label for _, label in started) == sorted(arms) and ("eval", "sft") not in started, started
    # the later session's folder builds one paper with the earlier ones: its arms' rows only, no second SFT eval
    assert (tmp_path / "out-again" / "lr_c.tar.gz").is_file()
    tars = " ".join([str(tmp_path / "out" / f"lr_{p}.tar.gz") for p in "abc"] + [str(tmp_path / "out-again" / "lr_c.tar.gz")])
    done = subprocess.run(["bash", str(GPU / "learning_result.sh")], capture_output=True, text=True, timeout=600,
                          cwd=REPO, env={**env, "PART": "d", "LR_COLLECTED": tars, "LR_HOME": str(tmp_path / "paper-home"),
                                         "LR_PAPER_OUT": str(tmp_path / "paper")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    paper = json.loads((tmp_path / "paper" / "paper.json").read_text())
    inputs = paper["paper_inputs"]
    methods = {Path(f).parent.name for f in inputs["eval"]}
    assert methods == {"sft", "mixed_task_reward", "selector_clean_oracle_action_credit",
                       "selector_clean_oracle_masked_task_only"}
    assert {Path(f).parent.name for f in inputs["training"]} == methods - {"sft"}
    # part c's evaluations are traced to part b's training records through the exports they read: one SFT policy
    lineage = {**paper["sft_lineage"], **paper["sft_lineage_training"]}
    assert set(paper["sft_lineage"]) == methods and len(set(lineage.values())) == 1 and None not in lineage.values()
    report = (tmp_path / "paper" / "report" / "report.md").read_text()
    assert "Paired bootstrap: selector_clean_oracle_action_credit - mixed_task_reward" in report
    a = json.loads(subprocess.run(["tar", "-xzOf", str(tmp_path / "out" / "lr_a.tar.gz"), "lr/probe_a_eval.json"],
                                  capture_output=True, text=True, check=True).stdout)
    # the tiny protocol is 2 tasks x 4 repeats: the probe (32 trials at most) plays all of it, and part c reuses it
    assert a["probe_eval"]["trials"] == 8 and len(a["probe_eval"]["rows"]) == 8
    # the eval probe runs right after SFT (nothing of rl-data-prep yet), the GRPO probe after rl-data-prep
    assert "sft" in a["stages"] and not [k for k in a["stages"] if k.startswith("rl_data_")]
    g = json.loads(subprocess.run(["tar", "-xzOf", str(tmp_path / "out" / "lr_a.tar.gz"), "lr/probe_a_grpo.json"],
                                  capture_output=True, text=True, check=True).stdout)
    assert {k for k in g["stages"] if k.startswith("rl_data_")} == {
        "rl_data_mixed_task_reward", "rl_data_selector_clean_oracle_action_credit",
        "rl_data_selector_clean_oracle_masked_task_only"}
    assert g["probe_grpo"]["steps"] == 2


def test_the_arms_steps_are_fitted_from_the_probe_and_kept_for_the_evaluations(tmp_path, monkeypatch):
    lr = _learning_result()
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "home"))  # Run sets it: restored after the test
    rows = [{"time_step_s": 40.0}, {"time_step_s": 20.0}, {"time_step_s": 22.0}]
    timing = lr.probe_timing(100.0, rows)
    assert timing == {"step_s": 22.0, "first_step_s": 40.0, "startup_s": 18.0}
    # two arms a GPU: steps of 44 s, the first 80 s, 18 s of start: 500 s holds 1 + (500 - 98) // 44 = 10
    assert lr.fit_steps(timing, 500, share=2, most=20) == 10
    assert lr.fit_steps(timing, 500, share=1, most=20) == 20 and lr.fit_steps(timing, 10, share=1, most=20) == 1
    home = tmp_path / "home"
    home.mkdir()
    a = lr.parse(["arm", "--out", str(tmp_path / "o"), "--home", str(home), "--fit-budget-s", "500", "--gpu-share", "2"])
    with pytest.raises(SystemExit, match="probe"):
        lr.fitted_grpo_steps(home, a, 20)
    (home / lr.PROBE_TIMING).write_text(json.dumps(timing))
    assert lr.fitted_grpo_steps(home, a, 20) == 10
    later = lr.parse(["eval", "--out", str(tmp_path / "o"), "--home", str(home)])
    assert lr.fitted_grpo_steps(home, later, 20) == 10  # the evaluations find the arms the fit trained
    run = lr.Run(later, "eval")
    assert run.cfg["grpo"].steps == run.cfg["grpo"].checkpoint_every == 10
    explicit = lr.parse(["eval", "--out", str(tmp_path / "o"), "--home", str(home), "--grpo-steps", "3"])
    assert lr.Run(explicit, "eval").cfg["grpo"].steps == 3
    # a rollout round may play ahead (grpo.draw_ahead): the probe's A/B of the GRPO step time
    ahead = lr.parse(["probe", "--out", str(tmp_path / "o"), "--home", str(home), "--draw-ahead", "2"])
    assert lr.Run(ahead, "probe").cfg["grpo"].draw_ahead == 2.0 and run.cfg["grpo"].draw_ahead == 1.0
    # and the sandbox overlap's A/B (grpo.overlap_sandbox, on by default)
    lockstep = lr.parse(["probe", "--out", str(tmp_path / "o"), "--home", str(home), "--overlap-sandbox", "off"])
    assert lr.Run(lockstep, "probe").cfg["grpo"].overlap_sandbox is False and run.cfg["grpo"].overlap_sandbox is True


@pytest.mark.slow
def test_an_arm_cut_off_by_the_budget_resumes_from_its_checkpoint_to_the_same_steps(tmp_path):
    # The device's budget ends a command with SIGTERM (learning_result.sh's timeout): the next command on the
    # machine resumes the arm from its latest checkpoint (not from step 0), and `eval` finds the export (~2 min).
    import os
    import signal

    from skillgate_core.envs import bwrap_sandbox

    if bwrap_sandbox.unavailable_reason():
        pytest.skip(f"bubblewrap unusable here: {bwrap_sandbox.unavailable_reason()}")
    driver = [sys.executable, str(GPU / "learning_result.py")]
    common = ["--scale", "tiny-llama", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "out"),
              "--grpo-steps", "5"]
    arm = ["arm", "--arms", "mixed_task_reward", *common]
    experiments = tmp_path / "home" / "experiments"
    with own_group([*driver, *arm, "--tag", "cut"], env=os.environ, cwd=REPO, quiet=True) as first:
        # SIGTERM, as the device script's `timeout` sends it, once the arm has its second checkpoint
        signal_when_ready(first, signal.SIGTERM, wait_s=600, exit_s=60, ready=lambda: bool(
            list(experiments.glob("grpo-mixed-task-reward-*/segments/*/checkpoints/step_00000002"))))
    done = subprocess.run([*driver, *arm, "--tag", "resumed"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "resuming grpo-mixed-task-reward-" in done.stdout
    record = json.loads((tmp_path / "out" / "arm_resumed.json").read_text())["stages"]["grpo_mixed_task_reward"]
    assert record["metrics"]["resumed_from_step"] >= 2 and record["metrics"]["export_step"] == 5
    assert [r["step"] for r in json.loads((tmp_path / "out" / "arm_resumed.json").read_text())["training"][
        "mixed_task_reward"]] == [0, 1, 2, 3, 4]
    # a finished resume is never rebuilt: `eval` takes its export
    built = tmp_path / "home" / "bench-built" / "bench"  # where the driver built the bench (no --bench given)
    run = _learning_result().Run(_learning_result().parse(["eval", *common, "--bench", str(built)]), "eval")
    trained = _learning_result().parse_arm("mixed_task_reward")
    paths = _learning_result().prep(run, (trained,))
    assert _learning_result().export_of(run, paths, trained) == Path(record["outputs"]["policy_export"])
    # nor trained again by the next `arm` (2026-12-01 on the H200: it started a fresh run)
    again = subprocess.run([*driver, *arm, "--tag", "again"], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "reused (finished by a resume" in again.stdout and "grpo ..." not in again.stdout


# The driver's SIGTERM handling as main() installs it, in a child: a cleanup (stopping sandboxes, salvaging an
# arm's metrics) that the budget's SIGTERM started, then a second SIGTERM while it runs
SECOND_SIGTERM_CHILD = """
import signal, sys, time
sys.path.insert(0, 'benchmarks/gpu')
import learning_result as lr
signal.signal(signal.SIGTERM, lr._terminated)
try:
    print('ready', flush=True)
    time.sleep(120)
except KeyboardInterrupt as stop:
    print('stopping:', stop, flush=True)
    for _ in range(40):
        time.sleep(0.05)
    print('cleanup done', flush=True)
"""


def test_a_second_sigterm_cannot_cut_the_cleanup_the_first_one_started():
    # `timeout` signals the driver and then its whole group: at f52dc71 on the H200 the second SIGTERM landed in
    # the first one's cleanup in all four arms, cut it short, and the processes hung until the SIGKILL
    import os
    import signal

    with own_group([sys.executable, "-c", SECOND_SIGTERM_CHILD], env=os.environ, cwd=REPO,
                   merge_stderr=True) as child:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        assert child.stdout.readline().strip() == "stopping: signal 15"
        child.send_signal(signal.SIGTERM)  # inside the cleanup, which takes ~2 s
        out, _ = child.communicate(timeout=60)
    assert "already stopping" in out and "cleanup done" in out, out
    assert child.returncode == 0


def test_the_smollm2_scale_resolves_its_recipe_without_what_the_gpu_machine_lacks():
    # 2026-12-01 the first device call failed here: resolving the recipe imported benchgen, i.e. polars
    code = ("import sys; sys.path.insert(0, 'benchmarks/gpu'); import learning_result as lr; lr.block_absent(); "
            "c = lr.scale_configs('smollm2'); print(sorted(c), c['grpo'].steps, c['eval'].protocol)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "['bc', 'collect', 'data', 'dpo', 'eval', 'grpo', 'model', 'paper', 'sft'] 32 eval70_v1_ctx8k" in done.stdout


@pytest.mark.slow
def test_an_evaluation_cut_off_by_the_budget_brings_back_the_rows_it_played(tmp_path):
    # 2026-12-01 on the H200 the arms' evaluations were cut off and their rows stayed on the machine (~1 min)
    import os
    import signal

    from skillgate_core.envs import bwrap_sandbox

    if bwrap_sandbox.unavailable_reason():
        pytest.skip(f"bubblewrap unusable here: {bwrap_sandbox.unavailable_reason()}")
    home, out = tmp_path / "home", tmp_path / "out"
    cmd = [sys.executable, str(GPU / "learning_result.py"), "eval", "--arms", "sft", "--scale", "tiny-llama",
           "--home", str(home), "--out", str(out), "--eval-batch", "1"]
    with own_group(cmd, env=os.environ, cwd=REPO, quiet=True) as run:  # cut off by the budget after its first row
        signal_when_ready(run, signal.SIGTERM, wait_s=600, exit_s=60,
                          ready=lambda: bool(list(home.glob("experiments/*/eval/*/rows/*/row.json"))))
    kept = json.loads((out / "eval.json").read_text())["eval_incomplete"]["sft"]
    rows = [json.loads(x) for x in (out / "eval" / "sft" / "partial_rows.jsonl").read_text().splitlines()]
    assert 1 <= kept["trials"] == len(rows) < 8 and {r["method"] for r in rows} == {"sft"}
    assert not (out / "eval" / "sft" / "eval_trials.parquet").exists()  # the paper build never reads a partial run
    # with what the policy wrote in those trials, the evidence for why an arm resolves what it does
    samples = sorted((out / "eval" / "sft" / "samples").glob("*.json"))
    assert 1 <= len(samples) <= len(rows)
    sample = json.loads(samples[0].read_text())
    assert sample["turns_total"] >= len(sample["turns"]) >= 1 and "text" in sample["turns"][0]


def test_arms_are_profiles_with_a_seed_and_a_bad_one_is_refused_before_anything_is_written(tmp_path, capsys):
    lr = _learning_result()
    a = lr.parse(["prep", "--out", "x", "--scale", "tiny", "--arms", "mixed_task_reward@s1 selector_action_credit,no_skill",
                  "--arms", "hybrid_slate@s0 bc@s2 dpo"])
    assert [x.label for x in a.trained] == ["mixed_task_reward@s1", "selector_action_credit", "no_skill",
                                            "hybrid_slate", "bc@s2", "dpo"]  # @s0 is the bare profile
    assert [(x.kind, x.seed, x.stage) for x in a.trained][::4] == [("mixed_task_reward", 1, "grpo"), ("bc", 2, "bc")]
    assert [x.record_label for x in a.trained[:1] + a.trained[4:]] == ["grpo_mixed_task_reward@s1", "bc@s2", "dpo"]
    refused = {
        "no_such_arm": "arm 'no_such_arm': unknown profile; profiles: no_skill, mixed_task_reward, ",
        "mixed_task_reward@s": "arm 'mixed_task_reward@s': expected PROFILE or PROFILE@sN",
        "mixed_task_reward@1": "arm 'mixed_task_reward@1': expected PROFILE or PROFILE@sN",
        "mixed_task_reward@s01": "arm 'mixed_task_reward@s01': expected",  # one text per label
        "mixed_task_reward@s-1": "arm 'mixed_task_reward@s-1': expected",
        "sft": "arm 'sft': the SFT policy is evaluated",
        "mixed_task_reward mixed_task_reward@s0": "arms named twice: mixed_task_reward",
        "selector_action_credit+no_such": "arm 'selector_action_credit+no_such': unknown variant 'no_such'",
        "selector_action_credit+identity_first_mention+selector_on_zero_variance": "in the order "
                                                                                   "selector_on_zero_variance+",
        "selector_action_credit+identity_first_mention+identity_first_mention": "named once each",
        "mixed_task_reward+identity_first_mention": "mixed_task_reward has no selector stream",
        "dpo+identity_first_mention": "dpo is a supervised baseline",
    }
    for text, message in refused.items():
        home, out = tmp_path / "home", tmp_path / "out"
        with pytest.raises(SystemExit) as exit_:
            lr.main(["arm", "--arms", text, "--scale", "tiny", "--home", str(home), "--out", str(out)])
        assert exit_.value.code == 2, text
        err = capsys.readouterr().err
        assert message in err, (text, err)
        if "unknown profile" in message or "expected PROFILE" in message:  # the choices, all of them
            assert "selector_clean_oracle_action_credit, bc, dpo" in err, err
        assert not home.exists() and not out.exists(), text  # nothing built, nothing written
    assert lr.parse(["eval", "--out", "x", "--arms", "sft mixed_task_reward@s3"]).arm_list == [
        "sft", lr.Arm("mixed_task_reward", 3)]
    with pytest.raises(SystemExit):
        lr.parse(["arm", "--out", "x", "--arms", "bc"])  # h200: a from-scratch base, no LoRA baselines
    assert lr.main(["arms", "--arms", "no_skill@s4 dpo", "--scale", "tiny"]) == {"arms": [
        {"label": "no_skill@s4", "stage": "grpo", "kind": "no_skill", "seed": 4},
        {"label": "dpo", "stage": "dpo", "kind": "dpo", "seed": 0}]}


def test_a_labelled_variant_is_an_arm_of_its_own_differing_only_in_that_variant():
    """PROFILE+VARIANT@sN: the recipe's one [grpo] config with the variant switched on, its own label (eval rows,
    folders, experiment id) and the profile's own rl-data-prep table."""
    from dataclasses import asdict

    from skillgate_core.rl.grpo_stage import default_experiment_id

    lr = _learning_result()
    cfg = lr.scale_configs("smollm2")
    method = lr.parse_arm("selector_clean_oracle_action_credit")
    variant = lr.parse_arm("selector_clean_oracle_action_credit+identity_first_mention@s1")
    both = lr.parse_arm("selector_action_credit+selector_on_zero_variance+identity_first_mention")
    assert (variant.kind, variant.seed, variant.variants) == ("selector_clean_oracle_action_credit", 1,
                                                              ("identity_first_mention",))
    assert variant.label == "selector_clean_oracle_action_credit+identity_first_mention@s1"
    assert variant.record_label == "grpo_" + variant.label
    assert both.label == "selector_action_credit+selector_on_zero_variance+identity_first_mention"
    a, b = lr.arm_config(cfg, method), lr.arm_config(cfg, variant)
    assert b.identity_first_mention and not a.identity_first_mention and b.variant == "identity_first_mention"
    assert {k: v for k, v in asdict(b).items() if k not in ("seed", "identity_first_mention")} == {
        k: v for k, v in asdict(a).items() if k not in ("seed", "identity_first_mention")}
    assert lr.arm_config(cfg, both).selector_on_zero_variance and lr.arm_config(cfg, both).identity_first_mention
    assert lr.data_profile(cfg, variant) == lr.data_profile(cfg, method) == method.kind
    inputs = {"sft_model": Path("/s"), "rl_data": Path("/r"), "bench": Path("/b")}
    assert default_experiment_id(replace(b, seed=0), inputs) != default_experiment_id(a, inputs)
    listing = lr.main(["arms", "--arms", "selector_clean_oracle_action_credit selector_clean_oracle_action_credit"
                       "+identity_first_mention", "--scale", "tiny"])["arms"]
    assert [x["label"] for x in listing] == ["selector_clean_oracle_action_credit",
                                             "selector_clean_oracle_action_credit+identity_first_mention"]
    assert "variants" not in listing[0] and listing[1]["variants"] == ["identity_first_mention"]


def test_the_default_arms_train_and_evaluate_the_configs_they_did_before_seeds_and_a_seed_changes_only_the_seed():
    """Seed 0 is the arm as the driver trained it before arms had seeds (the shared [grpo] config with the profile
    set: the runs whose rows the new ones pair with); at smollm2 that is also the recipe's own table of each arm."""
    from dataclasses import asdict

    from skillgate_core.base.config import config_digest
    from skillgate_core.pipeline.recipes import find_recipe, resolve_recipe
    from skillgate_core.rl.grpo_stage import default_experiment_id

    lr = _learning_result()
    recipe = resolve_recipe(find_recipe("learning-result", REPO / "deployments" / "recipes")).configs
    for scale in ("h200", "smollm2", "tiny", "tiny-llama"):
        cfg = lr.scale_configs(scale)
        assert cfg["grpo"].seed == 0, scale
        for profile in lr.DEFAULT_ARMS:
            arm = lr.parse_arm(profile)
            before = replace(cfg["grpo"], profile=profile)  # the driver's arm config before seeds
            assert lr.arm_config(cfg, arm) == before and config_digest(lr.arm_config(cfg, arm)) == config_digest(before)
            assert (arm.label, arm.record_label, lr.data_profile(cfg, arm)) == (profile, f"grpo_{profile}", profile)
            seeded = lr.arm_config(cfg, lr.parse_arm(f"{profile}@s1"))
            assert {k: v for k, v in asdict(seeded).items() if k != "seed"} == {
                k: v for k, v in asdict(before).items() if k != "seed"} and seeded.seed == 1
            inputs = {"sft_model": Path("/s"), "rl_data": Path("/r"), "bench": Path("/b")}
            assert default_experiment_id(seeded, inputs) != default_experiment_id(before, inputs)
        if scale != "h200":
            for baseline in lr.BASELINES:
                assert lr.arm_config(cfg, lr.Arm(baseline)) == cfg[baseline]
                assert lr.arm_config(cfg, lr.Arm(baseline, 2)) == replace(cfg[baseline], seed=2)
    smollm2 = lr.scale_configs("smollm2")
    for entry, profile in (("grpo:mixed-task-reward", "mixed_task_reward"), ("grpo", "selector_clean_oracle_action_credit"),
                           ("grpo:masked-task-only", "selector_clean_oracle_masked_task_only")):
        assert lr.arm_config(smollm2, lr.Arm(profile)) == recipe[entry], entry


def test_the_arms_tables_must_hold_the_same_tasks_and_the_prompts_they_share(tmp_path):
    from skillgate_core.base.parquet_rows import write_rows

    lr = _learning_result()
    slate = [{"name": "a-x", "category": "oracle"}]
    row = {"task_id": "t1", "slate": slate, "gold_name": "a-x", "skill_aliases": None, "prompt_ids": [1, 2],
           "no_skill_prompt_ids": None}
    tables = {"mixed_task_reward": [row], "no_skill": [{**row, "prompt_ids": None, "no_skill_prompt_ids": [3]}],
              "hybrid_slate": [{**row, "no_skill_prompt_ids": [3]}], "selector_action_credit": [{**row, "prompt_ids": [1, 9]}],
              "mixed_separated": [{**row, "task_id": "t2"}], "selector_clean_oracle_action_credit": [{**row, "skill_aliases": "{}"}]}
    paths = {f"rl_data_{p}": write_rows(rows, tmp_path / f"{p}.parquet") for p, rows in tables.items()}
    same = lr.same_tasks(paths, ("mixed_task_reward", "no_skill", "hybrid_slate"))
    assert same["tasks"] == 1 and same["profiles"] == ["mixed_task_reward", "no_skill", "hybrid_slate"]
    with pytest.raises(SystemExit, match="task t1: prompt_ids differs between the tables of mixed_task_reward and "
                                         "selector_action_credit"):
        lr.same_tasks(paths, ("mixed_task_reward", "selector_action_credit"))
    with pytest.raises(SystemExit, match="mixed_task_reward and mixed_separated hold different tasks"):
        lr.same_tasks(paths, ("mixed_task_reward", "mixed_separated"))
    with pytest.raises(SystemExit, match="skill_aliases differs"):
        lr.same_tasks(paths, ("mixed_task_reward", "selector_clean_oracle_action_credit"))


def test_learning_result_sh_refuses_a_bad_arm_before_it_runs_anything(tmp_path):
    env = {**__import__("os").environ, "LR_LOCAL": "1", "PYTHON": sys.executable, "LR_HOME": str(tmp_path / "home"),
           "OUT": str(tmp_path / "out"), "PART": "b", "ARMS": "mixed_task_reward,nonesuch@s1"}
    done = subprocess.run(["bash", str(GPU / "learning_result.sh")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-3000:]
    assert "arm 'nonesuch@s1': unknown profile" in done.stdout + done.stderr and "refused" in done.stdout
    assert "prep on GPU" not in done.stdout and not (tmp_path / "home").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["lr_b.log"]  # no job, no tarball


@pytest.mark.e2e
@pytest.mark.slow
def test_a_seeded_arm_and_the_baselines_train_from_the_same_sft_policy_and_evaluate_under_their_labels(tmp_path):
    # tiny-llama on this machine (~2.5 min on 2 cores): the tables of four profiles, two seeds of one GRPO arm, BC
    # and DPO, the evaluations of both seeds and of DPO, and the paper build over them
    from skillgate_core.base.parquet_rows import read_rows
    from skillgate_core.envs import bwrap_sandbox

    if bwrap_sandbox.unavailable_reason():
        pytest.skip(f"bubblewrap unusable here: {bwrap_sandbox.unavailable_reason()}")
    driver = [sys.executable, str(GPU / "learning_result.py")]
    common = ["--scale", "tiny-llama", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "out")]

    def command(*args: str) -> dict:
        done = subprocess.run([*driver, *args, *common], capture_output=True, text=True, timeout=900, cwd=REPO)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        name = f"{args[0]}_{args[args.index('--tag') + 1]}.json"
        return json.loads((tmp_path / "out" / name).read_text())

    prep = command("prep", "--arms", "mixed_task_reward no_skill hybrid_slate bc", "--tag", "p")
    assert prep["rl_data_same"]["profiles"] == ["mixed_task_reward", "no_skill", "hybrid_slate",
                                                "selector_clean_oracle_action_credit"]  # bc: the scale's table
    assert prep["rl_data_same"]["tasks"] == 4
    tables = {p: read_rows(prep["stages"][f"rl_data_{p}"]["outputs"]["rl_data"], ["variants"])[0]["variants"]
              for p in ("no_skill", "hybrid_slate", "mixed_task_reward")}
    assert tables == {"no_skill": ["no_skill"], "hybrid_slate": ["slate", "no_skill"], "mixed_task_reward": ["slate"]}

    trained = command("arm", "--arms", "mixed_task_reward mixed_task_reward@s1 bc dpo", "--tag", "t")
    stages = trained["stages"]
    assert stages["grpo_mixed_task_reward"]["config"]["seed"] == 0 and stages["grpo_mixed_task_reward@s1"]["config"]["seed"] == 1
    assert stages["bc"]["config"]["seed"] == stages["dpo"]["config"]["seed"] == 0
    sft = stages["sft"]["outputs"]["sft_model"]
    assert {stages[k]["inputs"]["sft_model"] for k in ("grpo_mixed_task_reward", "grpo_mixed_task_reward@s1", "bc",
                                                            "dpo")} == {sft}

    def drawn(label: str) -> list[str]:
        rows = [json.loads(x) for x in (tmp_path / "out" / "training" / label / "metrics.jsonl").read_text().splitlines()]
        assert {r["profile"] for r in rows} == {"mixed_task_reward"}
        return [t for r in rows for t in r["drawn_task_ids"]]

    assert drawn("mixed_task_reward@s1") != drawn("mixed_task_reward")  # another seed, another prompt order
    assert json.loads((tmp_path / "out" / "training" / "dpo" / "dpo_summary.json").read_text())["pairs"] > 0
    assert (tmp_path / "out" / "training" / "bc" / "bc_summary.json").is_file()

    evaluated = command("eval", "--arms", "mixed_task_reward mixed_task_reward@s1 dpo", "--tag", "e")
    assert {"eval70_mixed_task_reward", "eval70_mixed_task_reward@s1", "eval70_dpo"} <= set(evaluated["stages"])
    for label in ("mixed_task_reward", "mixed_task_reward@s1", "dpo"):
        rows = read_rows(tmp_path / "out" / "eval" / label / "eval_trials.parquet", ["method"])
        assert len(rows) == 8 and {r["method"] for r in rows} == {label}
    # the paper build pairs the seeded arm and the baseline with the seed-0 arm, each under its own label
    done = subprocess.run([*driver, "paper", "--collected", str(tmp_path / "out"), "--home", str(tmp_path / "paper-home"),
                           "--out", str(tmp_path / "paper")], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = (tmp_path / "paper" / "report" / "report.md").read_text()
    every = report[report.index("Paired bootstrap: every method - mixed_task_reward"):]
    assert "| mixed_task_reward@s1 |" in every and "| dpo |" in every


# --- the paper build: one cohort (every arm from the same SFT policy) --------------------------------------------

SESSION_9A6E7F9 = REPO / "benchmarks" / "results" / "gpu" / "learning_smollm2_9a6e7f9"
SFT_9A6E7F9 = "aaf89e9cc4572552c5925e0ac5f18b9dfe0c9dab3f7e4c236fc0d885d334d52b"


def _collected(tmp_path: Path, *parts: str) -> list[Path]:
    """Copies of folders a GPU session brought back (its command JSONs, eval/ and training/ rows)."""
    import shutil

    for part in parts:
        shutil.copytree(SESSION_9A6E7F9 / part, tmp_path / part)
    return [tmp_path / part for part in parts]


def _paper_argv(tmp_path: Path, collected: list[Path]) -> list[str]:
    return ["paper", *(x for c in collected for x in ("--collected", str(c))), "--home", str(tmp_path / "home"),
            "--out", str(tmp_path / "paper")]


def test_the_paper_builds_one_sessions_arms_and_records_the_sft_policy_each_started_from(tmp_path):
    # the 9a6e7f9 session's evaluations in two calls (arms_3: SFT + four seed-0 arms, arms_4: the SFT eval again and
    # two seed-1 arms): one SFT policy; the SFT eval, copied into both, is one file (~6 s)
    collected = _collected(tmp_path, "arms_3", "arms_4")
    done = subprocess.run([sys.executable, str(GPU / "learning_result.py"), *_paper_argv(tmp_path, collected)],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "warning" not in done.stdout
    paper = json.loads((tmp_path / "paper" / "paper.json").read_text())
    assert paper["sft_lineage"] == {m: SFT_9A6E7F9 for m in (
        "sft", "mixed_task_reward", "selector_clean_oracle_action_credit", "selector_clean_oracle_masked_task_only",
        "selector_clean_oracle_action_credit+identity_first_mention", "mixed_task_reward@s1",
        "selector_clean_oracle_masked_task_only@s1")}
    assert sorted(Path(f).parent.name for f in paper["paper_inputs"]["eval"]).count("sft") == 2
    assert "| mixed_task_reward@s1 |" in (tmp_path / "paper" / "report" / "report.md").read_text()


def test_rows_whose_sft_start_no_record_names_get_a_warning_and_a_null_lineage(tmp_path, capsys):
    lr = _learning_result()
    collected = _collected(tmp_path, "arms_2", "arms_4")
    (collected[1] / "arm_all_2.json").unlink()  # masked@s1's eval and training records
    inputs = lr.paper_inputs(collected)
    assert inputs.sft_lineage == {"sft": SFT_9A6E7F9, "mixed_task_reward@s1": SFT_9A6E7F9,
                                  "selector_clean_oracle_masked_task_only@s1": None}
    # training rows: the sft_model input of the arm's training record in the same folder
    assert inputs.training_lineage == {label: SFT_9A6E7F9 for label in (
        "mixed_task_reward", "mixed_task_reward@s1", "selector_clean_oracle_action_credit+identity_first_mention",
        "selector_clean_oracle_masked_task_only")}
    assert "eval/selector_clean_oracle_masked_task_only@s1 started from (sft_lineage null)" in capsys.readouterr().out


def test_the_paper_refuses_arms_trained_from_different_sft_policies(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "home"))  # were a build to run: restored after
    lr = _learning_result()
    collected = _collected(tmp_path, "arms_3", "arms_4")
    other = "0123456789ab" + SFT_9A6E7F9[12:]
    # one arm's training record names another SFT policy: that arm is of another cohort
    arm_json = collected[1] / "arm_all_1.json"
    record = json.loads(arm_json.read_text())
    assert record["stages"]["grpo_mixed_task_reward@s1"]["input_digests"]["sft_model"] == SFT_9A6E7F9
    record["stages"]["grpo_mixed_task_reward@s1"]["input_digests"]["sft_model"] = other
    arm_json.write_text(json.dumps(record))
    with pytest.raises(SystemExit) as refused:
        lr.main(_paper_argv(tmp_path, collected))
    message = str(refused.value)
    assert "arms trained from different SFT policies are not comparable" in message
    assert "  SFT 0123456789ab: eval/mixed_task_reward@s1\n" in message
    assert ("  SFT aaf89e9cc457: eval/mixed_task_reward, eval/selector_clean_oracle_action_credit, "
            "eval/selector_clean_oracle_action_credit+identity_first_mention, eval/selector_clean_oracle_masked_task_only, "
            "eval/selector_clean_oracle_masked_task_only@s1, eval/sft") in message
    assert not (tmp_path / "paper").exists()  # nothing written to --out
    # a whole folder from another session (its SFT retrained): its SFT eval is of the other cohort too
    for f in collected[1].glob("*.json"):
        f.write_text(f.read_text().replace(SFT_9A6E7F9, other))
    with pytest.raises(SystemExit, match=r"SFT 0123456789ab: eval/mixed_task_reward@s1, "
                                         r"eval/selector_clean_oracle_masked_task_only@s1, eval/sft\n"):
        lr.main(_paper_argv(tmp_path, collected))
    assert not (tmp_path / "paper").exists()


def test_the_paper_refuses_two_differing_copies_of_one_methods_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "home"))  # were a build to run: restored after
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    lr = _learning_result()
    collected = _collected(tmp_path, "arms_3", "arms_4")
    # the SFT eval in arms_4 is no longer the file arms_3 holds (one trial took a second longer, as in a rerun):
    # the build would read only one of them
    rows = collected[1] / "eval" / "sft" / "eval_trials.parquet"
    table = pq.read_table(rows)
    seconds = table.column("seconds").to_pylist()
    seconds[0] += 1.0
    pq.write_table(table.set_column(table.schema.get_field_index("seconds"), "seconds",
                                    pa.array(seconds, pa.float64())), rows)
    with pytest.raises(SystemExit) as refused:
        lr.main(_paper_argv(tmp_path, collected))
    assert str(collected[0] / "eval" / "sft" / "eval_trials.parquet") in str(refused.value)
    assert str(rows) in str(refused.value) and "differs between" in str(refused.value)
    assert not (tmp_path / "paper").exists()
    # the same for an arm's training rows: a copy of arms_2 whose mixed_task_reward metrics lost a step
    copy = tmp_path / "arms_2_copy"
    shutil.copytree(SESSION_9A6E7F9 / "arms_2", copy)
    metrics = copy / "training" / "mixed_task_reward" / "metrics.jsonl"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(SystemExit, match="training/mixed_task_reward/metrics.jsonl differs between"):
        lr.main(_paper_argv(tmp_path, [collected[0], *_collected(tmp_path, "arms_2"), copy]))
    assert not (tmp_path / "paper").exists()


def test_the_paper_refuses_arms_trained_under_different_shared_grpo_settings(tmp_path, monkeypatch):
    """Same SFT policy, same labels, but one arm trained with another step count (LR_ARGS="--grpo-steps 40"):
    not one experiment. The profile, seed and labelled variants are the only settings arms may differ in."""
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "home"))  # were a build to run: restored after
    lr = _learning_result()
    collected = _collected(tmp_path, "arms_1", "arms_2", "arms_3", "arms_4")
    configs = [rec["config"] for _, name, rec in lr.command_records(collected) if name.startswith("grpo_") and "config" in rec]
    assert len({lr.shared_grpo_config({"stage": "grpo", "config": c}) for c in configs}) == 1
    assert {c["profile"] for c in configs} > {"mixed_task_reward"} and {c["seed"] for c in configs} == {0, 1}
    changed = 0
    for arm_json in (f for folder in collected for f in folder.glob("*.json")):  # its training, and its reuse
        record = json.loads(arm_json.read_text())
        if "config" in record["stages"].get("grpo_mixed_task_reward@s1", {}):
            record["stages"]["grpo_mixed_task_reward@s1"]["config"]["steps"] = 40
            arm_json.write_text(json.dumps(record))
            changed += 1
    assert changed == 2
    with pytest.raises(SystemExit) as refused:
        lr.main(_paper_argv(tmp_path, collected))
    message = str(refused.value)
    assert "trained with different shared settings" in message
    assert "  steps=40: eval/mixed_task_reward@s1, training/mixed_task_reward@s1" in message, message
    assert "  steps=16: eval/mixed_task_reward, " in message, message
    assert not (tmp_path / "paper").exists()


def test_agent_rollouts_model_dir_is_checked_before_anything_runs(tmp_path):
    """--model-dir (SmolLM2 on the GPU machine): a folder without an HF config and tokenizer is refused by
    name, and a complete one is what the run plays with."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("agent_rollouts", GPU / "agent_rollouts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit, match=r"--model-dir .*missing config.json, tokenizer_config.json"):
        module.given_model_dir(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "tokenizer_config.json").write_text("{}")
    assert module.given_model_dir(str(tmp_path)) == tmp_path


def test_grpo_workers_put_every_arm_on_ray_train_workers_and_refuse_an_uneven_split(tmp_path, monkeypatch):
    """--grpo-workers N ([gpu-x2]: an arm over two GPUs): launcher ray with N workers for every arm, the rest of
    the arm's config unchanged; a step whose prompts do not split evenly over the workers is refused by name."""
    lr = _learning_result()
    monkeypatch.setenv("SKILLGATE_HOME", str(tmp_path / "home"))  # Run sets it: restored after the test
    common = ["--out", str(tmp_path / "o"), "--home", str(tmp_path / "home"), "--scale", "smollm2"]
    one = lr.Run(lr.parse(["arm", *common]), "arm").cfg["grpo"]
    two = lr.Run(lr.parse(["arm", *common, "--grpo-workers", "2"]), "arm").cfg["grpo"]
    assert (one.launcher, one.num_workers) == ("process", 1) and (two.launcher, two.num_workers) == ("ray", 2)
    assert two.use_gpu is False  # this machine has no GPU: gloo workers; on a GPU machine one GPU each
    assert replace(two, launcher="process", num_workers=1) == one
    armed = lr.arm_config(lr.Run(lr.parse(["arm", *common, "--grpo-workers", "2"]), "arm").cfg,
                          lr.parse_arm("selector_clean_oracle_action_credit"))
    assert (armed.launcher, armed.num_workers, armed.profile) == ("ray", 2, "selector_clean_oracle_action_credit")
    with pytest.raises(ValueError, match=r"prompts_per_step \(4\) must be a multiple of grpo.num_workers \(3\)"):
        lr.Run(lr.parse(["arm", *common, "--grpo-workers", "3"]), "arm")


# slow: a CPU smoke of a GPU benchmark script (~20-30 s); `make test` kept under 25 min on 2 cores (make test-slow runs it)
@pytest.mark.slow
def test_agent_rollouts_measures_live_slots_against_the_whole_cache(agent_rollouts):
    """cached (live slots, the default) and cached_full (live_slots off: every step reads the whole cache)
    on the same episodes: the same turn-cache work, and the bytes per decode token-step from the shapes:
    live slots read less than the whole cache, the whole-cache sampler exactly the whole cache."""
    r = agent_rollouts
    new, old = r["samplers"]["cached"], r["samplers"]["cached_full"]
    assert old["pass"] == "sampler_cached_full"
    assert old["turn_cache"]["rows"] == new["turn_cache"]["rows"] > 0  # every episode turn (merging may differ)
    passes = {p["pass"]: p for p in r["passes"]}
    assert passes["sampler_cached"]["decode_step"]["live_slots"] is True
    assert passes["sampler_cached_full"]["decode_step"]["live_slots"] is False
    live, whole = new["decode_bytes"], old["decode_bytes"]
    assert live["decode_steps"] > 0 and whole["decode_steps"] > 0  # the calls' merging may differ between passes
    assert live["weight_bytes"] < live["bytes_per_token_step"] < live["bytes_per_token_step_whole_cache"]
    assert whole["bytes_per_token_step"] == whole["bytes_per_token_step_whole_cache"]
    assert live["card"] == "cpu" and live["roofline_share_of_generation_time"] is None  # no card: no roofline
    assert passes["sampler_hf"]["decode_bytes"] is None
    # reprefill_shared: a group's first-turn prompt read once per group, not once per episode
    shared = r["samplers"]["reprefill_shared"]["decode_bytes"]
    assert shared["bytes_per_token_step"] < shared["bytes_per_token_step_whole_cache"]
    assert r["ratio"]["cached_over_cached_full"]["episodes_per_min"] == round(
        new["episodes_per_min"] / old["episodes_per_min"], 2)
