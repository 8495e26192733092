//! D variables stored by reference that are not strings: structs, unions and arrays
//! (`struct s g;`, `self struct bar foo[int];`, `this->t`, a global array `command[int]` of
//! structs). DIF loads such a variable as the ADDRESS of its storage, and members and elements
//! are loaded (`ldX`), stored (`stX`) and copied (`copys`, a string member) through it.
//!
//! The context gives that address ([`ProbeContext::emit_ref_var`]): a pointer into a map value
//! of the variable's size, which the DIF register's stack slot keeps (the verifier follows a
//! spilled pointer). The translator follows it as [`Kind::Ref`], with the constant offset a
//! member or an element adds, so every access through it has bounds known at translation:
//! an offset or a size computed at run time, a misaligned access (which the interpreter would
//! fault on by where its storage lies), or the address used as an integer keeps the clause in
//! dtrace with its reason.
//!
//! As the interpreter's, a dynamic variable (a thread-local or an array element) is created
//! zero-filled when a load finds none: DIF's `ld?aa; tst; bne; allocs; st?aa; ld?aa` (the
//! compiler's creation of the element) is one load that creates in the kernel, after which the
//! `tst` always finds the address (the creation path is never taken). A creation that finds the
//! space full is a dynamic-variable drop, which ends the clause as a dropped store does. Nothing
//! frees such a variable (a store of 0 to it does not compile). A string member read as a
//! string (a record, a compare, a subroutine's argument, a store in a string variable) is read
//! into a string scratch slot, `strsize` bytes at most and no further than the variable's end.

use super::{string_scratch_width, FaultAddr, Kind, State, StringVar, Translator, Untranslatable};
use crate::insn::{helper, op, Size, R0, R1, R2, R3};
use dtrace_dif::object::{DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD};
use dtrace_dif::opcode::Opcode;
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// The size of the storage of user variable `var` that `dop` loads or stores, when it is
    /// stored by reference and is not a string (a struct, a union, an array).
    pub(super) fn ref_var_size(&self, dop: Opcode, var: u16) -> Option<u32> {
        use Opcode::*;
        let scope = match dop {
            Ldts | Stts | Ldtaa | Sttaa => DIFV_SCOPE_THREAD,
            Ldls | Stls => DIFV_SCOPE_LOCAL,
            Ldgs | Stgs | Ldgaa | Stgaa => DIFV_SCOPE_GLOBAL,
            _ => return None,
        };
        self.obj
            .vartab
            .iter()
            .find(|v| v.id == u32::from(var) && v.scope == scope)
            .filter(|v| v.ty.is_by_ref() && !v.ty.is_string())
            .map(|v| v.ty.size)
    }

    /// Loads the address of by-reference variable `var` (D name `name`, `size` bytes) into
    /// `rd`: created zero-filled when it is a dynamic variable that does not exist; the clause
    /// ends when that creation is dropped (see the module notes).
    pub(super) fn load_ref(
        &mut self,
        pc: usize,
        s: &mut State,
        var: StringVar<'_>,
        size: u32,
        rd: u8,
        name: String,
    ) -> Result<(), Untranslatable> {
        self.ref_var_address(pc, var, size, name)?;
        self.put(s, rd, R0, Kind::Ref { size, off: 0 });
        Ok(())
    }

    /// Leaves in r0 the address of by-reference variable `var` (D name `name`, `size` bytes),
    /// created zero-filled when it is a dynamic variable that does not exist; the clause ends
    /// when that creation is dropped (see the module notes).
    fn ref_var_address(
        &mut self,
        pc: usize,
        var: StringVar<'_>,
        size: u32,
        name: String,
    ) -> Result<(), Untranslatable> {
        if size == 0 || size > i16::MAX as u32 {
            return Err(Untranslatable::Variable {
                pc,
                name,
                why: format!("a variable of {size} bytes"),
            });
        }
        self.ctx
            .emit_ref_var(&mut self.a, var, size)
            .map_err(|why| Untranslatable::Variable { pc, name, why })?;
        let (have, end) = (self.a.label(), self.end);
        self.a.jmp_imm(op::JNE, R0, 0, have);
        // The creation was dropped: the clause ends (the context's drop flag says so).
        self.can_drop = true;
        self.a.ja(end);
        self.a.bind(have);
        Ok(())
    }

    /// Copies `n` bytes from the address in r1 to the one in r2 (through r3), widest first.
    fn emit_copy(&mut self, n: u32) {
        let mut at = 0u32;
        while at < n {
            let (step, sz) = match n - at {
                8.. => (8, Size::DW),
                4..=7 => (4, Size::W),
                2..=3 => (2, Size::H),
                _ => (1, Size::B),
            };
            self.a.load(sz, R3, R1, at as i16);
            self.a.store(sz, R2, at as i16, R3);
            at += step;
        }
    }

    /// Stores by-reference variable `var` (D name `name`, `size` bytes) whole from the storage
    /// of another (`y = x`, `self->t = g`, a member of the same type): register `rs` holds its
    /// address. Its bytes are copied over the variable's, as the interpreter copies them; a
    /// dynamic variable is created first, and a creation dropped (the space is full) ends the
    /// clause, as a store's drop does. A value from anywhere else (kernel memory, `alloca()`)
    /// keeps the clause in dtrace.
    pub(super) fn store_ref_whole(
        &mut self,
        pc: usize,
        s: &mut State,
        var: StringVar<'_>,
        size: u32,
        rs: u8,
        name: String,
    ) -> Result<(), Untranslatable> {
        if !matches!(s[(rs & 7) as usize], Kind::Ref { .. }) {
            return Err(Untranslatable::Variable {
                pc,
                name,
                why: "a struct variable assigned whole from other than a struct variable is \
                      assigned in dtrace"
                    .into(),
            });
        }
        self.ref_access(pc, s, rs, size)?;
        self.ref_var_address(pc, var, size, name)?;
        self.a.mov(R2, R0);
        self.get(R1, rs);
        self.emit_copy(size);
        Ok(())
    }

    /// `rd = r1 + r2` (or `r1 - r2`) where one is a variable's address and the other a
    /// constant: the address of a member or an element, within the variable. `None` when
    /// neither register is an address.
    pub(super) fn ref_arith(
        &mut self,
        pc: usize,
        s: &mut State,
        dop: Opcode,
        r1: u8,
        r2: u8,
        rd: u8,
    ) -> Option<Result<(), Untranslatable>> {
        let (x, y) = (&s[(r1 & 7) as usize], &s[(r2 & 7) as usize]);
        let (base, (size, off), k) = match (dop, x, y) {
            (Opcode::Add, Kind::Ref { size, off }, k) => (r1, (*size, *off), k.clone()),
            (Opcode::Add, k, Kind::Ref { size, off }) => (r2, (*size, *off), k.clone()),
            (Opcode::Sub, Kind::Ref { size, off }, k) => (r1, (*size, *off), k.clone()),
            (_, Kind::Ref { .. }, _) | (_, _, Kind::Ref { .. }) => {
                return Some(Err(Untranslatable::Value {
                    pc,
                    what: format!("a struct variable's address in a {dop:?}").to_lowercase(),
                }))
            }
            _ => return None,
        };
        let Kind::Int(Some(c)) = k else {
            return Some(Err(Untranslatable::Value {
                pc,
                what: "an offset into a struct variable computed at run time".into(),
            }));
        };
        let at = if dop == Opcode::Sub {
            u64::from(off).checked_sub(c)
        } else {
            u64::from(off).checked_add(c)
        };
        let Some(at) = at.filter(|&at| at <= u64::from(size)) else {
            return Some(Err(Untranslatable::Value {
                pc,
                what: "an address past the end of a struct variable".into(),
            }));
        };
        let delta = at as i64 - i64::from(off);
        self.get(R1, base);
        self.a.alu_imm(op::ADD, R1, delta as i32);
        self.put(
            s,
            rd,
            R1,
            Kind::Ref {
                size,
                off: at as u32,
            },
        );
        Some(Ok(()))
    }

    /// The bounds of the access of `n` bytes through register `r`, a variable's address: its
    /// offset, or why it is refused.
    fn ref_access(&self, pc: usize, s: &State, r: u8, n: u32) -> Result<u32, Untranslatable> {
        let Kind::Ref { size, off } = s[(r & 7) as usize] else {
            return Err(Untranslatable::Value {
                pc,
                what: "not a struct variable's address".into(),
            });
        };
        if off.checked_add(n).is_none_or(|end| end > size) {
            return Err(Untranslatable::Value {
                pc,
                what: format!("{n} bytes at offset {off} of a struct variable of {size} bytes"),
            });
        }
        // A load or a store (a copy moves bytes whatever their alignment).
        if (2..=8).contains(&n) && n.is_power_of_two() && off % n != 0 {
            return Err(Untranslatable::Value {
                pc,
                what: format!("a misaligned {n}-byte access into a struct variable"),
            });
        }
        Ok(off)
    }

    /// `ldX [r1], rd` through a variable's address.
    pub(super) fn ref_load(
        &mut self,
        pc: usize,
        s: &mut State,
        dop: Opcode,
        r1: u8,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let (n, signed) = match super::LoadShape::of(dop) {
            Some(l) if !l.user => (u32::from(l.size), l.signed),
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: format!("a struct variable read by {dop:?}").to_lowercase(),
                })
            }
        };
        self.ref_access(pc, s, r1, n)?;
        let sz = Size::for_bytes(n as usize).unwrap_or(Size::DW);
        self.get(R1, r1);
        self.a.load(sz, R1, R1, 0);
        if signed {
            self.a.sign_extend(R1, n as usize);
        }
        self.put(s, rd, R1, Kind::Int(None));
        Ok(())
    }

    /// `stX r1, [rd]` through a variable's address.
    pub(super) fn ref_store(
        &mut self,
        pc: usize,
        s: &State,
        dop: Opcode,
        r1: u8,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let n = super::store_size(dop);
        self.int(s, pc, r1)?;
        self.ref_access(pc, s, rd, n)?;
        let sz = Size::for_bytes(n as usize).unwrap_or(Size::DW);
        self.get(R1, r1);
        self.get(R2, rd);
        self.a.store(sz, R2, 0, R1);
        Ok(())
    }

    /// `copys r1, r2, rd`: `r2` (a constant) bytes from `r1` into a variable at `rd` (a string
    /// or a struct member assigned): from another variable, a string constant (its bytes and
    /// NUL, as the compiler sizes the copy), or a string in the scratch.
    pub(super) fn ref_copys(
        &mut self,
        pc: usize,
        s: &State,
        r1: u8,
        r2: u8,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = |what: String| Untranslatable::Value { pc, what };
        let n = match s[(r2 & 7) as usize] {
            Kind::Int(Some(n)) if n <= i16::MAX as u64 => n as u32,
            _ => {
                return Err(refused(
                    "a copy into a struct variable sized at run time".into(),
                ))
            }
        };
        self.ref_access(pc, s, rd, n)?;
        match &s[(r1 & 7) as usize] {
            Kind::Ref { .. } => {
                self.ref_access(pc, s, r1, n)?;
                self.get(R1, r1);
            }
            Kind::StrConst(b) => {
                let mut bytes: Vec<u8> = b.split(|&c| c == 0).next().unwrap_or_default().into();
                bytes.push(0);
                if n as usize > bytes.len() {
                    return Err(refused(format!(
                        "a copy of {n} bytes of a string constant of {}",
                        bytes.len()
                    )));
                }
                bytes.truncate(n as usize);
                self.get(R2, rd);
                for (i, chunk) in bytes.chunks(8).enumerate() {
                    let at = 8 * i as i16;
                    if chunk.len() == 8 {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(chunk);
                        self.a.ld_imm64(R1, u64::from_le_bytes(w));
                        self.a.store(Size::DW, R2, at, R1);
                    } else {
                        for (j, c) in chunk.iter().enumerate() {
                            self.a.store_imm(Size::B, R2, at + j as i16, i32::from(*c));
                        }
                    }
                }
                return Ok(());
            }
            Kind::Execname => {
                // The name the frame holds (NUL-padded), then zeros.
                let (comm, take) = (self.frame.comm(), n.min(super::COMM_LEN as u32));
                self.get(R2, rd);
                let mut at = 0u32;
                while at < n {
                    let whole = n - at >= 8 && (at >= take || at + 8 <= take);
                    let (step, sz) = if whole { (8, Size::DW) } else { (1, Size::B) };
                    if at < take {
                        self.a.load(sz, R3, super::R10, comm + at as i16);
                        self.a.store(sz, R2, at as i16, R3);
                    } else {
                        self.a.store_imm(sz, R2, at as i16, 0);
                    }
                    at += step;
                }
                return Ok(());
            }
            Kind::Scratch | Kind::VarStr if s.sized[(r1 & 7) as usize].is_none() => {
                let width = string_scratch_width(self.strsize);
                if n as usize > width {
                    return Err(refused(format!(
                        "a copy of {n} bytes of a string of {width} into a struct variable"
                    )));
                }
                // A string variable holding NULL: the interpreter's read at address 0.
                let null = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Zero);
                self.get(R1, r1);
                self.a.jmp_imm(op::JEQ, R1, 0, null);
            }
            _ => {
                return Err(refused(
                    "a copy into a struct variable from memory the translator does not follow"
                        .into(),
                ))
            }
        }
        // R1: the source; R2: the destination.
        self.get(R2, rd);
        self.emit_copy(n);
        Ok(())
    }

    /// The string member at register `r` (a variable's address) read into a fresh zeroed slot
    /// of the string scratch, whose address is left at frame offset `at`: `strsize` bytes at
    /// most, the NUL among them, no further than the variable's end.
    pub(super) fn ref_string_at(
        &mut self,
        pc: usize,
        s: &State,
        r: u8,
        at: i16,
    ) -> Result<(), Untranslatable> {
        let Kind::Ref { size, off } = s[(r & 7) as usize] else {
            return Err(Untranslatable::Value {
                pc,
                what: "not a struct variable's address".into(),
            });
        };
        let n = (size - off).min(self.strsize as u32);
        if n == 0 {
            return Err(Untranslatable::Value {
                pc,
                what: "a string at the end of a struct variable".into(),
            });
        }
        self.string_slot(pc, at, true)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("a string in a struct variable: {why}"),
            })?;
        self.a.mov(R1, R0).mov_imm(R2, n as i32);
        self.get(R3, r);
        self.a.call(helper::PROBE_READ_KERNEL_STR);
        Ok(())
    }
}
