//! Constrained tool calls: when a request must call a tool (`tool_choice` is `required` or a
//! named tool) the output is forced, token by token, into
//! `<tool_call>\n{"name": <a tool>, "arguments": <JSON matching its schema>}\n</tool_call>`
//! by an llguidance grammar (Lark) that masks the logits at every step. The arguments'
//! grammar is compiled from the tool's schema with a bound on every part ([`schema`]), so a
//! call always closes within [`CallGrammar::max_bytes`] bytes.

use crate::engine::Constraint;
use crate::tokenizer::Tokenizer;
use crate::LocalError;
use agentloop::message::{Part, Role, ToolResultContent};
use agentloop::provider::{ModelRequest, PromptedProtocol, ToolChoice};
use agentloop::tool::ToolSpec;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::sync::Arc;
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

pub(crate) mod paths;
pub(crate) mod schema;
use schema::lark_string;

/// The tokenizer as llguidance sees it: the token trie (control tokens marked special) and
/// exact tokenization.
struct LocalTokEnv {
    trie: TokTrie,
    tokenizer: Arc<Tokenizer>,
}

impl TokenizerEnv for LocalTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        match self.tokenizer.encode(&String::from_utf8_lossy(s)) {
            Ok(ids) => ids,
            // Only bytes that are not text can fail; the trie's greedy split is a fallback.
            Err(_) => self.trie.greedy_tokenize(s),
        }
    }
}

/// Builds the constraints that force a tool call (the grammar compiler is shared).
pub(crate) struct ToolGrammar {
    factory: ParserFactory,
    tokenizer: Arc<Tokenizer>,
    /// Whether `auto` requests with tools are constrained to a well-formed call or a text
    /// answer.
    constrain_auto: bool,
}

impl ToolGrammar {
    /// The grammar compiler for this vocabulary. `vocab_size` is the model's (the output
    /// layer may have more rows than the tokenizer has tokens).
    pub(crate) fn new(tokenizer: Arc<Tokenizer>, vocab_size: usize) -> Result<Self, LocalError> {
        let size = vocab_size.max(tokenizer.vocab_size());
        let words: Vec<Vec<u8>> = (0..size)
            .map(|index| {
                let id = u32::try_from(index).unwrap_or(u32::MAX);
                let bytes = tokenizer.token_bytes(id);
                if tokenizer.is_control(id) || bytes.is_empty() {
                    let mut special = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                    special.extend_from_slice(bytes);
                    special
                } else {
                    bytes.to_vec()
                }
            })
            .collect();
        let eos = tokenizer.eos().or_else(|| tokenizer.stop_tokens().first().copied()).ok_or_else(
            || LocalError::Grammar("the vocabulary has no end-of-sequence token".into()),
        )?;
        let mut info = TokRxInfo::new(
            u32::try_from(size).map_err(|_| LocalError::Grammar("vocabulary too large".into()))?,
            eos,
        );
        info.tok_bos = tokenizer.bos();
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(LocalTokEnv { trie, tokenizer: Arc::clone(&tokenizer) });
        let mut factory = ParserFactory::new_simple(&env)
            .map_err(|e| LocalError::Grammar(format!("cannot set up the grammar compiler: {e}")))?;
        factory.quiet();
        Ok(Self { factory, tokenizer, constrain_auto: true })
    }

    /// Whether `auto` requests with tools are constrained (default true).
    pub(crate) fn constrain_auto(mut self, yes: bool) -> Self {
        self.constrain_auto = yes;
        self
    }

    /// The constraint for a request with tools: `required` or a named tool forces a call;
    /// `auto` allows a call or a text answer (see [`with_answer`]), when `constrain_auto`;
    /// `None` for `none` or a request without tools, or when the grammar does not compile (a
    /// warning is logged; the prompt still asks for a call). With `workspace` (the file tools'
    /// directory), a file tool's `path` names what exists there now ([`paths`]).
    pub(crate) fn constraint(
        &self,
        request: &ModelRequest,
        protocol: &PromptedProtocol,
        workspace: Option<&std::path::Path>,
    ) -> Result<Option<Box<dyn Constraint>>, LocalError> {
        if let Some(output) = &request.output {
            if request.tools.is_empty() || request.tool_choice == ToolChoice::None {
                return Ok(self.output_constraint(&output.schema));
            }
        }
        let mut answer = false;
        let after_result = request.messages.last().is_some_and(|m| m.role == Role::Tool);
        let tools: Vec<&ToolSpec> = match &request.tool_choice {
            // The answer after a tool result, when no more calls are allowed.
            ToolChoice::None if self.constrain_auto && after_result => {
                let grammar = answer_only(result_to_quote(request).as_ref());
                return self.matcher(grammar, true).map(Some);
            }
            ToolChoice::None => return Ok(None),
            ToolChoice::Auto if !self.constrain_auto => return Ok(None),
            ToolChoice::Auto => {
                answer = true;
                request.tools.iter().collect()
            }
            ToolChoice::Required => request.tools.iter().collect(),
            ToolChoice::Named(name) => {
                let tools: Vec<_> = request.tools.iter().filter(|t| &t.name == name).collect();
                if tools.is_empty() {
                    return Err(LocalError::InvalidRequest(format!(
                        "tool_choice names {name:?}, which is not among the request's tools"
                    )));
                }
                tools
            }
        };
        if tools.is_empty() {
            return Ok(None);
        }
        // The file tools name what exists in the workspace.
        let question = if after_result { None } else { last_user_text(request) };
        let limited = workspace.and_then(|root| paths::limit(root, &tools, question));
        let tools: Vec<&ToolSpec> = match &limited {
            Some(limited) => limited.iter().collect(),
            None => tools,
        };
        // With the schemas' patterns first; a pattern the regex engine rejects leaves patterns
        // out (the strings are still bounded); a grammar that still does not compile leaves
        // the call unforced.
        // A tool named for the answer after a short result (e.g. a done tool) quotes it in
        // its string argument, as a text answer does.
        let quote = match &request.tool_choice {
            ToolChoice::Named(_) if after_result => result_to_quote(request),
            ToolChoice::Auto => result_to_quote(request),
            _ => None,
        };
        let call_quote = quote.as_ref().filter(|_| !answer);
        for patterns in [true, false] {
            let mut grammar = lark_grammar(&tools, protocol, patterns, call_quote);
            if answer {
                grammar.text = with_answer(&grammar.text, quote.as_ref());
            }
            match self.matcher(grammar.text, answer) {
                Ok(constraint) => return Ok(Some(constraint)),
                Err(error) => {
                    tracing::warn!(%error, patterns, "the tool-call grammar does not compile");
                }
            }
        }
        Ok(None)
    }

    /// The constraint of an answer that is a JSON value matching `schema` (structured
    /// output), bounded like a call's arguments; `None` when its grammar does not compile
    /// (a warning is logged; the run still validates the answer).
    fn output_constraint(&self, schema: &Value) -> Option<Box<dyn Constraint>> {
        for patterns in [true, false] {
            let answer = schema::compile(schema, "o_", patterns, None);
            let grammar = format!("start: {}\n{}", answer.root, answer.rules);
            match self.matcher(grammar, false) {
                Ok(constraint) => return Some(constraint),
                Err(error) => {
                    tracing::warn!(%error, patterns, "the output grammar does not compile")
                }
            }
        }
        None
    }

    /// The constraint of a Lark grammar; `free_text`: whether it has a text alternative.
    fn matcher(&self, grammar: String, free_text: bool) -> Result<Box<dyn Constraint>, LocalError> {
        let parser = self
            .factory
            .create_parser(TopLevelGrammar::from_lark(grammar))
            .map_err(|e| LocalError::Grammar(format!("the grammar does not compile: {e}")))?;
        Ok(Box::new(GrammarConstraint {
            matcher: Matcher::new(Ok(parser)),
            tokenizer: Arc::clone(&self.tokenizer),
            finished: false,
            free_text,
            pending_mask: None,
        }))
    }
}

/// The grammar of one call and the most bytes a call can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallGrammar {
    /// Lark.
    pub(crate) text: String,
    /// The longest call the grammar allows, in bytes (so also in tokens).
    pub(crate) max_bytes: usize,
}

/// The Lark grammar of one call of one of `tools`, in the protocol's text format, with each
/// tool's arguments bounded ([`schema`]); `patterns`: whether string patterns are compiled.
///
/// `quote`: what a call's top-level string arguments must say (see [`schema`]).
pub(crate) fn lark_grammar(
    tools: &[&ToolSpec],
    protocol: &PromptedProtocol,
    patterns: bool,
    quote: Option<&Quote>,
) -> CallGrammar {
    let suffix = protocol.call_suffix();
    let mut alternatives = Vec::new();
    let mut rules = String::new();
    let mut max_bytes = 0;
    for (index, tool) in tools.iter().enumerate() {
        alternatives.push(format!("call_{index}"));
        let prefix = protocol.call_prefix(&tool.name);
        let parameters = match &tool.parameters {
            Value::Null => json!({"type": "object"}),
            other => other.clone(),
        };
        let args = schema::compile(&parameters, &format!("a{index}_"), patterns, quote);
        rules.push_str(&format!(
            "call_{index}: {} {} {}\n",
            lark_string(&prefix),
            args.root,
            lark_string(&suffix)
        ));
        rules.push_str(&args.rules);
        max_bytes = max_bytes.max(prefix.len() + args.max_bytes + suffix.len());
    }
    CallGrammar { text: format!("start: {}\n{rules}", alternatives.join(" | ")), max_bytes }
}

/// `grammar` with one more alternative: a text answer of one line (at most [`ANSWER_CHARS`]
/// characters) that does not start with `<` or whitespace —
/// so neither a malformed call nor an echo of a tool result's markup — and ends where the
/// model ends it, or at the bound (a small model that repeats itself stops there). With
/// `quote`, the answer says what the tool result said ([`Quote`]).
pub(crate) fn with_answer(grammar: &str, quote: Option<&Quote>) -> String {
    let Some((start, rest)) = grammar.split_once('\n') else {
        return grammar.to_owned();
    };
    format!("{start} | answer\n{}{rest}", answer_rules(quote))
}

/// The grammar of a text answer alone (see [`with_answer`]).
pub(crate) fn answer_only(quote: Option<&Quote>) -> String {
    format!("start: answer\n{}", answer_rules(quote))
}

/// The rules of a text answer (see [`with_answer`]).
fn answer_rules(quote: Option<&Quote>) -> String {
    let quote = match quote {
        Some(quote) => {
            let numbers = quote.numbers_regex().map(|n| format!(" & /{n}/")).unwrap_or_default();
            format!(" & /[\\s\\S]*{}[\\s\\S]*/{numbers}", regex_literal(&quote.text))
        }
        None => String::new(),
    };
    format!("answer: ANSWER\nANSWER: /[^<\\s][^\\n]{{0,{ANSWER_CHARS}}}\\n?/{quote}\n")
}

/// Characters of a tool result that an answer must quote, at most.
pub(crate) const QUOTE_CHARS: usize = 40;

/// What an answer after a tool result must say: the result, verbatim; and where the result
/// has a number in it, no number that the conversation does not hold (a small model that
/// quotes `42` otherwise goes on: "The sum of 42 and 25 is 107.", "12 is 15.12").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Quote {
    /// The text the answer contains.
    pub(crate) text: String,
    /// The numbers an answer may hold ([`numbers`]: every number in it is one of them), or
    /// `None`: any.
    pub(crate) numbers: Option<Vec<String>>,
}

/// Distinct numbers a quoting answer may choose from, at most (more: any number).
const QUOTE_NUMBERS: usize = 64;
/// Characters of one number a quoting answer may hold, at most (a longer one: any number).
const QUOTE_NUMBER_CHARS: usize = 40;

impl Quote {
    /// An answer that contains `text`, with any numbers.
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self { text: text.into(), numbers: None }
    }

    /// The quote of `text` where the numbers of `text` and of `sources` are the only ones an
    /// answer may hold, when `text` has a digit.
    pub(crate) fn with_numbers<'a>(
        text: impl Into<String>,
        sources: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let text = text.into();
        // No digit, nothing to hold to; a number followed by a period inside the text
        // (`file1.txt`) is one that the rule below would forbid, so the quote could not be
        // written.
        if !text.bytes().any(|b| b.is_ascii_digit()) || period_after_a_number(&text) {
            return Self::text(text);
        }
        let mut found: Vec<String> = Vec::new();
        let mut add = |source: &str| {
            for number in numbers(source) {
                if number.len() > QUOTE_NUMBER_CHARS {
                    return false;
                }
                if !found.iter().any(|n| n == number) {
                    found.push(number.to_owned());
                }
            }
            true
        };
        let bounded = add(&text) && sources.into_iter().all(add);
        if !bounded || found.len() > QUOTE_NUMBERS {
            return Self::text(text);
        }
        Self { text, numbers: Some(found) }
    }

    /// A regular expression (inside `/…/` in Lark) of the texts whose every number
    /// ([`numbers`]) is one of [`Quote::numbers`]; `None` when any number may appear.
    ///
    /// After a number comes a character that is neither a digit nor a period, or the end —
    /// or a period that ends the text (a line's end may follow it): blocked from "504 is
    /// 504.5", the 135M model wrote "504 is 504.com." and "50 is 50.x + 50 is 50.x + …".
    pub(crate) fn numbers_regex(&self) -> Option<String> {
        let numbers = self.numbers.as_ref()?;
        // (No numbers: `(?:)` alternatives, and the texts without a digit.)
        let any: Vec<String> = numbers.iter().map(|n| regex_literal(n)).collect();
        let any = any.join("|");
        Some(format!("[^0-9]*(?:(?:{any})[^0-9.][^0-9]*)*(?:(?:{any})\\.?\\n?)?"))
    }
}

/// Whether a number of `text` ([`numbers`]) is followed by a period that does not end it
/// (`file1.txt`; not `It is 42.`). A period between digits is inside a number, so this is a
/// digit, a period and something else.
fn period_after_a_number(text: &str) -> bool {
    let digit_then_period =
        |w: &[u8]| w[0].is_ascii_digit() && w[1] == b'.' && !w[2].is_ascii_digit();
    text.trim_end().as_bytes().windows(3).any(digit_then_period)
}

/// The numbers of `text`: each maximal run of ASCII digits with the periods between them
/// (`2.5`, `1.2.3`; `42` in "It is 42.").
pub(crate) fn numbers(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < bytes.len() && !bytes[at].is_ascii_digit() {
            at += 1;
        }
        if at == bytes.len() {
            return None;
        }
        let start = at;
        loop {
            while at < bytes.len() && bytes[at].is_ascii_digit() {
                at += 1;
            }
            let more = bytes.get(at) == Some(&b'.')
                && bytes.get(at + 1).is_some_and(|b| b.is_ascii_digit());
            if !more {
                break;
            }
            at += 1;
        }
        text.get(start..at)
    })
}

/// What an answer after a tool result must say ([`Quote`]): the result, when the last
/// message holds exactly one successful result of one short line (a number, a word: what the
/// user asked for, which a small model otherwise misquotes). Its numbers, and those of the
/// question (the last user message), the calls' arguments and the results since, are the
/// ones the answer may hold.
fn result_to_quote(request: &ModelRequest) -> Option<Quote> {
    let last = request.messages.last().filter(|m| m.role == Role::Tool)?;
    let mut results = last.content.iter().filter_map(|part| match part {
        Part::ToolResult(result) => Some(result),
        _ => None,
    });
    let result = results.next().filter(|r| !r.is_error)?;
    if results.next().is_some() {
        return None;
    }
    let text = result_text(&result.content);
    let short = !text.is_empty() && text.chars().count() <= QUOTE_CHARS && !text.contains('\n');
    // Quoted in a JSON string argument without escapes (so that the JSON text reads as the
    // value): a result with a quote mark, a backslash or a control character cannot be (the
    // grammar would admit nothing: `["a.txt"]` from `list_dir` once stopped a run).
    let plain = !text.chars().any(|c| c == '"' || c == '\\' || c.is_control());
    if !(short && plain) {
        return None;
    }
    // From the question on (the recipe's worked examples come before it).
    let question = question_at(request).unwrap_or(0);
    let mut sources: Vec<Cow<'_, str>> = Vec::new();
    for message in &request.messages[question..] {
        for part in &message.content {
            match part {
                Part::Text { text } if message.role == Role::User => sources.push(text.into()),
                Part::ToolCall(call) => sources.push(call.arguments.as_str().into()),
                Part::ToolResult(result) if !result.is_error => {
                    sources.push(result_text(&result.content).into());
                }
                _ => {}
            }
        }
    }
    Some(Quote::with_numbers(text, sources.iter().map(|s| s.as_ref())))
}

/// Where the question is: the last user message.
fn question_at(request: &ModelRequest) -> Option<usize> {
    request.messages.iter().rposition(|m| m.role == Role::User)
}

/// The text of the question ([`question_at`]).
fn last_user_text(request: &ModelRequest) -> Option<&str> {
    let message = request.messages.get(question_at(request)?)?;
    message.content.iter().find_map(|part| match part {
        Part::Text { text } => Some(text.as_str()),
        _ => None,
    })
}

/// A tool result as the text an answer quotes.
fn result_text(content: &ToolResultContent) -> String {
    match content {
        ToolResultContent::Json(Value::String(text)) | ToolResultContent::Text(text) => {
            text.trim().to_owned()
        }
        other => other.to_text(),
    }
}

/// `text` as a regular expression that matches it literally (inside `/…/` in Lark).
pub(crate) fn regex_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Characters of a text answer where the request's tool choice is `auto`.
pub(crate) const ANSWER_CHARS: usize = 400;

/// A constraint driven by an llguidance matcher.
struct GrammarConstraint {
    matcher: Matcher,
    tokenizer: Arc<Tokenizer>,
    finished: bool,
    /// Whether the grammar has a free-text alternative (which ends at the end-of-sequence
    /// token, not when it first accepts).
    free_text: bool,
    /// A mask computed to decide whether the output is complete, for the next step.
    pending_mask: Option<Vec<bool>>,
}

impl GrammarConstraint {
    /// A call is complete once the grammar accepts and nothing but the end may follow it.
    fn check_finished(&mut self) {
        if self.matcher.is_stopped() {
            self.finished = true;
            return;
        }
        if !self.matcher.is_accepting().unwrap_or(false) {
            return;
        }
        if !self.free_text {
            self.finished = true;
            return;
        }
        let Ok(mask) = self.compute_mask() else {
            self.finished = true;
            return;
        };
        let eos = self.tokenizer.eos();
        let more = mask.iter().enumerate().any(|(id, allowed)| {
            *allowed
                && u32::try_from(id).ok() != eos
                && !self.tokenizer.stop_tokens().contains(&(id as u32))
        });
        if more {
            self.pending_mask = Some(mask);
        } else {
            self.finished = true;
        }
    }

    fn compute_mask(&mut self) -> Result<Vec<bool>, LocalError> {
        let mask = self.matcher.compute_mask().map_err(|e| self.error("mask", e))?;
        let size = mask.len();
        Ok((0..size).map(|id| mask.is_allowed(id as TokenId)).collect())
    }

    fn error(&self, what: &str, error: impl std::fmt::Display) -> LocalError {
        LocalError::Grammar(format!("{what}: {error}"))
    }
}

impl Constraint for GrammarConstraint {
    fn mask(&mut self) -> Result<Option<Vec<bool>>, LocalError> {
        match self.pending_mask.take() {
            Some(mask) => Ok(Some(mask)),
            None => self.compute_mask().map(Some),
        }
    }

    fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
        if self.finished {
            return Ok(Vec::new());
        }
        // All the forced text, tokenized as the model would write it. (llguidance's own forced
        // tokens stop before a last token that could merge with what follows, e.g. ` "` before
        // a string; a small model then picks a lone space and derails. Byte-level BPE splits
        // punctuation from letters and digits, so forcing it whole is nearly always canonical.)
        let bytes = self.matcher.compute_ff_bytes();
        if bytes.is_empty() {
            return Ok(Vec::new());
        }
        let tokens = match std::str::from_utf8(&bytes) {
            Ok(text) => self.tokenizer.encode(text)?,
            Err(_) => return Ok(self.matcher.consume_ff_tokens()),
        };
        self.pending_mask = None;
        self.matcher.consume_tokens(&tokens).map_err(|e| self.error("forced tokens", e))?;
        self.check_finished();
        Ok(tokens)
    }

    fn commit(&mut self, token: u32) -> Result<(), LocalError> {
        self.pending_mask = None;
        self.matcher.consume_token(token).map_err(|e| self.error("token", e))?;
        self.check_finished();
        Ok(())
    }

    fn is_finished(&self) -> bool {
        self.finished
    }
}

#[cfg(test)]
mod tests;
