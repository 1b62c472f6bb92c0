// The page's four conversations. Endpoints come from config.json (serve.py writes it), or
// from the query string: ?zmq_req=ws://...&sp_req=...&zmq_sub=...&sp_sub=...
"use strict";

const text = (bytes) => new TextDecoder().decode(bytes);
const show = (id, value) => { document.getElementById(id).textContent = value; };
const FEED_LINES = 8; // each feed list keeps its last few lines: the page's memory is bounded

function feed(id, line) {
  const list = document.getElementById(id);
  const item = document.createElement("li");
  item.textContent = line;
  list.prepend(item);
  while (list.children.length > FEED_LINES) list.lastChild.remove();
}

// ZeroMQ (ZWS 2.0) with jszmq: a REQ and a SUB
function zmqSide(cfg) {
  const req = new jszmq.Req();
  req.on("message", (reply) => show("zmq-reply", text(reply)));
  req.connect(cfg.zmq_req);
  const sub = new jszmq.Sub();
  sub.subscribe("");
  sub.on("message", (msg) => feed("zmq-feed", text(msg)));
  sub.connect(cfg.zmq_sub);
  return (body) => req.send(body);
}

// SP over WebSocket with the browser's WebSocket, asking for the peer's protocol as nng's
// dialers do (a req0 asks for rep.sp.nanomsg.org, a sub0 for pub.sp.nanomsg.org): each req0
// message starts with a 4-byte request id whose top bit is set (the reply carries it back);
// sub0 messages are bare
function spSide(cfg) {
  let rid = Math.floor(Math.random() * 0x7fffffff);
  let pending = null;
  let queued = null;
  const req = new WebSocket(cfg.sp_req, "rep.sp.nanomsg.org");
  req.binaryType = "arraybuffer";
  const send = (body) => {
    if (req.readyState !== WebSocket.OPEN) { queued = body; return; }
    rid = (rid + 1) & 0x7fffffff;
    pending = (rid | 0x80000000) >>> 0;
    const data = new TextEncoder().encode(body);
    const msg = new Uint8Array(4 + data.length);
    new DataView(msg.buffer).setUint32(0, pending);
    msg.set(data, 4);
    req.send(msg);
  };
  req.onopen = () => { if (queued !== null) { send(queued); queued = null; } };
  req.onmessage = (event) => {
    const msg = new Uint8Array(event.data);
    if (msg.length < 4 || new DataView(msg.buffer).getUint32(0) !== pending) return;
    show("sp-reply", text(msg.subarray(4)));
  };
  req.onclose = () => show("sp-reply", "(connection closed)");
  const sub = new WebSocket(cfg.sp_sub, "pub.sp.nanomsg.org");
  sub.binaryType = "arraybuffer";
  sub.onmessage = (event) => feed("sp-feed", text(new Uint8Array(event.data)));
  return send;
}

async function config() {
  const query = Object.fromEntries(new URLSearchParams(location.search));
  if (query.zmq_req) return query;
  return (await fetch("config.json")).json();
}

config().then((cfg) => {
  const toZmq = zmqSide(cfg);
  const toSp = spSide(cfg);
  const sendBoth = () => {
    const body = document.getElementById("text").value;
    try { toZmq(body); } catch (e) { show("zmq-reply", "(a request is still out)"); }
    toSp(body);
  };
  document.getElementById("send").onclick = sendBoth;
  sendBoth();
});
