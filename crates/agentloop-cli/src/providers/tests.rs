#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::preset_named;

#[test]
fn every_preset_the_config_accepts_is_one_the_cli_can_build() {
    // `config::PRESETS` (checked when the file is read) and `preset_named` (used to build
    // the provider) are two lists: they must name the same presets.
    for name in crate::config::PRESETS {
        assert!(preset_named(name).is_ok(), "{name}");
    }
    assert!(preset_named("not-a-preset").is_err());
}
