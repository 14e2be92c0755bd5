// The model families the page reads, by GGUF `general.architecture`. A family is one
// file (families/<name>.js) exporting `family`: {architecture, Config, configFromGguf,
// partsFromGguf}; adding one is an import and an entry here.
import { repr } from "../gguf.js";
import { family as llama } from "./llama.js";
import { family as qwen2 } from "./qwen2.js";
import { family as qwen3 } from "./qwen3.js";

export const FAMILIES = Object.fromEntries([llama, qwen2, qwen3].map((f) => [f.architecture, f]));

// The family of a parsed GGUF file, refused by name when the page has none for it.
export function familyOf(metadata) {
  const architecture = metadata["general.architecture"];
  const family = typeof architecture === "string" && Object.hasOwn(FAMILIES, architecture) ? FAMILIES[architecture] : undefined;
  if (!family) {
    throw new RangeError(
      `the GGUF's general.architecture must be one of ${Object.keys(FAMILIES).join(", ")}; got ${repr(architecture)}`
    );
  }
  return family;
}
