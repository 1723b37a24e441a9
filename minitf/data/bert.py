"""Data for BERT's two pretraining ideas: masked tokens (the masked language model) and sentence
pairs told apart by segment ids."""
from __future__ import annotations

from minitf.backend import (backend_of, get_array_module, is_int, rand, randint, seed as seeded,
                            to_device)
from minitf.data.tasks import sentiment
from minitf.validate import check_ids, check_int


def mask_tokens(ids, mask_id: int, vocab_size: int, p: float = 0.15, special_ids=(),
                ignore_index: int = -100, seed: int | None = None):
    """BERT's corruption of a batch for masked-language-model training -> (inputs, targets).

    Each position that is not special (padding, [CLS], [SEP], [MASK] …) is chosen with
    probability p. Of the chosen positions
        80 %  become mask_id             the model must guess the token from its context
        10 %  become a random token      it cannot trust the tokens it sees, either
        10 %  stay as they are           and the input it is trained on looks like real text
    targets = the original id at the chosen positions, ignore_index everywhere else: only the
    chosen positions are scored. ids: any int array, e.g. (b, n); inputs and targets have its
    shape and backend, and dtype int64 whatever ids' dtype (uint8 has no -100). Random tokens are
    drawn from the non-special ids. Draws come from minitf's generator, or from ``seed`` when
    given (then this call's draws are the same every time).
    """
    where = "mask_tokens"
    check_int(vocab_size, "vocab_size", where, what="the number of tokens")
    check_ids(ids, "ids", vocab_size, where)
    check_int(mask_id, "mask_id", where, low=0, high=vocab_size - 1,
              what="the id of the [MASK] token")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 < p < 1.0:
        raise ValueError(f"{where}: p must lie in (0, 1), the fraction of positions to choose; "
                         f"got {p!r}")
    # ids, each an integer: int() would read 0.5 or True as id 0 or 1, and a string is no list
    if (isinstance(special_ids, str) or not hasattr(special_ids, "__len__")
            or not all(is_int(s) for s in special_ids)):
        raise TypeError(f"{where}: special_ids must be a sequence of token ids, e.g. (0,) for "
                        f"padding; got {special_ids!r}")
    special = sorted({int(s) for s in special_ids} | {mask_id})
    for s in special:
        check_int(s, "special_ids", where, low=0, high=vocab_size - 1, what="token ids")
    ordinary = sorted(set(range(vocab_size)) - set(special))    # what a random token is from
    if not ordinary:
        raise ValueError(f"{where}: every id in [0, {vocab_size}) is special; wanted at least one "
                         f"ordinary token")
    # targets hold ignore_index wherever nothing was chosen: were it an ordinary id, a position
    # chosen to be scored on that token would be skipped by the loss as if it were not chosen
    if (not is_int(ignore_index) or not -2**63 <= ignore_index < 2**63      # int64 targets
            or 0 <= ignore_index < vocab_size and ignore_index not in special):
        raise ValueError(f"{where}: ignore_index must be an integer that no scored token has "
                         f"(negative, as the default -100, or a special id); got {ignore_index!r}")
    if seed is not None:
        with seeded(seed):
            return mask_tokens(ids, mask_id, vocab_size, p, special_ids, ignore_index)
    xp, device = get_array_module(ids), backend_of(ids)
    # int64 from here on: the caller's dtype need not hold what is written into it -- uint8 wrapped
    # the targets' -100 to 156, a position the loss then scored, and cannot hold a mask_id of 300
    ids = ids.astype(xp.int64, copy=False)          # (no copy, and the same draws, for int64 ids)
    u_choose = rand(*ids.shape, dtype="float64", like=ids)      # (…) one draw to choose
    u_action = rand(*ids.shape, dtype="float64", like=ids)      # (…) one to decide what to do
    pick = to_device(randint(0, len(ordinary), ids.shape), backend=device)
    random_ids = xp.asarray(ordinary, dtype=ids.dtype)[pick]    # (…) ordinary tokens
    chosen = (u_choose < p) & ~xp.isin(ids, xp.asarray(special, dtype=ids.dtype))
    inputs = xp.where(chosen & (u_action < 0.8), mask_id, ids)
    inputs = xp.where(chosen & (u_action >= 0.8) & (u_action < 0.9), random_ids, inputs)
    targets = xp.where(chosen, ids, ignore_index)
    return inputs, targets


def sentence_pairs(n_examples: int):
    """Pairs of sentiment sentences and whether they agree: 1 when both are positive or both
    negative, 0 otherwise. Encode them with WordVocabulary(…, specials=("[SEP]",)).encode_pairs.

        ("my kid does like this movie", "nobody likes this book")      0
        ("no one i know hates this book", "my sister loves the new show")   1
    -> (list of n (a, b) pairs, (n,) int64 labels)
    """
    check_int(n_examples, "n_examples", "sentence_pairs", what="the number of pairs")
    sentences, labels = sentiment(2 * n_examples)
    pairs = list(zip(sentences[0::2], sentences[1::2]))
    return pairs, (labels[0::2] == labels[1::2]).astype(labels.dtype)
