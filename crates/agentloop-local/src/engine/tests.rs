use super::*;

fn logits() -> Vec<f32> {
    (0..64).map(|i| ((i * 37 % 64) as f32) / 16.0).collect()
}

fn draw(params: SamplingParams, n: usize) -> Vec<u32> {
    let mut sampler = Sampler::new(params);
    (0..n).map(|_| sampler.sample(logits(), None).unwrap()).collect()
}

#[test]
fn sampling_is_deterministic_for_a_seed() {
    let params = SamplingParams { temperature: 1.0, top_p: Some(0.95), seed: 7 };
    let first = draw(params, 32);
    assert_eq!(first, draw(params, 32));
    assert_ne!(first, draw(SamplingParams { seed: 8, ..params }, 32), "another seed, other draws");
    assert!(first.iter().collect::<std::collections::HashSet<_>>().len() > 1);
}

#[test]
fn zero_temperature_is_greedy() {
    let values = logits();
    let best =
        values.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i as u32).unwrap();
    let params = SamplingParams { temperature: 0.0, top_p: None, seed: 1 };
    assert!(draw(params, 5).iter().all(|&t| t == best));
}

#[test]
fn the_mask_is_obeyed() {
    for temperature in [0.0, 0.7] {
        let mut sampler = Sampler::new(SamplingParams { temperature, top_p: Some(0.9), seed: 3 });
        let allowed = |id: u32| id % 10 == 3;
        for _ in 0..20 {
            let token = sampler.sample(logits(), Some(&allowed)).unwrap();
            assert_eq!(token % 10, 3);
        }
        let none = |_: u32| false;
        assert!(matches!(sampler.sample(logits(), Some(&none)), Err(LocalError::Grammar(_))));
    }
}

#[test]
fn stats_rates() {
    let stats = GenerationStats {
        prompt_tokens: 100,
        completion_tokens: 11,
        finish: Finish::Length,
        prompt_eval: Duration::from_millis(500),
        first_token: Duration::from_millis(600),
        total: Duration::from_millis(1600),
    };
    assert!((stats.prompt_tokens_per_second() - 200.0).abs() < 1e-9);
    assert!((stats.generation_tokens_per_second() - 10.0).abs() < 1e-9);
}

#[test]
fn loading_errors_are_clear() {
    let missing = Path::new("/nonexistent/model.gguf");
    let error = load(missing, Dequantize::Auto).err().unwrap();
    assert!(matches!(error, LocalError::Io { .. }));
    assert!(error.to_string().contains("/nonexistent/model.gguf"), "{error}");
    let dir = std::env::temp_dir().join(format!("agentloop-local-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"this is not a gguf file at all").unwrap();
    let error = load(&junk, Dequantize::Auto).err().unwrap();
    assert!(matches!(error, LocalError::Gguf { .. }), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn architectures_by_name() {
    assert_eq!(Architecture::from_gguf_name("llama").unwrap(), Architecture::Llama);
    assert_eq!(Architecture::from_gguf_name("gemma3").unwrap(), Architecture::Gemma3);
    let error = Architecture::from_gguf_name("mamba").unwrap_err();
    assert!(matches!(error, LocalError::UnsupportedArchitecture(ref name) if name == "mamba"));
    assert_eq!(Architecture::Gemma3.max_context(), GEMMA3_MAX_CONTEXT);
    assert_eq!(Architecture::Llama.max_context(), 4096);
    assert_eq!(Architecture::Gemma3.key_prefix(), "gemma3");
    assert!(Architecture::Llama.default_chat_template().is_none());
}

mod gemma3_template {
    use super::super::Architecture;
    use crate::template::{chat_messages, ChatMessage, ChatTemplate};
    use agentloop::message::{Message, Part, ToolCall, ToolResult};
    use agentloop::provider::{ModelRequest, PromptedProtocol, ToolChoice};
    use agentloop::tool::ToolSpec;
    use serde_json::json;

    /// Gemma 3's own template, as Google ships it with the instruction-tuned models.
    const OFFICIAL: &str = r#"{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}
"#;

    fn builtin() -> ChatTemplate {
        let source = Architecture::Gemma3.default_chat_template().unwrap();
        ChatTemplate::new(source, "<bos>", "<eos>").unwrap()
    }

    #[test]
    fn the_system_message_is_folded_into_the_first_user_turn() {
        let messages = [
            ChatMessage::new("system", "You are terse."),
            ChatMessage::new("user", "Hi "),
            ChatMessage::new("assistant", "Hello."),
            ChatMessage::new("user", "Bye"),
        ];
        let expected = "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n\
                        <start_of_turn>model\nHello.<end_of_turn>\n\
                        <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n";
        assert_eq!(builtin().render(&messages, None, true).unwrap(), expected);
        // The official template renders the same with MiniJinja.
        let official = ChatTemplate::new(OFFICIAL, "<bos>", "<eos>").unwrap();
        assert_eq!(official.render(&messages, None, true).unwrap(), expected);
        assert!(official
            .render(&messages[1..2], None, false)
            .unwrap()
            .ends_with("<end_of_turn>\n"));
        // The official one rejects turns that do not alternate; the built-in one does not.
        let twice = [ChatMessage::new("user", "a"), ChatMessage::new("user", "b")];
        assert!(official.render(&twice, None, true).is_err());
        assert_eq!(
            builtin().render(&twice, None, false).unwrap(),
            "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>user\nb<end_of_turn>\n"
        );
        let alone = [ChatMessage::new("system", "Rules.")];
        assert_eq!(
            builtin().render(&alone, None, true).unwrap(),
            "<bos><start_of_turn>user\nRules.<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    #[test]
    fn a_tool_conversation_goes_through_the_prompted_protocol() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "calculator".into(),
            arguments: r#"{"expression":"17 * 23"}"#.into(),
        };
        let mut assistant = Message::assistant("");
        assistant.content = vec![Part::ToolCall(call)];
        let result =
            ToolResult { call_id: "call_1".into(), content: json!(391.0).into(), is_error: false };
        let request = ModelRequest::default().with_instructions("You are terse.").with_messages(vec![
                Message::user("What is 17 multiplied by 23?"),
                assistant,
                Message::tool_results([result]),
            ]).with_tools(vec![ToolSpec {
                name: "calculator".into(),
                description: "Evaluate an arithmetic expression.".into(),
                parameters: json!({"type": "object", "properties": {"expression": {"type": "string"}}}),
            }]).with_tool_choice(ToolChoice::Auto);
        let rewritten = PromptedProtocol::default().rewrite(request);
        let messages = chat_messages(&rewritten).unwrap();
        let prompt = builtin().render(&messages, None, true).unwrap();
        let official = ChatTemplate::new(OFFICIAL, "<bos>", "<eos>").unwrap();
        assert_eq!(official.render(&messages, None, true).unwrap(), prompt);
        assert!(prompt.starts_with("<bos><start_of_turn>user\nYou are terse."), "{prompt}");
        assert!(prompt.contains("calculator"), "{prompt}");
        assert!(prompt.contains("<start_of_turn>model\n<tool_call>"), "{prompt}");
        assert!(prompt.contains("<tool_response>"), "{prompt}");
        assert!(prompt.ends_with("<end_of_turn>\n<start_of_turn>model\n"), "{prompt}");
        assert_eq!(prompt.matches("<start_of_turn>").count(), 4, "{prompt}");
    }
}

/// A constraint whose mask fails (llguidance's lexer bounds) is dropped, not the generation.
#[test]
fn a_failing_constraint_is_dropped_and_the_output_goes_on() {
    struct Failing;
    impl Constraint for Failing {
        fn mask(&mut self) -> Result<Option<Vec<bool>>, LocalError> {
            Err(LocalError::Grammar("mask: lexer error: too many expressions constructed".into()))
        }
        fn forced(&mut self) -> Result<Vec<u32>, LocalError> {
            Ok(vec![7])
        }
        fn commit(&mut self, _token: u32) -> Result<(), LocalError> {
            Ok(())
        }
        fn is_finished(&self) -> bool {
            false
        }
    }
    let mut constraint: Option<Box<dyn Constraint>> = Some(Box::new(Failing));
    assert_eq!(constrained(&mut constraint, |c| c.forced()), Some(vec![7]));
    assert!(constraint.is_some(), "a step that works keeps it");
    assert_eq!(constrained(&mut constraint, |c| c.mask()), None);
    assert!(constraint.is_none(), "a step that fails drops it");
    assert_eq!(constrained(&mut constraint, |c| c.forced()), None, "then nothing constrains");
}
