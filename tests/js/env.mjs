// @ts-check
// What the Node tests read from their environment: each tests/js/test_node_*.py (and
// tests/llama/test_gguf_fuzz.py) passes the reference files' paths in variables.

/**
 * The environment variable `name`, which the test's Python side sets.
 * @param {string} name
 * @returns {string}
 */
export function requiredEnv(name) {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`the environment variable ${name} is not set: run this file from the Python test that sets it`);
  }
  return value;
}
