"""PyTorch twin of sparsetrain's NCF (models/ncf.h): NeuMF of He et al. 2017 (sec. 3.4) at
MLPerf's sizes, GMF of 64 factors beside an MLP 256-256-128-64 on 128-wide embeddings,
joined into one logit, with sparsetrain's parameter names ("mf.embed.user.weight",
"mlp.0.weight", "final.bias", ...). The input is int32 [2, N]: row 0 users, row 1 items.
torch_cifar_models.py builds it for arch "ncf" with CLASSES given as "USERS,ITEMS".
"""
from collections import OrderedDict

import torch
import torch.nn as nn

FACTORS = 64
MLP_SIZES = (256, 256, 128, 64)


class PairEmbedding(nn.Module):
    """A user table and an item table; their rows for each pair side by side."""

    def __init__(self, users, items, dim):
        super().__init__()
        self.user = nn.Embedding(users, dim)
        self.item = nn.Embedding(items, dim)

    def forward(self, x):
        return torch.cat([self.user(x[0].long()), self.item(x[1].long())], 1)


class HalvesProduct(nn.Module):
    """GMF: the user half times the item half, element by element."""

    def forward(self, x):
        user, item = x.chunk(2, 1)
        return user * item


class NeuMF(nn.Module):
    def __init__(self, users, items):
        super().__init__()
        self.mf = nn.Sequential(OrderedDict(embed=PairEmbedding(users, items, FACTORS),
                                            product=HalvesProduct()))
        mlp = [("embed", PairEmbedding(users, items, MLP_SIZES[0] // 2))]
        for i, (inp, out) in enumerate(zip(MLP_SIZES, MLP_SIZES[1:])):
            mlp += [(str(i), nn.Linear(inp, out)), (f"relu{i}", nn.ReLU())]
        self.mlp = nn.Sequential(OrderedDict(mlp))
        self.final = nn.Linear(FACTORS + MLP_SIZES[-1], 1)

    def forward(self, x):
        return self.final(torch.cat([self.mf(x), self.mlp(x)], 1))


def build(size):
    """NeuMF for "USERS,ITEMS"."""
    users, items = (int(n) for n in str(size).split(","))
    return NeuMF(users, items)
