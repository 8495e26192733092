//! Probe context: running the ECBs of a firing probe (`dtrace_probe`). For each ECB: the room its
//! record needs in the CPU's principal buffer (none: the ECB is skipped whole, one drop counted),
//! the predicate, then each action through the DIF interpreter, building the record in the layout of the ECB and
//! committing it to the CPU's principal buffer (or a speculation); aggregating actions update the CPU's
//! aggregation buffer. A fault stops the ECB (its record is not committed), writes a fault record and
//! fires `dtrace:::ERROR` with DTrace's arguments; a fault in an ERROR clause only counts a double error.

use crate::context::{ContextAdapter, FiringContext};
use crate::framework::{DestructiveRequest, Ecb, Framework};
use crate::providers::dtrace::{END, ERROR};
use crate::records::{FaultRecord, FAULT_NO_OFFSET};
use crate::speculation::SpecLookup;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::ActionKind;
use dtrace_dif::vm::{Fault, FaultKind, Machine, Memory, Prepared};

/// Most nanoseconds `chill()` may spend per CPU per second (`dtrace_chill_max`).
pub const CHILL_MAX: u64 = 500_000_000;

/// Where the record of the ECB being run goes.
enum Dest {
    Principal,
    Spec(usize),
    Nowhere,
}

/// How one ECB ended.
enum Outcome {
    Done,
    Fault {
        kind: FaultKind,
        addr: u64,
        /// Instruction of the fault in the clause's code, or `FAULT_NO_OFFSET`.
        pc: u64,
    },
}

/// A fault while performing an action.
enum ActFault {
    /// In DIF code (has a DIF offset).
    Dif(Fault),
    /// Outside DIF (storing the result, speculation ids, chill): no DIF offset.
    Outside(FaultKind, u64),
}

impl From<Fault> for ActFault {
    fn from(f: Fault) -> ActFault {
        ActFault::Outside(f.kind, f.addr)
    }
}

/// Stores the `size` low bytes of `val` (native-endian) at `off`.
fn store_int(rec: &mut [u8], off: usize, size: usize, val: u64) {
    let bytes = val.to_ne_bytes();
    let n = size.min(8);
    let src = if cfg!(target_endian = "big") {
        &bytes[8 - n..]
    } else {
        &bytes[..n]
    };
    if let Some(d) = rec.get_mut(off..off + n) {
        d.copy_from_slice(src);
    }
}

/// Writes the value a DIF object returned into `dst`: integers by value, strings NUL-terminated (and
/// NUL-padded to `dst.len()` when `pad`), other by-reference data copied. Returns the number of bytes
/// that matter: `dst.len()`, or a string's length with its NUL when not padded.
fn store_value(
    m: &Machine,
    obj: &DifObject,
    mem: &mut dyn Memory,
    val: u64,
    dst: &mut [u8],
    pad: bool,
) -> Result<usize, Fault> {
    let t = &obj.rtype;
    if !t.is_by_ref() {
        let n = dst.len();
        store_int(dst, 0, n, m.export_value(val));
        return Ok(n);
    }
    if t.is_string() {
        if dst.is_empty() {
            return Ok(0);
        }
        let last = dst.len() - 1;
        let n = m.copy_string_result(obj, mem, val, &mut dst[..last])?;
        if pad {
            dst[n..].fill(0);
            return Ok(dst.len());
        }
        dst[n] = 0;
        return Ok(n + 1);
    }
    if t.flags & dtrace_dif::object::DIF_TF_BYUREF != 0 {
        mem.read_user(val, dst).map_err(|k| Fault::new(k, val))?;
        return Ok(dst.len());
    }
    m.read_result_into(obj, mem, val, dst)?;
    Ok(dst.len())
}

/// Writes a stack record: `frames` u64 program counters, zero-filled.
fn store_stack(dst: &mut [u8], pcs: &[u64]) {
    for (i, chunk) in dst.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&pcs.get(i).copied().unwrap_or(0).to_ne_bytes());
    }
}

/// Writes the record of an action whose data comes from the probe context rather than (only) its
/// DIF value: `stack()` (kernel pcs), `ustack()`/`jstack()` (pid, then user pcs, then zeroed string
/// space) and `usym()`/`umod()`/`uaddr()` (pid, then the address). The same bytes serve as a trace
/// record and as an aggregation key. Returns `false` for any other action.
fn store_context_record(
    kind: ActionKind,
    arg: u64,
    ctx: &FiringContext,
    val: u64,
    dst: &mut [u8],
) -> bool {
    match kind {
        ActionKind::Stack => store_stack(dst, &ctx.kstack),
        ActionKind::Ustack | ActionKind::Jstack => {
            let frames = (arg & 0xffff_ffff) as usize;
            let n = 8.min(dst.len());
            dst[..n].copy_from_slice(&ctx.pid.to_ne_bytes()[..n]);
            let end = frames.saturating_mul(8).saturating_add(8).min(dst.len());
            store_stack(&mut dst[n..end], &ctx.ustack);
            dst[end..].fill(0);
        }
        ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr => {
            let n = dst.len().min(16);
            store_int(dst, 0, n.min(8), ctx.pid);
            if n == 16 {
                store_int(dst, 8, 8, val);
            }
        }
        _ => return false,
    }
    true
}

impl Framework {
    /// Runs every ECB of `probe` for one firing.
    pub(crate) fn run_probe(
        &mut self,
        ecbs: &[Ecb],
        probe: u32,
        cpu: u32,
        ctx: &FiringContext,
        mem: &mut dyn Memory,
    ) {
        let n = match self.probe_ecbs.get(probe as usize) {
            Some(v) if !v.is_empty() => v.len(),
            _ => return,
        };
        let ts = ctx.timestamp.unwrap_or_else(|| self.clock.now());
        let in_error = self.in_error;
        if in_error {
            self.error_machine.begin_firing();
        } else {
            // Between firings no DIF code holds addresses of dynamic variables: the cleaner may run
            // (freed space goes dirty -> rinsing -> free, as DTrace's cleaner moves it).
            self.vars.dynvars.clean();
            self.machine.begin_firing();
        }
        for k in 0..n {
            // Each clause starts by checking that tracing is still active, as DTrace for Linux's
            // clauses do: after exit() (in an earlier clause of this firing, or in an ERROR clause
            // it triggered) the remaining clauses of a probe other than END and ERROR do not run.
            if !in_error && probe != END && self.status.exit_status.is_some() {
                break;
            }
            let i = self.probe_ecbs[probe as usize][k];
            let e = &ecbs[i];
            if e.elsewhere && !ctx.handed_over {
                continue;
            }
            let outcome = self.run_ecb(e, cpu, ctx, mem, ts);
            // Room the clause took and did not use goes back to the account it shares with the
            // place where probes fire (see `Framework::share_room`).
            if let Some(c) = self.cpus.get_mut(cpu as usize) {
                c.principal.release();
            }
            if let Outcome::Fault { kind, addr, pc } = outcome {
                self.status.errors += 1;
                if in_error {
                    self.status.dblerrors += 1;
                    continue;
                }
                let rec = FaultRecord {
                    probe: e.probe,
                    clause: e.clause,
                    pc,
                    kind: kind.code(),
                    addr,
                };
                self.fire_error(ecbs, cpu, rec, ctx, ts, mem);
            }
        }
    }

    /// Reports a fault of ECB `epid`, a clause that runs where its probe fires (see
    /// [`Framework::run_elsewhere`]), as a fault of the interpreter is reported: the error
    /// counter, then the fault record (when enabled) and `dtrace:::ERROR`, whose clauses run here
    /// in `ctx` (the faulting firing's context) with `mem`. `pc` is the faulting instruction in
    /// the clause's code taken as one sequence (predicate, then the actions: the offset the
    /// interpreter reports), `kind` the `DTRACEFLT_*` code and `addr` the address. Under the
    /// rules a firing follows, nothing happens while tracing is not active or after `exit()`;
    /// returns whether the fault was reported (a fault that names no ECB run elsewhere is
    /// refused, a bad record).
    #[allow(clippy::too_many_arguments)]
    pub fn fault_elsewhere(
        &mut self,
        epid: u32,
        cpu: u32,
        pc: u64,
        kind: u32,
        addr: u64,
        ctx: &FiringContext,
        mem: &mut dyn Memory,
    ) -> bool {
        let draining = self.status.exit_status.is_some();
        if self.activity != crate::framework::Activity::Active || draining || cpu >= self.ncpus {
            return false;
        }
        if self.options.cpu.is_some_and(|c| c != cpu) {
            return false;
        }
        let Some(e) = (epid as usize)
            .checked_sub(1)
            .and_then(|i| self.ecbs.get(i))
            .filter(|e| e.elsewhere)
        else {
            return false;
        };
        let rec = FaultRecord {
            probe: e.probe,
            clause: e.clause,
            pc,
            kind,
            addr,
        };
        self.status.errors += 1;
        let ts = ctx.timestamp.unwrap_or_else(|| self.clock.now());
        let ecbs = std::mem::take(&mut self.ecbs);
        self.fire_error(&ecbs, cpu, rec, ctx, ts, mem);
        self.ecbs = ecbs;
        true
    }

    /// Reports a fault: a fault record in the CPU's buffer (when enabled), then `dtrace:::ERROR` with
    /// DTrace for Linux's arguments: arg1 = probe id, arg2 = statement id of the clause, arg3 = pc in
    /// the clause's code, arg4 = fault kind, arg5 = address.
    fn fire_error(
        &mut self,
        ecbs: &[Ecb],
        cpu: u32,
        rec: FaultRecord,
        ctx: &FiringContext,
        ts: u64,
        mem: &mut dyn Memory,
    ) {
        if self.fault_records {
            if let Some(c) = self.cpus.get_mut(cpu as usize) {
                c.principal.append(&rec.encode(ts), self.firing_end);
            }
        }
        // ERROR fires in the context of the faulting probe, with its own arguments.
        let mut ectx = FiringContext {
            timestamp: Some(ts),
            args: [0; 10],
            ..ctx.clone()
        };
        ectx.args[1] = rec.probe as u64;
        ectx.args[2] = rec.clause as u64;
        ectx.args[3] = rec.pc;
        ectx.args[4] = rec.kind as u64;
        ectx.args[5] = rec.addr;
        self.in_error = true;
        self.run_probe(ecbs, ERROR, cpu, &ectx, mem);
        self.in_error = false;
    }

    /// Runs one DIF object of ECB `e` in this firing.
    fn run_difo(
        &mut self,
        obj: &Prepared,
        e: &Ecb,
        cpu: u32,
        ctx: &FiringContext,
        mem: &mut dyn Memory,
        ts: u64,
    ) -> Result<u64, Fault> {
        let Some(probe) = self.registry.probe(e.probe) else {
            return Err(Fault::new(FaultKind::Unknown, 0));
        };
        let mut adapter = ContextAdapter {
            ctx,
            probe: &probe.info,
            epid: e.epid,
            cpu,
            place: self
                .cpu_places
                .get(cpu as usize)
                .copied()
                .unwrap_or_default(),
            timestamp: ts,
            clock: self.clock.as_ref(),
            specs: &mut self.specs,
            rng: &mut self.rng,
        };
        let m = if self.in_error {
            &mut self.error_machine
        } else {
            &mut self.machine
        };
        m.run_prepared(obj, &mut self.vars, &mut adapter, mem)
    }

    fn machine_mut(&mut self) -> &mut Machine {
        if self.in_error {
            &mut self.error_machine
        } else {
            &mut self.machine
        }
    }

    fn machine(&self) -> &Machine {
        if self.in_error {
            &self.error_machine
        } else {
            &self.machine
        }
    }

    /// Runs ECB `e`.
    fn run_ecb(
        &mut self,
        e: &Ecb,
        cpu: u32,
        ctx: &FiringContext,
        mem: &mut dyn Memory,
        ts: u64,
    ) -> Outcome {
        // Each clause has an alloca area of its own (DTrace for Linux's).
        if self.in_error {
            self.error_machine.begin_clause();
        } else {
            self.machine.begin_clause();
        }
        // The room the clause's record needs is taken before the clause does anything that
        // lasts (DTrace's `dte_needed`, reserved by `dtrace_probe()` before the ECB runs): without
        // it the clause is skipped whole, one drop counted, its stores not made. A clause that
        // records nothing (aggregations, stores alone) needs no room and always runs. A
        // predicate without side effects runs first (see `framework::has_side_effects`).
        if e.reserve_before_predicate && !self.reserve_record(e, cpu) {
            return Outcome::Done;
        }
        if let Some(pred) = &e.predicate {
            match self.run_difo(pred, e, cpu, ctx, mem, ts) {
                Ok(0) => return Outcome::Done,
                Ok(_) => {}
                Err(_) if self.machine_mut().take_dropped_exit() => return Outcome::Done,
                Err(f) => {
                    return Outcome::Fault {
                        kind: f.kind,
                        addr: f.addr,
                        pc: f.pc as u64,
                    }
                }
            }
        }
        if !e.reserve_before_predicate && !self.reserve_record(e, cpu) {
            return Outcome::Done;
        }
        let size = e.layout.size as usize;
        let epid = e.epid;
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        if size > 0 {
            record.resize(size, 0);
            record[0..4].copy_from_slice(&epid.to_ne_bytes());
            record[4..8].copy_from_slice(&((ts >> 32) as u32).to_ne_bytes());
            record[8..12].copy_from_slice(&(ts as u32).to_ne_bytes());
        }
        let mut key = std::mem::take(&mut self.key);
        let mut dest = Dest::Principal;
        let mut incr: u64 = 1;
        let nactions = e.actions.len();
        let mut outcome = Outcome::Done;
        for ai in 0..nactions {
            let prepared = e.difos[ai].as_ref();
            let obj = prepared.map(Prepared::object);
            let result = match prepared {
                Some(o) => self
                    .run_difo(o, e, cpu, ctx, mem, ts)
                    .map_err(ActFault::Dif),
                None => Ok(0),
            }
            .and_then(|val| {
                let mut st = ActionState {
                    ctx,
                    mem: &mut *mem,
                    record: &mut record,
                    key: &mut key,
                    key_end: self.key_end,
                    incr,
                    dest: &mut dest,
                };
                let r = self.do_action(e, ai, obj, val, cpu, &mut st);
                self.key_end = st.key_end;
                incr = if e.layout.actions[ai].agg.is_some() {
                    1
                } else {
                    st.incr
                };
                r
            });
            match result {
                Ok(true) => {}
                Ok(false) => {
                    dest = Dest::Nowhere;
                    break;
                }
                // a dropped dynamic-variable store ends the clause without its record
                Err(ActFault::Dif(_)) if self.machine_mut().take_dropped_exit() => {
                    dest = Dest::Nowhere;
                    break;
                }
                Err(f) => {
                    // The pc counts the clause's DIF objects as one sequence; a fault outside DIF
                    // (the action itself) is placed at its expression's last instruction.
                    let base = e.code_base.get(ai).copied().unwrap_or(0);
                    let (kind, addr, pc) = match f {
                        ActFault::Dif(f) => (f.kind, f.addr, base + f.pc as u64),
                        ActFault::Outside(k, a) => match e.code_base.get(ai + 1) {
                            Some(&end) if end > 0 => (k, a, end - 1),
                            _ => (k, a, FAULT_NO_OFFSET),
                        },
                    };
                    outcome = Outcome::Fault { kind, addr, pc };
                    break;
                }
            }
        }
        if matches!(outcome, Outcome::Done) && size > 0 {
            match dest {
                Dest::Principal => {
                    if let Some(c) = self.cpus.get_mut(cpu as usize) {
                        let is_end = self.firing_end && e.probe == END;
                        c.principal.append(&record, is_end);
                    }
                }
                Dest::Spec(s) => {
                    self.specs.record(s, cpu as usize, &record);
                }
                Dest::Nowhere => {}
            }
        }
        self.record = record;
        self.key = key;
        outcome
    }

    /// Takes the room ECB `e`'s record needs in `cpu`'s principal buffer before the clause runs
    /// (see [`PrincipalBuffer::reserve`](crate::buffer::PrincipalBuffer::reserve)): `false`,
    /// with one drop counted, when there is none and the clause must be skipped whole. A
    /// speculative clause takes it too, as DTrace reserves in the principal buffer before the
    /// clause's `speculate()` moves its record to the speculation's buffer.
    fn reserve_record(&mut self, e: &Ecb, cpu: u32) -> bool {
        let is_end = self.firing_end && e.probe == END;
        match self.cpus.get_mut(cpu as usize) {
            Some(c) => c.principal.reserve(e.layout.size as usize, is_end),
            None => true,
        }
    }

    /// Performs action `ai` of ECB `i` with its evaluated value. `Ok(false)` drops the rest of the ECB
    /// silently (a `speculate()` on a speculation that is not active).
    /// `commit(id)` or `discard(id)` (`kind`) on `cpu`: a commit copies the CPU's buffer of it
    /// to the principal buffer (a full one counts a drop); an id beyond `nspec` is an illegal
    /// operation.
    fn settle(&mut self, kind: ActionKind, id: u64, cpu: u32) -> Result<(), ActFault> {
        let illegal = ActFault::Outside(FaultKind::IllOp, 0);
        if kind == ActionKind::Discard {
            return self.specs.discard(id, cpu as usize).map_err(|_| illegal);
        }
        if let Some(buf) = self.specs.commit(id, cpu as usize).map_err(|_| illegal)? {
            if let Some(c) = self.cpus.get_mut(cpu as usize) {
                c.principal.append_many(&buf.data, &buf.lens);
            }
        }
        Ok(())
    }

    fn do_action(
        &mut self,
        e: &Ecb,
        ai: usize,
        obj: Option<&DifObject>,
        val: u64,
        cpu: u32,
        st: &mut ActionState<'_>,
    ) -> Result<bool, ActFault> {
        let l = &e.layout.actions[ai];
        let (kind, rec, in_tuple, agg) = (e.actions[ai].kind, &l.rec, l.in_tuple, l.agg);
        let off = rec.offset as usize;
        let size = rec.size as usize;
        if l.is_incr {
            st.incr = val;
            return Ok(true);
        }
        if in_tuple {
            // Aggregation key: the keys of one aggregation are laid out from offset 0 of the key bytes,
            // which follow the 4-byte aggregation id in `key`. Only the significant bytes are kept:
            // gaps are zeroed, and a last string key ends at its NUL (its zero padding is implied).
            if l.key_first {
                st.key_end = 4;
            }
            let start = 4 + off;
            if st.key.len() < start + size {
                st.key.resize(start + size, 0);
            }
            st.key[st.key_end.min(start)..start].fill(0);
            let dst = &mut st.key[start..start + size];
            st.key_end = start + size;
            if store_context_record(kind, rec.arg, st.ctx, val, dst) {
                // Stacks and user symbols key by their whole record.
            } else if let Some(o) = obj {
                let n = store_value(self.machine(), o, st.mem, val, dst, !l.key_last)?;
                if l.key_last {
                    st.key_end = start + n;
                }
            } else {
                dst.fill(0);
            }
            return Ok(true);
        }
        if let Some(a) = agg {
            let l = &e.layout.aggs[a];
            let (aggid, key_size, value_words, nkeys) = (
                e.aggids[a],
                l.key_size as usize,
                l.value_words,
                l.keys.len(),
            );
            if nkeys == 0 {
                st.key_end = 4;
            }
            if st.key.len() < 4 {
                st.key.resize(4, 0);
            }
            st.key[0..4].copy_from_slice(&aggid.to_ne_bytes());
            let sig = &st.key[..st.key_end];
            if let Some(c) = self.cpus.get_mut(cpu as usize) {
                c.aggs
                    .aggregate(sig, 4 + key_size, kind, rec.arg, value_words, val, st.incr);
            }
            return Ok(true);
        }
        let range = if size == 0 || off + size > st.record.len() {
            None
        } else {
            Some(off..off + size)
        };
        let ctx = st.ctx;
        match kind {
            ActionKind::Speculate => match self.specs.speculate(val, cpu as usize) {
                SpecLookup::Use(s) => {
                    if !self.specs.fits(e.layout.size as usize) {
                        return Ok(false);
                    }
                    *st.dest = Dest::Spec(s)
                }
                SpecLookup::Nothing | SpecLookup::Illegal => return Ok(false),
            },
            ActionKind::Commit | ActionKind::Discard => {
                // A clause that speculated to the speculation it settles has its record in that
                // buffer already, as DTrace reserves it at speculate() (and nothing is recorded
                // after commit()): the record goes with the speculation, which a commit on the
                // CPU that speculated frees at once.
                if let Dest::Spec(s) = *st.dest {
                    if val.checked_sub(1) == Some(s as u64) && !st.record.is_empty() {
                        self.specs.record(s, cpu as usize, st.record);
                        *st.dest = Dest::Nowhere;
                    }
                }
                self.settle(kind, val, cpu)?;
            }
            ActionKind::Exit => {
                if let Some(r) = range {
                    store_int(st.record, r.start, 4, val);
                }
                if self.status.exit_status.is_none() {
                    self.status.exit_status = Some(val as i32);
                }
            }
            ActionKind::Stack
            | ActionKind::Ustack
            | ActionKind::Jstack
            | ActionKind::Usym
            | ActionKind::Umod
            | ActionKind::Uaddr => {
                if let Some(r) = range {
                    store_context_record(kind, rec.arg, ctx, val, &mut st.record[r]);
                }
            }
            ActionKind::Tracemem => {
                if let (Some(r), Some(o)) = (range, obj) {
                    self.machine()
                        .read_result_into(o, st.mem, val, &mut st.record[r])?;
                }
            }
            // Sent already where the probe fired (see `Framework::signal_elsewhere`).
            ActionKind::Stop if e.signals_elsewhere => {}
            ActionKind::Stop => self
                .requests
                .push(DestructiveRequest::Stop { pid: ctx.pid }),
            ActionKind::Raise => {
                if let Some(r) = range {
                    store_int(st.record, r.start, 4, val);
                }
                if !e.signals_elsewhere {
                    self.requests.push(DestructiveRequest::Raise {
                        pid: ctx.pid,
                        tid: ctx.tid,
                        signal: val,
                    })
                }
            }
            ActionKind::Chill => {
                let now = self.clock.now();
                if let Some(c) = self.cpus.get_mut(cpu as usize) {
                    if now.saturating_sub(c.chill_mark) > crate::options::NANOSEC {
                        c.chill_mark = now;
                        c.chilled = 0;
                    }
                    if c.chilled.saturating_add(val) > CHILL_MAX {
                        return Err(ActFault::Outside(FaultKind::IllOp, 0));
                    }
                    c.chilled += val;
                }
                std::thread::sleep(std::time::Duration::from_nanos(val));
            }
            _ => {
                // Data-recording actions: trace(), printf() and printa() arguments, sym(), mod(),
                // system(), freopen(), library actions.
                if let (Some(r), Some(o)) = (range, obj) {
                    store_value(self.machine(), o, st.mem, val, &mut st.record[r], true)?;
                }
            }
        }
        Ok(true)
    }
}

/// The per-ECB scratch an action works on.
struct ActionState<'a> {
    ctx: &'a FiringContext,
    mem: &'a mut dyn Memory,
    record: &'a mut Vec<u8>,
    key: &'a mut Vec<u8>,
    /// End of the significant key bytes written so far.
    key_end: usize,
    /// The increment of the next quantize-family aggregation (1 unless given).
    incr: u64,
    dest: &'a mut Dest,
}
