# %% [markdown]
# # The causal mask
#
# A language model predicts each token from the ones before it, so token $i$ may not
# look at tokens $j > i$. The causal mask says which (query, key) pairs are allowed.
# `attnlab` follows PyTorch's `scaled_dot_product_attention`: a boolean mask is
# **`True` where the query may attend**, and `is_causal=True` aligns the mask top-left.

# %%
# %matplotlib inline
import torch
import torch.nn.functional as F

import attnlab
from attnlab import examples
from attnlab.plot import plot_attention, plot_mask

words, inputs = examples.your_journey()
mask = attnlab.causal_mask(6)  # (6, 6), True on and below the diagonal
print(mask)
plot_mask(mask, words, title="causal_mask(6)")

# %% [markdown]
# ## Masking the scores, then the softmax
#
# Masked scores are set to $-\infty$ *before* the softmax, so each row renormalises over
# the keys it may see: row $i$ sums to 1 over keys $1..i$. (Zeroing weights *after* the
# softmax would leave rows that no longer sum to 1.)

# %%
attn_scores = attnlab.attention_scores(inputs, inputs) / inputs.shape[-1] ** 0.5  # (6, 6)
masked = attn_scores.masked_fill(~mask, float("-inf"))
attn_weights = torch.softmax(masked, dim=-1)  # (6, 6)
package = attnlab.attention_weights(inputs, inputs, is_causal=True)
print(torch.allclose(attn_weights, package))
plot_attention(attn_weights, words, words, title="causal attention weights")

# %% [markdown]
# The first token can only attend to itself, so its row is $[1, 0, \dots, 0]$; the
# last token spreads its weight over the whole sentence.
#
# ## The output agrees with PyTorch

# %%
out = attnlab.scaled_dot_product_attention(inputs, inputs, inputs, is_causal=True)
ref = F.scaled_dot_product_attention(inputs, inputs, inputs, is_causal=True)
print(torch.allclose(out, ref, atol=1e-6))

# %% [markdown]
# ## When queries and keys differ in length
#
# With $L$ queries and $S$ keys the mask is `torch.ones(L, S).tril()`: aligned at the
# top-left corner. With $L < S$ the last keys are hidden from every query; this is
# PyTorch's convention (a decoder with a key-value cache would want bottom-right
# alignment instead, and must build that mask itself).

# %%
plot_mask(attnlab.causal_mask(3, 5), title="causal_mask(3, 5): top-left")

# %% [markdown]
# ## A row with nothing to attend to
#
# If a mask leaves a query no key at all, the plain softmax of a row of $-\infty$ is
# NaN. `attnlab` returns zeros for such a row instead (PyTorch's SDPA does too).

# %%
no_first = mask.clone()
no_first[0, 0] = False  # the first query may now attend to nothing
weights = attnlab.attention_weights(inputs, inputs, attn_mask=no_first)
print(weights[0])
plot_mask(no_first, words, title="row 1 fully masked")
