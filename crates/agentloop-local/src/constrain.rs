//! Constrained tool calls: when a request must call a tool (`tool_choice` is `required` or a
//! named tool) the output is forced, token by token, into
//! `<tool_call>\n{"name": <a tool>, "arguments": <JSON matching its schema>}\n</tool_call>`
//! by an llguidance grammar (Lark with embedded `%json` schemas) that masks the logits at
//! every step.

use crate::engine::Constraint;
use crate::tokenizer::Tokenizer;
use crate::LocalError;
use agentloop::provider::{ModelRequest, PromptedProtocol, ToolChoice};
use agentloop::tool::ToolSpec;
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use serde_json::{json, Value};
use std::sync::Arc;
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

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
        Ok(Self { factory, tokenizer })
    }

    /// The constraint for a request, when it must call a tool: `None` for `auto` / `none` or
    /// a request without tools, or tools whose schemas the grammar compiler rejects (a warning is
    /// logged; the prompt still asks for a call).
    pub(crate) fn constraint(
        &self,
        request: &ModelRequest,
        protocol: &PromptedProtocol,
    ) -> Result<Option<Box<dyn Constraint>>, LocalError> {
        let tools: Vec<&ToolSpec> = match &request.tool_choice {
            ToolChoice::Auto | ToolChoice::None => return Ok(None),
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
        let grammar = lark_grammar(&tools, protocol);
        let parser = match self.factory.create_parser(TopLevelGrammar::from_lark(grammar)) {
            Ok(parser) => parser,
            Err(error) => {
                // A schema the grammar compiler cannot take: the prompt still asks for the
                // call, the output is just not forced.
                tracing::warn!(%error, "the tool-call grammar does not compile; not constraining");
                return Ok(None);
            }
        };
        Ok(Some(Box::new(GrammarConstraint {
            matcher: Matcher::new(Ok(parser)),
            tokenizer: Arc::clone(&self.tokenizer),
            finished: false,
        })))
    }
}

/// The Lark grammar of one call of one of `tools`, in the protocol's text format.
pub(crate) fn lark_grammar(tools: &[&ToolSpec], protocol: &PromptedProtocol) -> String {
    let suffix = lark_string(&protocol.call_suffix());
    let mut alternatives = Vec::new();
    let mut rules = String::new();
    for (index, tool) in tools.iter().enumerate() {
        alternatives.push(format!("call_{index}"));
        let prefix = lark_string(&protocol.call_prefix(&tool.name));
        let mut schema = match &tool.parameters {
            Value::Object(map) if !map.is_empty() => Value::Object(map.clone()),
            _ => json!({"type": "object"}),
        };
        if let Value::Object(map) = &mut schema {
            // Compact JSON, as the prompt shows it: no free whitespace for a small model to
            // wander into.
            map.insert(
                "x-guidance".into(),
                json!({
                    "whitespace_flexible": false,
                    "item_separator": ", ",
                    "key_separator": ": ",
                    "lenient": true,
                }),
            );
        }
        rules.push_str(&format!(
            "call_{index}: {prefix} args_{index} {suffix}\nargs_{index}: %json {schema}\n"
        ));
    }
    format!("start: {}\n{rules}", alternatives.join(" | "))
}

/// A Lark string literal.
fn lark_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// A constraint driven by an llguidance matcher.
struct GrammarConstraint {
    matcher: Matcher,
    tokenizer: Arc<Tokenizer>,
    finished: bool,
}

impl GrammarConstraint {
    /// The call is complete once the grammar accepts: nothing may follow it.
    fn check_finished(&mut self) {
        if self.matcher.is_stopped() || self.matcher.is_accepting().unwrap_or(false) {
            self.finished = true;
        }
    }

    fn error(&self, what: &str, error: impl std::fmt::Display) -> LocalError {
        LocalError::Grammar(format!("{what}: {error}"))
    }
}

impl Constraint for GrammarConstraint {
    fn mask(&mut self) -> Result<Option<Vec<bool>>, LocalError> {
        let mask = self.matcher.compute_mask().map_err(|e| self.error("mask", e))?;
        let size = mask.len();
        Ok(Some((0..size).map(|id| mask.is_allowed(id as TokenId)).collect()))
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
        self.matcher.consume_tokens(&tokens).map_err(|e| self.error("forced tokens", e))?;
        self.check_finished();
        Ok(tokens)
    }

    fn commit(&mut self, token: u32) -> Result<(), LocalError> {
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
