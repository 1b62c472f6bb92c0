// jszmq for the browser: one IIFE exposing `jszmq`, its Node-only listener's modules (http,
// https, net, url: binding needs Node) replaced by empty ones; the browser's own WebSocket
// stands in for the `ws` package (isomorphic-ws's browser entry).
import { build } from "esbuild";

const out = process.argv[2];
const nodeOnly = { name: "node-only", setup(b) {
  b.onResolve({ filter: /^(http|https|net|url)$/ }, (a) => ({ path: a.path, namespace: "empty" }));
  b.onLoad({ filter: /.*/, namespace: "empty" }, () => ({ contents: "module.exports = {}" }));
} };
await build({
  entryPoints: ["jszmq"], bundle: true, format: "iife", globalName: "jszmq",
  platform: "browser", outfile: out, plugins: [nodeOnly], logLevel: "warning",
  define: { "process.env.NODE_DEBUG": "false", global: "globalThis" },
  inject: [],
});
