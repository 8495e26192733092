//! String-valued D variables in translated code, as the interpreter keeps them: a load copies the
//! variable's string into a slot of the context's per-CPU string scratch and the DIF register
//! holds its address there, or 0 (NULL) when the variable holds none (a dynamic variable never
//! stored or freed, a global set to NULL); a store copies a string the translator follows (one
//! built in scratch by `copyinstr()` or a load, a constant, `execname`) into the variable, cut
//! to `strsize` characters, and a store of NULL (the constant 0, or a NULL loaded) frees a
//! dynamic variable, as DTrace's `self->s = 0` does. Where the variable lives is the context's
//! business ([`ProbeContext::emit_string_load`], [`ProbeContext::emit_string_store`]).

use super::{string_scratch_width, Kind, State, StringVar, Translator, Untranslatable, COMM_LEN};
use crate::insn::{op, Size, R0, R1, R10};
use dtrace_dif::object::{DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD};
use dtrace_dif::opcode::Opcode;

impl Translator<'_> {
    /// Whether the user variable `var` that `dop` loads or stores is a string (its entry in the
    /// object's variable table says so).
    pub(super) fn is_string_var(&self, dop: Opcode, var: u16) -> bool {
        use Opcode::*;
        let scope = match dop {
            Ldts | Stts | Ldtaa | Sttaa => DIFV_SCOPE_THREAD,
            Ldls | Stls => DIFV_SCOPE_LOCAL,
            Ldgs | Stgs | Ldgaa | Stgaa => DIFV_SCOPE_GLOBAL,
            _ => return false,
        };
        self.obj
            .vartab
            .iter()
            .any(|v| v.id == u32::from(var) && v.scope == scope && v.ty.is_string())
    }

    /// A fresh slot of the string scratch for variable `name` (see [`Self::string_slot`]).
    fn scratch_slot(&mut self, pc: usize, name: &str) -> Result<(), Untranslatable> {
        let buf = self.frame.load_buf();
        self.string_slot(pc, buf, false)
            .map_err(|why| Untranslatable::Variable {
                pc,
                name: name.to_string(),
                why,
            })
    }

    /// Loads string variable `var` (D name `name`) into `rd` (see the module notes).
    pub(super) fn load_string(
        &mut self,
        pc: usize,
        s: &mut State,
        var: StringVar<'_>,
        rd: u8,
        name: String,
    ) -> Result<(), Untranslatable> {
        self.scratch_slot(pc, &name)?;
        let buf = self.frame.load_buf();
        self.ctx
            .emit_string_load(&mut self.a, var, buf)
            .map_err(|why| Untranslatable::Variable { pc, name, why })?;
        let null = self.a.label();
        self.a.mov_imm(R1, 0);
        self.a.jmp_imm(op::JEQ, R0, 0, null);
        self.a.load(Size::DW, R1, R10, buf);
        self.a.bind(null);
        self.put(s, rd, R1, Kind::VarStr);
        Ok(())
    }

    /// Stores the string in `rs` in variable `var` (D name `name`): see the module notes.
    pub(super) fn store_string(
        &mut self,
        pc: usize,
        s: &mut State,
        var: StringVar<'_>,
        rs: u8,
        name: String,
    ) -> Result<(), Untranslatable> {
        let reg = self.frame.reg(rs & 7);
        let src = match s[(rs & 7) as usize].clone() {
            // The register holds the string's address in scratch, or 0 for NULL.
            Kind::Int(Some(0)) | Kind::Scratch | Kind::VarStr => reg,
            k @ (Kind::StrConst(_) | Kind::Execname) => {
                self.scratch_slot(pc, &name)?;
                self.write_string(&k);
                self.frame.load_buf()
            }
            // A string member of a struct variable (`self->s = g.name`).
            Kind::Ref { .. } => {
                let buf = self.frame.load_buf();
                self.ref_string_at(pc, s, rs, buf)?;
                buf
            }
            // An address stored as a string (`self->s = stringof(p)`), or strings joined
            // with one.
            Kind::Int(_) | Kind::KernelStr => {
                let buf = self.frame.load_buf();
                self.kernel_string(pc, s, rs, buf)?;
                buf
            }
            _ => {
                return Err(Untranslatable::Value {
                    pc,
                    what: format!("a value stored in string {name} the translator does not follow"),
                })
            }
        };
        self.ctx
            .emit_string_store(&mut self.a, var, src)
            .map_err(|why| Untranslatable::Variable { pc, name, why })?;
        if !matches!(var, StringVar::Global(_) | StringVar::Local(_)) {
            self.dropped();
        }
        Ok(())
    }

    /// Writes constant or `execname` `k` into the string scratch slot whose address is in R0
    /// (kept there): its [`string_scratch_width`] bytes, cut to `strsize` characters as the
    /// interpreter keeps a string stored, NUL-terminated and zero-padded (any other kind: it
    /// writes nothing). Uses R1.
    pub(super) fn write_string(&mut self, k: &Kind) {
        let width = string_scratch_width(self.strsize);
        match k {
            Kind::StrConst(b) => {
                let mut bytes: Vec<u8> = b.split(|&c| c == 0).next().unwrap_or_default().into();
                // The interpreter keeps `strsize` characters (this strsize counts the NUL).
                bytes.truncate(self.strsize.saturating_sub(1));
                bytes.resize(width, 0);
                for (i, chunk) in bytes.chunks(8).enumerate() {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(chunk);
                    match u64::from_le_bytes(w) {
                        0 => self.a.store_imm(Size::DW, R0, 8 * i as i16, 0),
                        v => self.a.ld_imm64(R1, v).store(Size::DW, R0, 8 * i as i16, R1),
                    };
                }
            }
            Kind::Execname => {
                for i in (0..width as i16).step_by(8) {
                    self.a.store_imm(Size::DW, R0, i, 0);
                }
                // `execname` is NUL-terminated in its COMM_LEN bytes; strsize may cut it.
                let n = COMM_LEN.min(self.strsize.saturating_sub(1));
                let comm = self.frame.comm();
                let (step, size) = if n == COMM_LEN {
                    (8, Size::DW)
                } else {
                    (1, Size::B)
                };
                for i in (0..n as i16).step_by(step) {
                    self.a.load(size, R1, R10, comm + i).store(size, R0, i, R1);
                }
            }
            _ => {}
        }
    }
}
