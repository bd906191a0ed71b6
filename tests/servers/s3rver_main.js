#!/usr/bin/env node
// s3rver_main.js — runs the pinned s3rver for rangeio's tests, with its
// ranged GET made to answer like S3.
//
//   node s3rver_main.js --dir DIR --port 0 --bucket NAME
//
// Prints "s3rver listening on 127.0.0.1:PORT" once it serves. Virtual-
// hosted requests work through BUCKET.s3.localhost (service endpoint
// "localhost"; libcurl resolves *.localhost to loopback).
//
// s3rver 3.7.1's filesystem store reads the end of a range as
// `options.end || Infinity`, so `Range: bytes=0-0` (an end of 0) gets the
// whole object back as "bytes 0-(size-1)/size", and an empty object gets a
// 1-byte range. S3 answers bytes=0-0 with that one byte, and 416 InvalidRange
// (with ActualObjectSize) for an empty object. rangeio's Size() sends exactly
// bytes=0-0 and rejects any Content-Range other than the one it asked for,
// so the store's getObject is replaced here by one that reads the range as S3
// does; everything else is s3rver's own.
'use strict';

const fs = require('fs');
const S3rver = require('s3rver');
const FilesystemStore = require('s3rver/lib/stores/filesystem');
const S3Object = require('s3rver/lib/models/object');

FilesystemStore.prototype.getObject = async function getObject(bucket, key, options) {
  let metadata;
  try {
    metadata = await this.getMetadata(bucket, key);
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  const size = Number(metadata['content-length']);
  const ranged = Boolean(options) &&
    (options.start !== undefined || options.end !== undefined);
  const start = ranged && options.start !== undefined ? options.start : 0;
  const end = Math.min(ranged && options.end !== undefined ? options.end : Infinity,
    size - 1);
  if (ranged && (start < 0 || start >= size || end < start)) {
    const unsatisfiable = new S3Object(bucket, key, null, metadata);
    unsatisfiable.range = { start, end };
    return unsatisfiable;
  }
  const path = this.getResourcePath(bucket, key, 'object');
  const content = await new Promise((resolve, reject) => {
    const stream = fs.createReadStream(path, size > 0 ? { start, end } : {})
      .on('error', reject)
      .on('open', () => resolve(stream));
  });
  const object = new S3Object(bucket, key, content, metadata);
  if (ranged) object.range = { start, end };
  return object;
};

async function main() {
  const args = {};
  for (let i = 2; i < process.argv.length; i += 2) {
    args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  }
  fs.mkdirSync(args.dir, { recursive: true });
  const server = new S3rver({
    address: '127.0.0.1',
    port: Number(args.port || 0),
    directory: args.dir,
    silent: true,
    serviceEndpoint: 'localhost',
    configureBuckets: [{ name: args.bucket, configs: [] }],
  });
  const { address, port } = await server.run();
  console.log(`s3rver listening on ${address}:${port}`);
}

process.on('SIGTERM', () => process.exit(0));
main().catch((e) => {
  console.error(`s3rver_main: ${e.stack || e}`);
  process.exit(1);
});
