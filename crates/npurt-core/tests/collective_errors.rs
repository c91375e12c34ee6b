//! The collective engine's failures on the `local` transport: a missing rank times out
//! naming it, a desync is reported on every rank with what each called, a rank that leaves
//! fails the others, bad arguments are typed errors before anything runs.

mod common;

use common::{desc, ranks, region};
use npurt_core::collective::{local, CollKind, CollectiveError, ReduceOp};
use std::time::Duration;

#[test]
fn a_missing_rank_times_out_with_its_name() {
    let out = ranks(3, Duration::from_secs(20), |r, c| {
        let mut x = vec![1f32; 4];
        if r == 2 {
            std::thread::sleep(Duration::from_millis(600));
        }
        c.run(
            desc(CollKind::AllReduce, 4, ReduceOp::Sum, 0),
            Some(region(&mut x)),
            Some(region(&mut x)),
            Some(Duration::from_millis(200)),
        )
    });
    for (r, e) in out.iter().enumerate() {
        let e = e.as_ref().unwrap_err();
        assert_eq!(e.class_name(), "CollectiveTimeoutError", "rank {r}: {e}");
        let s = e.to_string();
        assert!(s.contains("collective #0"), "{s}");
        if r < 2 {
            assert!(s.contains("rank(s) 2 never arrived"), "{s}");
        }
    }
}

#[test]
fn desync_is_reported_on_every_rank() {
    let out = ranks(3, Duration::from_secs(20), |r, c| {
        let mut x = vec![1f32; 4];
        let kind = if r == 1 {
            CollKind::Broadcast
        } else {
            CollKind::AllReduce
        };
        c.run(
            desc(kind, 4, ReduceOp::Sum, 0),
            Some(region(&mut x)),
            Some(region(&mut x)),
            None,
        )
    });
    for e in &out {
        let e = e.as_ref().unwrap_err();
        assert!(matches!(e, CollectiveError::Desync { seq: 0, .. }), "{e}");
        let s = e.to_string();
        assert!(
            s.contains("ranks 0, 2 called all_reduce(float32 x 4, sum)") && s.contains("rank 1 called broadcast"),
            "{s}"
        );
    }
}

#[test]
fn a_rank_that_leaves_fails_the_others() {
    let out = ranks(2, Duration::from_secs(20), |r, c| {
        let mut x = vec![1f32; 4];
        if r == 1 {
            c.destroy();
            return None;
        }
        Some(c.run(
            desc(CollKind::AllReduce, 4, ReduceOp::Sum, 0),
            Some(region(&mut x)),
            Some(region(&mut x)),
            None,
        ))
    });
    let e = out[0].clone().unwrap().unwrap_err();
    assert_eq!(e.class_name(), "RankFailedError");
    assert!(e.to_string().contains("rank 1 left the group"), "{e}");
}

#[test]
fn bad_arguments_are_typed_errors() {
    let c = local::init_all(2, Duration::from_secs(1)).unwrap().remove(0);
    let mut x = vec![0f32; 2];
    let e = c
        .run(
            desc(CollKind::AllReduce, 4, ReduceOp::Sum, 0),
            Some(region(&mut x)),
            Some(region(&mut x)),
            None,
        )
        .unwrap_err();
    assert!(
        matches!(e, CollectiveError::Param { .. }) && e.to_string().contains("holds 8 bytes, 16 needed"),
        "{e}"
    );
    let e = c
        .run(
            desc(CollKind::Broadcast, 2, ReduceOp::Sum, 5),
            Some(region(&mut x)),
            Some(region(&mut x)),
            None,
        )
        .unwrap_err();
    assert!(e.to_string().contains("root 5 is out of range"), "{e}");
    assert!(local::init_all(0, Duration::from_secs(1)).is_err());
    assert!(local::join("t-bad", 3, 2, Duration::from_secs(1)).is_err());
}
