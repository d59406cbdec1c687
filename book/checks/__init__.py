"""Exercise checkers: `check_x(fn)` passes silently-ish (returns a message) or raises AssertionError.

Every checker is tested against the reference solution and against known-wrong solutions
(`tests/test_checks_*.py`).
"""
from ._core import CheckFailed
from .ch01 import check_softmax, check_topk_attention_pool
from .ch02 import check_epanechnikov_pool
from .ch03 import check_masked_softmax, check_scaled_dot_product_attention
from .ch04 import check_bahdanau_step
from .ch05 import check_transpose_output, check_transpose_qkv
from .ch06 import check_learned_positional_encoding
from .ch07 import check_causal_mask, check_pre_norm_block
from .ch08 import check_bert_param_count, check_mlm_masking
from .a1 import check_chunked_attention

__all__ = ["CheckFailed", "check_softmax", "check_topk_attention_pool", "check_epanechnikov_pool",
           "check_masked_softmax", "check_scaled_dot_product_attention", "check_bahdanau_step",
           "check_transpose_qkv", "check_transpose_output", "check_learned_positional_encoding",
           "check_causal_mask", "check_pre_norm_block", "check_mlm_masking", "check_bert_param_count",
           "check_chunked_attention"]
from .ch09 import check_attention_step, check_top_p_filter  # noqa: E402
__all__ += ["check_top_p_filter", "check_attention_step"]
from .ch10 import check_alibi_bias, check_apply_rope  # noqa: E402
__all__ += ["check_apply_rope", "check_alibi_bias"]
from .ch11 import check_grouped_query_attention, check_online_softmax_attention  # noqa: E402
__all__ += ["check_online_softmax_attention", "check_grouped_query_attention"]
from .ch12 import check_patchify, check_unpatchify  # noqa: E402
__all__ += ["check_patchify", "check_unpatchify"]
