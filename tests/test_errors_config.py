"""Config validation: impossible settings raise a ValueError naming the field, the value and what is allowed."""

import tempfile

import pytest

from hf_vanilla_transformer import VanillaTransformerConfig


@pytest.mark.parametrize(
    "settings, field, allowed",
    [
        (dict(d_model=30), "encoder_attention_heads", "divisors of d_model"),
        (dict(d_model=64, decoder_attention_heads=5), "decoder_attention_heads", "divisors of d_model"),
        (dict(d_model=0), "d_model", "positive integer"),
        (dict(encoder_layers=-1), "encoder_layers", "positive integer"),
        (dict(decoder_ffn_dim=0), "decoder_ffn_dim", "positive integer"),
        (dict(vocab_size=2.5), "vocab_size", "positive integer"),
        (dict(max_position_embeddings=0), "max_position_embeddings", "positive integer"),
        (dict(dropout=1.0), "dropout", "[0, 1)"),
        (dict(attention_dropout=-0.1), "attention_dropout", "[0, 1)"),
        (dict(activation_dropout=2), "activation_dropout", "[0, 1)"),
        (dict(activation_function="relu6x"), "activation_function", "'relu'"),
        (dict(pad_token_id=37000), "pad_token_id", "[0, 36999]"),
        (dict(vocab_size=100, eos_token_id=[2, 100]), "eos_token_id", "[0, 99]"),
        (dict(decoder_start_token_id=-1), "decoder_start_token_id", "[0, 36999]"),
        (dict(layer_norm_eps=0.0), "layer_norm_eps", "> 0"),
        (dict(layer_norm_eps=float("nan")), "layer_norm_eps", "finite number > 0"),  # a NaN loss at every step
        (dict(layer_norm_eps=float("inf")), "layer_norm_eps", "finite number > 0"),  # every output the same
        (dict(init_std=float("inf")), "init_std", "finite number >= 0"),  # infinite weights, a NaN loss
        (dict(init_std=float("nan")), "init_std", "finite number >= 0"),  # torch's "normal expects std >= 0.0"
        (dict(dropout="0.1"), "dropout", "a number in [0, 1)"),  # as read from YAML or a command line
        (dict(attention_dropout=None), "attention_dropout", "a number in [0, 1)"),
        (dict(layer_norm_eps="1e-5"), "layer_norm_eps", "a finite number > 0"),
        (dict(init_std="0.02"), "init_std", "a finite number >= 0"),
        (dict(normalize_before="false"), "normalize_before", "True or False"),
        (dict(tie_word_embeddings="false"), "tie_word_embeddings", "True or False"),  # tied them, silently
        (dict(decoder_start_token_id=1.5), "decoder_start_token_id", "an integer"),  # started decoding at 1
        (dict(pad_token_id=True), "pad_token_id", "an integer"),  # a TypeError in torch's embedding
        (dict(eos_token_id="2"), "eos_token_id", "an integer"),  # a TypeError comparing str and int
        (dict(eos_token_id=[]), "eos_token_id", "a non-empty list"),  # an IndexError in beam search
        (dict(use_cache="no"), "use_cache", "True or False"),  # read as True
        (dict(is_encoder_decoder=False), "is_encoder_decoder", "must be True"),  # "The decoder needs its inputs"
    ],
)
def test_impossible_settings_name_field_value_and_what_is_allowed(settings, field, allowed):
    with pytest.raises(ValueError) as error:
        VanillaTransformerConfig(**settings)
    message = str(error.value)
    assert field in message and allowed in message
    value = settings.get(field, settings.get("d_model"))
    assert repr(value) in message or str(value) in message


@pytest.mark.parametrize("settings, message", [
    (dict(layers=3), "`layers` is not a VanillaTransformerConfig field: give `encoder_layers` and `decoder_layers` "
                     "(the training script's --layers sets both)."),
    (dict(attention_heads=4), "give `encoder_attention_heads` and `decoder_attention_heads`"),
    (dict(ffn_dim=512), "give `encoder_ffn_dim` and `decoder_ffn_dim`"),
])
def test_a_keyword_meant_for_both_stacks_is_refused(settings, message):
    """`VanillaTransformerConfig(d_model=128, layers=3, attention_heads=4, ffn_dim=512)` (the training script's flag
    names) made a 6+6-layer model with 8 heads and d_ff 2048, without a word, and wrote the names into config.json."""
    with pytest.raises(ValueError) as error:
        VanillaTransformerConfig(**settings)
    assert message in str(error.value)
    config = VanillaTransformerConfig(num_hidden_layers=2, custom_pipelines={})  # an alias, and a tool's own setting
    assert config.encoder_layers == 2 and config.custom_pipelines == {}


@pytest.mark.parametrize("settings, message", [
    (dict(norm_first=True), "`norm_first` is not a VanillaTransformerConfig field: its name here is `normalize_before`."),
    (dict(pre_ln=True), "its name here is `normalize_before`"),
    (dict(hidden_dropout_prob=0.3), "`hidden_dropout_prob` is not a VanillaTransformerConfig field: its name here is "
                                    "`dropout`."),
    (dict(dropout_rate=0.3), "its name here is `dropout`"),
    (dict(attention_probs_dropout_prob=0.1), "its name here is `attention_dropout`"),
    (dict(hidden_act="gelu"), "its name here is `activation_function`"),
    (dict(preset="big"), "`preset` is not a VanillaTransformerConfig field: the big model's config is "
                         "`VanillaTransformerConfig.big()` (the training script's --preset big)"),
])
def test_another_librarys_name_for_a_field_is_refused(settings, message):
    """`VanillaTransformerConfig(preset="big", norm_first=True)` made a base, post-LN model whose config.json said
    "big" and "norm_first", without a word; so did BERT's and T5's names for the dropouts (the model kept 0.1)."""
    with pytest.raises(ValueError) as error:
        VanillaTransformerConfig(**settings)
    assert message in str(error.value)


def test_a_config_json_holding_such_a_name_still_loads(tmp_path, caplog):
    """A config.json edited by hand (or saved before such names were refused) loads as its fields say, with a warning
    naming what is not read, rather than refusing the model its weights."""
    import json
    import logging

    VanillaTransformerConfig(d_model=64).save_pretrained(tmp_path)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "norm_first": True, "preset": "big"}))
    with caplog.at_level(logging.WARNING):
        config = VanillaTransformerConfig.from_pretrained(tmp_path)
    assert (config.d_model, config.normalize_before, hasattr(config, "norm_first")) == (64, False, False)
    assert "The config holds `norm_first`, `preset`, which VanillaTransformerConfig does not read: the model is built " \
           "from its fields alone" in caplog.text


def test_transformers_names_for_n_and_h_set_both_stacks():
    """`num_hidden_layers=2, num_attention_heads=4` (transformers' names) made a 2-layer, 4-head encoder and left the
    decoder at 6 layers and 8 heads, without a word: the paper's N and h are of both stacks."""
    config = VanillaTransformerConfig(num_hidden_layers=2, num_attention_heads=4, d_model=64)
    assert (config.encoder_layers, config.decoder_layers) == (2, 2)
    assert (config.encoder_attention_heads, config.decoder_attention_heads) == (4, 4)
    config.num_hidden_layers = 3
    assert (config.encoder_layers, config.decoder_layers, config.num_hidden_layers) == (3, 3, 3)
    config = VanillaTransformerConfig(encoder_layers=4, decoder_layers=2)
    assert config.num_hidden_layers == 4 and config.to_dict()["decoder_layers"] == 2  # read, the encoder's


def test_a_keyword_spelt_like_a_field_is_warned_about(caplog):
    """`d_modle=64` was kept as a setting of its own, the model 512 wide; a tool's own setting spelt like a field
    (transformers' tests save `layer_norm_epsilon` on every config) still loads."""
    import logging

    with caplog.at_level(logging.WARNING):
        config = VanillaTransformerConfig(d_modle=64)
    assert "`d_modle` is not a VanillaTransformerConfig field, and the model does not read it: did you mean " \
           "`d_model`?" in caplog.text
    assert config.d_model == 512


def test_changes_after_construction_are_checked_before_saving():
    config = VanillaTransformerConfig()
    config.dropout = 1.5
    with tempfile.TemporaryDirectory() as folder, pytest.raises(ValueError, match="dropout"):
        config.save_pretrained(folder)


def test_a_model_with_an_impossible_config_saves_nothing(tmp_path):
    """The config is checked before save_pretrained writes anything: transformers copied the model's code files
    first, leaving a folder of .py files without config.json or weights."""
    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration

    model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(
        vocab_size=16, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16))
    model.config.dropout = 1.5
    with pytest.raises(ValueError, match="dropout"):
        model.save_pretrained(tmp_path / "model")
    assert not (tmp_path / "model").exists() or not any((tmp_path / "model").iterdir())


def test_changes_after_construction_are_checked_when_a_model_is_made():
    """`config.d_model = 30` after the config was made: the model refuses it, not a reshape deep in torch later."""
    from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration

    config = VanillaTransformerConfig(d_model=32, encoder_attention_heads=4, decoder_attention_heads=4)
    config.d_model = 30
    with pytest.raises(ValueError, match="encoder_attention_heads`=4 does not divide `d_model`=30"):
        VanillaTransformerForConditionalGeneration(config)


def test_numpy_integers_are_sizes():
    """Sizes taken from arrays (`np.int64(512)`) were refused as "must be a positive integer, got np.int64(512)"."""
    import numpy as np

    config = VanillaTransformerConfig(d_model=np.int64(64), vocab_size=np.int32(100), eos_token_id=np.int64(2))
    assert config.d_model == 64 and type(config.d_model) is int and config.to_dict()["vocab_size"] == 100
    with tempfile.TemporaryDirectory() as folder:
        config.save_pretrained(folder)  # JSON holds plain ints
        assert VanillaTransformerConfig.from_pretrained(folder).eos_token_id == 2


def test_numpy_floats_are_probabilities_and_epsilons(tmp_path):
    """`dropout=np.float32(0.1)` was refused as "must be a number in [0, 1), got np.float32(0.1)"; so were such an
    epsilon and init_std (np.float64, a float, passed)."""
    import numpy as np

    config = VanillaTransformerConfig(dropout=np.float32(0.1), layer_norm_eps=np.float32(1e-6), init_std=np.float16(0.5))
    assert (config.dropout, config.layer_norm_eps, config.init_std) == (0.1, 1e-6, 0.5)  # as written, in JSON too
    assert type(config.dropout) is float
    config.save_pretrained(tmp_path)
    assert VanillaTransformerConfig.from_pretrained(tmp_path).dropout == 0.1
    with pytest.raises(ValueError, match="`dropout` is a probability"):
        VanillaTransformerConfig(dropout=np.float32(1.5))


def test_valid_edge_values_are_accepted():
    VanillaTransformerConfig(dropout=0.0, d_model=8, encoder_attention_heads=8, decoder_attention_heads=1)
    VanillaTransformerConfig(vocab_size=3, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    VanillaTransformerConfig(bos_token_id=None, activation_function="gelu")
