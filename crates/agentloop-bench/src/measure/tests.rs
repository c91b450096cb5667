#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn cpu_time_advances_with_work() {
    let before = process_cpu();
    let thread_before = thread_cpu();
    let mut x = 0u64;
    for i in 0..5_000_000u64 {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    assert!(process_cpu() > before);
    assert!(thread_cpu() > thread_before);
}

#[test]
fn peak_rss_is_read_from_proc() {
    let hwm = status_kb("VmHWM").unwrap();
    assert!(hwm > 100, "{hwm} kB");
    assert_eq!(status_kb("NoSuchField"), None);
}
