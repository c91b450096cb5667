use super::*;
use crate::gguf::Metadata;
use crate::tokenizer::{Tokenizer, Utf8Stream};
use candle_core::quantized::gguf_file::{self, Value};

/// A tiny SentencePiece vocabulary: control tokens, a user-defined newline and two-space
/// token, the 256 byte tokens, and a few scored pieces.
fn tiny_metadata(add_space_prefix: bool) -> HashMap<String, Value> {
    let mut entries: Vec<(String, f32, i32)> = vec![
        ("<pad>".into(), -1000.0, 3),
        ("<eos>".into(), -1000.0, 3),
        ("<bos>".into(), -1000.0, 3),
        ("<unk>".into(), -1000.0, 3),
        ("<start_of_turn>".into(), -1000.0, 3),
        ("<end_of_turn>".into(), -1000.0, 3),
        ("\n".into(), -1000.0, 4),
        ("  ".into(), -1000.0, 4),
    ];
    entries.extend((0..=255u8).map(|b| (format!("<0x{b:02X}>"), 0.0, 6)));
    // Higher scores merge first: "ll" before "he", "▁w" before "or".
    let pieces: [(&str, f32); 18] = [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -3.0),
        ("l", -4.0),
        ("o", -5.0),
        ("w", -6.0),
        ("r", -7.0),
        ("d", -8.0),
        ("ll", -10.0),
        ("he", -11.0),
        ("hell", -12.0),
        ("hello", -13.0),
        ("▁w", -14.0),
        ("or", -15.0),
        ("▁wor", -16.0),
        ("▁world", -17.0),
        ("ld", -18.0),
        ("é", -19.0),
    ];
    entries.extend(pieces.iter().map(|(p, s)| ((*p).to_owned(), *s, 1)));
    let string = |s: &str| Value::String(s.to_owned());
    HashMap::from([
        ("tokenizer.ggml.model".to_owned(), string("llama")),
        (
            "tokenizer.ggml.tokens".to_owned(),
            Value::Array(entries.iter().map(|(t, _, _)| string(t)).collect()),
        ),
        (
            "tokenizer.ggml.scores".to_owned(),
            Value::Array(entries.iter().map(|(_, s, _)| Value::F32(*s)).collect()),
        ),
        (
            "tokenizer.ggml.token_type".to_owned(),
            Value::Array(entries.iter().map(|(_, _, k)| Value::I32(*k)).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".to_owned(), Value::U32(2)),
        ("tokenizer.ggml.eos_token_id".to_owned(), Value::U32(1)),
        ("tokenizer.ggml.unknown_token_id".to_owned(), Value::U32(3)),
        ("tokenizer.ggml.add_space_prefix".to_owned(), Value::Bool(add_space_prefix)),
    ])
}

fn tiny(add_space_prefix: bool) -> Tokenizer {
    Tokenizer::from_metadata(&Metadata(&tiny_metadata(add_space_prefix))).unwrap()
}

fn pieces(tokenizer: &Tokenizer, ids: &[u32]) -> Vec<String> {
    ids.iter().map(|&id| String::from_utf8_lossy(tokenizer.token_bytes(id)).into_owned()).collect()
}

const SAMPLES: [&str; 9] = [
    "hello world",
    "Hello, World! 12345 + 67 = 12412",
    "  leading spaces\n\n\ttabs and\r\nnewlines  ",
    "unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🦀🎉 and 𝕏",
    "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"17 * 23\"}}\n</tool_call>",
    "<start_of_turn>user\nhello<end_of_turn>\n<start_of_turn>model\n",
    "\u{0}\u{7}\u{1b}[0m",
    "",
    "a",
];

#[test]
fn merges_take_the_highest_score_first() {
    let tokenizer = tiny(false);
    let id = |t: &str| tokenizer.token_id(t).unwrap();
    assert_eq!(tokenizer.encode("hello").unwrap(), vec![id("hello")]);
    assert_eq!(tokenizer.encode("hello world").unwrap(), vec![id("hello"), id("▁world")]);
    // "▁w" (-14) merges before "or" (-15); then "▁wor", "ld" and "▁world".
    assert_eq!(pieces(&tokenizer, &tokenizer.encode(" world").unwrap()), vec![" world"]);
    // "he" (-11) merges before "ld" (-18); "el" is no piece.
    assert_eq!(tokenizer.encode("held").unwrap(), vec![id("he"), id("ld")]);
    // In "hello", "ll" (-10) comes first, then "he", "hell" and "hello".
    assert_eq!(tokenizer.encode("hellod").unwrap(), vec![id("hello"), id("d")]);
}

#[test]
fn unknown_characters_fall_back_to_bytes() {
    let tokenizer = tiny(false);
    let ids = tokenizer.encode("hé!").unwrap();
    assert_eq!(
        ids,
        vec![tokenizer.token_id("h").unwrap(), tokenizer.token_id("é").unwrap(), 8 + 0x21]
    );
    let ids = tokenizer.encode("日").unwrap();
    assert_eq!(ids, "日".bytes().map(|b| 8 + u32::from(b)).collect::<Vec<_>>());
    assert_eq!(tokenizer.token_bytes(8 + 0xE6), &[0xE6]);
    assert_eq!(tokenizer.decode(&ids), "日");
    // Streaming: the three byte tokens of one character make text only together.
    let mut stream = Utf8Stream::default();
    let texts: Vec<String> = ids.iter().map(|&id| stream.push(tokenizer.token_bytes(id))).collect();
    assert_eq!(texts, vec!["", "", "日"]);
}

#[test]
fn round_trips_any_text() {
    for prefix in [false, true] {
        let tokenizer = tiny(prefix);
        for text in SAMPLES {
            let ids = tokenizer.encode(text).unwrap();
            let decoded = tokenizer.decode(&ids);
            if prefix {
                // The space put before each piece of text is decoded with it.
                assert_eq!(decoded.replace(' ', ""), text.replace(' ', ""), "{text:?}");
            } else {
                assert_eq!(decoded, text, "{text:?}");
            }
        }
    }
}

#[test]
fn control_and_user_defined_tokens_are_matched_whole() {
    let tokenizer = tiny(false);
    let ids = tokenizer.encode("<start_of_turn>user\nhello<end_of_turn>\n").unwrap();
    assert_eq!(ids[0], 4);
    assert_eq!(ids[ids.len() - 2..], [5, 6]);
    assert!(ids.contains(&tokenizer.token_id("hello").unwrap()));
    assert!(tokenizer.is_control(4) && tokenizer.is_control(5));
    assert!(!tokenizer.is_control(6), "a user-defined token is text");
    assert_eq!(tokenizer.stop_tokens(), &[1, 5], "EOS and <end_of_turn>");
    assert_eq!(tokenizer.bos(), Some(2));
    // Two spaces are one user-defined token; text spelling a byte token stays text.
    assert_eq!(tokenizer.encode("  ").unwrap(), vec![7]);
    let ids = tokenizer.encode("<0x41>").unwrap();
    assert_eq!(tokenizer.decode(&ids), "<0x41>");
    assert!(ids.len() > 1);
}

#[test]
fn token_bytes_are_the_decoded_text() {
    let tokenizer = tiny(false);
    let bytes = |t: &str| tokenizer.token_bytes(tokenizer.token_id(t).unwrap()).to_vec();
    assert_eq!(bytes("▁world"), b" world");
    assert_eq!(bytes("▁"), b" ");
    assert_eq!(bytes("<0x0A>"), b"\n");
    assert_eq!(bytes("<0xFF>"), [0xFF]);
    assert_eq!(bytes("\n"), b"\n");
    assert_eq!(bytes("<end_of_turn>"), b"<end_of_turn>");
}

#[test]
fn add_space_prefix_marks_the_start_of_each_piece_of_text() {
    let tokenizer = tiny(true);
    let id = |t: &str| tokenizer.token_id(t).unwrap();
    assert_eq!(tokenizer.encode("world").unwrap(), vec![id("▁world")]);
    assert_eq!(tokenizer.encode("<end_of_turn>world").unwrap(), vec![5, id("▁world")]);
    let plain = tiny(false);
    assert_eq!(plain.encode("world").unwrap()[0], plain.token_id("w").unwrap());
}

#[test]
fn bad_metadata_is_rejected() {
    let mut metadata = tiny_metadata(false);
    metadata.insert("tokenizer.ggml.scores".into(), Value::Array(vec![Value::F32(0.0)]));
    let error = Tokenizer::from_metadata(&Metadata(&metadata)).unwrap_err();
    assert!(error.to_string().contains("tokenizer.ggml.scores"), "{error}");
    let mut metadata = tiny_metadata(false);
    metadata.insert("tokenizer.ggml.model".into(), Value::String("martian".into()));
    let error = Tokenizer::from_metadata(&Metadata(&metadata)).unwrap_err();
    assert!(matches!(error, crate::LocalError::UnsupportedTokenizer(_)), "{error}");
}

#[test]
fn byte_token_names_parse() {
    assert_eq!(parse_byte_token("<0x00>"), Some(0));
    assert_eq!(parse_byte_token("<0xfF>"), Some(255));
    assert_eq!(parse_byte_token("<0x100>"), None);
    assert_eq!(parse_byte_token("0x41"), None);
}

/// Gemma 3's ids for these strings, from the SentencePiece library (`sentencepiece` 0.2, BPE
/// with byte fallback) over a model built from this file's vocabulary, scores and types
/// (user-defined pieces with their spaces as `▁`, as in Gemma's own model file).
const GEMMA3_REFERENCE: &[(&str, &[u32])] = &[
    ("Hello world", &[9259, 1902]),
    ("What is 17 multiplied by 23?", &[3689, 563, 236743, 236770, 236832, 37764, 684, 236743, 236778, 236800, 236881]),
    ("  leading spaces\n\n\ttabs and\r\nnewlines  ", &[138, 26016, 9952, 108, 255968, 39218, 532, 251, 107, 208697, 138]),
    ("unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🦀🎉 and 𝕏", &[70926, 236787, 534, 7869, 844, 515, 4010, 671, 2192, 120362, 33443, 236764, 33375, 238582, 236945, 95830, 236764, 64334, 236743, 248714, 242061, 532, 236743, 478, 395, 387, 381]),
    ("code: fn main() { println!(\"{}\", 1 + 2); } // it's done, we'll see, I'm sure", &[3970, 236787, 12751, 1689, 825, 642, 32374, 183228, 236743, 236770, 900, 236743, 236778, 626, 682, 973, 625, 236789, 236751, 3028, 236764, 692, 236789, 859, 1460, 236764, 564, 236789, 236757, 2889]),
    ("<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"17 * 23\"}}\n</tool_call>", &[236820, 13205, 236779, 6639, 236813, 107, 14937, 1201, 1083, 623, 47552, 827, 623, 33178, 1083, 3714, 25733, 1083, 623, 236770, 236832, 808, 236743, 236778, 236800, 127096, 107, 954, 13205, 236779, 6639, 236813]),
    ("The quick brown fox jumps over the lazy dog. 1234567890", &[818, 3823, 8864, 37423, 38167, 1024, 506, 31770, 4799, 236761, 236743, 236770, 236778, 236800, 236812, 236810, 236825, 236832, 236828, 236819, 236771]),
    ("a", &[236746]),
    ("\u{0}\u{7} control chars \u{1b}[0m", &[238, 245, 2256, 56256, 236743, 27648, 236771, 236757]),
    ("<table><tr><td>x</td></tr></table>    four spaces", &[168, 173, 175, 236781, 183, 181, 176, 140, 19025, 9952]),
];

/// The cached Gemma 3 file (`AGENTLOOP_GEMMA_MODEL`, else the cache), if it exists.
pub(crate) fn gemma_path() -> Option<std::path::PathBuf> {
    let path =
        std::env::var_os("AGENTLOOP_GEMMA_MODEL").map(std::path::PathBuf::from).or_else(|| {
            let dir = crate::fetch::default_cache_dir().ok()?;
            Some(dir.join(crate::fetch::GEMMA3_270M.file_name))
        })?;
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipped: no Gemma 3 file at {} (set AGENTLOOP_GEMMA_MODEL)", path.display());
        None
    }
}

/// The Gemma 3 file's tokenizer (header only: fast), when the file is there.
fn gemma_tokenizer() -> Option<Tokenizer> {
    let path = gemma_path()?;
    let mut file = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    Some(Tokenizer::from_metadata(&Metadata(&content.metadata)).unwrap())
}

#[test]
fn gemma3_matches_sentencepiece() {
    let Some(tokenizer) = gemma_tokenizer() else { return };
    for (text, expected) in GEMMA3_REFERENCE {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(&ids, expected, "{text:?}");
        assert_eq!(tokenizer.decode(&ids), *text);
    }
}

#[test]
fn gemma3_known_ids() {
    let Some(tokenizer) = gemma_tokenizer() else { return };
    assert_eq!(tokenizer.vocab_size(), 262_144);
    assert_eq!((tokenizer.bos(), tokenizer.eos()), (Some(2), Some(1)));
    assert_eq!(tokenizer.stop_tokens(), &[1, 106], "<eos> and <end_of_turn>");
    let ids = tokenizer
        .encode("<bos><start_of_turn>user\nHello world<end_of_turn>\n<start_of_turn>model\n")
        .unwrap();
    assert_eq!(ids, vec![2, 105, 2364, 107, 9259, 1902, 106, 107, 105, 4368, 107]);
    assert_eq!(
        tokenizer.decode(&ids),
        "<bos><start_of_turn>user\nHello world<end_of_turn>\n<start_of_turn>model\n"
    );
    assert_eq!(tokenizer.token_bytes(1902), b" world");
    assert_eq!(tokenizer.token_bytes(248), b"\n", "<0x0A>");
    assert!(tokenizer.is_control(106) && !tokenizer.is_control(107));
}
