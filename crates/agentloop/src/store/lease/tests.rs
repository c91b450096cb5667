#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const TTL: Duration = Duration::from_millis(1_000);

#[test]
fn a_claim_takes_a_free_released_or_expired_lease_with_the_next_epoch() {
    let free = LeaseRecord::default();
    let first = free.claim("r", "a", 100, TTL).unwrap();
    assert_eq!((first.epoch, first.expires_at_ms, first.owner.as_str()), (1, 1_100, "a"));
    let held = LeaseRecord::of(&first);
    let error = held.claim("r", "b", 600, TTL).unwrap_err();
    assert_eq!(
        error,
        StoreError::LeaseHeld { run_id: "r".into(), owner: "a".into(), expires_in_ms: 500 }
    );
    assert!(error.to_string().contains("expires in 500 ms"), "{error}");
    // The holder cannot claim again either: a second executor in its process is refused.
    assert!(held.claim("r", "a", 600, TTL).is_err());
    // Expired: taken over, one epoch up.
    let second = held.claim("r", "b", 1_100, TTL).unwrap();
    assert_eq!(second.epoch, 2);
    // Released: free at once, and the epoch still grows.
    let released = LeaseRecord { owner: String::new(), epoch: 2, expires_at_ms: 0 };
    assert_eq!(released.claim("r", "c", 0, TTL).unwrap().epoch, 3);
}

#[test]
fn only_the_current_claim_holds_the_lease() {
    let record = LeaseRecord { owner: "b".into(), epoch: 2, expires_at_ms: 0 };
    let current = Lease { run_id: "r".into(), owner: "b".into(), epoch: 2, expires_at_ms: 5 };
    assert!(record.holds(&current), "expired but not taken over: still the lease");
    let stale = Lease { owner: "a".into(), epoch: 1, ..current.clone() };
    assert!(!record.holds(&stale));
    let error = lost(&stale, &record);
    assert!(error.to_string().contains("epoch 1 was taken over ('b' holds epoch 2)"), "{error}");
}

#[test]
fn owner_ids_are_unique() {
    assert_ne!(new_owner_id(), new_owner_id());
    assert!(new_owner_id().starts_with(&format!("pid{}-", std::process::id())));
    assert_eq!(ttl_ms(Duration::ZERO), 1);
}
