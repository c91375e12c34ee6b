//! Recorded launch lists (`npurt_kernels::replay`): capturing launches instead of queueing
//! them, replaying an instance with new inputs, busy instances, and what taints a capture.

use npurt_core::memory::{self, AnyBuffer};
use npurt_core::{current, Stream};
use npurt_kernels::replay::{self, Replay};
use npurt_kernels::{array, binary, fill, philox, random, BinaryOp, Busy, DType, DeviceArray, Distribution, Scalar};
use std::sync::Arc;
use std::time::Duration;

const N: usize = 4096;

fn stream() -> Stream {
    current::current_context().unwrap().create_stream(0).unwrap()
}

fn f32_array() -> DeviceArray {
    DeviceArray::empty(None, DType::F32, vec![N]).unwrap()
}

fn read(a: &DeviceArray) -> Vec<f32> {
    a.synchronize().unwrap();
    let mut bytes = vec![0u8; N * 4];
    memory::read(&AnyBuffer::Device(a.buffer().clone()), 0, &mut bytes).unwrap();
    bytes
        .chunks(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

fn fill_on(s: &Stream, a: &DeviceArray, v: f64) {
    assert!(array::launch(s, &[], a, |c| fill(a.tensor(), v, c)).unwrap().is_none());
}

/// Records `y = (x + 1) * 3` into an instance over `x` / `y` (the middle value in `t`).
fn record(s: &Stream) -> replay::Instance {
    let (x, t, y) = (f32_array(), f32_array(), f32_array());
    replay::begin(s).unwrap();
    assert!(replay::capturing());
    let before = s.submitted_count();
    let one = Scalar::Float(1.0);
    let r = array::launch(s, &[&x], &t, |c| {
        binary(BinaryOp::Add, x.tensor().clone(), one, t.tensor(), c)
    });
    assert!(r.unwrap().is_none());
    let three = Scalar::Float(3.0);
    let r = array::launch(s, &[&t], &y, |c| {
        binary(BinaryOp::Mul, t.tensor().clone(), three, y.tensor(), c)
    });
    assert!(r.unwrap().is_none());
    assert_eq!(s.submitted_count(), before, "captured launches are not queued");
    let inst = replay::end(vec![Some(x)], vec![y]).unwrap().unwrap();
    assert!(!replay::capturing());
    assert_eq!(inst.len(), 2);
    inst
}

#[test]
fn a_replay_runs_the_captured_kernels_on_new_inputs() {
    let s = stream();
    let r = Replay::new();
    r.add(record(&s));
    for v in [2.0, -5.0, 0.5] {
        let (a, b) = (f32_array(), f32_array());
        fill_on(&s, &a, v);
        assert!(r.run(&s, &[a], std::slice::from_ref(&b)).unwrap());
        s.synchronize(None).unwrap();
        let want = ((v + 1.0) * 3.0) as f32;
        assert!(read(&b).iter().all(|&x| x == want), "input {v}");
    }
    assert_eq!(r.instances(), 1);
}

#[test]
fn a_busy_instance_is_not_claimed_and_inputs_on_other_streams_are_waited_for() {
    let (s1, s2) = (stream(), stream());
    let r = Replay::new();
    r.add(record(&s1));
    let (a, b, c) = (f32_array(), f32_array(), f32_array());
    // a is written late on s1; the replay on s2 must wait for that write.
    s1.launch(Arc::new(Busy::new(Duration::from_millis(40))), 1).unwrap();
    fill_on(&s1, &a, 4.0);
    s2.launch(Arc::new(Busy::new(Duration::from_millis(40))), 1).unwrap();
    assert!(r.run(&s2, std::slice::from_ref(&a), std::slice::from_ref(&b)).unwrap());
    assert!(
        !r.run(&s1, std::slice::from_ref(&a), std::slice::from_ref(&c)).unwrap(),
        "the only instance is busy"
    );
    r.add(record(&s1));
    assert!(r.run(&s1, &[a], std::slice::from_ref(&c)).unwrap());
    assert_eq!(b.last_writer().as_ref(), Some(&s2));
    assert!(read(&b).iter().all(|&x| x == 15.0));
    assert!(read(&c).iter().all(|&x| x == 15.0));
    s2.synchronize(None).unwrap();
    assert!(
        r.run(&s2, &[f32_array()], &[f32_array()]).unwrap(),
        "idle again once its run completed"
    );
}

#[test]
fn random_draws_and_other_queued_work_taint_a_capture() {
    let s = stream();
    let y = f32_array();
    replay::begin(&s).unwrap();
    let g = philox::generator(0).unwrap();
    let dist = Distribution::Normal { mean: 0.0, std: 1.0 };
    assert!(array::launch(&s, &[], &y, |c| random(dist, &g, y.tensor(), c))
        .unwrap()
        .is_none());
    let why = replay::end(vec![], vec![y.clone()]).unwrap().unwrap_err();
    assert!(why.contains("random"), "{why}");

    replay::begin(&s).unwrap();
    s.launch(npurt_kernels::empty(), 1).unwrap(); // not through array::launch: not captured
    let why = replay::end(vec![], vec![y]).unwrap().unwrap_err();
    assert!(why.contains("other than kernels"), "{why}");

    assert!(replay::end(vec![], vec![]).unwrap().is_err(), "no capture running");
    replay::begin(&s).unwrap();
    assert!(replay::begin(&s).is_err(), "one capture per thread");
    replay::abort();
    assert!(!replay::capturing());
}

#[test]
fn a_replay_checks_its_argument_counts() {
    let s = stream();
    let r = Replay::new();
    r.add(record(&s));
    assert!(r.run(&s, &[], &[f32_array()]).is_err());
    // The failed run queued nothing: the instance is free again.
    assert!(r.run(&s, &[f32_array()], &[f32_array()]).unwrap());
    s.synchronize(None).unwrap();
}

#[test]
fn a_fresh_run_returns_new_outputs_and_frees_the_instance_on_errors() {
    let s = stream();
    let r = Replay::new();
    r.add(record(&s));
    let a = f32_array();
    fill_on(&s, &a, 2.0);
    s.launch(Arc::new(Busy::new(Duration::from_millis(30))), 1).unwrap();
    let outs = r
        .run_fresh(&s, std::slice::from_ref(&a))
        .unwrap()
        .expect("an idle instance");
    assert_eq!((outs.len(), outs[0].tensor().shape()), (1, &[N][..]));
    assert_eq!(outs[0].tensor().dtype(), DType::F32);
    assert_eq!(
        outs[0].last_writer().as_ref(),
        Some(&s),
        "the caller's stream writes it"
    );
    let other = stream();
    assert!(
        r.run_fresh(&other, std::slice::from_ref(&a)).unwrap().is_none(),
        "busy for another stream"
    );
    assert!(read(&outs[0]).iter().all(|&x| x == 9.0));
    // Two fresh runs give two arrays, each with its own result.
    let first = r.run_fresh(&s, std::slice::from_ref(&a)).unwrap().unwrap();
    s.synchronize(None).unwrap();
    fill_on(&s, &a, -1.0);
    let second = r.run_fresh(&s, &[a]).unwrap().unwrap();
    assert!(read(&first[0]).iter().all(|&x| x == 9.0));
    assert!(read(&second[0]).iter().all(|&x| x == 0.0));
    // A bad argument count queues nothing and leaves the instance free.
    assert!(r.run_fresh(&s, &[]).is_err());
    assert!(r.run_fresh(&s, &[f32_array()]).unwrap().is_some());
    s.synchronize(None).unwrap();
}

#[test]
fn runs_queued_on_one_stream_share_its_instance() {
    // Stream order runs each run after the previous one, so eight runs queued behind a busy
    // kernel reuse the one instance, each with its own result; another stream cannot
    // claim it until they completed.
    let (s, other) = (stream(), stream());
    let r = Replay::new();
    r.add(record(&s));
    s.launch(Arc::new(Busy::new(Duration::from_millis(30))), 1).unwrap();
    let mut runs = Vec::new();
    for k in 0..8 {
        let (a, b) = (f32_array(), f32_array());
        fill_on(&s, &a, k as f64);
        assert!(r.run(&s, &[a], std::slice::from_ref(&b)).unwrap(), "run {k}");
        runs.push((k, b));
    }
    assert_eq!(r.instances(), 1);
    assert!(
        !r.run(&other, &[f32_array()], &[f32_array()]).unwrap(),
        "busy for another stream"
    );
    for (k, b) in &runs {
        let want = ((*k as f32) + 1.0) * 3.0;
        assert!(read(b).iter().all(|&x| x == want), "run {k}");
    }
    assert!(
        r.run(&other, &[f32_array()], &[f32_array()]).unwrap(),
        "idle once they completed"
    );
    other.synchronize(None).unwrap();
}
