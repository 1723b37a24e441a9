"""How much of a character model's sampled text is made of real words: a number for "its samples
read better".

    python benchmarks/sample_words.py runs/lm runs/other      # checkpoints of `minitf train`

For each checkpoint, draws ``--samples`` continuations of ``--prompt`` (seeds 0, 1, …, as
``minitf generate --seed`` does, temperature 0.8 by default) and splits them into words: runs of
two or more letters. A word counts as real when it occurs in the text the model was trained on
(the first 90 % of the corpus, minitf train's split). A model that has learnt only the letter
statistics writes plausible-looking non-words; one that has learnt words writes fewer of them.
"""
import argparse
import re

from minitf import backend, checkpoint
from minitf.data.text import default_corpus, read_text, split
from minitf.generate import generate

WORD = re.compile(r"[A-Za-z]{2,}")


def training_words(saved) -> set:
    """The words of the text the checkpoint's run was trained on (its --text, or the default)."""
    path = saved.meta.get("extra", {}).get("run", {}).get("text")
    text = read_text(path) if path else default_corpus()
    train_ids, _ = split(saved.tokenizer.encode(text))
    return set(WORD.findall(saved.tokenizer.decode(train_ids)))


def real_word_share(directory, samples, length, prompt, temperature):
    """-> (real words, all words) over ``samples`` continuations of ``prompt``."""
    saved = checkpoint.load(directory)
    known = training_words(saved)
    real = total = 0
    for seed in range(samples):
        backend.seed(seed)
        ids = generate(saved.model, saved.tokenizer.encode(prompt), length,
                       temperature=temperature)
        words = WORD.findall(saved.tokenizer.decode(ids[0]))
        real += sum(word in known for word in words)
        total += len(words)
    return real, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", metavar="DIR")
    parser.add_argument("--samples", type=int, default=20, help="continuations each (20)")
    parser.add_argument("--length", type=int, default=300, help="characters each (300)")
    parser.add_argument("--prompt", default="The ")
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args()
    print(f"{args.samples} samples of {args.length} characters after {args.prompt!r}, "
          f"temperature {args.temperature}")
    for directory in args.checkpoints:
        real, total = real_word_share(directory, args.samples, args.length, args.prompt,
                                      args.temperature)
        print(f"{directory}: {real} of {total} words occur in the training text "
              f"({real / total:.1%})")


if __name__ == "__main__":
    main()
