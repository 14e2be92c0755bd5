// @ts-check
// Rotary positions for a layer: attnlab.RotaryEmbedding over a head's first `dim`
// coordinates (rotate-half pairs; partial rotary leaves the rest as they are), with this
// layer's base and scaling (attnlab.rope_frequencies: linear, YaRN, Llama 3.1's bands).

/**
 * A config's rope_scaling, as Python's LlamaConfig.to_dict() writes it: the scaling
 * dataclass's fields plus its "type".
 * @typedef {{type: "linear", factor: number}
 *   | {type: "yarn", factor: number, original_length: number, beta_fast: number, beta_slow: number,
 *      attention_factor?: number | null, mscale?: number | null, mscale_all_dim?: number | null, truncate?: boolean}
 *   | {type: "llama3", factor: number, low_freq_factor: number, high_freq_factor: number, original_length: number}} RopeScaling
 */

/**
 * A layer's rotary positions as a family gives them.
 * @typedef {object} RotarySpec
 * @property {number} theta the base
 * @property {number} dim coordinates turned per head (even, at most head_dim)
 * @property {RopeScaling | null} scaling
 */

/**
 * 1 / theta ** (2i / dim) in float32, as transformers computes it.
 * @param {number} dim
 * @param {number} theta
 * @returns {Float32Array}
 */
function defaultInvFreq(dim, theta) {
  const invFreq = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) invFreq[i] = 1 / Math.fround(theta ** Math.fround((2 * i) / dim));
  return invFreq;
}

/** @param {number} factor @param {number} [mscale] @returns {number} */
const yarnMscale = (factor, mscale = 1) => (factor <= 1 ? 1 : 0.1 * mscale * Math.log(factor) + 1);

/**
 * attnlab.rope_frequencies: each pair's frequency and the factor on cos and sin.
 * @param {number} dim
 * @param {number} theta
 * @param {RopeScaling | null} scaling
 * @returns {{invFreq: Float32Array, attentionFactor: number}}
 */
export function ropeFrequencies(dim, theta, scaling) {
  const invFreq = defaultInvFreq(dim, theta);
  if (scaling === null) return { invFreq, attentionFactor: 1 };
  if (scaling.type === "linear") return { invFreq: invFreq.map((f) => f / scaling.factor), attentionFactor: 1 };
  if (scaling.type === "llama3") {
    const s = scaling;
    const low = s.original_length / s.low_freq_factor;
    const high = s.original_length / s.high_freq_factor;
    return {
      invFreq: invFreq.map((f) => {
        const wavelen = Math.fround((2 * Math.PI) / f);
        const scaled = wavelen > low ? Math.fround(f / s.factor) : f;
        if (wavelen < high || wavelen > low) return scaled;
        const smooth = Math.fround((s.original_length / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor));
        return Math.fround(Math.fround(((1 - smooth) * scaled) / s.factor) + Math.fround(smooth * scaled));
      }),
      attentionFactor: 1,
    };
  }
  const s = scaling; // YaRN
  let attentionFactor = yarnMscale(s.factor);
  if (s.attention_factor !== undefined && s.attention_factor !== null) attentionFactor = s.attention_factor;
  else if (s.mscale && s.mscale_all_dim) attentionFactor = yarnMscale(s.factor, s.mscale) / yarnMscale(s.factor, s.mscale_all_dim);
  /** @param {number} turns @returns {number} */
  const pairTurning = (turns) => (dim * Math.log(s.original_length / (turns * 2 * Math.PI))) / (2 * Math.log(theta));
  let low = pairTurning(s.beta_fast);
  let high = pairTurning(s.beta_slow);
  if (s.truncate ?? true) [low, high] = [Math.floor(low), Math.ceil(high)];
  low = Math.max(low, 0);
  high = Math.min(high, dim - 1);
  if (low === high) high += 0.001;
  const out = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) {
    const ramp = Math.min(1, Math.max(0, Math.fround((i - low) / (high - low))));
    const posFreq = Math.fround(theta ** Math.fround((2 * i) / dim));
    const kept = Math.fround(1 / posFreq);
    const squeezed = Math.fround(1 / Math.fround(s.factor * posFreq));
    const keep = Math.fround(1 - ramp);
    out[i] = Math.fround(squeezed * Math.fround(1 - keep)) + Math.fround(kept * keep);
  }
  return { invFreq: out, attentionFactor };
}

/**
 * attnlab.RotaryEmbedding: pair i is coordinates (i, i + dim/2) of a head of width
 * headDim, turned by position * inv_freq[i]; coordinates from dim on stay as they are.
 */
export class RotaryEmbedding {
  /**
   * @param {number} headDim
   * @param {number} theta
   * @param {{dim?: number, scaling?: RopeScaling | null}} [options]
   */
  constructor(headDim, theta, { dim = headDim, scaling = null } = {}) {
    this.headDim = headDim;
    this.dim = dim;
    const { invFreq, attentionFactor } = ropeFrequencies(dim, theta, scaling);
    this.invFreq = invFreq;
    this.attentionFactor = attentionFactor;
  }

  /**
   * cos and sin of positions start .. start + T - 1, (T, dim/2) each (both halves share
   * them), times the attention factor (1 but for YaRN).
   * @param {number} start
   * @param {number} T
   * @returns {{cos: Float32Array, sin: Float32Array}}
   */
  cosSin(start, T) {
    const half = this.dim / 2;
    const cos = new Float32Array(T * half);
    const sin = new Float32Array(T * half);
    const factor = this.attentionFactor;
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < half; i++) {
        const angle = Math.fround((start + t) * this.invFreq[i]);
        cos[t * half + i] = factor === 1 ? Math.cos(angle) : Math.fround(Math.cos(angle)) * factor;
        sin[t * half + i] = factor === 1 ? Math.sin(angle) : Math.fround(Math.sin(angle)) * factor;
      }
    }
    return { cos, sin };
  }

  /**
   * Rotate, in place, every head of x (T, heads * headDim): x * cos + rotate_half(x) * sin
   * on each head's first dim coordinates.
   * @param {Float32Array} x
   * @param {number} T
   * @param {number} heads
   * @param {{cos: Float32Array, sin: Float32Array}} cosSin
   */
  applyCosSin(x, T, heads, { cos, sin }) {
    const D = this.headDim;
    const half = this.dim / 2;
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < heads; h++) {
        const at = (t * heads + h) * D;
        for (let i = 0; i < half; i++) {
          const c = cos[t * half + i];
          const s = sin[t * half + i];
          const x1 = x[at + i];
          const x2 = x[at + i + half];
          x[at + i] = Math.fround(x1 * c) - Math.fround(x2 * s); // rotate_half: [-x2, x1]
          x[at + i + half] = Math.fround(x2 * c) + Math.fround(x1 * s);
        }
      }
    }
  }
}
