//! The profiler hook: records of every kind with their sequence numbers, copy directions
//! and sizes, launch notes that pair with records, wait records naming what released
//! them, the flight-recorder ring, and failures that name their launch's call site.

mod common;

use common::*;
use npurt_core::memory::{self, PagePolicy};
use npurt_core::profiler::{self, site, Collector, LaunchNote, Ring, TaskKind, TaskObserver, TaskRecord};
use npurt_core::{registry, ErrorKind};
use std::sync::Arc;
use std::time::Duration;

fn collect(dev: &npurt_core::Device, run: impl FnOnce()) -> (Vec<TaskRecord>, Vec<LaunchNote>) {
    let obs = Arc::new(Collector::new());
    let handle: Arc<dyn TaskObserver> = obs.clone();
    dev.add_observer(handle.clone());
    run();
    assert!(dev.remove_observer(&handle));
    obs.take()
}

#[test]
fn copies_waits_and_launches_are_described() {
    setup();
    let dev = registry::use_device(0).unwrap();
    let ctx = dev.default_context();
    let (a, b) = (ctx.create_stream(0).unwrap(), ctx.create_stream(0).unwrap());
    let m = npurt_core::alloc::device_memory(0).unwrap();
    let n = 1 << 16;
    let (h, d1, d2) = (
        memory::malloc_host(n).unwrap(),
        memory::malloc_on(&m, n, PagePolicy::HugeFirst).unwrap(),
        memory::malloc_on(&m, n, PagePolicy::HugeFirst).unwrap(),
    );
    let ev = ctx.create_event(false).unwrap();
    let (recs, notes) = collect(&dev, || {
        memory::memset_async(&d1, 1, None, &a).unwrap();
        memory::memcpy_async(&d1, &h, None, &a).unwrap();
        a.launch(Arc::new(Spin(Duration::from_millis(5))), 1).unwrap();
        memory::memcpy_async(&d2, &d1, Some(1000), &a).unwrap();
        ev.record(&a).unwrap();
        b.wait_event(&ev).unwrap();
        memory::memcpy_async(&h, &d2, None, &b).unwrap();
        b.synchronize(None).unwrap();
        a.synchronize(None).unwrap();
    });
    let mine = |s: &npurt_core::Stream| -> Vec<TaskRecord> {
        let mut v: Vec<TaskRecord> = recs.iter().filter(|r| r.stream == s.id()).cloned().collect();
        v.sort_by_key(|r| r.seq);
        v
    };
    let (ra, rb) = (mine(&a), mine(&b));
    let kinds: Vec<TaskKind> = ra.iter().map(|r| r.kind).collect();
    use TaskKind::*;
    assert_eq!(kinds, vec![Memset, CopyH2D, Kernel, CopyD2D]);
    assert_eq!(
        ra.iter().map(|r| r.bytes).collect::<Vec<_>>(),
        vec![n as u64, n as u64, 0, 1000]
    );
    assert_eq!(&*ra[2].name, "spin");
    assert_eq!(ra.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    // b: the wait (its releaser is a's last task), then the D2H.
    assert_eq!(rb.iter().map(|r| r.kind).collect::<Vec<_>>(), vec![Wait, CopyD2H]);
    assert_eq!(rb[0].wait_on, Some((a.id(), 4)));
    assert!(
        rb[0].end_ns >= ra[3].end_ns,
        "the wait ends after the task that released it"
    );
    for r in ra.iter().chain(&rb) {
        assert!(r.submit_ns <= r.start_ns && r.start_ns <= r.end_ns, "{r:?}");
        assert_eq!((r.device, r.context), (0, ctx.id()));
        // Every record has the launch note of its (stream, seq), from this thread.
        let note = notes
            .iter()
            .find(|l| l.stream == r.stream && l.seq == r.seq)
            .expect("launch note");
        assert!(note.submit_ns == r.submit_ns && note.queued_ns >= note.submit_ns);
        assert_eq!(note.thread, profiler::thread_id());
    }
    for s in [a, b] {
        s.destroy(false).unwrap();
    }
}

#[test]
fn a_multi_block_kernel_lists_each_cores_turn() {
    setup();
    let dev = registry::use_device(1).unwrap();
    let s = dev.default_context().create_stream(0).unwrap();
    let (recs, _) = collect(&dev, || {
        s.launch(Arc::new(Spin(Duration::from_millis(2))), 6).unwrap();
        s.synchronize(None).unwrap();
    });
    let r = recs.iter().find(|r| r.stream == s.id()).unwrap();
    assert_eq!((r.kind, r.blocks), (TaskKind::Kernel, 6));
    assert_eq!(r.spans.iter().map(|c| c.blocks).sum::<u32>(), 6, "{r:?}");
    for c in &r.spans {
        assert!(c.core < 2 && r.start_ns <= c.start_ns && c.start_ns <= c.end_ns && c.end_ns <= r.end_ns);
    }
    s.destroy(false).unwrap();
}

#[test]
fn the_ring_keeps_the_last_records() {
    setup();
    let dev = registry::use_device(1).unwrap();
    let s = dev.default_context().create_stream(0).unwrap();
    let ring = Arc::new(Ring::new(8));
    let handle: Arc<dyn TaskObserver> = ring.clone();
    dev.add_observer(handle.clone());
    for _ in 0..20 {
        s.launch(Blocks::new(1), 1).unwrap();
    }
    s.synchronize(None).unwrap();
    dev.remove_observer(&handle);
    let mine: Vec<u64> = ring
        .snapshot()
        .iter()
        .filter(|r| r.stream == s.id())
        .map(|r| r.seq)
        .collect();
    assert!(mine.len() <= 8 && mine.last() == Some(&19), "{mine:?}");
    s.destroy(false).unwrap();
}

fn test_site(_want: u8) -> u32 {
    thread_local!(static ID: u32 = site::intern(site::LaunchMeta {
        site: "model.py:42".into(),
        stack: None,
        shapes: None,
    }));
    ID.with(|i| *i)
}

#[test]
fn a_failed_task_names_its_launch_site() {
    setup();
    site::set_source(test_site);
    site::set_always(true);
    let s = ctx(1).create_stream(0).unwrap();
    s.launch(Arc::new(FnKernel(|_| Err("bad block".into()))), 1).unwrap();
    site::set_always(false);
    let e = s.synchronize(Some(Duration::from_secs(10))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TaskFailed);
    assert!(e.to_string().contains("(launched at model.py:42)"), "{e}");
    s.destroy(true).unwrap();
}

#[test]
fn collectives_show_under_hccl_names() {
    use npurt_core::collective::{self, local, CollKind, HcclDataType, OpDesc, ReduceOp, Region};
    setup();
    let dev = registry::use_device(1).unwrap();
    let s = dev.default_context().create_stream(0).unwrap();
    let comm = local::init_all(1, Duration::from_secs(10)).unwrap().remove(0);
    let x = [1f32; 16];
    let reg = || Region {
        addr: x.as_ptr() as usize,
        len: 64,
        keep: None,
    };
    let (recs, _) = collect(&dev, || {
        for kind in [CollKind::AllReduce, CollKind::Barrier] {
            let d = OpDesc {
                kind,
                dtype: HcclDataType::Fp32,
                op: ReduceOp::Sum,
                count: if kind == CollKind::Barrier { 0 } else { 16 },
                root: 0,
            };
            let (send, recv) = if kind == CollKind::Barrier {
                (None, None)
            } else {
                (Some(reg()), Some(reg()))
            };
            assert!(collective::enqueue(&comm, &s, d, send, recv, None).unwrap().1.is_ok());
        }
        s.synchronize(None).unwrap();
    });
    let mine: Vec<(TaskKind, String, u64)> = recs
        .iter()
        .filter(|r| r.stream == s.id())
        .map(|r| (r.kind, r.name.to_string(), r.bytes))
        .collect();
    assert_eq!(
        mine,
        vec![
            (TaskKind::HostFunc, "HcclAllReduce".to_string(), 64),
            (TaskKind::HostFunc, "HcclBarrier".to_string(), 0)
        ]
    );
}
