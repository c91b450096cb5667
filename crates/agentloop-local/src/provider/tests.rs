use super::*;

#[test]
fn settings_are_checked_before_loading() {
    let builder = || LocalModel::builder("/nonexistent/model.gguf");
    for (builder, needle) in [
        (builder().temperature(-1.0), "temperature"),
        (builder().temperature(f64::NAN), "temperature"),
        (builder().top_p(Some(0.0)), "top_p"),
        (builder().top_p(Some(1.5)), "top_p"),
        (builder().max_tokens(0), "max_tokens"),
        (builder().context_size(4), "context_size"),
    ] {
        let error = builder.build().unwrap_err();
        assert!(matches!(error, LocalError::Config(_)), "{error}");
        assert!(error.to_string().contains(needle), "{error}");
    }
    let error = builder().build().unwrap_err();
    assert!(matches!(error, LocalError::Io { .. }), "{error}");
}

#[test]
fn renders_the_prompt_and_names_the_model() {
    let Some(path) = crate::test_model_path() else { return };
    let model = LocalModel::builder(&path).context_size(2048).build().unwrap();
    assert_eq!(model.name(), "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(model.context_size(), 2048);
    assert!(model.supports_tools());
    let request = ModelRequest::new(vec![agentloop::message::Message::user("Hi")]);
    let prompt = model.render_prompt(&request).unwrap();
    assert!(
        prompt.ends_with("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
        "{prompt}"
    );
}

#[test]
fn the_chat_template_can_be_overridden() {
    let Some(path) = crate::test_model_path() else { return };
    let model = LocalModel::builder(&path)
        .chat_template("{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}")
        .build()
        .unwrap();
    let request = ModelRequest::default()
        .with_instructions("Be brief.")
        .with_messages(vec![agentloop::message::Message::user("Hi")]);
    assert_eq!(
        model.render_prompt(&request).unwrap(),
        "[system] Be brief.\n[user] Hi\n[assistant] "
    );
    let error = LocalModel::builder(&path).chat_template("{% if %}").build().unwrap_err();
    assert!(matches!(error, LocalError::Template(_)), "{error}");
}
