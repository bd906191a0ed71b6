#!/usr/bin/env python3
"""Checks the AWS SigV4 signatures rangeio sends against botocore's.

s3rver checks the access key id but not signatures, so the signing is
checked here, against an independent implementation: a capture server on
loopback answers every GET with 10 bytes (206), and rangeio_sigv4_capture
reads S3 keys with spaces, '+', '=', '%', unicode and slashes through it,
with and without a session token, credentials and region coming from the
environment. For every captured request this script checks that

  * the path is the bucket and key encoded as S3 (and botocore) encode them:
    RFC 3986 unreserved characters and '/' kept, every other byte %XX;
  * host, x-amz-content-sha256, x-amz-date (and x-amz-security-token with a
    session token) are signed, and x-amz-date is current;
  * botocore's S3SigV4Auth, given the same method, URL, signed headers and
    timestamp, computes exactly the Signature in the Authorization header
    (and a different one for a tampered request: the check is not vacuous).

Usage: sigv4_check.py PATH/TO/rangeio_sigv4_capture
Exit 0: all verified; 77: botocore missing (a skip, unless
RANGEIO_REQUIRE_SERVERS=1, then 1); 1: a mismatch.
"""
import datetime
import http.server
import os
import re
import subprocess
import sys
import threading
import urllib.parse

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    print("sigv4_check: botocore is not installed (apt-get install python3-botocore)")
    sys.exit(1 if os.environ.get("RANGEIO_REQUIRE_SERVERS") == "1" else 77)

BUCKET = "sigv4-bucket"
REGION = "eu-central-1"
# AWS's documentation example credentials: never valid anywhere.
ACCESS_KEY = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FQoGZXIvYXdzEXAMPLE//////////token+with/odd=chars"
KEYS = [
    "plain.bin",
    "dir/sub/file.bin",
    "with space.bin",
    "plus+sign.bin",
    "eq=uals.bin",
    "per%cent.bin",
    "per%20cent.bin",
    "unicod\u00e9 \u2603.bin",
    "mixed dir/a+b=c%d \u00e9 ~!*'()&$@,;:.bin",
    "dots/../and/./dots",
]

captured = []


class Capture(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):  # noqa: N802 (http.server's naming)
        captured.append((self.command, self.path, dict(
            (k.lower(), v) for k, v in self.headers.items())))
        body = b"0123456789"
        self.send_response(206)
        self.send_header("Content-Range", "bytes 0-9/100")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def run_capture(tool, port, token):
    env = dict(os.environ)
    for name in ("AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE",
                 "AWS_ENDPOINT_URL_S3", "AWS_DEFAULT_REGION"):
        env.pop(name, None)
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
               AWS_REGION=REGION, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    if token:
        env["AWS_SESSION_TOKEN"] = token
    else:
        env.pop("AWS_SESSION_TOKEN", None)
    urls = [f"s3://{BUCKET}/{k}" for k in KEYS]
    out = subprocess.run([tool] + urls, env=env, capture_output=True,
                         text=True, timeout=120)
    if out.returncode != 0:
        print(out.stdout + out.stderr)
        raise SystemExit("sigv4_check: rangeio_sigv4_capture failed")
    return [(k, token) for k in KEYS for _ in range(2)]


def expected_path(key):
    # How botocore (and the AWS CLI) put a key into a path-style URL.
    return "/" + BUCKET + "/" + urllib.parse.quote(key, safe="/~")


def verify(port, method, path, headers, key, token):
    problems = []
    if path != expected_path(key):
        problems.append(f"path {path!r}, want {expected_path(key)!r}")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/"
                     r"aws4_request, SignedHeaders=([a-z0-9;-]+), "
                     r"Signature=([0-9a-f]{64})", headers.get("authorization", ""))
    if not m:
        return problems + [f"malformed Authorization {headers.get('authorization')!r}"]
    key_id, day, region, signed, signature = m.groups()
    signed = signed.split(";")
    want = {"host", "x-amz-content-sha256", "x-amz-date"}
    if token:
        want.add("x-amz-security-token")
        if headers.get("x-amz-security-token") != token:
            problems.append("x-amz-security-token is not the session token")
    if not want <= set(signed):
        problems.append(f"SignedHeaders {signed} lacks {sorted(want - set(signed))}")
    if key_id != ACCESS_KEY or region != REGION:
        problems.append(f"credential scope {key_id}/{region}")
    stamp = headers.get("x-amz-date", "")
    when = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
    if abs((datetime.datetime.utcnow() - when).total_seconds()) > 120 or day != stamp[:8]:
        problems.append(f"x-amz-date {stamp} is not current")

    def botocore_signature(url_path):
        request = AWSRequest(method=method, url=f"http://127.0.0.1:{port}{url_path}",
                             headers={h: headers[h] for h in signed})
        request.context["timestamp"] = stamp
        auth = S3SigV4Auth(Credentials(ACCESS_KEY, SECRET_KEY, token or None), "s3", REGION)
        canonical = auth.canonical_request(request)
        return auth.signature(auth.string_to_sign(request, canonical), request)

    if botocore_signature(expected_path(key)) != signature:
        problems.append("signature differs from botocore's")
    if botocore_signature(expected_path(key) + "x") == signature:
        problems.append("a tampered path verifies too: the check is vacuous")
    return problems


def main():
    tool = sys.argv[1]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sent = run_capture(tool, port, None) + run_capture(tool, port, TOKEN)
    server.shutdown()
    if len(captured) != len(sent):
        raise SystemExit(f"sigv4_check: captured {len(captured)} requests, want {len(sent)}")
    failed = 0
    stamps = {}
    for (method, path, headers), (key, token) in zip(captured, sent):
        problems = verify(port, method, path, headers, key, token)
        stamps.setdefault((key, token), []).append(headers.get("x-amz-date"))
        if problems:
            failed += 1
            print(f"FAIL {key!r} token={bool(token)}: " + "; ".join(problems))
    # Two reads a second apart on one source: each signed at its own time.
    stale = [k for k, s in stamps.items() if len(set(s)) != 2]
    if stale:
        failed += 1
        print(f"FAIL the second read reused the first one's signature: {stale}")
    print(f"sigv4_check: {len(captured) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
