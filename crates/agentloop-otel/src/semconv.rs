//! The attribute, span and metric names agentloop emits.
//!
//! The `gen_ai.*` names follow the OpenTelemetry GenAI semantic conventions
//! as published in open-telemetry/semantic-conventions v1.41.0 (status: development; now
//! maintained in open-telemetry/semantic-conventions-genai; the `opentelemetry-semantic-conventions`
//! crate marks them deprecated and experimental, so they are kept here as plain strings).
//! The `agentloop.*` names are agentloop's own.

/// `gen_ai.operation.name`: `invoke_agent`, `chat`, `execute_tool`.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.provider.name`: `openai`, `anthropic`, `gcp.gemini`, …
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
/// `gen_ai.agent.name`.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.agent.id`.
pub const AGENT_ID: &str = "gen_ai.agent.id";
/// `gen_ai.conversation.id`: the session (A2A context) a run belongs to.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.request.model`.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.request.temperature`.
pub const REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
/// `gen_ai.request.max_tokens`.
pub const REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// `gen_ai.response.model`.
pub const RESPONSE_MODEL: &str = "gen_ai.response.model";
/// `gen_ai.response.id`.
pub const RESPONSE_ID: &str = "gen_ai.response.id";
/// `gen_ai.response.finish_reasons`.
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.usage.input_tokens`.
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens` (cached input tokens, where reported).
pub const USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Input tokens written to the provider's cache (part of the input tokens).
pub const USAGE_CACHE_CREATION_INPUT_TOKENS: &str = "gen_ai.usage.cache_creation.input_tokens";
/// `gen_ai.usage.reasoning.output_tokens` (reasoning tokens, where reported).
pub const USAGE_REASONING_OUTPUT_TOKENS: &str = "gen_ai.usage.reasoning.output_tokens";
/// `gen_ai.tool.name`.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`: `function` for agentloop's tools.
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.tool.call.arguments` (content capture only).
pub const TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (content capture only).
pub const TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// `gen_ai.input.messages` (content capture only).
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (content capture only).
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `gen_ai.system_instructions` (content capture only).
pub const SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// `gen_ai.token.type` on the token usage metric: `input` or `output`.
pub const TOKEN_TYPE: &str = "gen_ai.token.type";
/// `error.type`.
pub const ERROR_TYPE: &str = "error.type";

/// Metric `gen_ai.client.token.usage` (histogram, `{token}`).
pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
/// Metric `gen_ai.client.operation.duration` (histogram, `s`).
pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";

/// `agentloop.run.id`.
pub const RUN_ID: &str = "agentloop.run.id";
/// `agentloop.run.parent_id`: the run that started this one (a sub-agent's caller).
pub const PARENT_RUN_ID: &str = "agentloop.run.parent_id";
/// `agentloop.run.resumed`: the span is a stretch of a run continued from its journal.
pub const RUN_RESUMED: &str = "agentloop.run.resumed";
/// `agentloop.run.outcome`: the stop reason's kind (`completed`, `limit_reached`, …).
pub const RUN_OUTCOME: &str = "agentloop.run.outcome";
/// `agentloop.run.iterations`.
pub const RUN_ITERATIONS: &str = "agentloop.run.iterations";
/// `agentloop.run.cost_usd`: what the run cost so far, in USD (with a price).
pub const RUN_COST_USD: &str = "agentloop.run.cost_usd";
/// `agentloop.run.elapsed_ms`: the run's wall time so far (all its stretches).
pub const RUN_ELAPSED_MS: &str = "agentloop.run.elapsed_ms";
/// `agentloop.run.tool_calls`.
pub const RUN_TOOL_CALLS: &str = "agentloop.run.tool_calls";
/// `agentloop.iteration`: the 1-based iteration number.
pub const ITERATION: &str = "agentloop.iteration";
/// `agentloop.model.purpose`: `iteration` or `wind_down`.
pub const MODEL_PURPOSE: &str = "agentloop.model.purpose";
/// `agentloop.tool.status`: `ok`, `error` or `timeout`.
pub const TOOL_STATUS: &str = "agentloop.tool.status";
/// `agentloop.tool.duration_ms`: the tool's own time, as the run measured it.
pub const TOOL_DURATION_MS: &str = "agentloop.tool.duration_ms";
/// `agentloop.model.duration_ms`: the model call's time, as the run measured it.
pub const MODEL_DURATION_MS: &str = "agentloop.model.duration_ms";
/// `agentloop.model.answered_by`: the member of a fallback chain that answered the call
/// (`family:name`; the span's `gen_ai.provider.name` is then `fallback`).
pub const FALLBACK_MEMBER: &str = "agentloop.model.answered_by";

/// Metric `agentloop.runs` (counter): stretches of runs that ended, by `agentloop.run.outcome`.
pub const METRIC_RUNS: &str = "agentloop.runs";
/// Metric `agentloop.tool.calls` (counter): by `gen_ai.tool.name` and `agentloop.tool.status`.
pub const METRIC_TOOL_CALLS: &str = "agentloop.tool.calls";
/// Metric `agentloop.run.iterations` (histogram): iterations per ended run.
pub const METRIC_RUN_ITERATIONS: &str = "agentloop.run.iterations";
/// Metric `agentloop.run.cost` (counter, `USD`): cost of the ended runs.
pub const METRIC_RUN_COST: &str = "agentloop.run.cost";
/// Metric `agentloop.otel.spans.dropped` (observable counter): spans that never reached the
/// collector (queue full or export failed).
pub const METRIC_SPANS_DROPPED: &str = "agentloop.otel.spans.dropped";

/// The boundaries the conventions advise for `gen_ai.client.token.usage`.
pub const TOKEN_BOUNDARIES: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// The boundaries the conventions advise for `gen_ai.client.operation.duration` (seconds).
pub const DURATION_BOUNDARIES: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];

/// The `gen_ai.provider.name` of an agentloop provider family.
pub fn provider_name(family: &str) -> &str {
    match family {
        "gemini" => "gcp.gemini",
        "openai_responses" | "openai-responses" | "openai_compat" => "openai",
        other => other,
    }
}
