use super::*;
use candle_core::quantized::gguf_file::{self, Value};

/// A tiny byte-level vocabulary: three control tokens, the 256 byte symbols, a few merges.
fn tiny_metadata(pre: &str) -> HashMap<String, Value> {
    let table = byte_decoder();
    let mut symbols: Vec<(u8, char)> = table.iter().map(|(&c, &b)| (b, c)).collect();
    symbols.sort();
    let mut tokens: Vec<String> =
        vec!["<|endoftext|>".into(), "<|im_start|>".into(), "<|im_end|>".into()];
    tokens.extend(symbols.iter().map(|(_, c)| c.to_string()));
    let merges = ["h e", "l l", "he ll", "hell o", "Ġ w", "Ġw o"];
    tokens.extend(["he", "ll", "hell", "hello", "Ġw", "Ġwo"].map(String::from));
    let mut types = vec![3i32; 3];
    types.resize(tokens.len(), 1);
    let string = |s: &str| Value::String(s.to_owned());
    HashMap::from([
        ("tokenizer.ggml.model".to_owned(), string("gpt2")),
        ("tokenizer.ggml.pre".to_owned(), string(pre)),
        (
            "tokenizer.ggml.tokens".to_owned(),
            Value::Array(tokens.iter().map(|t| string(t)).collect()),
        ),
        (
            "tokenizer.ggml.token_type".to_owned(),
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.merges".to_owned(),
            Value::Array(merges.iter().map(|m| string(m)).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".to_owned(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".to_owned(), Value::U32(2)),
    ])
}

fn tiny(pre: &str) -> Tokenizer {
    Tokenizer::from_metadata(&Metadata(&tiny_metadata(pre))).unwrap()
}

const SAMPLES: [&str; 8] = [
    "hello world",
    "Hello, World! 12345 + 67 = 12412",
    "  leading spaces\n\n\ttabs and\r\nnewlines  ",
    "unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🦀🎉 and 𝕏",
    "code: fn main() { println!(\"{}\", 1 + 2); } // it's done, we'll see, I'm sure",
    "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"17 * 23\"}}\n</tool_call>",
    "",
    "a",
];

#[test]
fn tiny_round_trips_any_text() {
    let tokenizer = tiny("smollm");
    for text in SAMPLES {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(tokenizer.decode(&ids), text);
    }
    assert_eq!(tokenizer.encode("hello").unwrap(), vec![tokenizer.token_id("hello").unwrap()]);
    assert_eq!(
        tokenizer.encode(" wo").unwrap(),
        vec![tokenizer.token_id("Ġwo").unwrap()],
        "merges apply across the byte-level space"
    );
}

#[test]
fn control_tokens_are_matched_whole_and_stop() {
    let tokenizer = tiny("gpt2");
    let ids = tokenizer.encode("<|im_start|>hello<|im_end|>").unwrap();
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    assert_eq!(ids.len(), 3);
    assert!(tokenizer.is_control(1));
    assert!(!tokenizer.is_control(3));
    assert_eq!(tokenizer.stop_tokens(), &[2, 0]);
    assert_eq!(tokenizer.decode(&ids), "<|im_start|>hello<|im_end|>");
}

#[test]
fn smollm_splits_digits() {
    let tokenizer = tiny("smollm");
    let ids = tokenizer.encode("2024").unwrap();
    assert_eq!(ids.len(), 4);
}

#[test]
fn unknown_pre_tokenizer_and_model_are_rejected() {
    let error = Tokenizer::from_metadata(&Metadata(&tiny_metadata("martian"))).unwrap_err();
    assert!(error.to_string().contains("martian"), "{error}");
    let mut metadata = tiny_metadata("gpt2");
    metadata.insert("tokenizer.ggml.model".into(), Value::String("rwkv".into()));
    let error = Tokenizer::from_metadata(&Metadata(&metadata)).unwrap_err();
    assert!(matches!(error, LocalError::UnsupportedTokenizer(_)), "{error}");
    let mut metadata = tiny_metadata("gpt2");
    metadata.insert("tokenizer.ggml.eos_token_id".into(), Value::U32(1_000_000));
    let error = Tokenizer::from_metadata(&Metadata(&metadata)).unwrap_err();
    assert!(error.to_string().contains("eos_token_id"), "{error}");
    let mut metadata = tiny_metadata("gpt2");
    metadata.remove("tokenizer.ggml.merges");
    let error = Tokenizer::from_metadata(&Metadata(&metadata)).unwrap_err();
    assert!(error.to_string().contains("tokenizer.ggml.merges: missing"), "{error}");
}

#[test]
fn utf8_stream_holds_back_split_characters() {
    let mut stream = Utf8Stream::default();
    let crab = "🦀".as_bytes();
    assert_eq!(stream.push(b"a"), "a");
    assert_eq!(stream.push(&crab[..1]), "");
    assert_eq!(stream.push(&crab[1..3]), "");
    assert_eq!(stream.push(&[crab[3], b'b']), "🦀b");
    let e = "é".as_bytes();
    assert_eq!(stream.push(&[b'x', e[0]]), "x");
    assert_eq!(stream.push(&e[1..]), "é");
    assert_eq!(stream.finish(), "");
}

#[test]
fn utf8_stream_replaces_invalid_bytes() {
    let mut stream = Utf8Stream::default();
    assert_eq!(stream.push(&[b'a', 0xFF, b'b']), "a\u{FFFD}b");
    assert_eq!(stream.push(&[0xE6, 0x97]), "");
    assert_eq!(stream.finish(), "\u{FFFD}");
}

/// The real model's metadata (header only: fast), when the file is there.
fn model_tokenizer() -> Option<Tokenizer> {
    let path = crate::test_model_path()?;
    let mut file = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    Some(Tokenizer::from_metadata(&Metadata(&content.metadata)).unwrap())
}

/// A straightforward BPE (lowest-ranked merge first) over SmolLM2's pre-tokenization
/// (each digit alone, then GPT-2's regex), to check the library pipeline against.
fn reference_encode(
    text: &str,
    tokenizer: &Tokenizer,
    ranks: &HashMap<(String, String), usize>,
) -> Vec<u32> {
    let gpt2 = fancy_regex::Regex::new(
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",
    )
    .unwrap();
    let mut encoder = HashMap::new();
    for (c, b) in byte_decoder() {
        encoder.insert(b, c);
    }
    let mut pieces = Vec::new();
    // Digits alone, the rest between them through the regex.
    let mut rest = String::new();
    let flush = |rest: &mut String, pieces: &mut Vec<String>| {
        for m in gpt2.find_iter(rest) {
            pieces.push(m.unwrap().as_str().to_owned());
        }
        rest.clear();
    };
    for c in text.chars() {
        if c.is_numeric() {
            flush(&mut rest, &mut pieces);
            pieces.push(c.to_string());
        } else {
            rest.push(c);
        }
    }
    flush(&mut rest, &mut pieces);
    let mut ids = Vec::new();
    for piece in pieces {
        let mut symbols: Vec<String> = piece.bytes().map(|b| encoder[&b].to_string()).collect();
        loop {
            let best = (0..symbols.len().saturating_sub(1))
                .filter_map(|i| {
                    ranks.get(&(symbols[i].clone(), symbols[i + 1].clone())).map(|r| (*r, i))
                })
                .min();
            let Some((_, i)) = best else { break };
            let merged = format!("{}{}", symbols[i], symbols[i + 1]);
            symbols.splice(i..i + 2, [merged]);
        }
        ids.extend(symbols.iter().map(|s| tokenizer.token_id(s).unwrap()));
    }
    ids
}

#[test]
fn smollm2_matches_a_reference_bpe() {
    let Some(tokenizer) = model_tokenizer() else { return };
    let path = crate::test_model_path().unwrap();
    let mut file = std::fs::File::open(path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let merges = Metadata(&content.metadata).strings("tokenizer.ggml.merges").unwrap();
    let ranks: HashMap<(String, String), usize> = merges
        .iter()
        .enumerate()
        .map(|(rank, m)| {
            let (a, b) = m.split_once(' ').unwrap();
            ((a.to_owned(), b.to_owned()), rank)
        })
        .collect();
    for text in SAMPLES {
        let ids = tokenizer.encode(text).unwrap();
        assert_eq!(ids, reference_encode(text, &tokenizer, &ranks), "{text:?}");
        assert_eq!(tokenizer.decode(&ids), text);
    }
}

#[test]
fn smollm2_known_ids() {
    let Some(tokenizer) = model_tokenizer() else { return };
    assert_eq!(tokenizer.vocab_size(), 49152);
    assert_eq!(tokenizer.encode("<|im_start|>").unwrap(), vec![1]);
    assert_eq!(tokenizer.encode("<|im_end|>").unwrap(), vec![2]);
    assert_eq!(tokenizer.eos(), Some(2));
    assert_eq!(tokenizer.stop_tokens(), &[2, 0]);
    // The byte tokens follow the control tokens in byte order: '!' is 17.
    assert_eq!(tokenizer.encode("!").unwrap(), vec![17]);
    assert_eq!(tokenizer.encode("123").unwrap(), vec![33, 34, 35]);
    let world = tokenizer.token_id("Ġworld").unwrap();
    assert_eq!(tokenizer.encode(" world").unwrap(), vec![world]);
    let ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n").unwrap();
    assert_eq!(ids[0], 1);
    assert!(ids.contains(&2));
    assert_eq!(tokenizer.decode(&ids), "<|im_start|>user\nHi<|im_end|>\n");
}
