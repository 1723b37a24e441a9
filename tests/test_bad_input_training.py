"""Bad input to an optimizer or a Trainer: refused in one line where it is given, never a run
that trains nothing, updates a weight twice, or broadcasts a gradient of the wrong shape."""
import numpy as np
import pytest

from minitf import backend, data
from minitf.models import DecoderLM
from minitf.nn import Linear
from minitf.optim import SGD, Adam, AdamW
from minitf.train import Trainer
from test_bad_input import raises


def _lm():
    return DecoderLM(10, d_model=16, n_heads=2, n_layers=1, max_len=16)


def _batches(ids=np.arange(200) % 10):
    return lambda: data.random_windows(ids, 4, 8)


def test_an_optimizer_refuses_a_parameter_twice_and_a_gradient_of_another_shape():
    layer = Linear(3, 2)
    with raises(ValueError, "SGD: params holds the same Parameter more than once"):
        SGD(layer.parameters() * 2, lr=1.0)
    optimizer = Adam(layer)
    weights = [backend.to_numpy(p.data).copy() for p in layer.parameters()]
    layer.W.grad = backend.to_device(np.ones((1, 2)))            # would broadcast over W's rows
    with raises(ValueError, "Adam.step: parameter 0 (3, 2) has a gradient of shape (1, 2)"):
        optimizer.step()
    assert optimizer.t == 0, "a refused step takes no step"
    layer.W.grad = backend.to_device(np.ones((3, 2)))
    for lr in (float("nan"), -1.0):                               # set by hand after it was made
        optimizer.lr = lr
        with raises(ValueError, "Adam.step: lr must be a finite number ≥ 0", repr(lr)):
            optimizer.step()
    for before, p in zip(weights, layer.parameters()):          # no weight moved
        np.testing.assert_array_equal(backend.to_numpy(p.data), before)


@pytest.mark.parametrize("change, fragments", [
    (lambda s: s.pop("t"), ["saved must be a dict holding 'arrays', 't' and 'lr'"]),
    (lambda s: s.update(t=-5), ["t must be an integer ≥ 0", "-5"]),
    (lambda s: s.update(t=2.7), ["t must be an integer ≥ 0", "2.7"]),
    (lambda s: s.update(lr=float("nan")), ["lr must be a finite number ≥ 0", "nan"]),
    (lambda s: s["arrays"]["m.0"].fill(np.nan), ["state m.0", "NaN"]),
    (lambda s: s["arrays"]["v.1"].fill(-1e-3), ["state v.1 holds negative values", "≥ 0"]),
])
def test_an_optimizer_state_that_would_ruin_the_weights_is_refused(change, fragments):
    layer = Linear(3, 2)
    optimizer = AdamW(layer)
    saved = optimizer.state_dict()
    change(saved)
    with raises(ValueError, "AdamW.load_state_dict:", *fragments):
        optimizer.load_state_dict(saved)


def test_a_negative_first_moment_loads():
    """m is a running mean of gradients, negative as often as not; only v must be ≥ 0."""
    optimizer = AdamW(Linear(3, 2))
    saved = optimizer.state_dict()
    saved["arrays"]["m.0"].fill(-1.0)
    optimizer.load_state_dict(saved)
    assert (backend.to_numpy(optimizer.state["m"][0]) == -1.0).all()


def test_a_trainer_refuses_what_it_cannot_train_with_when_it_is_made():
    lm = _lm()
    other = _lm()
    with raises(ValueError, "Trainer: optimizer holds none of model's parameters"):
        Trainer(lm, Adam(other), _batches())            # it trained nothing, and said nothing
    for settings, error, fragments in [
        (dict(model=None), TypeError, ["model is a NoneType", "loss("]),
        (dict(optimizer="adam"), TypeError, ["optimizer is a str"]),
        (dict(batches=[1, 2]), TypeError, ["batches is a list", "a function or None"]),
        (dict(schedule=0.1), TypeError, ["schedule is a float"]),
        (dict(eval_every=0), ValueError, ["eval_every must be a positive integer"]),
        (dict(eval_every=2.5), ValueError, ["eval_every must be a positive integer"]),
        (dict(save_every=-1), ValueError, ["save_every must be an integer ≥ 0"]),
        (dict(clip=0), ValueError, ["clip must be a finite number > 0"]),
        (dict(save_every=1), ValueError, ["save_every=1 but save is None"]),   # saved never
    ]:
        arguments = dict(model=lm, optimizer=Adam(lm), batches=_batches()) | settings
        with raises(error, "Trainer:", *fragments):
            Trainer(**arguments)
    trainer = Trainer(lm, Adam(lm), _batches())
    for steps in (-5, 2.5, "3"):
        with raises(ValueError, "Trainer.fit: steps must be an integer ≥ 0", repr(steps)):
            trainer.fit(steps, progress=False)
    with raises(ValueError, "Trainer.fit: progress must be True or False; got 'no'"):
        trainer.fit(1, progress="no")                     # it drew the bar
    with raises(ValueError, "Trainer.validate: evaluate is None"):
        trainer.validate()
    with raises(ValueError, "Trainer.fit: batches is None"):
        Trainer(lm, Adam(lm), None).fit(1, progress=False)
    Trainer(lm, Adam(lm.parameters()[-2:]), _batches()).fit(1, progress=False)   # a part will do


def test_a_schedule_wants_a_step_count_and_the_norms_want_parameters():
    from minitf.optim import Noam, WarmupCosine, clip_grad_norm, grad_norm
    for step in (-5, float("nan"), "3"):              # -5 gave a negative lr, nan gave 0.0
        with raises(ValueError, "WarmupCosine: step must be an integer ≥ 0", repr(step)):
            WarmupCosine(1e-3, 10, 100)(step)
    for step in (-3, 10 ** 400):                      # 10**400 was float's OverflowError
        with raises(ValueError, "Noam: step must be an integer ≥ 0 (and ≤ 2^53 = 9007199254740992)"):
            Noam(64, 100)(step)
    assert WarmupCosine(1e-3, 10, 100, 1e-5)(10 ** 400) == 1e-5      # flat after: min_lr
    for sizes in ((10 ** 400,), (64, 10 ** 400)):                 # d_model, warmup: the same
        with raises(ValueError, "Noam: ", "must be a positive integer (and ≤ 2^53 = 9007199254740992)"):
            Noam(*sizes)
    with raises(TypeError, "grad_norm: params must be a Module or a non-empty list"):
        grad_norm(None)
    with raises(TypeError, "clip_grad_norm: params must be a Module or a non-empty list"):
        clip_grad_norm(5, 1.0)


def test_fit_to_a_step_already_done_is_refused():
    """fit(steps) trains until trainer.step == steps: fit(3) run again after fit(3), as a
    notebook cell is to train more, returned the old history and trained nothing."""
    lm = _lm()
    trainer = Trainer(lm, Adam(lm), _batches())
    trainer.fit(0, progress=False)                          # nothing to do, nothing done: fine
    trainer.fit(3, progress=False)
    for steps in (3, 2):
        with raises(ValueError, f"Trainer.fit: steps={steps} is the step to train until, and 3 "
                                f"are done", f"e.g. fit({3 + steps}) for {steps} more"):
            trainer.fit(steps, progress=False)
    assert trainer.step == 3
    trainer.fit(5, progress=False)
    assert trainer.step == 5 and len(trainer.history["loss"]) == 5


@pytest.mark.parametrize("returned, got", [
    (None, "None"), (np.zeros((4, 8), dtype=np.int64), "one ndarray"), ((np.zeros(3),), "a tuple of 1")])
def test_a_batches_that_does_not_return_inputs_and_targets_is_one_line(returned, got):
    """A batches() whose return was forgotten unpacked as a raw TypeError; one array was split
    into its rows, and the model blamed the rows' shape."""
    lm = _lm()
    trainer = Trainer(lm, Adam(lm), lambda: returned)
    with raises(TypeError, f"Trainer: batches() returned {got}; wanted a tuple (inputs…, "
                           f"targets), e.g. (x, y) for a language model"):
        trainer.fit(1, progress=False)
    assert trainer.step == 0 and trainer.history["loss"] == []         # no step was counted


def test_a_batch_the_model_refuses_counts_no_step():
    """The step was counted before the model refused the batch: fit(3) run again with the
    batches fixed trained two steps, and the step, the optimizer's t and the schedule parted."""
    lm = _lm()
    bad = np.full((4, 8), 20)                              # ids beyond vocab_size=10
    batches = [lambda: (bad, bad % 10), _batches()]
    trainer = Trainer(lm, Adam(lm), lambda: batches[0]())
    with raises(ValueError, "DecoderLM: ids must lie in [0, vocab_size=10)"):
        trainer.fit(3, progress=False)
    assert trainer.step == 0 and trainer.optimizer.t == 0 and trainer.history["loss"] == []
    batches.pop(0)
    trainer.fit(3, progress=False)
    assert trainer.history["step"] == [1, 2, 3] and trainer.optimizer.t == 3

    def interrupted(*args):                       # Ctrl-C inside a step's forward (a notebook)
        raise KeyboardInterrupt
    lm.loss = interrupted
    with pytest.raises(KeyboardInterrupt):
        trainer.fit(4, progress=False)
    assert trainer.step == 3 and trainer.optimizer.t == 3


def test_a_validation_loss_that_is_not_finite_stops_the_run():
    from minitf.train import TrainingDiverged
    lm = _lm()
    trainer = Trainer(lm, Adam(lm), _batches(), evaluate=lambda: float("nan"), eval_every=1)
    with pytest.raises(TrainingDiverged, match="at step 1: the validation loss .* is nan"):
        trainer.fit(3, progress=False)
    assert trainer.history["val_loss"] == [], "nothing not finite is kept in the history"
    for returned in (None, np.array([1.0, 2.0]), True):   # float(None): a raw TypeError
        trainer = Trainer(lm, Adam(lm), _batches(), evaluate=lambda r=returned: r, eval_every=1)
        with raises(TypeError, "Trainer.validate: evaluate returned", "wanted the validation loss"):
            trainer.fit(1, progress=False)
    trainer = Trainer(lm, Adam(lm), _batches(), evaluate=lambda: np.float32(2.5), eval_every=1)
    trainer.fit(1, progress=False)                        # a NumPy number is a number
    assert trainer.history["val_loss"] == [2.5]


def test_load_wants_a_model_to_load_into(tmp_path):
    """load(path, model='lm') failed with "'str' object has no attribute 'load_state_dict'"."""
    from minitf import checkpoint
    checkpoint.save(tmp_path, DecoderLM(5, d_model=8, n_heads=2, n_layers=1, max_len=8))
    with raises(TypeError, "checkpoint.load: model is a str; wanted a minitf model"):
        checkpoint.load(tmp_path, model="lm")


def test_an_optimizer_state_of_lists_is_refused_by_name():
    """A moment given as a list failed with "'list' object has no attribute 'shape'"."""
    lm = _lm()
    optimizer = Adam(lm)
    saved = optimizer.state_dict()
    saved["arrays"] = {key: value.tolist() for key, value in saved["arrays"].items()}
    with raises(ValueError, "Adam.load_state_dict: state", "missing or has the wrong shape"):
        optimizer.load_state_dict(saved)


@pytest.mark.parametrize("returned", [-1.0, float("nan"), "1e-3", None])
def test_a_schedule_that_returns_a_bad_lr_is_named_and_changes_nothing(returned):
    """It was the optimizer's error ("AdamW.step: lr must be …"), with the step counted and the
    bad lr left in the optimizer, where a later Trainer failed with an lr no one had set."""
    lm = _lm()
    optimizer = Adam(lm, 1e-3)
    trainer = Trainer(lm, optimizer, _batches(), schedule=lambda step: returned)
    with raises(ValueError, "Trainer: schedule(1) must be a finite number ≥ 0", repr(returned)):
        trainer.fit(1, progress=False)
    assert trainer.step == 0 and optimizer.lr == 1e-3 and trainer.history["loss"] == []


def test_load_state_dict_takes_what_np_load_reads_back_and_a_refused_save_makes_no_folder(
        tmp_path):
    """checkpoint.save's own error advises np.savez and load_state_dict for a model of one's
    own: np.load's NpzFile was then refused ('got NpzFile')."""
    from minitf import checkpoint
    layer, other = Linear(3, 2), Linear(3, 2)
    np.savez(tmp_path / "w.npz", **layer.state_dict())
    other.load_state_dict(np.load(tmp_path / "w.npz"))
    assert np.array_equal(backend.to_numpy(other.W.data), backend.to_numpy(layer.W.data))
    lm = _lm()
    lm.parameters()[0].data[0, 0] = np.nan               # what load would refuse: refused first
    with raises(checkpoint.CheckpointError, "checkpoint.save: model/tok_emb.W holds NaN"):
        checkpoint.save(tmp_path / "new" / "run", lm)
    assert not (tmp_path / "new").exists()


def test_a_schedule_that_takes_no_step_is_refused_when_the_trainer_is_made():
    """An evaluate passed where the schedule goes failed at the first step only, with
    "<lambda>() takes 0 positional arguments but 1 was given"."""
    from minitf.optim import Noam, WarmupCosine
    lm = _lm()
    for settings, fragments in [
        (dict(schedule=lambda: 2.0), ["schedule takes (); wanted one argument, the step",
                                      "goes in evaluate="]),
        (dict(schedule=lambda step, lr: lr), ["schedule takes (step, lr); wanted one argument"]),
        (dict(evaluate=lambda model: 2.0), ["evaluate takes (model); wanted no argument"]),
        (dict(batches=lambda n: n), ["batches takes (n); wanted no argument"]),
        (dict(save=lambda out: None), ["save takes (out); wanted no argument"]),
    ]:
        arguments = dict(model=lm, optimizer=Adam(lm), batches=_batches()) | settings
        with raises(TypeError, "Trainer:", *fragments):
            Trainer(**arguments)
    with raises(TypeError, "Trainer: schedule takes ()"):
        Trainer(lm, Adam(lm), _batches(), lambda: 2.0)                 # as the finding had it
    # leniently: whatever takes one argument, and what Python cannot read the signature of
    for schedule in (WarmupCosine(1e-3, 1, 10), Noam(16), lambda step, *rest: 1e-3,
                     lambda step=0: 1e-3, max):
        Trainer(lm, Adam(lm), _batches(), schedule)


def test_a_save_with_save_every_0_is_left_to_the_caller():
    """save_every=0 (the default) with a save: no save during the run, the end's is the
    caller's -- what minitf train --save-every 0 is (it passes its save always, and saves the
    last step itself; a Trainer that saved too would make two checkpoints of it)."""
    lm = _lm()
    saves = []
    trainer = Trainer(lm, Adam(lm), _batches(), save=lambda: saves.append(trainer.step))
    trainer.fit(4, progress=False)
    assert trainer.step == 4 and saves == []
    trainer = Trainer(lm, Adam(lm), _batches(), save=lambda: saves.append(trainer.step),
                      save_every=2)
    trainer.fit(4, progress=False)
    assert saves == [2]                                   # before the last; the last is the caller's


def test_the_lessons_character_model_trains_for_a_few_steps_and_refuses_none():
    """train_char_lm(ids, V, steps=10), a lesson shortened for a quick test, was refused by its
    schedule, 'wanted 0 ≤ warmup < total; got warmup=20, total=10', naming neither."""
    import numpy as np
    from minitf import course
    ids = np.random.default_rng(0).integers(0, 7, 400)
    lm = course.train_char_lm(ids, 7, steps=10)
    assert lm.tok_emb.W.data.dtype == np.float64
    with pytest.raises(ValueError, match=r"^train_char_lm: steps must be a positive integer, the "
                                         r"AdamW steps to train; got 0$"):
        course.train_char_lm(ids, 7, steps=0)
