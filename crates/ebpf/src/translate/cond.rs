//! Strings through `?:` (and any other join of paths) in translated code: where paths that hold
//! different strings in a register meet (`x ? "big" : "small"`, a constant and `execname`, a
//! `copyinstr()` and a string variable, a string and NULL), the interpreter's register holds an
//! address either way, read by whatever uses it. The translator follows strings by where they
//! come from ([`Kind`]), so at such a join each path's string is made one kind on the edge into
//! the join: a string in the context's string scratch, its address in the register
//! ([`Kind::Scratch`]), or, when some path may hold NULL (a string variable's copy, the constant
//! 0), that address or 0 ([`Kind::VarStr`]). A constant or `execname` is copied into one scratch
//! slot the join takes (cut to `strsize` characters, as the interpreter's uses read it), a string
//! already in scratch and NULL keep their register as it is. Every user of strings then takes
//! the joined value as it takes a string variable's.
//!
//! Which joins do so is known only once every path into them has been seen, after the code of
//! the edges is emitted: a first pass finds them (a join's register is made the joined kind
//! there already, so the code after it is what the second pass translates), and the object is
//! translated again with the edges converting ([`Plan`]). Only a register read after the join
//! (live there, as DIF's data-flow says) is joined, so a stale string in a register nothing reads
//! costs nothing. A string meeting an integer (the address of a string in kernel memory, as in
//! the D library's translators: `F == 0 ? "<none>" : stringof(F->...->name)`) is joined as an
//! address on every path: each string made one in the join's scratch slot (a constant copied,
//! `execname` read), its address in the register, which the value's use reads as it reads any
//! address as a string (a fault at the use, as the interpreter's). A string meeting an `alloca()`
//! pointer or `copyin()`'s copy stays mixed ([`Mix`]): what uses it says why the clause stays in
//! dtrace.

use super::{string_scratch_width, Kind, State, Translator, Untranslatable, NREGS};
use crate::insn::{Asm, Label, R0, R1};
use dtrace_dif::instr::Instr;
use dtrace_dif::opcode::Opcode;
use std::collections::BTreeMap;

/// The joins whose edges make a register one string kind: (the join's instruction, the register)
/// and the kind.
pub(super) type Plan = BTreeMap<(usize, u8), Kind>;

/// What a register holds on the paths into a join where they differ in kind (a set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Mix(u8);

impl Mix {
    const STRING: u8 = 1;
    const NULLABLE: u8 = 2;
    const ZERO: u8 = 4;
    const INT: u8 = 8;
    const ALLOCA: u8 = 16;
    const BUFFER: u8 = 32;
    const REF: u8 = 64;

    /// What `k` is, as a set of one (or of a mix's own).
    pub(super) fn of(k: &Kind) -> Mix {
        Mix(match k {
            Kind::Int(Some(0)) => Mix::ZERO,
            Kind::Int(_) => Mix::INT,
            Kind::StrConst(_) | Kind::Execname | Kind::Scratch => Mix::STRING,
            Kind::VarStr => Mix::STRING | Mix::NULLABLE,
            Kind::Buffer(_) => Mix::BUFFER,
            Kind::Alloca => Mix::ALLOCA,
            Kind::Ref { .. } => Mix::REF,
            Kind::KernelStr => Mix::STRING | Mix::INT,
            Kind::Mixed(m) => m.0,
        })
    }

    /// Both sets.
    pub(super) fn union(self, other: Mix) -> Mix {
        Mix(self.0 | other.0)
    }

    /// The one string kind that can stand for every path: strings only (NULL, the constant 0,
    /// among them), at least one of them a string; or, where an integer meets them (the
    /// address of a string in kernel memory: `p ? stringof(p->name) : "<none>"`, as D's types
    /// say a value meeting a string is), an address on every path ([`Kind::KernelStr`]: each
    /// string made one in scratch), read as the interpreter reads its register's address where
    /// the value is used.
    fn joined(self) -> Option<Kind> {
        let strings = Mix::STRING | Mix::NULLABLE | Mix::ZERO;
        if self.0 & Mix::STRING == 0 || self.0 & !(strings | Mix::INT) != 0 {
            return None;
        }
        if self.0 & Mix::INT != 0 {
            // (Not with NULL: the interpreter compares NULL as the empty string, where a read
            // of the address faults.)
            return (self.0 & (Mix::NULLABLE | Mix::ZERO) == 0).then_some(Kind::KernelStr);
        }
        Some(if self.0 & (Mix::NULLABLE | Mix::ZERO) != 0 {
            Kind::VarStr
        } else {
            Kind::Scratch
        })
    }

    /// The kinds present, in words (`"a string and an integer"`).
    pub(super) fn describe(self) -> String {
        let words: Vec<&str> = [
            (Mix::STRING, "a string"),
            (Mix::ZERO, "the integer 0"),
            (Mix::INT, "an integer"),
            (Mix::ALLOCA, "an alloca() pointer"),
            (Mix::BUFFER, "copyin()'s copy"),
            (Mix::REF, "a struct variable's address"),
        ]
        .iter()
        .filter(|(bit, _)| self.0 & bit != 0)
        .map(|(_, w)| *w)
        .collect();
        match words.as_slice() {
            [] => "nothing".into(),
            // Kinds alike but for their sizes.
            ["copyin()'s copy"] => "copyin() copies of different sizes".into(),
            [one] => (*one).into(),
            [init @ .., last] => format!("{} and {last}", init.join(", ")),
        }
    }
}

/// The registers read before being written on some path from each instruction of `code` (bit
/// `r` for `%rr`; `%r0` is always 0 and never counts), one more entry for the end.
pub(super) fn live_registers(code: &[Instr]) -> Vec<u8> {
    let mut live = vec![0u8; code.len() + 1];
    // DIF branches only forward: one backward sweep sees every successor first.
    for pc in (0..code.len()).rev() {
        let bit = |r: u8| 1u8 << (r & 7);
        let (uses, def): (u8, Option<u8>) = match code[pc] {
            Instr::Alu { r1, r2, rd, .. } => (bit(r1) | bit(r2), Some(rd)),
            Instr::Not { r1, rd } | Instr::Mov { r1, rd } | Instr::Load { r1, rd, .. } => {
                (bit(r1), Some(rd))
            }
            Instr::Allocs { r1, rd } => (bit(r1), Some(rd)),
            Instr::Cmp { r1, r2 } | Instr::Scmp { r1, r2 } => (bit(r1) | bit(r2), None),
            Instr::Tst { r1 } => (bit(r1), None),
            Instr::Store { r1, rd, .. } => (bit(r1) | bit(rd), None),
            Instr::Copys { r1, r2, rd } => (bit(r1) | bit(r2) | bit(rd), None),
            Instr::Ret { rd } => (bit(rd), None),
            Instr::StoreVar { rs, .. } | Instr::Pushtv { rs, .. } => (bit(rs), None),
            Instr::Pushtr { r2, rs, .. } => (bit(r2) | bit(rs), None),
            Instr::LoadArray { r2, rd, .. } => (bit(r2), Some(rd)),
            Instr::Setx { rd, .. }
            | Instr::Sets { rd, .. }
            | Instr::LoadVar { rd, .. }
            | Instr::Call { rd, .. }
            | Instr::Xlate { rd, .. } => (0, Some(rd)),
            Instr::Branch { .. } | Instr::Nop | Instr::Popts | Instr::Flushts => (0, None),
        };
        let after = |t: usize| live.get(t).copied().unwrap_or(0);
        let out = match code[pc] {
            Instr::Ret { .. } => 0,
            Instr::Branch {
                op: Opcode::Ba,
                label,
            } => after(label as usize),
            Instr::Branch { label, .. } => after(label as usize) | after(pc + 1),
            _ => after(pc + 1),
        };
        let killed = def.map_or(0, bit);
        live[pc] = (uses | (out & !killed)) & !1;
    }
    live
}

/// What the translator keeps of the joins (see the module notes).
#[derive(Debug, Default)]
pub(super) struct Joins {
    /// [`live_registers`] of the object.
    live: Vec<u8>,
    /// The joins whose edges convert (found by the passes before this one).
    plan: Plan,
    /// Joins this pass found that the plan lacks.
    found: Plan,
    /// The string scratch offset each planned join copies strings to, once taken.
    slots: BTreeMap<(usize, u8), usize>,
}

impl Joins {
    /// The joins of an object whose instructions are `code`, converting as `plan` says.
    pub(super) fn new(code: &[Instr], plan: Plan) -> Joins {
        Joins {
            live: live_registers(code),
            plan,
            ..Joins::default()
        }
    }

    /// The joins found that the plan lacked: the object is to be translated again with them,
    /// unless there are none.
    pub(super) fn found(&self) -> &Plan {
        &self.found
    }

    /// The planned conversions on the edges into instruction `target`.
    fn planned(&self, target: usize) -> Vec<(u8, Kind)> {
        self.plan
            .range((target, 0)..=(target, u8::MAX))
            .map(|(&(_, r), k)| (r, k.clone()))
            .collect()
    }
}

/// Whether making `from` a joined string takes code (a copy into the join's slot).
fn copies(from: &Kind) -> bool {
    matches!(from, Kind::StrConst(_) | Kind::Execname)
}

impl Translator<'_> {
    /// The state joined at instruction `pc`: each live register that holds different strings on
    /// different paths becomes the one kind the edges make it, a join found now when the plan
    /// lacked it.
    pub(super) fn settle_join(&mut self, pc: usize, s: &mut State) {
        let live = self.joins.live.get(pc).copied().unwrap_or(0);
        for r in 1..NREGS as u8 {
            let Kind::Mixed(m) = s.regs[r as usize] else {
                continue;
            };
            let Some(k) = m.joined().filter(|_| live & (1 << r) != 0) else {
                continue;
            };
            if !self.joins.plan.contains_key(&(pc, r)) {
                self.joins.found.insert((pc, r), k.clone());
            }
            s.regs[r as usize] = k;
            s.args[r as usize] = None;
            s.sized[r as usize] = None;
        }
    }

    /// Whether the edge from state `s` into instruction `target` takes code.
    fn edge_has_code(&self, target: usize, s: &State) -> bool {
        self.joins
            .planned(target)
            .iter()
            .any(|(r, _)| copies(&s.regs[*r as usize]))
    }

    /// Makes state `s`, on the edge from instruction `pc` into `target`, what the plan says of
    /// the join there, emitting the copies it takes.
    fn convert_edge(
        &mut self,
        pc: usize,
        target: usize,
        s: &mut State,
    ) -> Result<(), Untranslatable> {
        for (r, k) in self.joins.planned(target) {
            let from = s.regs[r as usize].clone();
            if copies(&from) {
                if let Kind::StrConst(b) = &from {
                    // The interpreter compares a constant up to `strsize` bytes, one more
                    // than a copy keeps of it.
                    if b.split(|&c| c == 0).next().unwrap_or_default().len() >= self.strsize {
                        return Err(Untranslatable::Value {
                            pc,
                            what: format!(
                                "a string constant longer than strsize joined with other \
                                 strings in %r{r}"
                            ),
                        });
                    }
                }
                self.join_slot(pc, target, r)?;
                self.write_string(&from);
                self.a.mov(R1, R0);
                self.put(s, r, R1, k);
            } else if let (Kind::Int(_), Kind::KernelStr) = (&from, &k) {
                // An address the interpreter reads as a string from the kernel memory the probe
                // copied for it, nothing else.
                if !self.kernel_string_on_edge((pc, target), r) {
                    return Err(Untranslatable::Value {
                        pc,
                        what: format!(
                            "a string at an address the translator does not follow joined \
                             with other strings in %r{r}"
                        ),
                    });
                }
                s.regs[r as usize] = k;
                s.args[r as usize] = None;
                s.sized[r as usize] = None;
            } else if matches!(
                (&from, &k),
                (Kind::Scratch, Kind::VarStr)
                    | (Kind::Int(Some(0)), Kind::VarStr)
                    | (Kind::Scratch, Kind::KernelStr)
            ) {
                // Already a string in scratch, or NULL (0): the register stays as it is.
                if s.tuple
                    .as_ref()
                    .is_some_and(|t| t.contains(&super::Pushed::Reg(r)))
                {
                    s.tuple = None;
                }
                s.regs[r as usize] = k;
                s.args[r as usize] = None;
                s.sized[r as usize] = None;
            }
        }
        Ok(())
    }

    /// The slot of the join at `target` for register `r` (one per join: one edge runs), its
    /// address in R0; a `NoScratch` fault at `pc` when the scratch could not be had.
    fn join_slot(&mut self, pc: usize, target: usize, r: u8) -> Result<(), Untranslatable> {
        let width = string_scratch_width(self.strsize);
        let offset = match self.joins.slots.get(&(target, r)) {
            Some(&o) => o,
            None => {
                let o = self.scratch_slots * width;
                self.scratch_slots += 1;
                self.joins.slots.insert((target, r), o);
                o
            }
        };
        let at = self.frame.load_buf();
        self.string_slot_at(pc, offset, at, false)
            .map_err(|why| Untranslatable::Value {
                pc,
                what: format!("strings joined in %r{r}: {why}"),
            })
    }

    /// The fall-through edge from the instruction before `pc` into `pc`, a join.
    pub(super) fn fall_into(&mut self, pc: usize, s: &mut State) -> Result<(), Untranslatable> {
        self.convert_edge(pc.saturating_sub(1), pc, s)
    }

    /// The edge of a branch at `pc` to `target`: `jump` emits the jump to the label it is given
    /// (`always`: it is always taken, and nothing falls through). The state that flows to
    /// `target` is `s` made what the plan says of the join there.
    pub(super) fn branch_edge(
        &mut self,
        pc: usize,
        target: usize,
        s: &State,
        always: bool,
        jump: impl FnOnce(&mut Asm, Label),
    ) -> Result<(), Untranslatable> {
        let l = self.labels[target];
        let mut t = s.clone();
        if !self.edge_has_code(target, s) {
            jump(&mut self.a, l);
            self.convert_edge(pc, target, &mut t)?;
        } else if always {
            self.convert_edge(pc, target, &mut t)?;
            self.a.ja(l);
        } else {
            // The copies run on the taken edge only.
            let (taken, not_taken) = (self.a.label(), self.a.label());
            jump(&mut self.a, taken);
            self.a.ja(not_taken);
            self.a.bind(taken);
            self.convert_edge(pc, target, &mut t)?;
            self.a.ja(l);
            self.a.bind(not_taken);
        }
        self.flow_to(target, &t);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_name_only_the_kinds_present() {
        let m = Mix::of(&Kind::StrConst(b"a".to_vec())).union(Mix::of(&Kind::Int(None)));
        assert_eq!(m.describe(), "a string and an integer");
        let m = Mix::of(&Kind::Alloca)
            .union(Mix::of(&Kind::Int(Some(0))))
            .union(Mix::of(&Kind::Execname));
        assert_eq!(
            m.describe(),
            "a string, the integer 0 and an alloca() pointer"
        );
        assert_eq!(m.joined(), None);
        let m = Mix::of(&Kind::Buffer(4)).union(Mix::of(&Kind::Buffer(8)));
        assert_eq!(m.describe(), "copyin() copies of different sizes");
    }

    #[test]
    fn strings_join_to_scratch_and_with_null_to_a_nullable_string() {
        let a = Mix::of(&Kind::StrConst(b"a".to_vec()));
        assert_eq!(
            a.union(Mix::of(&Kind::Execname)).joined(),
            Some(Kind::Scratch)
        );
        assert_eq!(a.union(Mix::of(&Kind::VarStr)).joined(), Some(Kind::VarStr));
        assert_eq!(
            a.union(Mix::of(&Kind::Int(Some(0)))).joined(),
            Some(Kind::VarStr)
        );
        assert_eq!(Mix::of(&Kind::Int(Some(0))).joined(), None);
        // A string and an address: an address on every path.
        assert_eq!(
            a.union(Mix::of(&Kind::Int(Some(1)))).joined(),
            Some(Kind::KernelStr)
        );
        // With NULL too: mixed (the interpreter compares NULL as the empty string).
        assert_eq!(
            a.union(Mix::of(&Kind::Int(None)))
                .union(Mix::of(&Kind::Int(Some(0))))
                .joined(),
            None
        );
        assert_eq!(a.union(Mix::of(&Kind::Alloca)).joined(), None);
        assert_eq!(a.union(Mix::of(&Kind::Buffer(4))).joined(), None);
    }

    #[test]
    fn a_register_is_live_until_it_is_written() {
        // 0: sets %r1; 1: tst %r2; 2: be 4; 3: sets %r1; 4: ret %r1
        let code = [
            Instr::Sets { idx: 0, rd: 1 },
            Instr::Tst { r1: 2 },
            Instr::Branch {
                op: Opcode::Be,
                label: 4,
            },
            Instr::Sets { idx: 1, rd: 1 },
            Instr::Ret { rd: 1 },
        ];
        let live = live_registers(&code);
        assert_eq!(live, vec![0b100, 0b110, 0b10, 0, 0b10, 0]);
    }
}
