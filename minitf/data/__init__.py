"""Data: text for language modelling and the small synthetic and bundled sets of the lessons.
Token ids and images live on the host as NumPy arrays; batches move to the active backend."""
from minitf.data.bert import mask_tokens, sentence_pairs
from minitf.data.tasks import (BOS, EOS, PAD, SHAPES, TASKS, WordVocabulary, digits, pad_batch,
                               point_sets, sentiment, seq2seq_task)
from minitf.data.text import (CharTokenizer, bigram_loss, default_corpus, evaluation_windows,
                              random_windows, read_text, split)

__all__ = ["CharTokenizer", "default_corpus", "read_text", "split", "random_windows",
           "evaluation_windows", "bigram_loss", "pad_batch", "seq2seq_task", "TASKS", "PAD",
           "BOS", "EOS", "sentiment", "WordVocabulary", "digits", "mask_tokens",
           "sentence_pairs", "point_sets", "SHAPES"]
