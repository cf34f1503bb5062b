#!/usr/bin/env python
"""Translate a file, or standard input, one sentence per line, with beam search in batches.

    python scripts/translate.py runs/de-en test.de > test.en
    python scripts/translate.py --help                 # every option

The command is hf_vanilla_transformer.file_translation.main.
"""

import sys

try:
    from hf_vanilla_transformer.errors import run_command
    from hf_vanilla_transformer.file_translation import main
except KeyboardInterrupt:  # Ctrl-C while torch and transformers load: one line as well, not a traceback
    print("\ntranslate.py: interrupted.", file=sys.stderr)
    sys.exit(130)

if __name__ == "__main__":
    run_command(main)
