// @ts-check
// A kernel thread under Node (worker_threads): the site's kernel-thread.js serves the
// first message, as it does in a browser's Worker. tests/js/threads.test.mjs starts it.
import { parentPort } from "node:worker_threads";
import { serve } from "../../docs/assets/javascripts/live/kernel-thread.js";

if (!parentPort) throw new Error("kernel-thread-node.mjs runs as a worker thread (threads.test.mjs starts it)");
parentPort.once("message", (start) => serve(start));
