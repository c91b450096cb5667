//! [`ToolRegistry`]: the local source of tools.

use super::{DynTool, Tool, ToolContext, ToolError, ToolOutput, ToolSet, ToolSpec};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// In-process tools, by name, in registration order.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: HashMap<String, (ToolSpec, Arc<dyn DynTool>)>,
    order: Vec<String>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry").field("tools", &self.order).finish()
    }
}

/// Registering a second tool under a name already taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a tool named '{0}' is already registered")]
pub struct DuplicateTool(pub String);

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a typed tool.
    pub fn register<T: Tool>(&mut self, tool: T) -> Result<&mut Self, DuplicateTool> {
        self.register_dyn(Arc::new(tool))
    }

    /// Registers an erased tool.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> Result<&mut Self, DuplicateTool> {
        let spec = tool.spec();
        if self.tools.contains_key(&spec.name) {
            return Err(DuplicateTool(spec.name));
        }
        self.order.push(spec.name.clone());
        self.tools.insert(spec.name.clone(), (spec, tool));
        Ok(self)
    }

    /// Whether a tool of that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.tools.contains_key(name)
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether it holds no tool.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[async_trait]
impl ToolSet for ToolRegistry {
    fn specs(&self) -> Vec<ToolSpec> {
        self.order
            .iter()
            .filter_map(|name| self.tools.get(name))
            .map(|(spec, _)| spec.clone())
            .collect()
    }

    fn timeout(&self, name: &str) -> Option<Duration> {
        self.tools.get(name).and_then(|(_, tool)| tool.timeout())
    }

    fn safe_to_retry(&self, name: &str) -> bool {
        self.tools.get(name).is_some_and(|(_, tool)| tool.safe_to_retry())
    }

    async fn call(
        &self,
        name: &str,
        args: Value,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match self.tools.get(name) {
            Some((_, tool)) => tool.call_json(args, ctx).await,
            None => Err(ToolError::UnknownTool(name.to_owned())),
        }
    }

    async fn call_shared(
        &self,
        name: &str,
        args: Arc<Value>,
        ctx: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        match self.tools.get(name) {
            Some((_, tool)) => tool.call_json_ref(&args, ctx).await,
            None => Err(ToolError::UnknownTool(name.to_owned())),
        }
    }
}
