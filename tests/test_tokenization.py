"""Tests for hf_vanilla_transformer.tokenization: shared byte-level BPE, eos post-processing, save/reload."""

import pytest
from datasets import Dataset
from transformers import AutoTokenizer

from hf_vanilla_transformer.tokenization import special_token_ids, train_bpe_tokenizer, translation_texts

CORPUS = [
    "Ein Mann fährt mit dem Fahrrad über die Straße.",
    "A man rides his bike across the street.",
    "Zwei Hunde spielen im Schnee, während es schneit.",
    "Two dogs are playing in the snow while it is snowing.",
    "Die Kinder essen Äpfel und trinken Saft.",
    "The children eat apples and drink juice.",
] * 20
SENTENCES = [
    "Ein Mann fährt mit dem Fahrrad über die Straße.",
    "Two dogs are playing in the snow.",
    "Größere Übungen: „Öl“ kostet 3,50 € – oder nicht?",
    "It's a well-known fact (isn't it?) that 1 + 1 = 2.",
    "Unseen characters stay intact: Ærø, 東京, naïve café.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(CORPUS, vocab_size=400, min_frequency=1)


def test_special_tokens_have_fixed_ids(tokenizer):
    assert [tokenizer.pad_token, tokenizer.bos_token, tokenizer.eos_token, tokenizer.unk_token] == [
        "<pad>", "<s>", "</s>", "<unk>"
    ]
    assert special_token_ids(tokenizer) == {
        "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "decoder_start_token_id": 1
    }


@pytest.mark.parametrize("sentence", SENTENCES)
def test_decode_encode_round_trips_without_unk(tokenizer, sentence):
    ids = tokenizer(sentence)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids, skip_special_tokens=True) == sentence


def test_eos_is_appended_to_sources_and_targets_and_nothing_prepended(tokenizer):
    source = tokenizer(["Ein Mann.", "Zwei Hunde spielen."])["input_ids"]
    target = tokenizer(text_target=["A man."])["input_ids"]
    for ids in source + target:
        assert ids[-1] == tokenizer.eos_token_id and ids.count(tokenizer.eos_token_id) == 1
        assert tokenizer.bos_token_id not in ids


def test_training_learns_merges_for_frequent_words(tokenizer):
    assert len(tokenizer("Fahrrad")["input_ids"]) < len("Fahrrad".encode()) + 1
    assert len(tokenizer) <= 400


def test_save_pretrained_reloads_with_auto_tokenizer(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert special_token_ids(reloaded) == special_token_ids(tokenizer)
    batch = reloaded(SENTENCES, text_target=SENTENCES)
    assert batch["input_ids"] == tokenizer(SENTENCES)["input_ids"] == batch["labels"]
    assert reloaded.batch_decode(batch["input_ids"], skip_special_tokens=True) == SENTENCES


def test_translation_texts_yields_both_sides():
    dataset = Dataset.from_dict({"translation": [{"de": "eins", "en": "one"}, {"de": "zwei", "en": "two"}]})
    assert list(translation_texts(dataset, "de", "en", batch_size=1)) == ["eins", "one", "zwei", "two"]


def test_special_token_ids_explain_missing_tokens(tokenizer):
    broken = tokenizer.__class__(tokenizer_object=tokenizer.backend_tokenizer)
    broken.pad_token = None
    with pytest.raises(ValueError, match="pad_token_id"):
        special_token_ids(broken)
