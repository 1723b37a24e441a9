"""generate's settings and the flags of ``minitf generate``: a setting that would change nothing,
or break the sampling rules, is refused in one line, at the start; a warning points at the
caller's code, and on the command line comes before the text, not inside it."""
import io
import sys
import warnings

import numpy as np
import pytest

from minitf import backend, checkpoint, cli
from minitf.data import CharTokenizer
from minitf.generate import generate, sample_next
from minitf.models import DecoderLM, EncoderLM, Transformer

from test_bad_input import raises

TEXT = "the cat sat on the mat.\n" * 4             # a newline: the default prompt
V = CharTokenizer.fit(TEXT).vocab_size


@pytest.fixture
def run(tmp_path):
    """A saved character language model of a context of 8, with its tokenizer."""
    tokenizer = CharTokenizer.fit(TEXT)
    with backend.seed(0):
        model = DecoderLM(tokenizer.vocab_size, 8, 2, 1, max_len=8)
    checkpoint.save(tmp_path / "run", model, tokenizer=tokenizer)
    return tmp_path / "run"


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


# -- greedy beside a sampling setting -------------------------------------------------------------

@pytest.mark.parametrize("setting, fragments", [
    (dict(temperature=0.5), ("ignores temperature=0.5; leave it out",)),
    (dict(top_k=3, top_p=0.9), ("ignores top_k=3, top_p=0.9; leave them out",)),
    (dict(temperature=-1), ("temperature must be a finite number > 0", "got -1")),
    (dict(temperature=float("nan")), ("temperature must be a finite number > 0", "got nan")),
])
def test_greedy_refuses_the_settings_it_would_ignore(setting, fragments):
    """greedy=True took the argmax and said nothing of a temperature (even -1 or nan), top_k or
    top_p beside it."""
    lm = DecoderLM(5, 8, 2, 1, max_len=8)
    with raises(ValueError, "generate: ", *fragments):
        generate(lm, [1, 2], 3, greedy=True, **setting)
    with raises(ValueError, "sample_next: ", *fragments):
        sample_next(np.zeros((2, 5), np.float32), greedy=True, **setting)
    assert generate(lm, [1, 2], 3, greedy=True, temperature=1.0).shape == (1, 5)   # the default


@pytest.mark.parametrize("flags, given", [
    (["--temperature", "0.5"], "--temperature 0.5: "),
    (["--top-k", "3", "--top-p", "0.9"], "--top-k 3, --top-p 0.9: "),
    (["--seed", "3"], "--seed 3: ")])                       # it drew nothing at random with it
def test_the_greedy_flag_refuses_a_sampling_flag_beside_it(run, flags, given, capsys):
    assert cli.main(["generate", "--checkpoint", str(run), "--greedy", *flags]) == 2
    err = one_line(capsys)
    assert err.startswith(f"minitf generate: {given}--greedy takes the most likely character"), err


def test_a_top_k_that_keeps_the_whole_vocabulary_is_refused(run, capsys):
    """--top-k 1000 of a run of a few characters was taken, and sampled among them all."""
    vocab = checkpoint.load(run).tokenizer.vocab_size
    assert cli.main(["generate", "--checkpoint", str(run), "--top-k", str(vocab)]) == 2
    assert one_line(capsys) == (
        f"minitf generate: --top-k {vocab}: the run's vocabulary has {vocab} characters, so it "
        f"keeps every one and changes nothing; wanted at most {vocab - 1}, or leave it out")
    assert cli.main(["generate", "--checkpoint", str(run), "--top-k", str(vocab - 1),
                     "--max-new-tokens", "3"]) == 0


def test_temperature_left_out_is_still_0_8(run, capsys):
    """--temperature's default became None, so that one given can be told from it: left out, it
    samples as --temperature 0.8 does, and the help says so."""
    texts = []
    for flags in ([], ["--temperature", "0.8"], ["--temperature", "1.5"]):
        assert cli.main(["generate", "--checkpoint", str(run), "--max-new-tokens", "40",
                         *flags]) == 0
        texts.append(capsys.readouterr().out)
    assert texts[0] == texts[1] != texts[2]
    assert cli.main(["generate", "--checkpoint", str(run), "--greedy"]) == 0   # 0.8 not passed
    capsys.readouterr()
    with pytest.raises(SystemExit):
        cli.main(["generate", "--help"])
    assert "sampling temperature (0.8)" in capsys.readouterr().out


# -- a temperature beyond float32 -------------------------------------------------------------------

def test_a_temperature_beyond_float32_keeps_the_sampling_rules():
    """τ = 1e39, cast to float32, was inf: every logit / inf = 0 and −inf / inf = NaN, and id 0
    was drawn every time, the −inf token and top-k's rule forgotten; τ = 3e38 sent a difference of
    1e-7 to a tie with the largest logit, and top-k kept both."""
    ruled_out = np.array([[0.0, 1.0, -np.inf]] * 2000, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                    # "overflow encountered in cast"
        for tau in (1e39, 1e300):
            drawn = np.bincount(sample_next(ruled_out, temperature=tau), minlength=3)
            assert drawn[2] == 0 and min(drawn[:2]) > 800, drawn     # flat, −inf ruled out
            assert set(sample_next(ruled_out, temperature=tau, top_k=1)) == {1}
            assert set(sample_next(ruled_out, temperature=tau, top_p=0.4)) <= {0, 1}
        close = np.array([[0.0, 1e-7, -np.inf]] * 50, np.float32)
        assert set(sample_next(close, temperature=3e38, top_k=1)) == {1}
        lm = DecoderLM(5, 8, 2, 1, max_len=8)
        ids = generate(lm, np.array([[1, 2]] * 50), 1, temperature=1e39, top_k=1)
        assert np.array_equal(ids, generate(lm, np.array([[1, 2]] * 50), 1, greedy=True))


# -- the prompt, the model and the checkpoint --------------------------------------------------------

def test_an_empty_prompt_names_the_flag(run, capsys):
    """It was "generate: prompt has shape (1, 0); wanted (n,) or (b, n) with n ≥ 1"."""
    with pytest.raises(SystemExit) as exit_:
        cli.main(["generate", "--checkpoint", str(run), "--prompt", ""])
    assert exit_.value.code == 2
    assert "argument --prompt: got ''; wanted at least one character" in one_line(capsys)


@pytest.mark.parametrize("model, tokenizer, message", [
    (DecoderLM(V, 8, 2, 1, max_len=8), None,
     "the DecoderLM there was saved without a tokenizer; wanted one "
     "(checkpoint.save(..., tokenizer=)) to read --prompt"),
    (EncoderLM(V, 8, 2, 1, max_len=8), CharTokenizer.fit(TEXT),
     "the model saved there is EncoderLM; wanted a language model, DecoderLM or RNNLM, as "
     "'minitf train' saves"),
    (Transformer(V, V, 8, 2, 1), CharTokenizer.fit(TEXT),
     "the model saved there is Transformer; wanted a language model, DecoderLM or RNNLM, as "
     "'minitf train' saves")])
def test_a_checkpoint_generate_cannot_continue_says_why(model, tokenizer, message, tmp_path,
                                                        capsys):
    """Each was "not a character language model", a DecoderLM without its tokenizer too."""
    checkpoint.save(tmp_path / "run", model, tokenizer=tokenizer)
    assert cli.main(["generate", "--checkpoint", str(tmp_path / "run")]) == 2
    assert one_line(capsys) == f"minitf generate: --checkpoint {tmp_path / 'run'}: {message}"


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_refuses_an_encoder_lm_in_its_own_words(use_cache):
    """Without the cache: "EncoderLM.forward() got an unexpected keyword argument 'cache'"; with
    it, EncoderLM.new_cache's message, which named no generate."""
    with raises(TypeError, "generate: model is an EncoderLM", "gives no next token",
                "wanted a language model such as DecoderLM or RNNLM"):
        generate(EncoderLM(5, 8, 2, 1, max_len=8), np.array([1, 2]), 3, use_cache=use_cache)


# -- warnings ----------------------------------------------------------------------------------------

def test_the_long_prompt_warning_points_at_the_caller():
    """stacklevel=2 counted generate's wrapper (_back_in_its_mode), not the caller: the warning
    named minitf/generate.py."""
    with pytest.warns(UserWarning, match="only its last 8 tokens are used") as record:
        generate(DecoderLM(5, 8, 2, 1, max_len=8), np.arange(10) % 5, 1)
    assert record[0].filename == __file__


def test_the_long_prompt_warning_comes_before_the_text(run, monkeypatch):
    """The prompt was echoed before generate warned: the warning's line went between the prompt
    and the characters drawn after it."""
    both = io.StringIO()
    monkeypatch.setattr(sys, "stdout", both)
    monkeypatch.setattr(sys, "stderr", both)
    assert cli.main(["generate", "--checkpoint", str(run), "--prompt", "the cat sat",
                     "--max-new-tokens", "3"]) == 0
    warning, text = both.getvalue().split("\n", 1)
    assert warning.startswith("minitf generate: warning: the prompt has 11 tokens")
    assert text.startswith("the cat sat") and len(text) == len("the cat sat") + 3 + 1
    both.truncate(0), both.seek(0)
    assert cli.main(["generate", "--checkpoint", str(run), "--prompt", "the",
                     "--max-new-tokens", "0"]) == 0
    assert both.getvalue() == "the\n"                  # no character drawn: the prompt alone
