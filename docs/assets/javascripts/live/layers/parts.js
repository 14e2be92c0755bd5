// @ts-check
// The small parts every decoder layer is built from, as attnlab.llama's: a Linear (kept
// quantised; the kernels compute its product), RMSNorm and the gated feed-forward (SwiGLU, or GELU-tanh for Gemma).
// Shapes as in Python with the batch B = 1 left out: a matrix (T, n) is a Float32Array
// of T * n values, row t at [t * n, (t + 1) * n).

/**
 * What computes the products: jskernels.js's JsKernels or kernels.js's WasmKernels.
 * @typedef {import("../jskernels.js").JsKernels | import("../kernels.js").WasmKernels} Kernels
 */

/**
 * A projection as a family gives it: the stored tensor and the stored row that becomes
 * each of ours (null: as stored).
 * @typedef {object} Projection
 * @property {import("../gguf.js").Tensor} tensor
 * @property {Int32Array | null} rowOrder
 */

/** A weight matrix kept quantised (out_features rows of in_features values). */
export class Linear {
  /**
   * @param {Projection} projection
   * @param {Kernels} kernels
   */
  constructor({ tensor, rowOrder = null }, kernels) {
    this.tensor = tensor;
    this.rows = tensor.rows; // out_features
    this.cols = tensor.cols; // in_features
    this.rowOrder = rowOrder;
    this.kernels = kernels;
  }

  /**
   * x (T, in_features) -> (T, out_features)
   * @param {Float32Array} x
   * @param {number} T
   * @returns {Float32Array}
   */
  forward(x, T) {
    return this.kernels.linear(this, x, T);
  }
}

/** weight * x / sqrt(mean(x**2) + eps) for each of the T rows; x (T, d) -> the same. */
export class RMSNorm {
  /**
   * @param {Float32Array} weight (d,), as stored (Gemma's 1 + w already added by the converter)
   * @param {number} eps
   * @param {Kernels} kernels
   */
  constructor(weight, eps, kernels) {
    this.weight = weight;
    this.eps = eps;
    this.kernels = kernels;
  }

  /**
   * @param {Float32Array} x
   * @param {number} T
   * @returns {Float32Array}
   */
  forward(x, T) {
    return this.kernels.rmsNorm(x, T, this.weight, this.eps);
  }
}

/**
 * A gated feed-forward as a family gives it.
 * @typedef {object} FeedForwardParts
 * @property {Projection} gate_proj
 * @property {Projection} up_proj
 * @property {Projection} down_proj
 * @property {"silu" | "gelu_tanh"} [activation] silu (SwiGLU) unless the family says GELU-tanh
 */

/** The gated feed-forward: down(act(gate(x)) * up(x)), act SiLU (SwiGLU) or GELU-tanh. */
export class FeedForward {
  /**
   * @param {FeedForwardParts} parts
   * @param {Kernels} kernels
   */
  constructor(parts, kernels) {
    this.gate_proj = new Linear(parts.gate_proj, kernels);
    this.up_proj = new Linear(parts.up_proj, kernels);
    this.down_proj = new Linear(parts.down_proj, kernels);
    this.activation = parts.activation ?? "silu";
    this.kernels = kernels;
  }

  /**
   * @param {Float32Array} x (T, d_model)
   * @param {number} T
   * @returns {Float32Array} (T, d_model)
   */
  forward(x, T) {
    const gate = this.gate_proj.forward(x, T); // (T, ffn_dim)
    const up = this.up_proj.forward(x, T); // (T, ffn_dim)
    const hidden = this.kernels.gatedAct(gate, up, this.activation); // act(gate) * up
    return this.down_proj.forward(hidden, T); // (T, d_model)
  }
}
