//! Every unsafe operation of the library, each justified where it stands: reading the C caller's
//! strings, argument vectors and `FILE` streams, writing its out-parameters, calling the callbacks
//! it registered, turning a registered handle address back into the handle, and the
//! variable-length C descriptions (`dtrace_eprobedesc_t`, `dtrace_aggdesc_t`: a fixed head followed
//! by an array of records) the callbacks receive. The rest of the crate is safe Rust over these.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::ctypes::{
    AggDataC, AggregateFn, BufDataC, ConsumeProbeFn, ConsumeRecFn, DropDataC, ErrDataC,
    HandleBufferedFn, HandleDropFn, HandleErrFn, ProbeDataC, RecDescC,
};
use crate::hdl::Hdl;

/// The C caller's string argument: `None` for NULL, `Some(Err(()))` when it is not UTF-8.
pub fn c_str<'a>(p: *const c_char) -> Option<Result<&'a str, ()>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the header's contract: a non-NULL string argument points to a NUL-terminated string
    // that stays valid for the duration of the call, which is as long as the result is used.
    let s = unsafe { CStr::from_ptr(p) };
    Some(s.to_str().map_err(|_| ()))
}

/// The C caller's `argc`/`argv` pair as strings (`None` when `argv` is NULL with a positive
/// `argc`, or an element is NULL or not UTF-8).
pub fn c_argv(argc: c_int, argv: *const *const c_char) -> Option<Vec<String>> {
    let n = usize::try_from(argc).ok()?;
    if n == 0 {
        return Some(Vec::new());
    }
    if argv.is_null() {
        return None;
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the header's contract: `argv` holds at least `argc` string pointers.
        let p = unsafe { *argv.add(i) };
        v.push(c_str(p)?.ok()?.to_string());
    }
    Some(v)
}

/// Stores `v` through the caller's out-parameter `p` unless it is NULL.
pub fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the header's contract: a non-NULL out-parameter points to writable storage of
        // its type.
        unsafe { p.write(v) }
    }
}

/// A C `FILE *` stream written with `fwrite`, as the caller's own output is.
pub struct CFile(pub *mut libc::FILE);

impl Write for CFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        // SAFETY: `self.0` is the caller's non-NULL open stream (checked where a CFile is made) and
        // `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::fwrite(buf.as_ptr().cast(), 1, buf.len(), self.0) };
        if n == 0 {
            return Err(io::Error::other("fwrite failed"));
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        // SAFETY: as in `write`.
        if unsafe { libc::fflush(self.0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Read for CFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `self.0` is the caller's non-NULL open stream and `buf` is writable for
        // `buf.len()` bytes.
        let n = unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), self.0) };
        // SAFETY: as above.
        if n == 0 && unsafe { libc::ferror(self.0) } != 0 {
            return Err(io::Error::other("fread failed"));
        }
        Ok(n)
    }
}

/// The handle at a registered address. The caller ([`crate::hdl::enter`]) has checked that `p`
/// is in the registry of open handles, under the registry's lock.
pub fn registered<'a>(p: *const Hdl) -> &'a Hdl {
    // SAFETY: every registered address comes from `Box::into_raw` of a `Hdl` in `dtrace_open` and
    // is removed from the registry before that box is freed; the handle is freed only when no
    // entry point is running on it (`Hdl::depth`), so it outlives this borrow.
    unsafe { &*p }
}

/// A C description: a fixed head `H` followed by an array of records, as `dtrace_eprobedesc_t`
/// and `dtrace_aggdesc_t` are laid out (the head's size is a multiple of the records'
/// alignment, so the array starts right after it as in the C struct).
pub struct Flex<H> {
    ptr: NonNull<u8>,
    layout: Layout,
    nrecs: usize,
    _head: PhantomData<H>,
}

impl<H: Copy> Flex<H> {
    /// A description with `head` and `recs` (room for one record at least, as in C).
    pub fn new(head: H, recs: &[RecDescC]) -> Flex<H> {
        let array = Layout::array::<RecDescC>(recs.len().max(1)).unwrap_or(Layout::new::<H>());
        let (layout, off) = match Layout::new::<H>().extend(array) {
            Ok((l, o)) => (l.pad_to_align(), o),
            Err(_) => handle_alloc_error(Layout::new::<H>()),
        };
        debug_assert_eq!(off, std::mem::size_of::<H>());
        // SAFETY: the layout is non-zero in size (it holds at least one record).
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            handle_alloc_error(layout)
        };
        // SAFETY: the allocation holds an `H` at offset 0 and `recs.len()` records at `off`, both
        // suitably aligned (the layout was built from theirs); nothing else refers to it yet.
        unsafe {
            ptr.as_ptr().cast::<H>().write(head);
            std::ptr::copy_nonoverlapping(
                recs.as_ptr(),
                ptr.as_ptr().add(off).cast::<RecDescC>(),
                recs.len(),
            );
        }
        Flex {
            ptr,
            layout,
            nrecs: recs.len(),
            _head: PhantomData,
        }
    }

    /// The description as C sees it.
    pub fn head(&self) -> *mut H {
        self.ptr.as_ptr().cast()
    }

    /// Replaces the head (the records stay).
    pub fn set_head(&mut self, head: H) {
        // SAFETY: the allocation holds an `H` at offset 0 (see `new`); `&mut self` excludes other
        // Rust access, and C only reads it during callbacks, never concurrently with this.
        unsafe { self.head().write(head) }
    }

    /// Record `i` as C sees it (NULL past the end).
    pub fn rec(&self, i: usize) -> *const RecDescC {
        if i >= self.nrecs {
            return std::ptr::null();
        }
        // SAFETY: record `i` lies within the allocation (see `new`).
        unsafe {
            self.ptr
                .as_ptr()
                .add(std::mem::size_of::<H>())
                .cast::<RecDescC>()
                .add(i)
        }
    }
}

impl<H> Drop for Flex<H> {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// The C callbacks. Each is called with structures that live on this side for the duration of the
// call and the caller's own `arg`.

/// Calls a `dtrace_consume_probe_f`.
pub fn call_probe(f: ConsumeProbeFn, pd: &ProbeDataC, arg: *mut c_void) -> c_int {
    // SAFETY: `f` is the function the caller registered for probes, called with its declared
    // arguments: a probe data valid for the call and the caller's own argument.
    unsafe { f(pd, arg) }
}

/// Calls a `dtrace_consume_rec_f`.
pub fn call_rec(f: ConsumeRecFn, pd: &ProbeDataC, rec: *const RecDescC, arg: *mut c_void) -> c_int {
    // SAFETY: as in `call_probe`; `rec` is NULL (end of the probe's records) or a record of the
    // probe's description, alive as long as the handle.
    unsafe { f(pd, rec, arg) }
}

/// Calls a `dtrace_handle_err_f`.
pub fn call_err(f: HandleErrFn, d: &ErrDataC, arg: *mut c_void) -> c_int {
    // SAFETY: the error handler the caller registered, called with its declared arguments.
    unsafe { f(d, arg) }
}

/// Calls a `dtrace_handle_drop_f`.
pub fn call_drop(f: HandleDropFn, d: &DropDataC, arg: *mut c_void) -> c_int {
    // SAFETY: the drop handler the caller registered, called with its declared arguments.
    unsafe { f(d, arg) }
}

/// Calls a `dtrace_handle_buffered_f`.
pub fn call_buffered(f: HandleBufferedFn, d: &BufDataC, arg: *mut c_void) -> c_int {
    // SAFETY: the buffered-output handler the caller registered, called with its declared
    // arguments (the text is a NUL-terminated string alive for the call).
    unsafe { f(d, arg) }
}

/// Calls a `dtrace_aggregate_f`.
pub fn call_agg(f: AggregateFn, d: &mut AggDataC, arg: *mut c_void) -> c_int {
    // SAFETY: the walker's callback the caller passed, called with its declared arguments (the
    // data is passed as writable: DTrace's callbacks may set `dtada_normal`).
    unsafe { f(d, arg) }
}

/// `strerror(3)` of a system error number.
pub fn strerror(e: c_int) -> *const c_char {
    // SAFETY: strerror accepts any number and returns a NUL-terminated message that stays valid
    // until the next call (the C library's own contract, as DTrace's dtrace_errmsg relies on).
    unsafe { libc::strerror(e) }
}
