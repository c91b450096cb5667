#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::otel::SPANS_PER_RUN;

#[test]
fn ticks_are_read_after_a_command_with_spaces() {
    // pid (comm) state ppid … utime stime: the command may hold spaces and parentheses.
    let stat = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 17 23 0 0";
    assert_eq!(ticks(stat), (17, 23));
    assert_eq!(ticks("garbage"), (0, 0));
}

#[test]
fn a_thread_of_this_process_is_found_and_its_cpu_read() {
    let before = tids();
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        // 30 ms of this thread's own CPU time, however busy the machine is.
        let mut x = 0u64;
        while measure::thread_cpu() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        tx.send(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
        stop_rx.recv().unwrap();
    });
    let tid = rx.recv().unwrap();
    let new: Vec<i32> = tids().difference(&before).copied().collect();
    assert!(new.contains(&tid), "{new:?} lacks {tid}");
    let (ns, _, _) = thread_cpu(tid);
    assert!(ns >= 29_000_000, "a thread that spun for 30 ms of CPU time shows {ns} ns");
    stop_tx.send(()).unwrap();
    thread.join().unwrap();
    assert_eq!(thread_cpu(tid), (0, 0, 0), "an ended thread counts nothing");
}

#[test]
fn a_thread_that_ended_takes_nothing_from_the_others() {
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    let mine = thread_cpu(me);
    // No such thread (it ended): it reads as nothing, and its earlier reading is not
    // subtracted from the live thread's.
    let (ns, _, _) = since(&[i32::MAX, me], &[(u64::MAX / 2, 9, 9), mine]);
    assert!(ns < 1_000_000_000, "{ns}");
    assert_eq!(since(&[i32::MAX], &[(5, 5, 5)]), (0, 0, 0));
}

#[tokio::test(flavor = "current_thread")]
async fn interleaved_blocks_run_every_variant_fully_and_count_its_threads() {
    let plan = Plan {
        runs: 25,
        warmup: 5,
        repetitions: 2,
        variants: vec![Variant::Off, Variant::Observer, Variant::SpansOnly, Variant::Discard],
        endpoint: None,
        queue: None,
        batch: Some(8),
        model_url: None,
        recorded: false,
        export_cpu: None,
        // 25 runs in blocks of 10: three turns, the last of 5 runs.
        block: Some(10),
    };
    let mut seen = 0;
    let samples = crate::otel::run(&plan, |_| seen += 1).await.unwrap();
    assert_eq!((samples.len(), seen), (8, 8));
    for sample in &samples {
        assert_eq!(sample.runs, 25);
        assert!(sample.cpu_us > 0.0 && sample.wall_us > 0.0, "{sample:?}");
        assert!(sample.settled_us >= sample.wall_us, "{sample:?}");
        match sample.variant {
            Variant::Off | Variant::Observer => assert!(sample.spans.is_none()),
            _ => {
                // The export thread (and the metrics reader's) were found and counted.
                let threads = sample.threads_us.unwrap();
                assert!(threads > 0.0 && threads < sample.cpu_us, "{sample:?}");
                let spans = sample.spans.unwrap();
                // Every run of the repetition (warm-up included) ended and exported its spans.
                assert_eq!(spans.exported, 30 * SPANS_PER_RUN, "{sample:?}");
                assert_eq!(spans.dropped, 0);
            }
        }
    }
    assert_eq!(samples.iter().filter(|s| s.repetition == 1).count(), 4);
    let with_export_cpu = Plan { export_cpu: Some(0), ..plan };
    let error = crate::otel::run(&with_export_cpu, |_| {}).await.unwrap_err();
    assert!(error.to_string().contains("--block"), "{error}");
}
