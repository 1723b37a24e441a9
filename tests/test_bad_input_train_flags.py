"""The model's flags of ``minitf train`` and ``minitf info``: a model they cannot build, a flag the
chosen model never reads, a context a resumed run cannot take -- each one line in the flags' own
names, before the text is read; and ``minitf info`` prices every model family, and by default the
model ``minitf train`` builds."""
import re

import pytest

from minitf import backend, char_lm, checkpoint, cli, data
from minitf.cost_families import CONFIG, describe_cost, encoder_cost, mlm_cost
from minitf.models import MODELS, EncoderLM, SetEncoder
from test_run_directory import one_line, text  # noqa: F401 (text: a fixture)


def forbid_reading(monkeypatch):
    """Reading a text fails the test from here on: a refusal must come before it."""
    def read(*_):
        pytest.fail("the text was read before the flags were checked")
    monkeypatch.setattr(data, "read_text", read)
    monkeypatch.setattr(data, "default_corpus", read)


@pytest.fixture
def unread(monkeypatch):
    forbid_reading(monkeypatch)


def train(*flags) -> int:
    return cli.main(["train", "--fast", "--no-progress", *flags])


# -- heads that cannot split the width ------------------------------------------------------------

DIVIDE = "; wanted d_model = n_heads · d_head"


@pytest.mark.parametrize("flags, message", [
    (["--fast", "--n-heads", "3"], "--d-model 32 is not divisible by --n-heads 3" + DIVIDE),
    (["--n-heads", "3"], "--d-model 128 is not divisible by --n-heads 3" + DIVIDE),
    (["--fast", "--n-heads", "32"],
     "--positional rope needs an even head width; got --d-model 32 / --n-heads 32 = 1"),
    (["--d-model", "30", "--n-heads", "2", "--positional", "rope"],
     "--positional rope needs an even head width; got --d-model 30 / --n-heads 2 = 15"),
])
def test_heads_that_cannot_split_the_width_are_named_by_the_flags(flags, message, capsys,
                                                                   tmp_path, unread):
    """Was DecoderLM's d_model=32 and n_heads=3, after the whole corpus had been read."""
    out = tmp_path / "run"
    assert cli.main(["train", "--no-progress", *flags, "--out", str(out)]) == 2
    assert one_line(capsys) == f"minitf train: {message}"
    assert not out.exists()


@pytest.mark.parametrize("sizes", [["--d-model", "32", "--n-heads", "3"],
                                   ["--d-model", "30", "--n-heads", "2"]])
def test_train_and_info_refuse_the_same_sizes_in_the_same_words(sizes, capsys, tmp_path,
                                                                unread):
    assert train(*sizes, "--out", str(tmp_path / "run")) == 2
    trained = one_line(capsys).removeprefix("minitf train: ")
    assert cli.main(["info", *sizes]) == 2                  # info's positions are train's, rope
    assert one_line(capsys).removeprefix("minitf info: ") == trained


# -- a resumed run's context -----------------------------------------------------------------------

def _run(text, directory, *flags):
    """A two-step run of --fast's model (context 32) in ``directory``."""
    assert train("--text", text, "--steps", "2", "--out", str(directory), *flags) == 0
    return directory


def test_a_resume_cannot_change_the_context_of_learned_positions(text, tmp_path, capsys,
                                                                monkeypatch):
    """Was blamed on the checkpoint: "pos_emb.W: saved (32, 32), model (16, 32)"."""
    run = _run(text, tmp_path / "learned", "--positional", "learned")
    before = sorted(p.name for p in run.iterdir())
    forbid_reading(monkeypatch)
    assert cli.main(["train", "--resume", str(run), "--steps", "3", "--context", "16"]) == 2
    assert one_line(capsys) == (
        f"minitf train: --context 16: the run in {run} was trained with 32, and the table of its "
        f"learned positions, a vector for each position of the context, cannot change as it "
        f"resumes; leave the flag out, or start a new run with --out")
    assert sorted(p.name for p in run.iterdir()) == before


@pytest.mark.parametrize("flags", [["--positional", "rope"], ["--positional", "alibi"],
                                   ["--positional", "relative"], ["--positional", "sinusoidal"],
                                   ["--model", "lstm"]], ids=lambda flags: flags[1])
def test_a_resume_may_change_the_context_of_any_other_model(flags, text, tmp_path, capsys):
    """No weight of these has the context's size: the resumed run reads shorter windows."""
    run = _run(text, tmp_path / "run", *flags)
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run), "--steps", "3", "--context", "16",
                     "--no-progress"]) == 0, capsys.readouterr().err
    meta = checkpoint.read_meta(run)
    assert meta["step"] == 3 and meta["config"]["max_len"] == meta["extra"]["run"]["context"] == 16


# -- the recurrent baseline and the Transformer's flags --------------------------------------------

@pytest.mark.parametrize("model, flag, value", [
    ("lstm", "--dropout", "0.5"), ("rnn", "--positional", "alibi"), ("lstm", "--n-heads", "4"),
    ("rnn", "--n-layers", "3"), ("lstm", "--d-ff", "64")])
def test_the_recurrent_model_refuses_a_flag_it_would_ignore(model, flag, value, capsys,
                                                           tmp_path, unread):
    """Each was ignored, and recorded in the run's settings as if it had been used."""
    out = tmp_path / "run"
    assert train("--model", model, flag, value, "--out", str(out)) == 2
    assert one_line(capsys) == (f"minitf train: {flag} {value}: --model {model} uses only "
                                f"--d-model and --context of the model's flags; leave it out")
    assert not out.exists()


def test_the_recurrent_model_names_every_flag_it_would_ignore(capsys, tmp_path, unread):
    assert train("--model", "rnn", "--n-heads", "2", "--dropout", "0.1",
                 "--out", str(tmp_path / "run")) == 2
    assert one_line(capsys) == ("minitf train: --n-heads 2, --dropout 0.1: --model rnn uses only "
                                "--d-model and --context of the model's flags; leave them out")


def test_a_resumed_recurrent_run_refuses_them_too(text, tmp_path, capsys, monkeypatch):
    run = _run(text, tmp_path / "lstm", "--model", "lstm", "--d-model", "16")
    forbid_reading(monkeypatch)
    assert cli.main(["train", "--resume", str(run), "--steps", "3", "--n-heads", "4"]) == 2
    assert one_line(capsys) == (f"minitf train: --n-heads 4: the run in {run} is --model lstm, "
                                f"which uses only --d-model and --context of the model's flags; "
                                f"leave it out")


# -- minitf info: every family, and by default the model minitf train builds -----------------------

@pytest.mark.parametrize("model", [
    EncoderLM(23, d_model=8, n_heads=2, n_layers=2, d_ff=12, max_len=9),
    EncoderLM(23, d_model=8, n_heads=2, n_layers=1, max_len=7, n_segments=2),
    SetEncoder(5, 3, d_model=8, n_heads=2, n_layers=2, d_ff=12),
    SetEncoder(5, 3, d_model=8, n_heads=2, n_layers=1, pooling="mean"),
    SetEncoder(5, 3, d_model=8, n_heads=2, n_layers=1, pooling="mean", max_len=6),
    SetEncoder(5, 3, d_model=8, n_heads=2, n_layers=1, max_len=6)],
    ids=["mlm", "mlm-segments", "set-cls", "set-mean", "set-mean-positions", "set-cls-positions"])
def test_info_prices_a_checkpoint_of_bert_and_of_the_set_encoder(model, tmp_path, capsys):
    """Both printed the header, then "describe_cost: unknown model kind 'mlm'". --context
    prices a set encoder without max_len; one with a max_len (and BERT) is priced at its own."""
    checkpoint.save(tmp_path, model)
    context = ["--context", "10"] if model.config.get("max_len") is None else []
    if not context:
        assert cli.main(["info", "--checkpoint", str(tmp_path), "--context", "10"]) == 2
        assert "is priced at its own context, max_len=" in capsys.readouterr().err
    assert cli.main(["info", "--checkpoint", str(tmp_path), *context]) == 0
    out = capsys.readouterr().out
    assert out.startswith(type(model).__name__ + " ")
    table = describe_cost(model.kind, model.config, context=10)
    assert table in out and f"  {model.num_parameters():,}\n" in table + "\n"


def test_the_encoders_costs_are_the_models():
    """Exact parameters, and the attention scores the layers kept (b = 2)."""
    bert = EncoderLM(23, d_model=8, n_heads=2, n_layers=2, d_ff=12, max_len=9, n_segments=2)
    cost = mlm_cost(23, 8, 2, 2, 12, 9, n_segments=2, batch_size=2)
    assert cost["parameters"] == bert.num_parameters()
    bert(backend.randint(1, 23, (2, 9)))
    assert cost["attention_scores"] == sum(blk.self_attn.layer.probs.size
                                           for blk in bert.blocks.blocks)
    for pooling, max_len in [("cls", None), ("mean", None), ("mean", 6), ("cls", 6)]:
        points = SetEncoder(5, 3, d_model=8, n_heads=2, n_layers=2, d_ff=12, pooling=pooling,
                            max_len=max_len)
        cost = encoder_cost(6, 8, 2, 2, 12, 3, (5 + 1) * 8, batch_size=2, cls=pooling == "cls",
                            positions=max_len is not None)
        assert cost["parameters"] == points.num_parameters(), (pooling, max_len)
        points(backend.randn(2, 6, 5))
        assert cost["attention_scores"] == sum(blk.self_attn.layer.probs.size
                                               for blk in points.encoder.blocks)


def test_every_model_family_has_a_cost_table():
    assert set(CONFIG) == set(MODELS)


def test_info_alone_prices_the_model_train_builds(capsys):
    """It priced 4 blocks, a context of 128 and learned positions: 822,912 parameters, where
    minitf train builds 409,984."""
    vocab = data.CharTokenizer.fit(data.default_corpus()).vocab_size
    model = char_lm._build_model(char_lm.RunConfig(), vocab)
    assert cli.main(["info"]) == 0
    header, table = capsys.readouterr().out.split("\n", 1)
    assert f"  {model.num_parameters():,}\n" in table
    config = dict(item.split("=") for item in header.removeprefix("DecoderLM ").split(", "))
    assert {key: config[key] for key in ("n_layers", "max_len", "positional", "vocab_size")} == {
        "n_layers": "2", "max_len": "64", "positional": "rope", "vocab_size": str(vocab)}


@pytest.mark.parametrize("field", ["context", "d_model", "n_heads", "n_layers", "positional"])
def test_info_help_states_train_s_defaults(field):
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.choices and "info" in a.choices)
    helps = {a.dest: a.help for a in commands.choices["info"]._actions}
    stated = re.search(r"\(default (\w+)", helps[field])
    assert stated and stated.group(1) == str(getattr(char_lm.RunConfig(), field)), helps[field]


def test_info_of_a_kind_minitf_does_not_know_is_one_line_and_no_header(tmp_path, capsys):
    checkpoint.save(tmp_path, EncoderLM(23, d_model=8, n_heads=2, n_layers=1, max_len=7))
    meta_file = next(tmp_path.rglob(checkpoint.META))
    meta_file.write_text(meta_file.read_text().replace('"kind": "mlm"', '"kind": "cnn"'))
    assert cli.main(["info", "--checkpoint", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"minitf info: --checkpoint {tmp_path}: a model of kind 'cnn', "
                                   f"which minitf does not know; wanted one of ('lm'")


def test_info_prices_an_encoder_decoder_checkpoint_at_its_own_lengths_unless_told(tmp_path,
                                                                                 capsys):
    """Its N = M is not a character window's: --context's default, 64, took it from 128."""
    from minitf.models import Transformer
    model = Transformer(13, 13, d_model=16, n_heads=2, n_layers=1)
    checkpoint.save(tmp_path, model)
    for flags, n in (([], 128), (["--context", "10"], 10)):
        assert cli.main(["info", "--checkpoint", str(tmp_path), *flags]) == 0
        assert describe_cost("seq2seq", model.config, context=n) in capsys.readouterr().out


@pytest.mark.parametrize("field, value, wanted", [
    ("samples", -1, "an integer ≥ 0"), ("sample_length", -3, "an integer ≥ 0"),
    ("n_layers", 0, "a positive integer"), ("steps", "10", "a positive integer"),
    ("warmup", 2.5, "an integer ≥ 0"), ("lr", 0.0, "a finite number > 0"),
    ("weight_decay", float("nan"), "a finite number ≥ 0"), ("dropout", 1.0, "lie in [0, 1)"),
    ("out", 3, "a str or a pathlib.Path")])
def test_a_run_config_from_python_is_checked_field_by_field_when_made(field, value, wanted,
                                                                      unread):
    """The flags are checked by the command line; RunConfig made in Python was not: samples=-1
    and n_layers=0 were taken, and a bad sample_length was refused by generate after training."""
    with pytest.raises((ValueError, TypeError)) as refused:
        char_lm.RunConfig(**{field: value})
    assert str(refused.value).startswith(f"RunConfig: {field} must ")
    assert wanted in str(refused.value) and repr(value) in str(refused.value)
    char_lm.RunConfig(clip=None, d_ff=None, warmup=None)     # None means: none, 4·d, a tenth
