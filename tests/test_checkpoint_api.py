"""checkpoint's functions given what does not fit: a model of another kind or config to load
into, a trainer of another model to save, a checkpoints.txt of the user's own, no path at all --
each refused in one line, before anything is loaded or written."""
import json

import numpy as np
import pytest

from minitf import backend, checkpoint
from minitf.models import DecoderLM, EncoderLM
from minitf.optim import AdamW
from minitf.train import Trainer
from test_bad_input import raises

SIZES = dict(vocab_size=17, d_model=16, n_heads=2, n_layers=2, max_len=8)


def _saved(tmp_path, **config):
    with backend.seed(0):
        model = DecoderLM(**{**SIZES, "positional": "rope", **config})
    checkpoint.save(tmp_path / "run", model)
    return tmp_path / "run", model


def _weights(model):
    return {name: backend.to_numpy(value).copy() for name, value in model.state_dict().items()}


@pytest.mark.parametrize("other, key, saved, own", [
    (dict(positional="alibi"), "positional", "'rope'", "'alibi'"),     # logits off by 0.64
    (dict(activation="relu"), "activation", "'gelu'", "'relu'"),
    (dict(causal=False), "causal", "True", "False"),                     # it saw the future
    (dict(init="xavier"), "init", "'normal'", "'xavier'"),
])
def test_a_model_of_another_config_whose_weights_fit_is_refused(tmp_path, other, key, saved, own):
    """The weights' shapes agreed, so the model loaded them and computed other logits, its
    config no longer the checkpoint's -- though the docstring said it was refused."""
    run, _ = _saved(tmp_path)
    with backend.seed(1):
        model = DecoderLM(**{**SIZES, "positional": "rope", **other})
    before = _weights(model)
    with raises(checkpoint.CheckpointError, f"checkpoint {run} holds a model of another config: "
                f"{key}: saved {saved}, model {own}; wanted a DecoderLM of the saved config"):
        checkpoint.load(run, model)
    for name, value in _weights(model).items():             # nothing was loaded
        assert np.array_equal(value, before[name]), name


def test_a_model_of_another_kind_is_refused(tmp_path):
    run, _ = _saved(tmp_path)
    model = EncoderLM(17, d_model=16, n_heads=2, n_layers=2, max_len=8)
    with raises(checkpoint.CheckpointError, f"checkpoint {run} holds a 'lm' model (DecoderLM); "
                                            f"model is a EncoderLM ('mlm')"):
        checkpoint.load(run, model)


def test_other_dropout_and_max_len_load_the_same_weights(tmp_path):
    """Trained weights in a model of other dropout is fine-tuning; max_len is only the longest
    input (minitf train --resume may change --context). Both must keep loading."""
    run, saved = _saved(tmp_path)
    model = DecoderLM(**{**SIZES, "positional": "rope", "dropout": 0.3, "attn_dropout": 0.2,
                         "max_len": 16})
    checkpoint.load(run, model)
    saved.eval(), model.eval()
    ids = backend.to_device(np.arange(8)[None] % 17)
    assert np.array_equal(backend.to_numpy(model(ids)), backend.to_numpy(saved(ids)))


def test_a_key_an_older_checkpoint_lacks_is_its_default(tmp_path):
    """A config saved before a setting existed (init, say) is that setting's default: a model
    of the default loads, and one of another is refused naming the default."""
    run, _ = _saved(tmp_path)
    meta_file = run / checkpoint.find(run).name / checkpoint.META
    meta = json.loads(meta_file.read_text())
    del meta["config"]["init"]
    meta_file.write_text(json.dumps(meta))
    checkpoint.load(run, DecoderLM(**SIZES, positional="rope"))
    with raises(checkpoint.CheckpointError, "init: saved 'normal', model 'xavier'"):
        checkpoint.load(run, DecoderLM(**SIZES, positional="rope", init="xavier"))


def test_a_trainer_of_another_model_is_not_saved_with_this_one(tmp_path):
    """A's weights were saved with B's optimizer state, step and history, and resumed."""
    a, b = DecoderLM(**SIZES), DecoderLM(**SIZES)
    trainer = Trainer(b, AdamW(b), batches=None)
    trainer.step = 5
    with raises(ValueError, "checkpoint.save: trainer trains another model than model; wanted "
                            "save(directory, trainer.model, trainer)"):
        checkpoint.save(tmp_path / "run", a, trainer)
    assert not (tmp_path / "run").exists()
    checkpoint.save(tmp_path / "run", b, trainer)                        # its own: saved


@pytest.mark.parametrize("content", [
    "my notes\nmore notes\nand more\nand still more\n",
    "step-000001\nbest run so far\n",                        # one line that is no checkpoint
])
def test_a_checkpoints_txt_of_ones_own_is_not_rewritten(tmp_path, content):
    """A folder's checkpoints.txt of the user's own was rewritten, and cut to three lines."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / checkpoint.INDEX).write_text(content)
    model = DecoderLM(**SIZES)
    trainer = Trainer(model, AdamW(model), batches=None)
    line = next(n for n, text in enumerate(content.splitlines(), 1) if not text.startswith("step"))
    with raises(checkpoint.CheckpointError, f"checkpoint {folder}: checkpoints.txt is not "
                                            f"minitf's (line {line}", "names no checkpoint",
                "a save would rewrite it", "or save to another directory"):
        checkpoint.save(folder, model, trainer)
    assert (folder / checkpoint.INDEX).read_text() == content
    assert [p.name for p in folder.iterdir()] == [checkpoint.INDEX]       # nothing written


def test_a_run_s_own_list_still_saves(tmp_path):
    """The list minitf wrote, and one edited to name a checkpoint elsewhere, are rewritten."""
    run, model = _saved(tmp_path)
    checkpoint.save(run, model)
    assert (run / checkpoint.INDEX).read_text() == "step-000000-1\nstep-000000\n"


@pytest.mark.parametrize("path, got", [(None, "None"), (3, "3")])
def test_is_whole_wants_a_path(path, got):
    """It was pathlib's "expected str, bytes or os.PathLike object, not NoneType"."""
    with raises(TypeError, f"checkpoint.is_whole: step_directory must be a path (a str or a "
                           f"pathlib.Path); got {got}"):
        checkpoint.is_whole(path)


def _run_at(tmp_path, steps=(800, 845, 900)):
    """A run directory whose trainer saved at ``steps`` (the last current), and its model."""
    with backend.seed(0):
        model = DecoderLM(**SIZES)
    trainer = Trainer(model, AdamW(model), batches=None)
    for step in steps:
        trainer.step = step
        checkpoint.save(tmp_path / "run", model, trainer)
    return tmp_path / "run", model, trainer


def test_saves_into_another_run_are_refused_and_its_checkpoints_kept(tmp_path):
    """Three saves of a model alone (step 0) into a run's directory made the first current and
    then took the place of steps 800, 845 and 900: the run was gone."""
    run, model, _ = _run_at(tmp_path)
    listed = (run / checkpoint.INDEX).read_text()
    for _ in range(3):
        with raises(checkpoint.CheckpointError, f"checkpoint.save: the current checkpoint of {run} "
                    f"(step-000900) is at step 900, and this save at step 0:",
                    "wanted a save at step ≥ 900", "or save it to a directory of its own"):
            checkpoint.save(run, model)
    with backend.seed(1):
        other = DecoderLM(**{**SIZES, "d_model": 8})
    with raises(checkpoint.CheckpointError, f"checkpoint.save: the current checkpoint of {run} "
                f"(step-000900) holds a model of another config: d_model: saved 16, model 8",
                "or save it to a directory of its own"):
        checkpoint.save(run, other, Trainer(other, AdamW(other), batches=None))
    with raises(checkpoint.CheckpointError, "holds a 'lm' model (DecoderLM); model is a "
                                            "EncoderLM"):
        checkpoint.save(run, EncoderLM(**SIZES))
    assert (run / checkpoint.INDEX).read_text() == listed
    assert sorted(p.name for p in run.iterdir()) == [checkpoint.INDEX, *sorted(listed.split())]


def test_the_run_itself_continues(tmp_path):
    """Its trainer at the same step (a Ctrl-C save) or later, and its model with other dropout,
    which a load may change: saved, and current."""
    run, model, trainer = _run_at(tmp_path)
    checkpoint.save(run, model, trainer)                                  # step 900 again
    trainer.step = 950
    checkpoint.save(run, model, trainer)
    assert (run / checkpoint.INDEX).read_text() == "step-000950\nstep-000900-1\nstep-000900\n"
    tuned = DecoderLM(**{**SIZES, "dropout": 0.1})
    tuned.load_state_dict(model.state_dict())
    trainer = Trainer(tuned, AdamW(tuned), batches=None)
    trainer.step = 960
    checkpoint.save(run, tuned, trainer)
    assert checkpoint.find(run).name == "step-000960"


def test_a_current_checkpoint_that_cannot_be_read_does_not_block_a_save(tmp_path):
    run, model, _ = _run_at(tmp_path, steps=(900,))
    (run / "step-000900" / checkpoint.META).write_text("{ not json")
    checkpoint.save(run, model)                                            # how a run recovers
    assert checkpoint.find(run).name == "step-000000"


def test_a_config_edited_by_hand_names_a_few_weights_and_counts_the_rest(tmp_path):
    """d_model edited in checkpoint.json: every weight misfit, in one line of 1,400 characters."""
    run, _ = _saved(tmp_path)
    meta_path = checkpoint.find(run) / checkpoint.META
    meta = json.loads(meta_path.read_text())
    meta["config"]["d_model"] = 32
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(run)
    said = str(err.value)
    assert "saved (17, 16), model (17, 32)" in said and "more" in said, said
    assert said.count(": saved ") == 6 and len(said) < 600 and "\n" not in said, said
