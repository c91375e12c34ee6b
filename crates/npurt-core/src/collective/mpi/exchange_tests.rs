//! [`Exchange`]'s poll loop against the fake MPI (`fake_mpi.rs`): completion and the fold,
//! a timeout naming the missing peer then a resume, a desync, an abort notice, closing.

use super::exchange::Outcome;
use super::fake_mpi::{exchange, region, NOTICES};
use super::plan::{Call, HEADER_BYTES};
use crate::collective::{CollKind, HcclDataType, ReduceOp};
use std::time::{Duration, Instant};

fn all_reduce(count: u64) -> Call {
    Call {
        kind: CollKind::AllReduce,
        seq: 1,
        dtype: HcclDataType::Fp32,
        count,
        op: ReduceOp::Sum,
        root: 0,
        eager: true,
    }
}

#[test]
fn completes_times_out_naming_the_missing_peer_and_resumes() {
    let (mut x0, mut x1) = (exchange(1, 0, 2), exchange(1, 1, 2));
    let (mut a, mut b) = (vec![1.5f32; 100], vec![2.25f32; 100]);
    let (ra, rb) = (region(&mut a), region(&mut b));
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    assert_eq!(
        x0.run(all_reduce(100), Some(&ra), Some(ra.clone()), soon, 0, never),
        Outcome::Timeout(vec![1])
    );
    assert!(x0.pending() && x0.missing() == vec![1]);
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x1.run(all_reduce(100), Some(&rb), Some(rb.clone()), later, 0, never),
        Outcome::Done
    );
    assert_eq!(x0.resume(later, 0, never), Outcome::Done);
    assert!(!x0.pending());
    assert!(a.iter().chain(&b).all(|&v| v == 3.75), "{:?} {:?}", &a[..3], &b[..3]);
    assert_eq!(x0.close(), Ok(()));
    assert_eq!(x1.close(), Ok(()));
}

#[test]
fn differing_headers_end_in_desync_with_every_header() {
    let (mut x0, mut x1) = (exchange(2, 0, 2), exchange(2, 1, 2));
    let (mut a, mut b) = (vec![1.0f32; 100], vec![1.0f32; 99]);
    let (ra, rb) = (region(&mut a), region(&mut b));
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    assert!(matches!(
        x0.run(all_reduce(100), Some(&ra), Some(ra.clone()), soon, 0, never),
        Outcome::Timeout(_)
    ));
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x1.run(all_reduce(99), Some(&rb), Some(rb.clone()), later, 0, never),
        Outcome::Desync
    );
    assert_eq!(x0.resume(later, 0, never), Outcome::Desync);
    let heads = x1.headers();
    assert_eq!(heads.len(), 2 * HEADER_BYTES);
    assert_eq!(heads[..HEADER_BYTES], all_reduce(100).header());
    assert_eq!(heads[HEADER_BYTES..], all_reduce(99).header());
    assert!(a.iter().chain(&b).all(|&v| v == 1.0)); // nothing written
}

#[test]
fn an_abort_notice_ends_the_wait() {
    let mut x0 = exchange(3, 0, 3);
    let mut a = vec![1.0f32; 8];
    let ra = region(&mut a);
    NOTICES.lock().unwrap_or_else(|e| e.into_inner()).push(0xABC);
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x0.run(all_reduce(8), Some(&ra), Some(ra.clone()), later, 0xABC, &mut || false),
        Outcome::Notice
    );
    assert!(x0.pending() && x0.missing() == vec![1, 2]);
    // a second collective while one is pending is refused, not started
    assert_eq!(
        x0.run(all_reduce(8), Some(&ra), Some(ra.clone()), later, 0, &mut || false),
        Outcome::Mpi(-2)
    );
}
