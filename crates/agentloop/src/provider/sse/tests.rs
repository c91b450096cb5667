#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::message::{FinishReason, Message, Reasoning, Role, ToolCall, Usage};
use crate::provider::ResponseAssembler;
use futures::{stream, StreamExt};

/// Echoes each event as `name|data` text and needs an event named `end` to finish cleanly.
#[derive(Default)]
struct Echo {
    ended: bool,
}

impl StreamDecoder for Echo {
    fn decode(
        &mut self,
        event: &str,
        data: &str,
        out: &mut Vec<StreamChunk>,
    ) -> Result<(), ProviderError> {
        if data == "bad" {
            return Err(ProviderError::protocol("bad data", data));
        }
        self.ended |= event == "end";
        out.push(StreamChunk::TextDelta { text: format!("{event}|{data}") });
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<StreamChunk>) -> Result<(), ProviderError> {
        if self.ended {
            out.push(StreamChunk::Finish { reason: FinishReason::Stop });
            Ok(())
        } else {
            Err(ProviderError::Network { message: "cut short".into() })
        }
    }
}

fn from_pieces(pieces: &[&[u8]]) -> impl Stream<Item = Result<Bytes, String>> + Send + 'static {
    let items: Vec<Result<Bytes, String>> =
        pieces.iter().map(|p| Ok(Bytes::copy_from_slice(p))).collect();
    stream::iter(items)
}

async fn run<S>(bytes: S) -> Vec<Result<StreamChunk, ProviderError>>
where
    S: Stream<Item = Result<Bytes, String>> + Send + 'static,
{
    chunk_stream(bytes, Duration::from_secs(5), Box::<Echo>::default(), |e| {
        ProviderError::Network { message: e }
    })
    .collect()
    .await
}

fn text(chunk: &Result<StreamChunk, ProviderError>) -> String {
    match chunk {
        Ok(StreamChunk::TextDelta { text }) => text.clone(),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn events_split_anywhere_decode_with_their_names() {
    let whole = "data: one\n\nevent: response.created\ndata: {\"a\":1}\n\n: keep-alive\n\r\ndata: multi\ndata: line\r\n\r\nevent: end\ndata: x\n\n";
    // Every split point of the byte stream gives the same events.
    for split in 0..whole.len() {
        let (a, b) = whole.as_bytes().split_at(split);
        let out = run(from_pieces(&[a, b])).await;
        let texts: Vec<String> = out.iter().map(text).collect();
        assert_eq!(
            texts,
            [
                "|one",
                "response.created|{\"a\":1}",
                "|multi\nline",
                "end|x",
                "Ok(Finish { reason: Stop })"
            ],
            "split at {split}"
        );
    }
}

#[tokio::test]
async fn a_stream_without_its_terminal_event_fails_after_what_it_delivered() {
    let out = run(from_pieces(&[b"data: one\n\n"])).await;
    assert_eq!(text(&out[0]), "|one");
    assert_eq!(out[1], Err(ProviderError::Network { message: "cut short".into() }));
    assert_eq!(out.len(), 2);
}

#[tokio::test]
async fn a_decoder_error_ends_the_stream() {
    let out = run(from_pieces(&[b"data: bad\n\ndata: more\n\n"])).await;
    assert_eq!(out.len(), 1);
    assert!(matches!(&out[0], Err(ProviderError::Protocol { excerpt, .. }) if excerpt == "bad"));
}

#[tokio::test]
async fn a_transport_error_is_mapped_and_ends_the_stream() {
    let items: Vec<Result<Bytes, String>> = vec![
        Ok(Bytes::from_static(b"data: one\n\n")),
        Err("connection reset".into()),
        Ok(Bytes::from_static(b"data: two\n\n")),
    ];
    let out = run(stream::iter(items)).await;
    assert_eq!(text(&out[0]), "|one");
    assert_eq!(out[1], Err(ProviderError::Network { message: "connection reset".into() }));
    assert_eq!(out.len(), 2);
}

#[tokio::test]
async fn bytes_that_are_not_utf8_are_a_protocol_error() {
    let out = run(from_pieces(&[b"data: one\n\n", b"data: \xff\xfe\n\n"])).await;
    assert_eq!(text(&out[0]), "|one");
    assert!(
        matches!(&out[1], Err(ProviderError::Protocol { message, .. }) if message.contains("UTF-8")),
        "{out:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn silence_longer_than_the_idle_timeout_is_a_timeout() {
    let first = stream::iter(vec![Ok::<_, String>(Bytes::from_static(b"data: one\n\n"))]);
    let bytes = first.chain(stream::pending());
    let started = tokio::time::Instant::now();
    let out: Vec<_> =
        chunk_stream(bytes, Duration::from_secs(3), Box::<Echo>::default(), |e: String| {
            ProviderError::Network { message: e }
        })
        .collect()
        .await;
    assert_eq!(text(&out[0]), "|one");
    assert!(matches!(&out[1], Err(ProviderError::Timeout { .. })), "{out:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(3));
}

#[test]
fn a_whole_response_streams_back_into_itself() {
    let response = ModelResponse {
        message: Message {
            role: Role::Assistant,
            content: vec![
                Part::Reasoning(Reasoning {
                    text: "think".into(),
                    opaque: Some(serde_json::json!({"id": "rs_1"})),
                }),
                Part::text("Hello"),
                Part::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "add".into(),
                    arguments: "{}".into(),
                }),
            ],
        },
        finish_reason: FinishReason::ToolCalls,
        usage: Usage { input: 3, output: 4, cached_input: 1, reasoning: 2, cache_write_input: 0 },
        id: Some("resp_1".into()),
        model: Some("gpt-test-2025".into()),
        provider: None,
    };
    let mut assembler = ResponseAssembler::default();
    for chunk in response_chunks(response.clone()) {
        assembler.push(chunk).unwrap();
    }
    assert_eq!(assembler.finish(), response);
}

/// Parsed events: (name, data).
type Events = Vec<(String, String)>;

/// Every event of `whole` pushed in two pieces split at every point: (name, data) pairs and
/// the end's verdict.
fn parse_split(whole: &[u8]) -> Vec<(Events, bool)> {
    (0..=whole.len())
        .map(|split| {
            let mut parser = super::parse::SseParser::default();
            let mut events = Vec::new();
            for piece in [&whole[..split], &whole[split..]] {
                parser.push(piece);
                while let Some(event) = parser.next_event() {
                    event.unwrap();
                    events.push((parser.name().to_owned(), parser.data().to_owned()));
                }
            }
            let ok = parser.finish().is_ok();
            (events, ok)
        })
        .collect()
}

#[test]
fn the_parser_follows_the_event_stream_rules() {
    let pairs = |list: &[(&str, &str)]| -> Events {
        list.iter().map(|(a, b)| ((*a).to_owned(), (*b).to_owned())).collect()
    };
    let cases: Vec<(&[u8], Events)> = vec![
        // A byte-order mark opens the stream; CR, LF and CRLF all end lines.
        (
            "\u{feff}data: a\r\rdata:b\n\ndata:  c\r\n\r\n".as_bytes(),
            pairs(&[("", "a"), ("", "b"), ("", " c")]),
        ),
        // Comments, fields without a colon, unknown fields, `id`, `retry`.
        (b": hi\ndata\nfoo: bar\nid: 7\nretry: 10\ndata: x\n\n", pairs(&[("", "\nx")])),
        // No data: no event (and its type is forgotten); `message` is the default type.
        (
            b"event: a\n\nevent: message\ndata: y\n\nevent: b\ndata: z\n\n",
            pairs(&[("", "y"), ("b", "z")]),
        ),
        // An unfinished event at the end is dropped.
        (b"data: done\n\ndata: cut", pairs(&[("", "done")])),
        // A byte-order mark later in the stream is data.
        ("data: \u{feff}\n\n".as_bytes(), pairs(&[("", "\u{feff}")])),
    ];
    for (whole, expected) in cases {
        for (split, (events, ok)) in parse_split(whole).into_iter().enumerate() {
            assert_eq!(events, expected, "{:?} split at {split}", String::from_utf8_lossy(whole));
            assert!(ok);
        }
    }
    // Bytes that are not UTF-8 at the very end (even a cut byte-order mark) are an error.
    assert!(parse_split(b"data: a\n\n\xe2\x82")
        .iter()
        .all(|(events, ok)| events.len() == 1 && !ok));
    assert!(parse_split(b"\xef\xbb").iter().all(|(events, ok)| events.is_empty() && !ok));
}

fn limited<S>(bytes: S, limits: StreamLimits) -> ChunkStream
where
    S: Stream<Item = Result<Bytes, String>> + Send + Unpin + 'static,
{
    let idle = Duration::from_secs(5);
    let timer = Box::pin(tokio::time::sleep(idle));
    chunk_stream_with_timer(bytes, idle, limits, timer, Box::<Echo>::default(), |e| {
        ProviderError::Network { message: e }
    })
}

#[tokio::test]
async fn cr_only_line_endings_keep_the_last_event() {
    // Lines ended by CR alone, and no LF can follow the last one: the stream's end ends it.
    let out = run(from_pieces(&[b"data: one\r\r", b"event: end\rdata: two\r\r"])).await;
    let texts: Vec<String> = out.iter().map(text).collect();
    assert_eq!(texts[..2], ["|one", "end|two"], "{out:?}");
    assert!(matches!(out[2], Ok(StreamChunk::Finish { .. })), "{out:?}");
}

#[tokio::test]
async fn a_long_line_in_small_pieces_is_read_in_linear_time() {
    // 4 MiB of one line in 1 KiB pieces: searching the whole line again with each piece
    // scanned about 8 GiB.
    let mut pieces: Vec<Vec<u8>> = vec![b"data: ".to_vec()];
    pieces.extend(std::iter::repeat_n(vec![b'x'; 1024], 4096));
    pieces.push(b"\n\nevent: end\ndata: .\n\n".to_vec());
    let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    let started = std::time::Instant::now();
    let out = run(from_pieces(&slices)).await;
    assert_eq!(text(&out[0]).len(), 1 + 4 * 1024 * 1024);
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test]
async fn lines_events_and_responses_over_their_limits_are_errors_that_name_them() {
    let limits = StreamLimits { max_line_bytes: 100, ..StreamLimits::default() };
    // A line over the limit fails while it is still arriving, before its end.
    let long = from_pieces(&[b"data: ", &[b'x'; 64], &[b'x'; 64]]).chain(stream::pending());
    let out: Vec<_> = limited(Box::pin(long), limits).collect().await;
    let message = format!("{:?}", out.last().unwrap());
    assert!(message.contains("max_line_bytes"), "{message}");

    let limits = StreamLimits { max_event_bytes: 100, ..StreamLimits::default() };
    let lines: Vec<u8> = b"data: 0123456789\n".repeat(10);
    let out: Vec<_> = limited(from_pieces(&[&lines]), limits).collect().await;
    let message = format!("{:?}", out.last().unwrap());
    assert!(message.contains("max_event_bytes"), "{message}");

    let limits = StreamLimits { max_response_bytes: 1000, ..StreamLimits::default() };
    let events: Vec<u8> = b"data: 0123456789\n\n".repeat(100);
    let out: Vec<_> = limited(from_pieces(&[&events]), limits).collect().await;
    let message = format!("{:?}", out.last().unwrap());
    assert!(message.contains("max_response_bytes"), "{message}");
}

#[tokio::test(start_paused = true)]
async fn bytes_that_complete_no_event_do_not_keep_the_stream_alive() {
    // One byte a second, forever: never an event. The idle timeout is per event.
    let trickle = stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Some((Ok::<_, String>(Bytes::from_static(b"x")), ()))
    });
    let started = tokio::time::Instant::now();
    let out: Vec<_> =
        chunk_stream(trickle, Duration::from_secs(3), Box::<Echo>::default(), |e: String| {
            ProviderError::Network { message: e }
        })
        .collect()
        .await;
    assert!(matches!(out.last(), Some(Err(ProviderError::Timeout { .. }))), "{out:?}");
    assert_eq!(started.elapsed(), Duration::from_secs(3));

    // Events that go on past the overall deadline end it too.
    let events = stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        Some((Ok::<_, String>(Bytes::from_static(b"data: more\n\n")), ()))
    });
    let limits = StreamLimits { max_duration: Duration::from_secs(10), ..StreamLimits::default() };
    let out: Vec<_> = limited(Box::pin(events), limits).collect().await;
    let message = format!("{:?}", out.last().unwrap());
    assert!(message.contains("max_duration"), "{message}");
}
