# %% [markdown]
# # The heads of a multi-head module
#
# `attnlab.MultiHeadAttention(d_in, d_out, num_heads)` projects each token to width
# $d_{out}$, splits that width into $H$ heads of $D = d_{out} / H$ and runs attention in
# every head at once, each with its own scale $1/\sqrt{D}$. Each head therefore has its
# own $(T, T)$ weight matrix. Here we draw them, for the seeded "Life is short, eat
# dessert first" embeddings.

# %%
# %matplotlib inline
import torch

import attnlab
from attnlab import examples
from attnlab.plot import plot_attention, plot_heads

sentence = examples.life_is_short()
print(sentence.inputs.shape)

# %% [markdown]
# ## Three heads of width 8
#
# `need_weights=True, average_attn_weights=False` returns every head's weights, shape
# $(H, T, T)$ for an unbatched input.

# %%
torch.manual_seed(123)
mha = attnlab.MultiHeadAttention(16, 24, num_heads=3)
with torch.no_grad():
    output, attn_weights = mha(sentence.inputs, need_weights=True, average_attn_weights=False)
print(output.shape, attn_weights.shape)  # (T, d_out), (H, T, T)
plot_heads(attn_weights, sentence.words, annotate=True)

# %% [markdown]
# The heads disagree: each projects the same tokens into a different 8-dimensional
# space, so each finds a different notion of "relevant". That is the point of having
# several.
#
# ## What averaging the heads returns
#
# PyTorch's `nn.MultiheadAttention` returns, by default, the mean over heads. It is a
# summary for inspection only: no head computes with it.

# %%
with torch.no_grad():
    _, mean_weights = mha(sentence.inputs, need_weights=True)  # (T, T)
print(torch.allclose(mean_weights, attn_weights.mean(dim=0)))
plot_attention(mean_weights, sentence.words, sentence.words, title="mean over the 3 heads")

# %% [markdown]
# ## More heads, narrower heads
#
# With $d_{out} = 24$ fixed, more heads means a smaller $D$ per head. Six heads of
# width 4 each see a cruder projection; their maps tend to be flatter.

# %%
torch.manual_seed(123)
mha6 = attnlab.MultiHeadAttention(16, 24, num_heads=6)
with torch.no_grad():
    _, attn_weights6 = mha6(sentence.inputs, need_weights=True, average_attn_weights=False)
print(attn_weights6.shape)  # (6, T, T)
plot_heads(attn_weights6, sentence.words)

# %% [markdown]
# ## The same heads, with a causal mask
#
# `causal=True` applies the same lower-triangular mask in every head: each token
# attends only to itself and the tokens before it, whatever the head.

# %%
torch.manual_seed(123)
causal = attnlab.MultiHeadAttention(16, 24, num_heads=3, causal=True)
with torch.no_grad():
    _, causal_weights = causal(sentence.inputs, need_weights=True, average_attn_weights=False)
print(bool((causal_weights.triu(diagonal=1) == 0).all()))
plot_heads(causal_weights, sentence.words)
