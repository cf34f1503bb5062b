"""What `generate()` does for this model beyond transformers' `GenerationMixin`: the paper's decoding as the default
(beam 4, length penalty 0.6, at most source length + 50 tokens [6.1]), and what a translation needs that transformers
5 leaves out or gets wrong for it (the attention mask of padded sources, padding after a translation's end, beams that
share their source's encoder output). Kept out of the modeling file, which imports it relatively so that
`save_pretrained` ships it with the model.
"""

import contextlib
import copy
from collections.abc import Callable

import torch
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.generation.stopping_criteria import MaxLengthCriteria

from .input_checks import check_id_batch, check_is_tensor, check_token_ids, on_host

PAPER_DECODING = {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True}
"""Beam search with beam size 4 and length penalty 0.6 [6.1], transformers' penalty `score / length^0.6` (the paper's,
GNMT's `((5 + length) / 6)^0.6`, is not one a generation config can choose)."""


def check_encoder_decoder_settings(guidance_scale: float | None, kwargs: dict) -> None:
    """ValueError for what transformers' `generate()` does for decoder-only models alone, which an encoder-decoder
    otherwise meets as an error about its forward's inputs."""
    if guidance_scale is not None and guidance_scale != 1:
        raise ValueError(
            f"guidance_scale={guidance_scale}: transformers' classifier-free guidance scores the tokens without the "
            "prompt by running the model on the decoder's tokens alone, as a decoder-only model, and a translation "
            "model has no output without its source. Leave guidance_scale out (or 1)."
        )
    if kwargs.get("decoder_inputs_embeds") is not None:
        raise ValueError(
            "decoder_inputs_embeds: transformers' generate() continues a decoder prompt given as ids; pass it as "
            "`decoder_input_ids` (the first id config.decoder_start_token_id), or call the model's forward with "
            "decoder_inputs_embeds."
        )


class TranslationGenerationMixin(GenerationMixin):
    """`GenerationMixin` with the paper's decoding settings as defaults, for the Transformer's
    `VanillaTransformerForConditionalGeneration` (which calls `_default_to_the_papers_decoding` once made)."""

    def _default_to_the_papers_decoding(self) -> None:
        """The paper's beam search [6.1] where the generation config sets none; a saved generation config wins. A
        config that chose greedy search (`num_beams` 1) is left without the beam settings, which transformers
        refuses beside it when the config is saved."""
        config = self.generation_config
        if config is None or (config.num_beams is not None and config.num_beams <= 1):
            return
        for name, value in PAPER_DECODING.items():
            if getattr(config, name, None) is None:
                setattr(config, name, value)

    def adjust_generation_fn(self, *args, **kwargs):
        """Loading: the saved generation config, or, where the folder has none (a model saved without it, weights
        and config.json alone), one made from config.json, which holds no decoding settings: the paper's then. A
        config that a Seq2SeqTrainer saved with all of transformers' defaults filled in is read without them."""
        super().adjust_generation_fn(*args, **kwargs)
        self._forget_placeholder_max_length()
        self._default_to_the_papers_decoding()

    def generate(self, inputs: torch.Tensor | None = None, generation_config=None, **kwargs):
        """`GenerationMixin.generate` with the paper's length limit [6.1] as the default: at most source length + 50
        new tokens (or the minimum asked for, `min_new_tokens` or `min_length`, if more), unless `max_length` or
        `max_new_tokens` is set in the call, the generation config given or the model's. In a padded batch the
        source length is the padded one, as in fairseq.

        Source ids without an `attention_mask` get the mask their padding implies (ids other than `pad_token_id`, the
        call's or the config's), as transformers 4 and fairseq did: transformers 5 infers it for decoder-only models
        only, so a padded batch without its mask would attend to the padding and translate its shorter sentences
        differently. A beam search gets the paper's length penalty and early stopping where its settings leave them
        unset (`_beam_settings`), and every token after a translation's end token is `pad_token_id`, the decoder
        prompt (`decoder_input_ids`) left as it is (`_pad_after_the_end`)."""
        self._forget_placeholder_max_length()
        config = generation_config if generation_config is not None else self.generation_config

        def setting(name):  # as transformers merges them: the call (None too: `eos_token_id=None` turns the end
            # token off), the config given, the model's config
            if name in kwargs:
                return kwargs[name]
            for value in (getattr(config, name, None), getattr(self.generation_config, name, None)):
                if value is not None:
                    return value
            return None

        limits = (setting("max_length"), setting("max_new_tokens"))
        beams = setting("num_beams")
        if beams is not None and beams < 1:  # transformers divides by it
            raise ValueError(f"`num_beams` must be at least 1 (1: greedy search), got {beams}.")
        check_encoder_decoder_settings(setting("guidance_scale"), kwargs)
        chosen = self._beam_settings(setting, beams or 1, kwargs)
        source = next((given for given in (inputs, kwargs.get("input_ids"), kwargs.get("inputs_embeds"))
                       if given is not None), None)
        if source is not None and kwargs.get("inputs_embeds") is None:
            check_id_batch("input_ids", source)
        if kwargs.get("attention_mask") is not None:
            check_is_tensor("attention_mask", kwargs["attention_mask"])
        prompts = kwargs.get("decoder_input_ids")
        if isinstance(prompts, torch.Tensor) and prompts.dim() == 2 and source is not None and source.dim() >= 2 \
                and prompts.shape[0] != source.shape[0]:  # beam search would match them up across sources
            raise ValueError(
                f"decoder_input_ids has {prompts.shape[0]} rows for {source.shape[0]} sources: give one prompt row "
                "per source (repeat a shared prompt, e.g. prompt.expand(len(sources), -1))."
            )
        if all(limit is None for limit in limits):
            encoder_outputs = kwargs.get("encoder_outputs")
            source_length = source.shape[1] if source is not None else encoder_output_length(encoder_outputs)
            if source_length is not None:  # and room for a minimum length asked for (min_length counts the start)
                least = max(setting("min_new_tokens") or 0, (setting("min_length") or 0) - 1)
                chosen["max_new_tokens"] = max(source_length + 50, least)
        if generation_config is None:
            kwargs.update(chosen)
        elif chosen:  # the caller's config, copied: with it, settings in kwargs are a deprecation warning
            generation_config = copy.deepcopy(generation_config)
            for name, value in chosen.items():
                setattr(generation_config, name, value)
        pad, eos = setting("pad_token_id"), setting("eos_token_id")  # what the search uses: None turns one off
        if kwargs.get("attention_mask") is None and kwargs.get("encoder_outputs") is None:
            # the source's padding is the tokenizer's, which the model's config records where the call sets none
            mask = self._padding_mask_of(source, *(value if value is not None else getattr(self.config, name)
                                                   for name, value in (("pad_token_id", pad), ("eos_token_id", eos))))
            if mask is not None:
                kwargs["attention_mask"] = mask
        if source is not None and not on_host(source) and not source.is_floating_point() and source.numel():
            # one sync per call for the error a CPU model gives; the forward passes check on the device
            check_token_ids("input_ids", torch.stack(torch.aminmax(source)).view(1, 2).cpu(), self.config.vocab_size)
        output = super().generate(inputs, generation_config=generation_config, **kwargs)
        start = setting("decoder_start_token_id")
        prompt_length = self._prompt_length(prompts, setting("bos_token_id") if start is None else start)
        self._pad_after_the_end(output if isinstance(output, torch.Tensor) else output.sequences, pad, eos,
                                prompt_length)
        return output

    @staticmethod
    def _prompt_length(prompts: torch.Tensor | None, start: int | None) -> int:
        """The length of the decoder prompt that generate() continues: the start token alone, or the
        `decoder_input_ids` given, with the start token that transformers puts in front of them where no row begins
        with it."""
        if not isinstance(prompts, torch.Tensor) or prompts.dim() != 2:
            return 1
        prepended = start is not None and bool((prompts[:, 0] != torch.as_tensor(start, device=prompts.device)).all())
        return prompts.shape[1] + prepended

    @staticmethod
    def _beam_settings(setting: Callable, beams: int, kwargs: dict) -> dict:
        """The paper's length penalty and early stopping [6.1] for a beam search that leaves them unset, as they are
        read back from a saved model (`_default_to_the_papers_decoding`): a model decodes alike before its save and
        after. For one beam, where neither has an effect, transformers' neutral values instead of those merged from
        the model's config, which transformers warns about as if the caller had set them."""
        chosen = {}
        for name, neutral in (("length_penalty", 1.0), ("early_stopping", False)):
            value = setting(name)
            if beams > 1 and value is None:
                chosen[name] = PAPER_DECODING[name]
            elif beams == 1 and kwargs.get(name) is None and value not in (None, neutral):
                chosen[name] = neutral
        return chosen

    def _pad_after_the_end(
        self, sequences: torch.Tensor, pad: int | None, eos: int | list[int] | None, prompt_length: int = 1
    ) -> None:
        """Make every token after a translation's end token (`eos`, the call's or the config's) `pad`, in place. Beam
        search (transformers 5.23, 5.24) fills the rest of its shorter outputs with `pad_token_id or eos_token_id`: with
        this package's pad id, 0, that is the end token, repeated, where greedy search pads, and a length counted as
        `np.count_nonzero(preds != pad)` counts them. The decoder prompt (the start token, or `decoder_input_ids`
        given, which may hold end tokens: a previous sentence as context) is left as it is."""
        if pad != 0 or eos is None or sequences.dim() != 2 or sequences.shape[1] - prompt_length < 2:
            return  # transformers fills with pad_token_id where it is not 0
        generated = sequences[:, prompt_length:]
        ends = torch.isin(generated, torch.tensor(eos, device=generated.device))
        generated.masked_fill_(ends.cumsum(1) - ends.long() > 0, pad)  # strictly after the first end

    def _get_stopping_criteria(self, *args, **kwargs):
        """GenerationMixin's, without the warning that an output past `max_position_embeddings` may fail: the
        sinusoidal encodings [3.5] are computed for any position, so the length limits alone end a translation."""
        criteria = super()._get_stopping_criteria(*args, **kwargs)
        for criterion in criteria:
            if isinstance(criterion, MaxLengthCriteria):
                criterion.max_position_embeddings = None
        return criteria

    @contextlib.contextmanager
    def _generation_config_as_saved(self):
        """For `save_pretrained`: the generation config without what Seq2SeqTrainer filled in
        (`_forget_placeholder_max_length`), and without the paper's beam settings (`_default_to_the_papers_decoding`)
        where it was turned to greedy search since (`num_beams = 1`): transformers refuses to save `length_penalty`
        and `early_stopping` beside one beam, after it has written config.json (a folder without weights). Those are
        set again after the save, so that a later generate(num_beams=4) still decodes as the paper does."""
        self._forget_placeholder_max_length()
        config = self.generation_config
        unset = {}
        if config is not None and (config.num_beams is None or config.num_beams <= 1):  # None: one beam
            unset = {name: value for name, value in PAPER_DECODING.items()
                     if name != "num_beams" and getattr(config, name, None) == value}
        for name in unset:
            setattr(config, name, None)
        try:
            yield
        finally:
            for name, value in unset.items():
                setattr(config, name, value)

    def _forget_placeholder_max_length(self) -> None:
        """Undo what Seq2SeqTrainer writes into the generation config: after every evaluation batch it fills each
        unset field with transformers' default, and the placeholder `max_length=20` among them would cut every later
        translation, and every saved model's, at 20 tokens. A config seen before the filling (at a generate(), a
        save or a load) records which fields were unset then (`_generation_fields_unset`): those holding their
        default are unset again, so that a `max_length` of 20 set by hand before an evaluation is kept. A config
        first seen filled (a Seq2SeqTrainer's saved generation_config.json) is recognised by all ~30 defaults being
        set, `max_length` to 20 or unset, which no one does by hand. The paper's decoding settings stay, since unset
        they would mean the paper's values (`PAPER_DECODING`)."""
        config = self.generation_config
        if config is None:
            return
        defaults = {name: value for name, value in config._get_default_generation_params().items() if value is not None}
        unset = {name for name in defaults if getattr(config, name, None) is None}
        seen = self.__dict__.get("_generation_fields_unset")
        if unset - {"max_length"}:  # not filled: what is unset now is what a filling would write
            self._generation_fields_unset = (config, frozenset(unset))
            return
        if seen is not None and seen[0] is config:
            unset |= seen[1]
        elif config.max_length in (None, 20):
            unset = set(defaults)
        else:
            return
        for name in unset:
            if name not in PAPER_DECODING and getattr(config, name, None) == defaults[name]:
                setattr(config, name, None)
        self._generation_fields_unset = (config, frozenset(unset))

    @staticmethod
    def _padding_mask_of(source: torch.Tensor | None, pad: int | None, eos: int | list[int] | None
                         ) -> torch.Tensor | None:
        """`source` ids' attention mask, 0 at `pad` (the call's `pad_token_id`, else the generation config's or the
        model's); None for embeddings, or without a pad token distinct from the end token (then padding cannot be told
        from text)."""
        if source is None or source.is_floating_point() or source.dim() != 2:
            return None
        if pad is None or pad in (eos if isinstance(eos, list) else [eos]):
            return None
        return source.ne(pad).long()

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, *args, **kwargs) -> dict:
        """GenerationMixin's, plus the decoder's positions where it turns a padded decoder prompt's mask
        (`decoder_attention_mask`) into a 4-D one (a static cache, for a compiled forward), from which the positions
        could not be counted: counted from the 2-D one as the model's forward counts them [3.5]."""
        padding = kwargs.get("decoder_attention_mask")
        inputs = super().prepare_inputs_for_generation(input_ids, *args, **kwargs)
        mask, ids = inputs.get("decoder_attention_mask"), inputs.get("decoder_input_ids")
        made_4d = not (isinstance(mask, torch.Tensor) and mask.dim() == 2)  # a 4-D tensor, or one per layer type
        if isinstance(padding, torch.Tensor) and padding.dim() == 2 and made_4d and ids is not None \
                and inputs.get("decoder_position_ids") is None:
            inputs["decoder_position_ids"] = self.get_decoder().embed_positions.count_positions(padding, ids.shape[1])
        return inputs

    def _expand_inputs_for_generation(self, expand_size=1, is_encoder_decoder=False, input_ids=None, **model_kwargs):
        """Beams (and returned sequences) of a source share its encoder output and mask instead of copies of them:
        the cross-attention keys/values are projected once per source, and its beams' queries attend together."""
        names = ("encoder_outputs", "attention_mask")
        shared = {name: model_kwargs.pop(name) for name in names if name in model_kwargs}
        input_ids, model_kwargs = super()._expand_inputs_for_generation(expand_size, False, input_ids, **model_kwargs)
        return input_ids, {**model_kwargs, **shared}

    @staticmethod
    def _reorder_cache(cache: Cache, beam_idx: torch.LongTensor) -> Cache:
        """Beam search keeps the self-attention cache of the chosen beams. The cross-attention cache stays as it is:
        it holds one copy of each source's memory keys/values, shared by the source's beams (see
        `_expand_inputs_for_generation`), and beams are only chosen among a source's own."""
        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache.reorder_cache(beam_idx)
        else:
            cache.reorder_cache(beam_idx)
        return cache


def encoder_output_length(encoder_outputs) -> int | None:
    """The source length of an encoder output passed to `generate()` (a BaseModelOutput or a tuple), if any."""
    return None if encoder_outputs is None else encoder_outputs[0].shape[1]
