//! racecheck and synccheck on real streams (no Python: sites are 0).

use super::report::{self, Finding};
use super::tests::SERIAL;
use super::*;
use crate::memory::{self, PagePolicy};
use crate::{current, Event, Stream};

fn kinds(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.kind).collect()
}

fn streams() -> (Stream, Stream) {
    let ctx = current::current_context().unwrap();
    (ctx.create_stream(0).unwrap(), ctx.create_stream(0).unwrap())
}

/// Runs `f` with `tools` on and returns what it reported.
fn checked(tools: u8, f: impl FnOnce()) -> Vec<Finding> {
    let _g = SERIAL.lock();
    enable(tools);
    report::take();
    f();
    let out = report::take();
    enable(0);
    out
}

#[test]
fn copies_on_two_streams_without_an_event_race() {
    let f = checked(RACECHECK, || {
        let (s1, s2) = streams();
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let b = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let host = memory::malloc_host(4096).unwrap();
        memory::memcpy_async(&a, &host, None, &s1).unwrap(); // writes a
        memory::memcpy_async(&b, &a, None, &s2).unwrap(); // reads a: unordered
        s1.synchronize(None).unwrap();
        s2.synchronize(None).unwrap();
    });
    assert_eq!(kinds(&f), ["race"], "{f:?}");
    assert!(f[0].message.contains("Write access by stream"), "{}", f[0].message);
    assert!(
        f[0].details[0].starts_with("and Read access by stream"),
        "{:?}",
        f[0].details
    );
    assert!(f[0].details[1].starts_with("on 4096 bytes"), "{:?}", f[0].details);
}

#[test]
fn an_event_wait_orders_the_streams() {
    let f = checked(RACECHECK, || {
        let (s1, s2) = streams();
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let b = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let host = memory::malloc_host(4096).unwrap();
        let ev: Event = current::current_context().unwrap().create_event(false).unwrap();
        memory::memcpy_async(&a, &host, None, &s1).unwrap();
        ev.record(&s1).unwrap();
        s2.wait_event(&ev).unwrap();
        memory::memcpy_async(&b, &a, None, &s2).unwrap();
        // s1 was not told about s2's copy into b: overlapping its first 8 bytes races
        memory::memset_async(&memory::BufferView::new(b.clone(), 0, 8).unwrap(), 0, None, &s1).unwrap();
        s2.synchronize(None).unwrap();
        s1.synchronize(None).unwrap();
        // the host synchronized both: it may read and write anything now
        memory::memcpy(&host, &b, None).unwrap();
    });
    assert_eq!(kinds(&f), ["race"], "only the memset overlaps s2's copy into b: {f:?}");
}

#[test]
fn host_access_before_the_sync_is_a_host_race() {
    let f = checked(RACECHECK, || {
        let s = Stream::clone(&streams().0);
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let pinned = memory::malloc_host(4096).unwrap();
        memory::memcpy_async(&a, &pinned, None, &s).unwrap(); // H2D reads pinned
        race::host_access(pinned.addr(), 16, true, "numpy view"); // rewritten too early
        memory::memcpy_async(&pinned, &a, None, &s).unwrap(); // D2H writes pinned
        race::host_access(pinned.addr() + 64, 16, true, "numpy view"); // read too early
        s.synchronize(None).unwrap();
        race::host_access(pinned.addr(), 4096, true, "numpy view"); // fine now
    });
    assert_eq!(kinds(&f), ["host-race", "host-race"], "{f:?}");
    assert!(f[0]
        .message
        .starts_with("Host write to a pinned source whose async copy has not run"));
    assert!(f[1]
        .message
        .starts_with("Host access to an async copy's destination before the copy"));
}

#[test]
fn synccheck_reports_unrecorded_events_and_forced_destroys() {
    let f = checked(SYNCCHECK, || {
        let (s1, s2) = streams();
        let ctx = current::current_context().unwrap();
        let never = ctx.create_event(false).unwrap();
        s2.wait_event(&never).unwrap();
        let ev = ctx.create_event(false).unwrap();
        let (go, gate) = std::sync::mpsc::channel::<()>();
        s1.launch_engine(
            crate::Engine::Host,
            Box::new(move || {
                let _ = gate.recv_timeout(std::time::Duration::from_secs(30)); // held until checked
                Ok(())
            }),
        )
        .unwrap();
        ev.record(&s1).unwrap();
        s2.wait_event(&ev).unwrap();
        sync::event_destroyed(ev.key());
        s1.destroy(true).unwrap();
        go.send(()).unwrap();
        s2.synchronize(None).unwrap();
    });
    assert_eq!(
        kinds(&f),
        ["unrecorded-event", "destroyed-while-waited", "destroyed-while-waited"],
        "{f:?}"
    );
}

#[test]
fn destroying_an_event_whose_work_completed_is_fine() {
    let f = checked(SYNCCHECK, || {
        let (s1, s2) = streams();
        let ctx = current::current_context().unwrap();
        let done = ctx.create_event(false).unwrap();
        done.record(&s1).unwrap();
        done.synchronize(None).unwrap();
        let (go, gate) = std::sync::mpsc::channel::<()>();
        s2.launch_engine(
            crate::Engine::Host,
            Box::new(move || {
                let _ = gate.recv_timeout(std::time::Duration::from_secs(30)); // s2 held: its wait is queued
                Ok(())
            }),
        )
        .unwrap();
        s2.wait_event(&done).unwrap(); // on completed work: nothing left to disturb
        sync::event_destroyed(done.key());
        let late = ctx.create_event(false).unwrap();
        let (go1, gate1) = std::sync::mpsc::channel::<()>();
        s1.launch_engine(
            crate::Engine::Host,
            Box::new(move || {
                let _ = gate1.recv_timeout(std::time::Duration::from_secs(30));
                Ok(())
            }),
        )
        .unwrap();
        late.record(&s1).unwrap();
        s2.wait_event(&late).unwrap(); // queued while s1's work is pending...
        go1.send(()).unwrap();
        s1.synchronize(None).unwrap(); // ...which then completes before the destroy
        sync::event_destroyed(late.key());
        go.send(()).unwrap();
        s2.synchronize(None).unwrap();
    });
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn initcheck_reports_reads_of_bytes_nothing_wrote() {
    let f = checked(INITCHECK, || {
        let s = Stream::clone(&streams().0);
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let host = memory::malloc_host(4096).unwrap();
        let head = memory::BufferView::new(a.clone(), 0, 1024).unwrap();
        memory::memset_async(&head, 7, None, &s).unwrap(); // bytes 0..1024 written
        memory::memcpy_async(&host, &head, None, &s).unwrap(); // fine
        memory::memcpy_async(&host, &a, None, &s).unwrap(); // 1024..4096 never written
        memory::memcpy_async(&host, &a, None, &s).unwrap(); // reported once
        s.synchronize(None).unwrap();
        memory::memcpy(&a, &host, None).unwrap(); // the host writes all of it
        memory::memcpy(&host, &a, None).unwrap(); // fine now
    });
    assert_eq!(kinds(&f), ["uninitialized-read"], "{f:?}");
    assert!(
        f[0].message
            .contains("Uninitialized read of 3072 bytes by Memcpy DtoH: bytes 1024..4096 of the 4096-byte"),
        "{}",
        f[0].message
    );
}

#[test]
fn off_the_hooks_record_nothing() {
    let f = checked(0, || {
        let (s1, s2) = streams();
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 64, PagePolicy::HugeFirst).unwrap();
        memory::memset_async(&a, 1, None, &s1).unwrap();
        memory::memset_async(&a, 2, None, &s2).unwrap();
        s1.synchronize(None).unwrap();
        s2.synchronize(None).unwrap();
    });
    assert!(f.is_empty());
}

#[test]
fn work_dropped_by_a_forced_destroy_is_forgotten() {
    let f = checked(RACECHECK, || {
        let s = Stream::clone(&streams().0);
        let mem = crate::alloc::device_memory(0).unwrap();
        let a = memory::malloc_on(&mem, 4096, PagePolicy::HugeFirst).unwrap();
        let (early, late) = (memory::malloc_host(4096).unwrap(), memory::malloc_host(4096).unwrap());
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let hold = move || {
            let _ = gate.recv_timeout(std::time::Duration::from_secs(30)); // task 0 runs
            Ok(())
        };
        s.launch_engine(crate::Engine::Host, Box::new(hold)).unwrap();
        memory::memcpy_async(&a, &early, None, &s).unwrap(); // task 1: may start before the drop is seen
        memory::memcpy_async(&a, &late, None, &s).unwrap(); // task 2: dropped
        memory::memcpy_async(&late, &a, None, &s).unwrap(); // task 3: dropped
        s.destroy(true).unwrap();
        race::host_access(late.addr(), 4096, true, "numpy view"); // nothing will touch it
        race::host_access(early.addr(), 4096, true, "numpy view"); // task 1 might
        go.send(()).unwrap();
    });
    assert_eq!(kinds(&f), ["host-race"], "{f:?}");
    assert!(
        f[0].message.contains("(Memcpy HtoD, task 1)"),
        "only the task that may run is kept: {}",
        f[0].message
    );
}
