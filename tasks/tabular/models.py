"""The model zoo's families as torch modules, built from one `spec` dict (what a checkpoint
and the registered model store beside the weights).

- `mlp`: the plain MLP the paper compares against (blocks of Linear → ReLU → Dropout).
- `plr`: the same MLP on PLR embeddings of the numerical features (rtdl_num_embeddings'
  `PeriodicEmbeddings`, lite=False: periodic → per-feature linear → ReLU); indicator and
  one-hot columns pass through.
- `tabm`: TabM (the `tabm` package): k MLPs with shared weights and per-member adapters,
  all trained, their mean the prediction.
- `retrieval`: a ModernNCA-style model: an encoder (PLR embeddings + one linear layer) maps
  rows to a space where the prediction is the softmax(−distance / temperature)-weighted
  mean of the targets of stored training rows (a random subset while training, the bank
  of `retrieval_bank` training rows at inference; a row never retrieves itself).
- `triplet`: the `plr` architecture whose embedding is also trained with a triplet
  objective (our design; the paper's exact form is not public): in each batch every row is
  an anchor, its positive the row with the nearest target, its negative a random row whose
  target is farther than the batch's median target distance; the loss adds
  `triplet_weight` × TripletMarginLoss on the L2-normalized flattened embeddings. The
  objective makes rows with similar targets close in embedding space, which is what an
  embedding needs where the training signal is noisy (the paper's view: embeddings help
  most on high-uncertainty samples). Being otherwise identical to `plr`, the comparison
  "triplet vs plain periodic" isolates the objective.

Every module takes x (batch, features) and returns (batch,) predictions; `training_loss`
gives the loss the trial optimizes (TabM: the mean of its members' losses).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


def mlp_blocks(d_in: int, d_block: int, n_blocks: int, dropout: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for index in range(n_blocks):
        layers += [nn.Linear(d_in if index == 0 else d_block, d_block), nn.ReLU()]
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)


class MLP(nn.Module):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.blocks = mlp_blocks(
            spec["n_features"], spec["d_block"], spec["n_blocks"], spec["dropout"]
        )
        self.head = nn.Linear(spec["d_block"], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x)).squeeze(-1)


class NumericalEmbedding(nn.Module):
    """PLR embeddings of the first `n_numerical` columns; the others pass through."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        from rtdl_num_embeddings import PeriodicEmbeddings

        self.n_numerical = spec["n_numerical"]
        self.periodic = PeriodicEmbeddings(
            self.n_numerical,
            spec["d_embedding"],
            n_frequencies=spec["n_frequencies"],
            frequency_init_scale=spec["frequency_init_scale"],
            lite=False,
        )
        self.d_out = self.n_numerical * spec["d_embedding"] + spec["n_features"] - self.n_numerical

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, n_numerical, d_embedding): the numerical features' embeddings."""
        return self.periodic(x[:, : self.n_numerical])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.embed(x).flatten(1), x[:, self.n_numerical :]], dim=1)


class EmbeddingMLP(nn.Module):
    """`plr` and `triplet`: the MLP on numerical embeddings."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.embedding = NumericalEmbedding(spec)
        self.blocks = mlp_blocks(
            self.embedding.d_out, spec["d_block"], spec["n_blocks"], spec["dropout"]
        )
        self.head = nn.Linear(spec["d_block"], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.embedding(x))).squeeze(-1)


class TabMRegressor(nn.Module):
    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        from tabm import TabM

        self.tabm = TabM.make(
            n_num_features=spec["n_features"],
            d_out=1,
            k=spec["k"],
            n_blocks=spec["n_blocks"],
            d_block=spec["d_block"],
            dropout=spec["dropout"],
        )

    def members(self, x: torch.Tensor) -> torch.Tensor:
        return self.tabm(x).squeeze(-1)  # (batch, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.members(x).mean(dim=1)


class Retrieval(nn.Module):
    """ModernNCA-style: a target-weighted soft nearest-neighbour in a learned space."""

    def __init__(self, spec: dict[str, Any]) -> None:
        super().__init__()
        self.embedding = NumericalEmbedding(spec)
        self.encoder = nn.Linear(self.embedding.d_out, spec["d_block"])
        self.dropout = nn.Dropout(spec["dropout"])
        self.temperature = spec["temperature"]
        bank = spec["bank_rows"]
        self.register_buffer("bank_x", torch.zeros(bank, spec["n_features"]))
        self.register_buffer("bank_y", torch.zeros(bank))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.encoder(self.embedding(x)))

    def retrieve(
        self,
        x: torch.Tensor,
        candidates_x: torch.Tensor,
        candidates_y: torch.Tensor,
        exclude: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Softmax(−squared distance / T)-weighted mean of the candidates' targets;
        `exclude` (batch, candidates) masks pairs that must not match (a row and itself)."""
        distance = torch.cdist(self.encode(x), self.encode(candidates_x)).square()
        logits = -distance / self.temperature
        if exclude is not None:
            logits = logits.masked_fill(exclude, float("-inf"))
        return torch.softmax(logits, dim=1) @ candidates_y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.retrieve(x, self.bank_x, self.bank_y)


FAMILIES = {
    "mlp": MLP,
    "plr": EmbeddingMLP,
    "tabm": TabMRegressor,
    "retrieval": Retrieval,
    "triplet": EmbeddingMLP,
}


def build_model(spec: dict[str, Any]) -> nn.Module:
    return FAMILIES[spec["family"]](spec)


def triplet_loss(embeddings: torch.Tensor, y: torch.Tensor, margin: float) -> torch.Tensor:
    """Triplet margin loss with target-defined triplets (see the module docstring):
    positive = nearest target, negative = a random row farther than the median distance."""
    count = len(y)
    if count < 3:
        return embeddings.sum() * 0.0
    z = nn.functional.normalize(embeddings.flatten(1), dim=1)
    gap = (y[:, None] - y[None, :]).abs()
    eye = torch.eye(count, dtype=torch.bool, device=y.device)
    positive = gap.masked_fill(eye, float("inf")).argmin(dim=1)
    far = gap > gap.median()
    noise = torch.rand(count, count, device=y.device).masked_fill(~far, -1.0)
    negative = noise.argmax(dim=1)
    usable = far.any(dim=1)
    if not usable.any():
        return embeddings.sum() * 0.0
    loss = nn.TripletMarginLoss(margin=margin)
    return loss(z[usable], z[positive[usable]], z[negative[usable]])


def training_loss(
    model: nn.Module,
    spec: dict[str, Any],
    x: torch.Tensor,
    y: torch.Tensor,
    sampled: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The loss a trial minimizes on one batch. `sampled`: the retrieval model's candidate
    rows (x, y, and a (batch, candidates) mask of the pairs that are the same row)."""
    mse = nn.functional.mse_loss
    family = spec["family"]
    if family == "tabm":
        members = model.members(x)
        return mse(members, y[:, None].expand_as(members))
    if family == "retrieval":
        assert sampled is not None
        return mse(model.retrieve(x, *sampled), y)
    if family == "triplet":
        embeddings = model.embedding.embed(x)
        flat = torch.cat([embeddings.flatten(1), x[:, model.embedding.n_numerical :]], dim=1)
        prediction = model.head(model.blocks(flat)).squeeze(-1)
        return mse(prediction, y) + spec["triplet_weight"] * triplet_loss(
            embeddings, y, spec["triplet_margin"]
        )
    return mse(model(x), y)


@torch.no_grad()
def predict(model: nn.Module, x: Any, batch_size: int = 2048) -> Any:
    """Predictions for a float32 array, in eval mode (numpy in, numpy out)."""
    import numpy as np

    was_training = model.training
    model.eval()
    tensor = torch.from_numpy(np.array(x, dtype=np.float32))  # a copy: x may be read-only
    out = [model(tensor[i : i + batch_size]) for i in range(0, len(tensor), batch_size)]
    model.train(was_training)
    return torch.cat(out).numpy().astype(np.float64) if out else np.zeros(0)
