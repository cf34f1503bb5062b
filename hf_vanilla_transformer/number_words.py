"""The built-in corpus: German number words to English ("dreihundertzweiundvierzig" -> "three hundred and
forty-two"), generated offline with num2words, for the main job (`--builtin_dataset number_words`, the default of
`scripts/train_translation.py` without data flags). German puts units before tens, so a model must learn to reorder.
"""

from __future__ import annotations

import numpy as np
from datasets import Dataset, DatasetDict

from .data import SPLITS, translation_dataset
from .errors import InputError

# The built-in corpus is balanced over these magnitudes, so that the numbers a person tries first (7, 42, 312,
# "zweitausend", "eine Million") are as well covered as the 5-digit ones that dominate a uniform draw.
NUMBER_MAGNITUDES = ("digits_1_2", "digits_3", "digits_4", "digits_5", "digits_6", "round")
_HELD_OUT_SHARE = 10  # validation and test each take at most 1/10 of a magnitude's numbers; training keeps the rest
CAPITALIZED_EVERY = 4  # every 4th source of each split starts with a capital, as at the start of a sentence ("Zwei")


def number_magnitude(number: int) -> str:
    """The built-in corpus' magnitude of `number`: "round" for 100 and up with at most two non-zero leading digits
    (hundert, zweitausend, fünfundzwanzigtausend, eine Million), else by digit count ("digits_1_2" below 100)."""
    digits = len(str(number))
    if number >= 100 and number % 10 ** (digits - 2) == 0:
        return "round"
    return "digits_1_2" if digits <= 2 else f"digits_{digits}"


def _magnitude_pools() -> dict[str, np.ndarray]:
    """Every number from 0 to a million, grouped by `number_magnitude`."""
    rounds = sorted({leading * 10**zeros for leading in range(10, 100) for zeros in range(1, 5)} | {10**6})
    pools = {"digits_1_2": np.arange(100)}
    for digits in range(3, 7):
        numbers = np.arange(10 ** (digits - 1), 10**digits)
        pools[f"digits_{digits}"] = numbers[numbers % 10 ** (digits - 2) != 0]
    pools["round"] = np.array(rounds)
    return pools  # in the order of NUMBER_MAGNITUDES


def _standalone_words(numbers: np.ndarray) -> np.ndarray:
    """Which of `numbers` are the language's building blocks: 0 to 20 and the tens ("fünf", "elf", "zwanzig"), and
    the single-digit round ones (100, ..., 900, 1000, ..., a million: "hundert", "eine Million"). Each is the only
    pair with its word standing alone, which no other number teaches: held out, "fünf" came out as "fifteen"."""
    single_digit = numbers % 10 ** np.floor(np.log10(np.maximum(numbers, 1))).astype(np.int64) == 0
    return (single_digit & (numbers >= 100)) | (numbers <= 20) | ((numbers < 100) & (numbers % 10 == 0))


def _even_shares(total: int, capacities: list[int]) -> list[int]:
    """Split `total` as evenly as the `capacities` allow, the smallest capacities filled first."""
    shares = [0] * len(capacities)
    remaining = total
    for position, index in enumerate(sorted(range(len(capacities)), key=capacities.__getitem__)):
        left = len(capacities) - position
        shares[index] = min(capacities[index], -(-remaining // left))
        remaining -= shares[index]
    if remaining:
        raise InputError(
            f"Asked for {total} held-out numbers, more than the built-in corpus can hold out ({sum(capacities)}): "
            "lower --number_words_eval_size."
        )
    return shares


def number_words_corpus(
    train_size: int = 10_000,
    validation_size: int = 500,
    test_size: int = 500,
    *,
    seed: int = 0,
) -> DatasetDict:
    """German -> English number words from num2words ("dreihundertzweiundvierzig" -> "three hundred and forty-two").

    Numbers from 0 to a million, the same number of training pairs for each of `NUMBER_MAGNITUDES` (a magnitude with
    fewer training numbers than that, such as the 80 or so numbers below 100, repeats them). Validation and test
    hold numbers that training does not, spread as evenly over the magnitudes as their sizes allow; they come first
    in each magnitude's seeded permutation, so they stay the same when only `train_size` changes. The words that
    stand alone (0 to 20, the tens, hundert, tausend, eine Million) are always trained on, each as often as a number
    below 100 is: "eine Million", the only pair with "Million", came out wrong when it had a round number's share.
    Every 4th German source of each split is capitalized ("Zweiundvierzig"), as a sentence starts (the built-in
    run's tokenizer reads it without case: `number_words_normalizer`). Each split has a `magnitude` column beside
    `translation`.
    """
    for name, size in (("train_size", train_size), ("validation_size", validation_size), ("test_size", test_size)):
        if size < 0:
            raise ValueError(f"number_words_corpus: {name} must be 0 or more pairs, got {size}.")
    pools = _magnitude_pools()
    capacities = [len(pool) // _HELD_OUT_SHARE for pool in pools.values()]
    held_out = {"validation": _even_shares(validation_size, capacities), "test": _even_shares(test_size, capacities)}
    train_counts = _even_shares(train_size, [train_size] * len(pools))
    chosen = {split: [] for split in SPLITS}
    trained = []
    for index, pool in enumerate(pools.values()):
        numbers = np.random.default_rng([seed, index]).permutation(pool)
        words = _standalone_words(numbers)
        numbers = np.concatenate([numbers[~words], numbers[words]])  # validation and test come from the others
        test, validation, train = np.split(numbers, np.cumsum([held_out["test"][index], held_out["validation"][index]]))
        chosen["test"].extend(test.tolist())
        chosen["validation"].extend(validation.tolist())
        trained.append(train)
    # each word that stands alone as often as a number of the magnitude repeated most (below 100), the rest cycled
    word_repeats = max(-(-count // len(train)) for count, train in zip(train_counts, trained))
    for count, train in zip(train_counts, trained):
        words = _standalone_words(train)
        repeated = np.tile(train[words], word_repeats)[:count]
        chosen["train"].extend(np.concatenate([repeated, np.resize(train[~words], count - len(repeated))]).tolist())
    mixed = {  # magnitudes interleaved, each split shuffled on its own
        split: np.random.default_rng([seed, len(pools), index]).permutation(chosen[split]).tolist()
        for index, split in enumerate(SPLITS)
    }
    return DatasetDict({split: _number_words_dataset(numbers) for split, numbers in mixed.items()})


def number_words_normalizer():
    """How the built-in corpus' tokenizer reads text: without case, and German's letters spelt in ASCII as they are
    typed without a German keyboard ("ZWEI", "Zwei" and "zwei"; "fünf" and "fuenf"; "dreißig" and "dreissig"). The
    English targets have neither capitals nor these letters, so they decode unchanged."""
    from tokenizers import normalizers

    spellings = (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("ß", "ss"))
    spelt = [normalizers.Replace(letter, spelling) for letter, spelling in spellings]
    return normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase(), *spelt])


def _number_words_dataset(numbers: list[int]) -> Dataset:
    """German and English words for each number, as a translation Dataset with each number's magnitude."""
    from num2words import num2words

    german = [_short_form(german_words(n), n) for n in numbers]
    german = [words[0].upper() + words[1:] if row % CAPITALIZED_EVERY == 0 else words
              for row, words in enumerate(german, 1)]
    english = [num2words(n, lang="en") for n in numbers]
    dataset = translation_dataset(german, english, "de", "en")
    return dataset.add_column("magnitude", [number_magnitude(n) for n in numbers])


def german_words(number: int) -> str:
    """`number` in German words, as num2words writes them but for its "einstausend" in every number from X01,000 to
    X01,999 (101,000 is "einhunderteinstausend"), which German writes "eintausend" ("einhunderteintausend"): the
    model learned the wrong form alone, and translated the right one with the "one" left out."""
    from num2words import num2words

    return num2words(number, lang="de").replace("einstausend", "eintausend")


def _short_form(german: str, number: int) -> str:
    """German says "hundert" and "tausend" as well as num2words' "einhundert" and "eintausend": a third of the
    numbers that start so (every one that leaves 1 when divided by 3, 100 and 1000 among them) drop the "ein"."""
    if number % 3 == 1 and german.startswith(("einhundert", "eintausend")):
        return german.removeprefix("ein")
    return german
