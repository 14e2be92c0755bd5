// @ts-check
// The browser's Cache Storage where the model's file is kept across visits: one name for
// the worker, which fills and reads it, and the page's API, which asks whether it holds
// the file. It exists in secure contexts only (https, or http on 127.0.0.1 / localhost).
const CACHE_NAME = "attnlab-live-v1";

// The cache, or null where the browser has none.
export async function openCache() {
  if (typeof caches === "undefined") return null;
  try {
    return await caches.open(CACHE_NAME);
  } catch {
    return null;
  }
}
