//! `dtrace_consume`, `dtrace_work` and the output they write (`dt_consume`): the C callbacks are
//! wrapped as the Rust consumer's probe and record callbacks, each firing handed to them as a
//! `dtrace_probedata_t`; what the library prints goes to the caller's `FILE *` in order with
//! whatever the callbacks print themselves, or, once `dtrace_handle_buffered` installed a handler,
//! to that handler piece by piece with the probe and record that produced it.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::{self, Write};

use dtrace_consumer::consume::{ConsumeAction, Flow, ProbeData};
use dtrace_consumer::handle::WorkStatus;
use dtrace_dif::program::RecDesc;

use crate::ctypes::{
    BufDataC, ConsumeProbeFn, ConsumeRecFn, HandleBufferedFn, ProbeDataC, RecDescC,
    DTRACE_CONSUME_ABORT, DTRACE_CONSUME_ERROR, DTRACE_CONSUME_NEXT, DTRACE_CONSUME_THIS,
    DTRACE_HANDLE_OK,
};
use crate::errno::{Edt, Fail};
use crate::ffi::{self, CFile};
use crate::hdl::{Hdl, Inner};

/// Where the library's text goes: the caller's stream, or its buffered-output handler with the
/// probe and record being printed (`at`). Written through shared references, so the callbacks
/// and the consumer can both write in turn.
pub struct Output<'a> {
    /// The caller's stream (may be NULL with a buffered handler).
    pub fp: *mut libc::FILE,
    /// `dtrace_handle_buffered`'s handler.
    pub buffered: Option<(HandleBufferedFn, *mut c_void)>,
    /// The handle, for `dtbda_handle`.
    pub handle: *mut c_void,
    /// The probe firing and record the text being written belongs to.
    pub at: Cell<(Option<ProbeDataC>, *const RecDescC)>,
    /// Why writing (or a callback) stopped the consumer, when it did.
    pub fail: &'a RefCell<Option<Fail>>,
}

impl<'a> Output<'a> {
    /// Output for the handle `hdl` to `fp`, through `inner`'s buffered handler if one is set.
    pub fn new(
        hdl: &Hdl,
        inner: &Inner,
        fp: *mut libc::FILE,
        fail: &'a RefCell<Option<Fail>>,
    ) -> Self {
        Output {
            fp,
            buffered: inner.buffered,
            handle: (hdl as *const Hdl).cast_mut().cast(),
            at: Cell::new((None, std::ptr::null())),
            fail,
        }
    }

    fn stop(&self, f: Fail) -> io::Error {
        self.fail.borrow_mut().get_or_insert(f);
        io::Error::other("output stopped")
    }

    /// Writes what the consumer has pending in `text` (before a callback runs).
    fn drain(&self, text: &mut Vec<u8>) -> bool {
        let mut w = self;
        let ok = w.write_all(text).is_ok();
        text.clear();
        ok
    }
}

impl Write for &Output<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some((f, arg)) = self.buffered {
            let text: Vec<u8> = buf.iter().copied().filter(|&b| b != 0).collect();
            let text = CString::new(text).unwrap_or_default();
            let (probe, rec) = self.at.get();
            let mut probe = probe;
            let d = BufDataC {
                handle: self.handle,
                buffered: text.as_ptr(),
                probe: probe
                    .as_mut()
                    .map_or(std::ptr::null_mut(), |p| p as *mut ProbeDataC),
                recdesc: rec,
                aggdata: std::ptr::null(),
                flags: 0,
            };
            if ffi::call_buffered(f, &d, arg) != DTRACE_HANDLE_OK {
                return Err(self.stop(Fail::edt(Edt::DirAbort)));
            }
            return Ok(buf.len());
        }
        if self.fp.is_null() {
            return Err(self.stop(Fail::edt(Edt::NoBuffered)));
        }
        CFile(self.fp).write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.buffered.is_none() && !self.fp.is_null() {
            CFile(self.fp).flush()?;
        }
        Ok(())
    }
}

/// The flow prefix as a C string with the program's lifetime.
fn prefix(p: &str) -> *const c_char {
    let s: &'static CStr = match p {
        " -> " => c" -> ",
        " <- " => c" <- ",
        " => " => c" => ",
        " <= " => c" <= ",
        "| " => c"| ",
        _ => c"",
    };
    s.as_ptr()
}

/// A firing as `dtrace_probedata_t`.
fn probedata(hdl: &Hdl, handle: *mut c_void, pd: &ProbeData<'_>) -> ProbeDataC {
    let mut d = hdl.descs.borrow_mut();
    ProbeDataC {
        handle,
        edesc: d.eprobe(pd.edesc),
        pdesc: d.probe(pd.pdesc),
        cpu: pd.cpu as c_int,
        data: pd.data.as_ptr().cast_mut().cast(),
        flow: match pd.flow {
            Flow::Entry => 0,
            Flow::Return => 1,
            Flow::None => 2,
        },
        prefix: prefix(pd.prefix),
        indent: pd.indent as c_int,
    }
}

/// What a callback's return value asks for; a value DTrace does not define is an error.
fn action(hdl: &Hdl, rc: c_int, fail: &RefCell<Option<Fail>>) -> ConsumeAction {
    match rc {
        DTRACE_CONSUME_THIS => ConsumeAction::This,
        DTRACE_CONSUME_NEXT => ConsumeAction::Next,
        DTRACE_CONSUME_ABORT => {
            fail.borrow_mut().get_or_insert(Fail::edt(Edt::DirAbort));
            ConsumeAction::Abort
        }
        DTRACE_CONSUME_ERROR => {
            // As in DTrace, the error is the one the callback left on the handle.
            fail.borrow_mut().get_or_insert(Fail::code(hdl.errno.get()));
            ConsumeAction::Error
        }
        _ => {
            fail.borrow_mut().get_or_insert(Fail::edt(Edt::BadRval));
            ConsumeAction::Error
        }
    }
}

/// The caller's callbacks and their argument.
#[derive(Clone, Copy)]
pub struct Callbacks {
    /// Per probe firing (NULL: consume it).
    pub probe: Option<ConsumeProbeFn>,
    /// Per record (NULL: skip it, as DTrace's `dt_nullrec`).
    pub rec: Option<ConsumeRecFn>,
    /// The caller's argument.
    pub arg: *mut c_void,
}

/// Runs `body` (a consumption by the Rust handle) with the C callbacks wrapped around it and the
/// output going where the caller asked; the failure, if any, is the callback's or the output's
/// when one of them stopped it.
pub fn with_callbacks<T>(
    hdl: &Hdl,
    inner: &mut Inner,
    fp: *mut libc::FILE,
    cb: Callbacks,
    body: impl FnOnce(
        &mut dtrace_consumer::handle::Handle,
        &mut dyn Write,
        &mut dyn FnMut(&ProbeData<'_>, &mut Vec<u8>) -> ConsumeAction,
        &mut dyn FnMut(&ProbeData<'_>, Option<&RecDesc>, &mut Vec<u8>) -> ConsumeAction,
    ) -> dtrace_consumer::Result<T>,
) -> Result<T, Fail> {
    let fail = RefCell::new(None);
    let out = Output::new(hdl, inner, fp, &fail);
    let handle = out.handle;
    let mut pfunc = |pd: &ProbeData<'_>, text: &mut Vec<u8>| {
        if !out.drain(text) {
            return ConsumeAction::Abort;
        }
        let c = probedata(hdl, handle, pd);
        out.at.set((Some(c), std::ptr::null()));
        match cb.probe {
            Some(f) => action(hdl, ffi::call_probe(f, &c, cb.arg), &fail),
            None => ConsumeAction::This,
        }
    };
    let mut rfunc = |pd: &ProbeData<'_>, r: Option<&RecDesc>, text: &mut Vec<u8>| {
        if !out.drain(text) {
            return ConsumeAction::Abort;
        }
        let c = probedata(hdl, handle, pd);
        let rec = r
            .and_then(|r| {
                pd.edesc
                    .recs
                    .iter()
                    .position(|x| std::ptr::eq(x, r))
                    .or_else(|| pd.edesc.recs.iter().position(|x| x == r))
            })
            .map_or(std::ptr::null(), |i| {
                hdl.descs.borrow().rec(pd.edesc.epid, i)
            });
        out.at.set((Some(c), rec));
        match cb.rec {
            Some(f) => action(hdl, ffi::call_rec(f, &c, rec, cb.arg), &fail),
            None => ConsumeAction::Next,
        }
    };
    let mut w = &out;
    let r = body(&mut inner.h, &mut w, &mut pfunc, &mut rfunc);
    let stopped = fail.borrow_mut().take();
    match (r, stopped) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(f)) => Err(f),
        (Err(e), None) => Err(e.into()),
    }
}

/// The consumer state of a handle that has been started (`EINVAL` before `dtrace_go`).
pub fn started(hdl: &Hdl) -> Result<std::cell::RefMut<'_, Inner>, Fail> {
    let inner = hdl.inner()?;
    if !inner.h.going() && !inner.h.stopped() {
        return Err(Fail::code(libc::EINVAL));
    }
    Ok(inner)
}

/// `dtrace_consume`.
pub fn consume(hdl: &Hdl, fp: *mut libc::FILE, cb: Callbacks) -> Result<c_int, Fail> {
    let mut inner = started(hdl)?;
    with_callbacks(hdl, &mut inner, fp, cb, |h, out, pf, rf| {
        h.consume(out, pf, rf)
    })?;
    Ok(0)
}

/// `dtrace_work`.
pub fn work(hdl: &Hdl, fp: *mut libc::FILE, cb: Callbacks) -> Result<WorkStatus, Fail> {
    let mut inner = started(hdl)?;
    with_callbacks(hdl, &mut inner, fp, cb, |h, out, pf, rf| {
        h.work(out, pf, rf)
    })
}
