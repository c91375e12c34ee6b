//! Unit tests of the shared region in a private temporary directory: charging against the
//! capacity, the refusal naming holders, reclaiming a dead process's share, the CAS under
//! concurrent charges (stress), and interprocess event slots.

use super::ipc_event::IpcEvent;
use super::region::{self, Region, LIVE};
use super::{open_region, procs, SharedError};
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "npurt-shtest-{}-{}",
        std::process::id(),
        N.fetch_add(1, SeqCst)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&d).expect("temp dir");
    d
}

fn region(cap: u64) -> (PathBuf, Arc<Region>) {
    let d = temp_dir();
    let r = open_region(&d, 0, cap).expect("region");
    (d, r)
}

#[test]
fn charges_hold_against_the_capacity_and_name_the_holders() {
    let (_d, r) = region(1 << 20);
    let a = procs::attach(&r).unwrap();
    let b = procs::attach(&r).unwrap();
    assert_ne!(a, b);
    procs::charge(&r, a, 768 << 10).unwrap();
    let msg = procs::charge(&r, b, 512 << 10).unwrap_err();
    assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
    assert!(msg.contains("768.00 KiB reserved"), "{msg}");
    procs::charge(&r, b, 256 << 10).unwrap();
    assert_eq!(r.header().reserved.load(Relaxed), 1 << 20);
    procs::release(&r, a, 768 << 10);
    procs::charge(&r, b, 512 << 10).unwrap();
    procs::detach(&r, b);
    assert_eq!(r.header().reserved.load(Relaxed), 0, "detach gives everything back");
    let list = procs::list(&r);
    assert_eq!(list.len(), 1);
    assert!(list[0].alive && list[0].reserved == 0);
}

#[test]
fn a_dead_process_share_is_reclaimed_on_refusal() {
    let (_d, r) = region(1 << 20);
    let me = procs::attach(&r).unwrap();
    let dead = procs::attach(&r).unwrap();
    let mut child = std::process::Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().unwrap();
    r.proc(dead).pid.store(pid, Relaxed); // the slot now looks like an exited process's
    procs::charge(&r, dead, 1 << 20).unwrap();
    procs::charge(&r, me, 1 << 19).expect("the dead process's megabyte is reclaimed");
    assert_eq!(r.proc(dead).state.load(Relaxed), region::FREE);
    assert_eq!(r.header().reserved.load(Relaxed), 1 << 19);
    assert_eq!(procs::list(&r).len(), 1);
}

#[test]
fn reopening_the_file_sees_the_same_table_and_rejects_other_versions() {
    let (d, r) = region(4 << 20);
    let a = procs::attach(&r).unwrap();
    procs::charge(&r, a, 4096).unwrap();
    assert!(
        Arc::ptr_eq(&r, &open_region(&d, 0, 4 << 20).unwrap()),
        "one mapping per file"
    );
    r.header().version.store(99, Relaxed);
    drop(r);
    match open_region(&d, 0, 4 << 20) {
        Err(SharedError::Version { found: 99, .. }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn concurrent_charges_never_exceed_the_capacity() {
    let cap = 1u64 << 20;
    let (_d, r) = region(cap);
    let slots: Vec<usize> = (0..4).map(|_| procs::attach(&r).unwrap()).collect();
    let handles: Vec<_> = slots
        .iter()
        .map(|&s| {
            let r = r.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for i in 0..20_000u64 {
                    let n = 4096 * (1 + (i * 7 + s as u64) % 61);
                    if procs::charge(&r, s, n).is_ok() {
                        held.push(n);
                    }
                    assert!(r.header().reserved.load(Relaxed) <= cap);
                    if held.len() > 3 || i % 5 == 0 {
                        if let Some(n) = held.pop() {
                            procs::release(&r, s, n);
                        }
                    }
                }
                for n in held {
                    procs::release(&r, s, n);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(r.header().reserved.load(Relaxed), 0);
    assert!(slots.iter().all(|&s| r.proc(s).reserved.load(Relaxed) == 0));
}

#[test]
fn ipc_event_records_complete_and_close() {
    let d = temp_dir();
    let ev = IpcEvent::create_in(&d, 0, 1 << 30).unwrap();
    let h = ev.handle();
    let other = IpcEvent::open_in(&d, &h).unwrap();
    assert_eq!(other.target(), 1, "before any record a wait waits for the first one");
    assert!(!other.poll(other.target(), true).unwrap());
    let n = ev.begin_record().unwrap();
    assert_eq!(other.recorded(), 1);
    let seen = other.seq();
    ev.complete(n);
    assert_ne!(other.seq(), seen, "a completion moves the futex word");
    assert!(other.poll(1, true).unwrap());
    assert!(other.wait(1, None).unwrap());
    let n2 = ev.begin_record().unwrap();
    assert!(!other
        .wait(
            n2,
            Some(std::time::Instant::now() + std::time::Duration::from_millis(30))
        )
        .unwrap());
    drop(ev);
    assert!(matches!(other.poll(n2, false), Err(SharedError::ProducerClosed { .. })));
    assert!(other.poll(1, false).unwrap(), "completed records stay complete");
    // The closed slot is handed out again: the old handle is stale.
    let mut reuse = Vec::new();
    while IpcEvent::open_in(&d, &h).is_ok() {
        reuse.push(IpcEvent::create_in(&d, 0, 1 << 30).unwrap());
    }
    assert!(matches!(IpcEvent::open_in(&d, &h), Err(SharedError::StaleHandle)));
    assert!(matches!(other.poll(1, false), Err(SharedError::StaleHandle)));
    assert_eq!(r_state(&d, reuse.len()), LIVE);
}

fn r_state(d: &std::path::Path, _n: usize) -> u32 {
    let r = open_region(d, 0, 1 << 30).unwrap();
    (0..region::MAX_EVENTS)
        .map(|i| r.event(i).state.load(Relaxed))
        .max()
        .unwrap()
}

#[test]
fn bad_handles_are_typed_errors() {
    let d = temp_dir();
    for h in [
        "",
        "npev1",
        "npev2:0:1:0:1:00",
        "npev1:0:zz:0:1:00",
        "npev1:0:40000000:9999:1:00",
        "npev1:0:0:0:1:0",
    ] {
        assert!(
            matches!(IpcEvent::open_in(&d, h), Err(SharedError::BadHandle(_))),
            "{h}"
        );
    }
    // A well-formed handle nobody made: the slot is free.
    assert!(matches!(
        IpcEvent::open_in(&d, "npev1:0:40000000:3:1:0123456789abcdef"),
        Err(SharedError::StaleHandle)
    ));
}

#[test]
fn own_start_time_is_read_and_dead_pids_are_not_alive() {
    let (pid, start) = procs::me();
    assert!(start > 0);
    assert!(procs::alive(pid, start));
    assert!(!procs::alive(pid, start + 1), "a reused pid has another start time");
}

#[test]
fn cargo_runs_tests_with_a_private_status_dir() {
    let d = super::status_dir().unwrap();
    assert!(d.ends_with("target/npurt-status"), "{}", d.display());
}
