//! The entry points of `dtrace.h`, each a thin `extern "C"` shell: it checks its arguments, enters
//! the handle ([`crate::hdl::enter`]: a NULL, closed or unknown handle fails without touching
//! anything, panics never cross into C) and calls the module that does the work. Failures return
//! -1 (or NULL) with the reason in `dtrace_errno()`, as DTrace's do.

use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use dtrace_consumer::handle::{Handle, NoTracer, WorkStatus};

use crate::aggregate::{self, Walk};
use crate::consume::{self, Callbacks};
use crate::ctypes::{
    AggregateFn, AggregateWalkFn, ConsumeProbeFn, ConsumeRecFn, HandleBufferedFn, HandleDropFn,
    HandleErrFn, ProgInfo, DTRACE_O_ILP32, DTRACE_O_LP64, DTRACE_O_MASK, DTRACE_O_NODEV,
    DTRACE_STATUS_EXITED, DTRACE_STATUS_NONE, DTRACE_STATUS_OKAY, DTRACE_STATUS_STOPPED,
    DTRACE_VERSION, DTRACE_WORKSTATUS_DONE, DTRACE_WORKSTATUS_ERROR, DTRACE_WORKSTATUS_OKAY,
};
use crate::errno::{edt_message, Edt, Fail, EDT_BASE};
use crate::ffi;
use crate::handlers;
use crate::hdl::{self, enter, DtraceHdl, DtraceProg, Hdl};
use crate::program::{self, Source};

/// A string argument that must be present and UTF-8.
fn arg_str<'a>(p: *const c_char) -> Result<&'a str, Fail> {
    match ffi::c_str(p) {
        Some(Ok(s)) => Ok(s),
        _ => Err(Fail::code(libc::EINVAL)),
    }
}

/// `dtrace_open`: a handle over this system's tracer and compiler (`DTRACE_O_NODEV`: the
/// compiler alone).
#[no_mangle]
pub unsafe extern "C" fn dtrace_open(
    version: c_int,
    flags: c_int,
    errp: *mut c_int,
) -> *mut DtraceHdl {
    let r = catch_unwind(AssertUnwindSafe(|| {
        if version <= 0 || flags & !DTRACE_O_MASK != 0 {
            return Err(libc::EINVAL);
        }
        if version > DTRACE_VERSION {
            return Err(Edt::Version as i32);
        }
        if version < DTRACE_VERSION {
            return Err(Edt::OVersion as i32);
        }
        if flags & DTRACE_O_LP64 != 0 && flags & DTRACE_O_ILP32 != 0 {
            return Err(libc::EINVAL);
        }
        if flags & DTRACE_O_ILP32 != 0 {
            return Err(Edt::DataModel as i32);
        }
        let nodev = flags & DTRACE_O_NODEV != 0;
        let h = if nodev {
            let mut h = Handle::open(
                Box::new(NoTracer("a handle opened with DTRACE_O_NODEV".into())),
                Some(dtrace_open::backend::compiler()),
            );
            h.decoder.zone = dtrace_open::local_zone();
            h
        } else {
            dtrace_open::handle(true, false)
        };
        Ok(Hdl::open(h, nodev))
    }));
    match r {
        Ok(Ok(p)) => {
            ffi::put(errp, 0);
            p
        }
        Ok(Err(e)) => {
            ffi::put(errp, e);
            std::ptr::null_mut()
        }
        Err(_) => {
            ffi::put(errp, Edt::NoMem as i32);
            std::ptr::null_mut()
        }
    }
}

/// `dtrace_close`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_close(dtp: *mut DtraceHdl) {
    let _ = catch_unwind(AssertUnwindSafe(|| hdl::close(dtp)));
}

/// `dtrace_errno`: the handle's last error (`EINVAL` for a handle that is not open).
#[no_mangle]
pub unsafe extern "C" fn dtrace_errno(dtp: *mut DtraceHdl) -> c_int {
    enter(dtp, libc::EINVAL, |h| Ok(h.errno.get()))
}

/// The table's messages as C strings.
fn table() -> &'static [CString] {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (EDT_BASE..)
            .map_while(edt_message)
            .map(|m| CString::new(m).unwrap_or_default())
            .collect()
    })
}

/// `dtrace_errmsg`: the message of `error`: the handle's own text for its current error when it
/// has one (compiler messages, "not yet supported: ..."), else DTrace's table, else
/// `strerror(3)`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_errmsg(dtp: *mut DtraceHdl, error: c_int) -> *const c_char {
    let own = enter(dtp, std::ptr::null(), |h| {
        Ok(match &*h.errmsg.borrow() {
            Some(m) if h.errno.get() == error => m.as_ptr(),
            _ => std::ptr::null(),
        })
    });
    if !own.is_null() {
        return own;
    }
    let i = usize::try_from(error.wrapping_sub(EDT_BASE)).ok();
    match i.and_then(|i| table().get(i)) {
        Some(m) if error >= EDT_BASE => m.as_ptr(),
        _ => ffi::strerror(error),
    }
}

/// `dtrace_setopt` (`val` may be NULL for options without a value).
#[no_mangle]
pub unsafe extern "C" fn dtrace_setopt(
    dtp: *mut DtraceHdl,
    opt: *const c_char,
    val: *const c_char,
) -> c_int {
    enter(dtp, -1, |h| {
        let name = arg_str(opt)?;
        let value = match ffi::c_str(val) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(())) => return Err(Fail::edt(Edt::BadOptVal)),
        };
        h.inner()?.h.setopt(name, value)?;
        Ok(0)
    })
}

/// `dtrace_getopt`: the option's value (`DTRACEOPT_UNSET` when it is not set).
#[no_mangle]
pub unsafe extern "C" fn dtrace_getopt(
    dtp: *mut DtraceHdl,
    opt: *const c_char,
    val: *mut i64,
) -> c_int {
    enter(dtp, -1, |h| {
        let name = arg_str(opt)?;
        if val.is_null() {
            return Err(Fail::code(libc::EINVAL));
        }
        let v = h.inner()?.h.getopt(name)?;
        ffi::put(val, v);
        Ok(0)
    })
}

/// `dtrace_program_strcompile`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_program_strcompile(
    dtp: *mut DtraceHdl,
    s: *const c_char,
    spec: c_int,
    cflags: u32,
    argc: c_int,
    argv: *const *const c_char,
) -> *mut DtraceProg {
    enter(dtp, std::ptr::null_mut(), |h| {
        let src = arg_str(s)?;
        let spec = program::spec_of(spec)?;
        program::compile(h, Source::Str(src, spec), cflags, argc, argv)
    })
}

/// `dtrace_program_fcompile`: compiles the script read from `fp`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_program_fcompile(
    dtp: *mut DtraceHdl,
    fp: *mut libc::FILE,
    cflags: u32,
    argc: c_int,
    argv: *const *const c_char,
) -> *mut DtraceProg {
    enter(dtp, std::ptr::null_mut(), |h| {
        let src = program::read_script(fp)?;
        program::compile(h, Source::Script(&src), cflags, argc, argv)
    })
}

/// `dtrace_program_exec`: enables a program compiled on this handle; `pip` (may be NULL) gets
/// its description.
#[no_mangle]
pub unsafe extern "C" fn dtrace_program_exec(
    dtp: *mut DtraceHdl,
    pgp: *mut DtraceProg,
    pip: *mut ProgInfo,
) -> c_int {
    enter(dtp, -1, |h| {
        let info = program::exec(h, pgp)?;
        ffi::put(pip, info);
        Ok(0)
    })
}

/// `dtrace_program_info`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_program_info(
    dtp: *mut DtraceHdl,
    pgp: *mut DtraceProg,
    pip: *mut ProgInfo,
) {
    enter(dtp, (), |h| {
        let info = program::info(h, pgp)?;
        ffi::put(pip, info);
        Ok(())
    })
}

/// `dtrace_go`: starts tracing (BEGIN fires).
#[no_mangle]
pub unsafe extern "C" fn dtrace_go(dtp: *mut DtraceHdl) -> c_int {
    enter(dtp, -1, |h| {
        let mut inner = h.inner()?;
        inner.can_trace()?;
        if inner.h.going() || inner.h.stopped() {
            return Err(Fail::code(libc::EINVAL));
        }
        inner.h.go()?;
        Ok(0)
    })
}

/// `dtrace_stop`: stops tracing (END fires); stopping again does nothing.
#[no_mangle]
pub unsafe extern "C" fn dtrace_stop(dtp: *mut DtraceHdl) -> c_int {
    enter(dtp, -1, |h| {
        h.inner()?.h.stop()?;
        Ok(0)
    })
}

/// `dtrace_sleep`: waits until the next switch, status or aggregation rate falls due.
#[no_mangle]
pub unsafe extern "C" fn dtrace_sleep(dtp: *mut DtraceHdl) {
    enter(dtp, (), |h| {
        let mut inner = h.inner()?;
        if inner.h.going() {
            inner.h.sleep()?;
        }
        Ok(())
    })
}

/// `dtrace_status`: `DTRACE_STATUS_*`, checking the framework's counters (drops are reported to
/// the drop handler; an `exit()` stops tracing).
#[no_mangle]
pub unsafe extern "C" fn dtrace_status(dtp: *mut DtraceHdl) -> c_int {
    enter(dtp, -1, |h| {
        let mut inner = h.inner()?;
        if inner.h.stopped() {
            return Ok(DTRACE_STATUS_STOPPED);
        }
        if !inner.h.going() {
            return Ok(DTRACE_STATUS_NONE);
        }
        inner.h.poll()?;
        inner.h.check_status()?;
        Ok(if inner.h.stopped() {
            DTRACE_STATUS_EXITED
        } else {
            DTRACE_STATUS_OKAY
        })
    })
}

/// `dtrace_consume`: consumes the principal buffers through the callbacks into `fp`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_consume(
    dtp: *mut DtraceHdl,
    fp: *mut libc::FILE,
    pf: Option<ConsumeProbeFn>,
    rf: Option<ConsumeRecFn>,
    arg: *mut c_void,
) -> c_int {
    let cb = Callbacks {
        probe: pf,
        rec: rf,
        arg,
    };
    enter(dtp, -1, |h| consume::consume(h, fp, cb))
}

/// `dtrace_work`: status, aggregation snapshot and consumption.
#[no_mangle]
pub unsafe extern "C" fn dtrace_work(
    dtp: *mut DtraceHdl,
    fp: *mut libc::FILE,
    pf: Option<ConsumeProbeFn>,
    rf: Option<ConsumeRecFn>,
    arg: *mut c_void,
) -> c_int {
    let cb = Callbacks {
        probe: pf,
        rec: rf,
        arg,
    };
    enter(dtp, DTRACE_WORKSTATUS_ERROR, |h| {
        Ok(match consume::work(h, fp, cb)? {
            WorkStatus::Okay => DTRACE_WORKSTATUS_OKAY,
            WorkStatus::Done => DTRACE_WORKSTATUS_DONE,
        })
    })
}

/// `dtrace_handle_err`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_handle_err(
    dtp: *mut DtraceHdl,
    f: Option<HandleErrFn>,
    arg: *mut c_void,
) -> c_int {
    enter(dtp, -1, |h| handlers::handle_err(h, f, arg))
}

/// `dtrace_handle_drop`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_handle_drop(
    dtp: *mut DtraceHdl,
    f: Option<HandleDropFn>,
    arg: *mut c_void,
) -> c_int {
    enter(dtp, -1, |h| handlers::handle_drop(h, f, arg))
}

/// `dtrace_handle_buffered`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_handle_buffered(
    dtp: *mut DtraceHdl,
    f: Option<HandleBufferedFn>,
    arg: *mut c_void,
) -> c_int {
    enter(dtp, -1, |h| handlers::handle_buffered(h, f, arg))
}

/// `dtrace_aggregate_snap`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_aggregate_snap(dtp: *mut DtraceHdl) -> c_int {
    enter(dtp, -1, aggregate::snap)
}

/// `dtrace_aggregate_clear`.
#[no_mangle]
pub unsafe extern "C" fn dtrace_aggregate_clear(dtp: *mut DtraceHdl) {
    enter(dtp, (), aggregate::clear)
}

/// The order `dtrace_aggregate_print` prints in for a walker: its own for this library's
/// sorted walkers, the options' for none.
fn walk_of(f: Option<AggregateWalkFn>) -> Result<Walk, Fail> {
    let Some(f) = f else {
        return Ok(Walk::Sorted);
    };
    let a = f as usize;
    let known: [(usize, Walk); 10] = [
        (dtrace_aggregate_walk as *const () as usize, Walk::Unsorted),
        (
            dtrace_aggregate_walk_sorted as *const () as usize,
            Walk::Sorted,
        ),
        (
            dtrace_aggregate_walk_keysorted as *const () as usize,
            Walk::Key { rev: false },
        ),
        (
            dtrace_aggregate_walk_keyvarsorted as *const () as usize,
            Walk::Key { rev: false },
        ),
        (
            dtrace_aggregate_walk_valsorted as *const () as usize,
            Walk::Val { rev: false },
        ),
        (
            dtrace_aggregate_walk_valvarsorted as *const () as usize,
            Walk::Val { rev: false },
        ),
        (
            dtrace_aggregate_walk_keyrevsorted as *const () as usize,
            Walk::Key { rev: true },
        ),
        (
            dtrace_aggregate_walk_keyvarrevsorted as *const () as usize,
            Walk::Key { rev: true },
        ),
        (
            dtrace_aggregate_walk_valrevsorted as *const () as usize,
            Walk::Val { rev: true },
        ),
        (
            dtrace_aggregate_walk_valvarrevsorted as *const () as usize,
            Walk::Val { rev: true },
        ),
    ];
    known
        .iter()
        .find(|(k, _)| *k == a)
        .map(|(_, w)| *w)
        .ok_or_else(|| {
            Fail::unsupported("dtrace_aggregate_print with a walker of the caller's own")
        })
}

/// `dtrace_aggregate_print`: every aggregation not printed by `printa()`, in the order of
/// `func` (one of the `dtrace_aggregate_walk*` functions; NULL: as the options say).
#[no_mangle]
pub unsafe extern "C" fn dtrace_aggregate_print(
    dtp: *mut DtraceHdl,
    fp: *mut libc::FILE,
    func: Option<AggregateWalkFn>,
) -> c_int {
    enter(dtp, -1, |h| aggregate::print(h, fp, walk_of(func)?))
}

macro_rules! walkers {
    ($($(#[$doc:meta])* $name:ident => $walk:expr;)*) => {
        $(
            $(#[$doc])*
            #[no_mangle]
            pub unsafe extern "C" fn $name(
                dtp: *mut DtraceHdl,
                f: Option<AggregateFn>,
                arg: *mut c_void,
            ) -> c_int {
                enter(dtp, -1, |h| aggregate::walk(h, f, arg, $walk))
            }
        )*
    };
}

walkers! {
    /// `dtrace_aggregate_walk`: every entry, variables in id order.
    dtrace_aggregate_walk => Walk::Unsorted;
    /// `dtrace_aggregate_walk_sorted`: in printing order (the `aggsort*` options).
    dtrace_aggregate_walk_sorted => Walk::Sorted;
    /// `dtrace_aggregate_walk_keysorted`.
    dtrace_aggregate_walk_keysorted => Walk::Key { rev: false };
    /// `dtrace_aggregate_walk_valsorted`.
    dtrace_aggregate_walk_valsorted => Walk::Val { rev: false };
    /// `dtrace_aggregate_walk_keyvarsorted`.
    dtrace_aggregate_walk_keyvarsorted => Walk::Key { rev: false };
    /// `dtrace_aggregate_walk_valvarsorted`.
    dtrace_aggregate_walk_valvarsorted => Walk::Val { rev: false };
    /// `dtrace_aggregate_walk_keyrevsorted`.
    dtrace_aggregate_walk_keyrevsorted => Walk::Key { rev: true };
    /// `dtrace_aggregate_walk_valrevsorted`.
    dtrace_aggregate_walk_valrevsorted => Walk::Val { rev: true };
    /// `dtrace_aggregate_walk_keyvarrevsorted`.
    dtrace_aggregate_walk_keyvarrevsorted => Walk::Key { rev: true };
    /// `dtrace_aggregate_walk_valvarrevsorted`.
    dtrace_aggregate_walk_valvarrevsorted => Walk::Val { rev: true };
}
