"""Sentence pairs as ids and segment ids: the first sentence's [SEP] belongs to the first
segment, the second's words and its [SEP] to the second, padding to neither."""
import numpy as np

from minitf.data.tasks import WordVocabulary


def test_encode_pairs_puts_the_first_sep_in_segment_zero_and_padding_in_zero():
    """"the cat" / "a dog sat" and "a dog" / "the cat": the segment ids are 0 for a's words and
    its [SEP], 1 for b's words and the closing [SEP], 0 again for the padding."""
    vocabulary = WordVocabulary(["the cat", "a dog sat"], specials=("[SEP]",))
    ids, segments = vocabulary.encode_pairs([("the cat", "a dog sat"), ("a dog", "the cat")])
    sep = vocabulary.index["[SEP]"]
    words = [vocabulary.index[w] for w in "the cat a dog sat".split()]
    the, cat, a, dog, sat = words
    assert ids.tolist() == [[the, cat, sep, a, dog, sat, sep],
                            [a, dog, sep, the, cat, sep, 0]]
    assert segments.tolist() == [[0, 0, 0, 1, 1, 1, 1],
                                 [0, 0, 0, 1, 1, 1, 0]]
    assert segments.dtype == np.int64
