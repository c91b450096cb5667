#!/usr/bin/env bash
# Installs the Python side of the OTLP receiver used by the `otel` tests (scripts/otel/receiver.py):
# the OpenTelemetry project's own generated protobuf classes and gRPC services
# (opentelemetry-proto), the protobuf runtime and grpcio (for the gRPC receiver), in a venv kept outside the repository. Nothing here decodes OTLP by hand.
# Idempotent: a second run with the same versions only prints the interpreter.
# Prints `AGENTLOOP_OTEL_PYTHON=<venv python>` as its last line; export it to run the tests:
#   eval "$(scripts/otel/install.sh | tail -n 1 | sed 's/^/export /')"
set -euo pipefail

OTEL_PROTO_VERSION="1.45.2"
GRPCIO_VERSION="1.76.0"
PYTHON="${PYTHON:-python3}"
CACHE="${AGENTLOOP_CACHE:-$HOME/.cache/agentloop}"
VENV="$CACHE/otel-venv-proto${OTEL_PROTO_VERSION}-grpcio${GRPCIO_VERSION}"
MARKER="$VENV/.agentloop-installed"

if [ ! -f "$MARKER" ]; then
    mkdir -p "$CACHE"
    if [ ! -x "$VENV/bin/python" ]; then
        "$PYTHON" -m venv "$VENV" >&2
    fi
    # opentelemetry-proto pins the protobuf range it was generated for; pip picks it.
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "opentelemetry-proto==${OTEL_PROTO_VERSION}" "protobuf" "grpcio==${GRPCIO_VERSION}" >&2
    # Fails (and leaves no marker) if the generated classes are not importable.
    "$VENV/bin/python" -c "
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
import grpc
trace_service_pb2.ExportTraceServiceRequest(); metrics_service_pb2.ExportMetricsServiceRequest()
" >&2
    touch "$MARKER"
fi

echo "AGENTLOOP_OTEL_PYTHON=$VENV/bin/python"
