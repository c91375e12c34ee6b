//! The collective engine on the `local` transport: every collective against a reference,
//! determinism, broadcast roots running ahead, streams, and rendezvous stress runs (its
//! failures: `collective_errors.rs`).

mod common;

use common::{desc, ranks, region};
use npurt_core::collective::{local, CollKind, ReduceOp, EAGER_BYTES};
use std::time::Duration;

fn input(rank: u32, n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32 * 0.37 + rank as f32 * 1.3).sin()).collect()
}

/// Elements per rank that keep every collective on the eager path (send side ≤
/// `EAGER_BYTES`) and that send every one down the general path.
const EAGER_N: usize = 7;
const GENERAL_N: usize = EAGER_BYTES / 4 + 3;

#[test]
fn every_collective_matches_the_reference_on_the_eager_path() {
    check_every_collective(EAGER_N);
}

#[test]
fn every_collective_matches_the_reference_on_the_general_path() {
    check_every_collective(GENERAL_N);
}

fn check_every_collective(n: usize) {
    let t = Duration::from_secs(20);
    // (11: more ranks than the eager path's inline peer list holds)
    for world in [1u32, 2, 3, 5, 11] {
        let out = ranks(world, t, move |r, c| {
            let w = world as usize;
            let mut res = Vec::new();
            let mut x = input(r, n);
            c.run(
                desc(CollKind::AllReduce, n as u64, ReduceOp::Sum, 0),
                Some(region(&mut x)),
                Some(region(&mut x)),
                None,
            )
            .unwrap();
            res.push(x);
            let mut b = input(r, n);
            c.run(
                desc(CollKind::Broadcast, n as u64, ReduceOp::Sum, world - 1),
                Some(region(&mut b)),
                Some(region(&mut b)),
                None,
            )
            .unwrap();
            res.push(b);
            let mut s = input(r, n);
            let mut g = vec![0f32; n * w];
            c.run(
                desc(CollKind::AllGather, n as u64, ReduceOp::Sum, 0),
                Some(region(&mut s)),
                Some(region(&mut g)),
                None,
            )
            .unwrap();
            res.push(g);
            let mut big = input(r, n * w);
            let mut rs = vec![0f32; n];
            c.run(
                desc(CollKind::ReduceScatter, n as u64, ReduceOp::Max, 0),
                Some(region(&mut big)),
                Some(region(&mut rs)),
                None,
            )
            .unwrap();
            res.push(rs);
            let mut a2a = vec![0f32; n * w];
            c.run(
                desc(CollKind::AllToAll, n as u64, ReduceOp::Sum, 0),
                Some(region(&mut big)),
                Some(region(&mut a2a)),
                None,
            )
            .unwrap();
            res.push(a2a);
            c.run(desc(CollKind::Barrier, 0, ReduceOp::Sum, 0), None, None, None)
                .unwrap();
            res
        });
        let w = world as usize;
        let small: Vec<Vec<f32>> = (0..world).map(|k| input(k, n)).collect();
        let big: Vec<Vec<f32>> = (0..world).map(|k| input(k, n * w)).collect();
        for (r, res) in out.iter().enumerate() {
            for i in 0..n {
                let sum = (1..w).fold(small[0][i], |a, k| a + small[k][i]);
                assert_eq!(res[0][i].to_bits(), sum.to_bits(), "all_reduce world {world}");
                assert_eq!(res[1][i], small[w - 1][i]);
                for j in 0..w {
                    assert_eq!(res[2][j * n + i], small[j][i]);
                    // all_to_all: chunk j of my output is chunk r of rank j's input
                    assert_eq!(res[4][j * n + i], big[j][r * n + i]);
                }
                let mx = (0..w).map(|k| big[k][r * n + i]).fold(f32::MIN, f32::max);
                assert_eq!(res[3][i], mx);
            }
        }
    }
}

#[test]
fn send_recv_pairs() {
    let out = ranks(2, Duration::from_secs(20), |r, c| {
        let mut x = vec![r as f32 + 1.0; 5];
        if r == 0 {
            c.run(
                desc(CollKind::Send, 5, ReduceOp::Sum, 1),
                Some(region(&mut x)),
                None,
                None,
            )
            .unwrap();
        } else {
            c.run(
                desc(CollKind::Recv, 5, ReduceOp::Sum, 0),
                None,
                Some(region(&mut x)),
                None,
            )
            .unwrap();
        }
        x
    });
    assert_eq!(out[1], vec![1.0; 5]);
}

#[test]
fn reductions_are_bitwise_deterministic() {
    let run = || {
        ranks(4, Duration::from_secs(20), |r, c| {
            let mut x: Vec<f32> = (0..1000)
                .map(|i| ((i * 7919 + r as usize * 104729) % 1000) as f32 * 1e-3 + 1e7 * (r % 2) as f32)
                .collect();
            c.run(
                desc(CollKind::AllReduce, 1000, ReduceOp::Sum, 0),
                Some(region(&mut x)),
                Some(region(&mut x)),
                None,
            )
            .unwrap();
            x.iter().map(|v| v.to_bits()).collect::<Vec<u32>>()
        })
    };
    let a = run();
    assert!(a.iter().all(|x| x == &a[0]), "ranks differ");
    assert_eq!(a, run());
}

#[test]
fn rendezvous_stress() {
    // Many small collectives back to back on 4 ranks: no lost wake-ups, no reordering.
    let out = ranks(4, Duration::from_secs(60), |r, c| {
        let mut acc = 0f64;
        for k in 0..300u32 {
            let mut x = vec![(r + k) as f32; 3];
            c.run(
                desc(CollKind::AllReduce, 3, ReduceOp::Sum, 0),
                Some(region(&mut x)),
                Some(region(&mut x)),
                None,
            )
            .unwrap();
            acc += x[0] as f64;
        }
        (acc, c.seq())
    });
    let expect: f64 = (0..300u32).map(|k| (0..4).map(|r| (r + k) as f64).sum::<f64>()).sum();
    for (acc, seq) in out {
        assert_eq!((acc, seq), (expect, 300));
    }
}

#[test]
fn broadcast_roots_running_ahead_never_see_overwritten_data() {
    // Runs of eager broadcasts from one root (which may run EAGER_DEPTH - 1 collectives
    // ahead of its slowest reader; readers dawdle now and then so that it does), an
    // all_reduce (a full barrier) between runs, the root changing, many times around the
    // ring of staging areas: every rank reads each collective's own value. (Without
    // `catch_up`'s flow control the root laps its readers and this fails.)
    let n = 4u32;
    let out = ranks(n, Duration::from_secs(60), move |r, c| {
        let mut bad = Vec::new();
        for k in 0..600u32 {
            let mut x = vec![(r * 1000 + k) as f32; 5];
            if k % 50 == 49 {
                let d = desc(CollKind::AllReduce, 5, ReduceOp::Sum, 0);
                c.run(d, Some(region(&mut x)), Some(region(&mut x)), None).unwrap();
                let want = (0..n).map(|q| (q * 1000 + k) as f32).sum::<f32>();
                if x[0] != want {
                    bad.push((k, x[0], want));
                }
                continue;
            }
            let root = (k / 50) % n;
            if r != root && k % 7 == r {
                std::thread::sleep(Duration::from_micros(200)); // a slow reader
            }
            let d = desc(CollKind::Broadcast, 5, ReduceOp::Sum, root);
            c.run(d, Some(region(&mut x)), Some(region(&mut x)), None).unwrap();
            let want = (root * 1000 + k) as f32;
            if x.iter().any(|&v| v != want) {
                bad.push((k, x[0], want));
            }
        }
        bad
    });
    for (r, bad) in out.iter().enumerate() {
        assert!(bad.is_empty(), "rank {r}: (collective, got, want) {bad:?}");
    }
}

#[test]
fn collectives_on_streams_of_one_device_never_wait_behind_each_other() {
    // Three ranks' collectives on three streams of device 0: each blocks a host-engine
    // thread at the rendezvous until all arrive, so the engine must not queue one behind
    // another (it grows a thread).
    let comms = local::init_all(3, Duration::from_secs(20)).unwrap();
    let ctx = npurt_core::current::current_context().unwrap();
    let streams: Vec<_> = (0..3).map(|_| ctx.create_stream(0).unwrap()).collect();
    let mut bufs: Vec<Vec<f32>> = (0..3).map(|r| vec![r as f32 + 1.0; 64]).collect();
    for round in 0..3 {
        for (r, c) in comms.iter().enumerate() {
            let reg = region(&mut bufs[r]);
            let (seq, launch) = npurt_core::collective::enqueue(
                c,
                &streams[r],
                desc(CollKind::AllReduce, 64, ReduceOp::Max, 0),
                Some(reg.clone()),
                Some(reg),
                None,
            )
            .unwrap();
            assert_eq!(seq, round);
            if let Err(p) = launch {
                streams[r].push_pending(p).unwrap();
            }
        }
    }
    for s in &streams {
        s.synchronize(Some(Duration::from_secs(30))).unwrap();
    }
    assert!(bufs.iter().all(|b| b.iter().all(|&v| v == 3.0)));
}

#[test]
fn barriers_back_to_back_never_look_like_a_desync() {
    // A barrier has no data phase: a rank that passes it may start the next collective
    // (overwriting its descriptor on the board) while a slower rank still compares the
    // ranks' descriptors of the barrier. That must never read as a desync.
    let out = ranks(3, Duration::from_secs(60), |r, c| {
        for k in 0..2000u32 {
            c.run(desc(CollKind::Barrier, 0, ReduceOp::Sum, 0), None, None, None)
                .map_err(|e| format!("rank {r} barrier {k}: {e}"))?;
            if k % 3 == 0 {
                let mut x = vec![r as f32; 2];
                c.run(
                    desc(CollKind::AllReduce, 2, ReduceOp::Sum, 0),
                    Some(region(&mut x)),
                    Some(region(&mut x)),
                    None,
                )
                .map_err(|e| format!("rank {r} all_reduce {k}: {e}"))?;
                if x[0] != 3.0 {
                    return Err(format!("rank {r} all_reduce {k}: {x:?}"));
                }
            }
        }
        Ok::<u64, String>(c.seq())
    });
    for (r, o) in out.iter().enumerate() {
        assert!(o.is_ok(), "rank {r}: {o:?}");
    }
}

#[test]
fn eager_and_general_collectives_interleave_with_send_recv() {
    // Each eager collective leaves without a closing barrier while its peers may still
    // read its staging half; the next collectives (eager on the other half, general on the
    // slots, send/recv on the mailboxes) must never disturb what is still being read.
    let out = ranks(3, Duration::from_secs(60), |r, c| {
        for k in 0..150u32 {
            let n = if k % 4 == 3 {
                GENERAL_N
            } else {
                EAGER_N + (k as usize % 5)
            };
            let mut x: Vec<f32> = (0..n).map(|i| (r * 1000 + k + i as u32 % 7) as f32).collect();
            c.run(
                desc(CollKind::AllReduce, n as u64, ReduceOp::Sum, 0),
                Some(region(&mut x)),
                Some(region(&mut x)),
                None,
            )
            .map_err(|e| format!("rank {r} all_reduce {k}: {e}"))?;
            for (i, v) in x.iter().enumerate() {
                let want = (0..3).map(|q| (q * 1000 + k + i as u32 % 7) as f32).sum::<f32>();
                if *v != want {
                    return Err(format!("rank {r} all_reduce {k} element {i}: {v} != {want}"));
                }
            }
            let mut g = vec![0f32; 3 * 4];
            let mut mine = vec![(r * 10 + k) as f32; 4];
            c.run(
                desc(CollKind::AllGather, 4, ReduceOp::Sum, 0),
                Some(region(&mut mine)),
                Some(region(&mut g)),
                None,
            )
            .map_err(|e| format!("rank {r} all_gather {k}: {e}"))?;
            if (0..3).any(|q| g[q * 4..q * 4 + 4].iter().any(|&v| v != (q as u32 * 10 + k) as f32)) {
                return Err(format!("rank {r} all_gather {k}: {g:?}"));
            }
            if k % 5 == 0 && r < 2 {
                let mut m = vec![(k + 1) as f32; 6];
                let kind = if r == 0 { CollKind::Send } else { CollKind::Recv };
                let (s, v) = if r == 0 {
                    (Some(region(&mut m)), None)
                } else {
                    m.fill(0.0);
                    (None, Some(region(&mut m)))
                };
                c.run(desc(kind, 6, ReduceOp::Sum, 1 - r), s, v, None)
                    .map_err(|e| format!("rank {r} send/recv {k}: {e}"))?;
                if m.iter().any(|&v| v != (k + 1) as f32) {
                    return Err(format!("rank {r} recv {k}: {m:?}"));
                }
            }
        }
        Ok::<u64, String>(c.seq())
    });
    for (r, o) in out.iter().enumerate() {
        assert_eq!(o, &Ok(300), "rank {r}");
    }
}
