//! The model's tokenizer, built from GGUF metadata: byte-level BPE (`tokenizer.ggml.model` =
//! `gpt2`) with the pre-tokenizer named by `tokenizer.ggml.pre`, or SentencePiece (`llama`,
//! `spm`: Gemma, Llama 2 and the like); control tokens matched whole in the input, and a
//! streaming decoder that only ever emits complete UTF-8.

use crate::gguf::Metadata;
use crate::LocalError;
use std::collections::HashMap;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

mod spm;
use spm::{Spm, TYPE_CONTROL, TYPE_UNUSED, TYPE_USER_DEFINED};

/// Token texts that end a turn when the vocabulary has them as control tokens.
const END_OF_TURN: [&str; 5] =
    ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"];

const REGEX_LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const REGEX_QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// How text becomes ids.
enum Encoder {
    /// Byte-level BPE (Hugging Face's `tokenizers` pipeline).
    Bpe(Box<tokenizers::Tokenizer>),
    /// SentencePiece, as llama.cpp runs it.
    Spm(Box<Spm>),
}

/// A tokenizer read from a GGUF file (byte-level BPE or SentencePiece).
pub struct Tokenizer {
    encoder: Encoder,
    /// The bytes each token stands for.
    bytes: Vec<Vec<u8>>,
    /// Whether each token is a control token (never produced from plain text by a grammar).
    control: Vec<bool>,
    ids: HashMap<String, u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    stop: Vec<u32>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.bytes.len())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF file's metadata.
    pub(crate) fn from_metadata(metadata: &Metadata<'_>) -> Result<Self, LocalError> {
        let model = metadata.str("tokenizer.ggml.model")?;
        if model != "gpt2" && model != "llama" {
            return Err(LocalError::UnsupportedTokenizer(format!(
                "tokenizer.ggml.model is {model:?}; byte-level BPE (\"gpt2\") and SentencePiece \
                 (\"llama\") are implemented"
            )));
        }
        let tokens = metadata.strings("tokenizer.ggml.tokens")?;
        let count = u32::try_from(tokens.len()).map_err(|_| LocalError::Metadata {
            key: "tokenizer.ggml.tokens".into(),
            message: "too many tokens".into(),
        })?;
        let types = metadata.opt_ints("tokenizer.ggml.token_type")?.unwrap_or_default();
        if !types.is_empty() && types.len() != tokens.len() {
            return Err(LocalError::Metadata {
                key: "tokenizer.ggml.token_type".into(),
                message: format!("{} types for {} tokens", types.len(), tokens.len()),
            });
        }
        if model == "llama" {
            return Self::sentencepiece(&tokens, &types, metadata, count);
        }
        let merges = metadata
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|merge| {
                merge.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())).ok_or_else(|| {
                    LocalError::Metadata {
                        key: "tokenizer.ggml.merges".into(),
                        message: format!("merge {merge:?} is not two tokens separated by a space"),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pre = metadata.opt_str("tokenizer.ggml.pre")?.unwrap_or("default");
        Self::build(&tokens, &types, merges, pre, metadata, count)
    }

    fn build(
        tokens: &[&str],
        types: &[i64],
        merges: Vec<(String, String)>,
        pre: &str,
        metadata: &Metadata<'_>,
        count: u32,
    ) -> Result<Self, LocalError> {
        let vocab: Vocab =
            tokens.iter().zip(0..count).map(|(t, id)| ((*t).to_owned(), id)).collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| LocalError::Tokenizer(format!("cannot build the BPE model: {e}")))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);
        let byte_level = |trim| ByteLevel::new(false, trim, true);
        let split = |regex: &str| {
            Split::new(
                SplitPattern::Regex(regex.to_owned()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| LocalError::Tokenizer(format!("pre-tokenizer regex: {e}")))
        };
        let pre_tokenizer: PreTokenizerWrapper = match pre {
            "default" | "gpt2" | "gpt-2" => byte_level(true).into(),
            "smollm" | "starcoder" | "refact" | "codeshell" | "exaone" | "minerva"
            | "command-r" => {
                Sequence::new(vec![Digits::new(true).into(), byte_level(true).into()]).into()
            }
            "llama3" | "llama-bpe" | "smaug-bpe" | "falcon3" | "pixtral" => Sequence::new(vec![
                split(REGEX_LLAMA3)?.into(),
                ByteLevel::new(false, true, false).into(),
            ])
            .into(),
            "qwen2" | "deepseek-r1-qwen" => {
                inner
                    .with_normalizer(Some(NFC))
                    .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
                Sequence::new(vec![
                    split(REGEX_QWEN2)?.into(),
                    ByteLevel::new(false, false, false).into(),
                ])
                .into()
            }
            other => {
                return Err(LocalError::UnsupportedTokenizer(format!(
                    "pre-tokenizer {other:?} (tokenizer.ggml.pre) is not implemented"
                )))
            }
        };
        inner.with_pre_tokenizer(Some(pre_tokenizer));

        let decode_table = byte_decoder();
        let mut bytes = Vec::with_capacity(tokens.len());
        let mut control = Vec::with_capacity(tokens.len());
        let mut added = Vec::new();
        for (index, token) in tokens.iter().enumerate() {
            let kind = types.get(index).copied().unwrap_or(1);
            let whole = kind == TYPE_CONTROL || kind == TYPE_USER_DEFINED;
            control.push(kind == TYPE_CONTROL);
            if whole {
                // Matched whole in the input, decoded as written.
                added.push(AddedToken::from((*token).to_owned(), kind == TYPE_CONTROL));
                bytes.push(token.as_bytes().to_vec());
            } else {
                bytes.push(byte_level_bytes(token, &decode_table));
            }
        }
        inner.add_special_tokens(added).map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        Self::finish(Encoder::Bpe(Box::new(inner)), tokens, bytes, control, metadata, count)
    }

    /// A SentencePiece tokenizer: the scores, `add_space_prefix` (default true, as in
    /// llama.cpp) and the byte tokens come from the metadata.
    fn sentencepiece(
        tokens: &[&str],
        types: &[i64],
        metadata: &Metadata<'_>,
        count: u32,
    ) -> Result<Self, LocalError> {
        let scores = metadata.opt_floats("tokenizer.ggml.scores")?.unwrap_or_default();
        if scores.len() != tokens.len() {
            return Err(LocalError::Metadata {
                key: "tokenizer.ggml.scores".into(),
                message: format!("{} scores for {} tokens", scores.len(), tokens.len()),
            });
        }
        let types: Vec<i64> = if types.is_empty() { vec![1; tokens.len()] } else { types.to_vec() };
        let unknown = Self::token_key(metadata, "tokenizer.ggml.unknown_token_id", count)?;
        let add_space_prefix =
            metadata.opt_bool("tokenizer.ggml.add_space_prefix")?.unwrap_or(true);
        let spm = Spm::new(tokens, &scores, &types, unknown, add_space_prefix);
        let bytes = tokens.iter().zip(&types).map(|(t, &kind)| spm::token_bytes(t, kind)).collect();
        let control =
            types.iter().map(|&kind| kind == TYPE_CONTROL || kind == TYPE_UNUSED).collect();
        Self::finish(Encoder::Spm(Box::new(spm)), tokens, bytes, control, metadata, count)
    }

    /// A token id from the metadata, checked against the vocabulary.
    fn token_key(
        metadata: &Metadata<'_>,
        key: &str,
        count: u32,
    ) -> Result<Option<u32>, LocalError> {
        match metadata.opt_u32(key)? {
            Some(id) if id >= count => Err(LocalError::Metadata {
                key: key.to_owned(),
                message: format!("token id {id} is outside the vocabulary of {count}"),
            }),
            other => Ok(other),
        }
    }

    /// The parts every tokenizer has: the id map, BOS / EOS and the stop tokens.
    fn finish(
        encoder: Encoder,
        tokens: &[&str],
        bytes: Vec<Vec<u8>>,
        control: Vec<bool>,
        metadata: &Metadata<'_>,
        count: u32,
    ) -> Result<Self, LocalError> {
        let ids: HashMap<String, u32> =
            tokens.iter().zip(0..count).map(|(t, id)| ((*t).to_owned(), id)).collect();
        let bos = Self::token_key(metadata, "tokenizer.ggml.bos_token_id", count)?;
        let eos = Self::token_key(metadata, "tokenizer.ggml.eos_token_id", count)?;
        let mut stop: Vec<u32> = eos.into_iter().collect();
        for text in END_OF_TURN {
            if let Some(&id) = ids.get(text) {
                if control.get(id as usize).copied().unwrap_or(false) && !stop.contains(&id) {
                    stop.push(id);
                }
            }
        }
        Ok(Self { encoder, bytes, control, ids, bos, eos, stop })
    }

    /// Token ids of `text`. Control tokens written in the text (e.g. `<|im_start|>`) become
    /// their single ids.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        match &self.encoder {
            Encoder::Bpe(inner) => {
                let encoding = inner
                    .encode_fast(text, false)
                    .map_err(|e| LocalError::Tokenizer(format!("cannot encode: {e}")))?;
                Ok(encoding.get_ids().to_vec())
            }
            Encoder::Spm(spm) => {
                let mut ids = Vec::with_capacity(text.len() / 3 + 1);
                spm.encode(text, &mut ids)
                    .map_err(|e| LocalError::Tokenizer(format!("cannot encode: {e}")))?;
                Ok(ids)
            }
        }
    }

    /// The text of `ids` (bytes that are not UTF-8 shown as U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        let mut bytes = Vec::new();
        for &id in ids {
            bytes.extend_from_slice(self.token_bytes(id));
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes a token stands for (empty for an id outside the vocabulary).
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map(Vec::as_slice).unwrap_or_default()
    }

    /// Whether a token is a control token (`<|im_start|>` and the like).
    pub fn is_control(&self, id: u32) -> bool {
        self.control.get(id as usize).copied().unwrap_or(false)
    }

    /// The id of a token, by its vocabulary entry.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.ids.get(token).copied()
    }

    /// The vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.bytes.len()
    }

    /// The beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// The tokens that end generation: EOS and the end-of-turn control tokens.
    pub fn stop_tokens(&self) -> &[u32] {
        &self.stop
    }
}

/// GPT-2's byte-level alphabet: the printable bytes stand for themselves, the others for the
/// code points from U+0100 up, in order. Returns the reverse map (char to byte).
fn byte_decoder() -> HashMap<char, u8> {
    let mut map = HashMap::with_capacity(256);
    let mut next = 256u32;
    for byte in 0..=255u8 {
        let printable = matches!(byte, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let code = if printable {
            u32::from(byte)
        } else {
            let code = next;
            next += 1;
            code
        };
        if let Some(c) = char::from_u32(code) {
            map.insert(c, byte);
        }
    }
    map
}

/// The bytes of a byte-level token; characters outside the alphabet stand for their UTF-8.
fn byte_level_bytes(token: &str, table: &HashMap<char, u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(token.len());
    for c in token.chars() {
        match table.get(&c) {
            Some(&byte) => out.push(byte),
            None => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out
}

/// Turns a stream of token bytes into text, holding back a UTF-8 sequence split across tokens
/// until it is complete. Invalid bytes become U+FFFD.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// Adds bytes and returns the text that is complete so far (possibly empty).
    pub fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(text) => {
                    out.push_str(text);
                    self.pending.clear();
                    return out;
                }
                Err(error) => {
                    let valid = error.valid_up_to();
                    out.push_str(&String::from_utf8_lossy(&self.pending[..valid]));
                    match error.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
    }

    /// Ends the stream: the text of any bytes held back (an incomplete sequence as U+FFFD).
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

#[cfg(test)]
mod tests;
