"""--resume takes up a progress file only when each exercise in it appears once: graded, or the
one the process ended inside."""
import json

import pytest

from minitf.homework.journal import Journal

EXERCISES = ["softmax_backward", "layer_norm_backward"]
GRADED = {"name": "softmax_backward", "score": 1.0, "max_score": 1.0, "status": "passed",
          "output": "ok"}


def _progress(tmp_path, running):
    out = tmp_path / "results.json"
    out.with_name("results.json.progress").write_text(json.dumps(
        {"tests": [GRADED], "running": running, "seconds": 2.0, "note": "", "started": 0,
         "of": ""}), encoding="utf-8")
    return out


def test_a_progress_that_names_a_graded_exercise_as_running_is_refused(tmp_path):
    """softmax_backward graded and also the one running: no grading writes that, so it is refused
    and removed rather than scored twice (once 1, once 0)."""
    out = _progress(tmp_path, "softmax_backward")
    with pytest.raises(ValueError, match="is not the progress of this homework's grading"):
        Journal(out, EXERCISES, resume=True)
    assert not out.with_name("results.json.progress").exists()


def test_a_progress_that_ended_inside_the_next_exercise_is_taken_up(tmp_path):
    """softmax_backward graded, layer_norm_backward running: the first keeps its 1 point, the
    second is scored 0 of 1, and both count as graded."""
    journal = Journal(_progress(tmp_path, "layer_norm_backward"), EXERCISES, resume=True)
    assert journal.graded == set(EXERCISES)
    assert [(t["name"], t["score"], t["max_score"]) for t in journal.tests] == [
        ("softmax_backward", 1.0, 1.0), ("layer_norm_backward", 0.0, 1.0)]
    assert journal.seconds == 2.0
