"""hf-vanilla-transformer: the original Transformer (Vaswani et al., 2017) as a native Hugging Face model.

Importing the package registers `model_type="vanilla_transformer"` with AutoConfig, AutoModel and
AutoModelForSeq2SeqLM, and marks the classes for `save_pretrained` to write `auto_map` and the code files, so a
saved model also loads with `trust_remote_code=True` where this package is not installed.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .conversion import from_marian
from .export import export_ctranslate2
from .hub import push_model_dir
from .model_card import save_model_card
from .packed_linear import quantize_int8
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
)
from .pipeline_translation import TranslationPipeline, save_translation_pipeline, translate_sentences

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True)

VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__version__ = "0.1.0"

__all__ = [
    "VanillaTransformerConfig",
    "VanillaTransformerForConditionalGeneration",
    "VanillaTransformerModel",
    "VanillaTransformerPreTrainedModel",
    "TranslationPipeline",
    "export_ctranslate2",
    "from_marian",
    "push_model_dir",
    "quantize_int8",
    "save_model_card",
    "save_translation_pipeline",
    "translate_sentences",
]
