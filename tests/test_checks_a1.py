"""Appendix A1's checker passes the reference solution and rejects known-wrong ones."""
import math

import pytest
import torch

from book import checks


def chunked_reference(Q, K, V, chunk_size):
    outputs = []
    for i in range(0, Q.shape[1], chunk_size):
        scores = Q[:, i:i + chunk_size] @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
        outputs.append(torch.softmax(scores, dim=-1) @ V)
    return torch.cat(outputs, dim=1)


def no_scale(Q, K, V, chunk_size):
    return chunked_reference(Q * math.sqrt(Q.shape[-1]), K, V, chunk_size)


def softmax_over_queries(Q, K, V, chunk_size):
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    return torch.softmax(scores, dim=1) @ V


def drops_last_chunk(Q, K, V, chunk_size):
    n = Q.shape[1] - Q.shape[1] % chunk_size if Q.shape[1] > chunk_size else Q.shape[1]
    return chunked_reference(Q[:, :n], K, V, chunk_size)


def chunks_the_keys(Q, K, V, chunk_size):
    """A softmax per chunk of keys, summed: each chunk's weights sum to 1 on its own."""
    out = 0
    for j in range(0, K.shape[1], chunk_size):
        scores = Q @ K[:, j:j + chunk_size].transpose(1, 2) / math.sqrt(Q.shape[-1])
        out = out + torch.softmax(scores, dim=-1) @ V[:, j:j + chunk_size]
    return out


def full_matrix_then_chunks(Q, K, V, chunk_size):
    weights = torch.softmax(Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1]), dim=-1)
    return torch.cat([weights[:, i:i + chunk_size] @ V
                      for i in range(0, Q.shape[1], chunk_size)], dim=1)


def returns_the_chunks(Q, K, V, chunk_size):
    return [chunked_reference(Q[:, i:i + chunk_size], K, V, chunk_size)
            for i in range(0, Q.shape[1], chunk_size)]



def stub(*args):
    raise NotImplementedError("write your solution here")


WRONG = {
    "forgets the 1/sqrt(d) scale": (no_scale, "without the scale"),
    "softmax over the queries": (softmax_over_queries, "over the queries"),
    "drops the last, shorter chunk": (drops_last_chunk, "last, shorter chunk is missing"),
    "chunks the keys with a softmax per chunk": (chunks_the_keys, "wrong"),
    "builds the full matrix, then slices it": (full_matrix_then_chunks, "peak memory"),
    "returns a list of chunks": (returns_the_chunks, "list of chunks"),
    "forgets to return": (lambda Q, K, V, c: None, "None"),
    "unimplemented stub": (stub, "not implemented yet"),
    "float64 output": (lambda Q, K, V, c: chunked_reference(Q, K, V, c).double(), "dtype"),
}


def test_check_chunked_attention_accepts_the_reference():
    assert "passed" in checks.check_chunked_attention(chunked_reference)


@pytest.mark.parametrize("name", WRONG)
def test_check_chunked_attention_rejects_wrong_solutions(name):
    fn, message = WRONG[name]
    with pytest.raises(AssertionError, match=message):
        checks.check_chunked_attention(fn)


def test_failure_message_names_the_case_and_the_values():
    with pytest.raises(AssertionError) as info:
        checks.check_chunked_attention(chunks_the_keys)
    text = str(info.value)
    assert "on batch 2, 8 queries" in text and "expected" in text and "Hint:" in text
