#!/usr/bin/env node
// faultproxy.js — an HTTP/1.1 latency and fault-injecting reverse proxy for
// rangeio's tests and benchmarks. Node.js only, no dependencies.
//
// The kernel here has no netem, so latency and faults live in user space.
// One process serves a control API and any number of listeners; each
// listener has its own upstream, latency model, fault list and counters, so
// tests running in parallel never share a configuration.
//
//   node faultproxy.js --control-port 0 --port-file FILE
//
// Control API (JSON), on 127.0.0.1:<control port>:
//   POST   /listeners        {"upstream": "127.0.0.1:8080",
//                            "latency": {...}, "faults": [...],
//                            "capture": false, "seed": 1, "port": 0}
//                            -> {"port": 41234}
//   GET    /listeners/PORT   -> {"requests", "methods": {"GET": n, ...},
//                                "faults": {"reset": n, ...},
//                                "captured": [{method, url, headers}] (last 64)}
//   DELETE /listeners/PORT   closes the listener.
//   GET    /health           -> {"ok": true}
//
// Latency (added before the request goes upstream), "latency":
//   {"kind": "none"}
//   {"kind": "fixed", "ms": 24}
//   {"kind": "every", "k": 64, "base_ms": 1, "slow_ms": 10}  request n is slow
//                                                            when n % k == k-1
//   {"kind": "random", "p": 0.01, "base_ms": 1, "slow_ms": 100}
//   {"kind": "lognormal", "median_ms": 24, "sigma": 0.3}
//
// Faults, "faults": a list; the first whose selector matches request n (0-
// based, per listener) applies. Selectors: "first": N (requests 0..N-1),
// "every": k (n % k == k-1), "rate": p (seeded random). Kinds:
//   {"kind": "slowdown"}           503 with an S3 <Error><Code>SlowDown</Code>
//                                   body; "retry_after": seconds (optional)
//   {"kind": "status", "status": 500, "code": "InternalError"}  any answer
//   {"kind": "reset", "after_bytes": B}     TCP RST after B body bytes
//   {"kind": "truncate", "after_bytes": B}  clean close (FIN) after B bytes
//   {"kind": "stall", "after_bytes": B, "stall_ms": T}  pause T ms after B
//                                   bytes (T < 0: never resume)
//   {"kind": "delay", "ms": T}      T ms more before forwarding (a slow first
//                                   byte)
//   {"kind": "drop_range"}          strips the Range header (server sends 200)
//   {"kind": "widen_range", "extra": E}  asks upstream for E more bytes than
//                                   the client did (a mismatched Content-Range)
//
// A listener can also be given on the command line (--listen PORT
// --upstream HOST:PORT --latency JSON). The benchmarks' listeners are
// rangeio-latency-relay (latency_relay.cc here), not this: Node costs
// ~300 us of CPU per 100 KiB response, too close to their request rate.
'use strict';

const fs = require('fs');
const http = require('http');
const net = require('net');

function parseArgs(argv) {
  const out = { controlPort: null, portFile: null };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const v = () => argv[++i];
    if (a === '--control-port') out.controlPort = Number(v());
    else if (a === '--port-file') out.portFile = v();
    else if (a === '--listen') out.listen = Number(v());
    else if (a === '--upstream') out.upstream = v();
    else if (a === '--latency') out.latency = JSON.parse(v());
    else throw new Error(`unknown argument ${a}`);
  }
  return out;
}

// mulberry32: a small seeded PRNG, so a run's faults and delays repeat.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function latencyModel(spec, random) {
  const s = spec || { kind: 'none' };
  switch (s.kind) {
    case 'none':
      return () => 0;
    case 'fixed':
      return () => s.ms;
    case 'every':
      return (n) => (n % s.k === s.k - 1 ? s.slow_ms : s.base_ms);
    case 'random':
      return () => (random() < s.p ? s.slow_ms : s.base_ms);
    case 'lognormal':
      return () => {
        // Box-Muller: a standard normal from two uniforms.
        const u = 1 - random();
        const v = random();
        const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
        return s.median_ms * Math.exp(s.sigma * z);
      };
    default:
      throw new Error(`unknown latency kind ${s.kind}`);
  }
}

function selects(f, n, random) {
  if (f.first !== undefined) return n < f.first;
  if (f.every !== undefined) return n % f.every === f.every - 1;
  if (f.rate !== undefined) return random() < f.rate;
  return true;
}

const KNOWN_FAULTS = new Set(['delay', 'slowdown', 'status', 'reset', 'truncate',
  'stall', 'drop_range', 'widen_range']);

class Listener {
  constructor(config) {
    const [host, port] = String(config.upstream).split(':');
    if (!host || !port) throw new Error('upstream must be HOST:PORT');
    this.upstream = { host, port: Number(port) };
    this.random = rng(config.seed || 1);
    this.delay = latencyModel(config.latency, this.random);
    this.faults = config.faults || [];
    for (const f of this.faults) {
      if (!KNOWN_FAULTS.has(f.kind)) throw new Error(`unknown fault ${f.kind}`);
    }
    this.capture = Boolean(config.capture);
    this.stats = { requests: 0, methods: {}, faults: {}, captured: [] };
    this.sockets = new Set();
    // Latency only: relay bytes, parsing nothing but request heads (several
    // times the rate of a full HTTP proxy in Node). latency_relay.cc does the
    // same for the benchmarks, in C++.
    this.tcp = this.faults.length === 0 && !this.capture;
    if (this.tcp) {
      this.server = net.createServer((s) => this.relayTcp(s));
    } else {
      this.agent = new http.Agent({ keepAlive: true, maxSockets: Infinity,
        maxFreeSockets: 1024 });
      this.server = http.createServer((req, res) => this.onRequest(req, res));
      this.server.keepAliveTimeout = 60000;
    }
    this.server.on('connection', (s) => {
      s.setNoDelay(true);
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  // One upstream connection per client connection. Request heads (and a
  // Content-Length body, if any) go upstream after their added latency, in
  // order; answers are piped back untouched.
  relayTcp(client) {
    const up = net.connect(this.upstream.port, this.upstream.host);
    up.setNoDelay(true);
    this.sockets.add(up);
    const close = () => { client.destroy(); up.destroy(); this.sockets.delete(up); };
    up.on('error', close);
    client.on('error', close);
    up.on('close', close);
    client.on('close', close);
    up.pipe(client);
    let pending = Buffer.alloc(0);
    let lastAt = 0;
    client.on('data', (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      for (;;) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = pending.toString('latin1', 0, end);
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (pending.length < total) return;
        const request = pending.subarray(0, total);
        pending = pending.subarray(total);
        const n = this.stats.requests++;
        const method = head.slice(0, head.indexOf(' '));
        this.stats.methods[method] = (this.stats.methods[method] || 0) + 1;
        const now = Date.now();
        lastAt = Math.max(now + this.delay(n), lastAt);
        if (lastAt <= now) up.write(request);
        else setTimeout(() => up.write(request), lastAt - now);
      }
    });
  }

  listen(port) {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port || 0, '127.0.0.1', () =>
        resolve(this.server.address().port));
    });
  }

  close() {
    this.server.close();
    for (const s of this.sockets) s.destroy();
    if (this.agent) this.agent.destroy();
  }

  onRequest(req, res) {
    const n = this.stats.requests++;
    this.stats.methods[req.method] = (this.stats.methods[req.method] || 0) + 1;
    if (this.capture) {
      this.stats.captured.push({ method: req.method, url: req.url,
        headers: req.headers });
      if (this.stats.captured.length > 64) this.stats.captured.shift();
    }
    const fault = this.faults.find((f) => selects(f, n, this.random));
    if (fault) this.stats.faults[fault.kind] = (this.stats.faults[fault.kind] || 0) + 1;
    const ms = this.delay(n) + (fault && fault.kind === 'delay' ? fault.ms : 0);
    const go = () => this.handle(req, res, fault);
    if (ms > 0) setTimeout(go, ms); else go();
  }

  handle(req, res, fault) {
    if (fault && (fault.kind === 'slowdown' || fault.kind === 'status')) {
      return this.answerError(req, res, fault);
    }
    const headers = { ...req.headers };
    if (fault && fault.kind === 'drop_range') delete headers.range;
    if (fault && fault.kind === 'widen_range' && headers.range) {
      headers.range = headers.range.replace(/-(\d+)$/,
        (m, last) => `-${Number(last) + (fault.extra || 100)}`);
    }
    const up = http.request({ host: this.upstream.host, port: this.upstream.port,
      method: req.method, path: req.url, headers, agent: this.agent });
    up.on('error', (e) => {
      if (!res.headersSent) {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`faultproxy: upstream error: ${e.message}\n`);
      } else {
        res.destroy();
      }
    });
    up.on('response', (upRes) => this.relay(upRes, res, fault));
    req.pipe(up);
  }

  answerError(req, res, fault) {
    const status = fault.kind === 'slowdown' ? 503 : (fault.status || 500);
    const code = fault.kind === 'slowdown' ? 'SlowDown' : (fault.code || 'InternalError');
    const message = fault.kind === 'slowdown'
      ? 'Please reduce your request rate.' : (fault.message || 'Injected by faultproxy.');
    const body = '<?xml version="1.0" encoding="UTF-8"?>\n' +
      `<Error><Code>${code}</Code><Message>${message}</Message></Error>\n`;
    const headers = { 'content-type': 'application/xml',
      'content-length': Buffer.byteLength(body) };
    if (fault.retry_after !== undefined) headers['retry-after'] = String(fault.retry_after);
    req.resume();
    res.writeHead(status, headers);
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  relay(upRes, res, fault) {
    res.on('close', () => { if (!upRes.complete) upRes.destroy(); });
    res.writeHead(upRes.statusCode, upRes.headers);
    const body = fault && ['reset', 'truncate', 'stall'].includes(fault.kind);
    if (!body) {
      upRes.pipe(res);
      return;
    }
    const after = fault.after_bytes || 0;
    let sent = 0;
    let tripped = false;
    const trip = () => {
      tripped = true;
      const sock = res.socket;
      if (fault.kind === 'reset') {
        upRes.destroy();
        // Let the bytes before the fault reach the client, then send a RST.
        setTimeout(() => sock && sock.resetAndDestroy(), 5);
      } else if (fault.kind === 'truncate') {
        upRes.destroy();
        setTimeout(() => sock && sock.end(), 5);
      } else {  // stall
        upRes.pause();
        if (fault.stall_ms >= 0) {
          setTimeout(() => upRes.resume(), fault.stall_ms);
        }
      }
    };
    upRes.on('data', (chunk) => {
      if (tripped && fault.kind !== 'stall') return;
      if (!tripped && sent + chunk.length >= after && after < Infinity) {
        const head = chunk.subarray(0, after - sent);
        const rest = chunk.subarray(after - sent);
        sent += head.length;
        if (head.length) res.write(head);
        trip();
        if (fault.kind === 'stall' && rest.length) {
          res.write(rest);  // goes out once the stall is over (paused above)
          sent += rest.length;
        }
        return;
      }
      sent += chunk.length;
      res.write(chunk);
    });
    upRes.on('end', () => { if (!tripped || fault.kind === 'stall') res.end(); });
  }
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (c) => { data += c; });
    req.on('end', () => {
      try { resolve(data ? JSON.parse(data) : {}); } catch (e) { reject(e); }
    });
  });
}

function send(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, { 'content-type': 'application/json',
    'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function control(listeners, req, res) {
  const m = req.url.match(/^\/listeners(?:\/(\d+))?$/);
  try {
    if (req.url === '/health') return send(res, 200, { ok: true });
    if (m && req.method === 'POST' && !m[1]) {
      const config = await readJson(req);
      const l = new Listener(config);
      const port = await l.listen(config.port);
      listeners.set(port, l);
      return send(res, 200, { port });
    }
    const l = m && m[1] && listeners.get(Number(m[1]));
    if (!l) return send(res, 404, { error: `no listener ${req.url}` });
    if (req.method === 'GET') return send(res, 200, l.stats);
    if (req.method === 'DELETE') {
      l.close();
      listeners.delete(Number(m[1]));
      return send(res, 200, { closed: Number(m[1]) });
    }
    return send(res, 405, { error: 'method not allowed' });
  } catch (e) {
    return send(res, 400, { error: String(e.message || e) });
  }
}

async function main() {
  const args = parseArgs(process.argv);
  if (args.listen !== undefined) {
    const l = new Listener({ upstream: args.upstream, latency: args.latency });
    const port = await l.listen(args.listen);
    if (args.portFile) {
      fs.writeFileSync(args.portFile, `${port}\n`);
    }
    if (args.controlPort === null) return;
  }
  const listeners = new Map();
  const server = http.createServer((req, res) => control(listeners, req, res));
  server.listen(args.controlPort || 0, '127.0.0.1', () => {
    const port = server.address().port;
    if (args.portFile) fs.writeFileSync(args.portFile, `${port}\n`);
    console.log(`faultproxy: control API on 127.0.0.1:${port}`);
  });
}

process.on('SIGTERM', () => process.exit(0));
main().catch((e) => {
  console.error(`faultproxy: ${e.stack || e}`);
  process.exit(1);
});
