// @ts-check
// The model families the page reads, by GGUF `general.architecture`: one per description
// in descriptions.js (generated from src/attnlab/llama/families/*.json), each read by the
// one generic reader (reader.js: the config; parts.js: the model's parts). Adding a family
// is a JSON file on the Python side, and the parts it names.
import { repr } from "../gguf.js";
import { DESCRIPTIONS } from "./descriptions.js";
import { readParts } from "./parts.js";
import { readConfig } from "./reader.js";

/** @typedef {import("./reader.js").Config} Config */
/** @typedef {import("../gguf.js").Tensor} Tensor */
/** @typedef {import("./reader.js").GgufContents} GgufContents */

/**
 * A family: its description, its config reader and its parts reader.
 * @typedef {object} Family
 * @property {string} architecture
 * @property {import("./reader.js").Description} description
 * @property {(file: GgufContents) => Readonly<Config>} configFromGguf the config of a parsed
 *   file (gguf.js's GgufFile: its metadata, their GGUF types, its tensors)
 * @property {(tensors: Record<string, Tensor>, config: Config) => import("../model.js").ModelParts} partsFromGguf
 */

/** @type {Record<string, Family>} */
export const FAMILIES = Object.fromEntries(Object.entries(DESCRIPTIONS).map(([architecture, found]) => {
  const description = /** @type {import("./reader.js").Description} */ (found);
  /** @type {Family} */
  const family = {
    architecture,
    description,
    configFromGguf: (file) => readConfig(description, file),
    partsFromGguf: (tensors, config) => readParts(description, tensors, config),
  };
  return [architecture, family];
}));

/**
 * The family of a parsed GGUF file, refused by name when the page has none for it.
 * @param {Record<string, unknown>} metadata
 * @returns {Family}
 */
export function familyOf(metadata) {
  const architecture = metadata["general.architecture"];
  const family = typeof architecture === "string" && Object.hasOwn(FAMILIES, architecture) ? FAMILIES[architecture] : undefined;
  if (!family) {
    throw new RangeError(
      `the GGUF's general.architecture must be one of ${Object.keys(FAMILIES).sort().join(", ")}; got ${repr(architecture)}`
    );
  }
  return family;
}
