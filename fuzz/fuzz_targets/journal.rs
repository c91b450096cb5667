//! Journal entries as the stores keep them (one JSON entry a line), folded into a run:
//! never a panic; an entry that parses serializes and reads back equal; a run rebuilt from
//! a journal survives a snapshot round trip unchanged.
#![no_main]

use agentloop::event::Event;
use agentloop::run::Run;
use agentloop::store::JournalEntry;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut events: Vec<Event> = Vec::new();
    for line in data.split(|&b| b == b'\n') {
        if let Ok(entry) = serde_json::from_slice::<JournalEntry>(line) {
            let json = serde_json::to_vec(&entry).unwrap();
            let back: JournalEntry = serde_json::from_slice(&json).unwrap();
            assert_eq!(back, entry, "a journal entry changed in a round trip");
            events.push((*entry.event).clone());
        } else if let Ok(event) = serde_json::from_slice::<Event>(line) {
            let json = serde_json::to_vec(&event).unwrap();
            let back: Event = serde_json::from_slice(&json).unwrap();
            assert_eq!(back, event, "an event changed in a round trip");
            events.push(event);
        }
    }
    // The fold: each prefix of the journal, as a resume after a crash there would see it.
    for end in 1..=events.len() {
        let Ok(run) = Run::from_journal(&events[..end]) else { continue };
        let snapshot = serde_json::to_value(&run).unwrap();
        let restored = Run::from_snapshot(snapshot.clone()).unwrap();
        assert_eq!(serde_json::to_value(&restored).unwrap(), snapshot, "a snapshot changed");
    }
});
