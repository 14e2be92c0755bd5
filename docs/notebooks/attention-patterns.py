# %% [markdown]
# # Attention patterns of the example sentences
#
# The Foundations chapters work with three small sentences. This notebook draws the
# attention weights of each, side by side, with `attnlab.plot` (the fourth input, the
# integer example, has its heatmap in step 5 of "Queries, keys and values by hand"). A
# row is a query token, a column a key token, and cell $(i, j)$ holds $\alpha_{ij}$: how
# much of token $j$'s value goes into the context vector of token $i$. Every row sums
# to 1.
#
# The weights come from the package's functional core,
#
# $$\alpha = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right),$$
#
# computed row by row. Indices in the plots and the prose are one-based, as in the
# chapters; the code indexes from zero.

# %%
# %matplotlib inline
import torch

import attnlab
from attnlab import examples
from attnlab.plot import plot_attention

# %% [markdown]
# ## "Your journey starts with one step": no trainable weights
#
# The simplest attention uses the inputs themselves as queries and keys, and does not
# scale the scores. A token does not simply attend most to itself: a dot product also
# grows with a vector's length, so the long vectors of "journey" and "starts" win most
# rows. Only "Your" and "journey" put their largest weight on themselves; "starts",
# "with" and "step" look most at "journey", and "one" at "starts".

# %%
words, inputs = examples.your_journey()
attn_scores = attnlab.attention_scores(inputs, inputs)  # (6, 6): inputs @ inputsᵀ
attn_weights = attnlab.softmax(attn_scores)  # (6, 6), each row sums to 1
print(attn_weights.sum(dim=-1))
plot_attention(attn_weights, words, words, title="Your journey: softmax(x xᵀ)")

# %% [markdown]
# ## "Dream big and work for it": trainable projections, $d_{out} = 2$
#
# With `torch.manual_seed(123)`, `SelfAttentionV1(3, 2)` draws $W_q$, $W_k$ and $W_v$
# from $\mathcal{U}(0, 1)$. The queries and keys are two-dimensional, the scores are
# scaled by $1/\sqrt{2}$, and the pattern no longer favours the diagonal: the random
# projections decide what "similar" means.

# %%
words, inputs = examples.dream_big()
torch.manual_seed(123)
module = attnlab.SelfAttentionV1(3, 2)
with torch.no_grad():
    queries = inputs @ module.W_query  # (6, 2)
    keys = inputs @ module.W_key  # (6, 2)
    attn_weights = attnlab.attention_weights(queries, keys)  # (6, 6), scale 1/sqrt(2)
plot_attention(attn_weights, words, words, title="Dream big: SelfAttentionV1(3, 2), seed 123")

# %% [markdown]
# ## "Life is short, eat dessert first": 16-dimensional embeddings
#
# The third sentence is embedded by a seeded `nn.Embedding(6, 16)`. Projected to
# $d_{out} = 24$ by a seeded `SelfAttentionV2`, the scores are larger and the softmax
# is sharper: some rows put most of their weight on one or two keys.

# %%
sentence = examples.life_is_short()
torch.manual_seed(123)
module = attnlab.SelfAttentionV2(16, 24)
with torch.no_grad():
    queries = module.W_query(sentence.inputs)  # (6, 24)
    keys = module.W_key(sentence.inputs)  # (6, 24)
    attn_weights = attnlab.attention_weights(queries, keys)  # (6, 6), scale 1/sqrt(24)
plot_attention(attn_weights, sentence.words, sentence.words, title="Life is short: d_out = 24")

# %% [markdown]
# ## Try it
#
# Change a word's embedding in the first example (for instance make "one" equal to
# "journey") and rerun the cell: the two rows and the two columns become identical.
