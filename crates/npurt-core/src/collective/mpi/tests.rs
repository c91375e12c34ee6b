//! The protocol without MPI: every rank's messages are built and delivered into the
//! receivers' rows as MPI would, each rank completes the collective; results against a
//! plain rank-order fold.

use super::plan::{
    fill, finish, headers_agree, inbox_bytes, one_phase, Call, Msg, EAGER_FIT, HEADER_BYTES, MAX_EAGER, MAX_RANKS,
};
use crate::collective::types::{CollKind, HcclDataType, ReduceOp};
use half::{bf16, f16};

const ROW: usize = HEADER_BYTES + 4096;

fn call(kind: CollKind, dtype: HcclDataType, count: u64, op: ReduceOp, root: u32) -> Call {
    Call {
        kind,
        seq: 3,
        dtype,
        count,
        op,
        root,
        eager: true,
    }
}

/// Runs `c` on `inputs.len()` simulated ranks; returns each rank's output bytes
/// (`out_bytes` long, in place when `inplace`: the output starts as the input).
fn simulate(c: &Call, inputs: &[Vec<u8>], out_bytes: usize, inplace: bool) -> Vec<Vec<u8>> {
    let n = inputs.len();
    let mut inboxes = vec![vec![0xEEu8; n * ROW]; n];
    let mut outs: Vec<Vec<u8>> = inputs
        .iter()
        .map(|x| if inplace { x.clone() } else { vec![0; out_bytes] })
        .collect();
    let mut sent = Vec::new();
    for r in 0..n {
        let mut outbox = vec![0u8; (n - 1) * ROW];
        let src = if inplace { outs[r].clone() } else { inputs[r].clone() };
        let msgs = fill(c, r, n, &src, &mut inboxes[r][r * ROW..(r + 1) * ROW], &mut outbox, ROW);
        assert_eq!(
            msgs.iter().map(|m| m.0).collect::<Vec<_>>(),
            (0..n).filter(|&p| p != r).collect::<Vec<_>>()
        );
        for (p, m) in msgs {
            let bytes = match m {
                Msg::Own(len) => inboxes[r][r * ROW..r * ROW + len].to_vec(),
                Msg::Chunk(i, len) => outbox[i * ROW..i * ROW + len].to_vec(),
            };
            assert_eq!(bytes[..HEADER_BYTES], c.header());
            sent.push((r, p, bytes));
        }
    }
    for (r, p, bytes) in sent {
        inboxes[p][r * ROW..r * ROW + bytes.len()].copy_from_slice(&bytes);
    }
    for r in 0..n {
        assert!(headers_agree(n, &inboxes[r], ROW));
        finish(c, r, n, &inboxes[r], ROW, &mut outs[r]);
    }
    outs
}

fn bytes_of<T: Copy>(v: &[T]) -> Vec<u8> {
    let n = std::mem::size_of_val(v);
    // SAFETY: plain-old-data elements viewed as their `n` bytes.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), n) }.to_vec()
}

#[test]
fn header_layout_is_the_python_one() {
    let c = call(CollKind::Broadcast, HcclDataType::Fp32, 4, ReduceOp::Max, 2);
    let h = c.header();
    let f: Vec<i64> = h
        .chunks_exact(8)
        .map(|b| i64::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(f, vec![0x6E70_7572, 3, 2, 4, 4, -1, 2, 1]); // broadcast: no op
    let r = call(CollKind::AllReduce, HcclDataType::Bfp16, 9, ReduceOp::Avg, 1).header();
    let f: Vec<i64> = r
        .chunks_exact(8)
        .map(|b| i64::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(f, vec![0x6E70_7572, 3, 1, 11, 9, 4, -1, 1]); // all_reduce: no root
}

#[test]
fn f32_all_reduce_folds_in_rank_order_in_place() {
    for n in [2usize, 3, 4] {
        let k = 300;
        let xs: Vec<Vec<f32>> = (0..n)
            .map(|r| (0..k).map(|i| 0.1 * (i * (r + 1)) as f32 + 1e7 * r as f32).collect())
            .collect();
        let c = call(CollKind::AllReduce, HcclDataType::Fp32, k as u64, ReduceOp::Sum, 0);
        let outs = simulate(&c, &xs.iter().map(|x| bytes_of(x)).collect::<Vec<_>>(), k * 4, true);
        let want: Vec<f32> = (0..k).map(|i| (1..n).fold(xs[0][i], |a, r| a + xs[r][i])).collect();
        for o in outs {
            assert_eq!(o, bytes_of(&want));
        }
    }
}

#[test]
fn half_precision_accumulates_in_f32_and_rounds_once() {
    let n = 4;
    let k = 64;
    let vals: Vec<Vec<f32>> = (0..n)
        .map(|r| (0..k).map(|i| 1.0 + (i as f32) * 0.013 + r as f32 * 0.0007).collect())
        .collect();
    let h: Vec<Vec<f16>> = vals
        .iter()
        .map(|v| v.iter().map(|&x| f16::from_f32(x)).collect())
        .collect();
    let b: Vec<Vec<bf16>> = vals
        .iter()
        .map(|v| v.iter().map(|&x| bf16::from_f32(x)).collect())
        .collect();
    for op in [ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max] {
        let c = call(CollKind::AllReduce, HcclDataType::Fp16, k as u64, op, 0);
        let outs = simulate(&c, &h.iter().map(|x| bytes_of(x)).collect::<Vec<_>>(), k * 2, false);
        let acc = |i: usize, get: &dyn Fn(usize) -> f32| -> f32 {
            let mut a = get(0);
            for r in 1..n {
                a = match op {
                    ReduceOp::Max => a.max(get(r)),
                    _ => a + get(r),
                };
            }
            if op == ReduceOp::Avg {
                a / n as f32
            } else {
                let _ = i;
                a
            }
        };
        let want: Vec<f16> = (0..k).map(|i| f16::from_f32(acc(i, &|r| h[r][i].to_f32()))).collect();
        assert!(outs.iter().all(|o| *o == bytes_of(&want)));
        let c = call(CollKind::AllReduce, HcclDataType::Bfp16, k as u64, op, 0);
        let outs = simulate(&c, &b.iter().map(|x| bytes_of(x)).collect::<Vec<_>>(), k * 2, false);
        let want: Vec<bf16> = (0..k).map(|i| bf16::from_f32(acc(i, &|r| b[r][i].to_f32()))).collect();
        assert!(outs.iter().all(|o| *o == bytes_of(&want)));
    }
}

#[test]
fn data_movement_and_rooted_collectives() {
    let n = 3;
    let k = 6; // int32 elements per input
    let xs: Vec<Vec<i32>> = (0..n)
        .map(|r| (0..k as i32).map(|i| i + 100 * r as i32).collect())
        .collect();
    let xb: Vec<Vec<u8>> = xs.iter().map(|x| bytes_of(x)).collect();
    let all: Vec<i32> = xs.concat();
    let c = call(CollKind::AllGather, HcclDataType::Int32, k as u64, ReduceOp::Sum, 0);
    assert!(simulate(&c, &xb, n * k * 4, false).iter().all(|o| *o == bytes_of(&all)));
    let c = call(CollKind::Broadcast, HcclDataType::Int32, k as u64, ReduceOp::Sum, 2);
    assert!(simulate(&c, &xb, k * 4, true).iter().all(|o| *o == xb[2]));
    // all_to_all: rank r gets chunk r of every rank (k / n = 2 elements each)
    let c = call(CollKind::AllToAll, HcclDataType::Int32, k as u64, ReduceOp::Sum, 0);
    let outs = simulate(&c, &xb, k * 4, false);
    for (r, o) in outs.iter().enumerate() {
        let want: Vec<i32> = (0..n).flat_map(|p| xs[p][r * 2..r * 2 + 2].to_vec()).collect();
        assert_eq!(*o, bytes_of(&want));
    }
    // reduce_scatter (count: the whole input's elements): rank r gets the sum of chunk r
    let c = call(CollKind::ReduceScatter, HcclDataType::Int32, k as u64, ReduceOp::Sum, 0);
    let outs = simulate(&c, &xb, 2 * 4, false);
    for (r, o) in outs.iter().enumerate() {
        let want: Vec<i32> = (0..2).map(|j| (0..n).map(|p| xs[p][r * 2 + j]).sum()).collect();
        assert_eq!(*o, bytes_of(&want));
    }
    // reduce to root 1: the others' outputs untouched
    let c = call(CollKind::Reduce, HcclDataType::Int32, k as u64, ReduceOp::Min, 1);
    let outs = simulate(&c, &xb, k * 4, false);
    assert_eq!(outs[1], xb[0]);
    assert!(outs[0].iter().chain(&outs[2]).all(|&b| b == 0));
}

#[test]
fn differing_headers_are_seen() {
    let n = 3;
    let mut rows = vec![0u8; n * ROW];
    for p in 0..n {
        let k = if p == 2 { 5 } else { 4 };
        rows[p * ROW..p * ROW + HEADER_BYTES]
            .copy_from_slice(&call(CollKind::AllReduce, HcclDataType::Fp32, k, ReduceOp::Sum, 0).header());
    }
    assert!(!headers_agree(n, &rows, ROW));
    let first = rows[..HEADER_BYTES].to_vec();
    rows[2 * ROW..2 * ROW + HEADER_BYTES].copy_from_slice(&first);
    assert!(headers_agree(n, &rows, ROW));
    let mut header_only = call(CollKind::AllReduce, HcclDataType::Fp32, 4, ReduceOp::Sum, 0);
    header_only.eager = false;
    let mut own = vec![0u8; ROW];
    let msgs = fill(&header_only, 1, n, &[], &mut own, &mut [], ROW);
    assert_eq!(msgs, vec![(0, Msg::Own(HEADER_BYTES)), (2, Msg::Own(HEADER_BYTES))]);
    assert_ne!(own[..HEADER_BYTES], rows[..HEADER_BYTES]); // the path is part of the header
}

#[test]
fn which_calls_take_the_one_phase_path() {
    let f32s = |kind, count| call(kind, HcclDataType::Fp32, count, ReduceOp::Sum, 0);
    let f16 = |count| call(CollKind::AllReduce, HcclDataType::Fp16, count, ReduceOp::Sum, 0);
    let avg = |count| call(CollKind::AllReduce, HcclDataType::Fp32, count, ReduceOp::Avg, 0);
    let lim = MAX_EAGER;
    // up to the limit when the data phase would not run natively (float16, AVG)...
    assert!(one_phase(&f16(lim as u64 / 2), 4, lim, true));
    assert!(!one_phase(&f16(lim as u64 / 2 + 1), 4, lim, true));
    assert!(one_phase(&avg(lim as u64 / 4), 4, lim, true));
    // ...else up to the size where two phases win, per kind (bytes per peer)
    for (kind, from) in [
        (CollKind::AllReduce, 32 << 10),
        (CollKind::Broadcast, EAGER_FIT),
        (CollKind::AllGather, EAGER_FIT),
    ] {
        assert!(one_phase(&f32s(kind, from as u64 / 4), 4, lim, true), "{kind:?}");
        assert!(!one_phase(&f32s(kind, from as u64 / 4 + 1), 4, lim, true), "{kind:?}");
    }
    // ...but to the limit when ranks share cores (each extra round waits for a context switch)
    assert!(one_phase(&f32s(CollKind::AllGather, lim as u64 / 4), 4, lim, false));
    assert!(!one_phase(
        &f32s(CollKind::AllGather, lim as u64 / 4 + 1),
        4,
        lim,
        false
    ));
    // per-peer chunks: the input may be n times larger
    assert!(one_phase(&f32s(CollKind::ReduceScatter, lim as u64), 4, lim, true));
    assert!(!one_phase(&f32s(CollKind::ReduceScatter, lim as u64 + 4), 4, lim, true));
    assert!(one_phase(&f32s(CollKind::AllToAll, EAGER_FIT as u64), 4, lim, true));
    assert!(!one_phase(
        &f32s(CollKind::AllToAll, EAGER_FIT as u64 + 4),
        4,
        lim,
        true
    ));
    assert!(one_phase(&f32s(CollKind::Barrier, 0), 4, lim, true));
    // point-to-point calls never take it
    assert!(!one_phase(&f32s(CollKind::Send, 1), 4, lim, true));
    assert!(!one_phase(&f32s(CollKind::Recv, 1), 4, lim, true));
    // a group of one, a group too large, the path off, a limit above the rows' size
    assert!(!one_phase(&f32s(CollKind::AllReduce, 1), 1, lim, true));
    assert!(!one_phase(&f32s(CollKind::AllReduce, 1), MAX_RANKS + 1, lim, true));
    assert!(!one_phase(&f32s(CollKind::AllReduce, 1), 4, 0, true));
    assert!(!one_phase(&f16(lim as u64 / 2 + 1), 4, 10 * lim, true));
    assert_eq!(inbox_bytes(4), HEADER_BYTES + MAX_EAGER);
    assert_eq!(inbox_bytes(MAX_RANKS + 1), HEADER_BYTES);
    assert_eq!(inbox_bytes(1), HEADER_BYTES);
}
