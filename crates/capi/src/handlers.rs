//! The handlers (`dt_handle`): `dtrace_handle_err` (faults, through the library's ERROR program),
//! `dtrace_handle_drop` (drop counts) and `dtrace_handle_buffered` (the library's output as text
//! pieces instead of a stream). A handler answering anything but `DTRACE_HANDLE_OK` stops the
//! consumption that reported to it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};
use std::rc::Rc;

use dtrace_consumer::status::{DropKind, DropReport, ErrorReport};

use crate::ctypes::{
    DropDataC, ErrDataC, HandleBufferedFn, HandleDropFn, HandleErrFn, DTRACE_CPUALL,
    DTRACE_HANDLE_OK,
};
use crate::errno::{Edt, Fail};
use crate::ffi;
use crate::hdl::{Descs, Hdl};

fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// `dtrace_handle_err`: `f` gets each fault (`dtrace_errdata_t`); must come before `dtrace_go`.
pub fn handle_err(hdl: &Hdl, f: Option<HandleErrFn>, arg: *mut c_void) -> Result<c_int, Fail> {
    let f = f.ok_or(Fail::code(libc::EINVAL))?;
    let mut inner = hdl.inner()?;
    inner.can_trace()?;
    if inner.h.going() || inner.h.stopped() {
        return Err(Fail::edt(Edt::Active));
    }
    let descs: Rc<RefCell<Descs>> = hdl.descs.clone();
    let handle = (hdl as *const Hdl).cast_mut().cast::<c_void>();
    let handler = move |e: &ErrorReport| {
        let msg = c_text(&e.msg);
        let (edesc, pdesc) = {
            let mut d = descs.borrow_mut();
            // The report names the probe and the clause; the enabling shown is the first one
            // of that probe (an error record does not say which of its enablings faulted).
            let edesc = d
                .epid_of_probe(e.probe_id)
                .map_or(std::ptr::null_mut(), |epid| d.eprobe_by_id(epid));
            (edesc, d.probe_by_id(e.probe_id))
        };
        let data = ErrDataC {
            handle,
            edesc,
            pdesc,
            cpu: e.cpu as c_int,
            // DTrace for Linux reports the clause, not an action index, as the place of a fault.
            action: 0,
            offset: c_int::try_from(e.offset).unwrap_or(-1),
            fault: e.fault,
            addr: e.addr,
            msg: msg.as_ptr(),
        };
        ffi::call_err(f, &data, arg) == DTRACE_HANDLE_OK
    };
    inner.h.handle_err(Box::new(handler)).map_err(Fail::from)?;
    hdl.note_descriptions(&inner, &[]);
    Ok(0)
}

/// The `dtrace_dropkind_t` of a drop.
fn drop_kind(k: DropKind) -> c_int {
    match k {
        DropKind::Principal => 0,
        DropKind::Aggregation => 1,
        DropKind::Dynamic => 2,
        DropKind::DynamicRinse => 3,
        DropKind::DynamicDirty => 4,
        DropKind::Speculative => 5,
        DropKind::SpeculationBusy => 6,
        DropKind::SpeculationUnavailable => 7,
        DropKind::StackStringOverflow => 8,
        DropKind::DoubleError => 9,
    }
}

/// `dtrace_handle_drop`: `f` gets each drop report (`dtrace_dropdata_t`, with the running total
/// of its kind).
pub fn handle_drop(hdl: &Hdl, f: Option<HandleDropFn>, arg: *mut c_void) -> Result<c_int, Fail> {
    let f = f.ok_or(Fail::code(libc::EINVAL))?;
    let mut inner = hdl.inner()?;
    let handle = (hdl as *const Hdl).cast_mut().cast::<c_void>();
    let mut totals: HashMap<c_int, u64> = HashMap::new();
    inner.h.handle_drop(Box::new(move |d: &DropReport| {
        let kind = drop_kind(d.kind);
        let total = totals.entry(kind).or_default();
        *total = total.saturating_add(d.drops);
        let msg = c_text(&format!("{}\n", d.msg));
        let data = DropDataC {
            handle,
            cpu: d.cpu.map_or(DTRACE_CPUALL, |c| c as c_int),
            kind,
            drops: d.drops,
            total: *total,
            msg: msg.as_ptr(),
        };
        ffi::call_drop(f, &data, arg) == DTRACE_HANDLE_OK
    }));
    Ok(0)
}

/// `dtrace_handle_buffered`: the library's output goes to `f` instead of the stream.
pub fn handle_buffered(
    hdl: &Hdl,
    f: Option<HandleBufferedFn>,
    arg: *mut c_void,
) -> Result<c_int, Fail> {
    let f = f.ok_or(Fail::code(libc::EINVAL))?;
    hdl.inner()?.buffered = Some((f, arg));
    Ok(0)
}
