// @ts-check
// The chapters' experiments on the live model: repeated random tokens (the induction
// test) and the three head scores of "What trained attention does" (scores.js, one
// definition each, as attnlab.llama.interpret), on the current text.
import { mulberry32 } from "../generate.js";
import { induction_scores, previous_token_scores, repeatedLength, sink_scores, top_heads } from "../scores.js";
import { headsOf } from "./draw.js";

export const REPEAT_LENGTH = 10; // tokens in one copy of the induction experiment

/** @typedef {import("./draw.js").LiveResult} LiveResult */
/** @typedef {(number | null)[][]} ScoreTable  scores[layer][head]; null: a linear layer's head (no weights) */
/**
 * @typedef {object} HeadScores
 * @property {ScoreTable | null} sink  null under 2 tokens
 * @property {ScoreTable | null} previous  null under 2 tokens
 * @property {ScoreTable | null} induction  null unless the text ends with a sequence written twice
 * @property {number | null} length  the repeated sequence's length
 */

// `length` random tokens (ids 1000 .. vocab_size - 1, seeded; from half the vocabulary
// in one under 2,000), written twice after `firstToken`: interpret.repeated_random_tokens's
// recipe (the page's generator, mulberry32, not torch's).
/**
 * @param {number} length
 * @param {number} seed
 * @param {{vocabSize: number, firstToken: number}} options firstToken: the id before the
 *   copies (the page's model: 0, as in Python; another model: its start token)
 * @returns {number[]}
 */
export function repeatedRandomTokens(length, seed, { vocabSize, firstToken }) {
  const next = mulberry32(seed);
  const low = Math.min(1000, Math.floor(vocabSize / 2));
  const copy = Array.from({ length }, () => low + (next() % (vocabSize - low)));
  return [firstToken, ...copy, ...copy];
}

/**
 * The three scores of every head on the run's maps. The scores read weights: a linear
 * (Gated DeltaNet) layer's signed values are none, so its heads score null.
 * @param {LiveResult} result
 * @returns {HeadScores}
 */
export function headScores(result) {
  const { attention, layers, T, ids } = result;
  const length = repeatedLength(ids.slice(0, T));
  const shape = { layers, heads: Array.from({ length: layers }, (_, layer) => headsOf(result, layer)), T };
  /** @param {number[][]} table @returns {ScoreTable} a linear layer's heads: null */
  const softmaxOnly = (table) => table.map((row, layer) => (result.kinds[layer].signed ? row.map(() => null) : row));
  return {
    sink: T >= 2 ? softmaxOnly(sink_scores(attention, shape)) : null,
    previous: T >= 2 ? softmaxOnly(previous_token_scores(attention, shape)) : null,
    induction: length !== null && T >= 4 ? softmaxOnly(induction_scores(attention, shape, length)) : null,
    length,
  };
}

export const SCORE_NAMES = [
  ["sink", "Sink (weight on token 0)"],
  ["previous", "Previous token"],
  ["induction", "Induction"],
];

/**
 * One line per score: its five best heads (a linear layer's heads left out).
 * @param {HeadScores} scores
 * @returns {{key: string, text: string}[]}
 */
export function scoreLines(scores) {
  return SCORE_NAMES.map(([key, label]) => {
    const table = scores[/** @type {"sink" | "previous" | "induction"} */ (key)];
    const text = table
      ? top_heads(table.map((row) => row.map((score) => score ?? -Infinity)), 5).filter((best) => best.score > -Infinity).map((b) => `layer ${b.layer} head ${b.head} (${b.score.toFixed(2)})`).join(", ")
      : key === "induction"
        ? "the text does not end with one run of tokens written twice in a row (A B C A B C, the same token ids: \u201Cred\u201D and \u201C red\u201D differ), so there is nothing to measure"
        : "one token: nothing to measure";
    return { key, text: `${label}: ${text}` };
  });
}

export { top_heads };
