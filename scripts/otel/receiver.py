#!/usr/bin/env python3
"""A small OTLP/HTTP receiver for the agentloop `otel` tests.

It decodes real OTLP/HTTP protobuf with the OpenTelemetry project's own generated classes
(PyPI `opentelemetry-proto`, installed by scripts/otel/install.sh), so what the tests see is
what a collector would see. No OTLP decoding is written here.

    python receiver.py --out spans.jsonl [--metrics-out metrics.jsonl] [--port 0] [--grpc]

Prints `READY http://127.0.0.1:PORT` on stdout once listening; point
OTEL_EXPORTER_OTLP_ENDPOINT at that URL (the exporters append /v1/traces, /v1/metrics).

- POST /v1/traces  (application/x-protobuf, optionally Content-Encoding: gzip):
  every span is appended to --out as one JSON line (fields below), and the empty
  ExportTraceServiceResponse is answered with 200.
- POST /v1/metrics: every data point is appended to --metrics-out (if given) as one JSON line;
  answers ExportMetricsServiceResponse.
- POST /v1/logs: decoded and counted, nothing written; answers ExportLogsServiceResponse.
- Anything else: 404; other content types: 415; undecodable bodies: 400.
- GET /stats: JSON counts of requests, spans and metric points received so far.
- `--grpc`: OTLP over gRPC instead (the TraceService and MetricsService that
  opentelemetry-proto generates, on grpcio), written to the same files.

Span line: {"trace_id", "span_id", "parent_span_id" (hex, "" for a root), "trace_state",
"name", "kind" ("SPAN_KIND_CLIENT" ...), "start_time_unix_nano", "end_time_unix_nano",
"attributes" (flattened to plain JSON values), "status": {"code", "message"},
"events": [{"name", "time_unix_nano", "attributes"}], "links": [{"trace_id", "span_id",
"trace_state", "attributes"}], "resource" (attributes), "scope": {"name", "version"},
"dropped_attributes_count", "dropped_events_count", "dropped_links_count", "flags",
"traceparent" (the request's traceparent header, if the exporter sent one)}.
"""

import argparse
import gzip
import json
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

LOCK = threading.Lock()
STATS = {"trace_requests": 0, "metric_requests": 0, "log_requests": 0, "spans": 0, "metric_points": 0}


def any_value(v):
    """AnyValue -> plain JSON value."""
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, which)


def attrs(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


def span_json(span, resource, scope, traceparent):
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "trace_state": span.trace_state,
        "name": span.name,
        "kind": trace_pb2.Span.SpanKind.Name(span.kind),
        "start_time_unix_nano": span.start_time_unix_nano,
        "end_time_unix_nano": span.end_time_unix_nano,
        "attributes": attrs(span.attributes),
        "status": {
            "code": trace_pb2.Status.StatusCode.Name(span.status.code),
            "message": span.status.message,
        },
        "events": [
            {"name": e.name, "time_unix_nano": e.time_unix_nano, "attributes": attrs(e.attributes)}
            for e in span.events
        ],
        "links": [
            {
                "trace_id": l.trace_id.hex(),
                "span_id": l.span_id.hex(),
                "trace_state": l.trace_state,
                "attributes": attrs(l.attributes),
            }
            for l in span.links
        ],
        "resource": resource,
        "scope": {"name": scope.name, "version": scope.version},
        "dropped_attributes_count": span.dropped_attributes_count,
        "dropped_events_count": span.dropped_events_count,
        "dropped_links_count": span.dropped_links_count,
        "flags": span.flags,
        "traceparent": traceparent,
    }


def metric_points(metric):
    """One JSON object per data point of a Metric (gauge, sum, histogram, exp. histogram, summary)."""
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind) if kind else None
    out = []
    for p in (data.data_points if data is not None else []):
        point = {
            "attributes": attrs(p.attributes),
            "start_time_unix_nano": p.start_time_unix_nano,
            "time_unix_nano": p.time_unix_nano,
        }
        if kind in ("gauge", "sum"):
            point["value"] = getattr(p, p.WhichOneof("value")) if p.WhichOneof("value") else None
        elif kind == "histogram":
            point.update(
                count=p.count,
                sum=p.sum if p.HasField("sum") else None,
                min=p.min if p.HasField("min") else None,
                max=p.max if p.HasField("max") else None,
                bucket_counts=list(p.bucket_counts),
                explicit_bounds=list(p.explicit_bounds),
            )
        elif kind == "exponential_histogram":
            point.update(count=p.count, sum=p.sum if p.HasField("sum") else None, scale=p.scale)
        elif kind == "summary":
            point.update(count=p.count, sum=p.sum)
        out.append(point)
    return kind, out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "agentloop-otlp-receiver"

    def log_message(self, fmt, *args):  # quiet; errors go to stderr below
        pass

    def reply(self, code, body=b"", ctype="application/x-protobuf"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/stats":
            with LOCK:
                body = json.dumps(STATS).encode()
            self.reply(200, body, "application/json")
        else:
            self.reply(404, b"not found", "text/plain")

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            body = gzip.decompress(body)
        elif enc == "deflate":
            body = zlib.decompress(body)
        elif enc not in ("", "identity"):
            raise ValueError(f"unsupported Content-Encoding {enc!r}")
        return body

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        if path not in ("/v1/traces", "/v1/metrics", "/v1/logs"):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.reply(404, b"not found", "text/plain")
            return
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/x-protobuf":
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.reply(415, b"only application/x-protobuf", "text/plain")
            return
        try:
            body = self.read_body()
            if path == "/v1/traces":
                self.traces(body)
                resp = trace_service_pb2.ExportTraceServiceResponse()
            elif path == "/v1/metrics":
                self.metrics(body)
                resp = metrics_service_pb2.ExportMetricsServiceResponse()
            else:
                logs_service_pb2.ExportLogsServiceRequest.FromString(body)
                with LOCK:
                    STATS["log_requests"] += 1
                resp = logs_service_pb2.ExportLogsServiceResponse()
        except Exception as e:  # a malformed body is the sender's bug: say so, loudly
            print(f"receiver: bad {path} request: {e!r}", file=sys.stderr, flush=True)
            self.reply(400, str(e).encode(), "text/plain")
            return
        self.reply(200, resp.SerializeToString())

    def traces(self, body):
        req = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
        record_traces(self.server.out, req, self.headers.get("traceparent"))

    def metrics(self, body):
        req = metrics_service_pb2.ExportMetricsServiceRequest.FromString(body)
        record_metrics(self.server.metrics_out, req)


def record_traces(out, req, traceparent):
    lines = []
    for rs in req.resource_spans:
        resource = attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                lines.append(json.dumps(span_json(span, resource, ss.scope, traceparent)))
    with LOCK:
        STATS["trace_requests"] += 1
        STATS["spans"] += len(lines)
        if lines:
            with open(out, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")


def record_metrics(metrics_out, req):
    lines = []
    for rm in req.resource_metrics:
        resource = attrs(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind, points = metric_points(m)
                for p in points:
                    p.update(name=m.name, unit=m.unit, type=kind, resource=resource,
                             scope={"name": sm.scope.name, "version": sm.scope.version})
                    lines.append(json.dumps(p))
    with LOCK:
        STATS["metric_requests"] += 1
        STATS["metric_points"] += len(lines)
        if lines and metrics_out:
            with open(metrics_out, "a", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")


def serve_grpc(a):
    """OTLP over gRPC (grpcio and the services generated in opentelemetry-proto)."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            meta = dict(context.invocation_metadata())
            record_traces(a.out, request, meta.get("traceparent"))
            return trace_service_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request, context):
            record_metrics(a.metrics_out, request)
            return metrics_service_pb2.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port(f"{a.host}:{a.port}")
    server.start()
    print(f"READY http://{a.host}:{port}", flush=True)
    server.wait_for_termination()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON-lines file the spans are appended to")
    ap.add_argument("--metrics-out", default=None, help="JSON-lines file for metric data points")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--grpc", action="store_true", help="serve OTLP over gRPC instead of HTTP")
    a = ap.parse_args()
    open(a.out, "a").close()
    if a.grpc:
        serve_grpc(a)
        return
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.out, srv.metrics_out = a.out, a.metrics_out
    open(a.out, "a").close()
    print(f"READY http://{a.host}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
