//! Structured output in the run: what a request carries for the run's [`OutputSpec`] (the
//! native schema, or the final-answer tool), and how an answer is taken — parsed, validated
//! against the schema, sent back with its errors while retries are left, or the run fails
//! with [`StopReason::OutputInvalid`]. Every decision here is made while a `model_responded`
//! is folded, from the response and the run's state, so a run rebuilt from its journal
//! decides the same way.

use super::{PendingCall, Phase, Run};
use crate::message::{Message, ToolResult};
use crate::provider::{drop_optional_nulls, ModelRequest, ToolChoice};
use crate::terms::{OutputMode, OutputSpec, Signal, StopReason, OUTPUT_TOOL};
use serde_json::Value;
use std::sync::Arc;

/// At most this many schema errors are listed to the model and in the stop reason.
const MAX_ERRORS: usize = 8;

impl Run {
    /// Adds the run's output to a request: the schema for a native mode; the final-answer
    /// tool (and a required tool call, where the model was free not to call one) otherwise.
    pub(super) fn add_output(&self, request: &mut ModelRequest) {
        let Some(spec) = &self.config.output else { return };
        match spec.mode {
            OutputMode::Native => request.output = Some(spec.format()),
            // An agent tool of that name keeps it (and the run takes no answer from it).
            OutputMode::Tool | OutputMode::Auto if !self.is_output_call(OUTPUT_TOOL) => {}
            OutputMode::Tool | OutputMode::Auto => {
                let mut tools = Vec::with_capacity(request.tools.len() + 1);
                tools.extend(request.tools.iter().cloned());
                tools.push(spec.tool_spec());
                request.tools = Arc::new(tools);
                if request.tool_choice == ToolChoice::Auto {
                    request.tool_choice = ToolChoice::Required;
                }
            }
        }
    }

    /// Whether the run answers this call itself: the final-answer tool of a run in tool mode.
    pub(super) fn is_output_call(&self, name: &str) -> bool {
        name == OUTPUT_TOOL
            && self.config.output.as_ref().is_some_and(|spec| spec.mode != OutputMode::Native)
            && !self.config.tools.iter().any(|tool| tool.name == OUTPUT_TOOL)
    }

    /// The output of a wind-down answer, if it is a valid one (no retries: the run ends).
    pub(super) fn wind_down_output(&mut self, text: &str) {
        if let Some(spec) = &self.config.output {
            self.output = parse_answer(text).and_then(|value| check(spec, value)).ok();
        }
    }

    /// After a turn without tool calls, for a run with an output: the answer when it is
    /// valid; the model asked again while retries are left; the run failed otherwise.
    /// `Err(text)`: the run has no output (the text is given back).
    pub(super) fn output_from_text(&mut self, text: String) -> Result<Phase, String> {
        let Some(spec) = self.config.output.as_ref() else { return Err(text) };
        let (errors, retry) = match parse_answer(&text).and_then(|value| check(spec, value)) {
            Ok(value) => {
                self.output = Some(value);
                return Ok(self.finishing(text, StopReason::Completed));
            }
            // A text answer in tool mode that is not the answer itself: ask for the tool.
            Err(errors) if spec.mode != OutputMode::Native && !looks_like_json(&text) => {
                let retry = format!(
                    "You answered without calling the {OUTPUT_TOOL} tool. Call {OUTPUT_TOOL} \
                     with your final answer as its arguments."
                );
                (errors, retry)
            }
            Err(errors) => {
                let retry = format!(
                    "Your answer is not valid: {errors}. Answer again with only the JSON \
                     value, matching the schema."
                );
                (errors, retry)
            }
        };
        if self.output_retries >= spec.max_retries {
            let error = format!("the answer does not match the output schema: {errors}");
            return Ok(self.failing_with(error, StopReason::OutputInvalid { errors }));
        }
        self.output_retries += 1;
        self.history_mut().push(Message::user(retry));
        Ok(Phase::NeedModel)
    }

    /// After a turn with tool calls: the final-answer calls are answered here — the first
    /// valid one ends the run once the other calls of the turn have run; an invalid one gets
    /// its errors as its result while retries are left, and fails the run otherwise.
    pub(super) fn output_from_calls(&mut self, mut calls: Vec<PendingCall>) -> Phase {
        let Some(spec) = self.config.output.clone() else {
            return Phase::AwaitingTools { calls, suspended: false };
        };
        if !self.is_output_call(OUTPUT_TOOL) {
            return Phase::AwaitingTools { calls, suspended: false };
        }
        for pending in calls.iter_mut().filter(|c| c.call.name == OUTPUT_TOOL) {
            let id = pending.call.id.clone();
            if self.output.is_some() {
                let note = "Not used: the final answer was already given.";
                pending.result = Some(ToolResult::ok(id, note));
                continue;
            }
            let arguments = crate::tool::parse_arguments(&pending.call.arguments)
                .map_err(|e| format!("the arguments are not JSON ({e})"));
            match arguments.and_then(|value| check(&spec, value)) {
                Ok(value) => {
                    let answer = match &value {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    self.output = Some(value);
                    pending.result = Some(ToolResult::ok(id, "Final answer received."));
                    pending.signal = Some(Signal::Done { answer });
                }
                Err(errors) if self.output_retries < spec.max_retries => {
                    self.output_retries += 1;
                    let text = format!(
                        "The final answer is not valid: {errors}. Call {OUTPUT_TOOL} again with \
                         corrected arguments."
                    );
                    pending.result = Some(ToolResult::error(id, text));
                }
                Err(errors) => {
                    self.drop_unanswered_calls();
                    let error = format!("the answer does not match the output schema: {errors}");
                    return self.failing_with(error, StopReason::OutputInvalid { errors });
                }
            }
        }
        let answered = calls.iter().all(|c| c.result.is_some());
        self.phase = Phase::AwaitingTools { calls, suspended: false };
        if answered {
            // Nothing for the driver to run: the results join the history now.
            return self.after_tools();
        }
        std::mem::replace(&mut self.phase, Phase::NeedModel)
    }
}

/// The JSON value of a text answer: the text itself, or the inside of a fenced code block
/// around it (```` ```json … ``` ````).
fn parse_answer(text: &str) -> Result<Value, String> {
    let text = text.trim();
    let inner = text
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map(|rest| rest.trim_start_matches(|c: char| c.is_ascii_alphabetic()).trim())
        .unwrap_or(text);
    serde_json::from_str(inner).map_err(|e| format!("the answer is not JSON ({e})"))
}

/// Whether a text answer looks like an attempt at the JSON value (starts as an object or an
/// array, or a fenced block).
fn looks_like_json(text: &str) -> bool {
    let text = text.trim_start();
    text.starts_with('{') || text.starts_with('[') || text.starts_with("```")
}

/// `value` checked against the spec's schema; the output (unwrapped) when valid, the errors
/// (at most [`MAX_ERRORS`], each with where it is) otherwise. An answer that is valid only
/// without the `null`s a strict request made the model write for optional properties is taken
/// without them ([`drop_optional_nulls`]).
fn check(spec: &OutputSpec, value: Value) -> Result<Value, String> {
    let validator = jsonschema::validator_for(&spec.schema)
        .map_err(|e| format!("the output schema is not valid ({e})"))?;
    if validator.is_valid(&value) {
        return Ok(spec.unwrap_value(value));
    }
    let mut without_nulls = value.clone();
    drop_optional_nulls(&spec.schema, &mut without_nulls);
    if without_nulls != value && validator.is_valid(&without_nulls) {
        return Ok(spec.unwrap_value(without_nulls));
    }
    Err(crate::tool::violations(&validator, &value, MAX_ERRORS))
}

#[cfg(test)]
mod tests;
