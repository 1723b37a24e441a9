"""Decoding: turning a trained model's next-token distributions into text.

Language model (``generate``): feed the prompt, then repeatedly pick a next token from the last
position's logits and feed it back -- autoregressive generation. With the KV cache each step runs
the model on the one new token; without it, on the whole sequence again (same logits, more work).
    greedy          argmax: deterministic, often repetitive
    temperature τ   sample from softmax(logits / τ): τ < 1 sharper, τ > 1 flatter
    top-k           sample among the k most likely tokens only
    top-p (nucleus) sample among the smallest set of tokens whose probability adds up to ≥ p
Encoder–decoder: ``greedy_decode`` and ``beam_search`` from BOS until EOS.
"""
from __future__ import annotations

import functools
import math
import warnings

import minitf.functional as F
from minitf.backend import get_array_module, rand, to_device, to_numpy
from minitf.data.tasks import BOS, EOS
from minitf.nn import no_grad
from minitf.validate import (already_checked, check_flags, check_float, check_ids, check_int,
                             check_real, check_shape)


def _check_sampling(max_new_tokens, temperature, top_k, top_p, greedy: bool, where: str) -> None:
    """The settings of ``generate`` and ``sample_next``, checked once before the first step."""
    check_int(max_new_tokens, "max_new_tokens", where, low=0)
    check_flags(where, greedy=greedy)
    check_real(temperature, "temperature", where, low=0)
    if top_k is not None:
        check_int(top_k, "top_k", where)
    if top_p is not None:
        check_real(top_p, "top_p", where, low=0, high=1)
    # greedy takes the argmax: a temperature, top_k or top_p beside it would change nothing
    ignored = [f"{name}={value!r}" for name, value, default in
               (("temperature", temperature, 1.0), ("top_k", top_k, None), ("top_p", top_p, None))
               if value != default]
    if greedy and ignored:
        raise ValueError(f"{where}: greedy=True takes the most likely token, and ignores "
                         f"{', '.join(ignored)}; leave {'it' if len(ignored) == 1 else 'them'} "
                         f"out, or sample with greedy=False")


def sample_next(logits, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, greedy: bool = False):
    """Pick one token per row from next-token logits.   logits: (b, V)  ->  ids: (b,)"""
    # a (V,) vector would be read as V rows of one logit each: V ids, each 0
    check_shape(logits, "logits", ("b", "V"), "sample_next")
    check_float(logits, "logits", "sample_next")
    # a NaN row would sample id 0 and say nothing; −inf is allowed: a token ruled out
    xp = get_array_module(logits)
    if bool(xp.isnan(logits).any()):
        raise ValueError("sample_next: logits holds NaN; wanted numbers (−inf rules a token out)")
    if bool(xp.isposinf(logits).any()):       # the shift by the maximum made it NaN: id 0 again
        row, token = (int(i) for i in divmod(int(xp.isposinf(logits).argmax()), logits.shape[-1]))
        raise ValueError(f"sample_next: logits holds +inf (row {row}, token {token}); wanted "
                         f"finite numbers (−inf rules a token out, and a large finite logit makes "
                         f"one all but certain)")
    if logits.shape[-1] == 0:
        raise ValueError("sample_next: logits has no classes (V = 0); wanted at least one")
    ruled_out = xp.isneginf(logits).all(axis=-1)      # no token left to draw: it drew id 0
    if bool(ruled_out.any()):
        raise ValueError(f"sample_next: row {int(ruled_out.argmax())} of logits is −inf for every "
                         f"token; wanted at least one token left to draw")
    _check_sampling(0, temperature, top_k, top_p, greedy, "sample_next")
    return _sample(logits, temperature, top_k, top_p, greedy)


def _sample(logits, temperature, top_k, top_p, greedy):
    """sample_next without its checks: generate checked the settings once, and the logits are
    its model's own."""
    xp = get_array_module(logits)
    # τ → 0 is greedy: a τ below the smallest normal number of the logits' dtype takes that
    # limit (float32 holds no 1e-300; dividing by it as 0 gave NaN, then token 0)
    # (τ compared as a Python float: cast to float32, a τ of 1e39 would be inf, with a warning)
    if greedy or temperature < float(xp.finfo(logits.dtype).tiny):
        return logits.argmax(axis=-1)
    # shifted so that the largest is 0: a small τ then sends the others towards −∞ and none to
    # +∞, where softmax would take inf − inf = NaN (the shift does not change softmax)
    logits = logits - logits.max(axis=-1, keepdims=True)          # a new array: divided in place
    if top_k is not None:         # before dividing by τ, which keeps the order: a τ of 3e38
        # sends differences of 1e-7 below float32's smallest number, to ties with the largest
        kth = xp.sort(logits, axis=-1)[:, -min(top_k, logits.shape[-1])][:, None]   # (b, 1)
        logits = xp.where(logits < kth, -math.inf, logits)
    if temperature <= float(xp.finfo(logits.dtype).max):
        logits /= temperature
    else:   # τ cast to float32 would be inf: every logit / inf = 0, and −inf / inf = NaN. In
        # float64 τ is a number, and the quotients (below 1 in size: the shifted logits lie in
        # [−3.4e38, 0], or are −inf) come back to float32 as numbers, −inf as −inf
        logits = (logits.astype("float64") / temperature).astype(logits.dtype)
    probs, _ = F.softmax(logits, axis=-1)                                          # (b, V)
    if top_p is not None:
        order = xp.argsort(-probs, axis=-1)                        # (b, V) most likely first
        sorted_probs = xp.take_along_axis(probs, order, axis=-1)   # (b, V)
        # keep a token if the tokens more likely than it add up to less than p; the most likely
        # always (a p below float32's smallest number, 1e-46, kept none: 0/0, then token 0)
        keep_sorted = xp.cumsum(sorted_probs, axis=-1) - sorted_probs < top_p     # (b, V) bool
        keep_sorted[:, 0] = True
        keep = xp.take_along_axis(keep_sorted, xp.argsort(order, axis=-1), axis=-1)  # (b, V) unsorted
        probs = probs * keep
        probs /= probs.sum(axis=-1, keepdims=True)
    # Inverse-CDF sampling with minitf's seeded generator: the same seed, the same text.
    u = rand(probs.shape[0], 1, dtype=probs.dtype, like=probs)          # (b, 1) uniform in [0, 1)
    ids = (xp.cumsum(probs, axis=-1) < u).sum(axis=-1)                 # (b,) the first CDF ≥ u
    return xp.minimum(ids, probs.shape[-1] - 1)


def _as_batch(ids, name, where):
    """Token ids as a (b, n) int64 array: the ids a model picks are written into it, and a
    smaller integer type (a prompt of int8, a source of uint8) would wrap them around."""
    try:
        ids = to_device(ids)
    except (TypeError, ValueError):                   # ragged rows, None, …
        raise ValueError(f"{where}: {name} is not an array of token ids; got "
                         f"{str(ids)[:40]}") from None
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[1] == 0:
        raise ValueError(f"{where}: {name} has shape {tuple(ids.shape)}; wanted (n,) or (b, n) "
                         f"with n ≥ 1")
    if ids.dtype.kind in "iu":
        ids = ids.astype("int64", copy=False)
    return ids


# What each decoder calls on its model, and what to ask for when one is missing.
_LANGUAGE_MODEL = (("vocab_size", "max_len", "new_cache"), "a language model such as DecoderLM "
                   "or RNNLM (a Transformer translates with greedy_decode or beam_search)")
_TRANSLATOR = (("encode", "decode", "new_cache"), "an encoder–decoder Transformer (a language "
               "model continues text with generate)")


def _check_model(model, kind, where):
    """A Transformer given to generate, or a language model to greedy_decode, would otherwise
    fail deep inside with an AttributeError."""
    needs, wanted = kind
    missing = [name for name in needs if not hasattr(model, name)]
    if missing:
        raise TypeError(f"{where}: model is a {type(model).__name__}, which has no "
                        f"{missing[0]}; wanted {wanted}")


def _check_language_model(model):
    """A model that gives the next token. An EncoderLM has a DecoderLM's attributes (it is one,
    without the causal mask), but each of its positions sees the tokens on both sides: it fills
    in masked tokens, and its forward takes no cache."""
    _check_model(model, _LANGUAGE_MODEL, "generate")
    if getattr(model, "kind", None) == "mlm":
        raise TypeError(f"generate: model is an EncoderLM, which fills in masked tokens from both "
                        f"sides and gives no next token; wanted {_LANGUAGE_MODEL[1]}")


def _check_translator(model, where):
    """A Transformer to translate with, whose target vocabulary holds BOS and EOS: decoding
    starts from BOS and stops at EOS, and with tgt_vocab_size=2 it never stopped before max_len."""
    _check_model(model, _TRANSLATOR, where)
    size = getattr(model, "config", {}).get("tgt_vocab_size")
    if size is not None and size <= max(BOS, EOS):
        raise ValueError(f"{where}: the model's tgt_vocab_size is {size}; wanted more than "
                         f"{max(BOS, EOS)}, a vocabulary that holds BOS={BOS} and EOS={EOS}")


def _back_in_its_mode(decode):
    """``decode(model, ...)`` puts the model in eval mode (no dropout), under no_grad() (no
    backward follows a generated token: its layers keep nothing); afterwards every module of it
    goes back to the mode it was in, so a training loop that prints a sample between steps goes on
    training with dropout."""
    @functools.wraps(decode)
    def decoding(model, *args, **kwargs):
        modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
        try:
            with no_grad():
                return decode(model, *args, **kwargs)
        finally:
            for module, training in modes:
                module.training = training
    return decoding


@_back_in_its_mode
def generate(model, prompt, max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, greedy: bool = False,
             use_cache: bool = True, return_logits: bool = False, on_token=None):
    """Continue ``prompt`` by ``max_new_tokens`` tokens with a DecoderLM.

    prompt: (n,) or (b, n) token ids.  The model sees at most its last max_len tokens: a longer
    prompt is cropped (with a warning), and a full cache is rebuilt from the last max_len tokens.
    -> ids (b, n + max_new_tokens) on the host; with return_logits, also the logits of every
       step, (b, max_new_tokens, V);  on_token(ids) is called with each step's new ids (b,)
    """
    _check_sampling(max_new_tokens, temperature, top_k, top_p, greedy, "generate")
    check_flags("generate", use_cache=use_cache, return_logits=return_logits)
    _check_language_model(model)
    if on_token is not None and not callable(on_token):
        raise TypeError(f"generate: on_token must be a function of the new ids, or None; "
                        f"got {on_token!r}")
    ids = _as_batch(prompt, "prompt", "generate")
    check_ids(ids, "prompt", model.vocab_size, "generate")
    xp = get_array_module(ids)
    if ids.shape[1] > model.max_len:
        warnings.warn(f"the prompt has {ids.shape[1]} tokens, more than the model's context of "
                      f"max_len={model.max_len}; only its last {model.max_len} tokens are used",
                      stacklevel=3)   # 1 here, 2 _back_in_its_mode's wrapper, 3 the caller
    model.eval()
    use_cache = use_cache and model.config.get("n_layers") != 0     # no blocks: nothing to cache
    cache, fed, steps = None, 0, []
    for _ in range(max_new_tokens):
        if not use_cache:
            new = ids[:, -model.max_len:]
        else:
            if cache is None or cache[0].length == model.max_len:
                cache, fed = model.new_cache(), max(0, ids.shape[1] - model.max_len)
            new, fed = ids[:, fed:], ids.shape[1]            # only the tokens not yet cached
        with already_checked():             # the prompt, checked above, and tokens it picked
            logits = model(new, cache=cache)
        last = logits[:, -1]                                 # (b, V): the next token's logits
        steps.append(last)
        next_ids = _sample(last, temperature, top_k, top_p, greedy)
        ids = xp.concatenate([ids, next_ids[:, None].astype(ids.dtype)], axis=1)
        if on_token is not None:
            on_token(to_numpy(next_ids))
    if return_logits:              # no new tokens: no steps, logits of shape (b, 0, V)
        logits = (xp.stack(steps, axis=1) if steps else
                  xp.zeros((ids.shape[0], 0, model.vocab_size),
                           dtype=model.parameters()[0].data.dtype))
        return to_numpy(ids), to_numpy(logits)
    return to_numpy(ids)


def _until_eos(row) -> list:
    row = [int(t) for t in row]
    return row[:row.index(EOS)] if EOS in row else row


@_back_in_its_mode
def greedy_decode(model, src, max_len: int = 32, use_cache: bool = True,
                  return_logits: bool = False):
    """Translate each source with a Transformer, picking the most likely token at every step.
    src: (b, m) padded ids  ->  a list of b token lists (BOS and EOS stripped); with
    return_logits, also the logits of every step on the host, (b, steps, V)"""
    check_int(max_len, "max_len", "greedy_decode", what="the most tokens to generate")
    check_flags("greedy_decode", use_cache=use_cache, return_logits=return_logits)
    _check_translator(model, "greedy_decode")
    src = _as_batch(src, "src", "greedy_decode")
    xp = get_array_module(src)
    model.eval()
    memory, memory_mask = model.encode(src)
    out = xp.full((src.shape[0], 1), BOS, dtype=src.dtype)
    cache = model.new_cache() if use_cache else None
    steps = []
    for _ in range(max_len):
        # Every token of out is BOS or generated: none is padding, even one equal to pad_id.
        with already_checked():         # decode checks out and memory; its layers need not
            logits = model.decode(out[:, -1:] if use_cache else out, memory, memory_mask, cache,
                                  mask_padding=False)
        steps.append(logits[:, -1])
        next_ids = logits[:, -1].argmax(axis=-1)
        out = xp.concatenate([out, next_ids[:, None].astype(out.dtype)], axis=1)
        if bool((out == EOS).any(axis=1).all()):
            break
    tokens = [_until_eos(row[1:]) for row in to_numpy(out)]
    return (tokens, to_numpy(xp.stack(steps, axis=1))) if return_logits else tokens


@_back_in_its_mode
def beam_search(model, src, beam_size: int = 4, max_len: int = 32, alpha: float = 0.6) -> list:
    """Keep the ``beam_size`` most likely partial translations at every step, not just one.

    A finished hypothesis (one that produced EOS) is scored by log p / lp(length), with the
    length penalty lp = ((5 + length) / 6)^α of Wu et al. (2016): without it, short outputs win.
    src: (b, m)  ->  a list of b token lists. beam_size=1 with alpha=0 is greedy decoding; with
    alpha > 0 one beam may still end longer than greedy does, as the penalty can favour a
    longer finished hypothesis over the EOS that greedy would have taken first.
    """
    check_int(beam_size, "beam_size", "beam_search", what="the hypotheses kept at each step")
    check_int(max_len, "max_len", "beam_search", what="the most tokens to generate")
    check_real(alpha, "alpha", "beam_search", low=0, low_open=False)
    _check_translator(model, "beam_search")
    src = _as_batch(src, "src", "beam_search")
    return [_beam_one(model, src[i:i + 1], beam_size, max_len, alpha) for i in range(src.shape[0])]


def _beam_one(model, src, beam_size, max_len, alpha):
    xp = get_array_module(src)
    model.eval()
    memory, memory_mask = model.encode(src)                       # (1, m, d), (1, 1, 1, m)
    cache = model.new_cache()
    beams, scores = [[BOS]], xp.zeros(1)                           # k partial outputs, log p
    finished = []                                                  # (normalised score, tokens)

    def penalty(length):
        return ((5 + length) / 6) ** alpha

    for _ in range(max_len):
        k = len(beams)
        last = xp.asarray([[b[-1]] for b in beams], dtype=src.dtype)           # (k, 1)
        with already_checked():                                   # as in greedy_decode
            logits = model.decode(last, xp.repeat(memory, k, axis=0),
                                  xp.repeat(memory_mask, k, axis=0), cache)[:, -1]
        logp, _ = F.log_softmax(logits.astype("float64"), axis=-1)          # (k, V)
        total = (scores[:, None] + logp).reshape(-1)
        best = to_numpy(xp.argsort(-total)[:2 * beam_size])       # room for EOS candidates
        parents, new_beams, new_scores = [], [], []
        for flat in best:
            parent, token = divmod(int(flat), logp.shape[1])
            score = float(total[flat])
            if token == EOS:
                finished.append((score / penalty(len(beams[parent])), beams[parent][1:]))
            elif len(new_beams) < beam_size:
                parents.append(parent)
                new_beams.append(beams[parent] + [token])
                new_scores.append(score)
            if len(new_beams) == beam_size:
                break
        best_finished = max((s for s, _ in finished), default=-math.inf)
        # Stop when no live beam can still beat the best finished one (log p only decreases).
        if not new_beams or len(finished) >= beam_size and \
                max(new_scores) / penalty(max_len) < best_finished:
            break
        for entry in cache:
            for layer_cache in entry:
                layer_cache.reorder(xp.asarray(parents))
        beams, scores = new_beams, xp.asarray(new_scores)
    if not finished:
        return beams[int(scores.argmax())][1:]
    return max(finished, key=lambda f: f[0])[1]
