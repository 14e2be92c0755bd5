# %% [markdown]
# # Temperature and the 1/√d_k scale
#
# Softmax turns scores into weights, and how *peaked* the weights are depends on how
# *spread* the scores are. Multiplying the scores by a factor $c$ (equivalently,
# dividing by a temperature $\tau = 1/c$) sharpens or flattens the distribution:
#
# $$\operatorname{softmax}(c\,s)_i = \frac{e^{c s_i}}{\sum_j e^{c s_j}}.$$
#
# This notebook sweeps $c$, then shows why attention divides its scores by
# $\sqrt{d_k}$.

# %%
# %matplotlib inline
import math

import matplotlib.pyplot as plt
import torch

import attnlab
from attnlab.plot import plot_softmax_scaling, plot_variance_vs_dim

scores = torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5])

# %% [markdown]
# ## The same scores at five temperatures
#
# At $c = 1$ the weights are nearly uniform; at $c = 8$ almost all the weight goes to
# the largest score, 0.5. Small $c$ (high temperature) flattens everything towards
# $1/5$.

# %%
plot_softmax_scaling(scores, [0.25, 1, 2, 8, 32], [f"{s:g}" for s in scores.tolist()])

# %% [markdown]
# ## Entropy against the factor
#
# The entropy $H = -\sum_i p_i \log p_i$ measures how spread the weights are: $\log 5$
# for the uniform distribution, 0 for one-hot.

# %%
factors = torch.logspace(-2, 2, 41)  # 0.01 ... 100
entropies = []
for c in factors:
    p = attnlab.softmax(scores * c)
    entropies.append(float(-(p * p.log()).sum()))
fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
ax.semilogx(factors.tolist(), entropies, marker=".")
ax.axhline(math.log(5), linestyle="--", color="grey", label="log 5 (uniform)")
ax.set_xlabel("factor c")
ax.set_ylabel("entropy of softmax(c s)")
ax.legend(frameon=False)
plt.show()

# %% [markdown]
# ## Why divide by √d_k
#
# For query and key entries drawn independently with mean 0 and variance 1, the dot
# product $q \cdot k = \sum_{m=1}^{d_k} q_m k_m$ has variance $d_k$: its typical size
# grows like $\sqrt{d_k}$, which is exactly the factor $c$ of the previous section.
# Dividing by $\sqrt{d_k}$ brings the variance back to 1 whatever the width.

# %%
generator = torch.Generator().manual_seed(0)
dims = [2**i for i in range(1, 11)]
unscaled, scaled = [], []
for d in dims:
    q = torch.randn(4000, d, generator=generator, dtype=torch.float64)  # (4000, d)
    k = torch.randn(4000, d, generator=generator, dtype=torch.float64)  # (4000, d)
    dots = (q * k).sum(dim=-1)  # (4000,)
    unscaled.append(float(dots.var()))
    scaled.append(float((dots / math.sqrt(d)).var()))
print([round(v, 1) for v in unscaled])
print([round(v, 2) for v in scaled])
plot_variance_vs_dim(dims, unscaled, scaled)

# %% [markdown]
# ## The effect on attention weights
#
# For random queries and keys of width $d_k$, the largest weight in each row tells how
# peaked attention is. Unscaled, rows become nearly one-hot as $d_k$ grows (and the
# gradient through a saturated softmax vanishes); scaled, the peak stays put.

# %%
T = 16
peak_unscaled, peak_scaled = [], []
for d in dims:
    queries = torch.randn(T, d, generator=generator)  # (T, d)
    keys = torch.randn(T, d, generator=generator)  # (T, d)
    w_plain = attnlab.attention_weights(queries, keys, scale=1.0)  # (T, T)
    w_scaled = attnlab.attention_weights(queries, keys)  # (T, T), scale 1/sqrt(d)
    peak_unscaled.append(float(w_plain.max(dim=-1).values.mean()))
    peak_scaled.append(float(w_scaled.max(dim=-1).values.mean()))
fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
ax.semilogx(dims, peak_unscaled, marker="o", base=2, label="scale 1")
ax.semilogx(dims, peak_scaled, marker="s", base=2, label="scale 1/√d")
ax.set_xlabel("d_k")
ax.set_ylabel("mean of the largest weight per row")
ax.set_ylim(0, 1.05)
ax.legend(frameon=False)
plt.show()
