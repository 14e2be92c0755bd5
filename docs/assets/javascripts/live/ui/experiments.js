// The chapters' experiments on the live model: repeated random tokens (the induction
// test) and the three head scores of "What trained attention does" (scores.js, one
// definition each, as attnlab.llama.interpret), on the current text.
import { mulberry32 } from "../generate.js";
import { induction_scores, previous_token_scores, repeatedLength, sink_scores, top_heads } from "../scores.js";

export const REPEAT_LENGTH = 10; // tokens in one copy of the induction experiment

// `length` random tokens (ids 1000 .. vocab_size - 1, seeded), written twice after
// token 0: interpret.repeated_random_tokens's recipe (the page's generator, mulberry32,
// not torch's).
export function repeatedRandomTokens(length, seed, vocabSize) {
  const next = mulberry32(seed);
  const copy = Array.from({ length }, () => 1000 + (next() % (vocabSize - 1000)));
  return [0, ...copy, ...copy];
}

// {sink, previous, induction}: scores[layer][head] on the run's maps (induction: null
// unless the text ends with a sequence written twice; sink and previous: null under 2
// tokens).
export function headScores(result) {
  const { attention, layers, heads, T, ids } = result;
  const length = repeatedLength(ids.slice(0, T));
  return {
    sink: T >= 2 ? sink_scores(attention, layers, heads, T) : null,
    previous: T >= 2 ? previous_token_scores(attention, layers, heads, T) : null,
    induction: length !== null && T >= 4 ? induction_scores(attention, layers, heads, T, length) : null,
    length,
  };
}

export const SCORE_NAMES = [
  ["sink", "Sink (weight on token 0)"],
  ["previous", "Previous token"],
  ["induction", "Induction"],
];

// One line per score: its five best heads.
export function scoreLines(scores) {
  return SCORE_NAMES.map(([key, label]) => {
    const table = scores[key];
    const text = table
      ? top_heads(table, 5).map((b) => `layer ${b.layer} head ${b.head} (${b.score.toFixed(2)})`).join(", ")
      : key === "induction"
        ? "the text does not end with one run of tokens written twice in a row (A B C A B C, the same token ids: \u201Cred\u201D and \u201C red\u201D differ), so there is nothing to measure"
        : "one token: nothing to measure";
    return { key, text: `${label}: ${text}` };
  });
}

export { top_heads };
