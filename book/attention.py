"""Attention pooling, scoring functions and attention layers (chapters 1, 3, 5 and 6)."""
import math

import torch
from torch import nn


# -- Chapter 1: attention pooling ---------------------------------------------------------

def attention_pool(queries, keys, values, score):
    """Attention pooling: average the values with weights softmax(score(query, key))."""
    scores = score(queries, keys)            # (num_queries, num_keys): any real numbers
    weights = torch.softmax(scores, dim=-1)  # (num_queries, num_keys): rows sum to 1
    return weights @ values, weights         # (num_queries, value_dim), weights


def dot_score(queries, keys):
    """Score = q . k: large when the query and the key point the same way."""
    return queries @ keys.T  # (num_queries, d) @ (d, num_keys) -> (num_queries, num_keys)


def gaussian_score(queries, keys):
    """Score = -||q - k||^2 / 2: large when the key is close to the query."""
    return -0.5 * torch.cdist(queries, keys) ** 2  # (num_queries, num_keys)


def constant_score(queries, keys):
    """Score = 0 for every pair: the query is ignored, pooling becomes a plain average."""
    shape = (queries.shape[0], keys.shape[0])  # (num_queries, num_keys)
    return torch.zeros(shape, dtype=keys.dtype, device=keys.device)
