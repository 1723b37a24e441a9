"""``minitf info`` prices the model its flags describe: every size flag, --untied, --batch-size and
--bytes reach the table (and --table's rows), not only the flags the other tests happen to give."""
from minitf import cli
from minitf.cost import attention_table, format_table
from minitf.cost_families import describe_cost
from minitf.models import DecoderLM

SIZES = ["--context", "16", "--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--d-ff", "48",
         "--positional", "rope", "--vocab-size", "50"]


def _model(tie_weights: bool) -> DecoderLM:
    """The model SIZES describe, built, so its parameters are counted, not computed."""
    return DecoderLM(50, d_model=32, n_heads=2, n_layers=1, d_ff=48, max_len=16,
                     positional="rope", tie_weights=tie_weights, pre_ln=True)


def test_info_prices_the_vocabulary_the_feed_forward_width_and_untied_weights(capsys):
    """--vocab-size 50, --d-ff 48 and --untied were each read: the parameters are those of the
    model they build (10,768 untied, 9,168 tied), not of 103 characters or 4·d_model."""
    for flags, tied in (([], True), (["--untied"], False)):
        assert cli.main(["info", *SIZES, *flags]) == 0
        header, table = capsys.readouterr().out.split("\n", 1)
        assert header == ("DecoderLM vocab_size=50, d_model=32, n_heads=2, n_layers=1, d_ff=48, "
                          f"max_len=16, positional=rope, tie_weights={tied}, pre_ln=True, "
                          "batch_size=1")
        assert f"  {_model(tied).num_parameters():,}\n" in table, table
    assert _model(True).num_parameters() == 9_168 and _model(False).num_parameters() == 10_768


def test_info_prices_the_batch_and_the_bytes_per_number_it_is_given(capsys):
    """--batch-size 8 and --bytes 2 (float16) size the KV cache: 2·L·b·n·d = 2·1·8·16·32 = 8,192
    numbers of 2 bytes, 16.38 kB; the header says the batch it priced."""
    assert cli.main(["info", *SIZES, "--batch-size", "8", "--bytes", "2"]) == 0
    header, table = capsys.readouterr().out.split("\n", 1)
    assert header.endswith(", batch_size=8")
    assert "KV cache at full context           16.38kB  2·L·b·n·d = 8,192 numbers" in table
    assert describe_cost("lm", _model(True).config, 8, 2) in table


def test_info_table_prices_the_block_it_is_given(capsys):
    """--table's rows are one block of this model: its d_ff (48, not 4·32), its batch and its
    bytes per number, for the whole context and then for one token with a KV cache."""
    assert cli.main(["info", *SIZES, "--batch-size", "2", "--bytes", "2", "--table"]) == 0
    out = capsys.readouterr().out
    for decoding in (False, True):
        assert format_table(attention_table(2, 16, 32, 2, 48, decoding, 2)) in out, decoding
