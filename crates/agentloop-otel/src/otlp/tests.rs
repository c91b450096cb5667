#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::span::{IdSource, Kind};
use crate::testing::{self, json};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::json;

fn context(ids: &IdSource, sampled: bool) -> SpanContext {
    SpanContext { trace_id: ids.trace_id(), span_id: ids.span_id(), sampled }
}

fn decode(bytes: &[u8]) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest::decode(bytes).unwrap()
}

#[test]
fn every_field_decodes_as_the_project_s_own_types_read_it() {
    let ids = IdSource::default();
    let caller = context(&ids, true);
    let own = SpanContext { trace_id: caller.trace_id, ..context(&ids, true) };
    let parent = Some((caller.span_id, true));
    let mut root =
        SpanRecord::new(own, &["invoke_agent", " a"], Kind::Internal, parent, vec![9, 9]);
    root.start = 1_700_000_000_000_000_001;
    let end = 1_700_000_000_500_000_002;
    let long = "é".repeat(10_000); // a 20,000-byte value: three-byte lengths throughout
    root.set("s", "text");
    root.set("owned", &long);
    root.set("i", -5i64);
    root.set("big", i64::MAX);
    root.set("f", 0.25f64);
    root.set("b", true);
    root.set("no", false);
    root.set("list", Value::TextList("stop"));
    root.set_encoded(&attributes(&[("shared", "model".into())]));
    let mut writer = Writer::new(&mut root.body);
    writer.event(
        1_700_000_000_100_000_000,
        "agentloop.model.retry",
        &[("agentloop.retry.attempt", 2i64.into()), ("exception.message", Value::Text(&long))],
    );
    let first = context(&ids, true);
    root.link(&first);
    root.status = Status::Error("it broke".into());
    let chat_context = context(&ids, false);
    let under_root = Some((root.context.span_id, false));
    let mut chat = SpanRecord::new(chat_context, &["chat m"], Kind::Client, under_root, Vec::new());
    chat.status = Status::Ok;
    let preamble = Preamble::new(&[("service.name", "svc".into()), ("n", Value::Int(3))]);
    let mut buf = Vec::new();
    encode_spans(&preamble, &[(root.clone(), end), (chat.clone(), end)], &mut buf);
    let request = decode(&buf);
    assert_eq!(request.resource_spans.len(), 1);
    let resource_spans = &request.resource_spans[0];
    let resource = resource_spans.resource.as_ref().unwrap();
    assert_eq!(testing::attribute(&resource.attributes, "service.name"), Some(json!("svc")));
    assert_eq!(testing::attribute(&resource.attributes, "n"), Some(json!(3)));
    let scope = &resource_spans.scope_spans[0];
    assert_eq!(scope.scope.as_ref().unwrap().name, "agentloop");
    let [a, b] = &scope.spans[..] else { panic!("{:?}", scope.spans) };

    assert_eq!(a.trace_id, caller.trace_id.to_vec());
    assert_eq!(a.span_id, root.context.span_id.to_vec());
    assert_eq!(a.parent_span_id, caller.span_id.to_vec());
    assert_eq!(a.name, "invoke_agent a");
    assert_eq!(a.kind, 1);
    assert_eq!((a.start_time_unix_nano, a.end_time_unix_nano), (root.start, end));
    let values: Vec<(String, serde_json::Value)> =
        a.attributes.iter().map(|kv| (kv.key.clone(), json(kv.value.as_ref().unwrap()))).collect();
    assert_eq!(
        values,
        vec![
            ("s".to_owned(), json!("text")),
            ("owned".to_owned(), json!(long)),
            ("i".to_owned(), json!(-5)),
            ("big".to_owned(), json!(i64::MAX)),
            ("f".to_owned(), json!(0.25)),
            ("b".to_owned(), json!(true)),
            ("no".to_owned(), json!(false)),
            ("list".to_owned(), json!(["stop"])),
            ("shared".to_owned(), json!("model")),
        ]
    );
    assert_eq!(a.events.len(), 1);
    assert_eq!(a.events[0].name, "agentloop.model.retry");
    assert_eq!(a.events[0].time_unix_nano, 1_700_000_000_100_000_000);
    assert_eq!(
        testing::attribute(&a.events[0].attributes, "agentloop.retry.attempt"),
        Some(json!(2))
    );
    assert_eq!(testing::attribute(&a.events[0].attributes, "exception.message"), Some(json!(long)));
    assert_eq!(a.links.len(), 1);
    assert_eq!(a.links[0].trace_id, first.trace_id.to_vec());
    assert_eq!(a.links[0].span_id, first.span_id.to_vec());
    let status = a.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (2, "it broke"));
    // Sampled, with a remote parent.
    assert_eq!(a.flags, 0x301);

    // An unsampled span records nothing of its own (it is not exported; encoded here only
    // to show that its fields were not written).
    assert!(chat.body.is_empty());
    assert_eq!(b.name, "");
    assert!(b.attributes.is_empty() && b.events.is_empty() && b.links.is_empty());
    assert_eq!(b.status.as_ref().unwrap().code, 1);
}

#[test]
fn a_span_without_a_parent_or_status_has_neither() {
    let ids = IdSource::default();
    let span = SpanRecord::new(context(&ids, true), &["x"], Kind::Client, None, Vec::new());
    let mut buf = vec![1, 2, 3];
    encode_spans(&Preamble::new(&[]), &[(span, 5)], &mut buf);
    let request = decode(&buf);
    let decoded = &request.resource_spans[0].scope_spans[0].spans[0];
    assert!(decoded.parent_span_id.is_empty());
    assert!(decoded.status.is_none());
    assert_eq!((decoded.kind, decoded.flags, decoded.end_time_unix_nano), (3, 0x101, 5));
}

#[test]
fn an_error_status_without_a_message_is_only_its_code() {
    let ids = IdSource::default();
    let under = Some((ids.span_id(), false));
    let mut span = SpanRecord::new(context(&ids, true), &["x"], Kind::Internal, under, Vec::new());
    span.fail("timeout", "");
    let mut buf = Vec::new();
    encode_spans(&Preamble::new(&[]), &[(span, 5)], &mut buf);
    let request = decode(&buf);
    let decoded = &request.resource_spans[0].scope_spans[0].spans[0];
    let status = decoded.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (2, ""));
    assert_eq!(testing::attribute(&decoded.attributes, "error.type"), Some(json!("timeout")));
    assert_eq!(decoded.flags, 0x101);
}

#[test]
fn a_batch_of_many_spans_keeps_them_all() {
    let ids = IdSource::default();
    let spans: Vec<(SpanRecord, u64)> = (0..600)
        .map(|n| {
            let name = n.to_string();
            let mut span =
                SpanRecord::new(context(&ids, true), &[&name], Kind::Internal, None, Vec::new());
            span.set("n", i64::from(n));
            (span, 1)
        })
        .collect();
    let mut buf = Vec::new();
    encode_spans(&Preamble::new(&[]), &spans, &mut buf);
    let request = decode(&buf);
    let decoded = &request.resource_spans[0].scope_spans[0].spans;
    assert_eq!(decoded.len(), 600);
    for (n, span) in decoded.iter().enumerate() {
        assert_eq!(span.name, n.to_string());
        assert_eq!(testing::attribute(&span.attributes, "n"), Some(json!(n)));
    }
}

#[test]
fn traceparents_are_read_and_written_as_w3c_says() {
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let context = SpanContext::parse(tp).unwrap();
    assert!(context.sampled);
    assert_eq!(context.traceparent(), tp);
    let unsampled = SpanContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
    assert!(!unsampled.unwrap().sampled);
    // A later version with more fields is read as version 00.
    assert!(
        SpanContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x").is_some()
    );
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
    ] {
        assert!(SpanContext::parse(bad).is_none(), "{bad}");
    }
}

#[test]
fn ids_do_not_repeat() {
    let ids = IdSource::default();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..100_000 {
        assert!(seen.insert(ids.span_id()));
    }
    assert_ne!(ids.trace_id(), ids.trace_id());
}

#[test]
fn a_ratio_samples_that_share_of_traces_and_parents_decide_for_their_children() {
    use crate::Sampling;
    let ids = IdSource::default();
    let sampled =
        (0..20_000).filter(|_| Sampling::Ratio(0.25).sampled(None, &ids.trace_id())).count();
    assert!((4_500..5_500).contains(&sampled), "{sampled} of 20000");
    let id = ids.trace_id();
    assert!(Sampling::Ratio(1.0).sampled(None, &id));
    assert!(!Sampling::Ratio(0.0).sampled(None, &id));
    assert!(!Sampling::ParentBasedAlwaysOn.sampled(Some(false), &id));
    assert!(Sampling::ParentBasedAlwaysOff.sampled(Some(true), &id));
    assert!(Sampling::ParentBasedAlwaysOn.sampled(None, &id));
    assert!(!Sampling::ParentBasedRatio(0.0).sampled(None, &id));
    assert!(Sampling::AlwaysOn.sampled(Some(false), &id));
}

#[test]
fn varint_lengths_match_the_writer() {
    for value in [0u64, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152, u64::MAX] {
        let mut buf = Vec::new();
        Writer::new(&mut buf).varint(value);
        assert_eq!(varint_len_u64(value), buf.len(), "{value}");
    }
}

#[test]
fn a_message_of_any_size_gets_a_minimal_length() {
    for size in [0usize, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
        for room in 1..=3 {
            let mut buf = Vec::new();
            Writer::new(&mut buf)
                .message(1, room, |w| w.buf.extend(std::iter::repeat_n(7u8, size)));
            let mut expected = Vec::new();
            Writer::new(&mut expected).bytes(1, &vec![7u8; size]);
            assert_eq!(buf, expected, "{size} bytes in room {room}");
        }
    }
}

#[test]
fn a_batch_is_framed_in_place_with_minimal_lengths() {
    let ids = IdSource::default();
    let preamble = Preamble::new(&[("service.name", "svc".into())]);
    // Batches whose lengths cross every varint width the header's lengths can take.
    for spans in [0usize, 1, 2, 60, 700] {
        let mut buf = vec![0; preamble.head_room()];
        for n in 0..spans {
            let name = "s".repeat(n % 300);
            let span =
                SpanRecord::new(context(&ids, true), &[&name], Kind::Internal, None, Vec::new());
            span_entry(&span, 9, &mut buf);
        }
        let entries = buf[preamble.head_room()..].to_vec();
        let start = frame(&preamble, &mut buf).unwrap();
        let request = decode(&buf[start..]);
        let decoded = &request.resource_spans[0].scope_spans[0];
        assert_eq!(decoded.spans.len(), spans);
        assert_eq!(decoded.scope.as_ref().unwrap().name, "agentloop");
        // The same bytes as the request written whole, nested messages with minimal lengths.
        let mut whole = Vec::new();
        Writer::new(&mut whole).message(1, 1, |w| {
            w.bytes(1, &preamble.resource);
            w.message(2, 1, |w| {
                w.message(1, 1, |w| w.string(1, "agentloop"));
                w.buf.extend_from_slice(&entries);
            });
        });
        assert_eq!(buf[start..], whole[..], "{spans} spans");
    }
    let mut short = vec![0; preamble.head_room() - 1];
    assert_eq!(frame(&preamble, &mut short), None);
}

/// An attribute value the strategies make (owned; `Value` borrows).
#[derive(Debug, Clone)]
enum Owned {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    TextList(String),
}

impl Owned {
    fn value(&self) -> Value<'_> {
        match self {
            Owned::Text(text) => Value::Text(text),
            Owned::Int(i) => Value::Int(*i),
            Owned::Float(f) => Value::Float(*f),
            Owned::Bool(b) => Value::Bool(*b),
            Owned::TextList(text) => Value::TextList(text),
        }
    }

    /// Whether `decoded` is this value as the project's own types read it (floats by bits:
    /// NaN too).
    fn is(&self, decoded: &testing::AnyValue) -> bool {
        use testing::any_value::Value as V;
        match (self, &decoded.value) {
            (Owned::Text(text), Some(V::StringValue(s))) => s == text,
            (Owned::Int(i), Some(V::IntValue(d))) => d == i,
            (Owned::Float(f), Some(V::DoubleValue(d))) => d.to_bits() == f.to_bits(),
            (Owned::Bool(b), Some(V::BoolValue(d))) => d == b,
            (Owned::TextList(text), Some(V::ArrayValue(array))) => {
                matches!(&array.values[..], [one] if Owned::Text(text.clone()).is(one))
            }
            _ => false,
        }
    }
}

/// Any text: short, around the one-byte length limits, or long enough for three-byte ones.
fn any_text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        6 => ".{0,40}",
        2 => proptest::collection::vec(any::<char>(), 100..140)
            .prop_map(|chars| chars.into_iter().collect::<String>()),
        1 => (0usize..40, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(4_000 + n * 13)),
    ]
}

fn any_value() -> impl proptest::strategy::Strategy<Value = Owned> {
    use proptest::prelude::*;
    prop_oneof![
        any_text().prop_map(Owned::Text),
        any::<i64>().prop_map(Owned::Int),
        any::<f64>().prop_map(Owned::Float),
        any::<bool>().prop_map(Owned::Bool),
        any_text().prop_map(Owned::TextList),
    ]
}

fn any_attributes() -> impl proptest::strategy::Strategy<Value = Vec<(String, Owned)>> {
    proptest::collection::vec((any_text(), any_value()), 0..12)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// Whatever a model, a tool or a caller puts in a span (names, attribute keys and
    /// values, event attributes, an error message), the request is one the collector's own
    /// types decode back to exactly that.
    #[test]
    fn any_span_content_decodes_back_as_it_was_set(
        name in proptest::collection::vec(any_text(), 0..3),
        attributes in any_attributes(),
        event_name in any_text(),
        event_attributes in any_attributes(),
        error in proptest::option::of(any_text()),
        sampled in proptest::prelude::any::<bool>(),
    ) {
        let ids = IdSource::default();
        let parts: Vec<&str> = name.iter().map(String::as_str).collect();
        let parent = Some((ids.span_id(), sampled));
        let mut span = SpanRecord::new(context(&ids, true), &parts, Kind::Client, parent, Vec::new());
        for (key, value) in &attributes {
            span.set(key, value.value());
        }
        let borrowed: Vec<(&str, Value<'_>)> =
            event_attributes.iter().map(|(k, v)| (k.as_str(), v.value())).collect();
        span.event(&event_name, &borrowed);
        if let Some(error) = &error {
            span.fail("some_kind", error.clone());
        }
        let mut buf = Vec::new();
        encode_spans(&Preamble::new(&[]), &[(span.clone(), span.start + 1)], &mut buf);
        let request = decode(&buf);
        let decoded = &request.resource_spans[0].scope_spans[0].spans[0];
        proptest::prop_assert_eq!(&decoded.name, &name.concat());
        proptest::prop_assert_eq!(decoded.span_id.as_slice(), span.context.span_id.as_slice());
        let expected = attributes.len() + usize::from(error.is_some());
        proptest::prop_assert_eq!(decoded.attributes.len(), expected);
        for ((key, value), kv) in attributes.iter().zip(&decoded.attributes) {
            proptest::prop_assert_eq!(&kv.key, key);
            proptest::prop_assert!(value.is(kv.value.as_ref().unwrap()), "{key:?}: {value:?}");
        }
        let event = &decoded.events[0];
        proptest::prop_assert_eq!(&event.name, &event_name);
        proptest::prop_assert_eq!(event.attributes.len(), event_attributes.len());
        for ((key, value), kv) in event_attributes.iter().zip(&event.attributes) {
            proptest::prop_assert_eq!(&kv.key, key);
            proptest::prop_assert!(value.is(kv.value.as_ref().unwrap()), "{key:?}: {value:?}");
        }
        let status = decoded.status.as_ref();
        match &error {
            Some(error) => {
                proptest::prop_assert_eq!(status.map(|s| s.code), Some(2));
                proptest::prop_assert_eq!(status.map(|s| s.message.as_str()), Some(error.as_str()));
            }
            None => proptest::prop_assert!(status.is_none()),
        }
    }

    /// A `traceparent` from outside (an A2A caller, a run's configuration) never panics the
    /// parser; what it accepts names valid ids and is written back as it was read.
    #[test]
    fn any_traceparent_is_read_or_refused(
        text in proptest::prop_oneof![
            ".{0,80}",
            "[0-9a-fA-F]{2}-[0-9a-fA-F]{32}-[0-9a-fA-F]{16}-[0-9a-fA-F]{2}(-.{0,8})?",
            "[0-9a-f-]{50,60}",
        ],
    ) {
        if let Some(parsed) = SpanContext::parse(&text) {
            proptest::prop_assert!(parsed.trace_id != [0; 16] && parsed.span_id != [0; 8]);
            proptest::prop_assert_eq!(SpanContext::parse(&parsed.traceparent()), Some(parsed));
        }
    }

    /// Every context is written as a `traceparent` that reads back as that context.
    #[test]
    fn every_context_round_trips_through_its_traceparent(
        trace in proptest::prelude::any::<[u8; 16]>(),
        span in proptest::prelude::any::<[u8; 8]>(),
        sampled in proptest::prelude::any::<bool>(),
    ) {
        proptest::prop_assume!(trace != [0; 16] && span != [0; 8]);
        let context = SpanContext { trace_id: trace, span_id: span, sampled };
        let text = context.traceparent();
        proptest::prop_assert_eq!(text.len(), 55);
        proptest::prop_assert_eq!(SpanContext::parse(&text), Some(context));
    }
}
