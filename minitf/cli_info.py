"""``minitf info``: the analytic cost model of a configuration or a checkpoint -- parameters,
FLOPs per token, KV-cache bytes -- and, with --table, one block's operations. minitf.cli adds it
to the one ``minitf`` command."""
from __future__ import annotations

from minitf.cli_flags import MODEL_FLAGS, POSITIVE, RUN, add_model_flags

DEFAULT_VOCAB = 103         # --vocab-size: the characters of the default corpus


def _info(args) -> int:
    from minitf.char_lm import RunConfig, check_model_flags
    from minitf.cost_families import describe_cost
    from minitf.validate import feed_forward_width

    defaults = RunConfig()          # a flag not given: the model `minitf train` builds
    flags = {name: getattr(defaults, name) if getattr(args, name) is None else getattr(args, name)
             for name in MODEL_FLAGS}
    d_model, n_heads = flags["d_model"], flags["n_heads"]
    config = dict(vocab_size=args.vocab_size or DEFAULT_VOCAB, d_model=d_model, n_heads=n_heads,
                  n_layers=flags["n_layers"],
                  d_ff=feed_forward_width(flags["d_ff"], d_model, "--d-ff"),
                  max_len=flags["context"], positional=flags["positional"],
                  tie_weights=not args.untied, pre_ln=True)       # as `minitf train` builds
    kind, name = "lm", "DecoderLM"
    if args.checkpoint:             # the size flags then describe nothing: refused if given
        from minitf import checkpoint
        from minitf.models import MODELS
        _refuse_flags_a_checkpoint_sets(args)
        meta = checkpoint.read_meta(args.checkpoint)
        kind, config = meta["kind"], meta["config"]
        if kind not in MODELS:
            raise ValueError(f"--checkpoint {args.checkpoint}: a model of kind {kind!r}, which "
                             f"minitf does not know; wanted one of {tuple(MODELS)}")
        name = MODELS[kind].__name__
        # --context prices the lengths a config does not fix; a fixed max_len took it silently
        reads_context = kind == "seq2seq" or (kind == "set" and config.get("max_len") is None)
        if args.context is not None and not reads_context:
            raise ValueError(f"--context {args.context}: the checkpoint's {name} is priced at "
                             f"its own context, max_len={config.get('max_len')}; wanted --context "
                             f"only for an encoder–decoder or a set encoder without max_len "
                             f"(leave it out)")
        if args.table and kind != "lm":     # it printed the family's table alone, silently
            raise ValueError(f"--table: one block's table is a DecoderLM's; the checkpoint "
                             f"holds a {name} (leave out --table)")
        if args.bytes is not None and kind != "lm":     # the same table whatever it was
            raise ValueError(f"--bytes {args.bytes}: the checkpoint's {name} is priced in "
                             f"parameters and FLOPs, no bytes (a DecoderLM's KV cache has "
                             f"them); leave out --bytes")
    else:                           # no such model to price
        check_model_flags(d_model, n_heads, flags["positional"])
    # the table first: a family it cannot price is one line, not a header and then an error
    # a checkpoint's family sets its own lengths but an encoder–decoder's, and a set's without
    # max_len: there --context, else describe_cost's own, not a character window's
    lengths = ({} if args.checkpoint and args.context is None
               else {"context": flags["context"]})
    bytes_per_number = 4 if args.bytes is None else args.bytes      # float32's
    table = describe_cost(kind, config, args.batch_size, bytes_per_number, **lengths)
    print(f"{name} " + ", ".join(f"{k}={v}" for k, v in config.items())
          + f", batch_size={args.batch_size}\n")
    print(table)
    if args.table:
        _print_block_tables(config, args.batch_size, bytes_per_number)
    return 0


def _refuse_flags_a_checkpoint_sets(args) -> None:
    """info --checkpoint prices the model saved there: a size flag given too was ignored, and
    the table described another model than the one asked for. (--context stays: it is the
    length to price at.)"""
    given = [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in MODEL_FLAGS[1:]
             + ("vocab_size",) if getattr(args, name) is not None] + ["--untied"] * args.untied
    if given:
        raise ValueError(f"--checkpoint {args.checkpoint}: its model is priced as saved, so "
                         f"{', '.join(given)} would be ignored; wanted --checkpoint alone (with "
                         f"--batch-size, --bytes for a DecoderLM, and --context for an "
                         f"encoder–decoder or a set), or the flags without it")


def _print_block_tables(config: dict, batch_size: int, bytes_per_number: int) -> None:
    """One block's cost row by row: the whole context at once, then one token with a KV cache."""
    from minitf.cost import attention_table, format_table

    for decoding in (False, True):
        table = attention_table(batch_size, config["max_len"], config["d_model"],
                                config["n_heads"], config["d_ff"], decoding, bytes_per_number)
        print("\n" + format_table(table))


def add_info_command(commands) -> None:
    """Add info to ``commands`` (the subcommands of ``minitf``)."""
    info = commands.add_parser(
        "info", help="parameters, FLOPs and KV-cache size of a model",
        description="The analytic cost model of a DecoderLM: parameters (4d² + 2·d·d_ff per "
                    "block), FLOPs per token, KV-cache bytes (2·L·b·n·d numbers). Give a "
                    "configuration by flags -- each one left out is that of the model "
                    "'minitf train' builds by default, so 'minitf info' alone prices it -- or a "
                    "checkpoint of any model family (the recurrent, encoder–decoder and encoder "
                    "ones get their own table; --context is then N = M of an encoder–decoder, "
                    "and the set's size for a set encoder without max_len, 128 if not given).")
    info.add_argument("--checkpoint", metavar="DIR", type=RUN,
                      help="read the configuration from a run")
    info.add_argument("--vocab-size", type=POSITIVE, default=None,
                      help=f"characters (default {DEFAULT_VOCAB}, the default corpus's)")
    add_model_flags(info)
    info.add_argument("--batch-size", type=POSITIVE, default=1,
                      help="b, the sequences of the KV cache and of a training step's FLOPs "
                           "(default 1; minitf train's batch is 32)")
    info.add_argument("--untied", action="store_true", help="a separate output layer")
    info.add_argument("--bytes", type=POSITIVE, help="bytes per number (4: float32)")  # None: 4
    info.add_argument("--table", action="store_true",
                      help="also one block's FLOPs, IO and FLOPs/IO operation by operation")
    info.set_defaults(run=_info)
