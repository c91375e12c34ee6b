//! The queue's tests: positions, order, growth; loom models of push/pop and growth.

#[cfg(not(loom))]
mod unit {
    use super::super::*;
    use std::sync::Arc;

    #[test]
    fn fifo_and_positions() {
        let q = TaskQueue::new(4);
        assert_eq!(q.capacity(), 4);
        for i in 0..4 {
            assert_eq!(q.push(i).unwrap(), i as u64);
        }
        assert_eq!(q.push(99), Err(99), "full ring gives the value back");
        assert_eq!(q.pop(), Some(0));
        assert_eq!(q.push(4).unwrap(), 4);
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, vec![1, 2, 3, 4]);
        assert!(q.is_empty());
    }

    #[test]
    fn drop_releases_queued_values() {
        let marker = Arc::new(());
        let q = TaskQueue::new(8);
        for _ in 0..5 {
            q.push(marker.clone()).unwrap();
        }
        drop(q);
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn many_producers_keep_their_order() {
        const P: usize = 4;
        const N: usize = 20_000;
        let q = Arc::new(TaskQueue::new(64));
        let handles: Vec<_> = (0..P)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..N {
                        let mut v = (p, i);
                        while let Err(back) = q.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0usize; P];
        let mut got = 0;
        while got < P * N {
            if let Some((p, i)) = q.pop() {
                assert_eq!(i, next[p], "producer {p} out of order");
                next[p] += 1;
                got += 1;
            } else {
                std::thread::yield_now();
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(q.is_empty());
    }

    #[test]
    fn grows_from_a_small_ring_keeping_positions_and_order() {
        let q = TaskQueue::with_first_ring(1024, 4);
        assert_eq!((q.capacity(), q.depth()), (4, 1024));
        for i in 0..3 {
            q.push(i).unwrap();
        }
        assert_eq!(q.pop(), Some(0));
        // 2 queued; fill past 4 so the ring grows (16, then 64) while values stay queued.
        for i in 3..40u64 {
            assert_eq!(q.push(i).unwrap(), i);
        }
        assert_eq!(q.capacity(), 64);
        assert_eq!(q.len(), 39);
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(got, (1..40).collect::<Vec<_>>());
        assert!(q.is_empty());
        // Laps of the new ring after the old ones were drained.
        for i in 40..400u64 {
            assert_eq!(q.push(i).unwrap(), i);
            assert!(!q.is_empty());
            assert_eq!(q.pop(), Some(i));
        }
        assert_eq!(q.tail(), 400);
    }

    #[test]
    fn a_full_queue_of_the_full_depth_gives_the_value_back() {
        // Rings of 2, 8 and 32 slots: the depth bounds the largest ring, and the values
        // still in the older rings when it was added may come on top (at most a third more).
        let q = TaskQueue::with_first_ring(32, 2);
        let mut n = 0u64;
        while q.push(n).is_ok() {
            n += 1;
        }
        assert_eq!(q.capacity(), 32);
        assert!((32..=32 * 4 / 3).contains(&n), "{n} queued");
        assert_eq!(q.push(99), Err(99));
        // Room in the newest ring once its slot for the tail, position n - 32, is taken.
        let first: Vec<_> = (0..n - 32).map(|_| q.pop().unwrap()).collect();
        assert_eq!(q.push(n), Err(n));
        assert_eq!(q.pop(), Some(n - 32));
        assert_eq!(q.push(n).unwrap(), n);
        let got: Vec<_> = first
            .into_iter()
            .chain(std::iter::once(n - 32))
            .chain(std::iter::from_fn(|| q.pop()))
            .collect();
        assert_eq!(got, (0..=n).collect::<Vec<_>>());
    }

    #[test]
    fn many_producers_keep_their_order_while_it_grows() {
        const P: usize = 4;
        const N: usize = 20_000;
        let q = Arc::new(TaskQueue::with_first_ring(4096, 2));
        let handles: Vec<_> = (0..P)
            .map(|p| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..N {
                        let mut v = (p, i);
                        while let Err(back) = q.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0usize; P];
        let mut got = 0;
        while got < P * N {
            if let Some((p, i)) = q.pop() {
                assert_eq!(i, next[p], "producer {p} out of order");
                next[p] += 1;
                got += 1;
            } else {
                std::thread::yield_now();
            }
        }
        for h in handles {
            h.join().unwrap();
        }
        assert!(q.is_empty());
    }

    #[test]
    fn drop_releases_values_in_every_ring() {
        let marker = Arc::new(());
        let q = TaskQueue::with_first_ring(64, 2);
        for _ in 0..40 {
            q.push(marker.clone()).unwrap();
        }
        drop(q);
        assert_eq!(Arc::strong_count(&marker), 1);
    }
}

#[cfg(loom)]
mod loom_tests {
    use super::super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// Two producers push two values each while the consumer pops concurrently: nothing is
    /// lost or duplicated and each producer's order is kept.
    #[test]
    fn loom_mpsc_order() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::new(4));
            let producers: Vec<_> = (0..2u32)
                .map(|p| {
                    let q = q.clone();
                    thread::spawn(move || {
                        q.push(p * 10).unwrap();
                        q.push(p * 10 + 1).unwrap();
                    })
                })
                .collect();
            let mut seen = Vec::new();
            for _ in 0..2 {
                if let Some(v) = q.pop() {
                    seen.push(v);
                }
            }
            for h in producers {
                h.join().unwrap();
            }
            while let Some(v) = q.pop() {
                seen.push(v);
            }
            assert_eq!(seen.len(), 4);
            for p in 0..2u32 {
                let mine: Vec<_> = seen.iter().copied().filter(|v| v / 10 == p).collect();
                assert_eq!(mine, vec![p * 10, p * 10 + 1]);
            }
        });
    }

    /// A full ring: a push racing a pop either fails (value handed back) or lands after the
    /// old values, never overwriting one.
    #[test]
    fn loom_full_ring_wraps_safely() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::new(2));
            q.push(0u32).unwrap();
            q.push(1).unwrap();
            let q2 = q.clone();
            let producer = thread::spawn(move || q2.push(2).is_ok());
            let first = q.pop();
            let pushed = producer.join().unwrap();
            assert_eq!(first, Some(0));
            let mut rest = Vec::new();
            while let Some(v) = q.pop() {
                rest.push(v);
            }
            if pushed {
                assert_eq!(rest, vec![1, 2]);
            } else {
                assert_eq!(rest, vec![1]);
            }
        });
    }

    /// Two producers push two values each into a ring of 2 slots that grows to 8 while the
    /// consumer pops: nothing lost or duplicated, each producer's order kept, and a value
    /// pushed into the old ring is popped before the new ring's.
    #[test]
    fn loom_growth_races_pushes_and_pops() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::with_first_ring(8, 2));
            q.push(100u32).unwrap();
            let producers: Vec<_> = (0..2u32)
                .map(|p| {
                    let q = q.clone();
                    thread::spawn(move || {
                        q.push(p * 10).unwrap();
                        q.push(p * 10 + 1).unwrap();
                    })
                })
                .collect();
            let mut seen = Vec::new();
            if let Some(v) = q.pop() {
                seen.push(v);
            }
            for h in producers {
                h.join().unwrap();
            }
            while let Some(v) = q.pop() {
                seen.push(v);
            }
            assert_eq!(seen.len(), 5);
            assert_eq!(seen[0], 100);
            for p in 0..2u32 {
                let mine: Vec<_> = seen.iter().copied().filter(|v| *v < 100 && v / 10 == p).collect();
                assert_eq!(mine, vec![p * 10, p * 10 + 1]);
            }
            assert_eq!(q.tail(), 5);
        });
    }
    /// The owner peeks before it pops (what `executor::start` does to leave a kernel for
    /// a worker) while a producer pushes into a ring of 2 that grows: whatever the peek
    /// saw is exactly what the next pop returns, and nothing is lost.
    #[test]
    fn loom_peek_sees_what_pop_takes() {
        loom::model(|| {
            let q = Arc::new(TaskQueue::with_first_ring(8, 2));
            q.push(0u32).unwrap();
            q.push(1).unwrap();
            let q2 = q.clone();
            let producer = thread::spawn(move || {
                q2.push(2).unwrap();
                q2.push(3).unwrap();
            });
            let mut seen = Vec::new();
            for _ in 0..3 {
                match q.peek(|v| *v) {
                    Some(v) => {
                        assert_eq!(q.pop(), Some(v));
                        seen.push(v);
                    }
                    None => assert!(seen.len() >= 2, "0 and 1 were queued before the producer ran"),
                }
            }
            producer.join().unwrap();
            while let Some(v) = q.peek(|v| *v) {
                assert_eq!(q.pop(), Some(v));
                seen.push(v);
            }
            assert_eq!(q.pop(), None);
            assert_eq!(seen, vec![0, 1, 2, 3]);
        });
    }
}
