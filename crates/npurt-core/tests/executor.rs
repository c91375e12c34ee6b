//! Executor behaviour: block splitting, ordering, concurrency, waits, errors, teardown.

mod common;

use common::*;
use npurt_core::{registry, Engine, ErrorKind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn every_block_runs_exactly_once() {
    let s = ctx(0).create_stream(0).unwrap();
    for n in [1u32, 2, 3, 17, 1000] {
        let k = Blocks::new(n);
        s.launch(k.clone(), n).unwrap();
        s.synchronize(None).unwrap();
        assert!(k.hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "blocks={n}");
    }
    s.destroy(false).unwrap();
}

#[test]
fn one_stream_runs_in_order_across_kernels_and_engines() {
    let s = ctx(0).create_stream(2).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    for i in 0..200u32 {
        let l = log.clone();
        if i % 3 == 0 {
            s.launch_engine(
                Engine::Host,
                Box::new(move || {
                    l.lock().unwrap().push(i);
                    Ok(())
                }),
            )
            .unwrap();
        } else {
            let k = FnKernel(move |b: npurt_core::BlockCtx| {
                if b.block_idx == 0 {
                    l.lock().unwrap().push(i);
                }
                Ok(())
            });
            s.launch(Arc::new(k), 1 + i % 4).unwrap();
        }
    }
    s.synchronize(None).unwrap();
    assert_eq!(*log.lock().unwrap(), (0..200).collect::<Vec<_>>());
    s.destroy(false).unwrap();
}

#[test]
fn streams_run_in_parallel() {
    let c = ctx(1);
    let (a, b) = (c.create_stream(0).unwrap(), c.create_stream(0).unwrap());
    let inside = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let k = {
        let (inside, max_seen) = (inside.clone(), max_seen.clone());
        Arc::new(FnKernel(move |_b| {
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_seen.fetch_max(now, Ordering::SeqCst);
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(30) && max_seen.load(Ordering::SeqCst) < 2 {
                std::hint::spin_loop();
            }
            inside.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }))
    };
    a.launch(k.clone(), 1).unwrap();
    b.launch(k, 1).unwrap();
    a.synchronize(None).unwrap();
    b.synchronize(None).unwrap();
    assert_eq!(
        max_seen.load(Ordering::SeqCst),
        2,
        "two streams never ran at the same time"
    );
    a.destroy(false).unwrap();
    b.destroy(false).unwrap();
}

#[test]
fn cross_stream_and_cross_device_waits() {
    let (c0, c1) = (ctx(0), ctx(1));
    let producer = c1.create_stream(0).unwrap();
    let consumer = c0.create_stream(0).unwrap();
    let flag = Arc::new(AtomicU64::new(0));
    let f = flag.clone();
    producer.launch(Arc::new(Spin(Duration::from_millis(20))), 1).unwrap();
    producer
        .launch_engine(
            Engine::Host,
            Box::new(move || {
                f.store(1, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
    let ev = c1.create_event(false).unwrap();
    ev.record(&producer).unwrap();
    consumer.wait_event(&ev).unwrap();
    let seen = Arc::new(AtomicU64::new(99));
    let (f, s2) = (flag.clone(), seen.clone());
    consumer
        .launch_engine(
            Engine::Host,
            Box::new(move || {
                s2.store(f.load(Ordering::SeqCst), Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
    consumer.synchronize(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 1, "consumer ran before the event's work");
    assert!(ev.query().unwrap());
    producer.destroy(false).unwrap();
    consumer.destroy(false).unwrap();
}

#[test]
fn sticky_error_is_per_stream() {
    let c = ctx(0);
    let bad = c.create_stream(0).unwrap();
    let good = c.create_stream(0).unwrap();
    let k = FnKernel(|b: npurt_core::BlockCtx| if b.block_idx == 1 { Err("boom".into()) } else { Ok(()) });
    bad.launch(Arc::new(k), 4).unwrap();
    let after = Blocks::new(1);
    let _ = bad.launch(after.clone(), 1);
    let err = bad.synchronize(None).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TaskFailed);
    assert_eq!(err.acl().code, 507015);
    assert!(err.to_string().contains("boom"), "{err}");
    assert!(bad.query().is_err(), "error is sticky");
    assert_eq!(
        after.hits[0].load(Ordering::Relaxed),
        0,
        "work after the failure must be skipped"
    );
    let ok = Blocks::new(2);
    good.launch(ok.clone(), 2).unwrap();
    good.synchronize(None).unwrap();
    assert_eq!(ok.hits[1].load(Ordering::Relaxed), 1);
    bad.destroy(true).unwrap();
    good.destroy(false).unwrap();
}

#[test]
fn panics_in_kernels_become_errors() {
    let s = ctx(0).create_stream(0).unwrap();
    s.launch(Arc::new(FnKernel(|_b| panic!("kernel panicked on purpose"))), 1)
        .unwrap();
    let err = s.synchronize(None).unwrap_err();
    assert!(err.to_string().contains("on purpose"), "{err}");
    s.destroy(true).unwrap();
}

#[test]
fn synchronize_times_out_then_completes() {
    let s = ctx(1).create_stream(0).unwrap();
    s.launch(Arc::new(Spin(Duration::from_millis(300))), 1).unwrap();
    let t = Instant::now();
    let err = s.synchronize(Some(Duration::from_millis(30))).unwrap_err();
    let waited = t.elapsed();
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.acl().code, 507046);
    assert!(
        waited >= Duration::from_millis(30) && waited < Duration::from_millis(280),
        "{waited:?}"
    );
    s.synchronize(None).unwrap();
    s.destroy(false).unwrap();
}

#[test]
fn force_destroy_drops_queued_work() {
    let s = ctx(0).create_stream(0).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    s.launch(Arc::new(Spin(Duration::from_millis(100))), 1).unwrap();
    for _ in 0..100 {
        let r = ran.clone();
        s.launch_engine(
            Engine::Host,
            Box::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }),
        )
        .unwrap();
    }
    s.destroy(true).unwrap();
    assert!(s.launch(Blocks::new(1), 1).is_err());
    std::thread::sleep(Duration::from_millis(250));
    assert!(ran.load(Ordering::SeqCst) < 100, "force destroy ran everything");
}

#[test]
fn timing_events_measure_device_time() {
    let c = ctx(0);
    let s = c.create_stream(0).unwrap();
    let (a, b) = (c.create_event(true).unwrap(), c.create_event(true).unwrap());
    a.record(&s).unwrap();
    s.launch(Arc::new(Spin(Duration::from_millis(20))), 1).unwrap();
    b.record(&s).unwrap();
    b.synchronize(None).unwrap();
    let ms = a.elapsed_ms(&b).unwrap();
    assert!((19.0..500.0).contains(&ms), "{ms}");
    let untimed = c.create_event(false).unwrap();
    untimed.record(&s).unwrap();
    assert_eq!(a.elapsed_ms(&untimed).unwrap_err().acl().code, 107006);
    s.destroy(false).unwrap();
}

#[test]
fn priorities_are_checked() {
    let c = ctx(0);
    for p in [-1i64, 8, 1 << 40] {
        let e = c.create_stream(p).unwrap_err();
        assert_eq!(e.acl().code, 107000);
    }
    for p in 0..=7 {
        c.create_stream(p).unwrap().destroy(false).unwrap();
    }
}

#[test]
fn host_blocking_calls_from_callbacks_are_refused() {
    let s = ctx(0).create_stream(0).unwrap();
    let s2 = s.clone();
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    s.launch_engine(
        Engine::Host,
        Box::new(move || {
            *g.lock().unwrap() = Some(s2.synchronize(None).map_err(|e| e.acl().code));
            Ok(())
        }),
    )
    .unwrap();
    s.synchronize(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(*got.lock().unwrap(), Some(Err(107000)));
    s.destroy(false).unwrap();
}

#[test]
fn backpressure_on_a_full_ring_keeps_everything() {
    // The ring holds 1024 tasks; submit far more than that while the stream is slow.
    let s = ctx(1).create_stream(0).unwrap();
    s.launch(Arc::new(Spin(Duration::from_millis(20))), 1).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..5000 {
        let c = count.clone();
        s.launch(
            Arc::new(FnKernel(move |_b| {
                c.fetch_add(1, Ordering::Relaxed);
                Ok(())
            })),
            1,
        )
        .unwrap();
    }
    s.synchronize(None).unwrap();
    assert_eq!(count.load(Ordering::Relaxed), 5000);
    s.destroy(false).unwrap();
}

#[test]
fn bad_device_ids_are_typed_errors() {
    setup();
    for id in [-1i64, 2, 1 << 40] {
        let e = registry::set_device(id).err().unwrap();
        assert_eq!(e.acl().code, 107001, "{e}");
    }
}

#[test]
fn device_side_wait_timeout_fails_only_the_waiting_stream() {
    let c = ctx(1);
    let slow = c.create_stream(0).unwrap();
    let waiter = c.create_stream(0).unwrap();
    slow.launch(Arc::new(Spin(Duration::from_millis(300))), 1).unwrap();
    let ev = c.create_event(false).unwrap();
    ev.record(&slow).unwrap();
    waiter.wait_event_timeout(&ev, Some(Duration::from_millis(20))).unwrap();
    let after = Blocks::new(1);
    waiter.launch(after.clone(), 1).unwrap();
    let t = Instant::now();
    let err = waiter.synchronize(Some(Duration::from_secs(5))).unwrap_err();
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "the wait did not time out early"
    );
    assert_eq!(err.acl().code, 107019, "{err}");
    assert_eq!(after.hits[0].load(Ordering::Relaxed), 0);
    slow.synchronize(None).unwrap();
    // A wait whose event completes in time is not affected by its timeout.
    let ok = c.create_stream(0).unwrap();
    let ev2 = c.create_event(false).unwrap();
    slow.launch(Arc::new(Spin(Duration::from_millis(10))), 1).unwrap();
    ev2.record(&slow).unwrap();
    ok.wait_event_timeout(&ev2, Some(Duration::from_secs(5))).unwrap();
    ok.synchronize(None).unwrap();
    for s in [slow, ok] {
        s.destroy(false).unwrap();
    }
    waiter.destroy(true).unwrap();
}

#[test]
fn profiler_hook_sees_every_task_with_ordered_times() {
    use npurt_core::profiler::{TaskKind, TaskObserver, TaskRecord};
    struct Collect(Mutex<Vec<TaskRecord>>);
    impl TaskObserver for Collect {
        fn on_task(&self, r: TaskRecord) {
            self.0.lock().unwrap().push(r);
        }
    }
    setup();
    // Device 1 is shared with other tests: watch only our stream's records.
    let dev = registry::use_device(1).unwrap();
    let obs = Arc::new(Collect(Mutex::new(Vec::new())));
    dev.set_observer(Some(obs.clone()));
    let s = dev.default_context().create_stream(0).unwrap();
    s.launch(Blocks::new(1), 1).unwrap();
    s.launch(Blocks::new(3), 3).unwrap();
    s.launch_engine(Engine::Host, Box::new(|| Ok(()))).unwrap();
    s.synchronize(None).unwrap();
    dev.set_observer(None);
    let recs: Vec<TaskRecord> = obs
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.stream == s.id())
        .cloned()
        .collect();
    let kinds: Vec<TaskKind> = recs.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![TaskKind::Kernel, TaskKind::Kernel, TaskKind::HostFunc]);
    assert_eq!(recs[1].blocks, 3);
    for r in &recs {
        assert!(
            r.submit_ns > 0 && r.submit_ns <= r.start_ns && r.start_ns <= r.end_ns,
            "{r:?}"
        );
    }
    assert!(recs[0].core < 2 && recs[2].core == 0, "{recs:?}");
    let seqs: Vec<u64> = recs.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, vec![0, 1, 2]);
    assert_eq!(recs[1].spans.iter().map(|c| c.blocks).sum::<u32>(), 3);
    s.destroy(false).unwrap();
}

/// A chain of 40 streams, each waiting for the previous one's record and then recording its
/// own: the head's record completes every wait in one cascade of resumed streams (each
/// resume runs the next stream's tasks on the same thread, nested up to a limit, then on a
/// worker). Every eighth stream also runs a callback; runs of seven record-and-wait streams
/// between them nest deeper than the limit. Every stream finishes, callbacks in chain order.
#[test]
fn a_long_chain_of_waits_completes_in_order() {
    let c = ctx(0);
    let n = 40;
    let streams: Vec<_> = (0..n).map(|_| c.create_stream(0).unwrap()).collect();
    let events: Vec<_> = (0..n).map(|_| c.create_event(false).unwrap()).collect();
    let order = Arc::new(Mutex::new(Vec::new()));
    // The head holds until everything is queued, so the chain completes in one cascade.
    let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let g = gate.clone();
    streams[0]
        .launch_engine(
            Engine::Host,
            Box::new(move || {
                while !g.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Ok(())
            }),
        )
        .unwrap();
    for i in 0..n {
        if i > 0 {
            streams[i].wait_event(&events[i - 1]).unwrap();
        }
        if i % 8 == 0 || i == n - 1 {
            let o = order.clone();
            streams[i]
                .launch_engine(
                    Engine::Host,
                    Box::new(move || {
                        o.lock().unwrap().push(i);
                        Ok(())
                    }),
                )
                .unwrap();
        }
        events[i].record(&streams[i]).unwrap();
    }
    gate.store(true, Ordering::Release);
    streams[n - 1].synchronize(Some(Duration::from_secs(30))).unwrap();
    let want: Vec<usize> = (0..n).filter(|i| i % 8 == 0 || *i == n - 1).collect();
    assert_eq!(*order.lock().unwrap(), want);
    assert!(
        events.iter().all(|e| e.query().unwrap()),
        "an event of the chain never completed"
    );
    for s in streams {
        s.synchronize(Some(Duration::from_secs(10))).unwrap();
        s.destroy(false).unwrap();
    }
}
