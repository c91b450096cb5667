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

#[test]
fn machine_cpu_counts_busy_and_idle_ticks() {
    let stat = "cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\n";
    let cpu = parse_machine_cpu(stat).unwrap();
    assert_eq!(cpu, MachineCpu { busy: 170, total: 990 });
    let later = MachineCpu { busy: 270, total: 1_190 };
    assert!((later.busy_since(cpu) - 0.5).abs() < 1e-9);
    assert_eq!(cpu.busy_since(cpu), 0.0);
    assert_eq!(parse_machine_cpu("intr 1 2 3\n"), None);
    assert!(machine_cpu().is_some_and(|c| c.total > 0), "this machine's /proc/stat");
}

#[test]
fn quantiles_are_nearest_rank() {
    let sorted = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
    assert_eq!(quantile(&sorted, 0.0), Some(1));
    assert_eq!(quantile(&sorted, 0.5), Some(6), "index 4.5 rounds to 5");
    assert_eq!(quantile(&sorted, 0.99), Some(10));
    assert_eq!(quantile(&sorted, 1.0), Some(10));
    assert_eq!(quantile::<u32>(&[], 0.5), None);
}
