//! (feature `testing`) A [`SpanSink`] that keeps what it receives, decoded with the
//! OpenTelemetry project's own protobuf types (`opentelemetry-proto`): what a collector
//! would see.

use crate::export::SpanSink;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
pub use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
pub use opentelemetry_proto::tonic::resource::v1::Resource;
pub use opentelemetry_proto::tonic::trace::v1::{span, status, Span, Status};
use prost::Message;
use std::sync::{Arc, Mutex, PoisonError};

/// Keeps the spans of every request it gets; clones share them.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    received: Arc<Mutex<Received>>,
}

#[derive(Debug, Default)]
struct Received {
    spans: Vec<Span>,
    resources: Vec<Resource>,
    requests: usize,
}

impl MemorySink {
    /// The spans received so far, in the order they were exported.
    pub fn spans(&self) -> Vec<Span> {
        self.lock().spans.clone()
    }

    /// The resource of each request (`service.name`, …).
    pub fn resources(&self) -> Vec<Resource> {
        self.lock().resources.clone()
    }

    /// How many requests came.
    pub fn requests(&self) -> usize {
        self.lock().requests
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Received> {
        self.received.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SpanSink for MemorySink {
    fn export(&mut self, request: &[u8], spans: usize) -> Result<(), String> {
        let request =
            ExportTraceServiceRequest::decode(request).map_err(|e| format!("not OTLP: {e}"))?;
        let mut received = self.lock();
        received.requests += 1;
        let mut count = 0;
        for resource_spans in request.resource_spans {
            received.resources.extend(resource_spans.resource);
            for scope in resource_spans.scope_spans {
                count += scope.spans.len();
                received.spans.extend(scope.spans);
            }
        }
        if count == spans {
            Ok(())
        } else {
            Err(format!("the request holds {count} spans, not {spans}"))
        }
    }
}

/// The value of attribute `key`, if set, as JSON (`"text"`, `1`, `0.5`, `true`, `["a"]`).
pub fn attribute(attributes: &[KeyValue], key: &str) -> Option<serde_json::Value> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()).map(json)
}

/// An attribute value as JSON.
pub fn json(value: &AnyValue) -> serde_json::Value {
    use serde_json::Value as J;
    match &value.value {
        Some(any_value::Value::StringValue(s)) => J::String(s.clone()),
        Some(any_value::Value::BoolValue(b)) => J::Bool(*b),
        Some(any_value::Value::IntValue(i)) => J::from(*i),
        Some(any_value::Value::DoubleValue(f)) => J::from(*f),
        Some(any_value::Value::ArrayValue(a)) => J::Array(a.values.iter().map(json).collect()),
        Some(any_value::Value::BytesValue(b)) => J::from(b.clone()),
        Some(any_value::Value::KvlistValue(list)) => J::Object(
            list.values
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(J::Null, json)))
                .collect(),
        ),
        // A reference into a dictionary agentloop never sends, or no value.
        _ => J::Null,
    }
}

/// Lower-case hex of an id.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    crate::span::hex(&mut out, bytes);
    out
}
