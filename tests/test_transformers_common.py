"""transformers' own common model tests (`ModelTesterMixin`), run on our model and, for comparison, on MarianMTModel.

The mixin lives in `tests/test_modeling_common.py` of the transformers source distribution, not in the wheel.
`scripts/fetch_transformers_tests.py` extracts it to `third_party/transformers-<installed version>/tests`
(or set `TRANSFORMERS_TESTS_DIR`); this module runs that fetch itself (pip download from PyPI), and is skipped
when it cannot. `scripts/run_transformers_common_tests.py`
fetches it, runs this module and compares the two models.

Both test classes use the same tiny tester, so every test that passes for `MarianCommonTest` should pass for
`VanillaTransformerModelTest`. Marian's run is part of the comparison, not of the default test run (half a minute
on 2 cores, testing transformers rather than this package): the comparison script sets HF_VANILLA_COMPARE_MARIAN=1.
"""

import importlib.util
import os
from unittest import mock
import sys
import types
import unittest
from pathlib import Path

import pytest
import transformers

REPO_ROOT = Path(__file__).resolve().parent.parent
SDIST_TESTS = Path(
    os.environ.get("TRANSFORMERS_TESTS_DIR")
    or REPO_ROOT / "third_party" / f"transformers-{transformers.__version__}" / "tests"
)

def _fetch_sdist_tests() -> None:
    """Fetch the installed transformers' sdist tests unless fetched whole (the script's marker file, written last:
    the other test process may be extracting them); any failure (offline, say) only skips."""
    if "TRANSFORMERS_TESTS_DIR" in os.environ:
        return
    spec = importlib.util.spec_from_file_location("fetch_transformers_tests", REPO_ROOT / "scripts" / "fetch_transformers_tests.py")
    fetcher = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(fetcher)
        fetcher.fetch(quiet=True)
    except Exception as error:  # noqa: BLE001 - reported in the skip reason below
        print(f"could not fetch transformers' sdist tests: {error}", file=sys.stderr)


_fetch_sdist_tests()
if not (SDIST_TESTS / "test_modeling_common.py").is_file():
    pytest.skip(
        f"transformers' common tests are not at {SDIST_TESTS}; "
        "run `python scripts/fetch_transformers_tests.py` (downloads the transformers sdist from PyPI)",
        allow_module_level=True,
    )

# The sdist's tests are imported as a package under a name of their own, so they cannot clash with this repo's
# `tests` folder. The sdist leaves out some modules that test_modeling_common.py and test_configuration_common.py
# import; those are replaced by stand-ins below, and only when the sdist really lacks them.
SDIST_PACKAGE = "transformers_sdist_tests"


class _MissingExportTesterMixin:
    """Stand-in for tests/exporters/test_export.py (not in the sdist): no export tests are run."""


class _MissingGenerationTesterMixin:
    """Stand-in for tests/generation/test_utils.py (not in the sdist): no generate() tests are run."""


# The arguments every config must accept and keep, as in transformers' tests/utils/test_configuration_utils.py
# (not in the sdist), restricted to the fields `PreTrainedConfig` itself declares in transformers v5.
_CONFIG_COMMON_KWARGS = {
    "return_dict": False,
    "output_hidden_states": True,
    "dtype": "float16",
    "chunk_size_feed_forward": 5,
    "architectures": ["BertModel"],
    "id2label": {0: "label"},
    "label2id": {"label": "0"},
    "problem_type": "regression",
}

_STAND_INS = {
    "exporters.test_export": {"ExportTesterMixin": _MissingExportTesterMixin},
    "generation.test_utils": {"GenerationTesterMixin": _MissingGenerationTesterMixin},
    "utils.test_configuration_utils": {"config_common_kwargs": _CONFIG_COMMON_KWARGS},
}


def _import_sdist_tests():
    if SDIST_PACKAGE not in sys.modules:
        init = SDIST_TESTS / "__init__.py"
        if not init.is_file():
            init.touch()
        spec = importlib.util.spec_from_file_location(
            SDIST_PACKAGE, init, submodule_search_locations=[str(SDIST_TESTS)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules[SDIST_PACKAGE] = package
        spec.loader.exec_module(package)
        for name, attributes in _STAND_INS.items():
            if (SDIST_TESTS / (name.replace(".", "/") + ".py")).is_file():
                continue
            parent, _, _ = name.rpartition(".")
            if f"{SDIST_PACKAGE}.{parent}" not in sys.modules:
                subpackage = types.ModuleType(f"{SDIST_PACKAGE}.{parent}")
                subpackage.__path__ = []
                sys.modules[subpackage.__name__] = subpackage
            module = types.ModuleType(f"{SDIST_PACKAGE}.{name}")
            module.__dict__.update(attributes)
            sys.modules[module.__name__] = module
    common = importlib.import_module(f"{SDIST_PACKAGE}.test_modeling_common")
    configuration = importlib.import_module(f"{SDIST_PACKAGE}.test_configuration_common")
    return common, configuration


_common, _configuration = _import_sdist_tests()
ModelTesterMixin = _common.ModelTesterMixin
ConfigTester = _configuration.ConfigTester
ids_tensor = _common.ids_tensor
GenerationTesterMixin = sys.modules[f"{SDIST_PACKAGE}.generation.test_utils"].GenerationTesterMixin
GENERATION_TESTS_SHIPPED = GenerationTesterMixin is not _MissingGenerationTesterMixin

import torch  # noqa: E402
from transformers import MarianConfig, MarianModel, MarianMTModel  # noqa: E402
from transformers.models.auto import modeling_auto  # noqa: E402
from transformers.testing_utils import torch_device  # noqa: E402

# Our model, once its module exists. An import error fails every test of our class, not the whole module.
_spec = importlib.util.find_spec("hf_vanilla_transformer")
VANILLA_MODULE_EXISTS = _spec is not None and any(
    (Path(location) / "modeling_vanilla_transformer.py").is_file() for location in _spec.submodule_search_locations
)
VANILLA_IMPORT_ERROR = None
VanillaTransformerConfig, VANILLA_MODEL_CLASSES = None, ()
if VANILLA_MODULE_EXISTS:
    try:
        from hf_vanilla_transformer import (
            VanillaTransformerConfig,
            VanillaTransformerForConditionalGeneration,
            VanillaTransformerModel,
        )

        VANILLA_MODEL_CLASSES = (VanillaTransformerModel, VanillaTransformerForConditionalGeneration)
    except Exception as error:  # noqa: BLE001 - reported by every test of VanillaTransformerModelTest
        VANILLA_IMPORT_ERROR = error


class Seq2SeqModelTester:
    """A tiny encoder-decoder in the BART/Marian config names, with random inputs for the common tests."""

    def __init__(
        self,
        parent,
        config_class,
        batch_size=13,
        seq_length=7,
        is_training=True,
        vocab_size=99,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=32,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=20,
        eos_token_id=2,
        pad_token_id=1,
        bos_token_id=0,
        decoder_start_token_id=3,
    ):
        self.parent = parent
        self.config_class = config_class
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.is_training = is_training
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id
        self.bos_token_id = bos_token_id
        self.decoder_start_token_id = decoder_start_token_id

    def config_kwargs(self):
        return {
            "vocab_size": self.vocab_size,
            "d_model": self.hidden_size,
            "encoder_layers": self.num_hidden_layers,
            "decoder_layers": self.num_hidden_layers,
            "encoder_attention_heads": self.num_attention_heads,
            "decoder_attention_heads": self.num_attention_heads,
            "encoder_ffn_dim": self.intermediate_size,
            "decoder_ffn_dim": self.intermediate_size,
            "activation_function": self.hidden_act,
            "dropout": self.hidden_dropout_prob,
            "attention_dropout": self.attention_probs_dropout_prob,
            "max_position_embeddings": self.max_position_embeddings,
            "eos_token_id": self.eos_token_id,
            "bos_token_id": self.bos_token_id,
            "pad_token_id": self.pad_token_id,
            "decoder_start_token_id": self.decoder_start_token_id,
        }

    def get_config(self):
        return self.config_class(**self.config_kwargs())

    def prepare_config_and_inputs(self):
        # Ids 0-2 are special; every source ends with </s> and has no padding, so no row is fully masked.
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        input_ids[:, -1] = self.eos_token_id
        decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        config = self.get_config()
        inputs_dict = {
            "input_ids": input_ids,
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": input_ids.ne(config.pad_token_id),
            "decoder_attention_mask": decoder_input_ids.ne(config.pad_token_id),
        }
        return config, inputs_dict

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class _Seq2SeqCommonTests(ModelTesterMixin):
    """The common tests with the settings of an encoder-decoder translation model; subclasses name the model."""

    config_class = None
    is_encoder_decoder = True
    test_missing_keys = True

    def setUp(self):
        self.model_tester = Seq2SeqModelTester(self, config_class=self.config_class)
        self.config_tester = ConfigTester(self, config_class=self.config_class, **self.model_tester.config_kwargs())

    def test_config(self):
        self.config_tester.run_common_tests()

    def test_forward_shapes(self):
        """Not from the mixin: the logits and encoder output have the shapes the tester implies."""
        config, inputs = self.model_tester.prepare_config_and_inputs()
        model = self.all_model_classes[-1](config).to(torch_device).eval()
        with torch.no_grad():
            out = model(**inputs)
        tester = self.model_tester
        self.assertEqual(out.logits.shape, (tester.batch_size, tester.seq_length, tester.vocab_size))
        memory_shape = (tester.batch_size, tester.seq_length, tester.hidden_size)
        self.assertEqual(out.encoder_last_hidden_state.shape, memory_shape)

    if not GENERATION_TESTS_SHIPPED:

        @unittest.skip("tests/generation/test_utils.py (GenerationTesterMixin) is not in the transformers sdist")
        def test_generation_tester_mixin_inheritance(self):
            pass


COMPARE_WITH_MARIAN = os.environ.get("HF_VANILLA_COMPARE_MARIAN", "") not in ("", "0")


@unittest.skipUnless(
    COMPARE_WITH_MARIAN,
    "MarianMTModel's run is the comparison's (scripts/run_transformers_common_tests.py, or "
    "HF_VANILLA_COMPARE_MARIAN=1): it tests transformers, not this package",
)
class MarianCommonTest(_Seq2SeqCommonTests, unittest.TestCase):
    """The reference: MarianMTModel is the same post-LN network, so it sets the bar for our model."""

    config_class = MarianConfig
    all_model_classes = (MarianModel, MarianMTModel)


@unittest.skipIf(not VANILLA_MODULE_EXISTS, "hf_vanilla_transformer/modeling_vanilla_transformer.py does not exist")
class VanillaTransformerModelTest(_Seq2SeqCommonTests, unittest.TestCase):
    config_class = VanillaTransformerConfig
    all_model_classes = VANILLA_MODEL_CLASSES
    # The mixin runs this check only for models added to transformers since 2023 (it reads the year from the config
    # file's copyright line); ours is new, so it runs. Marian, from 2020, skips it.
    test_can_init_all_missing_weights_before_2023 = True

    def setUp(self):
        if VANILLA_IMPORT_ERROR is not None:
            raise ImportError(f"cannot import our model: {VANILLA_IMPORT_ERROR!r}") from VANILLA_IMPORT_ERROR
        # The mixin picks the inputs and checks of a class (labels, loss, base-model tests) by looking its name up in
        # transformers' static auto-mapping name tables, which list only the library's own models. While a test runs,
        # our classes are listed there as a model added to transformers would be; Marian is listed already.
        model_type = VanillaTransformerConfig.model_type
        for table, class_name in (
            (modeling_auto.MODEL_MAPPING_NAMES, "VanillaTransformerModel"),
            (modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, "VanillaTransformerForConditionalGeneration"),
        ):
            patcher = mock.patch.dict(table, {model_type: class_name})
            patcher.start()
            self.addCleanup(patcher.stop)
        super().setUp()
