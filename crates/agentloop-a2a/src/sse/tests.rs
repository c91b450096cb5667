use super::*;

fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut parser = SseParser::new(1 << 20);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(parser.push(chunk).unwrap());
    }
    events
}

fn event(data: &str) -> SseEvent {
    SseEvent { event: "message".into(), data: data.into(), id: None, retry: None }
}

#[test]
fn single_and_multi_line_data() {
    let events = parse_all(&[b"data: one\n\ndata: a\ndata:b\ndata:  c\n\n"]);
    assert_eq!(events, vec![event("one"), event("a\nb\n c")]);
}

#[test]
fn every_line_ending_and_splits_anywhere() {
    let text: &[u8] = b"data: x\r\n\r\ndata: y\r\rdata: z\n\n";
    let whole = parse_all(&[text]);
    assert_eq!(whole, vec![event("x"), event("y"), event("z")]);
    // The same bytes in every two-way split, and byte by byte.
    for cut in 0..text.len() {
        assert_eq!(parse_all(&[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
    }
    let bytes: Vec<&[u8]> = text.chunks(1).collect();
    assert_eq!(parse_all(&bytes), whole);
}

#[test]
fn comments_keep_alives_and_unknown_fields_are_ignored() {
    let events = parse_all(&[b": keep-alive\n\n:ping\nfoo: bar\ndata: real\n\n"]);
    assert_eq!(events, vec![event("real")]);
}

#[test]
fn event_names_ids_and_retry() {
    let events = parse_all(&[b"event: error\nid: 7\nretry: 1500\ndata: {}\n\ndata: next\n\n"]);
    assert_eq!(
        events,
        vec![
            SseEvent {
                event: "error".into(),
                data: "{}".into(),
                id: Some("7".into()),
                retry: Some(1500)
            },
            // The id is remembered; the name and retry are per event.
            SseEvent {
                event: "message".into(),
                data: "next".into(),
                id: Some("7".into()),
                retry: None
            },
        ]
    );
}

#[test]
fn an_event_without_data_is_not_dispatched_but_its_id_is_kept() {
    let mut parser = SseParser::new(1024);
    assert!(parser.push(b"id: 3\nevent: x\n\n").unwrap().is_empty());
    assert_eq!(parser.last_event_id(), Some("3"));
    let events = parser.push(b"data: d\n\n").unwrap();
    assert_eq!(events[0].event, "message");
    assert_eq!(events[0].id.as_deref(), Some("3"));
}

#[test]
fn a_field_without_colon_and_an_empty_data_line() {
    let events = parse_all(&[b"data\n\ndata:\ndata\n\n"]);
    assert_eq!(events, vec![event(""), event("\n")]);
}

#[test]
fn a_leading_byte_order_mark_is_dropped_once() {
    let events = parse_all(&[b"\xef\xbb\xbfdata: a\n\n"]);
    assert_eq!(events, vec![event("a")]);
}

#[test]
fn an_unfinished_event_is_not_dispatched() {
    assert!(parse_all(&[b"data: half"]).is_empty());
    assert!(parse_all(&[b"data: half\n"]).is_empty());
}

#[test]
fn an_id_with_nul_is_ignored() {
    let events = parse_all(&[b"id: 1\n\nid: a\0b\ndata: x\n\n"]);
    assert_eq!(events[0].id.as_deref(), Some("1"));
}

#[test]
fn events_are_bounded() {
    let mut parser = SseParser::new(16);
    assert_eq!(parser.push(b"data: 0123456789abcdef\n"), Err(SseError::TooLarge(16)));
    // Many small lines add up too.
    let mut parser = SseParser::new(16);
    assert_eq!(parser.push(b"data: 0123\ndata: 4567\ndata: 89ab\n"), Err(SseError::TooLarge(16)));
    // A line with no end is bounded as it grows.
    let mut parser = SseParser::new(16);
    assert!(parser.push(b"data: 0123").is_ok());
    assert_eq!(parser.push(b"456789abcdef"), Err(SseError::TooLarge(16)));
    // Each event starts from zero.
    let mut parser = SseParser::new(16);
    for _ in 0..10 {
        assert_eq!(parser.push(b"data: 0123\n\n").unwrap().len(), 1);
    }
}

#[test]
fn invalid_utf8_is_an_error() {
    let mut parser = SseParser::new(1024);
    assert_eq!(parser.push(b"data: \xff\n"), Err(SseError::NotUtf8));
}
