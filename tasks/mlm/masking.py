"""MLM masking at a phase's ratio with BERT's 80/10/10 replacement, reproducible per step.

transformers' DataCollatorForLanguageModeling does the masking; the generator is reseeded
from (seed, rank, step) so a run resumed from a checkpoint masks exactly as the original.
"""

from __future__ import annotations

from typing import Any


class Masker:
    def __init__(self, tokenizer: Any, mask_ratio: float, seed: int) -> None:
        import torch
        from transformers import DataCollatorForLanguageModeling

        self.collator = DataCollatorForLanguageModeling(
            tokenizer,
            mlm=True,
            mlm_probability=mask_ratio,
            mask_replace_prob=0.8,
            random_replace_prob=0.1,
        )
        self.special_ids = torch.tensor(tokenizer.all_special_ids)
        self.pad_id = tokenizer.pad_token_id
        self.seed = seed

    def __call__(self, input_ids: Any, step: int, rank: int = 0) -> dict[str, Any]:
        """{input_ids, attention_mask, labels} for a (batch, length) tensor of token ids."""
        import torch

        self.collator.generator = torch.Generator().manual_seed(
            hash((self.seed, rank, step)) & 0x7FFF_FFFF
        )
        special = torch.isin(input_ids, self.special_ids)  # never masked: [CLS] [SEP] [PAD]
        masked, labels = self.collator.torch_mask_tokens(input_ids.clone(), special)
        return {
            "input_ids": masked,
            "attention_mask": (input_ids != self.pad_id).long(),
            "labels": labels,
        }
