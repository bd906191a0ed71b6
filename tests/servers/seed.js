#!/usr/bin/env node
// seed.js — the objects rangeio's HTTP/S3 tests and benchmark read.
//
//   node seed.js --data DIR [--s3 http://127.0.0.1:PORT --bucket NAME]
//
// Writes into DIR (nginx's root) and, with --s3, uploads to the bucket:
//   pattern.bin  1 MiB + 13 bytes whose byte i is rangeio::SimulatedByteAt(i)
//                (splitmix64 of i / 8, little-endian), so a test can check
//                every byte of any range without a copy of the file;
//   empty.bin    0 bytes;
//   bench.bin    256 MiB of zeros (sparse: nginx serves it from the page
//                cache, no disk), for `rangeio bench http` (nginx only).
// The S3 bucket gets pattern.bin under every key in KEYS (spaces, '+', '=',
// '%', unicode, slashes) plus empty.bin. s3rver does not check signatures,
// so the uploads are unsigned.
'use strict';

const fs = require('fs');
const http = require('http');
const path = require('path');

const PATTERN_BYTES = (1 << 20) + 13;
const BENCH_BYTES = 256 * (1 << 20);
// Every key the tests read pattern.bin back from (keep in step with
// tests/http_test.cc).
const KEYS = [
  'pattern.bin',
  'dir/sub/pattern.bin',
  'with space.bin',
  'plus+sign.bin',
  'eq=uals.bin',
  'per%cent.bin',
  'per%20cent.bin',
  'unicod\u00e9 \u2603.bin',
  'mixed dir/a+b=c%d \u00e9 \u2603 ~!*\'()&$@,;:.bin',
];

function mix(x) {
  const M = (1n << 64n) - 1n;
  x = (x + 0x9e3779b97f4a7c15n) & M;
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & M;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & M;
  return x ^ (x >> 31n);
}

function patternBytes(size) {
  const words = Math.ceil(size / 8);
  const buf = Buffer.alloc(words * 8);
  for (let w = 0; w < words; w++) buf.writeBigUInt64LE(mix(BigInt(w)), w * 8);
  return buf.subarray(0, size);
}

function put(endpoint, bucket, key, body) {
  const url = new URL(endpoint);
  const encoded = key.split('/').map((s) => encodeURIComponent(s)
    .replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase()))
    .join('/');
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: 'PUT',
      path: `/${bucket}/${encoded}`,
      headers: { 'content-length': body.length } }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => (res.statusCode === 200 ? resolve()
        : reject(new Error(`PUT ${key}: HTTP ${res.statusCode} ${text}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function main() {
  const args = {};
  for (let i = 2; i < process.argv.length; i += 2) {
    args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  }
  if (!args.data) throw new Error('--data DIR is required');
  fs.mkdirSync(args.data, { recursive: true });
  const pattern = patternBytes(PATTERN_BYTES);
  fs.writeFileSync(path.join(args.data, 'pattern.bin'), pattern);
  fs.writeFileSync(path.join(args.data, 'with space.bin'), pattern);
  fs.writeFileSync(path.join(args.data, 'empty.bin'), Buffer.alloc(0));
  const bench = path.join(args.data, 'bench.bin');
  fs.writeFileSync(bench, Buffer.alloc(0));
  fs.truncateSync(bench, BENCH_BYTES);
  if (args.s3) {
    for (const key of KEYS) await put(args.s3, args.bucket, key, pattern);
    await put(args.s3, args.bucket, 'empty.bin', Buffer.alloc(0));
  }
}

main().catch((e) => {
  console.error(`seed: ${e.stack || e}`);
  process.exit(1);
});
