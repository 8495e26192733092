//! The lock queries in translated code (`mutex_owned()`, `mutex_owner()`,
//! `mutex_type_adaptive()`, `mutex_type_spin()`, `rw_read_held()`, `rw_write_held()`,
//! `rw_iswriter()`), as the interpreter answers them (`dtrace_dif::vm::subr::locks`): the lock's
//! first word (8 bytes of a `struct mutex`, 4 of an `rwlock_t`) is read from kernel memory, a
//! failed read faulting at the lock's address as the interpreter's does, and the answer computed
//! from it.

use super::{FaultAddr, Kind, State, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R10, R2, R3};
use dtrace_dif::subr::Subr;
use dtrace_dif::vm::subr::locks::{self, MUTEX_FLAGS, RW_READER_SHIFT, RW_WRITE_LOCKED};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// Lock query `which` of the lock whose address is on the tuple stack, into `rd`.
    pub(super) fn lock_query(
        &mut self,
        pc: usize,
        s: &mut State,
        which: Subr,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let args = self.int_args(pc, s)?;
        let (Some(bytes), [lock]) = (locks::word_bytes(which), &args[..]) else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("{}() with {} arguments", which.name(), args.len()),
            });
        };
        let buf = self.frame.load_buf();
        let bad = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(*lock));
        let a = &mut self.a;
        a.frame_addr(R1, i32::from(buf))
            .mov_imm(R2, bytes as i32)
            .load(Size::DW, R3, R10, *lock)
            .call(helper::PROBE_READ_KERNEL);
        a.jmp_imm(op::JNE, R0, 0, bad);
        let size = if bytes == 8 { Size::DW } else { Size::W };
        a.load(size, R1, R10, buf);
        let to_bool = |a: &mut crate::insn::Asm| {
            // R1 = (R1 != 0)
            let zero = a.label();
            a.jmp_imm(op::JEQ, R1, 0, zero);
            a.mov_imm(R1, 1);
            a.bind(zero);
        };
        match which {
            Subr::MutexOwned => {
                a.alu_imm(op::AND, R1, !(MUTEX_FLAGS as i32));
                to_bool(a);
            }
            Subr::MutexOwner => {
                a.alu_imm(op::AND, R1, !(MUTEX_FLAGS as i32));
            }
            Subr::MutexTypeAdaptive | Subr::MutexTypeSpin => {
                a.mov_imm(R1, i32::from(which == Subr::MutexTypeAdaptive));
            }
            Subr::RwReadHeld => {
                // Readers, and no writer.
                let (no, done) = (a.label(), a.label());
                a.mov(R2, R1).alu_imm(op::AND, R2, RW_WRITE_LOCKED as i32);
                a.jmp_imm(op::JNE, R2, 0, no);
                a.alu_imm(op::RSH, R1, RW_READER_SHIFT as i32);
                to_bool(a);
                a.ja(done);
                a.bind(no).mov_imm(R1, 0);
                a.bind(done);
            }
            _ => {
                // rw_write_held(), rw_iswriter(): the writer's byte says a writer holds it.
                let (no, done) = (a.label(), a.label());
                a.alu_imm(op::AND, R1, RW_WRITE_LOCKED as i32);
                a.jmp_imm(op::JNE, R1, RW_WRITE_LOCKED as i32, no);
                a.mov_imm(R1, 1).ja(done);
                a.bind(no).mov_imm(R1, 0);
                a.bind(done);
            }
        }
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }
}
