"""`evaluate` metric: corpus BLEU and chrF through sacrebleu; `evaluate.load(<path of this file>)` works offline.

It stands in for `evaluate.load("sacrebleu")` (which needs the Hub), as in transformers' translation example: BLEU is
also `score`, and sacrebleu's BLEU settings (`tokenize`, `lowercase`, `smooth_method`, ...) are taken as that
metric takes them."""

import datasets
import evaluate

from hf_vanilla_transformer.metrics import bleu_tokenizer, check_sentence_lists, score_translations

_DESCRIPTION = "Corpus BLEU and chrF (sacrebleu defaults) of detokenized translations against references."
_KWARGS_DESCRIPTION = """
Args:
    predictions: list of translations, one string each.
    references: one reference string per prediction, or a list of reference strings per prediction.
    bleu_tokenize (or tokenize, as evaluate's sacrebleu names it): sacrebleu's tokenization for BLEU, default "13a"
        ("zh" for Chinese, "ja-mecab" for Japanese, "char", ...; `hf_vanilla_transformer.metrics.bleu_tokenizer(
        target_lang)` chooses as sacrebleu's -l does).
    smooth_method, smooth_value, force, use_effective_order: sacrebleu.BLEU's settings, its defaults.
    char_order, word_order (2 for chrF++), beta, whitespace, eps_smoothing: sacrebleu.CHRF's, its defaults.
    lowercase: both metrics' (case-insensitive scores).
Returns:
    bleu: corpus BLEU (0-100), also as `score`, with `counts`, `totals`, `precisions`, `bp`, `sys_len` and `ref_len`
    (evaluate's sacrebleu's names). chrf: corpus chrF (0-100). bleu_signature, chrf_signature: sacreBLEU's, the
    settings a reported score needs beside it.
"""

_BLEU_OPTIONS = ("smooth_method", "smooth_value", "force", "effective_order")
_CHRF_OPTIONS = ("char_order", "word_order", "beta", "whitespace", "eps_smoothing")
_CITATION = """@inproceedings{post-2018-call, title={A Call for Clarity in Reporting {BLEU} Scores},
author={Post, Matt}, booktitle={Proceedings of the Third Conference on Machine Translation}, year={2018}}"""


class BleuChrf(evaluate.Metric):
    """BLEU and chrF of `hf_vanilla_transformer.metrics.compute_translation_metrics` as an `evaluate` metric."""

    def _info(self) -> evaluate.MetricInfo:
        """Describe inputs: string predictions with one or several string references each."""
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Sequence(datasets.Value("string"))}
                ),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
            reference_urls=["https://github.com/mjpost/sacrebleu"],
        )

    def compute(self, *, predictions=None, references=None, **kwargs) -> dict:
        """`evaluate.Metric.compute`, with the errors of `compute_translation_metrics` for inputs `evaluate` would
        fail on inside (an empty list: IndexError) or take apart (one string: a sentence a character)."""
        if predictions is not None or references is not None:  # both None: those of add_batch
            check_sentence_lists(predictions, references)
            if not len(predictions):
                raise ValueError("No predictions to score: give at least one translation and its reference.")
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(self, predictions, references, bleu_tokenize: str | None = None, tokenize: str | None = None,
                 lowercase: bool = False, **options) -> dict:
        """Corpus BLEU and chrF."""
        if "use_effective_order" in options:  # evaluate's sacrebleu's name for sacrebleu.BLEU's effective_order
            options["effective_order"] = options.pop("use_effective_order")
        if unknown := sorted(options.keys() - {*_BLEU_OPTIONS, *_CHRF_OPTIONS}):
            bleu_names = ", ".join(name.replace("effective_order", "use_effective_order") for name in _BLEU_OPTIONS)
            raise ValueError(f"Unknown setting{'s' * (len(unknown) > 1)} {', '.join(unknown)}: BLEU takes tokenize, "
                             f"lowercase, {bleu_names}; chrF takes lowercase, {', '.join(_CHRF_OPTIONS)}.")
        if bleu_tokenize is not None and tokenize is not None and bleu_tokenize != tokenize:
            raise ValueError(f"bleu_tokenize={bleu_tokenize!r} and tokenize={tokenize!r} are one setting: give one.")
        tokenization = bleu_tokenizer(tokenize=bleu_tokenize or tokenize or "13a")  # sacrebleu's KeyError otherwise
        chrf_options = {key: options.pop(key) for key in _CHRF_OPTIONS if key in options}
        scores, signatures = score_translations(  # lowercase: the two scores case-insensitive alike
            predictions, references, bleu_tokenize=tokenization, lowercase=lowercase,
            chrf_options={**chrf_options, "lowercase": lowercase}, **options)
        bleu, chrf = scores["bleu"], scores["chrf"]
        return {"score": bleu.score, "counts": bleu.counts, "totals": bleu.totals, "precisions": bleu.precisions,
                "bp": bleu.bp, "sys_len": bleu.sys_len, "ref_len": bleu.ref_len, "bleu": bleu.score,
                "chrf": chrf.score, "bleu_signature": signatures["bleu"], "chrf_signature": signatures["chrf"]}
