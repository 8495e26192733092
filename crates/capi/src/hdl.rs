//! The handle behind `dtrace_hdl_t *` and the one way into it: [`enter`] checks that the address
//! is an open handle (a registry of the addresses `dtrace_open` returned), catches any panic so
//! none crosses into C, and records the failure as the handle's `dtrace_errno()`. The C forms of
//! the descriptions handed to callbacks are kept here ([`Descs`]) for the handle's lifetime, so the
//! pointers callers receive stay valid as DTrace promises.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Mutex;

use dtrace_consumer::handle::Handle;
use dtrace_dif::program::Program;
use dtrace_framework::records::{AggDesc, EprobeDesc, ProbeInfo};

use crate::ctypes::{
    AggDescHead, EprobeDescHead, HandleBufferedFn, ProbeDescC, ProgInfo, RecDescC,
    DTRACEACT_DIFEXPR,
};
use crate::errno::{Edt, Fail};
use crate::ffi::{self, Flex};

/// The opaque `dtrace_hdl_t` C sees.
#[repr(C)]
pub struct DtraceHdl {
    _opaque: [u8; 0],
}

/// The opaque `dtrace_prog_t` C sees.
#[repr(C)]
pub struct DtraceProg {
    _opaque: [u8; 0],
}

/// Addresses of the open handles.
static OPEN: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A compiled program the handle owns (`dtrace_prog_t`).
pub struct Prog {
    /// The program.
    pub prog: Program,
    /// What enabling it matched, once it has been (`dpi_matches`).
    pub matches: Option<u32>,
}

/// The consumer state, borrowed by one entry point at a time.
pub struct Inner {
    /// The Rust consumer handle.
    pub h: Handle,
    /// Programs compiled on this handle (their addresses are the `dtrace_prog_t *`s).
    pub progs: Vec<Box<Prog>>,
    /// `dtrace_handle_buffered`'s handler and argument.
    pub buffered: Option<(HandleBufferedFn, *mut c_void)>,
    /// Opened with `DTRACE_O_NODEV`: it compiles, it cannot trace.
    pub nodev: bool,
}

impl Inner {
    /// Fails with `ENODEV` on a handle that cannot trace.
    pub fn can_trace(&self) -> Result<(), Fail> {
        if self.nodev {
            return Err(Fail::code(libc::ENODEV));
        }
        Ok(())
    }
}

/// The C descriptions handed to callbacks, built once per EPID, probe and aggregation.
#[derive(Default)]
pub struct Descs {
    eprobes: HashMap<u32, Flex<EprobeDescHead>>,
    probe_ids: HashMap<u32, u32>,
    probes: HashMap<u32, Box<ProbeDescC>>,
    aggs: HashMap<u32, Flex<AggDescHead>>,
    /// Aggregation names by variable id (`dtagd_name`).
    pub names: HashMap<u32, CString>,
}

impl Descs {
    /// The C form of an enabled probe description.
    pub fn eprobe(&mut self, e: &EprobeDesc) -> *mut EprobeDescHead {
        self.probe_ids.insert(e.epid, e.probe_id);
        self.eprobes
            .entry(e.epid)
            .or_insert_with(|| {
                let recs: Vec<RecDescC> = e.recs.iter().map(|r| RecDescC::of(r, 0)).collect();
                let head = EprobeDescHead {
                    epid: e.epid,
                    probeid: e.probe_id,
                    uarg: 0,
                    size: e.size,
                    nrecs: recs.len() as c_int,
                };
                Flex::new(head, &recs)
            })
            .head()
    }

    /// The C form of record `i` of an EPID's description (NULL if unknown).
    pub fn rec(&self, epid: u32, i: usize) -> *const RecDescC {
        self.eprobes
            .get(&epid)
            .map_or(std::ptr::null(), |f| f.rec(i))
    }

    /// The probe an enabling fires for, once its description has been built.
    pub fn probe_id_of(&self, epid: u32) -> Option<u32> {
        self.probe_ids.get(&epid).copied()
    }

    /// The first enabling (lowest EPID) of probe `probe_id`, if one has been described.
    pub fn epid_of_probe(&self, probe_id: u32) -> Option<u32> {
        self.probe_ids
            .iter()
            .filter(|(_, p)| **p == probe_id)
            .map(|(e, _)| *e)
            .min()
    }

    /// The C description of the enabling `epid`, if it has been built.
    pub fn eprobe_by_id(&self, epid: u32) -> *mut EprobeDescHead {
        self.eprobes
            .get(&epid)
            .map_or(std::ptr::null_mut(), |f| f.head())
    }

    /// The C form of a probe description.
    pub fn probe(&mut self, p: &ProbeInfo) -> *mut ProbeDescC {
        let b = self
            .probes
            .entry(p.id)
            .or_insert_with(|| Box::new(ProbeDescC::from(p)));
        &mut **b
    }

    /// The C description of the probe `id`, if it has been built.
    pub fn probe_by_id(&mut self, id: u32) -> *mut ProbeDescC {
        self.probes
            .get_mut(&id)
            .map_or(std::ptr::null_mut(), |b| &mut **b)
    }

    /// The C form of an aggregation's description, laid out as [`crate::aggregate`] lays its
    /// data out: the aggregation id (record 0), the keys from offset 8, the value last at
    /// `value_offset`.
    pub fn agg(
        &mut self,
        d: &AggDesc,
        value_offset: u32,
        size: u32,
        flags: c_int,
    ) -> *mut AggDescHead {
        let name = self
            .names
            .get(&d.varid)
            .map_or(std::ptr::null_mut(), |n| n.as_ptr().cast_mut());
        let nrecs = d.recs.len() + 1;
        let head = AggDescHead {
            name,
            varid: i64::from(d.varid),
            flags,
            id: d.aggid,
            epid: d.epid,
            size,
            nrecs: nrecs as c_int,
            pad: 0,
        };
        let f = self.aggs.entry(d.aggid).or_insert_with(|| {
            let mut recs = vec![RecDescC {
                action: DTRACEACT_DIFEXPR,
                size: 4,
                offset: 0,
                alignment: 4,
                ..RecDescC::default()
            }];
            let keys = d.recs.len().saturating_sub(1);
            recs.extend(d.recs[..keys].iter().map(|r| RecDescC::of(r, 8)));
            if let Some(v) = d.recs.last() {
                let mut c = RecDescC::of(v, 0);
                c.offset = value_offset;
                recs.push(c);
            }
            Flex::new(head, &recs)
        });
        f.set_head(head);
        f.head()
    }
}

/// A handle (`dtrace_hdl_t`).
pub struct Hdl {
    /// `dtrace_errno()`.
    pub errno: Cell<c_int>,
    /// The message of the current error when the table's would not say enough.
    pub errmsg: RefCell<Option<CString>>,
    /// Entry points running on this handle (callbacks may call back in).
    depth: Cell<u32>,
    /// `dtrace_close` was called from a callback: free when the outermost call returns.
    closing: Cell<bool>,
    /// The consumer.
    pub inner: RefCell<Inner>,
    /// Descriptions handed to C, shared with the error and drop handlers.
    pub descs: Rc<RefCell<Descs>>,
}

impl Hdl {
    /// Registers a new handle over `h` (`nodev`: one that only compiles) and returns the address
    /// C will hold.
    pub fn open(h: Handle, nodev: bool) -> *mut DtraceHdl {
        let b = Box::new(Hdl {
            errno: Cell::new(0),
            errmsg: RefCell::new(None),
            depth: Cell::new(0),
            closing: Cell::new(false),
            inner: RefCell::new(Inner {
                h,
                progs: Vec::new(),
                buffered: None,
                nodev,
            }),
            descs: Rc::new(RefCell::new(Descs::default())),
        });
        let p = Box::into_raw(b);
        lock_open().push(p as usize);
        p.cast()
    }

    /// Records a failure as this handle's error.
    pub fn fail(&self, f: Fail) {
        self.errno.set(f.errno);
        *self.errmsg.borrow_mut() = f
            .msg
            .map(|m| CString::new(m.replace('\0', " ")).unwrap_or_default());
    }

    /// The consumer state, unless an entry point running further up (a callback calling back
    /// in) holds it.
    pub fn inner(&self) -> Result<std::cell::RefMut<'_, Inner>, Fail> {
        self.inner
            .try_borrow_mut()
            .map_err(|_| Fail::unsupported("calling this function from a libdtrace callback"))
    }

    /// Refreshes the C descriptions of every enabled probe, probe and aggregation name the
    /// consumer knows (after a program is enabled).
    pub fn note_descriptions(&self, inner: &Inner, programs: &[&Program]) {
        let mut d = self.descs.borrow_mut();
        for e in inner.h.decoder.eprobes.values() {
            d.eprobe(e);
        }
        for p in inner.h.decoder.probes.values() {
            d.probe(p);
        }
        for prog in programs {
            for a in &prog.aggregations {
                if let Ok(n) = CString::new(a.name.as_str()) {
                    d.names.insert(a.id, n);
                }
            }
        }
    }
}

fn lock_open() -> std::sync::MutexGuard<'static, Vec<usize>> {
    OPEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` on the handle at `dtp`, or returns `bad` (setting `dtp`'s error when it is an open
/// handle, and leaving everything alone when it is not). Panics are caught and reported as a
/// library failure; a handle closed from inside a callback is freed when the outermost call
/// returns.
pub fn enter<R>(dtp: *mut DtraceHdl, bad: R, f: impl FnOnce(&Hdl) -> Result<R, Fail>) -> R {
    let p = dtp.cast::<Hdl>().cast_const();
    if p.is_null() || !lock_open().contains(&(p as usize)) {
        return bad;
    }
    let hdl = ffi::registered(p);
    hdl.depth.set(hdl.depth.get() + 1);
    let r = catch_unwind(AssertUnwindSafe(|| f(hdl)));
    hdl.depth.set(hdl.depth.get() - 1);
    let out = match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            hdl.fail(e);
            bad
        }
        Err(_) => {
            hdl.fail(Fail {
                errno: Edt::NoMem as i32,
                msg: Some("internal error in libdtrace (a panic was caught)".into()),
            });
            bad
        }
    };
    if hdl.depth.get() == 0 && hdl.closing.get() {
        free(p);
    }
    out
}

/// `dtrace_close`: stops tracing and frees the handle now, or when the outermost entry point
/// running on it returns (a callback closing its own handle).
pub fn close(dtp: *mut DtraceHdl) {
    let p = dtp.cast::<Hdl>().cast_const();
    if p.is_null() || !lock_open().contains(&(p as usize)) {
        return;
    }
    let hdl = ffi::registered(p);
    if hdl.depth.get() > 0 {
        hdl.closing.set(true);
        return;
    }
    free(p);
}

/// Unregisters and frees the handle at `p` (open, with nothing running on it).
fn free(p: *const Hdl) {
    {
        let mut open = lock_open();
        let Some(i) = open.iter().position(|&a| a == p as usize) else {
            return;
        };
        open.swap_remove(i);
    }
    // SAFETY: `p` came from `Box::into_raw` in `Hdl::open` and was registered until just now;
    // no entry point is running on it (depth 0), so this is the only reference.
    let b = unsafe { Box::from_raw(p.cast_mut()) };
    let _ = catch_unwind(AssertUnwindSafe(move || {
        let hdl = *b;
        let inner = hdl.inner.into_inner();
        let _ = inner.h.close();
    }));
}

/// The program behind a `dtrace_prog_t *` compiled on this handle.
pub fn prog_of(inner: &mut Inner, p: *mut DtraceProg) -> Result<&mut Prog, Fail> {
    inner
        .progs
        .iter_mut()
        .find(|b| std::ptr::eq(&***b, p.cast::<Prog>()))
        .map(|b| &mut **b)
        .ok_or(Fail::code(libc::EINVAL))
}

/// `dtrace_proginfo_t` of a program: its counts and, when `with_attrs`, its minimum
/// attributes (matched against the tracer's probes).
pub fn proginfo(inner: &mut Inner, prog: &Prog) -> ProgInfo {
    use dtrace_dif::program::ActionKind;
    let actions = || prog.prog.ecbs.iter().flat_map(|e| e.actions.iter());
    let a = inner.h.program_attributes(&prog.prog);
    ProgInfo {
        descattr: a.desc.into(),
        stmtattr: a.stmt.into(),
        aggregates: prog.prog.aggregations.len() as u32,
        recgens: prog
            .prog
            .ecbs
            .iter()
            .filter(|e| e.actions.iter().any(|a| !a.kind.is_aggregation()))
            .count() as u32,
        matches: prog.matches.unwrap_or(0),
        speculations: actions()
            .filter(|a| a.kind == ActionKind::Speculate)
            .count() as u32,
    }
}
