"""The core LLM's local backend: a transformers causal LM in this process.

Chat turns go through the checkpoint's own chat template; prompts are generated in batches
of `batch_size` (left-padded); `temperature` 0 is greedy, above it sampling is seeded per
batch, so the same call gives the same text. `continuation_logprobs` scores a given
continuation token by token (scoring, rewards, perplexity) in one forward per batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks.core.causal_lm import load_causal_lm
from tasks.core.llm_params import GenerationParams, LocalBackendParams

Messages = list[dict[str, str]]


def chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[start : start + size] for start in range(0, len(items), size)]


class LocalLLM:
    """One interface with the OpenAI-compatible backend (tasks/core/llm.py: ChatModel)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        batch_size: int = 8,
        generation: GenerationParams | None = None,
        name: str = "local",
    ) -> None:
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.generation = generation or GenerationParams()
        self.name = name
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def load(
        cls,
        local: LocalBackendParams,
        generation: GenerationParams,
        root: Path,
        tracking_uri: str | None = None,
    ) -> LocalLLM:
        """The backend from params (`llm.local`, `llm.generation`); a relative folder is
        under `root`."""
        import torch

        if local.threads:
            torch.set_num_threads(local.threads)
        spec = local.model
        if not spec.startswith("models:/") and not Path(spec).is_absolute():
            spec = str(root / spec)
        model, tokenizer = load_causal_lm(spec, local.device, local.dtype, tracking_uri)
        return cls(model, tokenizer, local.batch_size, generation, f"local:{local.model}")

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    def chat_prompt(self, messages: Messages) -> str:
        """The conversation as the text the model continues (its chat template, the
        assistant turn opened)."""
        return self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )

    def chat(
        self,
        conversations: Sequence[Messages],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> list[str]:
        """Each conversation's reply (stripped)."""
        prompts = [self.chat_prompt(messages) for messages in conversations]
        return self.complete(prompts, max_new_tokens, temperature, seed, special=False)

    def ask(
        self,
        prompt: str,
        system: str = "",
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> str:
        """One user turn (after an optional system message); the reply's text, stripped."""
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        return self.chat([messages], max_tokens, seed=seed)[0]

    def complete(
        self,
        prompts: Sequence[str],
        max_new_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        special: bool = True,
    ) -> list[str]:
        """Each prompt's continuation (stripped). `special`: let the tokenizer add its
        special tokens (False for text already in the chat template)."""
        import torch

        settings = self.generation
        limit = max_new_tokens or settings.max_new_tokens
        heat = settings.temperature if temperature is None else temperature
        base_seed = settings.seed if seed is None else seed
        sampling = {"do_sample": False}
        if heat > 0:
            sampling = {"do_sample": True, "temperature": heat, "top_p": settings.top_p}
        self.tokenizer.padding_side = "left"
        replies: list[str] = []
        for index, batch in enumerate(chunks(list(prompts), self.batch_size)):
            encoded = self.tokenizer(
                list(batch), return_tensors="pt", padding=True, add_special_tokens=special
            ).to(self.device)
            torch.manual_seed(base_seed * 1_000_003 + index)
            with torch.no_grad():
                output = self.model.generate(
                    **encoded,
                    max_new_tokens=limit,
                    pad_token_id=self.tokenizer.pad_token_id,
                    eos_token_id=self.tokenizer.eos_token_id,
                    **sampling,
                )
            new = output[:, encoded["input_ids"].shape[1] :]
            texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
            replies += [text.strip() for text in texts]
        return replies

    def continuation_logprobs(
        self, prompts: Sequence[str], continuations: Sequence[str]
    ) -> list[list[float]]:
        """log P(token | prompt, earlier tokens) for each token of each continuation
        (prompts as text: pass `chat_prompt(messages)` for a chat turn)."""
        import torch

        pairs = list(zip(prompts, continuations, strict=True))
        scored: list[list[float]] = []
        for batch in chunks(pairs, self.batch_size):
            start_id = self.tokenizer.bos_token_id or self.tokenizer.pad_token_id
            heads = [
                self.tokenizer(p, add_special_tokens=False)["input_ids"] or [start_id]
                for p, _ in batch
            ]
            tails = [self.tokenizer(c, add_special_tokens=False)["input_ids"] for _, c in batch]
            width = max(len(h) + len(t) for h, t in zip(heads, tails, strict=True))
            pad = self.tokenizer.pad_token_id
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, (head, tail) in enumerate(zip(heads, tails, strict=True)):
                sequence = head + tail  # right-padded: positions are 0… for every row
                ids[row, : len(sequence)] = torch.tensor(sequence)
                mask[row, : len(sequence)] = 1
            with torch.no_grad():
                logits = self.model(
                    input_ids=ids.to(self.device), attention_mask=mask.to(self.device)
                ).logits
            logprobs = torch.log_softmax(logits.float(), dim=-1).cpu()
            for row, (head, tail) in enumerate(zip(heads, tails, strict=True)):
                start = len(head)
                positions = torch.arange(start - 1, start - 1 + len(tail))
                values = logprobs[row, positions, torch.tensor(tail, dtype=torch.long)]
                scored.append(values.tolist())
        return scored
