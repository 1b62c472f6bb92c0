// One jszmq socket (ZWS 2.0 in JavaScript) under Node, driven line by line; the tests' and the
// matrix's JavaScript ZeroMQ peer (gateway/tools/harness/peers/jszmq.py runs it).
//
//   node jszmq_peer.js KIND bind|connect URL [serve]
//
// stdin:  SEND <hex>,<hex>...   send one message (frames in hex; "" is an empty frame)
//         SUB <hex> / UNSUB <hex>   a SUB's subscriptions
// stdout: READY once bound or connecting; RECV <hex>,... per message received; with "serve"
//         a REP or ROUTER answers every request itself, its body prefixed "re:" (a ROUTER
//         keeps the envelope it got).
"use strict";
const zmq = require("jszmq");
const readline = require("readline");

const [kind, action, url, mode] = process.argv.slice(2);
const sock = zmq.socket(kind.toLowerCase());
const hex = (frames) => frames.map((f) => Buffer.from(f).toString("hex")).join(",");
const unhex = (text) => text.split(",").map((h) => Buffer.from(h, "hex"));
const say = (line) => process.stdout.write(line + "\n");

sock.on("message", (...frames) => {
  say("RECV " + hex(frames));
  if (mode === "serve") {
    const body = frames[frames.length - 1];
    const reply = frames.slice(0, -1).concat([Buffer.concat([Buffer.from("re:"), body])]);
    sock.send(reply);
  }
});
if (action === "bind") sock.bind(url);
else sock.connect(url);
say("READY");

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const [verb, arg = ""] = line.split(" ");
  if (verb === "SEND") sock.send(unhex(arg));
  else if (verb === "SUB") sock.subscribe(Buffer.from(arg, "hex"));
  else if (verb === "UNSUB") sock.unsubscribe(Buffer.from(arg, "hex"));
}).on("close", () => process.exit(0));
