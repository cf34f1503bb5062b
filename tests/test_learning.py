"""Training learns: the Trainer, the paper's recipe and this model together learn a small task in seconds."""

import datasets
import torch
from conftest import tiny_config
from test_evaluation import word_level_tokenizer
from transformers import DataCollatorForSeq2Seq

from hf_vanilla_transformer import VanillaTransformerForConditionalGeneration
from hf_vanilla_transformer.trainer import TokenBatchingSeq2SeqTrainer, TokenBatchingSeq2SeqTrainingArguments

VOCAB = 16  # pad 0, start 1, end 2, and 13 "words"


def reversal_pairs(count: int, seed: int) -> list[dict]:
    """Source: 3-6 random words; target: the same words in reverse order (needs attention and positions)."""
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(count):
        words = torch.randint(3, VOCAB, (int(torch.randint(3, 7, (1,), generator=generator)),), generator=generator)
        pairs.append({"input_ids": words.tolist() + [2], "labels": words.flip(0).tolist() + [2]})
    return pairs


def test_training_learns_to_reverse_sequences(tmp_path):
    torch.manual_seed(0)
    config = tiny_config(vocab_size=VOCAB, encoder_layers=1, decoder_layers=1, dropout=0.0, encoder_ffn_dim=64,
                         decoder_ffn_dim=64)
    model = VanillaTransformerForConditionalGeneration(config)
    tokenizer = word_level_tokenizer(VOCAB)
    args = TokenBatchingSeq2SeqTrainingArguments(
        output_dir=str(tmp_path), max_steps=400, per_device_train_batch_size=32, learning_rate=5e-3,
        lr_scheduler_type="inverse_sqrt", warmup_steps=50, adam_beta2=0.98, adam_epsilon=1e-9,
        label_smoothing_factor=0.1, save_strategy="no", report_to="none", use_cpu=True, disable_tqdm=True,
        logging_steps=50,
    )
    trainer = TokenBatchingSeq2SeqTrainer(
        model=model, args=args, train_dataset=datasets.Dataset.from_list(reversal_pairs(2000, seed=0)),
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
    )
    trainer.train()

    model.eval()
    held_out = reversal_pairs(64, seed=1)
    batch = tokenizer.pad({"input_ids": [pair["input_ids"] for pair in held_out]}, return_tensors="pt")
    generated = model.generate(**batch, num_beams=1).tolist()
    correct = sum(row[1 : 1 + len(pair["labels"])] == pair["labels"] for row, pair in zip(generated, held_out))
    assert correct >= 0.9 * len(held_out), f"{correct} of {len(held_out)} reversed correctly"
