//! [`HostTensor`]: an owned, aligned host allocation with a shape, for tests, examples and
//! benchmarks (the runtime's device arrays come from the memory layer instead).

use crate::{DType, Elem, Keep, TensorView};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::sync::Arc;

/// Owned zero-initialised memory, 64-byte aligned. Held as an address so views can write
/// through it without Rust references to its bytes ever existing while a kernel runs.
pub struct AlignedBuffer {
    addr: usize,
    layout: Layout,
}

impl AlignedBuffer {
    /// Allocates `bytes` zeroed bytes (at least one, so the address is never dangling).
    pub fn zeroed(bytes: usize) -> Self {
        let layout = Layout::from_size_align(bytes.max(1), 64).expect("allocation too large");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuffer {
            addr: ptr as usize,
            layout,
        }
    }
    pub fn addr(&self) -> usize {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.layout.size()
    }
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout; dropped once.
        unsafe { dealloc(self.addr as *mut u8, self.layout) }
    }
}

/// A row-major host tensor owning its memory.
pub struct HostTensor {
    buf: Arc<AlignedBuffer>,
    dtype: DType,
    shape: Vec<usize>,
}

impl HostTensor {
    /// A zero-filled tensor.
    pub fn zeros(dtype: DType, shape: &[usize]) -> Self {
        let n: usize = shape.iter().product();
        HostTensor {
            buf: Arc::new(AlignedBuffer::zeroed(n * dtype.itemsize())),
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// A tensor holding `data` (row-major); panics if the length does not match the shape.
    pub fn from_slice<T: Elem>(data: &[T], shape: &[usize]) -> Self {
        let t = Self::zeros(T::DTYPE, shape);
        assert_eq!(
            data.len(),
            shape.iter().product::<usize>(),
            "data length does not match shape {shape:?}"
        );
        // SAFETY: the buffer was just allocated with room for `data.len()` elements of T,
        // 64-byte aligned, and nobody else can reach it yet.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), t.buf.addr as *mut T, data.len()) };
        t
    }

    /// A tensor of `dtype` holding `data` converted with numpy's cast rules.
    pub fn from_f64(dtype: DType, data: &[f64], shape: &[usize]) -> Self {
        crate::dispatch_dtype!(dtype, T => {
            let v: Vec<T> = data.iter().map(|&x| T::from_f64(x)).collect();
            Self::from_slice(&v, shape)
        })
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// A row-major view of the whole tensor (it keeps the memory alive).
    ///
    /// # Safety
    /// The caller orders the kernels that use the view (and views derived from it): no
    /// kernel may write this memory while another kernel accesses it (e.g. two streams
    /// writing the same tensor concurrently).
    pub unsafe fn view(&self) -> TensorView {
        let keep: Keep = self.buf.clone();
        // SAFETY: the buffer holds numel*itemsize bytes, 64-byte aligned, alive while `keep`
        // lives; access ordering is the caller's contract above.
        unsafe { TensorView::contiguous(self.buf.addr, self.dtype, self.shape.clone(), keep) }
            .expect("a host tensor is a valid row-major view")
    }

    /// Whether some view (or a kernel holding one) of this tensor still exists.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.buf) > 1
    }

    /// Copies the elements out. Panics if the dtype differs from `T`'s, or if a view of the
    /// tensor still exists (drop kernels and views first: then nothing can be writing it).
    pub fn to_vec<T: Elem>(&self) -> Vec<T> {
        assert_eq!(T::DTYPE, self.dtype, "to_vec with the wrong element type");
        assert!(
            !self.is_shared(),
            "to_vec while a view or kernel of this tensor is alive"
        );
        let n = self.numel();
        let mut v = Vec::with_capacity(n);
        // SAFETY: no view exists (strong count 1), so no kernel can be writing; the buffer
        // holds n elements of T, aligned.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buf.addr as *const T, v.as_mut_ptr(), n);
            v.set_len(n);
        }
        v
    }

    /// Overwrites the elements. Panics like [`HostTensor::to_vec`].
    pub fn write<T: Elem>(&self, data: &[T]) {
        assert_eq!(T::DTYPE, self.dtype, "write with the wrong element type");
        assert!(
            !self.is_shared(),
            "write while a view or kernel of this tensor is alive"
        );
        assert_eq!(data.len(), self.numel(), "write with the wrong length");
        // SAFETY: no view exists, so nothing else accesses the buffer; it holds numel
        // elements of T, aligned; no Rust reference to its bytes exists.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.buf.addr as *mut T, data.len()) };
    }

    /// Overwrites the elements from f64 values (numpy's cast rules).
    pub fn write_f64(&self, data: &[f64]) {
        crate::dispatch_dtype!(self.dtype, T => {
            let v: Vec<T> = data.iter().map(|&x| T::from_f64(x)).collect();
            self.write(&v)
        })
    }

    /// The elements converted to f64 (see [`HostTensor::to_vec`] for when it panics).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        crate::dispatch_dtype!(self.dtype, T => self.to_vec::<T>().into_iter().map(|x| x.to_f64()).collect())
    }
}
