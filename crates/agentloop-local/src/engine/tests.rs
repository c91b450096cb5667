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
