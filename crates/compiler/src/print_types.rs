//! The type descriptions of `print()` values: a compiler type (from a D declaration, D's built-ins or
//! the kernel's BTF) turned into the program's [`PrintType`] table, which the consumer walks to print
//! the recorded bytes as DTrace's `dt_print` does. Names are kept as DTrace prints them (typedef names,
//! `"struct "` for an anonymous struct); shapes are resolved; bit-fields become integer entries of
//! their width, as in CTF.

use std::collections::HashMap;

use dtrace_dif::program::{PrintKind, PrintMember, PrintType};

use crate::ast::SouKind;
use crate::check::Checker;
use crate::types::{TypeId, TypeKind};

/// Nesting deeper than this (never reached by real C types) is described as a forward declaration.
const MAX_DEPTH: u32 = 64;

/// The program's table of print types, with the entries already made.
#[derive(Debug, Default)]
pub struct PrintTypes {
    /// The table (becomes `Program::print_types`).
    pub table: Vec<PrintType>,
    /// Entries by compiler type and bit-field width (0 when not a bit-field).
    memo: HashMap<(TypeId, u16), u32>,
}

/// The name DTrace's `ctf_type_name` gives a type: anonymous structs, unions and enums have an
/// empty tag (`"struct "`), a pointer to a function is spelled as the function (`"int (*)()"`), and
/// an array of arrays lists its dimensions outermost first (`"int [2][3]"`).
fn printed_name(ck: &Checker<'_>, ty: TypeId) -> String {
    let name = match ck.types.kind(ty) {
        TypeKind::Pointer(to) if matches!(ck.types.kind(*to), TypeKind::Function(..)) => {
            ck.types.name(*to)
        }
        TypeKind::Array(..) => {
            let mut dims = String::new();
            let mut t = ty;
            while let TypeKind::Array(e, n) = ck.types.kind(t) {
                dims.push_str(&format!("[{n}]"));
                t = *e;
            }
            let base = printed_name(ck, t);
            let sep = if base.ends_with('*') { "" } else { " " };
            return format!("{base}{sep}{dims}");
        }
        _ => ck.types.name(ty),
    };
    name.replace("<anon>", "")
}

impl Checker<'_> {
    /// The index in the program's print-type table of the type of a `print()` value.
    pub fn print_type_index(&mut self, ty: TypeId) -> u32 {
        self.print_type(ty, 0, 0)
    }

    /// The entry of `ty` (as a bit-field `width` bits wide when `width` is not 0).
    fn print_type(&mut self, ty: TypeId, width: u16, depth: u32) -> u32 {
        if let Some(i) = self.print_types.memo.get(&(ty, width)) {
            return *i;
        }
        self.types.complete(ty);
        let r = self.types.resolve(ty);
        let name = printed_name(self, ty);
        let mut size = self.types.size(ty);
        let kind = match self.types.kind(r).clone() {
            _ if depth > MAX_DEPTH => PrintKind::Forward,
            TypeKind::Int { signed, size: s } => {
                let bits = if width != 0 {
                    // CTF sizes a bit-field's integer type from its width
                    size = u64::from(width).div_ceil(8).next_power_of_two();
                    width
                } else {
                    (s * 8) as u16
                };
                PrintKind::Integer {
                    bits,
                    signed,
                    char: signed && bits == 8,
                }
            }
            TypeKind::Float { .. } => PrintKind::Float,
            TypeKind::String => {
                let c = self.basic.char;
                let element = self.print_type(c, 0, depth + 1);
                PrintKind::Array {
                    element,
                    count: self.strsize,
                }
            }
            TypeKind::Pointer(to) => PrintKind::Pointer {
                function: matches!(self.types.rkind(to), TypeKind::Function(..)),
            },
            TypeKind::Array(e, n) => PrintKind::Array {
                element: self.print_type(e, 0, depth + 1),
                count: n,
            },
            TypeKind::Sou {
                kind,
                members: Some(ms),
                ..
            } => {
                let mut out = Vec::with_capacity(ms.len());
                for m in ms {
                    let (offset_bits, w) = match m.bits {
                        Some(b) => (
                            u64::from(m.offset) * 8 + u64::from(b.shift),
                            u16::from(b.width),
                        ),
                        None => (u64::from(m.offset) * 8, 0),
                    };
                    out.push(PrintMember {
                        name: m.name.clone(),
                        ty: self.print_type(m.ty, w, depth + 1),
                        offset_bits,
                    });
                }
                if kind == SouKind::Struct {
                    PrintKind::Struct(out)
                } else {
                    PrintKind::Union(out)
                }
            }
            TypeKind::Sou { members: None, .. } | TypeKind::Void | TypeKind::Typedef(_) => {
                PrintKind::Forward
            }
            TypeKind::Enum { values } => PrintKind::Enum(values),
            TypeKind::Function(..) => PrintKind::Function,
        };
        let i = self.print_types.table.len() as u32;
        self.print_types.table.push(PrintType { name, size, kind });
        self.print_types.memo.insert((ty, width), i);
        i
    }
}
