//! OpenAI-compatible servers by configuration: a [`Dialect`] (what the server accepts) and a
//! [`Compat`] preset (where it is, how to authenticate, and its dialect).

use crate::provider::http::HttpConfig;
use secrecy::SecretString;

/// What an OpenAI-compatible server accepts, where it differs from OpenAI's own API.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Dialect {
    /// Instructions and developer messages go out as `developer` messages (OpenAI); when
    /// false, as `system` messages (most compatible servers).
    pub developer_role: bool,
    /// Streamed chat requests ask for usage with `stream_options.include_usage`.
    pub stream_usage: bool,
    /// The name of the output token limit in chat requests: `max_completion_tokens` (OpenAI)
    /// or `max_tokens`.
    pub max_tokens_field: &'static str,
    /// How `ToolChoice::Required` is written (`required`; Mistral also takes `any`).
    pub tool_choice_required: &'static str,
    /// Responses API: the `store` value sent (`None`: left out). Requests are always
    /// stateless (the whole history is sent; `previous_response_id` never is).
    pub responses_store: Option<bool>,
    /// Responses API: asks for `reasoning.encrypted_content`, which lets reasoning items be
    /// sent back on the next turn without server-side storage.
    pub responses_encrypted_reasoning: bool,
    /// Chat: an assistant message with tool calls in the current turn (after the last user
    /// message) carries its reasoning back as `reasoning_content`, as DeepSeek's thinking
    /// mode requires within a tool loop (it answers 400 without it). Reasoning of earlier
    /// turns is never sent.
    pub reasoning_content_in_tool_loop: bool,
    /// Chat: the server takes `response_format: {"type": "json_schema"}` (structured
    /// output). When it does not, a request with an output schema asks for
    /// `{"type": "json_object"}` (JSON, unconstrained by the schema) and the provider does not
    /// offer native output (a run then uses its final-answer tool).
    pub json_schema_output: bool,
}

impl Dialect {
    /// OpenAI's own API.
    pub fn openai() -> Self {
        Self {
            developer_role: true,
            stream_usage: true,
            max_tokens_field: "max_completion_tokens",
            tool_choice_required: "required",
            responses_store: Some(false),
            responses_encrypted_reasoning: true,
            reasoning_content_in_tool_loop: false,
            json_schema_output: true,
        }
    }

    /// What most compatible servers accept: `system` instructions, `max_tokens`,
    /// `stream_options`, plain stateless Responses requests.
    pub fn compatible() -> Self {
        Self {
            developer_role: false,
            stream_usage: true,
            max_tokens_field: "max_tokens",
            tool_choice_required: "required",
            responses_store: None,
            responses_encrypted_reasoning: false,
            reasoning_content_in_tool_loop: false,
            json_schema_output: true,
        }
    }

    /// Sets [`developer_role`](Self::developer_role).
    pub fn developer_role(mut self, on: bool) -> Self {
        self.developer_role = on;
        self
    }

    /// Sets [`stream_usage`](Self::stream_usage).
    pub fn stream_usage(mut self, on: bool) -> Self {
        self.stream_usage = on;
        self
    }

    /// Sets [`max_tokens_field`](Self::max_tokens_field).
    pub fn max_tokens_field(mut self, field: &'static str) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// Sets [`tool_choice_required`](Self::tool_choice_required).
    pub fn tool_choice_required(mut self, value: &'static str) -> Self {
        self.tool_choice_required = value;
        self
    }

    /// Sets [`responses_store`](Self::responses_store).
    pub fn responses_store(mut self, store: Option<bool>) -> Self {
        self.responses_store = store;
        self
    }

    /// Sets [`responses_encrypted_reasoning`](Self::responses_encrypted_reasoning).
    pub fn responses_encrypted_reasoning(mut self, on: bool) -> Self {
        self.responses_encrypted_reasoning = on;
        self
    }

    /// Sets [`json_schema_output`](Self::json_schema_output).
    pub fn json_schema_output(mut self, on: bool) -> Self {
        self.json_schema_output = on;
        self
    }

    /// Sets [`reasoning_content_in_tool_loop`](Self::reasoning_content_in_tool_loop).
    pub fn reasoning_content_in_tool_loop(mut self, on: bool) -> Self {
        self.reasoning_content_in_tool_loop = on;
        self
    }
}

/// An OpenAI-compatible server: its base URL, its API key (or where it comes from), extra
/// headers, whether requests stream, and its [`Dialect`]. Start from a preset (or
/// [`Compat::custom`]) and adjust:
///
/// ```
/// use agentloop::provider::openai::{Compat, OpenAi};
///
/// let preset = Compat::llama_cpp().base_url("http://127.0.0.1:8091/v1");
/// let provider = OpenAi::compatible(preset, "local")?;
///
/// // Any server, with a key; not streamed, instructions as `developer` messages.
/// let server = Compat::custom("https://llm.internal/v1")
///     .api_key("sk-…")
///     .streaming(false)
///     .developer_role(true);
/// let provider = OpenAi::compatible(server, "qwen2.5-32b")?;
/// # Ok::<(), agentloop::provider::http::HttpConfigError>(())
/// ```
///
/// Defaults: requests stream (SSE; [`streaming`](Self::streaming)), and instructions go out
/// as `system` messages — `developer` only in the [`openai`](Self::openai) preset (see
/// [`Dialect::developer_role`]; [`developer_role`](Self::developer_role) changes it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Compat {
    /// A short name (`openai`, `ollama`, …).
    pub name: &'static str,
    /// The API's base URL (paths such as `/chat/completions` are appended).
    pub base_url: String,
    /// The API key, when given explicitly (it takes precedence over
    /// [`api_key_env`](Self::api_key_env)); sent as `Authorization: Bearer <key>`, or in
    /// [`api_key_header`](Self::api_key_header) when set.
    pub api_key: Option<SecretString>,
    /// The environment variable holding the API key, if any.
    pub api_key_env: Option<String>,
    /// Whether a key is required (building fails without one).
    pub require_api_key: bool,
    /// Headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// The header the key is sent in instead of `Authorization: Bearer` (Azure's `api-key`).
    pub api_key_header: Option<String>,
    /// Query parameters of every request (Azure's `api-version`).
    pub query: Vec<(String, String)>,
    /// Streamed requests do not reuse their connection (see
    /// [`HttpConfig::close_streamed_connections`]).
    pub close_streamed_connections: bool,
    /// Whether requests ask for a streamed (SSE) response (default: yes; see
    /// [`HttpConfig::streaming`]).
    pub streaming: bool,
    /// What the server accepts.
    pub dialect: Dialect,
}

impl Compat {
    fn preset(
        name: &'static str,
        base_url: &str,
        api_key_env: Option<&str>,
        require_api_key: bool,
        dialect: Dialect,
    ) -> Self {
        Self {
            name,
            base_url: base_url.to_owned(),
            api_key: None,
            api_key_env: api_key_env.map(str::to_owned),
            require_api_key,
            headers: Vec::new(),
            api_key_header: None,
            query: Vec::new(),
            close_streamed_connections: false,
            streaming: true,
            dialect,
        }
    }

    /// OpenAI's API (`OPENAI_API_KEY`, required).
    pub fn openai() -> Self {
        Self::preset(
            "openai",
            "https://api.openai.com/v1",
            Some("OPENAI_API_KEY"),
            true,
            Dialect::openai(),
        )
    }

    /// Ollama's OpenAI-compatible endpoint on its default port (no key).
    pub fn ollama() -> Self {
        Self::preset("ollama", "http://localhost:11434/v1", None, false, Dialect::compatible())
    }

    /// A vLLM server on its default port (`VLLM_API_KEY` when it was started with a key).
    pub fn vllm() -> Self {
        Self::preset(
            "vllm",
            "http://localhost:8000/v1",
            Some("VLLM_API_KEY"),
            false,
            Dialect::compatible(),
        )
    }

    /// A llama.cpp `llama-server` on its default port (`LLAMA_API_KEY` when it was started
    /// with `--api-key`). Its Responses endpoint is stateless and rejects
    /// `previous_response_id`, which is never sent.
    pub fn llama_cpp() -> Self {
        Self::preset(
            "llama.cpp",
            "http://127.0.0.1:8080/v1",
            Some("LLAMA_API_KEY"),
            false,
            Dialect::compatible(),
        )
    }

    /// LM Studio's local server on its default port (no key; usage not requested in streams).
    pub fn lm_studio() -> Self {
        Self::preset(
            "lm-studio",
            "http://localhost:1234/v1",
            Some("LM_API_TOKEN"),
            false,
            Dialect::compatible().stream_usage(false),
        )
    }

    /// A LiteLLM proxy on its default port (`LITELLM_API_KEY`: the proxy's key, if set).
    pub fn litellm() -> Self {
        Self::preset(
            "litellm",
            "http://localhost:4000/v1",
            Some("LITELLM_API_KEY"),
            false,
            Dialect::compatible(),
        )
    }

    /// OpenRouter (`OPENROUTER_API_KEY`, required; it always sends usage, so none is asked
    /// for).
    pub fn openrouter() -> Self {
        Self::preset(
            "openrouter",
            "https://openrouter.ai/api/v1",
            Some("OPENROUTER_API_KEY"),
            true,
            Dialect::compatible().stream_usage(false),
        )
    }

    /// Groq (`GROQ_API_KEY`, required).
    pub fn groq() -> Self {
        Self::preset(
            "groq",
            "https://api.groq.com/openai/v1",
            Some("GROQ_API_KEY"),
            true,
            Dialect::compatible(),
        )
    }

    /// Together AI (`TOGETHER_API_KEY`, required; usage not requested in streams).
    pub fn together() -> Self {
        Self::preset(
            "together",
            "https://api.together.xyz/v1",
            Some("TOGETHER_API_KEY"),
            true,
            Dialect::compatible().stream_usage(false),
        )
    }

    /// DeepSeek (`DEEPSEEK_API_KEY`, required; `reasoning_content` is read from its reasoning
    /// models, and sent back only with the tool calls of the current turn, as its thinking
    /// mode requires; JSON output only as `json_object`, so structured output goes through the
    /// final-answer tool).
    pub fn deepseek() -> Self {
        Self::preset(
            "deepseek",
            "https://api.deepseek.com/v1",
            Some("DEEPSEEK_API_KEY"),
            true,
            Dialect::compatible().reasoning_content_in_tool_loop(true).json_schema_output(false),
        )
    }

    /// Mistral (`MISTRAL_API_KEY`, required; `any` for a required tool call, usage not
    /// requested in streams).
    pub fn mistral() -> Self {
        Self::preset(
            "mistral",
            "https://api.mistral.ai/v1",
            Some("MISTRAL_API_KEY"),
            true,
            Dialect::compatible().stream_usage(false).tool_choice_required("any"),
        )
    }

    /// Azure OpenAI, the v1 API of a resource: `{endpoint}/openai/v1` (`endpoint` as
    /// `https://NAME.openai.azure.com`, the `AZURE_OPENAI_ENDPOINT` of Azure's tools), the
    /// key in the `api-key` header from `AZURE_OPENAI_API_KEY` (required; or a Microsoft
    /// Entra token: [`entra_token_env`](Self::entra_token_env)), OpenAI's dialect. The model
    /// is the deployment's name. Chat completions and the Responses API alike.
    pub fn azure(endpoint: &str) -> Self {
        let base = format!("{}/openai/v1", endpoint.trim_end_matches('/'));
        let mut azure =
            Self::preset("azure", &base, Some("AZURE_OPENAI_API_KEY"), true, Dialect::openai());
        azure.api_key_header = Some("api-key".to_owned());
        azure
    }

    /// Azure OpenAI through a deployment's URL, as before the v1 API:
    /// `{endpoint}/openai/deployments/{deployment}` with `?api-version={api_version}` on every
    /// request (e.g. `2024-10-21`); the key as in [`azure`](Self::azure). Chat completions.
    pub fn azure_deployment(endpoint: &str, deployment: &str, api_version: &str) -> Self {
        let mut azure = Self::azure(endpoint);
        azure.base_url =
            format!("{}/openai/deployments/{deployment}", endpoint.trim_end_matches('/'));
        azure.query.push(("api-version".to_owned(), api_version.to_owned()));
        azure
    }

    /// Authenticates with a Microsoft Entra ID token read from the variable `name` (sent as
    /// `Authorization: Bearer`), instead of an Azure key in `api-key`.
    pub fn entra_token_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self.api_key_header = None;
        self
    }

    /// Another server: `base_url`, no key, streamed requests, the common
    /// [`Dialect::compatible`] dialect (`system` instructions).
    pub fn custom(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            ..Self::preset("custom", "", None, false, Dialect::compatible())
        }
    }

    /// Sets the base URL.
    pub fn base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Sets the API key (it takes precedence over the environment variable).
    pub fn api_key(mut self, key: impl Into<SecretString>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sets the environment variable the API key is read from.
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// Sets whether a key is required.
    pub fn require_api_key(mut self, required: bool) -> Self {
        self.require_api_key = required;
        self
    }

    /// Adds a header sent with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets whether streamed requests reuse their connection.
    pub fn close_streamed_connections(mut self, close: bool) -> Self {
        self.close_streamed_connections = close;
        self
    }

    /// Sets whether requests stream (default: yes). With `false` every request asks for the
    /// whole response at once: no deltas while the model writes, for servers or proxies that
    /// cannot stream.
    pub fn streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Sets the role instructions (and developer messages) are sent with: `developer` when
    /// true, `system` when false (see [`Dialect::developer_role`]).
    pub fn developer_role(mut self, on: bool) -> Self {
        self.dialect.developer_role = on;
        self
    }

    /// Sets the dialect.
    pub fn dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// The HTTP configuration of this server for `model`, to adjust (timeouts, the retry
    /// policy) before building with [`OpenAi::chat_with`](super::OpenAi::chat_with) or
    /// [`OpenAi::responses_with`](super::OpenAi::responses_with).
    pub fn config(&self, model: impl Into<String>) -> HttpConfig {
        let mut config = HttpConfig::new(self.base_url.clone(), model)
            .require_api_key(self.require_api_key)
            .close_streamed_connections(self.close_streamed_connections)
            .streaming(self.streaming);
        if let Some(key) = &self.api_key {
            config = config.api_key(key.clone());
        }
        if let Some(env) = &self.api_key_env {
            config = config.api_key_env(env.clone());
        }
        for (name, value) in &self.headers {
            config = config.header(name.clone(), value.clone());
        }
        if let Some(name) = &self.api_key_header {
            config = config.api_key_header(name.clone());
        }
        for (name, value) in &self.query {
            config = config.query_param(name, value);
        }
        config
    }
}
