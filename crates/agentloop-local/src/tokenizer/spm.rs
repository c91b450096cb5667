//! SentencePiece (`tokenizer.ggml.model = "llama"`), encoded the way llama.cpp's SPM tokenizer
//! does it: the text is split around the control and user-defined tokens (matched whole,
//! longest first), each remaining piece has its spaces replaced by `▁` (and, with
//! `add_space_prefix`, a `▁` put in front when it follows a special token or starts the text),
//! is split into UTF-8 characters, and the adjacent pair whose concatenation is a token with the
//! highest score is merged until no pair is a token (ties: the leftmost pair). A character that
//! is no token becomes its bytes as `<0xNN>` tokens (byte fallback).
//!
//! As in SentencePiece itself, only normal and user-defined pieces take part in merges: a
//! text that spells a control or byte token (`<0x41>`, `<unused0>`) stays text unless the
//! control token is matched whole.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// GGUF token types, as llama.cpp numbers them.
pub(crate) const TYPE_NORMAL: i64 = 1;
pub(crate) const TYPE_CONTROL: i64 = 3;
pub(crate) const TYPE_USER_DEFINED: i64 = 4;
pub(crate) const TYPE_UNUSED: i64 = 5;
pub(crate) const TYPE_BYTE: i64 = 6;

/// SentencePiece's space marker, U+2581.
const SPACE: char = '\u{2581}';

/// The encoder's tables.
#[derive(Debug)]
pub(crate) struct Spm {
    /// Normal and user-defined pieces (the ones merges may produce) and their ids.
    pieces: HashMap<String, u32>,
    /// Each token's score (higher merges first).
    scores: Vec<f32>,
    /// Control and user-defined tokens, matched whole in the text, by their text.
    specials: HashMap<String, u32>,
    /// The distinct lengths of `specials`, longest first.
    special_lengths: Vec<usize>,
    /// Which first bytes can start a special token.
    special_start: [bool; 256],
    /// The `<0xNN>` token of each byte.
    byte_tokens: [Option<u32>; 256],
    /// The unknown token, for a byte without a byte token.
    unknown: Option<u32>,
    add_space_prefix: bool,
}

impl Spm {
    /// The tables for `tokens` with their `scores` and `types` (same length).
    pub(crate) fn new(
        tokens: &[&str],
        scores: &[f32],
        types: &[i64],
        unknown: Option<u32>,
        add_space_prefix: bool,
    ) -> Self {
        let mut pieces = HashMap::with_capacity(tokens.len());
        let mut specials = HashMap::new();
        let mut byte_tokens = [None; 256];
        for (id, (token, kind)) in (0u32..).zip(tokens.iter().zip(types)) {
            match *kind {
                TYPE_NORMAL => {
                    pieces.entry((*token).to_owned()).or_insert(id);
                }
                TYPE_USER_DEFINED => {
                    pieces.entry((*token).to_owned()).or_insert(id);
                    specials.entry((*token).to_owned()).or_insert(id);
                }
                TYPE_CONTROL => {
                    specials.entry((*token).to_owned()).or_insert(id);
                }
                TYPE_BYTE => {
                    if let Some(byte) = parse_byte_token(token) {
                        byte_tokens[usize::from(byte)].get_or_insert(id);
                    }
                }
                _ => {}
            }
        }
        specials.retain(|text, _| !text.is_empty());
        let mut special_lengths: Vec<usize> = specials.keys().map(String::len).collect();
        special_lengths.sort_unstable_by(|a, b| b.cmp(a));
        special_lengths.dedup();
        let mut special_start = [false; 256];
        for text in specials.keys() {
            if let Some(&first) = text.as_bytes().first() {
                special_start[usize::from(first)] = true;
            }
        }
        Self {
            pieces,
            scores: scores.to_vec(),
            specials,
            special_lengths,
            special_start,
            byte_tokens,
            unknown,
            add_space_prefix,
        }
    }

    /// Appends the ids of `text` to `out`. Errors name a byte that has neither a byte token
    /// nor an unknown token to stand for it.
    pub(crate) fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), String> {
        let bytes = text.as_bytes();
        let mut after_special = true;
        let mut start = 0;
        let mut position = 0;
        while position < bytes.len() {
            match self.special_at(text, position) {
                Some((length, id)) => {
                    if start < position {
                        self.encode_piece(&text[start..position], after_special, out)?;
                    }
                    out.push(id);
                    after_special = true;
                    position += length;
                    start = position;
                }
                None => position += 1,
            }
        }
        if start < text.len() {
            self.encode_piece(&text[start..], after_special, out)?;
        }
        Ok(())
    }

    /// The longest special token starting at byte `position`, with its length.
    fn special_at(&self, text: &str, position: usize) -> Option<(usize, u32)> {
        let first = *text.as_bytes().get(position)?;
        if !self.special_start[usize::from(first)] {
            return None;
        }
        self.special_lengths.iter().find_map(|&length| {
            let candidate = text.get(position..position.checked_add(length)?)?;
            self.specials.get(candidate).map(|&id| (length, id))
        })
    }

    /// Encodes text that holds no special token.
    fn encode_piece(
        &self,
        raw: &str,
        after_special: bool,
        out: &mut Vec<u32>,
    ) -> Result<(), String> {
        let mut text = String::with_capacity(raw.len() + 3);
        if self.add_space_prefix && after_special {
            text.push(SPACE);
        }
        text.extend(raw.chars().map(|c| if c == ' ' { SPACE } else { c }));

        // One symbol per character, linked both ways.
        let mut symbols: Vec<Symbol> = text
            .char_indices()
            .enumerate()
            .map(|(index, (start, c))| Symbol {
                start,
                len: c.len_utf8(),
                prev: index.checked_sub(1),
                next: Some(index + 1),
            })
            .collect();
        if let Some(last) = symbols.last_mut() {
            last.next = None;
        }
        let mut queue = BinaryHeap::new();
        for left in 1..symbols.len() {
            self.push_pair(&text, &symbols, left - 1, left, &mut queue);
        }
        while let Some(pair) = queue.pop() {
            let (left, right) = (symbols[pair.left], symbols[pair.right]);
            // A pair whose symbols changed since it was queued is stale.
            if left.len == 0 || right.len == 0 || left.len + right.len != pair.len {
                continue;
            }
            symbols[pair.left].len += right.len;
            symbols[pair.right].len = 0;
            symbols[pair.left].next = right.next;
            if let Some(next) = right.next {
                symbols[next].prev = Some(pair.left);
            }
            if let Some(prev) = left.prev {
                self.push_pair(&text, &symbols, prev, pair.left, &mut queue);
            }
            if let Some(next) = right.next {
                self.push_pair(&text, &symbols, pair.left, next, &mut queue);
            }
        }

        let mut index = if symbols.is_empty() { None } else { Some(0) };
        while let Some(current) = index {
            let symbol = symbols[current];
            let piece = &text[symbol.start..symbol.start + symbol.len];
            match self.pieces.get(piece) {
                Some(&id) => out.push(id),
                None => {
                    for &byte in piece.as_bytes() {
                        let id = self.byte_tokens[usize::from(byte)].or(self.unknown).ok_or_else(
                            || format!("byte 0x{byte:02X} has no <0x{byte:02X}> token"),
                        )?;
                        out.push(id);
                    }
                }
            }
            index = symbol.next;
        }
        Ok(())
    }

    /// Queues the merge of `left` and `right` if their text is a piece.
    fn push_pair(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Pair>,
    ) {
        let (a, b) = (symbols[left], symbols[right]);
        let merged = &text[a.start..b.start + b.len];
        if let Some(&id) = self.pieces.get(merged) {
            let score = self.scores.get(id as usize).copied().unwrap_or(f32::NEG_INFINITY);
            queue.push(Pair { left, right, score, len: merged.len() });
        }
    }
}

/// A run of characters of the text being merged (`len` 0: merged into its left neighbour).
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge: the highest score first, then the leftmost.
#[derive(Debug)]
struct Pair {
    left: usize,
    right: usize,
    score: f32,
    len: usize,
}

impl Ord for Pair {
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.total_cmp(&other.score).then_with(|| other.left.cmp(&self.left))
    }
}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

/// The byte of a `<0xNN>` token.
pub(crate) fn parse_byte_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The bytes a SentencePiece token stands for: a normal piece with `▁` as a space, a byte token
/// as its byte, any other token (control, user-defined) as written.
pub(crate) fn token_bytes(token: &str, kind: i64) -> Vec<u8> {
    match kind {
        TYPE_NORMAL => token.replace(SPACE, " ").into_bytes(),
        TYPE_BYTE => match parse_byte_token(token) {
            Some(byte) => vec![byte],
            None => token.as_bytes().to_vec(),
        },
        _ => token.as_bytes().to_vec(),
    }
}

#[cfg(test)]
#[path = "spm_tests.rs"]
mod tests;
