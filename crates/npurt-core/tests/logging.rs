//! Runtime logs (`npurt_core::logging`): a line for each alloc, free, launch, copy, event
//! record / wait and stream create / destroy naming the device, context, stream and task;
//! module levels; the plog file; nothing below the level. The logger and its levels are
//! process-wide, so everything runs in one test, in order.

mod common;

use common::*;
use npurt_core::logging::{self, Level, LogRecord, Module};
use npurt_core::memory::{self, PagePolicy};
use npurt_core::{alloc, current, Engine, KernelFault};
use std::sync::Arc;

fn drain() -> Vec<LogRecord> {
    let mut all = Vec::new();
    loop {
        let batch = logging::take(1024);
        if batch.is_empty() {
            return all;
        }
        all.extend(batch);
    }
}

fn has(recs: &[LogRecord], module: Module, level: Level, parts: &[&str]) -> bool {
    recs.iter()
        .any(|r| r.module == module && r.level == level && parts.iter().all(|p| r.message.contains(p)))
}

fn dump(recs: &[LogRecord]) -> String {
    recs.iter()
        .map(|r| format!("{:?} {:?} {}\n", r.level, r.module, r.message))
        .collect()
}

#[test]
fn logs_name_device_context_stream_and_task() {
    let ctx = ctx(0);
    assert!(logging::init(), "npurt's logger is installed");
    logging::set_forwarding(true);
    drain();

    // Off by default (error): nothing is queued for a launch.
    assert_eq!(logging::global_level(), Level::Error);
    let s = ctx.create_stream(0).unwrap();
    s.launch(Blocks::new(1), 1).unwrap();
    s.synchronize(None).unwrap();
    assert!(drain().is_empty());

    logging::set_level(None, Level::Debug);
    let s = ctx.create_stream(2).unwrap();
    let (d, c, sid) = (s.device(), ctx.id(), s.id());
    let ids = format!("device {d} context {c} stream {sid}");
    let seq = s.launch(Blocks::new(4), 4).unwrap();
    let buf = current::push_stream(&s)
        .map(|_| alloc::malloc(4096, PagePolicy::HugeFirst).unwrap())
        .unwrap();
    current::pop_stream(&s);
    let host = memory::malloc_host(4096).unwrap();
    let copy_seq = memory::memcpy_async(&buf, &host, None, &s).unwrap();
    memory::memcpy(&host, &buf, None).unwrap();
    let ev = ctx.create_event(false).unwrap();
    ev.record(&s).unwrap();
    let s2 = ctx.create_stream(0).unwrap();
    s2.wait_event(&ev).unwrap();
    // The wait is elided when the event already completed, so the callback's
    // task number is whatever the stream hands out.
    let cb_seq = s2.launch_engine(Engine::Host, Box::new(|| Ok(()))).unwrap();
    s2.synchronize(None).unwrap();
    let addr = format!("{:#x}", buf.addr());
    drop(buf);
    s.destroy(false).unwrap();
    let recs = drain();
    let t = dump(&recs);
    let rt = Module::Runtime;
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &[&format!("stream {sid} created"), &format!("device {d} context {c}")]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &["queued kernel \"blocks\" (4 blocks)", &ids, &format!("task {seq}")]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &["Memcpy HtoD of 4096 B", &ids, &format!("task {copy_seq}")]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            Module::Mem,
            Level::Debug,
            &["memcpy (Memcpy DtoH, synchronous) 4096 B"]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &["event 0x", &format!("recorded at stream {sid} task {copy_seq}")]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &[
                &format!("stream {} waits for event", s2.id()),
                &format!("stream {sid} task {copy_seq}")
            ]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &["queued Host Callback", &format!("stream {} task {cb_seq}", s2.id())]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            rt,
            Level::Debug,
            &[&format!("stream {sid} destroyed"), &format!("device {d} context {c}")]
        ),
        "{t}"
    );
    let mem = Module::Mem;
    assert!(
        has(
            &recs,
            mem,
            Level::Debug,
            &[
                "malloc 4096 B at",
                &addr,
                &format!("device {d} context {c} stream {sid}")
            ]
        ),
        "{t}"
    );
    assert!(
        has(
            &recs,
            mem,
            Level::Debug,
            &["free 4096 B at", &addr, &format!("device {d}")]
        ),
        "{t}"
    );
    assert!(
        recs.iter()
            .all(|r| r.line > 0 && !r.file.is_empty() && r.unix_ns > 0 && r.thread > 0),
        "{t}"
    );

    // Module levels: MEM at debug only.
    logging::set_level(None, Level::Error);
    logging::set_level(Some(Module::Mem), Level::Debug);
    s2.launch(Blocks::new(1), 1).unwrap();
    drop(alloc::malloc(512, PagePolicy::HugeFirst).unwrap());
    s2.synchronize(None).unwrap();
    let recs = drain();
    assert!(
        recs.iter()
            .any(|r| r.module == mem && r.message.starts_with("malloc 512 B")),
        "{}",
        dump(&recs)
    );
    assert!(!recs.iter().any(|r| r.module == rt), "{}", dump(&recs));

    // A failing task: an error line naming the stream and the task, at the default level.
    logging::set_level(None, Level::Error);
    let bad = ctx.create_stream(0).unwrap();
    bad.launch(Blocks::new(1), 1).unwrap();
    let fseq = bad
        .launch(Arc::new(FnKernel(|_| Err(KernelFault::from("boom")))), 1)
        .unwrap();
    assert!(bad.synchronize(None).is_err());
    let recs = drain();
    let ids = format!("device {d} context {c} stream {} task {fseq}", bad.id());
    assert!(
        has(&recs, rt, Level::Error, &["task failed", &ids, "boom"]),
        "{}",
        dump(&recs)
    );
    bad.destroy(true).unwrap();

    // The plog file: one line per record, in CANN's shape.
    let path = std::env::temp_dir().join(format!("npurt-plog-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    logging::set_file(Some(&path), 2).unwrap();
    logging::set_level(None, Level::Info);
    logging::log_from(Module::App, Level::Warning, "hello from the app", "/x/app.py", 7);
    logging::log_from(Module::App, Level::Debug, "not at info", "/x/app.py", 8);
    logging::set_file(None, 1).unwrap();
    logging::set_level(None, Level::Error);
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let pid = std::process::id();
    let line = text.lines().find(|l| l.contains("hello from the app")).expect(&text);
    assert!(line.starts_with(&format!("[WARNING] APP({pid},")), "{line}");
    assert!(
        line.contains(" [app.py:7]") && line.ends_with(" hello from the app"),
        "{line}"
    );
    assert!(!text.contains("not at info"), "{text}");
    let recs = drain();
    assert!(has(&recs, Module::App, Level::Warning, &["hello from the app"]));
    logging::set_forwarding(false);
}
