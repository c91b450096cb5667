use super::*;
use futures::{FutureExt, StreamExt};
use std::sync::atomic::{AtomicUsize, Ordering};

fn text(n: usize) -> Event {
    Event::TextDelta { delta: n.to_string() }
}

fn texts(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            Event::TextDelta { delta } => delta.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn hands_out_every_event_in_order_then_ends() {
    let outbox = Arc::new(Outbox::default());
    let out = outbox.clone();
    let stream = Driven::new(outbox, async move {
        out.push([text(1), text(2)]);
        out.send([text(3)]).await;
        tokio::task::yield_now().await;
        out.push(Some(text(4)));
        out.send(std::iter::empty()).await;
        out.push([text(5)]);
    });
    let events: Vec<Event> = stream.collect().await;
    assert_eq!(texts(&events), ["1", "2", "3", "4", "5"]);
}

#[tokio::test]
async fn send_waits_until_the_caller_has_taken_the_events() {
    // What the driver did after each send, as the caller saw it when it took each event.
    let progress = Arc::new(AtomicUsize::new(0));
    let outbox = Arc::new(Outbox::default());
    let (out, steps) = (outbox.clone(), progress.clone());
    let mut stream = Driven::new(outbox, async move {
        out.send([text(1), text(2)]).await;
        steps.store(1, Ordering::SeqCst);
        out.send([text(3)]).await;
        steps.store(2, Ordering::SeqCst);
    });
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        seen.push((texts(&[event]).remove(0), progress.load(Ordering::SeqCst)));
    }
    // The driver went on past a send only after both of its events were taken.
    assert_eq!(seen, [("1".into(), 0), ("2".into(), 0), ("3".into(), 1)]);
    assert_eq!(progress.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn pending_without_events_waits_for_the_future_wakeup() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let outbox = Arc::new(Outbox::default());
    let out = outbox.clone();
    let mut stream = Driven::new(outbox, async move {
        out.send([text(1)]).await;
        let _ = rx.await;
        out.send([text(2)]).await;
    });
    assert_eq!(texts(&[stream.next().await.unwrap_or(text(0))]), ["1"]);
    // Nothing to hand out until the future is woken.
    let waited = tokio::time::timeout(std::time::Duration::from_millis(20), stream.next()).await;
    assert!(waited.is_err(), "the stream must wait for the driver");
    let _ = tx.send(());
    assert_eq!(texts(&[stream.next().await.unwrap_or(text(0))]), ["2"]);
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn dropping_the_stream_drops_the_driver() {
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = Guard(dropped.clone());
    let outbox = Arc::new(Outbox::default());
    let out = outbox.clone();
    let mut stream = Driven::new(outbox, async move {
        let _guard = guard;
        out.send([text(1)]).await;
        std::future::pending::<()>().await;
    });
    assert!(stream.next().await.is_some());
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    drop(stream);
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
}

/// `size_hint`'s lower bound is what the stream hands out without polling the future again
/// (the journal takes that many and appends them together before the driver goes on).
#[tokio::test]
async fn size_hint_counts_the_events_ready_without_running_the_driver() {
    let progress = Arc::new(AtomicUsize::new(0));
    let outbox = Arc::new(Outbox::default());
    let (out, steps) = (outbox.clone(), progress.clone());
    let mut stream = Driven::new(outbox, async move {
        out.push([text(1)]);
        out.send([text(2), text(3)]).await;
        steps.store(1, Ordering::SeqCst);
        out.send([text(4)]).await;
    });
    assert_eq!(stream.size_hint(), (0, None), "nothing made before the first poll");
    assert_eq!(texts(&[stream.next().await.unwrap()]), ["1"]);
    assert_eq!(stream.size_hint(), (2, None));
    let mut taken = Vec::new();
    while stream.size_hint().0 > 0 {
        taken.push(stream.next().now_or_never().unwrap().unwrap());
    }
    assert_eq!(texts(&taken), ["2", "3"]);
    assert_eq!(progress.load(Ordering::SeqCst), 0, "the driver did not go on");
    assert_eq!(texts(&[stream.next().await.unwrap()]), ["4"]);
    assert_eq!(progress.load(Ordering::SeqCst), 1);
    assert!(stream.next().await.is_none());
    assert_eq!(stream.size_hint(), (0, Some(0)));
}
