#!/usr/bin/env python
"""Train a Transformer for translation with Seq2SeqTrainer and the paper's recipe.

    python scripts/train_translation.py --output_dir runs/numbers          # built-in corpus, ~10 min on a laptop
    python scripts/train_translation.py --help                             # every flag (data, model, Trainer)

See README.md for real corpora, multi-GPU with `accelerate launch`, and pushing to the Hub.
"""

import sys

try:
    from hf_vanilla_transformer.errors import run_command
    from hf_vanilla_transformer.training import main
except KeyboardInterrupt:  # Ctrl-C while torch and transformers load: one line as well, not a traceback
    print("\ntrain_translation.py: interrupted.", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    run_command(main)
