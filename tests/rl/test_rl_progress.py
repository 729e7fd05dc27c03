"""Rank 0's training progress: one readable line per optimizer step off a terminal, nothing elsewhere."""

from __future__ import annotations

import io

from skillgate_core.rl.progress import progress_style, step_progress


def test_a_line_per_step_off_a_terminal_and_nothing_on_other_ranks():
    out = io.StringIO()
    assert progress_style(out) == "lines"
    progress = step_progress(total=5, initial=2, desc="grpo exp-1", style="lines", under_ray=False, stream=out)
    progress.step({"step": 2, "reward": 0.5, "kl": None, "time_step_s": 12.34, "trained": True,
                   "time_generate_s": 9.0, "time_env_s": 2.25, "time_train_s": 1.0, "episodes_played": 48})
    progress.step({"step": 3, "reward": 0.25, "time_generate_s": 1.0, "groups_accepted": 0, "groups_drawn": 8,
                   "optimizer_step_taken": False})
    # a row with the env phases (time_env_*_s) shows where env went
    progress.step({"step": 4, "time_generate_s": 4.0, "time_env_s": 5.5, "time_train_s": 3.5, "time_env_start_s": 0.3,
                   "time_env_tools_s": 3.2, "time_env_verify_s": 1.9})
    progress.close()
    assert out.getvalue().splitlines() == [
        "grpo exp-1: step 3/5  reward 0.500  s/step 12.3  (generate 9.0, env 2.2, train 1.0)  played 48",
        "grpo exp-1: step 4/5  reward 0.250  accepted 0/8 (no update)",
        "grpo exp-1: step 5/5  (generate 4.0, env 5.5 [start 0.3, tools 3.2, verify 1.9], train 3.5)"]
    quiet = io.StringIO()
    other = step_progress(total=4, initial=0, desc="x", style="lines", under_ray=False, enabled=False, stream=quiet)
    other.step({"reward": 1.0})
    assert quiet.getvalue() == ""


def test_a_bar_ticks_once_per_step():
    out = io.StringIO()
    progress = step_progress(total=3, initial=1, desc="grpo", style="bar", under_ray=False, stream=out)
    progress.step({"reward": 1.0})
    assert progress._bar is not None and progress._bar.n == 2
    progress.close()
    assert "2/3" in out.getvalue()


def test_the_driver_follows_the_workers_metrics_file(tmp_path):
    """Under Ray the driver ticks once per step row the workers append (rows of a step counted once,
    steps before a resume skipped, a half-written last line read when complete)."""
    import json
    import time

    from skillgate_core.rl.progress import follow_metrics

    path, out = tmp_path / "seg" / "metrics.jsonl", io.StringIO()
    with follow_metrics(path, total=4, initial=1, desc="grpo exp", style="lines", poll_s=0.05, stream=out):
        time.sleep(0.1)  # the file does not exist yet
        path.parent.mkdir()
        with path.open("w") as fh:
            fh.write(json.dumps({"step": 0, "reward": 9.0}) + "\n")  # done before the resume
            fh.write(json.dumps({"step": 1, "reward": 0.5}) + "\n" + json.dumps({"step": 1, "reward": 0.5}) + "\n")
            fh.write('{"step": 2, "rew')
            fh.flush()
            time.sleep(0.2)
            fh.write('ard": 0.25}\n')
    assert out.getvalue().splitlines() == ["grpo exp: step 2/4  reward 0.500", "grpo exp: step 3/4  reward 0.250"]


def test_until_the_first_step_the_driver_says_every_so_often_that_it_is_still_starting(tmp_path):
    """Minutes of Ray and DeepSpeed start-up under load are not silence: a line every waiting_every_s
    until the first step row, none after it."""
    import json
    import re
    import time

    from skillgate_core.rl.progress import follow_metrics

    path, out = tmp_path / "metrics.jsonl", io.StringIO()
    with follow_metrics(path, total=2, initial=0, desc="grpo exp", style="lines", poll_s=0.02, stream=out,
                        waiting="still starting (Ray, DeepSpeed)", waiting_every_s=0.1):
        time.sleep(0.35)
        path.write_text(json.dumps({"step": 0, "reward": 0.5}) + "\n")
        time.sleep(0.35)
    lines = out.getvalue().splitlines()
    first_step = lines.index("grpo exp: step 1/2  reward 0.500")
    assert first_step >= 2 and all(re.fullmatch(r"grpo exp: still starting \(Ray, DeepSpeed\) \(\d+ s\)", x)
                                   for x in lines[:first_step])
    assert lines[first_step + 1:] == []
