#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::span::{attr, IdSource, Kind, SpanEvent, Text};
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
    let mut root =
        SpanRecord::new(context(&ids, true), Text::Static("invoke_agent a"), Kind::Internal);
    root.context.trace_id = caller.trace_id;
    root.parent = Some(caller.span_id);
    root.remote_parent = true;
    root.start = 1_700_000_000_000_000_001;
    root.end = 1_700_000_000_500_000_002;
    let long = "é".repeat(10_000); // a 20,000-byte value: three-byte lengths throughout
    root.attributes = vec![
        attr("s", "text"),
        attr("owned", long.clone()),
        attr("shared", Text::Shared("model".into())),
        attr("i", -5i64),
        attr("big", i64::MAX),
        attr("f", 0.25f64),
        attr("b", true),
        attr("no", false),
        attr("list", Value::TextList(Text::Static("stop"))),
    ];
    root.events.push(SpanEvent {
        name: "agentloop.model.retry",
        time: 1_700_000_000_100_000_000,
        attributes: vec![attr("agentloop.retry.attempt", 2i64)],
    });
    let first = context(&ids, true);
    root.links.push(first);
    root.status = Status::Error("it broke".into());
    let mut chat = SpanRecord::new(context(&ids, false), Text::Static("chat m"), Kind::Client);
    chat.parent = Some(root.context.span_id);
    chat.status = Status::Ok;
    let preamble = Preamble::new(&[
        ("service.name".to_owned(), Value::Text(Text::Static("svc"))),
        ("n".to_owned(), Value::Int(3)),
    ]);
    let mut buf = Vec::new();
    encode_spans(&preamble, &[root.clone(), chat.clone()], &mut buf);
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
    assert_eq!((a.start_time_unix_nano, a.end_time_unix_nano), (root.start, root.end));
    let values: Vec<(String, serde_json::Value)> =
        a.attributes.iter().map(|kv| (kv.key.clone(), json(kv.value.as_ref().unwrap()))).collect();
    assert_eq!(
        values,
        vec![
            ("s".to_owned(), json!("text")),
            ("owned".to_owned(), json!(long)),
            ("shared".to_owned(), json!("model")),
            ("i".to_owned(), json!(-5)),
            ("big".to_owned(), json!(i64::MAX)),
            ("f".to_owned(), json!(0.25)),
            ("b".to_owned(), json!(true)),
            ("no".to_owned(), json!(false)),
            ("list".to_owned(), json!(["stop"])),
        ]
    );
    assert_eq!(a.events.len(), 1);
    assert_eq!(a.events[0].name, "agentloop.model.retry");
    assert_eq!(a.events[0].time_unix_nano, 1_700_000_000_100_000_000);
    assert_eq!(
        testing::attribute(&a.events[0].attributes, "agentloop.retry.attempt"),
        Some(json!(2))
    );
    assert_eq!(a.links.len(), 1);
    assert_eq!(a.links[0].trace_id, first.trace_id.to_vec());
    assert_eq!(a.links[0].span_id, first.span_id.to_vec());
    let status = a.status.as_ref().unwrap();
    assert_eq!((status.code, status.message.as_str()), (2, "it broke"));
    // Sampled, with a remote parent.
    assert_eq!(a.flags, 0x301);

    assert_eq!(b.name, "chat m");
    assert_eq!(b.kind, 3);
    assert_eq!(b.parent_span_id, root.context.span_id.to_vec());
    assert!(b.attributes.is_empty() && b.events.is_empty() && b.links.is_empty());
    assert_eq!(b.status.as_ref().unwrap().code, 1);
    assert_eq!(b.flags, 0x100);
}

#[test]
fn a_span_without_a_parent_or_status_has_neither() {
    let ids = IdSource::default();
    let span = SpanRecord::new(context(&ids, true), Text::Static("x"), Kind::Internal);
    let mut buf = vec![1, 2, 3];
    encode_spans(&Preamble::new(&[]), std::slice::from_ref(&span), &mut buf);
    let request = decode(&buf);
    let decoded = &request.resource_spans[0].scope_spans[0].spans[0];
    assert!(decoded.parent_span_id.is_empty());
    assert!(decoded.status.is_none());
    assert_eq!(decoded.flags, 0x101);
}

#[test]
fn a_batch_of_many_spans_keeps_them_all() {
    let ids = IdSource::default();
    let spans: Vec<SpanRecord> = (0..600)
        .map(|n| {
            let mut span =
                SpanRecord::new(context(&ids, true), Text::Owned(n.to_string()), Kind::Internal);
            span.attributes.push(attr("n", i64::from(n)));
            span
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
