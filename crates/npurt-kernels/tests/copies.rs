//! Copies with device arrays (`npurt_kernels::copies`): ordering with the arrays' last
//! writers, last-writer marking, contiguity and size checks, lifetime of queued copies.

use npurt_core::alloc;
use npurt_core::memory::{self, AnyBuffer, BufferView, Staging};
use npurt_core::{current, Stream};
use npurt_kernels::copies::{self, Side};
use npurt_kernels::{array, fill, Busy, DType, DeviceArray, KernelArgError};
use std::sync::Arc;
use std::time::Duration;

fn streams() -> (Stream, Stream) {
    let c = current::current_context().unwrap();
    (c.create_stream(0).unwrap(), c.create_stream(0).unwrap())
}

fn f32_array(n: usize) -> DeviceArray {
    DeviceArray::empty(None, DType::F32, vec![n]).unwrap()
}

fn host_f32(n: usize, v: f32) -> AnyBuffer {
    let h = memory::malloc_host(n * 4).unwrap();
    let bytes: Vec<u8> = (0..n).flat_map(|_| v.to_ne_bytes()).collect();
    memory::write(&h, 0, &bytes).unwrap();
    AnyBuffer::Host(h)
}

fn read_f32(b: &AnyBuffer, n: usize) -> Vec<f32> {
    let mut bytes = vec![0u8; n * 4];
    memory::read(b, 0, &mut bytes).unwrap();
    bytes
        .chunks(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// A slow fill of `a` with `v` on `s`: a busy kernel first, so the write is still pending
/// when the caller queues the next step.
fn slow_fill(s: &Stream, a: &DeviceArray, v: f64) {
    s.launch(Arc::new(Busy::new(Duration::from_millis(30))), 1).unwrap();
    let r = array::launch(s, &[], a, |c| fill(a.tensor(), v, c)).unwrap();
    assert!(r.is_none());
}

#[test]
fn d2h_on_another_stream_waits_for_the_kernel_that_wrote_the_array() {
    let (a_s, b_s) = streams();
    let n = 1 << 16;
    let a = f32_array(n);
    slow_fill(&a_s, &a, 7.0);
    let out = host_f32(n, 0.0);
    copies::memcpy_async(Side::Buf(&out), Side::Array(&a), None, &b_s).unwrap();
    b_s.synchronize(None).unwrap();
    assert!(read_f32(&out, n).iter().all(|&x| x == 7.0));
}

#[test]
fn h2d_marks_the_array_written_so_kernels_on_other_streams_wait() {
    let (a_s, b_s) = streams();
    let n = 1 << 16;
    let a = f32_array(n);
    // Keep a_s busy so the copy is certainly still queued when the kernel is launched.
    a_s.launch(Arc::new(Busy::new(Duration::from_millis(30))), 1).unwrap();
    copies::memcpy_async(Side::Array(&a), Side::Buf(&host_f32(n, 3.0)), None, &a_s).unwrap();
    assert_eq!(a.last_writer().as_ref(), Some(&a_s));
    // A kernel on b_s reading a (copy a -> b) must see the copied data.
    let b = f32_array(n);
    array::launch(&b_s, &[&a], &b, |c| npurt_kernels::copy(a.tensor(), b.tensor(), c)).unwrap();
    let out = host_f32(n, 0.0);
    copies::memcpy(Side::Buf(&out), Side::Array(&b), None).unwrap(); // waits for b's writer
    assert!(read_f32(&out, n).iter().all(|&x| x == 3.0));
}

#[test]
fn sync_copies_wait_for_pending_writes() {
    let (a_s, _) = streams();
    let n = 4096;
    let a = f32_array(n);
    slow_fill(&a_s, &a, 2.0);
    let out = host_f32(n, 0.0);
    assert_eq!(copies::memcpy(Side::Buf(&out), Side::Array(&a), None).unwrap(), n * 4);
    assert!(read_f32(&out, n).iter().all(|&x| x == 2.0));
    // And a sync copy into the array is not overtaken by an earlier queued fill.
    slow_fill(&a_s, &a, 5.0);
    copies::memcpy(Side::Array(&a), Side::Buf(&host_f32(n, 9.0)), None).unwrap();
    a_s.synchronize(None).unwrap();
    copies::memcpy(Side::Buf(&out), Side::Array(&a), None).unwrap();
    assert!(read_f32(&out, n).iter().all(|&x| x == 9.0));
}

#[test]
fn views_copy_their_own_bytes_and_strided_views_are_refused() {
    let s = current::current_stream().unwrap();
    let a = DeviceArray::empty(None, DType::F32, vec![4, 8]).unwrap();
    copies::memcpy(Side::Array(&a), Side::Buf(&host_f32(32, 1.0)), None).unwrap();
    // Row 2 (a contiguous view at byte offset 64).
    let row = a.view_as(64, DType::F32, vec![8], vec![1]).unwrap();
    copies::memcpy_async(Side::Array(&row), Side::Buf(&host_f32(8, 4.0)), None, &s).unwrap();
    s.synchronize(None).unwrap();
    let out = host_f32(32, 0.0);
    copies::memcpy(Side::Buf(&out), Side::Array(&a), None).unwrap();
    let v = read_f32(&out, 32);
    assert!(v[16..24].iter().all(|&x| x == 4.0));
    assert!(v[..16].iter().chain(&v[24..]).all(|&x| x == 1.0));
    let col = a.view_as(0, DType::F32, vec![4], vec![8]).unwrap();
    let e = copies::memcpy(Side::Buf(&out), Side::Array(&col), None).unwrap_err();
    assert!(
        matches!(e, npurt_kernels::ArrayError::Arg(KernelArgError::NotContiguous { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("not contiguous"));
}

#[test]
fn sizes_follow_acl_rules_and_errors_queue_nothing() {
    let (a_s, b_s) = streams();
    let a = f32_array(256);
    let small = host_f32(16, 0.0);
    // D2H of 1 KiB into 64 bytes: destMax exceeded.
    let Err(e) = copies::try_memcpy_async(Side::Buf(&small), Side::Array(&a), None, &a_s) else {
        panic!("a D2H past destMax was queued")
    };
    assert!(
        matches!(e, npurt_kernels::ArrayError::Core(ref c) if c.acl().code == 107000),
        "{e}"
    );
    // An explicit count within both sides works; one past the source does not.
    copies::memcpy_async(Side::Buf(&small), Side::Array(&a), Some(64), &a_s).unwrap();
    let e = copies::memcpy(Side::Array(&a), Side::Buf(&small), Some(65)).unwrap_err();
    assert!(e.to_string().contains("source"), "{e}");
    assert!(copies::memcpy(Side::Array(&a), Side::Buf(&small), Some(0)).is_err());
    a_s.synchronize(None).unwrap();
    // A failed copy left no wait on b_s and no writer change.
    slow_fill(&a_s, &a, 1.0);
    let before = b_s.completed();
    assert!(copies::try_memcpy_async(Side::Array(&a), Side::Buf(&small), Some(4096), &b_s).is_err());
    assert_eq!(a.last_writer().as_ref(), Some(&a_s));
    b_s.synchronize(None).unwrap();
    assert_eq!(b_s.completed(), before);
}

#[test]
fn a_queued_copy_keeps_a_dropped_array_alive() {
    let (a_s, _) = streams();
    let n = 1 << 18;
    let a = f32_array(n);
    copies::memcpy(Side::Array(&a), Side::Buf(&host_f32(n, 6.0)), None).unwrap();
    let out = host_f32(n, 0.0);
    a_s.launch(Arc::new(Busy::new(Duration::from_millis(30))), 1).unwrap();
    copies::memcpy_async(Side::Buf(&out), Side::Array(&a), None, &a_s).unwrap();
    let buf = a.buffer().clone();
    drop(a);
    buf.free().unwrap(); // freed and dropped while the copy waits behind the busy kernel
    a_s.synchronize(None).unwrap();
    assert!(read_f32(&out, n).iter().all(|&x| x == 6.0));
}

#[test]
fn staged_and_view_sides() {
    let s = current::current_stream().unwrap();
    let a = f32_array(64);
    let mut st = Staging::new(256).unwrap();
    st.as_mut_slice().copy_from_slice(&[0x11; 256]);
    assert!(copies::try_memcpy_async_from_staging(Side::Array(&a), st, None, &s)
        .unwrap()
        .is_ok());
    assert_eq!(a.last_writer().as_ref(), Some(&s));
    let out = host_f32(64, 0.0);
    let AnyBuffer::Host(h) = &out else { unreachable!() };
    let half = BufferView::new(h.clone(), 128, 128).unwrap();
    copies::memcpy_async(Side::View(&half), Side::Array(&a), Some(128), &s).unwrap();
    s.synchronize(None).unwrap();
    let mut bytes = [0u8; 256];
    memory::read(&out, 0, &mut bytes).unwrap();
    assert!(bytes[..128].iter().all(|&b| b == 0));
    assert!(bytes[128..].iter().all(|&b| b == 0x11));
    // Device buffers on the other side, both ways.
    let d = AnyBuffer::Device(alloc::malloc(256, memory::PagePolicy::HugeFirst).unwrap());
    copies::memcpy_async(Side::Buf(&d), Side::Array(&a), None, &s).unwrap();
    let b = f32_array(64);
    copies::memcpy_async(Side::Array(&b), Side::Buf(&d), None, &s).unwrap();
    let back = host_f32(64, 0.0);
    copies::memcpy(Side::Buf(&back), Side::Array(&b), None).unwrap(); // waits for b's writer
    memory::read(&back, 0, &mut bytes).unwrap();
    assert!(bytes.iter().all(|&b| b == 0x11));
}
