"""Model card templates, rendered with huggingface_hub; shipped inside the package as package data."""
