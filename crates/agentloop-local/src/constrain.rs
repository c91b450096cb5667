//! Constrained tool calls (stub until the grammar lands).

use crate::engine::Constraint;
use crate::tokenizer::Tokenizer;
use crate::LocalError;
use agentloop::provider::{ModelRequest, PromptedProtocol};

/// Builds the constraint that forces a tool call.
pub(crate) struct ToolGrammar;

impl ToolGrammar {
    pub(crate) fn new(_tokenizer: &Tokenizer) -> Result<Self, LocalError> {
        Ok(Self)
    }

    pub(crate) fn constraint(
        &self,
        _request: &ModelRequest,
        _protocol: &PromptedProtocol,
    ) -> Result<Option<Box<dyn Constraint>>, LocalError> {
        Ok(None)
    }
}
