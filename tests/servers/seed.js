#!/usr/bin/env node
// seed.js — the objects rangeio's HTTP/S3 tests and benchmark read.
//
//   node seed.js [--data DIR] [--s3 http://127.0.0.1:PORT --bucket NAME
//                [--access-key ID --secret-key SECRET --create-bucket 1]
//                [--bench-mib N]]
//
// Writes into DIR (nginx's root) and, with --s3, uploads to the bucket:
//   pattern.bin  1 MiB + 13 bytes whose byte i is rangeio::SimulatedByteAt(i)
//                (splitmix64 of i / 8, little-endian), so a test can check
//                every byte of any range without a copy of the file;
//   empty.bin    0 bytes;
//   bench.bin    256 MiB of zeros (sparse: nginx serves it from the page
//                cache, no disk), for `rangeio-bench http` (nginx only).
// The S3 bucket gets pattern.bin under every key in KEYS (spaces, '+', '=',
// '%', '..', '?&#', leading and trailing spaces, CJK, emoji, slashes) plus
// empty.bin; with --bench-mib also bench.bin (N MiB of zeros) and the 64
// blobs of `rangeio-bench blob` (blob-bench/blob-B.bin, 100 KiB each, and
// blob-bench/packed.bin, all of them in a row, bytes as pattern.bin's), for
// the benchmarks against an object store. With --access-key the requests are signed (SigV4, as RGW checks
// them; s3rver does not), and --create-bucket creates the bucket first.
'use strict';

const crypto = require('crypto');
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
  'dots/../up..bin',
  'q?a&b#c.bin',
  ' lead and trail spaces.bin ',
  '\u65e5\u672c\u8a9e/\u30ad\u30fc.bin',
  'emoji \u{1F600}\u{1F680}.bin',
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

// RFC 3986 encoding of one path segment, as S3 signs it.
function encodeSegment(s) {
  return encodeURIComponent(s)
    .replace(/[!'()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
}

const sha256 = (data) => crypto.createHash('sha256').update(data).digest('hex');
const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();

// SigV4 headers of a path-style request (region us-east-1, service s3).
function signedHeaders(method, host, path, body, creds) {
  const date = new Date().toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = date.slice(0, 8);
  const headers = { host, 'x-amz-content-sha256': sha256(body), 'x-amz-date': date };
  const names = Object.keys(headers).sort();
  const canonical = [method, path, '',
    ...names.map((n) => `${n}:${headers[n]}`), '', names.join(';'),
    headers['x-amz-content-sha256']].join('\n');
  const scope = `${day}/us-east-1/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', date, scope, sha256(canonical)].join('\n');
  let key = hmac('AWS4' + creds.secret, day);
  for (const part of ['us-east-1', 's3', 'aws4_request']) key = hmac(key, part);
  const signature = hmac(key, toSign).toString('hex');
  headers.authorization = `AWS4-HMAC-SHA256 Credential=${creds.access}/${scope}, ` +
    `SignedHeaders=${names.join(';')}, Signature=${signature}`;
  return headers;
}

function put(endpoint, bucket, key, body, creds) {
  const url = new URL(endpoint);
  const path = key === null ? `/${bucket}`
    : `/${bucket}/${key.split('/').map(encodeSegment).join('/')}`;
  const headers = creds ? signedHeaders('PUT', url.host, path, body, creds) : {};
  headers['content-length'] = body.length;
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: 'PUT',
      path, headers }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => (res.statusCode === 200 ? resolve()
        : reject(new Error(`PUT ${path}: HTTP ${res.statusCode} ${text}`))));
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
  if (!args.data && !args.s3) throw new Error('--data DIR or --s3 URL is required');
  const pattern = patternBytes(PATTERN_BYTES);
  if (args.data) {
    fs.mkdirSync(args.data, { recursive: true });
    fs.writeFileSync(path.join(args.data, 'pattern.bin'), pattern);
    fs.writeFileSync(path.join(args.data, 'with space.bin'), pattern);
    fs.writeFileSync(path.join(args.data, 'empty.bin'), Buffer.alloc(0));
    const bench = path.join(args.data, 'bench.bin');
    fs.writeFileSync(bench, Buffer.alloc(0));
    fs.truncateSync(bench, BENCH_BYTES);
  }
  if (args.s3) {
    const creds = args['access-key']
      ? { access: args['access-key'], secret: args['secret-key'] } : null;
    if (args['create-bucket']) await put(args.s3, args.bucket, null, Buffer.alloc(0), creds);
    for (const key of KEYS) await put(args.s3, args.bucket, key, pattern, creds);
    await put(args.s3, args.bucket, 'empty.bin', Buffer.alloc(0), creds);
    if (args['bench-mib']) {
      await put(args.s3, args.bucket, 'bench.bin',
        Buffer.alloc(Number(args['bench-mib']) << 20), creds);
      // As bench_blob.cc's kBlobs and kBlobBytes.
      const blobs = 64;
      const blobBytes = 100 * 1024;
      const packed = patternBytes(blobs * blobBytes);
      for (let b = 0; b < blobs; b++) {
        await put(args.s3, args.bucket, `blob-bench/blob-${b}.bin`,
          packed.subarray(b * blobBytes, (b + 1) * blobBytes), creds);
      }
      await put(args.s3, args.bucket, 'blob-bench/packed.bin', packed, creds);
    }
  }
}

main().catch((e) => {
  console.error(`seed: ${e.stack || e}`);
  process.exit(1);
});
