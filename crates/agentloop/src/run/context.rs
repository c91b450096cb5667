//! The run's context management: token counts, the model's view of the history (sliding
//! window, compaction summary, collapsed old outputs), tool-output trimming and the compaction
//! step. The full history stays in the run (and its journal); only the view changes.

use super::Run;
use crate::context::compact::{summary_message, Compaction, CompactionReason};
use crate::context::tokens::{EstimateCounter, TokenCounter};
use crate::context::trim::{self, READ_TOOL_OUTPUT};
use crate::context::window::{
    current_interaction, find_safe_tool_boundary, plan_window, BoundaryScan, WindowError,
    WindowPlan,
};
use crate::context::WindowPolicy;
use crate::message::{Message, Part, Role, ToolResult, ToolResultContent};
use crate::provider::{ModelRequest, ToolChoice};
use crate::tool::{parse_arguments, ToolSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

const ESTIMATE: EstimateCounter = EstimateCounter { bytes_per_token: 4.0 };

/// The run's context state (part of the run, folded from the journal).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub(super) struct ContextState {
    /// History indices always sent: system / developer messages and the turn's first user
    /// message.
    pub(super) pinned: Vec<usize>,
    /// The compaction in force.
    pub(super) compaction: Option<Compaction>,
    /// Compactions started so far.
    pub(super) compactions: u32,
    /// Whole texts of trimmed tool outputs, by call id (the run's artifact space).
    pub(super) artifacts: BTreeMap<String, String>,
    /// A compaction the fold decided (forced by `length` or a context overflow).
    pub(super) pending_compaction: Option<CompactionReason>,
    /// After a forced compaction, the same iteration's request is sent again.
    pub(super) redo_iteration: bool,
    /// Where the cut-off message of an output-limit `length` was, when a build from before
    /// [`StopReason::OutputLimit`](super::StopReason::OutputLimit) would have compacted
    /// instead: lets the fold follow such a journal (see `compaction_started`). Set only
    /// while the run is finishing with that outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) legacy_length_cut: Option<usize>,
}

/// Derived data the run keeps to stay fast; never serialized, rebuilt on demand.
#[derive(Clone, Default)]
pub(super) struct ContextCache {
    counter: Option<Arc<dyn TokenCounter>>,
    /// Token counts of `history[..counts.len()]`, and their prefix sums.
    pub(super) counts: Vec<usize>,
    prefix: Vec<usize>,
    view: Option<ViewCache>,
    /// Whether a window may start at the compaction floor, scanned incrementally.
    boundary: BoundaryScan,
    reader_tools: Option<Arc<Vec<ToolSpec>>>,
    /// Estimated input tokens of the last request, and the correction learned from the
    /// provider's reported usage.
    last_estimate: usize,
    calibration: Option<f64>,
}

#[derive(Clone)]
struct ViewCache {
    view: Arc<Vec<Message>>,
    pinned: Vec<usize>,
    cut: Option<usize>,
    start: usize,
    history_len: usize,
}

impl std::fmt::Debug for ContextCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextCache")
            .field("counter", &self.counter.as_ref().map(|c| c.name().to_owned()))
            .field("counted", &self.counts.len())
            .field("calibration", &self.calibration)
            .finish()
    }
}

impl PartialEq for ContextCache {
    /// A cache is not part of the run's state.
    fn eq(&self, _other: &Self) -> bool {
        true
    }
}

/// Arguments of `read_tool_output`.
#[derive(Deserialize)]
struct ReadArgs {
    #[serde(rename = "ref")]
    reference: String,
    #[serde(default)]
    offset: usize,
    length: Option<usize>,
}

impl Run {
    /// Sets the token counter (the agent picks one for its model; the default estimates
    /// 4 bytes per token).
    pub fn set_token_counter(&mut self, counter: Arc<dyn TokenCounter>) {
        self.cache.counter = Some(counter);
        self.cache.counts.clear();
        self.cache.prefix.clear();
    }

    /// Corrects the token estimate with the input tokens the provider reported for the last
    /// request. Live only: decisions it changes are journaled by the events they cause.
    pub(super) fn calibrate(&mut self, reported_input: u64) {
        if reported_input > 0 && self.cache.last_estimate > 0 {
            let ratio = reported_input as f64 / self.cache.last_estimate as f64;
            self.cache.calibration = Some(ratio.clamp(0.25, 4.0));
        }
    }

    fn calibration(&self) -> f64 {
        self.cache.calibration.unwrap_or(1.0)
    }

    /// Counts the messages not counted yet (only new messages are counted each iteration).
    pub(super) fn ensure_counts(&mut self) {
        let counter: &dyn TokenCounter = match &self.cache.counter {
            Some(counter) => counter.as_ref(),
            None => &ESTIMATE,
        };
        if self.cache.prefix.is_empty() {
            self.cache.prefix.push(0);
        }
        for message in &self.history[self.cache.counts.len()..] {
            let count = counter.count_message(message);
            let total = self.cache.prefix.last().copied().unwrap_or(0) + count;
            self.cache.counts.push(count);
            self.cache.prefix.push(total);
        }
    }

    /// Forgets derived data from history index `index` on (the history changed there).
    pub(super) fn invalidate_from(&mut self, index: usize) {
        self.cache.counts.truncate(index);
        self.cache.prefix.truncate(index + 1);
        self.cache.view = None;
        self.cache.boundary = BoundaryScan::default();
    }

    pub(super) fn floor(&self) -> usize {
        self.context.compaction.as_ref().map_or(0, |c| c.cut)
    }

    /// The summary message and its tokens, when a compaction is in force.
    fn summary(&self) -> Option<(Message, usize)> {
        let compaction = self.context.compaction.as_ref()?;
        let message = summary_message(&compaction.summary);
        let tokens = match &self.cache.counter {
            Some(counter) => counter.count_message(&message),
            None => ESTIMATE.count_message(&message),
        };
        Some((message, tokens))
    }

    /// Estimated input tokens of everything since the compaction cut (before windowing).
    fn estimated_input(&mut self) -> usize {
        self.ensure_counts();
        let floor = self.floor();
        let tail = self.cache.prefix.last().copied().unwrap_or(0)
            - self.cache.prefix.get(floor).copied().unwrap_or(0);
        let pinned: usize = self
            .context
            .pinned
            .iter()
            .filter(|&&i| i < floor)
            .map(|&i| self.cache.counts.get(i).copied().unwrap_or(0))
            .sum();
        let summary = self.summary().map_or(0, |(_, tokens)| tokens);
        ((tail + pinned + summary) as f64 * self.calibration()) as usize
    }

    /// Whether the estimated input passed the compaction threshold.
    pub(super) fn over_threshold(&mut self) -> Option<u64> {
        let context = &self.config.context;
        let window = context.context_window?;
        if !context.compaction.enabled {
            return None;
        }
        let limit = (f64::from(window) * f64::from(context.compaction.threshold)) as usize;
        let estimate = self.estimated_input();
        (estimate > limit).then_some(estimate as u64)
    }

    /// Where a compaction would cut: a safe boundary that keeps the recent messages and the
    /// current interaction, past the current cut. `None`: nothing to compact.
    pub(super) fn compaction_cut(&self) -> Option<usize> {
        self.compaction_cut_in(&self.history)
    }

    fn compaction_cut_in(&self, history: &[Message]) -> Option<usize> {
        let floor = self.floor();
        let keep = self.config.context.compaction.keep_recent_messages;
        let target = history.len().checked_sub(keep.max(1))?;
        let cut = find_safe_tool_boundary(history, target).min(current_interaction(history, floor));
        (cut > floor).then_some(cut)
    }

    /// Whether a compaction could help now.
    pub(super) fn can_compact(&self) -> bool {
        self.can_compact_in(&self.history)
    }

    /// Whether a compaction could help with this history.
    pub(super) fn can_compact_in(&self, history: &[Message]) -> bool {
        let compaction = &self.config.context.compaction;
        compaction.enabled
            && self.context.compactions < compaction.max_attempts
            && self.compaction_cut_in(history).is_some()
    }

    /// The summarisation request: the previous summary, the history up to the cut, the prompt.
    pub(super) fn compaction_request(&self, cut: usize) -> ModelRequest {
        let floor = self.floor();
        let mut messages: Vec<Message> = self.summary().map(|(m, _)| m).into_iter().collect();
        messages.extend(self.history.get(floor..cut).unwrap_or_default().iter().cloned());
        messages.push(Message::user(self.config.context.compaction.prompt.clone()));
        ModelRequest {
            instructions: None,
            messages: Arc::new(messages),
            tools: Arc::default(),
            tool_choice: ToolChoice::None,
            temperature: self.config.temperature,
            max_tokens: self.config.max_tokens,
            metadata: self.config.metadata.clone(),
            output: None,
            cache: self.config.cache.clone(),
            trace_parent: None,
        }
    }

    /// Estimated tokens after a compaction at `cut` with this summary.
    pub(super) fn estimate_after(&mut self, cut: usize, summary: &str) -> u64 {
        self.ensure_counts();
        let tail = self.cache.prefix.last().copied().unwrap_or(0)
            - self.cache.prefix.get(cut).copied().unwrap_or(0);
        let summary = ESTIMATE.count_message(&summary_message(summary));
        ((tail + summary) as f64 * self.calibration()) as u64
    }

    /// The window for the next request.
    pub(super) fn plan(&mut self) -> Result<WindowPlan, WindowError> {
        self.ensure_counts();
        let calibration = self.calibration();
        let budget = self
            .config
            .context
            .input_budget(self.config.max_tokens)
            .map(|budget| (budget as f64 / calibration) as usize);
        let policy = WindowPolicy {
            max_messages: self.config.context.max_input_messages,
            max_tokens: budget,
        };
        let extra = self.summary().map_or((0, 0), |(_, tokens)| (1, tokens));
        if let Some(plan) = self.plan_everything(extra, policy) {
            return Ok(plan);
        }
        plan_window(
            &self.history,
            &self.cache.counts,
            &self.context.pinned,
            self.floor(),
            extra,
            policy,
        )
    }

    /// The plan of [`plan_window`] when everything since the floor fits the policy and the
    /// floor is a safe start (the common case with no window or a large one), in time
    /// independent of the history's length: token sums from the prefix sums, the boundary
    /// check from an incremental scan. `None`: ask [`plan_window`].
    fn plan_everything(
        &mut self,
        extra: (usize, usize),
        policy: WindowPolicy,
    ) -> Option<WindowPlan> {
        let floor = self.floor();
        let len = self.history.len();
        let first = self.history.get(floor)?;
        if first.role == Role::Tool || first.tool_results_iter().next().is_some() {
            return None;
        }
        let (extra_messages, extra_tokens) = extra;
        let pinned: Vec<usize> =
            self.context.pinned.iter().copied().filter(|&i| i < floor).collect();
        if policy
            .max_messages
            .is_some_and(|max| pinned.len() + extra_messages + (len - floor) > max)
        {
            return None;
        }
        let count = |i: usize| self.cache.counts.get(i).copied().unwrap_or(0);
        let prefix = |i: usize| self.cache.prefix.get(i).copied().unwrap_or(0);
        let pinned_tokens: usize = pinned.iter().map(|&i| count(i)).sum();
        let tokens = pinned_tokens + extra_tokens + (prefix(len) - prefix(floor));
        if policy.max_tokens.is_some_and(|max| tokens > max) {
            return None;
        }
        if self.cache.boundary.start() != floor {
            self.cache.boundary = BoundaryScan::new(floor);
        }
        if !self.cache.boundary.is_safe(&self.history) {
            return None;
        }
        Some(WindowPlan { pinned, start: floor, tokens })
    }

    /// The messages of the next request: pinned, the summary, the window's tail. Shares the
    /// history when nothing is cut; otherwise updates the previous view in place (drops from
    /// the front, appends the new messages), so each iteration copies only new messages.
    pub(super) fn view(&mut self, plan: &WindowPlan) -> Arc<Vec<Message>> {
        self.cache.last_estimate = plan.tokens;
        let collapse = self.config.context.trim.collapse_after_turns;
        let cut = self.context.compaction.as_ref().map(|c| c.cut);
        if plan.start == 0 && cut.is_none() && collapse.is_none() {
            self.cache.view = None;
            return Arc::clone(&self.history);
        }
        let history_len = self.history.len();
        if let (Some(cache), None) = (&mut self.cache.view, collapse) {
            if cache.cut == cut
                && cache.pinned == plan.pinned
                && cache.start <= plan.start
                && cache.history_len >= plan.start
                && cache.history_len <= history_len
            {
                let head = cache.pinned.len() + usize::from(cut.is_some());
                let view = Arc::make_mut(&mut cache.view);
                view.drain(head..head + (plan.start - cache.start));
                view.extend(self.history[cache.history_len..].iter().cloned());
                cache.start = plan.start;
                cache.history_len = history_len;
                return Arc::clone(&cache.view);
            }
        }
        let mut view: Vec<Message> =
            plan.pinned.iter().filter_map(|&i| self.history.get(i).cloned()).collect();
        if let Some((summary, _)) = self.summary() {
            view.push(summary);
        }
        view.extend(self.history[plan.start..].iter().cloned());
        if let Some(turns) = collapse {
            collapse_old_outputs(&mut view, turns as usize);
        }
        let view = Arc::new(view);
        self.cache.view = collapse.is_none().then(|| ViewCache {
            view: Arc::clone(&view),
            pinned: plan.pinned.clone(),
            cut,
            start: plan.start,
            history_len,
        });
        view
    }

    /// The tools of a request: the configured ones, plus `read_tool_output` once there is
    /// something to read with it.
    pub(super) fn request_tools(&mut self) -> Arc<Vec<ToolSpec>> {
        let offer_reader = !self.context.artifacts.is_empty()
            || self.config.context.trim.collapse_after_turns.is_some();
        if !offer_reader || self.config.tools.iter().any(|t| t.name == READ_TOOL_OUTPUT) {
            return Arc::clone(&self.config.tools);
        }
        let tools = self.cache.reader_tools.get_or_insert_with(|| {
            let mut tools = (*self.config.tools).clone();
            tools.push(trim::read_tool_output_spec());
            Arc::new(tools)
        });
        Arc::clone(tools)
    }

    /// Whether the run answers this tool itself (`read_tool_output`, unless the agent has a
    /// tool of that name).
    pub(super) fn is_internal_tool(&self, name: &str) -> bool {
        name == READ_TOOL_OUTPUT && !self.config.tools.iter().any(|t| t.name == READ_TOOL_OUTPUT)
    }

    /// Answers `read_tool_output` from the run's artifact space (or the history).
    pub(super) fn read_tool_output(&self, arguments: &str) -> Result<String, String> {
        let args: ReadArgs = parse_arguments(arguments)
            .and_then(|value| serde_json::from_value(value).map_err(|e| e.to_string()))
            .map_err(|e| format!("invalid arguments: {e}"))?;
        let full = match self.context.artifacts.get(&args.reference) {
            Some(full) => full.clone(),
            None => self
                .history
                .iter()
                .rev()
                .flat_map(|m| m.tool_results_iter())
                .find(|r| r.call_id == args.reference)
                .map(|r| r.content.to_text())
                .ok_or_else(|| format!("no tool output with ref \"{}\"", args.reference))?,
        };
        let length = args.length.unwrap_or(self.config.context.trim.page_bytes).max(1);
        Ok(trim::page(&full, args.offset, length))
    }

    /// Trims a successful result over its tool's limit: the whole text goes to the artifact
    /// space, the history gets a head and tail excerpt. Byte-based, so replays trim the same.
    pub(super) fn trim_result(&mut self, tool: &str, result: ToolResult) -> ToolResult {
        let Some(limit) = self.config.context.trim.limit_for(tool) else { return result };
        if result.is_error || tool == READ_TOOL_OUTPUT {
            return result;
        }
        let full = match &result.content {
            ToolResultContent::Text(text) if text.len() > limit => text.clone(),
            ToolResultContent::Json(value) => {
                let text = crate::canonical::to_string(value);
                if text.len() <= limit {
                    return result;
                }
                text
            }
            ToolResultContent::Text(_) | ToolResultContent::Stored(_) => return result,
        };
        let excerpt = trim::excerpt(&full, &result.call_id, self.config.context.trim.excerpt_bytes);
        self.context.artifacts.insert(result.call_id.clone(), full);
        ToolResult { content: ToolResultContent::Text(excerpt), ..result }
    }

    /// The pinned indices of a run's input: system / developer messages and the turn's first
    /// user message (the last user message of the input).
    pub(super) fn pinned_of(input: &[Message]) -> Vec<usize> {
        let mut pinned: Vec<usize> = input
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m.role, Role::System | Role::Developer))
            .map(|(i, _)| i)
            .collect();
        if let Some(turn) = input.iter().rposition(|m| m.role == Role::User) {
            pinned.push(turn);
        }
        pinned.sort_unstable();
        pinned.dedup();
        pinned
    }

    /// Records the start of a compaction and returns the summarisation step.
    pub(super) fn begin_compaction(&mut self, reason: CompactionReason) -> Option<super::Step> {
        let cut = self.compaction_cut()?;
        let tokens_before = self.estimated_input() as u64;
        self.record(crate::event::Event::CompactionStarted { reason, cut, tokens_before });
        Some(super::Step::Compact(self.compaction_request(cut)))
    }
}

/// Replaces tool outputs older than the last `keep` tool messages by a one-line note.
fn collapse_old_outputs(view: &mut [Message], keep: usize) {
    let tool_messages: Vec<usize> =
        view.iter().enumerate().filter(|(_, m)| m.role == Role::Tool).map(|(i, _)| i).collect();
    let old = tool_messages.len().saturating_sub(keep);
    for &index in &tool_messages[..old] {
        let names: BTreeMap<String, String> = index
            .checked_sub(1)
            .and_then(|i| view.get(i))
            .map(|m| m.tool_calls().map(|c| (c.id.clone(), c.name.clone())).collect())
            .unwrap_or_default();
        if let Some(message) = view.get_mut(index) {
            for part in &mut message.content {
                if let Part::ToolResult(result) = part {
                    let text = result.content.to_text();
                    if text.len() > 200 {
                        let tool = names.get(&result.call_id).map_or("a tool", String::as_str);
                        result.content = ToolResultContent::Text(trim::collapsed(
                            tool,
                            text.len(),
                            &result.call_id,
                        ));
                    }
                }
            }
        }
    }
}
