//! The two-phase data phase (`data.rs`) against the fake MPI (`fake_mpi.rs`): all_gather
//! point to point through `MPI_Irecv` (a stalled data phase times out naming nobody, then
//! resumes), refusals, and an MPI error from a data call.

use super::exchange::{Exchange, Outcome};
use super::fake_mpi::{exchange, region, NO_COLL};
use super::ffi::DataHandles;
use super::plan::Call;
use crate::collective::{CollKind, HcclDataType, ReduceOp};
use std::time::{Duration, Instant};

/// `exchange` with the data phase on (its data communicator: test number + 100).
fn two_phase_exchange(test: usize, rank: usize, n: usize) -> Exchange {
    let mut x = exchange(test, rank, n);
    x.set_data(DataHandles {
        comm: (test + 100) << 8 | rank,
        in_place: 1,
        dtypes: [5; 12],
        ops: [6; 4],
        p2p_gather_max: 8,
    });
    x
}

fn gather(kind: CollKind, count: u64) -> Call {
    Call {
        kind,
        seq: 1,
        dtype: HcclDataType::Fp32,
        count,
        op: ReduceOp::Sum,
        root: 0,
        eager: false,
    }
}

#[test]
fn two_phase_all_gather_runs_its_data_phase_point_to_point() {
    let (mut x0, mut x1) = (two_phase_exchange(4, 0, 2), two_phase_exchange(4, 1, 2));
    let (mut a, mut b) = (vec![1.5f32; 300], vec![2.5f32; 300]);
    let (mut oa, mut ob) = (vec![0f32; 600], vec![0f32; 600]);
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    let c = gather(CollKind::AllGather, 300);
    // rank 0 alone: its peer's header never came
    assert_eq!(
        x0.run_two_phase(c, Some(region(&mut a)), Some(region(&mut oa)), soon, 0, never),
        Outcome::Timeout(vec![1])
    );
    // rank 1: headers agree, the data phase starts; rank 0 has not sent its part yet:
    // a timeout naming nobody (every rank arrived)
    let soon = Instant::now() + Duration::from_millis(3);
    assert_eq!(
        x1.run_two_phase(c, Some(region(&mut b)), Some(region(&mut ob)), soon, 0, never),
        Outcome::Timeout(vec![])
    );
    assert!(x1.pending());
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(x0.resume(later, 0, never), Outcome::Done);
    assert_eq!(x1.resume(later, 0, never), Outcome::Done);
    assert!(!x0.pending() && !x1.pending());
    for o in [&oa, &ob] {
        assert!(o[..300].iter().all(|&v| v == 1.5) && o[300..].iter().all(|&v| v == 2.5));
    }
    // a buffer too small, or a call whose data phase is not native: refused, nothing sent
    let later = Instant::now() + Duration::from_secs(5);
    assert_eq!(
        x0.run_two_phase(c, Some(region(&mut a)), Some(region(&mut oa[..599])), later, 0, never),
        Outcome::Mpi(-3)
    );
    let avg = Call {
        kind: CollKind::AllReduce,
        op: ReduceOp::Avg,
        ..c
    };
    assert_eq!(
        x0.run_two_phase(avg, Some(region(&mut a)), Some(region(&mut a.clone())), later, 0, never),
        Outcome::Mpi(-3)
    );
    assert!(!x0.pending());
}

#[test]
fn an_mpi_error_from_a_data_call_ends_the_two_phase_call() {
    let (mut x0, mut x1) = (two_phase_exchange(5, 0, 2), two_phase_exchange(5, 1, 2));
    let (mut a, mut b) = (vec![1f32; 64], vec![2f32; 64]);
    let never = &mut || false;
    let soon = Instant::now() + Duration::from_millis(3);
    let c = gather(CollKind::Broadcast, 64);
    assert_eq!(
        x0.run_two_phase(c, None, Some(region(&mut a)), soon, 0, never),
        Outcome::Timeout(vec![1])
    );
    let later = Instant::now() + Duration::from_secs(5);
    // (the fake has no MPI_Ibcast: its error code comes back; MPI owns the buffers then)
    assert_eq!(
        x1.run_two_phase(c, None, Some(region(&mut b)), later, 0, never),
        Outcome::Mpi(NO_COLL)
    );
    assert!(x1.pending());
    std::mem::forget(x1);
}
